//go:build linux

package prefetch

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/cuda/emu"
)

// TestNormalizePTXMatchesCPU runs the embedded normalize kernels in the
// CUDA emulator, in every build: for every channel count, both layouts and
// both float dtypes they give the CPU device's bits.
func TestNormalizePTXMatchesCPU(t *testing.T) {
	d, err := emu.New(emu.Config{Devices: 1, Seed: 7})
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
	m, err := d.LoadModule("normalize.ptx", normalizePTX)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StreamCreate()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 8*3*1024 + 5
	src := pixels(n)
	stage, _ := d.MemAlloc(n)
	out, _ := d.MemAlloc(4 * n)
	if err := d.CopyHtoDAsync(stage, src, s); err != nil {
		t.Fatal(err)
	}
	start, steps := time.Now(), d.Instructions()
	for nc := 1; nc <= MaxNormChannels; nc++ {
		mean, std := make([]float64, nc), make([]float64, nc)
		for c := range nc {
			mean[c], std[c] = 0.3+0.1*float64(c), 0.2+0.05*float64(c)
		}
		for _, plane := range []int{0, 1024} {
			for _, half := range []bool{false, true} {
				k, _ := NewNorm(mean, std, nc, plane, half)
				name := "normalize_f32"
				if half {
					name = "normalize_f16"
				}
				fn, err := m.Function(name)
				if err != nil {
					t.Fatal(err)
				}
				args := []any{out, stage, uint64(n), uint32(plane), uint32(nc)}
				for _, v := range [][]float32{k.Scale, k.Bias} {
					for c := range MaxNormChannels {
						args = append(args, float32(0))
						if c < nc {
							args[len(args)-1] = v[c]
						}
					}
				}
				if err := fn.Launch(emu.Dim3{(n + 255) / 256, 1, 1}, emu.Dim3{256, 1, 1}, 0, s, args...); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, k.OutBytes(n))
				if err := d.CopyDtoHAsync(got, out, s); err != nil {
					t.Fatal(err)
				}
				if err := s.Synchronize(); err != nil {
					t.Fatal(err)
				}
				k.once.Do(k.tables)
				want := make([]byte, k.OutBytes(n))
				k.slow(want, src, 0, n)
				if !bytes.Equal(got, want) {
					i := 0
					for got[i] == want[i] {
						i++
					}
					w := 4
					if half {
						w = 2
					}
					i -= i % w
					t.Errorf("%d channels, plane %d, half %v: value %d is %x, the CPU's %x", nc, plane, half, i/w, got[i:i+w], want[i:i+w])
				}
			}
		}
	}
	steps = d.Instructions() - steps
	t.Logf("%d instructions in %v: %.0f M instructions/s", steps, time.Since(start), float64(steps)/time.Since(start).Seconds()/1e6)
}
