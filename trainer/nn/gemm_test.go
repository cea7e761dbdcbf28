package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randMat(r *rand.Rand, rows, cols int) Mat {
	d := make([]float32, rows*cols)
	for i := range d {
		d[i] = r.Float32()*2 - 1
	}
	return M(d, rows, cols)
}

// naive is the reference product, in float64.
func naive(a, b Mat) []float64 {
	c := make([]float64, a.Rows*b.Cols)
	for i := range a.Rows {
		for j := range b.Cols {
			var s float64
			for k := range a.Cols {
				s += float64(a.at(i, k)) * float64(b.at(k, j))
			}
			c[i*b.Cols+j] = s
		}
	}
	return c
}

// TestGemm checks every transpose combination, edge tiles and K blocks
// against the float64 reference, with the assembly kernel and with Go's.
func TestGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	defer setKernel("avx512")
	for _, asm := range kernels() {
		setKernel(asm)
		for _, s := range [][3]int{{1, 1, 1}, {6, 16, 8}, {7, 17, 3}, {13, 40, 300}, {32, 900, 288}, {65, 33, 513}} {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					a := randMat(r, m, k)
					if ta {
						a = randMat(r, k, m).Tr()
					}
					b := randMat(r, k, n)
					if tb {
						b = randMat(r, n, k).Tr()
					}
					want := naive(a, b)
					c := M(make([]float32, m*n), m, n)
					for i := range c.Data {
						c.Data[i] = 1
					}
					Gemm(c, a, b, true, nil)
					for i, w := range want {
						if d := math.Abs(float64(c.Data[i]) - (w + 1)); d > 1e-4*math.Sqrt(float64(k))*max(1, math.Abs(w)) {
							t.Fatalf("kernel %s %dx%dx%d ta=%v tb=%v: c[%d] = %g, want %g", asm, m, n, k, ta, tb, i, c.Data[i], w+1)
						}
					}
					Gemm(c, a, b, false, nil)
					if d := math.Abs(float64(c.Data[0]) - want[0]); d > 1e-3 {
						t.Fatalf("overwrite: c[0] = %g, want %g", c.Data[0], want[0])
					}
				}
			}
		}
	}
}

func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][3]int{{32, 900, 288}, {64, 169, 576}, {128, 512, 2304}, {256, 256, 256}} {
		m, n, k := s[0], s[1], s[2]
		a, bb, c := randMat(r, m, k), randMat(r, k, n), M(make([]float32, m*n), m, n)
		var buf GemmBuf
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				Gemm(c, a, bb, false, &buf)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
