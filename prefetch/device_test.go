package prefetch

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestCPUDeviceCopiesInOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	d := NewCPU(1, WithCopyDelay(2*time.Millisecond))
	if d.Name() != "cpu:1" {
		t.Errorf("name %q", d.Name())
	}
	var evs []Event
	var bufs []Buffer
	for i := range 5 {
		b, _ := d.Alloc(100)
		src := bytes.Repeat([]byte{byte(i + 1)}, 100)
		ev, err := d.CopyAsync(b, src)
		if err != nil {
			t.Fatal(err)
		}
		evs, bufs = append(evs, ev), append(bufs, b)
	}
	// The last copy completes after the others: one stream, in order.
	if err := evs[4].Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		select {
		case <-evs[i].(taskEvent).t.Done():
		default:
			t.Fatalf("copy %d not done when copy 4 was", i)
		}
		if b.Host()[99] != byte(i+1) {
			t.Fatalf("buffer %d holds %d", i, b.Host()[99])
		}
	}
	if s := d.Stats(); s.Bytes != 500 || s.Time < 10*time.Millisecond {
		t.Errorf("Stats = %d bytes in %v", s.Bytes, s.Time)
	}
	small, _ := d.Alloc(10)
	if _, err := d.CopyAsync(small, make([]byte, 11)); err == nil {
		t.Error("copy larger than the buffer accepted")
	}
	// Close finishes queued copies, then refuses new ones.
	b, _ := d.Alloc(10)
	ev, _ := d.CopyAsync(b, []byte("0123456789"))
	d.Close()
	if err := ev.Wait(context.Background()); err != nil || string(b.Host()) != "0123456789" {
		t.Errorf("copy asked before Close: %v %q", err, b.Host())
	}
	if _, err := d.CopyAsync(b, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("copy after Close: %v", err)
	}
}

func TestQueueAccounting(t *testing.T) {
	q := NewQueue[int](1)
	ctx := context.Background()
	q.Put(ctx, 1)
	go func() { time.Sleep(20 * time.Millisecond); q.Get(ctx) }()
	if err := q.Put(ctx, 2); err != nil { // waits for the Get
		t.Fatal(err)
	}
	if s := q.Stats(); s.ProducerWait < 15*time.Millisecond || s.Items != 2 {
		t.Errorf("producer wait %v, items %d", s.ProducerWait, s.Items)
	}
	go func() { time.Sleep(20 * time.Millisecond); q.Close() }()
	v, ok, _ := q.Get(ctx)
	if v != 2 || !ok {
		t.Fatalf("Get = %d %v", v, ok)
	}
	if _, ok, _ := q.Get(ctx); ok {
		t.Error("Get after Close returned an item")
	}
	if q.Stats().ConsumerWait < 15*time.Millisecond {
		t.Errorf("consumer wait %v", q.Stats().ConsumerWait)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	full := NewQueue[int](1)
	full.Put(ctx, 0)
	if err := full.Put(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Put on a full queue with a cancelled context: %v", err)
	}
}

// TestCPUDevicePanicIsTheEventsError: work that panics on a CPU device's
// stream fails its own event with the panic and its stack; the stream goes
// on with the next operation.
func TestCPUDevicePanicIsTheEventsError(t *testing.T) {
	d := NewCPU(0)
	defer d.Close()
	ev, err := d.enqueue(func() error { panic("kernel fault") })
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "kernel fault") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("want the panic with its stack, got %v", err)
	}
	b, _ := d.Alloc(4)
	ev, err = d.CopyAsync(b, []byte{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(context.Background()); err != nil || b.Host()[3] != 4 {
		t.Fatalf("the stream stopped after a panic: %v", err)
	}
}
