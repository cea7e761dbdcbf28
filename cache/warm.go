package cache

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/cache/store"
)

// WarmProgress reports a warm in progress.
type WarmProgress struct {
	Shards, Total int   // shards done (present or written) of all
	Written       int   // shards computed and written by this warm
	RawBytes      int64 // raw bytes of the written shards
	Elapsed       time.Duration
}

// Warm fills cache epochs [from, from+n) (taken mod the distinct epochs),
// computing only the entries that are missing, so an interrupted warm
// resumes where it stopped. It runs workers goroutines, each with its own
// ComputeFunc from newCompute, in one pond group: the first error, or a
// panic (returned with its stack), cancels the others and is returned once
// every goroutine has stopped. A damaged store fails the warm with an error
// wrapping store.ErrDamaged (see Open for how it is repaired). progress,
// if not nil, is called after every shard, from one goroutine at a time.
func (c *Cache) Warm(ctx context.Context, from, n, workers int, newCompute func() ComputeFunc, progress func(WarmProgress)) (WarmProgress, error) {
	var st WarmProgress
	if !c.Writable() {
		return st, c.notWritable()
	}
	shards := c.Shards()
	st.Total = n * shards
	start := time.Now()
	var mu sync.Mutex
	report := func(raw int64, wrote bool) {
		mu.Lock()
		defer mu.Unlock()
		st.Shards++
		if wrote {
			st.Written++
			st.RawBytes += raw
		}
		st.Elapsed = time.Since(start)
		if progress != nil {
			progress(st)
		}
	}
	pool := pond.NewPool(workers + 1)
	defer pool.StopAndWait()
	g := pool.NewGroupContext(ctx)
	gctx := g.Context()
	jobs := make(chan ShardID)
	g.SubmitErr(func() error {
		defer close(jobs)
		for e := from; e < from+n; e++ {
			for s := range shards {
				select {
				case jobs <- ShardID{Epoch: e % c.Distinct(), Index: s}:
				case <-gctx.Done():
					return nil
				}
			}
		}
		return nil
	})
	for range workers {
		compute := newCompute()
		g.SubmitErr(func() error {
			var buf []byte
			for {
				// Not range jobs alone: pond skips a task whose group
				// is cancelled already, so the producer may never run
				// to close it.
				var id ShardID
				var ok bool
				select {
				case id, ok = <-jobs:
				case <-gctx.Done():
				}
				if !ok || gctx.Err() != nil {
					return nil // the group's first error is returned
				}
				has, err := c.store.Has(c.fp, id.Epoch, id.Index)
				var raw []byte
				if err == nil && !has {
					raw, err = compute(gctx, id, buf[:0])
					if err == nil {
						buf = raw
						err = c.store.Put(c.fp, id.Epoch, id.Index, layout, raw)
					}
				}
				if errors.Is(err, store.ErrDamaged) {
					c.noteDamage(err)
				}
				if err != nil {
					return err // cancels the group: the producer stops
				}
				report(int64(len(raw)), !has)
			}
		})
	}
	err := g.Wait()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = context.Cause(ctx)
	}
	return st, err
}
