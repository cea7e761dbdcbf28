package prefetch

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/pipefeed/pipe/transform"
)

var (
	cifarMean = []float64{0.4914, 0.4822, 0.4465}
	cifarStd  = []float64{0.2470, 0.2435, 0.2616}
)

// pixels returns n bytes covering every value.
func pixels(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

// TestNormEqualsHostNormalize: the device conversion equals the host-side
// normalize (transform.TensorWriter) to float tolerance, in both layouts and both
// float dtypes, channel by channel.
func TestNormEqualsHostNormalize(t *testing.T) {
	shape := transform.Shape{C: 3, H: 4, W: 5}
	img := &transform.Image{Pix: pixels(shape.Len()), C: 3, H: 4, W: 5}
	norm, _ := transform.Normalize(cifarMean, cifarStd)
	for _, layout := range []transform.Layout{transform.NCHW, transform.NHWC} {
		for _, dt := range []transform.DType{transform.Float32, transform.Float16} {
			host, err := transform.ToTensor(layout, dt, norm, shape)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, host.SampleBytes())
			host.Write(want, img)
			// The uint8 the host ships for the device, in the same layout.
			raw, _ := transform.ToTensor(layout, transform.Uint8, nil, shape)
			u8 := make([]byte, raw.SampleBytes())
			raw.Write(u8, img)
			plane := 0
			if layout == transform.NCHW {
				plane = shape.H * shape.W
			}
			k, err := NewNorm(cifarMean, cifarStd, 3, plane, dt == transform.Float16)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, k.OutBytes(len(u8)))
			k.Apply(got, u8)
			for i := range u8 {
				g, w := value(got, i, dt), value(want, i, dt)
				tol := 1e-6 * max(1, math.Abs(w))
				if dt == transform.Float16 {
					tol = 1e-3 * max(1, math.Abs(w)) // one binary16 ulp
				}
				if math.Abs(g-w) > tol {
					t.Fatalf("%s %s value %d: device %g, host %g", layout, dt, i, g, w)
				}
			}
		}
	}
}

func value(b []byte, i int, dt transform.DType) float64 {
	if dt == transform.Float16 {
		return float64(transform.Float16To32(unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)[i]))
	}
	return float64(unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)[i])
}

// TestNormValueIsTwoRoundings pins the arithmetic the CUDA kernel repeats
// (__fmul_rn then __fadd_rn): Value must not be a fused multiply-add.
func TestNormValueIsTwoRoundings(t *testing.T) {
	k, _ := NewNorm(cifarMean, cifarStd, 3, 0, false)
	for c := range 3 {
		for v := range 256 {
			p := float32(v) * k.Scale[c]
			if got, want := k.Value(c, uint8(v)), p+k.Bias[c]; got != want {
				t.Fatalf("channel %d value %d: %g, want %g", c, v, got, want)
			}
		}
	}
}

func TestNormErrors(t *testing.T) {
	for _, c := range []struct {
		mean, std []float64
		channels  int
		want      string
	}{
		{[]float64{0}, []float64{1}, 5, "1 to 4 channels"},
		{[]float64{0, 0}, []float64{1}, 3, "finite"},
		{[]float64{math.Inf(1)}, []float64{1}, 1, "finite"},
	} {
		if _, err := NewNorm(c.mean, c.std, c.channels, 0, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewNorm(%v, %v, %d): %v, want %q", c.mean, c.std, c.channels, err, c.want)
		}
	}
}

// TestCPUNormalizeRunsAfterTheCopy: on a slow device, the conversion asked
// after a copy sees the copied bytes (one stream, in order).
func TestCPUNormalizeRunsAfterTheCopy(t *testing.T) {
	d := NewCPU(0, WithCopyDelay(5*time.Millisecond))
	defer d.Close()
	k, _ := NewNorm([]float64{0}, []float64{1}, 1, 0, false)
	src := pixels(1000)
	stage, _ := d.Alloc(len(src))
	out, _ := d.Alloc(k.OutBytes(len(src)))
	if _, err := d.CopyAsync(stage, src); err != nil {
		t.Fatal(err)
	}
	ev, err := d.NormalizeAsync(out, stage, len(src), k)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, out.Len())
	if err := d.Read(back, out); err != nil {
		t.Fatal(err)
	}
	for i, v := range src {
		if got := value(back, i, transform.Float32); got != float64(float32(v)/255) && math.Abs(got-float64(v)/255) > 1e-7 {
			t.Fatalf("value %d: %g, want %g", i, got, float64(v)/255)
		}
	}
	if _, err := d.NormalizeAsync(out, stage, len(src)+1, k); err == nil {
		t.Error("conversion of more values than the source holds accepted")
	}
	small, _ := d.Alloc(10)
	if _, err := d.NormalizeAsync(small, stage, 10, k); err == nil {
		t.Error("conversion into a buffer too small for the floats accepted")
	}
	if err := d.Read(make([]byte, out.Len()+1), out); err == nil {
		t.Error("read past the buffer accepted")
	}
	if s := d.Stats(); s.Bytes != 1000 {
		t.Errorf("copied %d bytes, want 1000 (conversions are not copies)", s.Bytes)
	}
}

// pinnedFake counts host allocations, as a GPU's page-locked allocator.
type pinnedFake struct {
	live  map[*byte]int
	fail  int // fail the fail-th allocation (from 1); 0 never
	calls int
}

func (f *pinnedFake) AllocHost(n int) ([]byte, error) {
	if f.calls++; f.calls == f.fail {
		return nil, errors.New("out of pinned memory")
	}
	b := make([]byte, n)
	f.live[&b[0]] = n
	return b, nil
}

func (f *pinnedFake) FreeHost(b []byte) error {
	if _, ok := f.live[&b[0]]; !ok {
		return errors.New("free of memory not allocated here")
	}
	delete(f.live, &b[0])
	return nil
}

func TestSlabPoolFromAHostAllocator(t *testing.T) {
	f := &pinnedFake{live: map[*byte]int{}}
	p, err := NewSlabPool(3, 64, 2, f)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Pinned() || len(f.live) != 3 {
		t.Fatalf("pinned %v, %d live allocations", p.Pinned(), len(f.live))
	}
	if err := p.Close(); err != nil || len(f.live) != 0 {
		t.Fatalf("Close: %v, %d allocations left", err, len(f.live))
	}
	// A failed allocation frees what came before and says which slab.
	f = &pinnedFake{live: map[*byte]int{}, fail: 2}
	if _, err := NewSlabPool(3, 64, 2, f); err == nil || !strings.Contains(err.Error(), "slab 2 of 3") || len(f.live) != 0 {
		t.Fatalf("failed allocation: %v, %d allocations left", err, len(f.live))
	}
}

// TestNormKernelMatchesTables: the AVX2 kernels give the tables' bits
// (Value's arithmetic), for every channel count, both layouts and both
// float dtypes, over lengths that leave every tail.
func TestNormKernelMatchesTables(t *testing.T) {
	if !affineKernel {
		t.Skip("no AVX2 here: the tables are the only path")
	}
	for nc := 1; nc <= MaxNormChannels; nc++ {
		mean, std := make([]float64, nc), make([]float64, nc)
		for c := range nc {
			mean[c], std[c] = 0.3+0.1*float64(c), 0.2+0.05*float64(c)
		}
		for _, plane := range []int{0, 1, 7, 24, 100, 1024} {
			for _, half := range []bool{false, true} {
				if half && !halfKernel {
					continue
				}
				for _, n := range []int{1, 23, 24, 25, 48 * nc, 3*1024 + 5} {
					src := pixels(n)
					k, _ := NewNorm(mean, std, nc, plane, half)
					fast := make([]byte, k.OutBytes(n))
					k.Apply(fast, src)
					slow := make([]byte, k.OutBytes(n))
					k.slow(slow, src, 0, n)
					if !bytes.Equal(fast, slow) {
						t.Fatalf("%d channels, plane %d, half %v, %d values: kernel and tables differ", nc, plane, half, n)
					}
				}
			}
		}
	}
}
