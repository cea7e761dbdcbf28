package engine

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

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
// the workers the bottleneck, and auto grows them to the cores.
func TestAutoFastConsumerGrows(t *testing.T) {
	// A batch costs one worker 4 × 2 ms of sleep: the CPU's share is
	// small enough that 8 workers are 8 times as fast on 2 cores, even
	// under the race detector.
	e, stats := runAuto(t, autoSpec(t, 4*1500, 2*time.Millisecond, Auto{Cores: 8, Interval: 50 * time.Millisecond}), RunOptions{})
	logDecisions(t, stats)
	a := stats[0].Auto
	if !a.Settled || a.SettledEpoch != 0 {
		t.Errorf("not settled within epoch 0: %+v", a)
	}
	if w := e.Workers(); w < 6 {
		t.Errorf("auto chose %d workers for a fast consumer on 8 cores; want ≥ 6", w)
	}
}

// TestAutoSettlesAtTheCeiling: once the workers reach the most the cores
// allow with the consumer still waiting, nothing is left to try, and the
// tuner settles at the next window rather than after settleWindows of
// them: a short epoch is tuned within itself.
func TestAutoSettlesAtTheCeiling(t *testing.T) {
	_, stats := runAuto(t, autoSpec(t, 4*300, 2*time.Millisecond, Auto{Cores: 2, Interval: 50 * time.Millisecond}), RunOptions{})
	logDecisions(t, stats)
	a := stats[0].Auto
	if !a.Settled || a.SettledEpoch != 0 || a.Workers != 2 {
		t.Fatalf("not settled at 2 workers within epoch 0: %+v", a)
	}
	var kept, settled float64 = -1, -1
	for _, d := range a.Decisions {
		switch d.Action {
		case "keep":
			kept = d.Seconds
		case "settle":
			settled = d.Seconds
			if !strings.Contains(d.Why, "nothing left to try") {
				t.Errorf("settled because %q; want the ceiling", d.Why)
			}
		}
	}
	if kept < 0 || settled < kept || settled > kept+0.2 {
		t.Errorf("kept the grow at %.2f s and settled at %.2f s: want the window after", kept, settled)
	}
}

// TestAutoSlowConsumerShrinks: a consumer four times slower than one
// worker leaves the workers idle, and auto ends with few of them.
func TestAutoSlowConsumerShrinks(t *testing.T) {
	// A batch costs one worker 4 × 500 µs; the consumer takes 8 ms.
	e, stats := runAuto(t, autoSpec(t, 4*300, 500*time.Microsecond, Auto{Cores: 8}), RunOptions{Consume: 8 * time.Millisecond})
	logDecisions(t, stats)
	if !stats[0].Auto.Settled {
		t.Errorf("not settled within epoch 0")
	}
	if w := e.Workers(); w > 2 {
		t.Errorf("auto kept %d workers for a consumer 4 times slower than one; want ≤ 2", w)
	}
}

// TestAutoChecksums: the output of auto, which changes the workers in the
// middle of an epoch, equals that of 1 and of 4 fixed workers.
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
	s := autoSpec(t, 4*300, 200*time.Microsecond, Auto{Cores: 8, Interval: 10 * time.Millisecond})
	_, stats := runAuto(t, s, RunOptions{Epochs: 2, Checksum: true})
	logDecisions(t, stats)
	if n := len(stats[0].Auto.Decisions); n < 2 {
		t.Errorf("auto made %d decisions in epoch 0: the test wants it to change the workers mid-epoch", n)
	}
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
// number of changes and never change again.
func TestAutoDoesNotOscillate(t *testing.T) {
	for seed := range uint64(20) {
		s := autoSpec(t, 100, 0, Auto{Cores: 16})
		tu := newTuner(*s.Auto, 0, &s, s.Batch)
		r := rand.New(rand.NewPCG(seed, 1))
		w := tu.workers
		for i := range 200 {
			m := measure{workers: w, rate: 1000 * (0.9 + 0.2*r.Float64()), stall: 0.1 * r.Float64(),
				wait: r.Float64() * 0.2, busy: r.Float64()}
			w = tu.decideWorkers(0, float64(i), m)
		}
		if !tu.settled {
			t.Errorf("seed %d: still tuning after 200 windows of noise", seed)
		}
		if tu.changes > maxChanges(16) {
			t.Errorf("seed %d: %d changes, more than %d", seed, tu.changes, maxChanges(16))
		}
		changes := 0
		for _, d := range tu.decisions {
			if d.From != d.To {
				changes++
			}
		}
		if changes > 2*maxChanges(16) {
			t.Errorf("seed %d: %d decisions changed the workers", seed, changes)
		}
	}
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
