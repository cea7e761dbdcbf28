package nn

import (
	"fmt"

	"github.com/alitto/pond/v2"
)

// Tensor is a dense float32 array. Image batches are NCHW: element
// (n, c, y, x) of a [N, C, H, W] tensor is Data[((n*C+c)*H+y)*W+x]; a
// [N, F] tensor holds sample n's features at Data[n*F:(n+1)*F].
type Tensor struct {
	Shape []int
	Data  []float32
}

// NewTensor returns a zero tensor of the given shape.
func NewTensor(shape ...int) *Tensor {
	return &Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, prod(shape))}
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// N is the batch size (the first dimension).
func (t *Tensor) N() int { return t.Shape[0] }

// PerSample is the number of values of one sample.
func (t *Tensor) PerSample() int { return prod(t.Shape[1:]) }

func (t *Tensor) String() string { return fmt.Sprintf("tensor%v", t.Shape) }

// reuse returns a tensor of the given shape, reusing t's storage when it is
// large enough: layers keep their outputs between steps, so a steady state
// allocates nothing.
func reuse(t *Tensor, shape ...int) *Tensor {
	n := prod(shape)
	if t == nil {
		t = &Tensor{}
	}
	if cap(t.Data) < n {
		t.Data = make([]float32, n)
	}
	t.Data = t.Data[:n]
	t.Shape = append(t.Shape[:0], shape...)
	return t
}

// Pool runs the per-sample loops of the layers on a fixed number of
// goroutines. Work is cut into equal contiguous ranges, one per worker, so
// which worker sums what, and so every result, depends only on the worker
// count, never on timing.
type Pool struct {
	n   int
	buf []GemmBuf
	// workers runs every share but the caller's: n-1 goroutines, in pond
	// task groups.
	workers pond.Pool
}

// NewPool returns a pool of n workers (at least 1).
func NewPool(n int) *Pool {
	n = max(n, 1)
	p := &Pool{n: n, buf: make([]GemmBuf, n)}
	if n > 1 {
		p.workers = pond.NewPool(n - 1)
	}
	return p
}

// Workers is the pool's size.
func (p *Pool) Workers() int { return p.n }

// Run calls f(lo, hi, w) for worker w's share [lo, hi) of [0, n), on up to
// p.Workers() goroutines (one pond group, the caller's goroutine taking the
// last share), and waits. A panic in a worker is re-raised here, in the
// caller, with the worker's stack in its value.
func (p *Pool) Run(n int, f func(lo, hi, w int)) {
	k := min(p.n, n)
	if k <= 1 {
		if n > 0 {
			f(0, n, 0)
		}
		return
	}
	g := p.workers.NewGroup()
	for w := range k - 1 {
		lo, hi := w*n/k, (w+1)*n/k
		g.Submit(func() { f(lo, hi, w) })
	}
	f((k-1)*n/k, n, k-1)
	if err := g.Wait(); err != nil {
		panic(err)
	}
}

// gemm is Gemm with worker w's scratch.
func (p *Pool) gemm(w int, c, a, b Mat, acc bool) { Gemm(c, a, b, acc, &p.buf[w]) }

// rows returns rows [lo, hi) of m.
func (m Mat) rows(lo, hi int) Mat {
	if m.T {
		return Mat{Data: m.Data[lo:], Rows: hi - lo, Cols: m.Cols, Stride: m.Stride, T: true}
	}
	return Mat{Data: m.Data[lo*m.Stride:], Rows: hi - lo, Cols: m.Cols, Stride: m.Stride}
}

// parGemm computes c (+)= a×b with c's rows shared among the workers.
func (p *Pool) parGemm(c, a, b Mat, acc bool) {
	p.Run(c.Rows, func(lo, hi, w int) {
		p.gemm(w, c.rows(lo, hi), a.rows(lo, hi), b, acc)
	})
}
