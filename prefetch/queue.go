package prefetch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Queue is a bounded FIFO feeding one device's consumer, with the figures
// that answer "is this device starved?": how long the consumer waited for
// an item, and how long the producer waited for room.
type Queue[T any] struct {
	ch           chan T
	consumerWait atomic.Int64
	items        atomic.Int64
	// The producer's waits for room: those that ended, and the start of
	// the one in progress (zero when none), so that Stats counts a stall
	// while it lasts. One producer Puts at a time.
	waitMu       sync.Mutex
	producerWait time.Duration
	waitingSince time.Time
}

// NewQueue returns a queue holding at most depth items (depth ≥ 1).
func NewQueue[T any](depth int) *Queue[T] {
	return &Queue[T]{ch: make(chan T, max(depth, 1))}
}

// Put adds v, waiting while the queue is full, until ctx is done.
func (q *Queue[T]) Put(ctx context.Context, v T) error {
	select {
	case q.ch <- v:
		q.items.Add(1)
		return nil
	default:
	}
	q.waitMu.Lock()
	q.waitingSince = time.Now()
	q.waitMu.Unlock()
	defer func() {
		q.waitMu.Lock()
		q.producerWait += time.Since(q.waitingSince)
		q.waitingSince = time.Time{}
		q.waitMu.Unlock()
	}()
	select {
	case q.ch <- v:
		q.items.Add(1)
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Get takes the next item, waiting while the queue is empty; ok is false
// once the queue is closed and drained.
func (q *Queue[T]) Get(ctx context.Context) (v T, ok bool, err error) {
	select {
	case v, ok = <-q.ch:
		return v, ok, nil
	default:
	}
	t := time.Now()
	defer func() { q.consumerWait.Add(int64(time.Since(t))) }()
	select {
	case v, ok = <-q.ch:
		return v, ok, nil
	case <-ctx.Done():
		return v, false, context.Cause(ctx)
	}
}

// Close marks the end of the items; Put must not be called after it.
func (q *Queue[T]) Close() { close(q.ch) }

// Drain takes every item left, without waiting.
func (q *Queue[T]) Drain(f func(T)) {
	for {
		select {
		case v, ok := <-q.ch:
			if !ok {
				return
			}
			f(v)
		default:
			return
		}
	}
}

// AddConsumerWait counts time the consumer waited outside Get, such as for
// a copy to complete.
func (q *Queue[T]) AddConsumerWait(d time.Duration) { q.consumerWait.Add(int64(d)) }

// QueueStats are a queue's figures so far.
type QueueStats struct {
	// ConsumerWait is how long the consumer waited for data: its stall.
	ConsumerWait time.Duration
	// ProducerWait is how long the producer waited for room: time the
	// consumer held it back, including a wait still in progress.
	ProducerWait time.Duration
	// Items is how many items passed through.
	Items int64
}

// Stats returns the queue's figures.
func (q *Queue[T]) Stats() QueueStats {
	q.waitMu.Lock()
	pw := q.producerWait
	if !q.waitingSince.IsZero() {
		pw += time.Since(q.waitingSince)
	}
	q.waitMu.Unlock()
	return QueueStats{ConsumerWait: time.Duration(q.consumerWait.Load()), ProducerWait: pw, Items: q.items.Load()}
}
