package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/cuda/emu"
)

// onEmulator runs f with a fresh emulated GPU's context current, the
// kernels loaded and a stream, in every build.
func onEmulator(t testing.TB, f func(d *emu.Driver, m *emu.LoadedModule, s *emu.Stream)) {
	t.Helper()
	d, err := emu.New(emu.Config{Devices: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.ReleasePrimary(0)
	if err := d.SetCurrent(c); err != nil {
		t.Fatal(err)
	}
	defer d.SetCurrent(nil)
	m, err := d.LoadModule("kernels.ptx", kernelsPTX)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StreamCreate()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	f(d, m, s)
}

func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// TestGEMMKernels runs every GEMM kernel, in every build, on the CUDA
// emulator against a float64 product: each tile shape and transposition,
// with ragged edges, a batch of two and accumulation. It also measures the
// interpreter's speed.
func TestGEMMKernels(t *testing.T) {
	onEmulator(t, func(d *emu.Driver, mod *emu.LoadedModule, s *emu.Stream) {
		const M, N, K, batch = 37, 70, 45, 2
		a, b, c0 := make([]float32, batch*M*K), make([]float32, batch*K*N), make([]float32, batch*M*N)
		for i := range a {
			a[i] = float32(i*7%23)/23 - 0.5
		}
		for i := range b {
			b[i] = float32(i*5%19)/19 - 0.5
		}
		for i := range c0 {
			c0[i] = float32(i*3%17)/17 - 0.5
		}
		alloc := func(v []float32) emu.Ptr {
			p, err := d.MemAlloc(int64(4 * len(v)))
			if err != nil {
				t.Fatal(err)
			}
			if err := d.CopyHtoDAsync(p, float32Bytes(v), s); err != nil {
				t.Fatal(err)
			}
			return p
		}
		pa, pb := alloc(a), alloc(b)
		start, cpu0, steps := time.Now(), cpuTime(), d.Instructions()
		for _, bm := range []int{16, 32, 64} {
			bn := map[int]int{16: 256, 32: 128, 64: 64}[bm]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, acc := range []bool{false, true} {
						lda, ldb := K, N
						if ta {
							lda = M
						}
						if tb {
							ldb = K
						}
						pc := alloc(c0)
						name := fmt.Sprintf("gemm_%s%s_%d", map[bool]string{false: "n", true: "t"}[ta], map[bool]string{false: "n", true: "t"}[tb], bm)
						fn, err := mod.Function(name)
						if err != nil {
							t.Fatal(err)
						}
						b2i := map[bool]int32{false: 0, true: 1}
						err = fn.Launch(emu.Dim3{(N + bn - 1) / bn, (M + bm - 1) / bm, batch}, emu.Dim3{256, 1, 1}, 0, s,
							int32(M), int32(N), int32(K), pa, int32(lda), int64(M*K), pb, int32(ldb), int64(K*N), pc, int32(N), int64(M*N), b2i[acc])
						if err != nil {
							t.Fatal(err)
						}
						out := make([]byte, 4*len(c0))
						if err := d.CopyDtoHAsync(out, pc, s); err != nil {
							t.Fatal(err)
						}
						if err := s.Synchronize(); err != nil {
							t.Fatal(err)
						}
						for z := range batch {
							for i := range M {
								for j := range N {
									var want float64
									for k := range K {
										ai, bi := i*lda+k, k*ldb+j
										if ta {
											ai = k*lda + i
										}
										if tb {
											bi = j*ldb + k
										}
										want += float64(a[z*M*K+ai]) * float64(b[z*K*N+bi])
									}
									o := z*M*N + i*N + j
									if acc {
										want += float64(c0[o])
									}
									got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*o:]))
									if math.Abs(float64(got)-want) > 1e-5*(1+math.Abs(want)) {
										t.Fatalf("%s acc %v: C[%d,%d,%d] = %g, want %g", name, acc, z, i, j, got, want)
									}
								}
							}
						}
						d.MemFree(pc)
					}
				}
			}
		}
		el, cpu := time.Since(start), cpuTime()-cpu0
		n := d.Instructions() - steps
		t.Logf("the interpreter: %d PTX instructions in %v (%.0f M/s) on %d processors, %v of CPU time (%.0f M/s per processor)",
			n, el.Round(time.Millisecond), float64(n)/el.Seconds()/1e6, runtime.GOMAXPROCS(0), cpu.Round(time.Millisecond), float64(n)/cpu.Seconds()/1e6)
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
