package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/golden"
	"github.com/pipefeed/pipe/source"
)

// costly is a source whose every Read takes cost, as a decode would, but
// sleeping: the work of n workers overlaps whatever the machine's cores,
// so the tests can ask for 8 workers on 2 cores.
type costly struct {
	source.Source
	cost time.Duration
}

func (c costly) Read(i int, rec *source.Record) error {
	time.Sleep(c.cost)
	return c.Source.Read(i, rec)
}

// autoSpec is spec over n samples costing cost each, in batches of 4, with
// workers=auto as a says. Few samples a batch, each sleeping long, keep
// the sleeps' overshoot on a loaded machine small against the cost.
func autoSpec(t *testing.T, n int, cost time.Duration, a Auto) Spec {
	s := spec(t, costly{synthetic(t, n), cost}, 0)
	s.Batch = 4
	if a.Interval == 0 {
		a.Interval = 30 * time.Millisecond
	}
	a.Workers = true
	s.Auto = &a
	return s
}

func runAuto(t *testing.T, s Spec, o RunOptions) (*Engine, []EpochStats) {
	t.Helper()
	e, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	stats, err := e.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return e, stats
}

func logDecisions(t *testing.T, stats []EpochStats) {
	t.Helper()
	for _, s := range stats {
		if s.Auto == nil {
			t.Fatalf("epoch %d: no auto report", s.Epoch)
		}
		for _, d := range s.Auto.Decisions {
			t.Logf("epoch %d %.2fs %s %s %d→%d: %s (%.0f images/s, stall %.1f%%, busy %.0f%%)",
				d.Epoch, d.Seconds, d.What, d.Action, d.From, d.To, d.Why, d.ImagesPerSec, d.StallPct, d.BusyPct)
		}
		t.Logf("epoch %d: %s", s.Epoch, s.Auto.Why)
	}
}

// TestAutoFastConsumerGrows: a consumer that takes batches at once leaves
// the workers the bottleneck, and auto, started at 4 of 8, grows them,
// settling on no count its windows show slower. How far
// it grows depends on the machine's load (on 2 busy cores, 8 sleeping
// workers were slower than 6): testdata/tuning.txt holds the decisions
// for given figures.
func TestAutoFastConsumerGrows(t *testing.T) {
	// A batch costs one worker 4 × 2 ms of sleep: the CPU's share is
	// small, so that more workers are faster on 2 cores, even under the
	// race detector.
	s := autoSpec(t, 4*1500, 2*time.Millisecond, Auto{Cores: 8, Interval: 50 * time.Millisecond})
	s.Workers = 4
	e, stats := runAuto(t, s, RunOptions{})
	logDecisions(t, stats)
	a := stats[0].Auto
	if !a.Settled || a.SettledEpoch != 0 {
		t.Errorf("not settled within epoch 0: %+v", a)
	}
	if w := e.Workers(); w <= 4 {
		t.Errorf("auto chose %d workers for a fast consumer on 8 cores; want more than the 4 it starts at", w)
	}
	settledFaster(t, e)
}

// settledFaster fails t where e's tuner settled on a count that another it
// measured leads beyond the noise.
func settledFaster(t *testing.T, e *Engine) {
	t.Helper()
	e.tune.mu.Lock()
	defer e.tune.mu.Unlock()
	if err := checkSettled(e.tune.m); err != nil {
		t.Error(err)
	}
}

// TestAutoSettlesAtTheCeiling: at the most workers the cores allow with
// the consumer still waiting, where it starts, nothing is left to try,
// and the tuner settles after its first windows, with no trial: a short
// epoch is tuned within itself.
func TestAutoSettlesAtTheCeiling(t *testing.T) {
	_, stats := runAuto(t, autoSpec(t, 4*300, 2*time.Millisecond, Auto{Cores: 2, Interval: 50 * time.Millisecond}), RunOptions{})
	logDecisions(t, stats)
	a := stats[0].Auto
	if !a.Settled || a.SettledEpoch != 0 || a.Workers != 2 {
		t.Fatalf("not settled at 2 workers within epoch 0: %+v", a)
	}
	if len(a.Decisions) != 1 || a.Decisions[0].Action != "settle" || !strings.Contains(a.Decisions[0].Why, "nothing left to try") {
		t.Errorf("decisions %+v: want one, a settle at the ceiling", a.Decisions)
	}
}

// TestAutoSlowConsumerShrinks: a consumer four times slower than one
// worker leaves the workers idle, and auto, started at 8, ends with
// fewer, settling on no count its windows show slower. How far it goes
// depends on the machine's load (beside busy loops the workers' sleeps
// overshoot, and 2 workers measured slower than 3): testdata/tuning.txt
// holds the decisions for given figures, down to 1 worker.
func TestAutoSlowConsumerShrinks(t *testing.T) {
	// A batch costs one worker 4 × 500 µs; the consumer takes 8 ms.
	e, stats := runAuto(t, autoSpec(t, 4*300, 500*time.Microsecond, Auto{Cores: 8}), RunOptions{Epochs: 2, Consume: 8 * time.Millisecond})
	logDecisions(t, stats)
	if !stats[1].Auto.Settled {
		t.Errorf("not settled within 2 epochs")
	}
	if w := e.Workers(); w >= 8 {
		t.Errorf("auto kept %d workers for a consumer 4 times slower than one; want fewer than the 8 it started at", w)
	}
	settledFaster(t, e)
}

// TestAutoChecksums: the output of epochs whose workers change in their
// middle, as the tuner changes them, equals that of 1 and of 4 fixed
// workers: changes forced every 10 batches (which the tuner, on a loaded
// machine, may or may not make), and auto's own run.
func TestAutoChecksums(t *testing.T) {
	var want []string
	for _, w := range []int{1, 4} {
		s := spec(t, costly{synthetic(t, 4*300), 200 * time.Microsecond}, w)
		s.Batch = 4
		e, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		got := sums(t, e, 2)
		e.Close()
		if want == nil {
			want = got
		} else if got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("workers=%d: %v, workers=1: %v", w, got, want)
		}
	}
	e, err := New(autoSpec(t, 4*300, 200*time.Microsecond, Auto{Cores: 8}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for ep := range 2 {
		x, err := e.Epoch(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		c := NewChecksum()
		for i := 0; ; i++ {
			if i%10 == 0 {
				if err := x.setActive([]int{1, 8, 3, 5}[i/10%4]); err != nil {
					t.Fatal(err)
				}
			}
			b, err := x.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			c.Add(b)
			b.Release()
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if c.String() != want[ep] {
			t.Errorf("epoch %d with the workers changed every 10 batches: %s, fixed workers %s", ep, c, want[ep])
		}
	}
	s := autoSpec(t, 4*300, 200*time.Microsecond, Auto{Cores: 8, Interval: 10 * time.Millisecond})
	_, stats := runAuto(t, s, RunOptions{Epochs: 2, Checksum: true})
	logDecisions(t, stats)
	for i, st := range stats {
		if st.Checksum != want[i] {
			t.Errorf("epoch %d: auto %s, fixed workers %s", i, st.Checksum, want[i])
		}
	}
}

// TestAutoMemoryBudget: the slabs never exceed memory=; a fast consumer
// grows the workers only as far as the budget allows.
func TestAutoMemoryBudget(t *testing.T) {
	s := autoSpec(t, 4*600, 500*time.Microsecond, Auto{Cores: 8})
	slab := int64(4 * (s.Host.SampleBytes() + 4))
	s.Auto.Memory = 5 * slab // 3 workers and 2 extra slabs
	e, stats := runAuto(t, s, RunOptions{})
	logDecisions(t, stats)
	a := stats[0].Auto
	if a.MaxWorkers != 3 || e.Workers() > 3 {
		t.Errorf("max workers %d, chose %d; the budget holds 3", a.MaxWorkers, e.Workers())
	}
	if a.MemoryBytes > a.BudgetBytes || int64(e.Buffers().Slabs)*slab > a.BudgetBytes {
		t.Errorf("%d slabs of %d bytes (reported %d) over the budget of %d", e.Buffers().Slabs, slab, a.MemoryBytes, a.BudgetBytes)
	}
}

// TestAutoDoesNotOscillate feeds the tuner windows of pure noise around a
// flat throughput, whatever the workers: it must settle after a bounded
// number of trials, never change again, and never settle on a count its
// own windows show slower.
func TestAutoDoesNotOscillate(t *testing.T) {
	for seed := range uint64(20) {
		m := newTuning(8, 16, 16, 0, true, false)
		r := rand.New(rand.NewPCG(seed, 1))
		var steps []step
		for range 400 {
			steps = append(steps, m.window(sample{workers: m.cur, images: int(1000 * (0.9 + 0.2*r.Float64())), seconds: 1,
				stall: 0.1 * r.Float64(), wait: r.Float64() * 0.2, busy: r.Float64()})...)
		}
		if m.phase != settled {
			t.Errorf("seed %d: still %s after 400 windows of noise", seed, m.phase)
		}
		if m.trials > maxTrials(16) {
			t.Errorf("seed %d: %d trials, more than %d", seed, m.trials, maxTrials(16))
		}
		if len(steps) == 0 || steps[len(steps)-1].action != "settle" {
			t.Errorf("seed %d: changes after settling: %v", seed, steps)
		}
		if err := checkSettled(m); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

// checkSettled returns an error where m settled on a count that another
// count it measured leads beyond the noise.
func checkSettled(m *tuning) error {
	if m.phase != settled {
		return nil
	}
	here := m.tallyOf(m.cur)
	for _, c := range m.counts {
		if c.n() >= trialWindows && faster(c, here) {
			return fmt.Errorf("settled at %d, %.0f images/s over %d windows, where %d made %.0f over %d", m.cur, here.rate(), here.n(), c.workers, c.rate(), c.n())
		}
	}
	return nil
}

// TestTuningData runs the cases in testdata/tuning.txt (-update rewrites
// their outputs): each feeds the state machine windows from a model of a
// pipeline and lists its decisions. A case is
//
//	tune cores=C start=S [memory=M] [windows=N]
//	W: rate=R1,R2,… stall=S1,… busy=B1,…
//
// with a line per worker count W (or "*" for any other): a window at W
// takes the next of its values, round and round. It runs until the
// machine settles or N windows (default 100), and checks that it never
// settles on a count its windows show slower.
func TestTuningData(t *testing.T) {
	golden.Run(t, "testdata/tuning.txt", func(t *testing.T, tc golden.Case) string {
		lines := strings.Split(golden.Uncommented(tc.Input), "\n")
		args := map[string]int{"windows": 100}
		for _, f := range strings.Fields(lines[0])[1:] {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", lines[0], err)
			}
			args[k] = n
		}
		type series struct{ rate, stall, busy []float64 }
		models := map[string]*series{}
		for _, l := range lines[1:] {
			w, rest, ok := strings.Cut(l, ":")
			if !ok {
				t.Fatalf("line %q: want W: rate=… stall=… busy=…", l)
			}
			s := &series{}
			for _, f := range strings.Fields(rest) {
				k, v, _ := strings.Cut(f, "=")
				var xs []float64
				for _, x := range strings.Split(v, ",") {
					n, err := strconv.ParseFloat(x, 64)
					if err != nil {
						t.Fatalf("line %q: %v", l, err)
					}
					xs = append(xs, n)
				}
				switch k {
				case "rate":
					s.rate = xs
				case "stall":
					s.stall = xs
				case "busy":
					s.busy = xs
				default:
					t.Fatalf("line %q: unknown %q", l, k)
				}
			}
			models[strings.TrimSpace(w)] = s
		}
		hi := args["cores"]
		if args["memory"] > 0 {
			hi = args["memory"]
		}
		m := newTuning(args["start"], hi, args["cores"], 0, true, false)
		seen := map[int]int{}
		var out []string
		n := 0
		for ; n < args["windows"] && m.phase != settled; n++ {
			s, ok := models[strconv.Itoa(m.cur)]
			if !ok {
				s, ok = models["*"]
			}
			if !ok {
				t.Fatalf("no model for %d workers", m.cur)
			}
			i := seen[m.cur]
			seen[m.cur]++
			at := func(xs []float64) float64 { return xs[i%len(xs)] }
			for _, st := range m.window(sample{workers: m.cur, images: int(at(s.rate)), seconds: 1, stall: at(s.stall), busy: at(s.busy)}) {
				out = append(out, fmt.Sprintf("%d: %s %d→%d: %s", n, st.action, st.from, st.to, st.why))
			}
		}
		if m.phase == settled {
			out = append(out, fmt.Sprintf("settled at %d workers after %d windows, %d trials, %d changes", m.cur, n, m.trials, m.changes))
		} else {
			out = append(out, fmt.Sprintf("still %s at %d workers after %d windows", m.phase, m.cur, n))
		}
		if err := checkSettled(m); err != nil {
			t.Error(err)
		}
		return strings.Join(out, "\n")
	})
}

// TestAutoSettledStays: once settled in epoch 0, later epochs run at its
// choice and make no decisions.
func TestAutoSettledStays(t *testing.T) {
	_, stats := runAuto(t, autoSpec(t, 4*600, 500*time.Microsecond, Auto{Cores: 4}), RunOptions{Epochs: 3})
	logDecisions(t, stats)
	if !stats[0].Auto.Settled {
		t.Fatal("not settled within epoch 0")
	}
	for _, s := range stats[1:] {
		if len(s.Auto.Decisions) != 0 || s.Workers != stats[0].Workers {
			t.Errorf("epoch %d: %d decisions, %d workers after %d", s.Epoch, len(s.Auto.Decisions), s.Workers, stats[0].Workers)
		}
	}
}

// TestAutoDepthReport: a depth decision, a window of the devices' waits
// with no throughput of its own, reports 0 images/s, and the epoch's report
// encodes as JSON (a NaN rate would not, and pipe bench --json would fail).
func TestAutoDepthReport(t *testing.T) {
	tu := &tuner{cfg: Auto{Workers: true, Depth: true, Cores: 2, Memory: 1 << 30}, cores: 2, m: newTuning(2, 2, 2, 2, true, true)}
	if d := tu.decideDepth(0, 0.5, 0.5, 0.5, MaxDepth); d != 3 {
		t.Fatalf("a bursty window deepened the queues to %d; want 3", d)
	}
	a := tu.stats(0, true)
	if len(a.Decisions) != 1 || a.Decisions[0].ImagesPerSec != 0 {
		t.Errorf("decisions %+v: want one, at 0 images/s", a.Decisions)
	}
	if _, err := json.Marshal(a); err != nil {
		t.Error(err)
	}
}
