//go:build cuda || cudaemu

package gpu

import (
	"fmt"

	"github.com/pipefeed/pipe/internal/cuda"
	"github.com/pipefeed/pipe/trainer/nn"
)

// step is what the layers of one pass share.
type step struct {
	train   bool
	seed    uint64
	step    int64
	samples cuda.DevicePtr // the batch's global sample indices, int64
}

// layer is a nn.Layer's GPU twin. forward keeps what backward needs;
// backward adds to the gradient sums and returns dL/dx. Both only launch
// work on the replica's stream (failures are the replica's to report).
type layer interface {
	forward(r *Replica, s *step, x *tensor) *tensor
	backward(r *Replica, s *step, dy *tensor) *tensor
	// buffers is the device memory the layer owns.
	buffers() []*dbuf
}

// mirror makes the GPU twins of ls, their parameters placed by index.
func mirror(ls []nn.Layer, index map[*nn.Param]int, r *Replica) ([]layer, error) {
	var out []layer
	for _, l := range ls {
		var g layer
		switch l := l.(type) {
		case *nn.Conv2D:
			c := &conv{in: l.In, out: l.Out, k: l.K, stride: l.Stride, pad: l.Pad, w: r.slots[index[l.W]].off, b: -1}
			if l.B != nil {
				c.b = r.slots[index[l.B]].off
			}
			g = c
		case *nn.Dense:
			g = &dense{in: l.In, out: l.Out, w: r.slots[index[l.W]].off, b: r.slots[index[l.B]].off}
		case *nn.ReLU:
			g = &relu{}
		case *nn.MaxPool2D:
			g = &maxPool{k: l.K, stride: l.Stride}
		case *nn.GlobalAvgPool:
			g = &gap{}
		case *nn.Flatten:
			g = &flatten{}
		case *nn.Dropout:
			g = &dropout{p: l.P, index: l.Index()}
		case *nn.BatchNorm:
			g = &batchNorm{c: l.C, eps: l.Eps, momentum: l.Momentum, gamma: r.slots[index[l.Gamma]].off,
				beta: r.slots[index[l.Beta]].off, runMean: r.slots[index[l.RunMean]].off, runVar: r.slots[index[l.RunVar]].off}
		case *nn.Residual:
			body, err := mirror(l.Body, index, r)
			if err != nil {
				return nil, err
			}
			short, err := mirror(l.Shortcut, index, r)
			if err != nil {
				return nil, err
			}
			g = &residual{body: body, short: short}
		default:
			return nil, fmt.Errorf("gpu: the GPU trainer has no %s layer", l.Name())
		}
		out = append(out, g)
	}
	return out, nil
}

// conv is Conv2D: im2col, one GEMM over the whole batch, bias.
type conv struct {
	in, out, k, stride, pad int
	w, b                    int // offsets in the trained values; b < 0: no bias
	x                       *tensor
	y, dx                   dbuf
}

func (l *conv) buffers() []*dbuf { return []*dbuf{&l.y, &l.dx} }

func (l *conv) geometry(x *tensor) (n, h, w, ho, wo, kk, q int) {
	n, h, w = x.shape[0], x.shape[2], x.shape[3]
	ho, wo = (h+2*l.pad-l.k)/l.stride+1, (w+2*l.pad-l.k)/l.stride+1
	return n, h, w, ho, wo, l.in * l.k * l.k, n * ho * wo
}

// im2col fills the replica's column scratch from x.
func (l *conv) im2col(r *Replica, x *tensor) cuda.DevicePtr {
	n, h, w, ho, wo, kk, q := l.geometry(x)
	cols := r.ensure(&r.cols, 4*int64(kk)*int64(q))
	if kk > maxGridY {
		r.fail("launching im2col", fmt.Errorf("a convolution of %d×%d×%d inputs to a value: at most %d", l.in, l.k, l.k, maxGridY))
		return cols
	}
	// A row of the matrix per blockIdx.y.
	const threads = 256
	r.launchGrid("im2col", min((q+threads-1)/threads, 1<<16), kk, 1, threads, cols, x.ptr, n, l.in, h, w, l.k, l.stride, l.pad, ho, wo)
	return cols
}

func (l *conv) forward(r *Replica, s *step, x *tensor) *tensor {
	n, _, _, ho, wo, kk, q := l.geometry(x)
	l.x = x
	cols := l.im2col(r, x)
	cn := r.ensure(&r.cn, 4*int64(l.out)*int64(q))
	// [Out, N·Ho·Wo] = W [Out, kk] · cols [kk, N·Ho·Wo]
	r.gemm(false, false, l.out, q, kk, at(r.w, l.w), kk, 0, cols, q, 0, cn, q, 0, 1, false)
	y := r.out(&l.y, n, l.out, ho, wo)
	bias := cuda.DevicePtr(0)
	if l.b >= 0 {
		bias = at(r.w, l.b)
	}
	r.launch("cnhw_to_nchw", int64(y.len()), y.ptr, cn, bias, n, l.out, ho*wo)
	return y
}

func (l *conv) backward(r *Replica, s *step, dy *tensor) *tensor {
	x := l.x
	n, _, _, ho, wo, kk, q := l.geometry(x)
	hw := ho * wo
	dcn := r.ensure(&r.cn, 4*int64(l.out)*int64(q))
	r.launch("nchw_to_cnhw", int64(dy.len()), dcn, dy.ptr, n, l.out, hw)
	cols := l.im2col(r, x)
	// One sample's weight gradient a matrix: dy_i [Out, HoWo] · cols_iᵀ,
	// added in float64 sample by sample.
	part := r.ensure(&r.part, 4*int64(n)*int64(max(l.out*kk, l.out)))
	r.gemm(false, true, l.out, kk, hw, dcn, q, int64(hw), cols, q, int64(hw), part, kk, int64(l.out*kk), n, false)
	r.launch("accum64", int64(l.out*kk), at64(r.g64, l.w), part, n, l.out*kk)
	if l.b >= 0 {
		r.launch("plane_sums", int64(n*l.out), part, dy.ptr, n*l.out, hw)
		r.launch("accum64", int64(l.out), at64(r.g64, l.b), part, n, l.out)
	}
	// dcols [kk, N·HoWo] = Wᵀ · dy, into the column scratch, then folded
	// back into dx.
	r.gemm(true, false, kk, q, l.out, at(r.w, l.w), kk, 0, dcn, q, 0, cols, q, 0, 1, false)
	dx := r.out(&l.dx, x.shape...)
	r.launch("col2im", int64(dx.len()), dx.ptr, cols, n, l.in, x.shape[2], x.shape[3], l.k, l.stride, l.pad, ho, wo)
	return dx
}

// denseChunk is the samples whose weight-gradient terms a dense layer sums
// in float32 before adding the groups in float64 (the CPU's gradChunk).
const denseChunk = 16

// dense is Dense: y = x·Wᵀ + b.
type dense struct {
	in, out int
	w, b    int
	x       *tensor
	y, dx   dbuf
}

func (l *dense) buffers() []*dbuf { return []*dbuf{&l.y, &l.dx} }

func (l *dense) forward(r *Replica, s *step, x *tensor) *tensor {
	n := x.n()
	l.x = x
	y := r.out(&l.y, n, l.out)
	r.gemm(false, true, n, l.out, l.in, x.ptr, l.in, 0, at(r.w, l.w), l.in, 0, y.ptr, l.out, 0, 1, false)
	r.launch("bias_rows", int64(n*l.out), y.ptr, at(r.w, l.b), n, l.out)
	return y
}

func (l *dense) backward(r *Replica, s *step, dy *tensor) *tensor {
	n := dy.n()
	full, rest := n/denseChunk, n%denseChunk
	chunks := full + min(rest, 1)
	size := l.out * l.in
	part := r.ensure(&r.part, 4*int64(chunks)*int64(size))
	// dW of chunk c = dy_cᵀ [Out, 16] · x_c [16, In].
	r.gemm(true, false, l.out, l.in, denseChunk, dy.ptr, l.out, int64(denseChunk*l.out), l.x.ptr, l.in, int64(denseChunk*l.in),
		part, l.in, int64(size), full, false)
	if rest > 0 {
		c := full * denseChunk
		r.gemm(true, false, l.out, l.in, rest, at(dy.ptr, c*l.out), l.out, 0, at(l.x.ptr, c*l.in), l.in, 0,
			at(part, full*size), l.in, 0, 1, false)
	}
	r.launch("accum64", int64(size), at64(r.g64, l.w), part, chunks, size)
	r.launch("accum64", int64(l.out), at64(r.g64, l.b), dy.ptr, n, l.out)
	dx := r.out(&l.dx, l.x.shape...)
	r.gemm(false, false, n, l.in, l.out, dy.ptr, l.out, 0, at(r.w, l.w), l.in, 0, dx.ptr, l.in, 0, 1, false)
	return dx
}

type relu struct{ y, dx dbuf }

func (l *relu) buffers() []*dbuf { return []*dbuf{&l.y, &l.dx} }

func (l *relu) forward(r *Replica, s *step, x *tensor) *tensor {
	y := r.out(&l.y, x.shape...)
	r.launch("relu_fwd", int64(x.len()), y.ptr, x.ptr, int64(x.len()))
	return y
}

func (l *relu) backward(r *Replica, s *step, dy *tensor) *tensor {
	dx := r.out(&l.dx, dy.shape...)
	r.launch("relu_bwd", int64(dy.len()), dx.ptr, dy.ptr, l.y.ptr, int64(dy.len()))
	return dx
}

type maxPool struct {
	k, stride  int
	in         []int
	y, dx, arg dbuf
}

func (l *maxPool) buffers() []*dbuf { return []*dbuf{&l.y, &l.dx, &l.arg} }

func (l *maxPool) forward(r *Replica, s *step, x *tensor) *tensor {
	n, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	ho, wo := (h-l.k)/l.stride+1, (w-l.k)/l.stride+1
	l.in = x.shape
	y := r.out(&l.y, n, c, ho, wo)
	arg := r.ensure(&l.arg, 4*int64(y.len()))
	r.launch("maxpool_fwd", int64(y.len()), y.ptr, arg, x.ptr, n*c, h, w, l.k, l.stride, ho, wo)
	return y
}

func (l *maxPool) backward(r *Replica, s *step, dy *tensor) *tensor {
	n, c, h, w := l.in[0], l.in[1], l.in[2], l.in[3]
	dx := r.out(&l.dx, l.in...)
	r.launch("maxpool_bwd", int64(dx.len()), dx.ptr, dy.ptr, l.arg.ptr, n*c, h, w, l.k, l.stride, dy.shape[2], dy.shape[3])
	return dx
}

type gap struct {
	in    []int
	y, dx dbuf
}

func (l *gap) buffers() []*dbuf { return []*dbuf{&l.y, &l.dx} }

func (l *gap) forward(r *Replica, s *step, x *tensor) *tensor {
	n, c, hw := x.shape[0], x.shape[1], x.shape[2]*x.shape[3]
	l.in = x.shape
	y := r.out(&l.y, n, c)
	r.launch("gap_fwd", int64(n*c), y.ptr, x.ptr, n*c, hw)
	return y
}

func (l *gap) backward(r *Replica, s *step, dy *tensor) *tensor {
	dx := r.out(&l.dx, l.in...)
	r.launch("gap_bwd", int64(dx.len()), dx.ptr, dy.ptr, l.in[0]*l.in[1], l.in[2]*l.in[3])
	return dx
}

// flatten is a view: the same memory, another shape.
type flatten struct{ in []int }

func (l *flatten) buffers() []*dbuf { return nil }

func (l *flatten) forward(r *Replica, s *step, x *tensor) *tensor {
	l.in = x.shape
	return &tensor{shape: []int{x.n(), x.perSample()}, ptr: x.ptr}
}

func (l *flatten) backward(r *Replica, s *step, dy *tensor) *tensor {
	return &tensor{shape: l.in, ptr: dy.ptr}
}

// dropout draws the CPU trainer's masks, keyed by the run's seed, the
// step, the layer and the global sample.
type dropout struct {
	p           float64
	index       int
	masked      bool
	y, dx, mask dbuf
}

func (l *dropout) buffers() []*dbuf { return []*dbuf{&l.y, &l.dx, &l.mask} }

func (l *dropout) forward(r *Replica, s *step, x *tensor) *tensor {
	l.masked = s.train && l.p != 0
	if !l.masked {
		return x
	}
	y := r.out(&l.y, x.shape...)
	mask := r.ensure(&l.mask, 4*int64(x.len()))
	r.launch("dropout_fwd", int64(x.len()), y.ptr, mask, x.ptr, s.samples, x.n(), x.perSample(), s.seed, s.step, l.index,
		l.p, float32(1/(1-l.p)))
	return y
}

func (l *dropout) backward(r *Replica, s *step, dy *tensor) *tensor {
	if !l.masked {
		return dy
	}
	dx := r.out(&l.dx, dy.shape...)
	r.launch("mul", int64(dy.len()), dx.ptr, dy.ptr, l.mask.ptr, int64(dy.len()))
	return dx
}

// batchNorm normalises with the batch's statistics while training (and
// updates the running ones), with the running ones in evaluation.
type batchNorm struct {
	c                                   int
	eps, momentum                       float64
	gamma, beta, runMean, runVar        int
	xhat, y, dx, mean, inv, coef, parts dbuf
}

func (l *batchNorm) buffers() []*dbuf {
	return []*dbuf{&l.xhat, &l.y, &l.dx, &l.mean, &l.inv, &l.coef, &l.parts}
}

// bnThreads is the block size of bn_part_sums and bn_bwd_part_sums
// (BN_THREADS).
const bnThreads = 256

// bnParts is the number of parts a channel of count values is summed in:
// a part per 4096 values (16 per thread), at most 64, so that a layer of 16
// channels runs a thousand blocks. It depends on the shape alone, so the
// sums do not depend on the GPU.
func bnParts(count int) int { return min(max(count/4096, 1), 64) }

func (l *batchNorm) dims(x *tensor) (n, hw int) { return x.n(), x.perSample() / l.c }

// partSums returns the parts each channel of n·hw values is summed in
// (bnParts) and the buffer of their sums, two a part.
func (l *batchNorm) partSums(r *Replica, n, hw int) (int, cuda.DevicePtr) {
	parts := bnParts(n * hw)
	return parts, r.ensure(&l.parts, 8*2*int64(l.c*parts))
}

func (l *batchNorm) forward(r *Replica, s *step, x *tensor) *tensor {
	n, hw := l.dims(x)
	mean, inv := r.ensure(&l.mean, 4*int64(l.c)), r.ensure(&l.inv, 4*int64(l.c))
	parts, sums := l.partSums(r, n, hw)
	if s.train {
		for pass := range 2 {
			r.launchGrid("bn_part_sums", parts, l.c, 1, bnThreads, sums, x.ptr, n, l.c, hw, parts, pass)
		}
	}
	r.launch("bn_stats", int64(l.c), mean, inv, at(r.bufs, l.runMean), at(r.bufs, l.runVar), sums, n, l.c, hw, parts,
		s.train, l.eps, l.momentum)
	xhat := r.out(&l.xhat, x.shape...)
	y := r.out(&l.y, x.shape...)
	r.launch("bn_apply", int64(x.len()), y.ptr, xhat.ptr, x.ptr, mean, inv, at(r.w, l.gamma), at(r.w, l.beta), n, l.c, hw)
	return y
}

func (l *batchNorm) backward(r *Replica, s *step, dy *tensor) *tensor {
	n, hw := l.dims(dy)
	coef := r.ensure(&l.coef, 12*int64(l.c))
	parts, sums := l.partSums(r, n, hw)
	r.launchGrid("bn_bwd_part_sums", parts, l.c, 1, bnThreads, sums, dy.ptr, l.xhat.ptr, n, l.c, hw, parts)
	r.launch("bn_bwd_sums", int64(l.c), at64(r.g64, l.gamma), at64(r.g64, l.beta), coef, sums, at(r.w, l.gamma),
		l.inv.ptr, n, l.c, hw, parts)
	dx := r.out(&l.dx, dy.shape...)
	r.launch("bn_bwd_apply", int64(dy.len()), dx.ptr, dy.ptr, l.xhat.ptr, coef, n, l.c, hw)
	return dx
}

// residual is body(x) + shortcut(x), the shortcut the identity when it has
// no layers.
type residual struct {
	body, short []layer
	y, dx       dbuf
}

func (l *residual) buffers() []*dbuf {
	bs := []*dbuf{&l.y, &l.dx}
	for _, x := range append(append([]layer(nil), l.body...), l.short...) {
		bs = append(bs, x.buffers()...)
	}
	return bs
}

func (l *residual) forward(r *Replica, s *step, x *tensor) *tensor {
	a, b := x, x
	for _, m := range l.body {
		a = m.forward(r, s, a)
	}
	for _, m := range l.short {
		b = m.forward(r, s, b)
	}
	y := r.out(&l.y, a.shape...)
	r.launch("add", int64(y.len()), y.ptr, a.ptr, b.ptr, int64(y.len()))
	return y
}

func (l *residual) backward(r *Replica, s *step, dy *tensor) *tensor {
	da, db := dy, dy
	for i := len(l.body) - 1; i >= 0; i-- {
		da = l.body[i].backward(r, s, da)
	}
	for i := len(l.short) - 1; i >= 0; i-- {
		db = l.short[i].backward(r, s, db)
	}
	dx := r.out(&l.dx, da.shape...)
	r.launch("add", int64(dx.len()), dx.ptr, da.ptr, db.ptr, int64(dx.len()))
	return dx
}
