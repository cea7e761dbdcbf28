package engine

import (
	"errors"

	"github.com/pipefeed/pipe/prefetch"
)

// SetHostAllocator makes the host slabs of later epochs come from a (memory
// shared with another process, for a loader there) instead of the Go heap,
// with held more slabs than usual: the batches its consumer holds at once
// (delivered ahead of it, and the one in use), which would otherwise leave
// the workers without slabs. It is for pipelines without devices (whose
// slabs come from the device's page-locked memory), set before the first
// epoch.
func (e *Engine) SetHostAllocator(a prefetch.HostAllocator, held int) error {
	switch {
	case e.s.Devices != nil:
		return errors.New("engine: the host slabs of a pipeline with devices are the devices' own")
	case e.slabs != nil || e.running.Load():
		return errors.New("engine: SetHostAllocator after the first epoch")
	}
	e.hostAlloc, e.held = a, max(held, 0)
	if e.tune != nil {
		e.tune.setHeld(e.held)
		if w, _ := e.tune.current(); e.autoWorkers() {
			e.workers.Store(int64(w))
		}
	}
	return nil
}

// SlabLayout is what the next epoch allocates: n slabs of bytes bytes, each
// holding up to rows samples (the batch size, or the epoch's samples where
// they are fewer). Under workers=auto n is the most the tuner may grow to.
func (e *Engine) SlabLayout() (n, bytes, rows int) {
	n = e.Workers() + extraSlabs + e.held
	if e.autoWorkers() {
		n = e.tune.slabLimit()
	}
	return n, e.SlabBytes(), e.rows
}
