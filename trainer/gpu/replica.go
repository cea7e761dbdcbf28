//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/pipefeed/pipe/trainer"
)

// Compiled reports whether this build has the GPU trainer (the cuda tag).
const Compiled = true

// Replica is one model replica in one GPU's memory: a trainer.Accelerator.
// Its methods run on the caller's goroutine, with the GPU's primary context
// current on a locked OS thread; one goroutine uses a Replica at a time, as
// the trainer does.
type Replica struct {
	name    string
	ordinal int
	dev     cu.Device
	ctx     cu.CUContext
	stream  cu.Stream
	mod     cu.Module
	fn      map[string]cu.Function
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
	w, g64, s, q     cu.DevicePtr
	decay, bufs      cu.DevicePtr
	opt              trainer.OptimConfig
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
	ptr   cu.DevicePtr
	bytes int64
}

// tensor is a float32 array in device memory.
type tensor struct {
	shape []int
	ptr   cu.DevicePtr
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
func New(ordinal int, arch *trainer.Model) (*Replica, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu: counting CUDA devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("gpu: cuda:%d: the driver sees %d GPUs", ordinal, n)
	}
	r := &Replica{name: fmt.Sprintf("cuda:%d", ordinal), ordinal: ordinal, in: append([]int(nil), arch.In...),
		classes: arch.Classes(), fn: map[string]cu.Function{}}
	if r.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, r.errf("opening the device", err)
	}
	// The primary context, as prefetch's CUDA device uses: the batches it
	// leaves in device memory are addressable here.
	if r.ctx, err = r.dev.RetainPrimaryCtx(); err != nil {
		return nil, r.errf("retaining the primary context", err)
	}
	// Where every parameter goes.
	index := map[*trainer.Param]int{}
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
		r.dev.ReleasePrimaryCtx()
		return nil, err
	}
	err = r.do(func() error {
		var err error
		if r.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return r.errf("creating a stream", err)
		}
		if r.mod, err = cu.LoadData(kernelsPTX); err != nil {
			return r.errf("loading the kernels (the driver compiles their PTX for this GPU)", err)
		}
		for _, k := range kernelNames {
			if r.fn[k], err = r.mod.Function(k); err != nil {
				return r.errf("kernel "+k, err)
			}
		}
		for _, a := range []struct {
			p     *cu.DevicePtr
			bytes int
		}{{&r.w, 4 * r.nw}, {&r.g64, 8 * r.nw}, {&r.s, 4 * r.nw}, {&r.q, 4 * r.nw}, {&r.decay, r.nw}, {&r.bufs, 4 * r.nbuf}} {
			if *a.p, err = cu.MemAlloc(int64(max(a.bytes, 4))); err != nil {
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
		if err := cu.MemcpyHtoDAsync(r.decay, unsafe.Pointer(&decay[0]), int64(r.nw), r.stream); err != nil {
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

// do runs f on a locked OS thread with the replica's context current (the
// driver keeps the current context per thread, and goroutines move), and
// returns f's error or the first failed launch's.
func (r *Replica) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(r.ctx); err != nil {
		return r.errf("making the context current", err)
	}
	r.err = nil
	err := f()
	if r.err != nil {
		err = errors.Join(r.err, err)
	}
	r.err = nil
	return err
}

// fail records the first failure of a call.
func (r *Replica) fail(what string, err error) {
	if err != nil && r.err == nil {
		r.err = r.errf(what, err)
	}
}

// ensure grows b to at least bytes.
func (r *Replica) ensure(b *dbuf, bytes int64) cu.DevicePtr {
	if r.err != nil || b.bytes >= bytes {
		return b.ptr
	}
	if b.ptr != 0 {
		// The stream may still read the old buffer.
		r.wait()
		r.fail("freeing device memory", cu.MemFree(b.ptr))
		b.ptr, b.bytes = 0, 0
	}
	p, err := cu.MemAlloc(max(bytes, 4))
	if err != nil {
		r.fail(fmt.Sprintf("allocating %d bytes", bytes), err)
		return 0
	}
	b.ptr, b.bytes = p, bytes
	return p
}

// out returns a float32 tensor of shape in b.
func (r *Replica) out(b *dbuf, shape ...int) *tensor {
	return &tensor{shape: shape, ptr: r.ensure(b, 4*int64(prod(shape)))}
}

// arg packs a kernel parameter into the eight-byte slot cu's Launch
// copies: C int from Go int, long long from int64, float from float32,
// double from float64, pointers from cu.DevicePtr.
func arg(v any) uint64 {
	switch x := v.(type) {
	case cu.DevicePtr:
		return uint64(x)
	case int:
		return uint64(uint32(int32(x)))
	case int64:
		return uint64(x)
	case uint64:
		return x
	case float32:
		return uint64(math.Float32bits(x))
	case float64:
		return math.Float64bits(x)
	case bool:
		if x {
			return 1
		}
		return 0
	}
	panic(fmt.Sprintf("gpu: kernel argument of type %T", v))
}

// launchGrid launches kernel name on the replica's stream.
func (r *Replica) launchGrid(name string, gx, gy, gz, threads int, args ...any) {
	if r.err != nil {
		return
	}
	slots := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		slots[i] = arg(a)
		params[i] = unsafe.Pointer(&slots[i])
	}
	r.fail("launching "+name, r.fn[name].Launch(gx, gy, gz, threads, 1, 1, 0, r.stream, params))
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
func (r *Replica) gemm(ta, tb bool, m, n, k int, a cu.DevicePtr, lda int, sa int64, b cu.DevicePtr, ldb int, sb int64,
	c cu.DevicePtr, ldc int, sc int64, batch int, acc bool) {
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
func at(p cu.DevicePtr, i int) cu.DevicePtr { return p + cu.DevicePtr(4*i) }

// at64 is the address of float64 value i of p.
func at64(p cu.DevicePtr, i int) cu.DevicePtr { return p + cu.DevicePtr(8*i) }

// Load copies m's parameters and buffers and o's state into the GPU.
func (r *Replica) Load(m *trainer.Model, o *trainer.Optimizer) error {
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
		return nil
	})
}

// Store copies the GPU's parameters, buffers and optimiser state into m and
// o.
func (r *Replica) Store(m *trainer.Model, o *trainer.Optimizer) error {
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
func (r *Replica) check(m *trainer.Model) error {
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

// put copies host values into device memory, in stream order; pageable
// memory is consumed before the call returns.
func put[T any](r *Replica, dst cu.DevicePtr, src []T) {
	if r.err != nil || len(src) == 0 {
		return
	}
	bytes := int64(len(src)) * int64(unsafe.Sizeof(src[0]))
	r.fail("copying to the device", cu.MemcpyHtoDAsync(dst, unsafe.Pointer(unsafe.SliceData(src)), bytes, r.stream))
}

// get copies device memory into host values after the stream's work; the
// values are there once wait returns.
func get[T any](r *Replica, dst []T, src cu.DevicePtr) {
	if r.err != nil || len(dst) == 0 {
		return
	}
	bytes := int64(len(dst)) * int64(unsafe.Sizeof(dst[0]))
	r.fail("copying from the device", cu.MemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), src, bytes, r.stream))
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
		return &tensor{shape: want, ptr: cu.DevicePtr(b.Dev.Ptr)}, nil
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
// over the samples and the correct top-1 predictions.
func (r *Replica) run(c *trainer.Context, b trainer.Batch, train bool, eps float64) (float64, int, error) {
	n := b.N()
	if n == 0 {
		return 0, 0, nil
	}
	if len(b.Labels) != n {
		return 0, 0, fmt.Errorf("gpu: %s: %d labels for %d samples", r.name, len(b.Labels), n)
	}
	var lossSum float64
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
			if len(b.Samples) != n {
				return fmt.Errorf("gpu: %s: %d sample indices for %d samples", r.name, len(b.Samples), n)
			}
			r.hostSamples = r.hostSamples[:0]
			for _, s := range b.Samples {
				r.hostSamples = append(r.hostSamples, int64(s))
			}
			st.samples = r.ensure(&r.samples, 8*int64(n))
			put(r, st.samples, r.hostSamples)
			r.fail("clearing the gradients", cu.MemsetD32Async(r.g64, 0, int64(2*r.nw), r.stream))
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
			lossSum += r.hostLoss[i]
			correct += int(r.hostHit[i])
		}
		return nil
	})
	return lossSum, correct, err
}

// ForwardBackward trains on b: its gradients replace the GPU's.
func (r *Replica) ForwardBackward(c *trainer.Context, b trainer.Batch) (float64, int, error) {
	return r.run(c, b, true, c.Smoothing)
}

// Evaluate runs b in inference mode, the loss unsmoothed.
func (r *Replica) Evaluate(b trainer.Batch) (float64, int, error) {
	return r.run(&trainer.Context{}, b, false, 0)
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
	if r.ctx == (cu.CUContext{}) {
		return nil
	}
	err := r.do(func() error {
		if r.stream != cu.NoStream {
			r.fail("waiting for the stream", r.stream.Synchronize())
		}
		for _, p := range []cu.DevicePtr{r.w, r.g64, r.s, r.q, r.decay, r.bufs} {
			if p != 0 {
				r.fail("freeing device memory", cu.MemFree(p))
			}
		}
		bufs := []*dbuf{&r.input, &r.labels, &r.samples, &r.loss, &r.hit, &r.dlogs, &r.cols, &r.cn, &r.part}
		for _, l := range r.layers {
			bufs = append(bufs, l.buffers()...)
		}
		for _, b := range bufs {
			if b.ptr != 0 {
				r.fail("freeing device memory", cu.MemFree(b.ptr))
				*b = dbuf{}
			}
		}
		if r.stream != cu.NoStream {
			r.fail("destroying the stream", r.stream.Destroy())
		}
		return nil
	})
	r.dev.ReleasePrimaryCtx()
	r.ctx = cu.CUContext{}
	return err
}

var _ trainer.Accelerator = (*Replica)(nil)
