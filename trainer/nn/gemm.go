package nn

// Single-precision matrix multiply, the kernel every layer's work reduces
// to. Matrices are row-major with a stride (the distance in elements between
// the starts of consecutive rows), as in BLAS with the operands swapped.
//
// The method is the one BLIS and OpenBLAS use: the K dimension is cut into
// blocks of kc; for each block, B is packed into panels of nr columns and A
// into panels of mr rows, both contiguous in the order the micro-kernel reads
// them, and the micro-kernel accumulates an mr×nr tile of C in registers
// (AVX-512 or AVX2+FMA assembly where the CPU has it, Go elsewhere). Packing also
// absorbs the transposes, so one kernel serves A×B, Aᵀ×B and A×Bᵀ.

const (
	mr = 12  // rows of a C tile: one broadcast A value per row per k step
	nr = 16  // columns of a C tile: two 8-float vectors
	kc = 256 // depth of a block: an A panel (12×256) and B panel (256×16) stay in L1/L2
)

// Mat is a row-major matrix view: element (i, j) is Data[i*Stride+j], or,
// with T set, the transpose of that view (element (i, j) is
// Data[j*Stride+i]). Rows and Cols are the view's, after any transpose.
type Mat struct {
	Data       []float32
	Rows, Cols int
	Stride     int
	T          bool
}

// M returns the r×c row-major matrix held densely in data.
func M(data []float32, r, c int) Mat { return Mat{Data: data, Rows: r, Cols: c, Stride: c} }

// Tr returns the transpose of m, without copying.
func (m Mat) Tr() Mat {
	return Mat{Data: m.Data, Rows: m.Cols, Cols: m.Rows, Stride: m.Stride, T: !m.T}
}

func (m Mat) at(i, j int) float32 {
	if m.T {
		return m.Data[j*m.Stride+i]
	}
	return m.Data[i*m.Stride+j]
}

// Gemm computes c = a×b, or c += a×b when acc is set. c must not be
// transposed and must not overlap a or b. buf is scratch space reused
// across calls (it grows as needed); pass nil to allocate.
func Gemm(c, a, b Mat, acc bool, buf *GemmBuf) {
	if a.Rows != c.Rows || b.Cols != c.Cols || a.Cols != b.Rows || c.T {
		panic("trainer: Gemm shapes do not match")
	}
	m, n, k := c.Rows, c.Cols, a.Cols
	if !acc {
		for i := range m {
			clear(c.Data[i*c.Stride : i*c.Stride+n])
		}
	}
	if m == 0 || n == 0 || k == 0 {
		return
	}
	if buf == nil {
		buf = new(GemmBuf)
	}
	np := (n + nr - 1) / nr
	mp := (m + mr - 1) / mr
	for k0 := 0; k0 < k; k0 += kc {
		kb := min(kc, k-k0)
		bp := buf.b(np * nr * kb)
		packB(bp, b, k0, kb, n)
		ap := buf.a(mp * mr * kb)
		packA(ap, a, k0, kb, m)
		for i := 0; i < m; i += mr {
			pa := ap[(i/mr)*mr*kb:]
			for j := 0; j < n; j += nr {
				pb := bp[(j/nr)*nr*kb:]
				if i+mr <= m && j+nr <= n {
					kernel(&c.Data[i*c.Stride+j], c.Stride, pa, pb, kb)
					continue
				}
				// An edge tile: compute into a full tile, add what fits.
				var t [mr * nr]float32
				kernel(&t[0], nr, pa, pb, kb)
				for ii := 0; ii < mr && i+ii < m; ii++ {
					row := c.Data[(i+ii)*c.Stride+j:]
					for jj := 0; jj < nr && j+jj < n; jj++ {
						row[jj] += t[ii*nr+jj]
					}
				}
			}
		}
	}
}

// GemmBuf holds Gemm's packed panels between calls.
type GemmBuf struct{ pa, pb []float32 }

func (g *GemmBuf) a(n int) []float32 {
	if cap(g.pa) < n {
		g.pa = make([]float32, n)
	}
	return g.pa[:n]
}

func (g *GemmBuf) b(n int) []float32 {
	if cap(g.pb) < n {
		g.pb = make([]float32, n)
	}
	return g.pb[:n]
}

// packA copies rows of a, columns k0..k0+kb, into panels of mr rows: panel
// p holds, for each k, the mr values a[p*mr+0..mr-1][k] (zero past the last
// row).
func packA(dst []float32, a Mat, k0, kb, m int) {
	for i0 := 0; i0 < m; i0 += mr {
		p := dst[(i0/mr)*mr*kb : (i0/mr+1)*mr*kb]
		rows := min(mr, m-i0)
		if !a.T {
			for ii := range rows {
				src := a.Data[(i0+ii)*a.Stride+k0 : (i0+ii)*a.Stride+k0+kb]
				for kk, v := range src {
					p[kk*mr+ii] = v
				}
			}
		} else {
			// a is stored as its transpose: row k of the storage holds
			// a[.][k], so each k gives mr consecutive values.
			for kk := range kb {
				src := a.Data[(k0+kk)*a.Stride+i0 : (k0+kk)*a.Stride+i0+rows]
				copy(p[kk*mr:kk*mr+rows], src)
			}
		}
		for ii := rows; ii < mr; ii++ {
			for kk := range kb {
				p[kk*mr+ii] = 0
			}
		}
	}
}

// packB copies rows k0..k0+kb of b into panels of nr columns: panel p holds,
// for each k, the nr values b[k][p*nr+0..nr-1] (zero past the last column).
func packB(dst []float32, b Mat, k0, kb, n int) {
	for j0 := 0; j0 < n; j0 += nr {
		p := dst[(j0/nr)*nr*kb : (j0/nr+1)*nr*kb]
		cols := min(nr, n-j0)
		if !b.T {
			for kk := range kb {
				src := b.Data[(k0+kk)*b.Stride+j0 : (k0+kk)*b.Stride+j0+cols]
				d := p[kk*nr : kk*nr+nr]
				copy(d, src)
				clear(d[cols:])
			}
		} else {
			for jj := range cols {
				src := b.Data[(j0+jj)*b.Stride+k0 : (j0+jj)*b.Stride+k0+kb]
				for kk, v := range src {
					p[kk*nr+jj] = v
				}
			}
			for kk := range kb {
				clear(p[kk*nr+cols : kk*nr+nr])
			}
		}
	}
}

// kernelGo is the micro-kernel in Go: c[i*ldc+j] += Σk pa[k*mr+i]·pb[k*nr+j]
// for the mr×nr tile at c.
func kernelGo(c *float32, ldc int, pa, pb []float32, kb int) {
	var t [mr][nr]float32
	for k := range kb {
		a := pa[k*mr : k*mr+mr : k*mr+mr]
		b := pb[k*nr : k*nr+nr : k*nr+nr]
		for i, av := range a {
			row := &t[i]
			for j, bv := range b {
				row[j] += av * bv
			}
		}
	}
	cs := unsafeSlice(c, (mr-1)*ldc+nr)
	for i := range mr {
		row := cs[i*ldc : i*ldc+nr]
		for j := range nr {
			row[j] += t[i][j]
		}
	}
}
