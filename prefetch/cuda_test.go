//go:build cuda || cudaemu

// These tests and benchmarks run on a GPU in the cuda build and on the
// CUDA emulator in the cudaemu build (go test -tags cudaemu ./prefetch, in
// CI). For a GPU, build the binary where Go and the CUDA headers are (see
// scripts/cuda-headers) and run it on the GPU machine:
//
//	go test -tags cuda -c -o prefetch-cuda.test ./prefetch
//	./prefetch-cuda.test -test.v -test.run CUDA -test.bench CUDA

package prefetch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/pipefeed/pipe/internal/cuda"
)

// TestMain prints the emulator's seed after a failure, so that the thread
// orders and stream delays that failed can be repeated.
func TestMain(m *testing.M) {
	code := m.Run()
	if seed, ok := cuda.Seed(); ok && code != 0 {
		fmt.Fprintf(os.Stderr, "cuda emulator seed %d: PIPE_CUDAEMU_SEED=%d repeats its thread orders and stream delays\n", seed, seed)
	}
	os.Exit(code)
}

func openGPU(tb testing.TB) *CUDA {
	tb.Helper()
	g, err := NewCUDA(0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := g.Close(); err != nil {
			tb.Error(err)
		}
	})
	return g
}

// TestCUDANormalizeMatchesCPU: the PTX kernel gives the CPU device's bits
// for every channel count, both layouts and both float dtypes.
func TestCUDANormalizeMatchesCPU(t *testing.T) {
	g := openGPU(t)
	const n = 8*3*1024 + 5
	src := pixels(n)
	stage, err := g.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(stage)
	out, err := g.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(out)
	if _, err := g.CopyAsync(stage, src); err != nil {
		t.Fatal(err)
	}
	for nc := 1; nc <= MaxNormChannels; nc++ {
		mean, std := make([]float64, nc), make([]float64, nc)
		for c := range nc {
			mean[c], std[c] = 0.3+0.1*float64(c), 0.2+0.05*float64(c)
		}
		for _, plane := range []int{0, 1024} {
			for _, half := range []bool{false, true} {
				k, _ := NewNorm(mean, std, nc, plane, half)
				ev, err := g.NormalizeAsync(out, stage, n, k)
				if err != nil {
					t.Fatal(err)
				}
				if err := ev.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, k.OutBytes(n))
				if err := g.Read(got, out); err != nil {
					t.Fatal(err)
				}
				k.once.Do(k.tables)
				want := make([]byte, k.OutBytes(n))
				k.slow(want, src, 0, n)
				if !bytes.Equal(got, want) {
					t.Fatalf("%d channels, plane %d, half %v: the GPU's values differ from the CPU device's", nc, plane, half)
				}
			}
		}
	}
}

// TestCUDAPinnedCopyRoundTrip: bytes copied from pinned and from pageable
// memory arrive intact, and the copy figures count them.
func TestCUDAPinnedCopyRoundTrip(t *testing.T) {
	g := openGPU(t)
	const n = 1 << 20
	pinned, err := g.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.FreeHost(pinned)
	copy(pinned, pixels(n))
	buf, _ := g.Alloc(n)
	defer g.Free(buf)
	for _, src := range [][]byte{pinned, pixels(n)} {
		ev, err := g.CopyAsync(buf, src)
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, n)
		if err := g.Read(back, buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, src) {
			t.Fatal("bytes changed on the way")
		}
	}
	if s := g.Stats(); s.Bytes != 2*n || s.Time <= 0 {
		t.Errorf("stats %+v", s)
	}
}

// BenchmarkCUDACopy measures host-to-device bandwidth (MB/s) per batch
// size: a plain cuMemcpyHtoDAsync loop from pinned memory (the baseline),
// the device's CopyAsync from pinned slabs, and from pageable Go memory.
func BenchmarkCUDACopy(b *testing.B) {
	g := openGPU(b)
	for _, size := range []int{1 << 20, 3 << 20, 38 << 20} { // CIFAR uint8 256; CIFAR float32 256; ImageNet uint8 256
		pinned, err := g.AllocHost(size)
		if err != nil {
			b.Fatal(err)
		}
		pageable := pixels(size)
		buf, _ := g.Alloc(size)
		b.Run(fmt.Sprintf("raw-pinned/%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			// A b.N loop, not b.Loop: the final synchronisation must be
			// inside the timing.
			err := g.ctx.Do(func() error {
				for range b.N {
					if err := cuda.CopyHtoDAsync(buf.(*cudaBuffer).ptr, pinned, g.stream); err != nil {
						return err
					}
				}
				return g.stream.Synchronize()
			})
			if err != nil {
				b.Fatal(err)
			}
		})
		for _, c := range []struct {
			name string
			src  []byte
		}{{"device-pinned", pinned}, {"device-pageable", pageable}} {
			b.Run(fmt.Sprintf("%s/%dMiB", c.name, size>>20), func(b *testing.B) {
				b.SetBytes(int64(size))
				var last Event
				for range b.N {
					ev, err := g.CopyAsync(buf, c.src)
					if err != nil {
						b.Fatal(err)
					}
					last = ev
				}
				if err := last.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
			})
		}
		g.Free(buf)
		g.FreeHost(pinned)
	}
}
