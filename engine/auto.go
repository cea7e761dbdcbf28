package engine

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/pipefeed/pipe/internal/sysmem"
)

// Auto configures workers=auto and depth=auto: a tuner that measures an
// epoch as it runs and sizes the transform pool and the devices' queues.
// It never changes the output, which does not depend on either.
//
// Every window of at least minWindowBatches batches and either Interval or
// 1/windowsPerEpoch of the epoch (but minWindow at least), at the
// consumer's Next, it measures the consumer's wait for batches (stall),
// the producer's wait for a free slab (the consumer holding batches
// back), the workers' busy time over the active workers, and the
// throughput, and hands them to a state machine (tuning) that decides
// from the medians of several windows: it tries more workers when the
// consumer waits while the workers are busy, and fewer when the workers
// idle while the consumer does not wait; a trial alternates windows
// between the two counts and is kept only when the one tried leads beyond
// the windows' noise (growing) or does not trail beyond it (shrinking).
// Once no change is called for, or after a bounded number of trials, it
// settles, at the fastest count it measured where one leads beyond the
// noise, and stops for the engine's life: later epochs run at what it
// chose.
type Auto struct {
	// Workers tunes the transform pool; Spec.Workers is where it starts
	// (≤ 0: the most it may use, the cores within the memory budget).
	// Starting there, a pipeline that streams to a waiting consumer is
	// settled in its first windows, where growing from fewer took a
	// trial, longer than a CIFAR epoch; one whose consumer does not wait
	// shrinks, trying fewer.
	Workers bool
	// Depth tunes the devices' queues, upward only; Devices.Depth is where
	// it starts.
	Depth bool
	// Cores is the most workers (≤ 0: GOMAXPROCS).
	Cores int
	// Memory is the budget in bytes for the host slabs and the device
	// buffers (≤ 0: DefaultMemory()). The tuner never goes past it; a
	// budget below one worker's slabs still runs one worker.
	Memory int64
	// Interval is the shortest window measured before a decision (≤ 0:
	// 200 ms): long enough that a window holds several batches of a fast
	// pipeline, short enough to settle within a CIFAR epoch.
	Interval time.Duration
}

// The tuner's constants.
const (
	defaultInterval  = 200 * time.Millisecond
	minWindowBatches = 5
	// windowsPerEpoch bounds a window to this share of an epoch's batches
	// too, but no shorter than minWindow, so that an epoch of a few
	// Intervals settles within itself, and one shorter still (CIFAR on a
	// fast machine, 60 ms) is measured over windows long enough that the
	// scheduler's noise does not decide: windows of 3 ms chose 1 worker
	// where 2 were 1.8 times as fast.
	windowsPerEpoch = 32
	minWindow       = 25 * time.Millisecond
	// settleWindows windows in a row without a reason to deepen settle
	// the depth.
	settleWindows = 3
	// margin is the throughput lead that makes a trial worth keeping, if
	// it is beyond the noise too.
	margin = 0.05
	// stallHigh is the consumer's wait that asks for more workers, or
	// more depth; stallLow the wait under which workers may go.
	stallHigh, stallLow = 0.05, 0.02
	// busyHigh is the workers' busy share under which more of them would
	// not help: they idle half the time, waiting for something else. It
	// is low because a loaded machine takes the workers' cores between
	// chunks: 1 worker beside 4 busy loops on 2 cores was 70% busy, and
	// 2 were 1.5 times as fast. busyShrink is the share the remaining
	// workers may reach after a shrink.
	busyHigh, busyShrink = 0.5, 0.85
	// maxDepthSteps bounds the depth's growth.
	maxDepthSteps = 4
)

// DefaultMemory is the default memory budget of the tuner: a quarter of the
// memory this process may use (sysmem.Limit: RAM, cgroup, ulimit -v), or
// 4 GiB where that is unknown. A quarter leaves room for the model, the
// cache and the decoder's own budget.
func DefaultMemory() int64 {
	if total, _ := sysmem.Limit(); total > 0 {
		return int64(min(total/4, 1<<62))
	}
	return 4 << 30
}

// Decision is one step of the tuner, as the report lists it.
type Decision struct {
	Epoch int `json:"epoch"`
	// Seconds is the time into the epoch.
	Seconds float64 `json:"seconds"`
	// What changed: "workers" or "depth".
	What string `json:"what"`
	// From and To are the setting before and after; equal for "keep" and
	// "settle".
	From int `json:"from"`
	To   int `json:"to"`
	// Action is "grow", "shrink", "keep" (a trial kept), "revert" (a trial
	// undone) or "settle".
	Action string `json:"action"`
	// The window that led to it.
	ImagesPerSec    float64 `json:"images_per_sec"`
	StallPct        float64 `json:"stall_pct"`
	ProducerWaitPct float64 `json:"producer_wait_pct"`
	BusyPct         float64 `json:"busy_pct"`
	Why             string  `json:"why"`
}

// AutoStats reports the tuner in an epoch's stats.
type AutoStats struct {
	// Workers and Depth are the settings at the epoch's end; Depth is 0
	// without a prefetch stage. WorkersAuto and DepthAuto say which the
	// tuner sets.
	Workers     int  `json:"workers"`
	WorkersAuto bool `json:"workers_auto"`
	Depth       int  `json:"depth,omitempty"`
	DepthAuto   bool `json:"depth_auto"`
	// MaxWorkers is the tuner's ceiling: the cores, or fewer where the
	// memory budget allows fewer slabs.
	MaxWorkers int `json:"max_workers"`
	// MemoryBytes is what the slabs and device buffers hold; BudgetBytes
	// the budget.
	MemoryBytes int64 `json:"memory_bytes"`
	BudgetBytes int64 `json:"budget_bytes"`
	// Settled says the tuner has stopped; SettledEpoch and SettledSeconds
	// say when.
	Settled        bool    `json:"settled"`
	SettledEpoch   int     `json:"settled_epoch"`
	SettledSeconds float64 `json:"settled_seconds"`
	// Changes counts the settings changed so far, over all epochs.
	Changes int `json:"changes"`
	// Why is the report in a line: what it chose and the figures that
	// chose it.
	Why string `json:"why"`
	// Decisions are this epoch's.
	Decisions []Decision `json:"decisions,omitempty"`
}

// tuner is an engine's Auto: the state machine (tuning) that decides, and
// what it needs of the engine, kept across epochs. Its methods are safe
// from any goroutine.
type tuner struct {
	cfg   Auto
	mu    sync.Mutex
	cores int
	// slabBytes and devBytes are the memory of a host slab and of one
	// buffer per device; held the slabs beyond the usual.
	slabBytes, devBytes int64
	held                int
	m                   *tuning
	settledAt           [2]float64 // epoch, seconds
	decisions           []Decision
}

// newTuner tunes s, whose host slabs are slabBytes bytes (their images
// and fields) and hold rows samples.
func newTuner(a Auto, start int, s *Spec, rows, slabBytes int) *tuner {
	if a.Cores <= 0 {
		a.Cores = runtime.GOMAXPROCS(0)
	}
	if a.Memory <= 0 {
		a.Memory = DefaultMemory()
	}
	if a.Interval <= 0 {
		a.Interval = defaultInterval
	}
	t := &tuner{cfg: a, cores: a.Cores, slabBytes: int64(slabBytes) + 4*int64(rows)}
	depth := 0
	if d := s.Devices; d != nil {
		per := int64(rows / d.N())
		b := per * int64(s.Out.SampleBytes())
		if s.DevNorm != nil {
			b += per * int64(s.Host.SampleBytes())
		}
		t.devBytes = b * int64(d.N())
		depth = d.Depth
	}
	if start <= 0 {
		start = t.cores
	}
	t.m = newTuning(start, t.maxWorkers(depth), t.cores, depth, a.Workers, a.Depth && s.Devices != nil)
	return t
}

// memory is what w workers and depth d hold: w + extraSlabs + held slabs and
// d + 2 buffers per device.
func (t *tuner) memory(w, d int) int64 {
	m := int64(w+extraSlabs+t.held) * t.slabBytes
	if t.devBytes > 0 {
		m += int64(d+2) * t.devBytes
	}
	return m
}

// maxWorkers is the most workers the cores and the budget allow at depth d
// (1 at least).
func (t *tuner) maxWorkers(d int) int {
	w := t.cores
	for w > 1 && t.memory(w, d) > t.cfg.Memory {
		w--
	}
	return w
}

// setHeld sets the slabs a consumer holds beyond the usual.
func (t *tuner) setHeld(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = n
	t.m.limit(t.maxWorkers(t.m.depth))
}

func (t *tuner) current() (workers, depth int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m.cur, t.m.depth
}

// apply records the decisions a window at epoch, at seconds into it, led
// to; s is the window, whose figures each decision lists.
func (t *tuner) apply(epoch int, at float64, s sample, steps []step) {
	for _, st := range steps {
		t.decisions = append(t.decisions, Decision{Epoch: epoch, Seconds: at, What: st.what, From: st.from, To: st.to, Action: st.action,
			ImagesPerSec: s.rate(), StallPct: 100 * s.stall, ProducerWaitPct: 100 * s.wait, BusyPct: 100 * s.busy, Why: st.why})
		if st.action == "settle" && st.what == "workers" {
			t.settledAt = [2]float64{float64(epoch), at}
		}
	}
}

// decideWorkers takes a window's figures at s.workers and returns the
// worker count for the next window.
func (t *tuner) decideWorkers(epoch int, at float64, s sample) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.apply(epoch, at, s, t.m.window(s))
	return t.m.cur
}

// decideDepth takes a window of the devices' figures: the consumers' worst
// wait (stall) and the producer's wait for a free device buffer or queue
// place (wait). It returns the depth for the next window, never past
// maxDepth or the memory budget; a deeper queue lowers the workers'
// ceiling instead.
func (t *tuner) decideDepth(epoch int, at float64, stall, wait float64, maxDepth int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.m
	d := m.depth
	deeper := d < maxDepth && t.memory(m.cur, d+1) <= t.cfg.Memory
	steps := m.depthWindow(stall, wait, deeper)
	if m.depth > d {
		m.limit(max(m.cur, t.maxWorkers(m.depth)))
	}
	t.apply(epoch, at, sample{workers: m.cur, stall: stall, wait: wait}, steps)
	return m.depth
}

// stats is the report for epoch n.
func (t *tuner) stats(n int, depthSet bool) *AutoStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.m
	a := &AutoStats{Workers: m.cur, WorkersAuto: t.cfg.Workers, DepthAuto: t.cfg.Depth && depthSet,
		MaxWorkers: t.maxWorkers(m.depth), BudgetBytes: t.cfg.Memory, Settled: m.phase == settled && m.depthSettled, Changes: m.changes}
	if depthSet {
		a.Depth = m.depth
	}
	a.MemoryBytes = t.memory(m.cur, m.depth)
	if m.phase == settled {
		a.SettledEpoch, a.SettledSeconds = int(t.settledAt[0]), t.settledAt[1]
	}
	for _, d := range t.decisions {
		if d.Epoch == n {
			a.Decisions = append(a.Decisions, d)
		}
	}
	a.Why = t.why(depthSet)
	return a
}

// why is the report's line: "workers auto → 2 (waited for batches 12% at
// 1, 9000 images/s over 4 windows; 0.4% at 2, 12000 images/s over 3),
// depth auto → 4 (…)": the wait is the consumer's, in Next, and the
// figures are each count's medians.
func (t *tuner) why(depthSet bool) string {
	m := t.m
	var parts []string
	if t.cfg.Workers {
		s := fmt.Sprintf("workers auto → %d", m.cur)
		var figs []string
		for i, c := range m.counts {
			f := fmt.Sprintf("%.1f%% at %d, %.0f images/s over %d", 100*median(c.stall), c.workers, c.rate(), c.n())
			if i == 0 {
				f = "waited for batches " + f + " windows"
			}
			figs = append(figs, f)
		}
		if len(figs) > 0 {
			s += " (" + strings.Join(figs, "; ") + ")"
		}
		switch {
		case m.phase != settled:
			s += ", still tuning"
		case m.cur == t.maxWorkers(m.depth) && m.cur < t.cores:
			s += ", the memory budget's most"
		case m.cur == t.cores:
			s += ", all the cores"
		}
		parts = append(parts, s)
	}
	if depthSet && t.cfg.Depth {
		s := fmt.Sprintf("depth auto → %d", m.depth)
		var grew []string
		for _, d := range t.decisions {
			if d.What == "depth" {
				grew = append(grew, fmt.Sprintf("%d at %.1f s of epoch %d: %s", d.To, d.Seconds, d.Epoch, d.Why))
			}
		}
		if len(grew) > 0 {
			s += " (" + strings.Join(grew, "; ") + ")"
		} else {
			s += " (no bursty stalls)"
		}
		parts = append(parts, s)
	}
	parts = append(parts, fmt.Sprintf("memory %.0f of %.0f MiB", float64(t.memory(m.cur, m.depth))/(1<<20), float64(t.cfg.Memory)/(1<<20)))
	return strings.Join(parts, ", ")
}

// fixWorkers ends the tuning of the workers: a number set by the program
// wins.
func (t *tuner) fixWorkers(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg.Workers = false
	t.m.fix(n)
}

func (t *tuner) autoWorkers() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg.Workers
}

// slabLimit is the most host slabs the tuner may grow to.
func (t *tuner) slabLimit() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxWorkers(t.m.depth) + extraSlabs + t.held
}

// windowDone reports whether a window of el and batches batches, of an
// epoch of epochBatches, is long enough to decide on.
func (t *tuner) windowDone(el time.Duration, batches, epochBatches int) bool {
	switch {
	case batches < minWindowBatches:
		return false
	case el >= t.cfg.Interval:
		return true
	}
	return el >= min(minWindow, t.cfg.Interval) && batches >= epochBatches/windowsPerEpoch
}

// span is the figures of an epoch since the tuner's last decision.
type span struct {
	start           time.Time
	images, batches int
	stall           float64 // seconds
	busy, slabWait  int64   // nanoseconds at the window's start
	// warm is set after the epoch's first window.
	warm bool
}

// wait blocks worker i while i ≥ active; it reports false once the epoch
// stops.
func (x *Epoch) wait(i int) bool {
	for i >= int(x.active.Load()) {
		x.gateMu.Lock()
		g := x.gate
		x.gateMu.Unlock()
		// The gate was taken after active was read: a change since then
		// closed it, or is seen here.
		if i < int(x.active.Load()) {
			break
		}
		select {
		case <-g:
		case <-x.ctx.Done():
			return false
		}
	}
	return x.ctx.Err() == nil
}

// setActive makes n workers take chunks, growing the slabs first: n + the
// usual extra slabs, so that the new workers find batches to fill.
func (x *Epoch) setActive(n int) error {
	if err := x.slabs.Grow(n + extraSlabs + x.e.held); err != nil {
		return err
	}
	x.active.Store(int32(n))
	x.gateMu.Lock()
	close(x.gate)
	x.gate = make(chan struct{})
	x.gateMu.Unlock()
	x.e.workers.Store(int64(n))
	return nil
}

// observe counts a delivered batch of n images whose Next waited stall
// seconds into the tuner's window and, once the window is long enough,
// hands its figures to the tuner and applies its decision.
func (x *Epoch) observe(n int, stall float64) {
	w := &x.win
	w.images += n
	w.batches++
	w.stall += stall
	now := time.Now()
	el := now.Sub(w.start)
	t := x.e.tune
	if !t.windowDone(el, w.batches, x.e.Batches()) {
		return
	}
	busy, slabWait := x.busy.Load(), int64(x.slabs.Wait())
	active := int(x.active.Load())
	secs := el.Seconds()
	m := sample{workers: active, images: w.images, seconds: secs, stall: w.stall / secs,
		wait: float64(slabWait-w.slabWait) / float64(el), busy: float64(busy-w.busy) / float64(el) / float64(active)}
	warm := w.warm
	*w = span{start: now, busy: busy, slabWait: slabWait, warm: true}
	if !warm {
		// The epoch's first window holds its start, when every worker
		// is busy and the consumer waits for the first batch whatever
		// the setting: it says nothing.
		return
	}
	next := t.decideWorkers(x.epoch, now.Sub(x.start).Seconds(), m)
	if next != active {
		if err := x.setActive(next); err != nil {
			x.fail(err)
		}
	}
}

// depthWindow is a device epoch's figures at the start of depth=auto's
// window: per device, the consumer's wait and the producer's.
type depthWindow struct {
	start       time.Time
	batches     int
	stall, wait []time.Duration
}

// observeDepth counts a global batch sent into depth=auto's window and,
// once the window is long enough, hands the devices' worst figures to the
// tuner; a deeper queue is one more buffer on every device.
func (x *DeviceEpoch) observeDepth() error {
	w := &x.dwin
	w.batches++
	t := x.e.tune
	now := time.Now()
	el := now.Sub(w.start)
	if !t.windowDone(el, w.batches, x.e.Batches()) {
		return nil
	}
	var stall, wait float64
	for d, q := range x.queues {
		s := q.Stats()
		pw := s.ProducerWait + time.Duration(x.freeWait[d].Load())
		stall = max(stall, float64(s.ConsumerWait-w.stall[d])/float64(el))
		wait = max(wait, float64(pw-w.wait[d])/float64(el))
		w.stall[d], w.wait[d] = s.ConsumerWait, pw
	}
	w.start, w.batches = now, 0
	_, depth := t.current()
	next := t.decideDepth(x.host.epoch, now.Sub(x.start).Seconds(), stall, wait, MaxDepth)
	if next <= depth {
		return nil
	}
	per := x.e.rows / len(x.devs)
	for d, dev := range x.devs {
		for range next - depth {
			s, err := x.e.newSlot(dev, per)
			if err != nil {
				return err
			}
			x.e.devSlots[d].Add(1)
			x.free[d] <- s
		}
	}
	return nil
}
