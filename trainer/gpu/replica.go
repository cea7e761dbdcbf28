//go:build cuda || cudaemu

package gpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/pipefeed/pipe/internal/cuda"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/nn"
)

// Compiled reports whether this build has the GPU trainer (the cuda or
// cudaemu tag).
const Compiled = true

// Replica is one model replica in one GPU's memory: a trainer.Accelerator.
// Its methods run on the caller's goroutine, with the GPU's primary context
// current on a locked OS thread; one goroutine uses a Replica at a time, as
// the trainer does.
type Replica struct {
	name    string
	ordinal int
	ctx     *cuda.Context
	stream  *cuda.Stream
	mod     *cuda.Module
	fn      map[string]*cuda.Function
	// err is the first failure of the current call: launches after it are
	// skipped, and the call returns it.
	err error

	layers  []layer
	in      []int // per-sample input shape
	classes int

	// The model's values, in three flat arrays: every trained value (w),
	// its float64 gradient sum (g64), the optimiser's state (s, q) and
	// whether weight decay applies (decay, one byte each); and every buffer
	// value (bufs: batch-norm running statistics).
	slots            []slot
	nw, nbuf         int
	w, g64, s, q     cuda.DevicePtr
	decay, bufs      cuda.DevicePtr
	opt              nn.OptimConfig
	t                int64
	hostW, hostB     []float32
	hostS, hostQ     []float32
	host64           []float64
	hostLoss         []float64
	hostHit          []int32
	hostSamples      []int64
	input            dbuf // a host batch, copied in
	labels, samples  dbuf
	loss, hit, dlogs dbuf
	// scratch shared by the layers: im2col columns, a channels-first
	// product, per-group gradient partials.
	cols, cn, part dbuf
}

// slot places one of the model's parameters in the flat arrays.
type slot struct {
	off, n int
	buffer bool
}

// dbuf is device memory that grows to the largest size asked of it.
type dbuf struct {
	ptr   cuda.DevicePtr
	bytes int64
}

// tensor is a float32 array in device memory.
type tensor struct {
	shape []int
	ptr   cuda.DevicePtr
}

func (t *tensor) n() int { return t.shape[0] }

func (t *tensor) len() int { return prod(t.shape) }

func (t *tensor) perSample() int { return prod(t.shape[1:]) }

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// New makes a replica on GPU ordinal with arch's layers and parameter
// shapes (not its values: the trainer loads those). It fails for a layer the
// GPU trainer does not have.
func New(ordinal int, arch *nn.Model) (*Replica, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("gpu: counting CUDA devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("gpu: cuda:%d: the driver sees %d GPUs", ordinal, n)
	}
	r := &Replica{name: cuda.Name(ordinal), ordinal: ordinal, in: append([]int(nil), arch.In...),
		classes: arch.Classes(), fn: map[string]*cuda.Function{}}
	// The primary context, as prefetch's CUDA device uses: the batches it
	// leaves in device memory are addressable here.
	if r.ctx, err = cuda.RetainPrimary(ordinal); err != nil {
		return nil, r.errf("retaining the primary context", err)
	}
	// Where every parameter goes.
	index := map[*nn.Param]int{}
	for i, p := range arch.Params() {
		index[p] = i
		s := slot{n: len(p.W), buffer: p.Buffer}
		if p.Buffer {
			s.off, r.nbuf = r.nbuf, r.nbuf+s.n
		} else {
			s.off, r.nw = r.nw, r.nw+s.n
		}
		r.slots = append(r.slots, s)
	}
	if r.layers, err = mirror(arch.Layers, index, r); err != nil {
		r.ctx.Release()
		return nil, err
	}
	err = r.do(func() error {
		var err error
		if r.stream, err = cuda.NewStream(); err != nil {
			return r.errf("creating a stream", err)
		}
		if r.mod, err = cuda.LoadModule("trainer/gpu/kernels.ptx", kernelsPTX); err != nil {
			return r.errf("loading the kernels (the driver compiles their PTX for this GPU)", err)
		}
		for _, k := range kernelNames {
			if r.fn[k], err = r.mod.Function(k); err != nil {
				return r.errf("kernel "+k, err)
			}
		}
		for _, a := range []struct {
			p     *cuda.DevicePtr
			bytes int
		}{{&r.w, 4 * r.nw}, {&r.g64, 8 * r.nw}, {&r.s, 4 * r.nw}, {&r.q, 4 * r.nw}, {&r.decay, r.nw}, {&r.bufs, 4 * r.nbuf}} {
			if *a.p, err = cuda.MemAlloc(int64(max(a.bytes, 4))); err != nil {
				return r.errf(fmt.Sprintf("allocating %d bytes for the model", a.bytes), err)
			}
		}
		decay := make([]byte, max(r.nw, 1))
		for i, p := range arch.Params() {
			if s := r.slots[i]; !s.buffer && p.Decay {
				for j := range s.n {
					decay[s.off+j] = 1
				}
			}
		}
		if err := cuda.CopyHtoDAsync(r.decay, decay[:r.nw], r.stream); err != nil {
			return r.errf("copying the weight-decay mask", err)
		}
		return r.stream.Synchronize()
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	r.hostW, r.hostB = make([]float32, r.nw), make([]float32, r.nbuf)
	r.hostS, r.hostQ, r.host64 = make([]float32, r.nw), make([]float32, r.nw), make([]float64, r.nw)
	return r, nil
}

// Name is the GPU's name: "cuda:0".
func (r *Replica) Name() string { return r.name }

func (r *Replica) errf(what string, err error) error {
	return fmt.Errorf("gpu: %s: %s: %w", r.name, what, err)
}

// do runs f with the replica's context current on a locked OS thread (the
// driver keeps the current context per thread, and goroutines move), and
// returns f's error or the first failed launch's. After a failure it still
// waits for the stream, so no queued copy reads or writes host memory once
// the call has returned.
func (r *Replica) do(f func() error) error {
	return r.ctx.Do(func() error {
		r.err = nil
		err := f()
		if (r.err != nil || err != nil) && r.stream != nil {
			r.stream.Synchronize()
		}
		err = errors.Join(r.err, err)
		r.err = nil
		return err
	})
}

// fail records the first failure of a call.
func (r *Replica) fail(what string, err error) {
	if err != nil && r.err == nil {
		r.err = r.errf(what, err)
	}
}

// ensure grows b to at least bytes.
func (r *Replica) ensure(b *dbuf, bytes int64) cuda.DevicePtr {
	if r.err != nil || b.bytes >= bytes {
		return b.ptr
	}
	if bytes > maxBufferBytes {
		r.fail("allocating device memory", fmt.Errorf("a buffer of %d bytes: the kernels index at most 2^31 values, %d bytes of float32 (a smaller batch per GPU fits)", bytes, int64(maxBufferBytes)))
		return 0
	}
	if b.ptr != 0 {
		// The stream may still read the old buffer.
		r.wait()
		r.fail("freeing device memory", cuda.MemFree(b.ptr))
		b.ptr, b.bytes = 0, 0
	}
	p, err := cuda.MemAlloc(max(bytes, 4))
	if err != nil {
		r.fail(fmt.Sprintf("allocating %d bytes", bytes), err)
		return 0
	}
	b.ptr, b.bytes = p, bytes
	return p
}

// maxBufferBytes is the largest device buffer: the elementwise kernels
// index float32 values with a C int (FOR_EACH32 in kernels.cu).
const maxBufferBytes = 4 * (1<<31 - 1)

// maxGridY is CUDA's limit on a grid's y dimension.
const maxGridY = 65535

// out returns a float32 tensor of shape in b.
func (r *Replica) out(b *dbuf, shape ...int) *tensor {
	return &tensor{shape: shape, ptr: r.ensure(b, 4*int64(prod(shape)))}
}

// launchGrid launches kernel name on the replica's stream. Arguments are
// typed as the kernel's C parameters are: cuda.DevicePtr for a pointer,
// int (a C int) or bool for an int, int64 for a long long, uint64 for an
// unsigned long long, float32 and float64.
func (r *Replica) launchGrid(name string, gx, gy, gz, threads int, args ...any) {
	if r.err != nil {
		return
	}
	r.fail("launching "+name, r.fn[name].Launch(cuda.Dim3{gx, gy, gz}, cuda.Dim3{threads, 1, 1}, 0, r.stream, args...))
}

// launch launches a grid-stride kernel over n elements.
func (r *Replica) launch(name string, n int64, args ...any) {
	if n <= 0 {
		return
	}
	const threads = 256
	r.launchGrid(name, int(min((n+threads-1)/threads, 1<<20)), 1, 1, threads, args...)
}

// gemm computes, for batch matrices z at the given strides (in values),
// C = A·B (+ C when acc): C is m×n, A(i,k) is a[i*lda+k] (a[k*lda+i] when
// ta), B(k,j) is b[k*ldb+j] (b[j*ldb+k] when tb).
func (r *Replica) gemm(ta, tb bool, m, n, k int, a cuda.DevicePtr, lda int, sa int64, b cuda.DevicePtr, ldb int, sb int64,
	c cuda.DevicePtr, ldc int, sc int64, batch int, acc bool) {
	if m == 0 || n == 0 || batch == 0 {
		return
	}
	bm, bn := 64, 64
	switch {
	case m <= 16:
		bm, bn = 16, 256
	case m <= 32:
		bm, bn = 32, 128
	}
	t := func(x bool) string {
		if x {
			return "t"
		}
		return "n"
	}
	name := fmt.Sprintf("gemm_%s%s_%d", t(ta), t(tb), bm)
	r.launchGrid(name, (n+bn-1)/bn, (m+bm-1)/bm, batch, 256, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, acc)
}

// at is the address of float32 value i of p.
func at(p cuda.DevicePtr, i int) cuda.DevicePtr { return p + cuda.DevicePtr(4*i) }

// at64 is the address of float64 value i of p.
func at64(p cuda.DevicePtr, i int) cuda.DevicePtr { return p + cuda.DevicePtr(8*i) }

// Load copies m's parameters and buffers and o's state into the GPU.
func (r *Replica) Load(m *nn.Model, o *nn.Optimizer) error {
	if err := r.check(m); err != nil {
		return err
	}
	for i, p := range m.Params() {
		s := r.slots[i]
		if s.buffer {
			copy(r.hostB[s.off:], p.W)
			continue
		}
		copy(r.hostW[s.off:], p.W)
		first, second := o.State(i)
		copy(r.hostS[s.off:s.off+s.n], first)
		if second != nil {
			copy(r.hostQ[s.off:s.off+s.n], second)
		} else {
			clear(r.hostQ[s.off : s.off+s.n])
		}
	}
	r.opt, r.t = o.Config(), o.Steps()
	return r.do(func() error {
		put(r, r.w, r.hostW)
		put(r, r.s, r.hostS)
		put(r, r.q, r.hostQ)
		put(r, r.bufs, r.hostB)
		// The next Load or Store writes the host arrays.
		r.wait()
		return nil
	})
}

// Store copies the GPU's parameters, buffers and optimiser state into m and
// o.
func (r *Replica) Store(m *nn.Model, o *nn.Optimizer) error {
	if err := r.check(m); err != nil {
		return err
	}
	err := r.do(func() error {
		get(r, r.hostW, r.w)
		get(r, r.hostS, r.s)
		get(r, r.hostQ, r.q)
		get(r, r.hostB, r.bufs)
		r.wait()
		return nil
	})
	if err != nil {
		return err
	}
	for i, p := range m.Params() {
		s := r.slots[i]
		if s.buffer {
			copy(p.W, r.hostB[s.off:s.off+s.n])
			continue
		}
		copy(p.W, r.hostW[s.off:s.off+s.n])
		first, second := o.State(i)
		copy(first, r.hostS[s.off:s.off+s.n])
		copy(second, r.hostQ[s.off:s.off+s.n])
	}
	o.SetSteps(r.t)
	return nil
}

// check checks that m has the replica's parameters.
func (r *Replica) check(m *nn.Model) error {
	ps := m.Params()
	if len(ps) != len(r.slots) {
		return fmt.Errorf("gpu: %s: a model of %d parameters, the replica has %d", r.name, len(ps), len(r.slots))
	}
	for i, p := range ps {
		if len(p.W) != r.slots[i].n || p.Buffer != r.slots[i].buffer {
			return fmt.Errorf("gpu: %s: parameter %d (%s) has %d values, the replica's %d", r.name, i, p.Name, len(p.W), r.slots[i].n)
		}
	}
	return nil
}

// put copies host values into device memory, in stream order. The driver
// may read src at any time until the stream passes the copy (it promises
// nothing else, even for pageable memory): src must stay unchanged until
// wait.
func put[T any](r *Replica, dst cuda.DevicePtr, src []T) {
	if r.err != nil || len(src) == 0 {
		return
	}
	r.fail("copying to the device", cuda.CopyHtoDAsync(dst, cuda.Bytes(src), r.stream))
}

// get copies device memory into host values after the stream's work; the
// values are there once wait returns.
func get[T any](r *Replica, dst []T, src cuda.DevicePtr) {
	if r.err != nil || len(dst) == 0 {
		return
	}
	r.fail("copying from the device", cuda.CopyDtoHAsync(cuda.Bytes(dst), src, r.stream))
}

// wait waits for the stream's work.
func (r *Replica) wait() {
	if r.err == nil {
		r.fail("waiting for the stream", r.stream.Synchronize())
	}
}

// resize returns s with length n, reusing its storage.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// batch returns b's samples as a device tensor: where the pipeline left
// them, or copied in from the host.
func (r *Replica) batch(b trainer.Batch) (*tensor, error) {
	want := append([]int{b.N()}, r.in...)
	if b.Dev != nil {
		if fmt.Sprint(b.Dev.Shape) != fmt.Sprint(want) {
			return nil, fmt.Errorf("gpu: %s: a batch of shape %v, the model takes %v", r.name, b.Dev.Shape, want)
		}
		return &tensor{shape: want, ptr: cuda.DevicePtr(b.Dev.Ptr)}, nil
	}
	if b.X == nil || fmt.Sprint(b.X.Shape) != fmt.Sprint(want) {
		return nil, fmt.Errorf("gpu: %s: a host batch of shape %v, the model takes %v", r.name, b.X, want)
	}
	x := r.out(&r.input, want...)
	put(r, x.ptr, b.X.Data)
	return x, nil
}

// run is one batch through the model: the forward pass, the loss (smoothed
// by eps) and, when training, the backward pass; it returns the loss summed
// over the samples (in fixed point, nn.LossOf) and the correct top-1
// predictions.
func (r *Replica) run(c *nn.Context, b trainer.Batch, train bool, eps float64) (nn.LossSum, int, error) {
	n := b.N()
	if n == 0 {
		return 0, 0, nil
	}
	if len(b.Labels) != n {
		return 0, 0, fmt.Errorf("gpu: %s: %d labels for %d samples", r.name, len(b.Labels), n)
	}
	if b.Targets != nil {
		return 0, 0, fmt.Errorf("gpu: %s: %w", r.name, trainer.ErrSoftTargets)
	}
	if train && len(b.Samples) != n {
		return 0, 0, fmt.Errorf("gpu: %s: %d sample indices for %d samples", r.name, len(b.Samples), n)
	}
	var lossSum nn.LossSum
	correct := 0
	err := r.do(func() error {
		x, err := r.batch(b)
		if err != nil {
			return err
		}
		put(r, r.ensure(&r.labels, 4*int64(n)), b.Labels)
		var st step
		st.train, st.seed, st.step = train, c.Seed, c.Step
		if train {
			r.hostSamples = r.hostSamples[:0]
			for _, s := range b.Samples {
				r.hostSamples = append(r.hostSamples, int64(s))
			}
			st.samples = r.ensure(&r.samples, 8*int64(n))
			put(r, st.samples, r.hostSamples)
			r.fail("clearing the gradients", cuda.MemsetD32Async(r.g64, 0, int64(2*r.nw), r.stream))
		}
		for _, l := range r.layers {
			x = l.forward(r, &st, x)
		}
		if r.err != nil {
			return nil
		}
		k := x.perSample()
		g := r.out(&r.dlogs, n, k)
		r.launch("softmax_xent", int64(n), g.ptr, r.ensure(&r.loss, 8*int64(n)), r.ensure(&r.hit, 4*int64(n)), x.ptr,
			r.labels.ptr, n, k, eps, n)
		if train {
			dy := g
			for i := len(r.layers) - 1; i >= 0; i-- {
				dy = r.layers[i].backward(r, &st, dy)
			}
		}
		r.hostLoss, r.hostHit = resize(r.hostLoss, n), resize(r.hostHit, n)
		get(r, r.hostLoss, r.loss.ptr)
		get(r, r.hostHit, r.hit.ptr)
		r.wait()
		if r.err != nil {
			return nil
		}
		for i := range n {
			lossSum += nn.LossOf(r.hostLoss[i])
			correct += int(r.hostHit[i])
		}
		return nil
	})
	return lossSum, correct, err
}

// ForwardBackward trains on b: its gradients replace the GPU's.
func (r *Replica) ForwardBackward(c *nn.Context, b trainer.Batch) (nn.LossSum, int, error) {
	return r.run(c, b, true, c.Smoothing)
}

// Evaluate runs b in inference mode, the loss unsmoothed.
func (r *Replica) Evaluate(b trainer.Batch) (float64, int, error) {
	l, k, err := r.run(&nn.Context{}, b, false, 0)
	return l.Float(), k, err
}

// Gradients copies the gradient sums to the host.
func (r *Replica) Gradients() ([]float64, error) {
	err := r.do(func() error {
		get(r, r.host64, r.g64)
		r.wait()
		return nil
	})
	return r.host64, err
}

// SetGradients copies g into the GPU's gradient sums.
func (r *Replica) SetGradients(g []float64) error {
	if len(g) != r.nw {
		return fmt.Errorf("gpu: %s: %d gradients for %d values", r.name, len(g), r.nw)
	}
	return r.do(func() error {
		put(r, r.g64, g)
		r.wait() // g is the caller's again when this returns
		return nil
	})
}

// Update applies the optimiser with learning rate lr, as the CPU's
// Optimizer.Step does.
func (r *Replica) Update(lr float64) error {
	return r.do(func() error {
		r.t++
		c, n := r.opt, int64(r.nw)
		wd := float32(c.WeightDecay)
		switch c.Name {
		case "sgd":
			r.launch("sgd", n, r.w, r.s, r.g64, r.decay, n, float32(lr), float32(c.Momentum), wd, c.Nesterov)
		case "adam":
			c1 := 1 - math.Pow(c.Beta1, float64(r.t))
			c2 := 1 - math.Pow(c.Beta2, float64(r.t))
			r.launch("adam", n, r.w, r.s, r.q, r.g64, r.decay, n, float32(lr/c1), float32(c.Beta1), float32(c.Beta2),
				float32(math.Sqrt(c2)), float32(c.Eps), wd)
		case "rmsprop":
			r.launch("rmsprop", n, r.w, r.s, r.q, r.g64, r.decay, n, float32(lr), float32(c.Alpha), float32(c.Momentum),
				float32(c.Eps), wd)
		default:
			return fmt.Errorf("gpu: %s: optimizer %q", r.name, c.Name)
		}
		r.fail("waiting for the update", r.stream.Synchronize())
		if r.err != nil {
			r.t-- // not taken
		}
		return nil
	})
}

// Close frees the replica's memory and releases the context.
func (r *Replica) Close() error {
	if r.ctx == nil {
		return nil
	}
	err := r.do(func() error {
		if r.stream != nil {
			r.fail("waiting for the stream", r.stream.Synchronize())
		}
		for _, p := range []cuda.DevicePtr{r.w, r.g64, r.s, r.q, r.decay, r.bufs} {
			if p != 0 {
				r.fail("freeing device memory", cuda.MemFree(p))
			}
		}
		bufs := []*dbuf{&r.input, &r.labels, &r.samples, &r.loss, &r.hit, &r.dlogs, &r.cols, &r.cn, &r.part}
		for _, l := range r.layers {
			bufs = append(bufs, l.buffers()...)
		}
		for _, b := range bufs {
			if b.ptr != 0 {
				r.fail("freeing device memory", cuda.MemFree(b.ptr))
				*b = dbuf{}
			}
		}
		if r.stream != nil {
			r.fail("destroying the stream", r.stream.Destroy())
			r.stream = nil
		}
		return nil
	})
	r.ctx.Release()
	r.ctx = nil
	return err
}

var _ trainer.Accelerator = (*Replica)(nil)
