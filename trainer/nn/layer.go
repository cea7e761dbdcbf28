package nn

import (
	"fmt"
	"math"

	"github.com/pipefeed/pipe/internal/splitmix"
)

// Param is a layer's parameter and its gradient, or, for a Buffer, state
// that is not trained (batch norm's running statistics).
type Param struct {
	Name  string
	Shape []int
	W     []float32
	// G is dL/dW for the optimiser. Layers accumulate into G64, in float64,
	// and Model.Grads rounds it into G: summed in float64, a gradient is
	// the same float32 whatever order its terms arrive in, so splitting a
	// batch among replicas does not change a bit of it.
	G   []float32
	G64 []float64
	// Decay says weight decay applies (weights, not biases or batch-norm
	// scales and shifts).
	Decay bool
	// Buffer marks state without a gradient, averaged across replicas when
	// they are synchronised.
	Buffer bool
}

// newParam and newBuffer declare a parameter or buffer: its values are
// allocated when its model is built (initLayer), once the model's size has
// been checked against memory.
func newParam(name string, decay bool, shape ...int) *Param {
	return &Param{Name: name, Shape: shape, Decay: decay}
}

func newBuffer(name string, n int) *Param {
	return &Param{Name: name, Shape: []int{n}, Buffer: true}
}

// alloc allocates p's values (and a parameter's gradients), once.
func (p *Param) alloc() {
	if p.W != nil {
		return
	}
	n := prod(p.Shape)
	p.W = make([]float32, n)
	if !p.Buffer {
		p.G, p.G64 = make([]float32, n), make([]float64, n)
	}
}

// initLayer allocates l's parameters and initialises them from the seed;
// index numbers l in its model.
func initLayer(l Layer, seed uint64, index int) {
	for _, p := range l.Params() {
		p.alloc()
	}
	l.init(seed, index)
}

// Context is what the layers of one step share.
type Context struct {
	// Train selects training behaviour: dropout masks, batch statistics.
	Train bool
	Pool  *Pool
	// Seed, Step and Samples key the random masks of dropout: sample n of
	// the batch is global sample Samples[n] of the run, so a sample gets the
	// same mask whichever replica and slice it lands in.
	Seed    uint64
	Step    int64
	Samples []int
	// Smoothing is the loss's label smoothing, for an Accelerator, which
	// computes the loss itself.
	Smoothing float64
}

// Layer is one differentiable operation on a batch. Forward may keep its
// input and output for Backward, which must follow the matching Forward;
// Backward adds to the parameters' gradients and returns dL/dx. Shapes are
// per sample (without the batch dimension).
type Layer interface {
	Name() string
	OutShape(in []int) ([]int, error)
	Forward(ctx *Context, x *Tensor) *Tensor
	Backward(ctx *Context, dy *Tensor) *Tensor
	Params() []*Param
	// init sets the parameters from the seed; index numbers the layer in
	// its model, so that every layer draws its own values.
	init(seed uint64, index int)
}

// uniform returns a float in [0, 1) keyed by the four values.
func uniform(seed uint64, a, b, c int64) float64 {
	x := splitmix.Mix(seed ^ splitmix.Mix(uint64(a)^splitmix.Mix(uint64(b)^splitmix.Mix(uint64(c)))))
	return float64(x>>11) / (1 << 53)
}

// normal returns a standard normal value keyed by the four values
// (Box-Muller on two keyed uniforms).
func normal(seed uint64, a, b, c int64) float64 {
	u1 := uniform(seed, a, b, 2*c)
	u2 := uniform(seed, a, b, 2*c+1)
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// heInit fills w with N(0, 2/fanIn) values (Kaiming normal, for layers
// followed by ReLU).
func heInit(w []float32, fanIn int, seed uint64, index int) {
	std := math.Sqrt(2 / float64(fanIn))
	for i := range w {
		w[i] = float32(std * normal(seed, int64(index), 0, int64(i)))
	}
}

func shapeErr(l Layer, in []int, want string) error {
	return fmt.Errorf("trainer: %s: input %v, want %s", l.Name(), in, want)
}

// Conv2D is a 2-D convolution with bias: Out filters of In×K×K, stride and
// zero padding. The weights are [Out, In, K, K] (as PyTorch stores them),
// so a filter is a row of In·K·K values.
type Conv2D struct {
	In, Out, K, Stride, Pad int
	W, B                    *Param

	x, y, dx *Tensor
	cols     [][]float32 // per worker: im2col of one sample
	dcols    [][]float32
	gs       [][]float32 // per worker: one sample's weight gradient
	gw, gb   [][]float64 // per worker: gradient partial sums
}

// NewConv2D returns a convolution; stride is at least 1.
func NewConv2D(in, out, k, stride, pad int) *Conv2D {
	l := newConv(in, out, k, stride, pad)
	l.B = newParam("bias", false, out)
	return l
}

// NewConv2DNoBias returns a convolution without bias, for one followed by
// batch norm, whose shift makes a bias redundant (its gradient is zero).
func NewConv2DNoBias(in, out, k, stride, pad int) *Conv2D { return newConv(in, out, k, stride, pad) }

func newConv(in, out, k, stride, pad int) *Conv2D {
	return &Conv2D{In: in, Out: out, K: k, Stride: max(stride, 1), Pad: pad, W: newParam("weight", true, out, in, k, k)}
}

func (l *Conv2D) Name() string {
	return fmt.Sprintf("conv2d %d→%d k=%d stride=%d pad=%d", l.In, l.Out, l.K, l.Stride, l.Pad)
}

func (l *Conv2D) out(h, w int) (int, int) {
	return (h+2*l.Pad-l.K)/l.Stride + 1, (w+2*l.Pad-l.K)/l.Stride + 1
}

func (l *Conv2D) OutShape(in []int) ([]int, error) {
	if len(in) != 3 || in[0] != l.In {
		return nil, shapeErr(l, in, fmt.Sprintf("[%d H W]", l.In))
	}
	ho, wo := l.out(in[1], in[2])
	if ho < 1 || wo < 1 {
		return nil, shapeErr(l, in, "an image at least as large as the kernel")
	}
	return []int{l.Out, ho, wo}, nil
}

func (l *Conv2D) Params() []*Param {
	if l.B == nil {
		return []*Param{l.W}
	}
	return []*Param{l.W, l.B}
}

func (l *Conv2D) init(seed uint64, index int) {
	heInit(l.W.W, l.In*l.K*l.K, seed, index)
	if l.B != nil {
		clear(l.B.W)
	}
}

// scratch sizes the per-worker buffers.
func (l *Conv2D) scratch(p *Pool, cols int) {
	for len(l.cols) < p.Workers() {
		l.cols = append(l.cols, nil)
		l.dcols = append(l.dcols, nil)
		l.gs = append(l.gs, make([]float32, len(l.W.W)))
		l.gw = append(l.gw, make([]float64, len(l.W.W)))
		l.gb = append(l.gb, make([]float64, l.Out))
	}
	for w := range p.Workers() {
		if cap(l.cols[w]) < cols {
			l.cols[w] = make([]float32, cols)
			l.dcols[w] = make([]float32, cols)
		}
	}
}

// direct reports whether the input is its own im2col (1×1, stride 1, no
// padding).
func (l *Conv2D) direct() bool { return l.K == 1 && l.Stride == 1 && l.Pad == 0 }

func (l *Conv2D) Forward(ctx *Context, x *Tensor) *Tensor {
	n, h, w := x.Shape[0], x.Shape[2], x.Shape[3]
	ho, wo := l.out(h, w)
	l.x = x
	l.y = reuse(l.y, n, l.Out, ho, wo)
	kk := l.In * l.K * l.K
	l.scratch(ctx.Pool, kk*ho*wo)
	wm := M(l.W.W, l.Out, kk)
	ctx.Pool.Run(n, func(lo, hi, wk int) {
		cols := l.cols[wk][:kk*ho*wo]
		for i := lo; i < hi; i++ {
			xi := x.Data[i*l.In*h*w : (i+1)*l.In*h*w]
			src := cols
			if l.direct() {
				src = xi
			} else {
				im2col(cols, xi, l.In, h, w, l.K, l.Stride, l.Pad, ho, wo)
			}
			yi := l.y.Data[i*l.Out*ho*wo : (i+1)*l.Out*ho*wo]
			ctx.Pool.gemm(wk, M(yi, l.Out, ho*wo), wm, M(src, kk, ho*wo), false)
			if l.B == nil {
				continue
			}
			for o := range l.Out {
				b := l.B.W[o]
				row := yi[o*ho*wo : (o+1)*ho*wo]
				for j := range row {
					row[j] += b
				}
			}
		}
	})
	return l.y
}

func (l *Conv2D) Backward(ctx *Context, dy *Tensor) *Tensor {
	x := l.x
	n, h, w := x.Shape[0], x.Shape[2], x.Shape[3]
	ho, wo := dy.Shape[2], dy.Shape[3]
	kk := l.In * l.K * l.K
	l.dx = reuse(l.dx, x.Shape...)
	wm := M(l.W.W, l.Out, kk)
	chunks := (n + gradChunk - 1) / gradChunk
	workers := min(ctx.Pool.Workers(), chunks)
	ctx.Pool.Run(chunks, func(clo, chi, wk int) {
		gw, gb, gs := l.gw[wk], l.gb[wk], l.gs[wk]
		clear(gw)
		clear(gb)
		colsT, dcols := l.cols[wk][:kk*ho*wo], l.dcols[wk][:kk*ho*wo]
		for i := clo * gradChunk; i < min(chi*gradChunk, n); i++ {
			xi := x.Data[i*l.In*h*w : (i+1)*l.In*h*w]
			dxi := l.dx.Data[i*l.In*h*w : (i+1)*l.In*h*w]
			dyi := M(dy.Data[i*l.Out*ho*wo:(i+1)*l.Out*ho*wo], l.Out, ho*wo)
			// dW += dy·colsᵀ, with colsᵀ built directly (patches as rows),
			// so neither operand needs a transposing pack. A chunk's
			// samples are summed in float32, the chunks in float64.
			src := M(xi, kk, ho*wo).Tr()
			if !l.direct() {
				im2colT(colsT, xi, l.In, h, w, l.K, l.Stride, l.Pad, ho, wo)
				src = M(colsT, ho*wo, kk)
			}
			first := i%gradChunk == 0
			ctx.Pool.gemm(wk, M(gs, l.Out, kk), dyi, src, !first)
			if last := i%gradChunk == gradChunk-1 || i == n-1; last {
				for j, v := range gs {
					gw[j] += float64(v)
				}
			}
			for o := range l.Out {
				var s float32
				for _, v := range dyi.Data[o*ho*wo : (o+1)*ho*wo] {
					s += v
				}
				gb[o] += float64(s)
			}
			// dcols = Wᵀ·dy, folded back into dx.
			if l.direct() {
				ctx.Pool.gemm(wk, M(dxi, kk, ho*wo), wm.Tr(), dyi, false)
				continue
			}
			ctx.Pool.gemm(wk, M(dcols, kk, ho*wo), wm.Tr(), dyi, false)
			col2im(dxi, dcols, l.In, h, w, l.K, l.Stride, l.Pad, ho, wo)
		}
	})
	// Partial sums in worker order: the result depends on the worker count
	// only.
	for wk := range workers {
		for j, v := range l.gw[wk] {
			l.W.G64[j] += v
		}
		if l.B == nil {
			continue
		}
		for j, v := range l.gb[wk] {
			l.B.G64[j] += v
		}
	}
	return l.dx
}

// im2colT writes im2col's matrix transposed: row oy·Wo+ox holds the patch
// at (oy, ox), its values in the order (c, ky, kx).
func im2colT(colsT, x []float32, c, h, w, k, s, p, ho, wo int) {
	kk := c * k * k
	for oy := range ho {
		for ox := range wo {
			row := colsT[(oy*wo+ox)*kk : (oy*wo+ox+1)*kk]
			y0, x0 := oy*s-p, ox*s-p
			inside := y0 >= 0 && x0 >= 0 && y0+k <= h && x0+k <= w
			if inside && k == 3 {
				// The common 3×3 patch inside the image: nine moves per
				// channel, with the bounds checked once per row.
				for ci := range c {
					b := ci*h*w + y0*w + x0
					r0, r1, r2 := x[b:b+3:b+3], x[b+w:b+w+3:b+w+3], x[b+2*w:b+2*w+3:b+2*w+3]
					d := row[9*ci : 9*ci+9 : 9*ci+9]
					d[0], d[1], d[2] = r0[0], r0[1], r0[2]
					d[3], d[4], d[5] = r1[0], r1[1], r1[2]
					d[6], d[7], d[8] = r2[0], r2[1], r2[2]
				}
				continue
			}
			j := 0
			for ci := range c {
				plane := x[ci*h*w : (ci+1)*h*w]
				for ky := range k {
					iy := y0 + ky
					if inside {
						// Element by element: for 3×3 kernels a copy call
						// costs more than the three moves.
						src := plane[iy*w+x0 : iy*w+x0+k]
						dst := row[j : j+k]
						for q, v := range src {
							dst[q] = v
						}
						j += k
						continue
					}
					for kx := range k {
						ix := x0 + kx
						if iy >= 0 && iy < h && ix >= 0 && ix < w {
							row[j] = plane[iy*w+ix]
						} else {
							row[j] = 0
						}
						j++
					}
				}
			}
		}
	}
}

// im2col writes the K×K patches of one sample x [C, H, W] as the columns of
// cols [C·K·K, Ho·Wo]: row (c·K+ky)·K+kx, column oy·Wo+ox holds
// x[c, oy·s-p+ky, ox·s-p+kx], or 0 outside the image.
func im2col(cols, x []float32, c, h, w, k, s, p, ho, wo int) {
	for ci := range c {
		plane := x[ci*h*w : (ci+1)*h*w]
		for ky := range k {
			for kx := range k {
				row := cols[((ci*k+ky)*k+kx)*ho*wo : ((ci*k+ky)*k+kx+1)*ho*wo]
				for oy := range ho {
					iy := oy*s - p + ky
					out := row[oy*wo : (oy+1)*wo]
					if iy < 0 || iy >= h {
						clear(out)
						continue
					}
					src := plane[iy*w : (iy+1)*w]
					if s == 1 {
						// ix = ox - p + kx: zeros, a contiguous run, zeros.
						lo := max(0, p-kx)
						hi := min(wo, w+p-kx)
						clear(out[:lo])
						if hi > lo {
							copy(out[lo:hi], src[lo-p+kx:hi-p+kx])
						} else {
							hi = lo
						}
						clear(out[hi:])
						continue
					}
					for ox := range wo {
						ix := ox*s - p + kx
						if ix < 0 || ix >= w {
							out[ox] = 0
						} else {
							out[ox] = src[ix]
						}
					}
				}
			}
		}
	}
}

// col2im is im2col's adjoint: it sets dx [C, H, W] to the sum, over every
// patch position, of the column values that im2col took from each pixel.
func col2im(dx, cols []float32, c, h, w, k, s, p, ho, wo int) {
	clear(dx)
	for ci := range c {
		plane := dx[ci*h*w : (ci+1)*h*w]
		for ky := range k {
			for kx := range k {
				row := cols[((ci*k+ky)*k+kx)*ho*wo : ((ci*k+ky)*k+kx+1)*ho*wo]
				// Columns ox with 0 ≤ ox·s-p+kx < w.
				lo := max(0, (p-kx+s-1)/s)
				hi := min(wo, (w-1+p-kx)/s+1)
				if hi <= lo {
					continue
				}
				for oy := range ho {
					iy := oy*s - p + ky
					if iy < 0 || iy >= h {
						continue
					}
					in := row[oy*wo+lo : oy*wo+hi]
					if s == 1 {
						dst := plane[iy*w+lo-p+kx : iy*w+hi-p+kx]
						for j, v := range in {
							dst[j] += v
						}
						continue
					}
					base := iy*w + lo*s - p + kx
					for j, v := range in {
						plane[base+j*s] += v
					}
				}
			}
		}
	}
}

// Dense is a fully connected layer with bias: y = x·Wᵀ + b, W [Out, In]
// (as PyTorch's Linear stores it).
type Dense struct {
	In, Out int
	W, B    *Param

	x, y, dx *Tensor
	gs       []float32 // one chunk's weight gradient
}

// gradChunk is the number of samples whose weight-gradient terms are
// summed in float32 before the chunks are added in float64. Chunks start at
// multiples of it, so a replica whose batch is a multiple of it computes
// exactly the chunks a single device computes for the same samples, and the
// float64 sums round to the same float32 gradients.
const gradChunk = 16

// NewDense returns a fully connected layer.
func NewDense(in, out int) *Dense {
	return &Dense{In: in, Out: out, W: newParam("weight", true, out, in), B: newParam("bias", false, out)}
}

func (l *Dense) Name() string { return fmt.Sprintf("dense %d→%d", l.In, l.Out) }

func (l *Dense) OutShape(in []int) ([]int, error) {
	if prod(in) != l.In || len(in) != 1 {
		return nil, shapeErr(l, in, fmt.Sprintf("[%d] (flatten first)", l.In))
	}
	return []int{l.Out}, nil
}

func (l *Dense) Params() []*Param { return []*Param{l.W, l.B} }

func (l *Dense) init(seed uint64, index int) {
	heInit(l.W.W, l.In, seed, index)
	clear(l.B.W)
}

func (l *Dense) Forward(ctx *Context, x *Tensor) *Tensor {
	n := x.Shape[0]
	l.x = x
	l.y = reuse(l.y, n, l.Out)
	ctx.Pool.parGemm(M(l.y.Data, n, l.Out), M(x.Data, n, l.In), M(l.W.W, l.Out, l.In).Tr(), false)
	for i := range n {
		row := l.y.Data[i*l.Out : (i+1)*l.Out]
		for j, b := range l.B.W {
			row[j] += b
		}
	}
	return l.y
}

func (l *Dense) Backward(ctx *Context, dy *Tensor) *Tensor {
	n := dy.Shape[0]
	l.dx = reuse(l.dx, l.x.Shape...)
	dym := M(dy.Data, n, l.Out)
	// dW = dyᵀ·x chunk by chunk, each GEMM's rows shared among the
	// workers (each row has one owner, so no sum depends on the worker
	// count), the chunks added in float64.
	if len(l.gs) < len(l.W.W) {
		l.gs = make([]float32, len(l.W.W))
	}
	for c0 := 0; c0 < n; c0 += gradChunk {
		c1 := min(c0+gradChunk, n)
		ctx.Pool.parGemm(M(l.gs, l.Out, l.In), dym.rows(c0, c1).Tr(), M(l.x.Data[c0*l.In:c1*l.In], c1-c0, l.In), false)
		g := l.W.G64
		for j, v := range l.gs[:len(g)] {
			g[j] += float64(v)
		}
	}
	for i := range n {
		for j, v := range dy.Data[i*l.Out : (i+1)*l.Out] {
			l.B.G64[j] += float64(v)
		}
	}
	ctx.Pool.parGemm(M(l.dx.Data, n, l.In), dym, M(l.W.W, l.Out, l.In), false)
	return l.dx
}

// ReLU is max(x, 0).
type ReLU struct{ y, dx *Tensor }

func (l *ReLU) Name() string                     { return "relu" }
func (l *ReLU) OutShape(in []int) ([]int, error) { return in, nil }
func (l *ReLU) Params() []*Param                 { return nil }
func (l *ReLU) init(uint64, int)                 {}

func (l *ReLU) Forward(ctx *Context, x *Tensor) *Tensor {
	l.y = reuse(l.y, x.Shape...)
	for i, v := range x.Data {
		l.y.Data[i] = max(v, 0)
	}
	return l.y
}

func (l *ReLU) Backward(ctx *Context, dy *Tensor) *Tensor {
	l.dx = reuse(l.dx, dy.Shape...)
	y := l.y.Data[:len(dy.Data)]
	dx := l.dx.Data[:len(dy.Data)]
	for i, v := range dy.Data {
		// Branch-free: the sign of y is unpredictable. y is never -0 (the
		// forward pass writes max(v, 0)), so y > 0 ⇔ its bits, as an int32,
		// are positive.
		keep := ^((int32(math.Float32bits(y[i])) - 1) >> 31)
		dx[i] = math.Float32frombits(math.Float32bits(v) & uint32(keep))
	}
	return l.dx
}

// MaxPool2D takes the maximum over K×K windows, Stride apart (no padding;
// a partial window at the edge is dropped, as in Keras and PyTorch).
type MaxPool2D struct {
	K, Stride int

	in    []int
	y, dx *Tensor
	arg   []int32 // per output: the index of its maximum within the sample
}

// NewMaxPool2D returns a max pool; stride 0 means K.
func NewMaxPool2D(k, stride int) *MaxPool2D {
	if stride == 0 {
		stride = k
	}
	return &MaxPool2D{K: k, Stride: stride}
}

func (l *MaxPool2D) Name() string { return fmt.Sprintf("maxpool k=%d stride=%d", l.K, l.Stride) }

func (l *MaxPool2D) OutShape(in []int) ([]int, error) {
	if len(in) != 3 || in[1] < l.K || in[2] < l.K {
		return nil, shapeErr(l, in, fmt.Sprintf("[C H W] with H, W ≥ %d", l.K))
	}
	return []int{in[0], (in[1]-l.K)/l.Stride + 1, (in[2]-l.K)/l.Stride + 1}, nil
}

func (l *MaxPool2D) Params() []*Param { return nil }
func (l *MaxPool2D) init(uint64, int) {}

func (l *MaxPool2D) Forward(ctx *Context, x *Tensor) *Tensor {
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	ho, wo := (h-l.K)/l.Stride+1, (w-l.K)/l.Stride+1
	l.in = append(l.in[:0], x.Shape...)
	l.y = reuse(l.y, n, c, ho, wo)
	if cap(l.arg) < len(l.y.Data) {
		l.arg = make([]int32, len(l.y.Data))
	}
	l.arg = l.arg[:len(l.y.Data)]
	ctx.Pool.Run(n*c, func(lo, hi, _ int) {
		for p := lo; p < hi; p++ {
			plane := x.Data[p*h*w : (p+1)*h*w]
			for oy := range ho {
				for ox := range wo {
					best, bi := float32(math.Inf(-1)), 0
					for ky := range l.K {
						row := (oy*l.Stride + ky) * w
						for kx := range l.K {
							i := row + ox*l.Stride + kx
							if v := plane[i]; v > best {
								best, bi = v, i
							}
						}
					}
					o := (p*ho+oy)*wo + ox
					l.y.Data[o], l.arg[o] = best, int32(bi)
				}
			}
		}
	})
	return l.y
}

func (l *MaxPool2D) Backward(ctx *Context, dy *Tensor) *Tensor {
	h, w := l.in[2], l.in[3]
	l.dx = reuse(l.dx, l.in...)
	planes := l.in[0] * l.in[1]
	per := len(dy.Data) / planes
	ctx.Pool.Run(planes, func(lo, hi, _ int) {
		for p := lo; p < hi; p++ {
			dst := l.dx.Data[p*h*w : (p+1)*h*w]
			clear(dst)
			for o := p * per; o < (p+1)*per; o++ {
				dst[l.arg[o]] += dy.Data[o]
			}
		}
	})
	return l.dx
}

// GlobalAvgPool averages each channel: [C, H, W] → [C].
type GlobalAvgPool struct {
	in    []int
	y, dx *Tensor
}

func (l *GlobalAvgPool) Name() string { return "global_avg_pool" }

func (l *GlobalAvgPool) OutShape(in []int) ([]int, error) {
	if len(in) != 3 {
		return nil, shapeErr(l, in, "[C H W]")
	}
	return []int{in[0]}, nil
}

func (l *GlobalAvgPool) Params() []*Param { return nil }
func (l *GlobalAvgPool) init(uint64, int) {}

func (l *GlobalAvgPool) Forward(ctx *Context, x *Tensor) *Tensor {
	n, c, hw := x.Shape[0], x.Shape[1], x.Shape[2]*x.Shape[3]
	l.in = append(l.in[:0], x.Shape...)
	l.y = reuse(l.y, n, c)
	for p := range n * c {
		var s float32
		for _, v := range x.Data[p*hw : (p+1)*hw] {
			s += v
		}
		l.y.Data[p] = s / float32(hw)
	}
	return l.y
}

func (l *GlobalAvgPool) Backward(ctx *Context, dy *Tensor) *Tensor {
	hw := l.in[2] * l.in[3]
	l.dx = reuse(l.dx, l.in...)
	for p, g := range dy.Data {
		g /= float32(hw)
		d := l.dx.Data[p*hw : (p+1)*hw]
		for i := range d {
			d[i] = g
		}
	}
	return l.dx
}

// Flatten turns [C, H, W] into [C·H·W], sharing the data.
type Flatten struct {
	in    []int
	y, dx Tensor
}

func (l *Flatten) Name() string                     { return "flatten" }
func (l *Flatten) OutShape(in []int) ([]int, error) { return []int{prod(in)}, nil }
func (l *Flatten) Params() []*Param                 { return nil }
func (l *Flatten) init(uint64, int)                 {}

func (l *Flatten) Forward(ctx *Context, x *Tensor) *Tensor {
	l.in = append(l.in[:0], x.Shape...)
	l.y = Tensor{Shape: append(l.y.Shape[:0], x.Shape[0], x.PerSample()), Data: x.Data}
	return &l.y
}

func (l *Flatten) Backward(ctx *Context, dy *Tensor) *Tensor {
	l.dx = Tensor{Shape: append(l.dx.Shape[:0], l.in...), Data: dy.Data}
	return &l.dx
}

// Dropout zeroes each value with probability P while training and scales
// the rest by 1/(1-P); it is the identity in evaluation. The mask of a value
// is keyed by the run's seed, the step, the sample's global index and the
// value's position, so it does not depend on how a batch is split.
type Dropout struct {
	P float64

	index int
	mask  []float32
	y, dx *Tensor
}

func (l *Dropout) Name() string                     { return fmt.Sprintf("dropout p=%g", l.P) }
func (l *Dropout) OutShape(in []int) ([]int, error) { return in, nil }
func (l *Dropout) Params() []*Param                 { return nil }
func (l *Dropout) init(_ uint64, index int)         { l.index = index }

func (l *Dropout) Forward(ctx *Context, x *Tensor) *Tensor {
	if !ctx.Train || l.P == 0 {
		l.mask = l.mask[:0]
		return x
	}
	l.y = reuse(l.y, x.Shape...)
	if cap(l.mask) < len(x.Data) {
		l.mask = make([]float32, len(x.Data))
	}
	l.mask = l.mask[:len(x.Data)]
	per := x.PerSample()
	scale := float32(1 / (1 - l.P))
	ctx.Pool.Run(x.N(), func(lo, hi, _ int) {
		for n := lo; n < hi; n++ {
			key := ctx.Seed ^ splitmix.Mix(uint64(ctx.Step)^splitmix.Mix(uint64(l.index)))
			for j := range per {
				i := n*per + j
				m := float32(0)
				if uniform(key, int64(ctx.Samples[n]), int64(j), 0) >= l.P {
					m = scale
				}
				l.mask[i] = m
				l.y.Data[i] = x.Data[i] * m
			}
		}
	})
	return l.y
}

func (l *Dropout) Backward(ctx *Context, dy *Tensor) *Tensor {
	if len(l.mask) == 0 {
		return dy
	}
	l.dx = reuse(l.dx, dy.Shape...)
	for i, v := range dy.Data {
		l.dx.Data[i] = v * l.mask[i]
	}
	return l.dx
}

// Index is the dropout layer's number in its model, which keys its masks.
func (l *Dropout) Index() int { return l.index }
