//go:build linux

package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/cuda/emu"
)

// onEmulator runs f with a fresh emulated GPU's context current, the
// kernels loaded and a stream, in every build.
func onEmulator(t testing.TB, f func(d *emu.Driver, m *emu.LoadedModule, s *emu.Stream)) {
	t.Helper()
	onEmulatorPTX(t, kernelsPTX, f)
}

// onEmulatorPTX is onEmulator with the kernels of ptx.
func onEmulatorPTX(t testing.TB, ptx string, f func(d *emu.Driver, m *emu.LoadedModule, s *emu.Stream)) {
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
	m, err := d.LoadModule("kernels.ptx", ptx)
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

// TestPlantedBugsFound plants, in the shipped kernels and their launches,
// the bugs the emulator exists to catch, and checks that each stops the
// kernel with an error naming it: an index one past the end (relu_fwd
// reading x[i+1]), a missing __syncthreads (the GEMM reading its tile
// before every thread has written it), and a launch with two arguments
// swapped (bias_rows with n and out exchanged). A missing stream wait is
// internal/cuda/emu's TestMissingWaitSeen.
func TestPlantedBugsFound(t *testing.T) {
	launch := func(t *testing.T, ptx, kernel string, grid emu.Dim3, args func(d *emu.Driver, s *emu.Stream) []any) error {
		var err error
		onEmulatorPTX(t, ptx, func(d *emu.Driver, m *emu.LoadedModule, s *emu.Stream) {
			fn, ferr := m.Function(kernel)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if err = fn.Launch(grid, emu.Dim3{256, 1, 1}, 0, s, args(d, s)...); err == nil {
				err = s.Synchronize()
			}
		})
		return err
	}
	buf := func(t *testing.T, d *emu.Driver, s *emu.Stream, n int) emu.Ptr {
		p, err := d.MemAlloc(int64(4 * n))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.CopyHtoDAsync(p, float32Bytes(make([]float32, n)), s); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("out-of-range index", func(t *testing.T) {
		k := entry(kernelsPTX, "relu_fwd")
		planted := regexp.MustCompile(`(ld\.global\.f32\s+%f\d+, \[%rd\d+)\]`).ReplaceAllString(k, "$1+4]")
		if planted == k {
			t.Fatal("relu_fwd has no load to plant in")
		}
		err := launch(t, strings.Replace(kernelsPTX, k, planted, 1), "relu_fwd", emu.Dim3{4, 1, 1}, func(d *emu.Driver, s *emu.Stream) []any {
			return []any{buf(t, d, s, 1000), buf(t, d, s, 1000), int64(1000)}
		})
		if err == nil || !strings.Contains(err.Error(), "kernel relu_fwd") || !strings.Contains(err.Error(), "out of bounds") {
			t.Fatalf("relu_fwd reading x[i+1]: %v, want an out-of-bounds error naming relu_fwd", err)
		}
		t.Log(err)
	})

	t.Run("missing __syncthreads", func(t *testing.T) {
		k := entry(kernelsPTX, "gemm_nn_16")
		planted := strings.Replace(k, "\tbar.sync \t0;\n", "", 1)
		if planted == k {
			t.Fatal("gemm_nn_16 has no barrier to remove")
		}
		const M, N, K = 16, 64, 40
		err := launch(t, strings.Replace(kernelsPTX, k, planted, 1), "gemm_nn_16", emu.Dim3{1, 1, 1}, func(d *emu.Driver, s *emu.Stream) []any {
			return []any{int32(M), int32(N), int32(K), buf(t, d, s, M*K), int32(K), int64(M * K), buf(t, d, s, K*N), int32(N), int64(K * N),
				buf(t, d, s, M*N), int32(N), int64(M * N), int32(0)}
		})
		if err == nil || !strings.Contains(err.Error(), "kernel gemm_nn_16") || !strings.Contains(err.Error(), "shared-memory race") {
			t.Fatalf("gemm_nn_16 without its first barrier: %v, want a shared-memory race naming gemm_nn_16", err)
		}
		t.Log(err)
	})

	t.Run("swapped launch argument", func(t *testing.T) {
		const n, out = 64, 10
		err := launch(t, kernelsPTX, "bias_rows", emu.Dim3{1, 1, 1}, func(d *emu.Driver, s *emu.Stream) []any {
			return []any{buf(t, d, s, n*out), buf(t, d, s, out), int32(out), int32(n)} // n and out swapped
		})
		if err == nil || !strings.Contains(err.Error(), "kernel bias_rows") || !strings.Contains(err.Error(), "out of bounds") {
			t.Fatalf("bias_rows with n and out swapped: %v, want an out-of-bounds error naming bias_rows", err)
		}
		t.Log(err)
	})
}
