package nn

import (
	"fmt"
	"math"
)

// BatchNorm normalises each channel ([C, H, W] inputs) or feature ([F]
// inputs) with the batch's mean and variance while training, and with
// running averages of them in evaluation, then scales and shifts it:
// y = γ·(x-μ)/√(σ²+ε) + β. The running averages follow PyTorch:
// r ← (1-m)·r + m·batch, with the unbiased variance, m = Momentum.
//
// Each replica normalises with its own slice's statistics (as PyTorch's
// DistributedDataParallel does without SyncBatchNorm); the running averages
// are buffers, averaged across replicas when they are synchronised.
type BatchNorm struct {
	C               int
	Eps, Momentum   float64
	Gamma, Beta     *Param
	RunMean, RunVar *Param
	xhat, y, dx     *Tensor
	invStd          []float32
}

// NewBatchNorm returns batch normalisation over c channels or features
// (ε = 1e-5, momentum 0.1, as PyTorch).
func NewBatchNorm(c int) *BatchNorm {
	return &BatchNorm{C: c, Eps: 1e-5, Momentum: 0.1,
		Gamma: newParam("gamma", false, c), Beta: newParam("beta", false, c),
		RunMean: newBuffer("running_mean", c), RunVar: newBuffer("running_var", c)}
}

func (l *BatchNorm) Name() string { return fmt.Sprintf("batch_norm %d", l.C) }

func (l *BatchNorm) OutShape(in []int) ([]int, error) {
	if len(in) == 0 || in[0] != l.C || (len(in) != 1 && len(in) != 3) {
		return nil, shapeErr(l, in, fmt.Sprintf("[%d H W] or [%d]", l.C, l.C))
	}
	return in, nil
}

func (l *BatchNorm) Params() []*Param { return []*Param{l.Gamma, l.Beta, l.RunMean, l.RunVar} }

func (l *BatchNorm) init(uint64, int) {
	for i := range l.C {
		l.Gamma.W[i], l.Beta.W[i], l.RunMean.W[i], l.RunVar.W[i] = 1, 0, 0, 1
	}
}

// plane is the number of values per channel per sample.
func plane(x *Tensor) int { return x.PerSample() / x.Shape[1] }

func (l *BatchNorm) Forward(ctx *Context, x *Tensor) *Tensor {
	n, hw := x.N(), plane(x)
	l.y = reuse(l.y, x.Shape...)
	l.xhat = reuse(l.xhat, x.Shape...)
	if cap(l.invStd) < l.C {
		l.invStd = make([]float32, l.C)
	}
	l.invStd = l.invStd[:l.C]
	cnt := float64(n * hw)
	// Channels are independent: each worker takes whole channels.
	ctx.Pool.Run(l.C, func(lo, hi, _ int) {
		for c := lo; c < hi; c++ {
			var mean, variance float64
			if ctx.Train {
				var s float64
				for i := range n {
					for _, v := range x.Data[(i*l.C+c)*hw : (i*l.C+c+1)*hw] {
						s += float64(v)
					}
				}
				mean = s / cnt
				var ss float64
				for i := range n {
					for _, v := range x.Data[(i*l.C+c)*hw : (i*l.C+c+1)*hw] {
						d := float64(v) - mean
						ss += d * d
					}
				}
				variance = ss / cnt
				m := l.Momentum
				unbiased := variance
				if cnt > 1 {
					unbiased = ss / (cnt - 1)
				}
				l.RunMean.W[c] = float32((1-m)*float64(l.RunMean.W[c]) + m*mean)
				l.RunVar.W[c] = float32((1-m)*float64(l.RunVar.W[c]) + m*unbiased)
			} else {
				mean, variance = float64(l.RunMean.W[c]), float64(l.RunVar.W[c])
			}
			inv := 1 / math.Sqrt(variance+l.Eps)
			l.invStd[c] = float32(inv)
			g, b := l.Gamma.W[c], l.Beta.W[c]
			mf, invf := float32(mean), float32(inv)
			for i := range n {
				off := (i*l.C + c) * hw
				for j, v := range x.Data[off : off+hw] {
					xh := (v - mf) * invf
					l.xhat.Data[off+j] = xh
					l.y.Data[off+j] = g*xh + b
				}
			}
		}
	})
	return l.y
}

func (l *BatchNorm) Backward(ctx *Context, dy *Tensor) *Tensor {
	n, hw := dy.N(), plane(dy)
	l.dx = reuse(l.dx, dy.Shape...)
	cnt := float32(n * hw)
	ctx.Pool.Run(l.C, func(lo, hi, _ int) {
		for c := lo; c < hi; c++ {
			var sdy, sdyx float64
			for i := range n {
				off := (i*l.C + c) * hw
				xh := l.xhat.Data[off : off+hw]
				for j, g := range dy.Data[off : off+hw] {
					sdy += float64(g)
					sdyx += float64(g) * float64(xh[j])
				}
			}
			l.Gamma.G64[c] += sdyx
			l.Beta.G64[c] += sdy
			// dx = γ/σ · (dy - mean(dy) - x̂·mean(dy·x̂)) while training;
			// in evaluation the statistics are constants: dx = γ/σ · dy.
			k := l.Gamma.W[c] * l.invStd[c]
			mdy, mdyx := float32(sdy)/cnt, float32(sdyx)/cnt
			if !ctx.Train {
				mdy, mdyx = 0, 0
			}
			for i := range n {
				off := (i*l.C + c) * hw
				xh := l.xhat.Data[off : off+hw]
				for j, g := range dy.Data[off : off+hw] {
					l.dx.Data[off+j] = k * (g - mdy - xh[j]*mdyx)
				}
			}
		}
	})
	return l.dx
}

// Residual adds a shortcut around a body: y = body(x) + shortcut(x), the
// shortcut being the identity when it has no layers (a ResNet block, with
// the ReLU after it as a layer of its own).
type Residual struct {
	Body, Shortcut []Layer
	y, dx          *Tensor
}

func (l *Residual) Name() string {
	return fmt.Sprintf("residual (%d layers, shortcut %d)", len(l.Body), len(l.Shortcut))
}

func (l *Residual) OutShape(in []int) ([]int, error) {
	a, err := shapes(l.Body, in)
	if err != nil {
		return nil, err
	}
	b, err := shapes(l.Shortcut, in)
	if err != nil {
		return nil, err
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return nil, fmt.Errorf("trainer: residual: body gives %v, shortcut %v", a, b)
	}
	return a, nil
}

func shapes(ls []Layer, in []int) ([]int, error) {
	for _, l := range ls {
		out, err := l.OutShape(in)
		if err != nil {
			return nil, err
		}
		in = out
	}
	return in, nil
}

func (l *Residual) Params() []*Param {
	var ps []*Param
	for _, x := range append(append([]Layer(nil), l.Body...), l.Shortcut...) {
		ps = append(ps, x.Params()...)
	}
	return ps
}

func (l *Residual) init(seed uint64, index int) {
	for i, x := range l.Body {
		x.init(seed, index*1000+i)
	}
	for i, x := range l.Shortcut {
		x.init(seed, index*1000+500+i)
	}
}

func (l *Residual) Forward(ctx *Context, x *Tensor) *Tensor {
	a, s := x, x
	for _, b := range l.Body {
		a = b.Forward(ctx, a)
	}
	for _, b := range l.Shortcut {
		s = b.Forward(ctx, s)
	}
	l.y = reuse(l.y, a.Shape...)
	for i := range a.Data {
		l.y.Data[i] = a.Data[i] + s.Data[i]
	}
	return l.y
}

func (l *Residual) Backward(ctx *Context, dy *Tensor) *Tensor {
	da, ds := dy, dy
	for i := len(l.Body) - 1; i >= 0; i-- {
		da = l.Body[i].Backward(ctx, da)
	}
	for i := len(l.Shortcut) - 1; i >= 0; i-- {
		ds = l.Shortcut[i].Backward(ctx, ds)
	}
	l.dx = reuse(l.dx, da.Shape...)
	for i := range da.Data {
		l.dx.Data[i] = da.Data[i] + ds.Data[i]
	}
	return l.dx
}
