package engine

import (
	"fmt"
	"slices"
)

// tuning is workers=auto's and depth=auto's state machine. It is fed the
// figures of each window the engine measured and returns what to set for
// the next one. It has no clock, goroutine or lock of its own: the tuner
// (auto.go) measures the windows, holds the lock and applies the changes,
// and the tests feed it windows (testdata/tuning.txt).
//
// The workers go through three phases:
//
//   - measuring: windows at one count until there are measureWindows of
//     them; their medians say whether to try more workers (the consumer
//     waited while the workers were busy), fewer (the workers idled while
//     the consumer did not wait), or neither, which settles;
//   - trying: windows alternate between the count it came from and the
//     count tried, so that a change in the machine's load slows both alike,
//     until one side's median throughput leads the other's by margin and
//     by more than the two sides' spread (the noise), or each side has
//     maxTrialWindows windows: then the count tried is kept unless its
//     median trails by the margin. A kept trial closes the range behind
//     it, an undone one the range beyond it, and measuring resumes from
//     the trial's windows;
//   - settled: nothing changes any more.
//
// Before it settles it goes back to the count with the fastest median of
// all it measured where that one leads beyond the noise, so it never
// settles on a count that its own windows show slower.
type tuning struct {
	phase phase
	// cur is the workers now; lo and hi bound the counts still open.
	cur, lo, hi int
	// cores sizes the trials allowed (maxTrials).
	cores int
	// counts holds the latest windows at each count measured, in the
	// order first measured.
	counts []*tally
	// recent is the windows at cur since measuring began there.
	recent *tally
	trial  *trial
	// trials counts the trials begun, changes the changes of cur.
	trials, changes int

	// The depth's own state: it only grows, at most maxDepthSteps times,
	// and settles after settleWindows windows without a reason to.
	depth                   int
	depthStable, depthSteps int
	depthSettled            bool
}

// phase is where the workers' search stands.
type phase int

const (
	measuring phase = iota
	trying
	settled
)

func (p phase) String() string {
	return [...]string{"measuring", "trying", "settled"}[p]
}

// The search's constants.
const (
	// measureWindows windows at a count decide a move from it.
	measureWindows = 2
	// trialWindows windows on each side of a trial at least, and
	// maxTrialWindows at most, decide it.
	trialWindows, maxTrialWindows = 3, 7
)

// sample is one window's figures, as the engine measured them.
type sample struct {
	workers int
	images  int
	seconds float64
	// stall is the share of the window the consumer waited in Next, wait
	// the share the producer waited for a free slab, busy the share of
	// the active workers' time spent working.
	stall, wait, busy float64
}

// rate is the throughput in images/s; 0 for a sample of no time (the
// devices' figures, which have none).
func (s sample) rate() float64 {
	if s.seconds <= 0 {
		return 0
	}
	return float64(s.images) / s.seconds
}

// tally is the last maxTrialWindows windows measured at one count: a
// count measured long ago is judged by its latest figures.
type tally struct {
	workers            int
	rates, stall, busy []float64
}

func (t *tally) add(s sample) {
	keep := func(xs []float64, x float64) []float64 {
		if len(xs) == maxTrialWindows {
			xs = append(xs[:0], xs[1:]...)
		}
		return append(xs, x)
	}
	t.rates = keep(t.rates, s.rate())
	t.stall = keep(t.stall, s.stall)
	t.busy = keep(t.busy, s.busy)
}

func (t *tally) n() int { return len(t.rates) }

// rate is the median throughput, in images/s.
func (t *tally) rate() float64 { return median(t.rates) }

// spread is the rates' median absolute deviation from their median: the
// noise of a window at this count, which one outlier does not move.
func (t *tally) spread() float64 {
	m := t.rate()
	d := make([]float64, len(t.rates))
	for i, r := range t.rates {
		d[i] = max(r-m, m-r)
	}
	return median(d)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// faster reports whether a's median throughput leads b's by margin and by
// more than their spreads together: beyond the measured noise.
func faster(a, b *tally) bool {
	ra, rb := a.rate(), b.rate()
	return ra > rb*(1+margin) && ra-rb > a.spread()+b.spread()
}

// trial is a move under test: the windows at from (base) and at to (tried)
// since it began, taken in turn.
type trial struct {
	from, to    int
	grow        bool
	base, tried *tally
}

// step is one decision: the workers (or depth) before and after, the
// action (grow, shrink, compare, keep, revert, back, settle) and why.
type step struct {
	what     string // "workers" or "depth"
	from, to int
	action   string
	why      string
}

// newTuning starts the workers at start within [1, hi] and the depth at
// depth; a search that is not wanted starts settled (fixed workers), as
// does a depth that is not.
func newTuning(start, hi, cores, depth int, workers, autoDepth bool) *tuning {
	m := &tuning{cur: start, lo: 1, hi: hi, cores: cores, depth: depth, recent: &tally{workers: start}}
	if workers {
		m.cur = max(1, min(start, hi))
		m.recent.workers = m.cur
	} else {
		m.phase = settled
	}
	m.depthSettled = !autoDepth
	return m
}

// tallyOf is the windows at count w, made on first use.
func (m *tuning) tallyOf(w int) *tally {
	for _, t := range m.counts {
		if t.workers == w {
			return t
		}
	}
	t := &tally{workers: w}
	m.counts = append(m.counts, t)
	return t
}

// window takes a window measured at s.workers and returns the decisions it
// led to; m.cur is then the workers for the next window. A window at
// another count than cur (one that straddled a change made elsewhere) is
// ignored.
func (m *tuning) window(s sample) []step {
	if m.phase == settled || s.workers != m.cur || s.seconds <= 0 {
		return nil
	}
	m.tallyOf(s.workers).add(s)
	if m.phase == trying {
		return m.compare(s)
	}
	m.recent.add(s)
	if m.recent.n() < measureWindows {
		return nil
	}
	return m.move()
}

// set changes the workers to w for the reason given.
func (m *tuning) set(w int, action, why string) step {
	st := step{what: "workers", from: m.cur, to: w, action: action, why: why}
	if w != m.cur {
		m.changes++
	}
	m.cur = w
	return st
}

// move decides, from the recent windows at cur, whether to try another
// count, or settles.
func (m *tuning) move() []step {
	c, r := m.cur, m.recent
	stall, busy := median(r.stall), median(r.busy)
	to, action, why := c, "", ""
	switch {
	case stall > stallHigh && busy > busyHigh && c < m.hi:
		to, action = min(m.hi, c+max(1, c/2)), "grow"
		why = fmt.Sprintf("the consumer waited %.0f%% of the time with the workers %.0f%% busy (medians of %d windows)", 100*stall, 100*busy, r.n())
	case stall < stallLow && c > m.lo && busy*float64(c) < busyShrink*float64(c-1):
		// As few as carry the work at busyShrink, one quarter at most.
		need := int(busy*float64(c)/busyShrink) + 1
		to, action = max(m.lo, need, c-max(1, c/4)), "shrink"
		why = fmt.Sprintf("the workers were %.0f%% busy and the consumer waited %.1f%% (medians of %d windows)", 100*busy, 100*stall, r.n())
	}
	switch {
	case to == c && stall > stallHigh && c >= m.hi:
		// More workers are not allowed (the cores, the budget, or a
		// trial that showed them slower), and fewer are asked for only
		// by a consumer that stops waiting.
		return m.settle(fmt.Sprintf("at the most workers open (%d) with the consumer waiting: nothing left to try", c))
	case to == c:
		return m.settle(fmt.Sprintf("%d windows at %d without a reason to change", r.n(), c))
	case m.trials >= maxTrials(m.cores):
		return m.settle(fmt.Sprintf("%d trials, the most allowed", m.trials))
	}
	m.trials++
	m.trial = &trial{from: c, to: to, grow: to > c, base: &tally{workers: c}, tried: &tally{workers: to}}
	m.phase = trying
	return []step{m.set(to, action, why)}
}

// compare adds a window to the trial and keeps it, undoes it, or goes on
// alternating between its two counts.
func (m *tuning) compare(s sample) []step {
	tr := m.trial
	if s.workers == tr.to {
		tr.tried.add(s)
	} else {
		tr.base.add(s)
	}
	a, b := tr.tried, tr.base
	figures := fmt.Sprintf("%.0f images/s at %d (median of %d windows) against %.0f at %d (%d)", a.rate(), tr.to, a.n(), b.rate(), tr.from, b.n())
	if a.n() >= trialWindows && b.n() >= trialWindows {
		capped := a.n() >= maxTrialWindows && b.n() >= maxTrialWindows
		switch {
		case tr.grow && faster(a, b), !tr.grow && !faster(b, a):
			// A shrink is kept unless the fewer workers are slower
			// beyond the noise: they carry the work.
			return m.end(true, figures)
		case faster(b, a):
			return m.end(false, figures+": not worth the change")
		case capped && a.rate() >= b.rate()*(1-margin):
			// A tie: the change stands. More workers for a consumer
			// that waits cost it nothing and are there when the
			// machine's load lifts (a core taken through a whole
			// trial makes 2 workers no faster than 1); fewer for one
			// that does not wait leave it the cores.
			return m.end(true, figures+": within the noise after as many windows as a trial takes")
		case capped:
			return m.end(false, figures+": the one tried trails by the margin after as many windows as a trial takes")
		}
	}
	other := tr.to
	if s.workers == tr.to {
		other = tr.from
	}
	return []step{m.set(other, "compare", figures+": alternating until one leads beyond the noise")}
}

// end ends the trial, keeping the count tried or going back to the one it
// came from, and measures on from the trial's windows there.
func (m *tuning) end(keep bool, why string) []step {
	tr := m.trial
	m.trial, m.phase = nil, measuring
	to, action := tr.from, "revert"
	if keep {
		to, action = tr.to, "keep"
	}
	// A kept grow is not undone by a shrink to where it started, nor a
	// kept shrink by a grow back; an undone one closes the range from the
	// count tried on.
	switch {
	case keep && tr.grow:
		m.lo = max(m.lo, tr.from+1)
	case keep:
		m.hi = min(m.hi, tr.from-1)
	case tr.grow:
		m.hi = min(m.hi, tr.to-1)
	default:
		m.lo = max(m.lo, tr.to+1)
	}
	steps := []step{m.set(to, action, why)}
	m.recent = tr.base
	if keep {
		m.recent = tr.tried
	}
	return append(steps, m.move()...)
}

// settle ends the search, at cur unless another count measured leads it
// beyond the noise: then at the fastest.
func (m *tuning) settle(why string) []step {
	var steps []step
	here, best := m.tallyOf(m.cur), m.tallyOf(m.cur)
	for _, t := range m.counts {
		if t.n() >= trialWindows && t.rate() > best.rate() && faster(t, here) {
			best = t
		}
	}
	if best != here {
		steps = append(steps, m.set(best.workers, "back",
			fmt.Sprintf("%.0f images/s at %d (median of %d windows) leads %.0f at %d (%d) beyond the noise", best.rate(), best.workers, best.n(), here.rate(), here.workers, here.n())))
		why += fmt.Sprintf("; back to %d, the fastest measured", best.workers)
	}
	m.phase = settled
	return append(steps, step{what: "workers", from: m.cur, to: m.cur, action: "settle", why: why})
}

// fix ends the search at n workers: a number set by the program wins.
func (m *tuning) fix(n int) {
	m.phase, m.trial, m.cur = settled, nil, n
}

// limit lowers the most workers to hi (a budget that shrank), moving cur
// within it.
func (m *tuning) limit(hi int) {
	m.hi = min(m.hi, hi)
	m.cur = max(1, min(m.cur, m.hi))
}

// maxTrials bounds the trials: growing by half at a time reaches any core
// count in about log1.5(cores) steps; two more allow a shrink back.
func maxTrials(cores int) int {
	n := 2
	for c := 1; c < cores; c += max(1, c/2) {
		n++
	}
	return n
}

// depthWindow takes a window of the devices' figures: the consumers' worst
// wait (stall) and the producer's wait for a free device buffer or queue
// place (wait); deeper says one more buffer per device is allowed (the
// most depth, the memory budget). It returns the decision, if any; m.depth
// is then the depth for the next window. A consumer that waits while the
// producer also had to wait for room is a bursty one: the pipeline keeps
// up on average, so a deeper queue absorbs the bursts.
func (m *tuning) depthWindow(stall, wait float64, deeper bool) []step {
	if m.depthSettled {
		return nil
	}
	d := m.depth
	if stall > stallHigh/2 && wait > stallHigh/2 && deeper {
		m.depthStable = 0
		m.depthSteps++
		m.depth = d + 1
		if m.depthSteps >= maxDepthSteps {
			m.depthSettled = true
		}
		return []step{{what: "depth", from: d, to: d + 1, action: "grow",
			why: fmt.Sprintf("the consumer waited %.1f%% while the producer waited %.1f%% for room: bursts", 100*stall, 100*wait)}}
	}
	m.depthStable++
	if m.depthStable >= settleWindows {
		m.depthSettled = true
	}
	return nil
}
