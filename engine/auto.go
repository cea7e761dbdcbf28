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
// throughput. It grows the pool when the consumer waits while the workers
// are busy, and shrinks it when the workers idle while the consumer does
// not wait; each change is a trial that is kept only if the next window's
// throughput is better by a margin (growing) or no worse by one
// (shrinking), and a setting whose trial fails twice closes the range
// beyond it, so the tuner cannot come back to it. After settleWindows windows without a
// change, or maxChanges changes, it stops for the engine's life: later
// epochs run at what it chose.
type Auto struct {
	// Workers tunes the transform pool; Spec.Workers is where it starts
	// (≤ 0: half the cores, at least 1).
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
	// settleWindows windows in a row without a change settle the tuner.
	settleWindows = 3
	// margin is the throughput change that makes a trial worth keeping.
	margin = 0.05
	// stallHigh is the consumer's wait that asks for more workers, or
	// more depth; stallLow the wait under which workers may go.
	stallHigh, stallLow = 0.05, 0.02
	// busyHigh is the workers' busy share under which more of them would
	// not help; busyShrink the share the remaining workers may reach
	// after a shrink.
	busyHigh, busyShrink = 0.75, 0.85
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

// measure is one window's figures at a worker count.
type measure struct {
	workers int
	rate    float64 // images/s
	stall   float64 // share of the window the consumer waited
	wait    float64 // share of the window the producer waited for a slab
	busy    float64 // share of the active workers' time spent working
}

// tuner is an engine's Auto state, kept across epochs. Its methods are safe
// from any goroutine.
type tuner struct {
	cfg   Auto
	mu    sync.Mutex
	cores int
	// slabBytes and devBytes are the memory of a host slab and of one
	// buffer per device; held the slabs beyond the usual.
	slabBytes, devBytes int64
	held                int
	workers, depth      int
	// lo and hi bound the worker counts still open; failed counts the
	// trials of each that were undone.
	lo, hi    int
	failed    map[int]int
	trial     *trial
	stable    int
	changes   int
	settled   bool
	settledAt [2]float64 // epoch, seconds
	// depth's own state: it only grows.
	depthStable, depthSteps int
	depthSettled            bool
	decisions               []Decision
	// seen holds the last figures at each worker count, in the order
	// first measured, for the report.
	seen []measure
}

type trial struct {
	from int
	grow bool
	m    measure // the window before the change
}

func newTuner(a Auto, start int, s *Spec, rows int) *tuner {
	if a.Cores <= 0 {
		a.Cores = runtime.GOMAXPROCS(0)
	}
	if a.Memory <= 0 {
		a.Memory = DefaultMemory()
	}
	if a.Interval <= 0 {
		a.Interval = defaultInterval
	}
	t := &tuner{cfg: a, cores: a.Cores, slabBytes: int64(rows) * int64(s.Host.SampleBytes()+4)}
	if d := s.Devices; d != nil {
		per := int64(rows / d.N())
		b := per * int64(s.Out.SampleBytes())
		if s.DevNorm != nil {
			b += per * int64(s.Host.SampleBytes())
		}
		t.devBytes = b * int64(d.N())
		t.depth = d.Depth
	}
	switch {
	case !a.Workers && start <= 0:
		start = t.cores
	case start <= 0:
		start = max(1, t.cores/2)
	}
	t.workers, t.lo = start, 1
	t.hi = t.maxWorkers()
	if a.Workers {
		t.workers = min(t.workers, t.hi)
	}
	t.settled = !a.Workers
	t.depthSettled = !a.Depth || s.Devices == nil
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

// maxWorkers is the most workers the cores and the budget allow at the
// current depth (1 at least).
func (t *tuner) maxWorkers() int {
	w := t.cores
	for w > 1 && t.memory(w, t.depth) > t.cfg.Memory {
		w--
	}
	return w
}

// setHeld sets the slabs a consumer holds beyond the usual.
func (t *tuner) setHeld(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = n
	t.hi = min(t.hi, t.maxWorkers())
	t.workers = max(1, min(t.workers, t.hi))
}

func (t *tuner) current() (workers, depth int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.workers, t.depth
}

func (t *tuner) note(m measure) {
	for i := range t.seen {
		if t.seen[i].workers == m.workers {
			t.seen[i] = m
			return
		}
	}
	t.seen = append(t.seen, m)
}

func (t *tuner) record(epoch int, at float64, what string, from, to int, action string, m measure, why string) {
	t.decisions = append(t.decisions, Decision{Epoch: epoch, Seconds: at, What: what, From: from, To: to, Action: action,
		ImagesPerSec: m.rate, StallPct: 100 * m.stall, ProducerWaitPct: 100 * m.wait, BusyPct: 100 * m.busy, Why: why})
}

func (t *tuner) settle(epoch int, at float64, m measure, why string) {
	t.settled, t.settledAt = true, [2]float64{float64(epoch), at}
	t.record(epoch, at, "workers", m.workers, m.workers, "settle", m, why)
}

// decideWorkers takes a window's figures at m.workers and returns the
// worker count for the next window.
func (t *tuner) decideWorkers(epoch int, at float64, m measure) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.note(m)
	w := m.workers
	if t.settled {
		return w
	}
	if tr := t.trial; tr != nil {
		t.trial = nil
		var keep bool
		if tr.grow {
			keep = m.rate >= tr.m.rate*(1+margin)
		} else {
			// A consumer that hardly waited for batches at the smaller
			// count sets the rate itself: a slower window is its own
			// noise (a sleep that overshot, a core taken), not the
			// workers', and the shrink cost nothing.
			keep = m.stall <= stallLow ||
				m.rate >= tr.m.rate*(1-margin) && m.stall <= max(stallLow, tr.m.stall+0.01)
		}
		if keep {
			// A kept grow is not undone by a shrink below where it
			// started, nor a kept shrink by a grow past it.
			if tr.grow {
				t.lo = max(t.lo, tr.from)
			} else {
				t.hi = min(t.hi, tr.from)
			}
			t.record(epoch, at, "workers", w, w, "keep", m,
				fmt.Sprintf("%.0f images/s at %d against %.0f at %d", m.rate, w, tr.m.rate, tr.from))
			return w
		}
		// A setting that failed twice is closed: once may be a noisy
		// window on a shared machine.
		if t.failed == nil {
			t.failed = map[int]int{}
		}
		if t.failed[w]++; t.failed[w] >= 2 {
			if tr.grow {
				t.hi = min(t.hi, w-1)
			} else {
				t.lo = max(t.lo, w+1)
			}
		}
		t.changes++
		t.workers = tr.from
		t.record(epoch, at, "workers", w, tr.from, "revert", m,
			fmt.Sprintf("%.0f images/s at %d against %.0f at %d: not worth the change", m.rate, w, tr.m.rate, tr.from))
		return tr.from
	}
	next, action, why := w, "", ""
	switch {
	case m.stall > stallHigh && m.busy > busyHigh && w < t.hi:
		next, action = min(t.hi, w+max(1, w/2)), "grow"
		why = fmt.Sprintf("the consumer waited %.0f%% of the window with the workers %.0f%% busy", 100*m.stall, 100*m.busy)
	case m.stall < stallLow && w > t.lo && m.busy*float64(w) < busyShrink*float64(w-1):
		// As few as carry the work at busyShrink, one quarter at most.
		need := int(m.busy*float64(w)/busyShrink) + 1
		next, action = max(t.lo, need, w-max(1, w/4)), "shrink"
		why = fmt.Sprintf("the workers were %.0f%% busy and the consumer waited %.1f%%", 100*m.busy, 100*m.stall)
	}
	if action == "" || next == w {
		t.stable++
		switch {
		case t.stable >= settleWindows:
			t.settle(epoch, at, m, fmt.Sprintf("%d windows without a reason to change", t.stable))
		case m.stall > stallHigh && w >= t.hi:
			// At the ceiling with the consumer still waiting: more
			// workers are not allowed, and fewer are asked for only by a
			// consumer that stops waiting. More windows of this would
			// settle all the same, only later, past a short epoch's end.
			t.settle(epoch, at, m, fmt.Sprintf("at the most workers (%d) with the consumer waiting: nothing left to try", w))
		}
		return w
	}
	if t.changes >= maxChanges(t.cores) {
		t.settle(epoch, at, m, fmt.Sprintf("%d changes, the most allowed", t.changes))
		return w
	}
	t.stable = 0
	t.changes++
	t.trial = &trial{from: w, grow: action == "grow", m: m}
	t.workers = next
	t.record(epoch, at, "workers", w, next, action, m, why)
	return next
}

// maxChanges bounds the worker changes: growing by half at a time reaches
// any core count in about log1.5(cores) steps; each may be undone once.
func maxChanges(cores int) int {
	n := 4
	for c := 1; c < cores; c += max(1, c/2) {
		n += 2
	}
	return n
}

// decideDepth takes a window of the devices' figures: the consumers' worst
// wait (stall) and the producer's wait for a free device buffer or queue
// place (wait). It returns the depth for the next window. A consumer that
// waits while the producer also had to wait for room is a bursty one: the
// pipeline keeps up on average, so a deeper queue absorbs the bursts.
func (t *tuner) decideDepth(epoch int, at float64, stall, wait float64, maxDepth int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.depth
	if t.depthSettled {
		return d
	}
	m := measure{workers: t.workers, stall: stall, wait: wait}
	if stall > stallHigh/2 && wait > stallHigh/2 && d < maxDepth && t.memory(t.workers, d+1) <= t.cfg.Memory {
		t.depthStable = 0
		t.depthSteps++
		t.depth = d + 1
		t.hi = min(t.hi, max(t.workers, t.maxWorkers()))
		t.record(epoch, at, "depth", d, d+1, "grow", m,
			fmt.Sprintf("the consumer waited %.1f%% while the producer waited %.1f%% for room: bursts", 100*stall, 100*wait))
		if t.depthSteps >= maxDepthSteps {
			t.depthSettled = true
		}
		return d + 1
	}
	t.depthStable++
	if t.depthStable >= settleWindows {
		t.depthSettled = true
	}
	return d
}

// stats is the report for epoch n.
func (t *tuner) stats(n int, depthSet bool) *AutoStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := &AutoStats{Workers: t.workers, WorkersAuto: t.cfg.Workers, DepthAuto: t.cfg.Depth && depthSet,
		MaxWorkers: t.maxWorkers(), BudgetBytes: t.cfg.Memory, Settled: t.settled && t.depthSettled, Changes: t.changes}
	if depthSet {
		a.Depth = t.depth
	}
	a.MemoryBytes = t.memory(t.workers, t.depth)
	if t.settled {
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

// why is the report's line: "workers auto → 3 (waited for batches 12% at
// 2, 9000 images/s; 0.4% at 3, 12000 images/s), depth auto → 4 (…)": the
// wait is the consumer's, in Next.
func (t *tuner) why(depthSet bool) string {
	var parts []string
	if t.cfg.Workers {
		s := fmt.Sprintf("workers auto → %d", t.workers)
		var figs []string
		for i, m := range t.seen {
			f := fmt.Sprintf("%.1f%% at %d, %.0f images/s", 100*m.stall, m.workers, m.rate)
			if i == 0 {
				f = "waited for batches " + f
			}
			figs = append(figs, f)
		}
		if len(figs) > 0 {
			s += " (" + strings.Join(figs, "; ") + ")"
		}
		switch {
		case !t.settled:
			s += ", still tuning"
		case t.hi == t.workers && t.workers == t.maxWorkers() && t.workers < t.cores:
			s += ", the memory budget's most"
		case t.workers == t.cores:
			s += ", all the cores"
		}
		parts = append(parts, s)
	}
	if depthSet && t.cfg.Depth {
		s := fmt.Sprintf("depth auto → %d", t.depth)
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
	parts = append(parts, fmt.Sprintf("memory %.0f of %.0f MiB", float64(t.memory(t.workers, t.depth))/(1<<20), float64(t.cfg.Memory)/(1<<20)))
	return strings.Join(parts, ", ")
}

// fixWorkers ends the tuning of the workers: a number set by the program
// wins.
func (t *tuner) fixWorkers(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg.Workers, t.settled, t.trial, t.workers = false, true, nil, n
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
	return t.maxWorkers() + extraSlabs + t.held
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

// window is the figures of an epoch since the tuner's last decision.
type window struct {
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
	m := measure{workers: active, rate: float64(w.images) / secs, stall: w.stall / secs,
		wait: float64(slabWait-w.slabWait) / float64(el), busy: float64(busy-w.busy) / float64(el) / float64(active)}
	warm := w.warm
	*w = window{start: now, busy: busy, slabWait: slabWait, warm: true}
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
