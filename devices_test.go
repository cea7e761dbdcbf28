package pipe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

func withDevices(n, depth int) Stage {
	return Prefetch(PrefetchConfig{Depth: depth, Devices: fmt.Sprintf("cpu:%d", n)})
}

// withSlowDevices is withDevices with simulated devices that take at
// least delay per copy, opened through PrefetchConfig.Open.
func withSlowDevices(n, depth int, delay time.Duration) Stage {
	return Prefetch(PrefetchConfig{Depth: depth, Devices: fmt.Sprintf("cpu:%d", n), Open: func(i int) (prefetch.Device, error) {
		return prefetch.NewCPU(i, prefetch.WithCopyDelay(delay)), nil
	}})
}

// hostStream returns the samples and checksum of each epoch without devices.
func hostStream(t *testing.T, stages []Stage, epochs int) ([][]int, []string) {
	t.Helper()
	p := mustNew(t, stages...)
	var samples [][]int
	stats, err := p.Run(context.Background(), RunOptions{Epochs: epochs, Checksum: true, OnBatch: func(b *Batch) error {
		samples = append(samples, append([]int(nil), b.Samples...))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, s := range stats {
		sums = append(sums, s.Checksum)
	}
	return samples, sums
}

// TestDeviceSlicesAreTheStream: each device gets the contiguous slices of
// every global batch in order, and together they are the single-device
// stream byte for byte — also through a slow device, which would expose a
// host slab reused while a copy still reads it.
func TestDeviceSlicesAreTheStream(t *testing.T) {
	stages := recipe(synth(t, 640))
	batches, sums := hostStream(t, stages, 2)
	for _, c := range []struct {
		devices int
		delay   time.Duration
	}{{2, 0}, {4, 0}, {2, 3 * time.Millisecond}} {
		p := mustNew(t, append(recipe(synth(t, 640)), withSlowDevices(c.devices, 3, c.delay))...)
		for e := range 2 {
			x, err := p.DeviceEpoch(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			sum := NewChecksum()
			for b := 0; ; b++ {
				var got []int
				var done bool
				for d := range c.devices {
					db, err := x.Next(d)
					if errors.Is(err, io.EOF) {
						done = true
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if db.Index != b || db.Device != d || db.N != 64/c.devices {
						t.Fatalf("device %d got batch %d (%d samples), want batch %d", d, db.Index, db.N, b)
					}
					got = append(got, db.Samples...)
					sum.AddSamples(db.Data(), db.Labels)
					db.Release()
				}
				if done {
					break
				}
				if want := batches[e*10+b]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%d devices, epoch %d batch %d: slices %v, want %v", c.devices, e, b, got, want)
				}
			}
			if sum.String() != sums[e] {
				t.Errorf("%d devices (delay %v), epoch %d: checksum %s, want %s", c.devices, c.delay, e, sum, sums[e])
			}
			x.Close()
		}
		p.Close()
	}
	goleak.VerifyNone(t)
}

// TestDeviceConsumersOnTheirOwnGoroutines: one consumer per device, as
// replicas run; each sees its batches in order.
func TestDeviceConsumersOnTheirOwnGoroutines(t *testing.T) {
	p := mustNew(t, append(recipe(synth(t, 640)), withDevices(2, 2))...)
	x, err := p.DeviceEpoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for d := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				db, err := x.Next(d)
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Error(err)
					}
					return
				}
				if db.Index != i {
					t.Errorf("device %d: batch %d, want %d", d, db.Index, i)
				}
				counts[d]++
				db.Release()
			}
		})
	}
	wg.Wait()
	x.Close()
	p.Close()
	_, ds := x.Stats()
	if counts[0] != 10 || counts[1] != 10 || ds[0].Batches != 10 || ds[1].Bytes != 10*32*3*32*32*4 {
		t.Errorf("counts %v, stats %+v", counts, ds)
	}
	goleak.VerifyNone(t)
}

// TestDeviceBackpressure: a consumer that stops holds production back, with
// memory bounded by the queues and slabs.
// delivered is the number of slices device d has received so far.
func delivered(x *DeviceEpoch, d int) int64 {
	_, ds := x.Stats()
	return ds[d].Batches
}

func TestDeviceBackpressure(t *testing.T) {
	p := mustNew(t, append(recipe(synth(t, 6400)), withDevices(2, 2))...)
	x, err := p.DeviceEpoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	// Wait (however slow the machine, e.g. under -race) until the producer
	// is held back by device 0's full queue: the stats count a wait while
	// it lasts. The queue then holds exactly its depth, and nothing more
	// can arrive without a consumer. No step depends on how long anything
	// takes.
	for start := time.Now(); producerWait(x, 0) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("the producer never waited for device 0 (%d batches delivered)", delivered(x, 0))
		}
	}
	if a := delivered(x, 0); a != 2 {
		t.Fatalf("with no consumer, device 0 received %d batches when production stopped: want the queue depth, 2", a)
	}
	if out := p.Buffers().SlabsHeld; out > p.Buffers().Slabs {
		t.Fatalf("%d slabs out of %d", out, p.Buffers().Slabs)
	}
	// Consumers resume (round-robin, as replicas advance together): a
	// device that stops holds every device back, which is the point.
	for range 5 {
		for d := range 2 {
			db, err := x.Next(d)
			if err != nil {
				t.Fatal(err)
			}
			db.Release()
		}
	}
	if w := producerWait(x, 0); w == 0 {
		t.Errorf("producer wait %v: the stopped consumer should show", w)
	}
}

func producerWait(x *DeviceEpoch, d int) float64 {
	_, ds := x.Stats()
	return ds[d].ProducerWaitSeconds
}

func TestDeviceCancelReleasesEverything(t *testing.T) {
	p := mustNew(t, append(recipe(synth(t, 6400)), withSlowDevices(2, 3, time.Millisecond))...)
	ctx, cancel := context.WithCancel(context.Background())
	x, err := p.DeviceEpoch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	held, _ := x.Next(0)
	x.Next(1)
	cancel()
	if _, err := x.Next(0); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v", err)
	}
	x.Close()
	held.Release()
	if p.Buffers().SlabsHeld != 0 {
		t.Errorf("%d host slabs not returned", p.Buffers().SlabsHeld)
	}
	devs := p.Buffers().Devices
	if len(devs) != 2 {
		t.Fatalf("buffers of %d devices, want 2", len(devs))
	}
	for d, b := range devs {
		if b.Held != boolInt(d == 1) {
			t.Errorf("device %d: %d of %d buffers held; want %d", d, b.Held, b.All, boolInt(d == 1))
		}
	}
	p.Close()
	goleak.VerifyNone(t)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestPrefetchConfigErrors(t *testing.T) {
	for _, c := range []struct {
		stages []Stage
		want   string
	}{
		{append(recipe(synth(t, 640)), withDevices(3, 2)), "batch 64 does not divide into 3 devices"},
		{append(recipe(synth(t, 650)), withDevices(4, 2)), "last batch of an epoch has 10 samples"},
		{append(recipe(synth(t, 640)), Prefetch(PrefetchConfig{Devices: "all"})), "cuda build"},
		{append(recipe(synth(t, 640)), Prefetch(PrefetchConfig{Devices: "gpu"})), "want cpu:N"},
		{append(append(recipe(synth(t, 640))[:6], withDevices(2, 2)), Batching(64, false)), "comes after batch"},
		{append(recipe(synth(t, 640)), withDevices(2, 2), ToTensor(transform.NCHW, transform.Float32)), "nothing may follow prefetch"},
	} {
		if c.want == "cuda build" && prefetch.CUDACompiled {
			continue // devices=all finds GPUs in the cuda and cudaemu builds
		}
		if _, err := New(c.stages...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}

// onDevice returns the recipe with normalize moved to the devices and the
// output tensor given.
func onDevice(t *testing.T, src source.Source, layout transform.Layout, dtype transform.DType, extra ...Stage) []Stage {
	stages := recipe(src)
	norm, _ := transform.Normalize([]float64{0.49, 0.48, 0.45}, []float64{0.25, 0.24, 0.26})
	stages[5] = DeviceNormalize(norm)
	stages[7] = ToTensor(layout, dtype)
	return append(stages, extra...)
}

// TestDeviceNormalizeEqualsHost: with normalize where=device, batches cross
// as uint8 (a quarter of the bytes) and each device's slice equals the
// host-normalised stream to float tolerance, in both layouts and float
// dtypes.
func TestDeviceNormalizeEqualsHost(t *testing.T) {
	for _, c := range []struct {
		layout transform.Layout
		dtype  transform.DType
		tol    float64
	}{{transform.NCHW, transform.Float32, 1e-6}, {transform.NHWC, transform.Float32, 1e-6}, {transform.NCHW, transform.Float16, 2e-3}} {
		stages := onDevice(t, synth(t, 640), c.layout, c.dtype)
		stages[5] = recipe(synth(t, 1))[5] // normalize on the host
		host := mustNew(t, stages...)
		var want [][]byte
		if _, err := host.Run(context.Background(), RunOptions{OnBatch: func(b *Batch) error {
			want = append(want, append([]byte(nil), b.Data...))
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		p := mustNew(t, onDevice(t, synth(t, 640), c.layout, c.dtype, withDevices(2, 3))...)
		if s := p.Summary(); !s.NormalizeOnDevice || s.HostTensor.DType != transform.Uint8 || p.Tensor().String() != host.Tensor().String() {
			t.Fatalf("tensors: host %v, out %v, want out %v", s.HostTensor, p.Tensor(), host.Tensor())
		}
		x, err := p.DeviceEpoch(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; ; b++ {
			var got []byte
			db, err := x.Next(0)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, db.Data()...)
			db.Release()
			db, err = x.Next(1)
			if err != nil {
				t.Fatal(err)
			}
			// CopyTo is how a GPU's slice is read; here it must agree.
			buf := make([]byte, db.Bytes())
			if err := db.CopyTo(buf); err != nil || !bytes.Equal(buf, db.Data()) {
				t.Fatalf("CopyTo: %v", err)
			}
			got = append(got, buf...)
			db.Release()
			if len(got) != len(want[b]) {
				t.Fatalf("batch %d: %d bytes, want %d", b, len(got), len(want[b]))
			}
			for i := 0; i < len(got)/c.dtype.Size(); i++ {
				g, w := elem(got, i, c.dtype), elem(want[b], i, c.dtype)
				if math.Abs(g-w) > c.tol*max(1, math.Abs(w)) {
					t.Fatalf("%s %s batch %d value %d: %g on the device, %g on the host", c.layout, c.dtype, b, i, g, w)
				}
			}
		}
		x.Close()
		_, ds := x.Stats()
		if sb := 32 * 32 * 3; ds[0].Bytes != int64(10*32*sb) {
			t.Errorf("device 0 received %d bytes, want %d (uint8)", ds[0].Bytes, 10*32*sb)
		}
	}
}

func elem(b []byte, i int, dt transform.DType) float64 {
	if dt == transform.Float16 {
		return float64(transform.Float16To32(uint16(b[2*i]) | uint16(b[2*i+1])<<8))
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
}

func TestDeviceNormalizeConfigErrors(t *testing.T) {
	for _, c := range []struct {
		stages []Stage
		want   string
	}{
		{onDevice(t, synth(t, 640), transform.NCHW, transform.Float32), "add a prefetch stage"},
		{onDevice(t, synth(t, 640), transform.NCHW, transform.Uint8, withDevices(2, 2)), "dtype=uint8 cannot hold normalized values"},
	} {
		if _, err := New(c.stages...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}

// TestRunConsumeFeedsEveryDevice: with Consume, one consumer per device
// takes every slice, and the stall figures cover the epoch.
func TestRunConsumeFeedsEveryDevice(t *testing.T) {
	p := mustNew(t, append(recipe(synth(t, 640)), withDevices(2, 2))...)
	var mu sync.Mutex
	images := 0
	stats, err := p.Run(context.Background(), RunOptions{Epochs: 2, Consume: time.Millisecond, OnImages: func(n int) {
		mu.Lock()
		images += n
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if images != 2*640 {
		t.Errorf("consumers took %d images, want %d", images, 2*640)
	}
	for _, s := range stats {
		for _, d := range s.Devices {
			if d.Batches != 10 || d.StallPct < 0 || d.StallPct > 100 || d.StallSeconds > s.Seconds {
				t.Errorf("epoch %d %s: %+v over %.3f s", s.Epoch, d.Device, d, s.Seconds)
			}
		}
	}
	if _, err := p.Run(context.Background(), RunOptions{Consume: time.Millisecond, Checksum: true}); err == nil {
		t.Error("Consume with Checksum accepted")
	}
}

// TestDeviceOpenError: a device a program opens itself (PrefetchConfig.Open)
// that fails to open fails the epoch with its error and index, and closes
// the devices opened before it.
func TestDeviceOpenError(t *testing.T) {
	var opened []*closeCounter
	boom := errors.New("no such board")
	p := mustNew(t, append(recipe(synth(t, 640)), Prefetch(PrefetchConfig{Devices: "cpu:4", Open: func(i int) (prefetch.Device, error) {
		if i == 2 {
			return nil, boom
		}
		d := &closeCounter{Device: prefetch.NewCPU(i)}
		opened = append(opened, d)
		return d, nil
	}}))...)
	defer p.Close()
	_, err := p.DeviceEpoch(context.Background(), 0)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "device 2") {
		t.Fatalf("epoch over a device that fails to open: %v", err)
	}
	for i, d := range opened {
		if d.closed != 1 {
			t.Errorf("device %d opened before the failure closed %d times", i, d.closed)
		}
	}
}

type closeCounter struct {
	prefetch.Device
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return c.Device.Close() }
