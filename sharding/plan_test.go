package sharding

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/golden"
)

// TestPlanData runs the cases in testdata/plan.txt (-update rewrites
// their outputs).
func TestPlanData(t *testing.T) {
	golden.Run(t, "testdata/plan.txt", func(t *testing.T, c golden.Case) string {
		cmd := golden.Uncommented(c.Input)
		args := map[string]int{"world": 1, "epochs": 1, "seed": -1}
		fields := strings.Fields(cmd)
		if len(fields) == 0 || fields[0] != "plan" {
			t.Fatalf("unknown command %q", cmd)
		}
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", kv, err)
			}
			args[k] = n
		}
		opts := []Option{WithRank(args["rank"], args["world"])}
		if args["slices"] > 0 {
			opts = append(opts, WithSlices(args["slices"]))
		}
		if args["elastic"] > 0 {
			opts = append(opts, WithElastic(args["elastic"]))
		}
		if args["seed"] >= 0 {
			opts = append(opts, WithShuffle(uint64(args["seed"])))
		}
		p, err := New(args["n"], opts...)
		if err != nil {
			return "error: " + err.Error()
		}
		var got []string
		for e := range args["epochs"] {
			got = append(got, strings.Trim(fmt.Sprint(p.Epoch(e, nil)), "[]"))
		}
		return strings.Join(got, "\n")
	})
}

func TestRanksPartitionEachEpoch(t *testing.T) {
	for _, n := range []int{1000, 1003} {
		for _, world := range []int{1, 2, 3, 8} {
			for e := range 3 {
				seen := map[int]bool{}
				for r := range world {
					p, err := New(n, WithShuffle(7), WithRank(r, world))
					if err != nil {
						t.Fatal(err)
					}
					idx := p.Epoch(e, nil)
					if len(idx) != n/world {
						t.Fatalf("n=%d world=%d rank=%d: %d samples, want %d", n, world, r, len(idx), n/world)
					}
					for _, i := range idx {
						if seen[i] || i < 0 || i >= n {
							t.Fatalf("sample %d given twice or out of range", i)
						}
						seen[i] = true
					}
				}
			}
		}
	}
}

// TestSlicesSplitGlobalBatches: with WithSlices(b), batch k of every
// rank's epoch is slice r of global batch k of one process batching by
// world·b, whatever n, the shuffle or a shuffle buffer; and the ranks take
// ⌊n / world⌋ each, disjoint.
func TestSlicesSplitGlobalBatches(t *testing.T) {
	for _, n := range []int{96, 100, 103, 7} {
		for _, world := range []int{1, 2, 3} {
			for _, b := range []int{4, 16} {
				for _, opt := range []Option{nil, WithShuffle(5), WithShuffleBuffer(5, []int{n / 2, n - n/2}, 9)} {
					opts := []Option{}
					if opt != nil {
						opts = append(opts, opt)
					}
					one, _ := New(n, opts...)
					whole := one.Epoch(1, nil)
					seen := map[int]bool{}
					for r := range world {
						p, err := New(n, append(opts, WithRank(r, world), WithSlices(b))...)
						if err != nil {
							t.Fatal(err)
						}
						mine := p.Epoch(1, nil)
						if len(mine) != n/world {
							t.Fatalf("n=%d world=%d: rank %d has %d samples", n, world, r, len(mine))
						}
						for k := 0; k*b < len(mine); k++ {
							got := mine[k*b : min((k+1)*b, len(mine))]
							// Global batch k, as one process batching by
							// world·b makes it, cut into world equal
							// slices (the last: of the samples the ranks
							// read).
							g := whole[k*world*b : min((k+1)*world*b, world*len(mine))]
							per := len(g) / world
							if want := g[r*per : (r+1)*per]; !slices.Equal(got, want) {
								t.Fatalf("n=%d world=%d b=%d rank %d batch %d: %v, want %v", n, world, b, r, k, got, want)
							}
						}
						for _, i := range mine {
							if seen[i] {
								t.Fatalf("sample %d given twice", i)
							}
							seen[i] = true
						}
					}
				}
			}
		}
	}
}

func TestEpochsDifferAndRepeat(t *testing.T) {
	p, _ := New(500, WithShuffle(1))
	a, b := p.Epoch(0, nil), p.Epoch(1, nil)
	if slices.Equal(a, b) {
		t.Error("epochs 0 and 1 have the same order")
	}
	buf := make([]int, 0, 500)
	if !slices.Equal(a, p.Epoch(0, buf)) {
		t.Error("epoch 0 is not reproducible")
	}
	q, _ := New(500, WithShuffle(2))
	if slices.Equal(a, q.Epoch(0, nil)) {
		t.Error("seeds 1 and 2 give the same order")
	}
}

func TestBadPlans(t *testing.T) {
	if _, err := New(10, WithRank(2, 2)); err == nil {
		t.Error("rank 2 of 2 accepted")
	}
	if _, err := New(1, WithRank(0, 2)); err == nil {
		t.Error("1 sample over 2 ranks accepted")
	}
}

func TestPermIsBijectionAndMixes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64, 1000, 4097} {
		p := newPerm(n, 9, 3)
		seen := make([]bool, n)
		fixed := 0
		for i := range n {
			j := p.at(i)
			if j < 0 || j >= n || seen[j] {
				t.Fatalf("n=%d: at(%d) = %d repeats or is out of range", n, i, j)
			}
			seen[j] = true
			if j == i {
				fixed++
			}
		}
		if n >= 1000 && fixed > 10 {
			t.Errorf("n=%d: %d fixed points, a random permutation has about 1", n, fixed)
		}
	}
	// Positions are spread evenly: over many epochs each sample lands in
	// each slot 1/n of the time, within 5 standard deviations.
	for _, n := range []int{3, 10, 37} {
		const epochs = 6000
		counts := make([][]int, n)
		for i := range counts {
			counts[i] = make([]int, n)
		}
		for e := range epochs {
			p := newPerm(n, 1, e)
			for i := range n {
				counts[i][p.at(i)]++
			}
		}
		exp := float64(epochs) / float64(n)
		sd := math.Sqrt(exp * (1 - 1/float64(n)))
		for i := range counts {
			for j, c := range counts[i] {
				if math.Abs(float64(c)-exp) > 5*sd {
					t.Errorf("n=%d: sample %d landed in slot %d %d times of %d, expected %.0f", n, i, j, c, epochs, exp)
				}
			}
		}
	}
}

func TestAtAndFillMatchEpoch(t *testing.T) {
	p, _ := New(1003, WithShuffle(4), WithRank(1, 3))
	want := p.Epoch(2, nil)
	got := make([]int, 10)
	p.Fill(2, 100, got)
	for i, j := range got {
		if j != want[100+i] || p.At(2, 100+i) != j {
			t.Fatalf("Fill/At disagree with Epoch at %d", 100+i)
		}
	}
}

func BenchmarkAt(b *testing.B) {
	p, _ := New(50000, WithShuffle(1))
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		p.At(0, k%50000)
		k++
	}
}

// TestShuffleBuffer checks a streaming plan: each epoch is a permutation;
// with a buffer of 1 it is the shards whole, in a shuffled order; a sample
// leaves at most buffer places before its position in the shard stream;
// epochs differ; and ranks get equal, disjoint, contiguous blocks whatever
// the shard sizes.
func TestShuffleBuffer(t *testing.T) {
	shards := []int{7, 100, 1, 0, 33, 59}
	n := 200
	// Buffer 1: whole shards in some order.
	p, err := New(n, WithShuffleBuffer(5, shards, 1))
	if err != nil {
		t.Fatal(err)
	}
	order := p.Epoch(0, nil)
	starts := map[int]int{0: 7, 7: 100, 107: 1, 108: 33, 141: 59}
	for k := 0; k < n; {
		size, ok := starts[order[k]]
		if !ok {
			t.Fatalf("position %d starts with sample %d, not a shard's first", k, order[k])
		}
		for j := range size {
			if order[k+j] != order[k]+j {
				t.Fatalf("buffer 1: shard starting at %d read out of order", order[k])
			}
		}
		k += size
	}
	if slices.IsSorted(order) {
		t.Error("buffer 1: shards in index order, not shuffled")
	}
	for _, buffer := range []int{1, 16, 1000} {
		p, err := New(n, WithShuffleBuffer(5, shards, buffer))
		if err != nil {
			t.Fatal(err)
		}
		e0, e1 := p.Epoch(0, nil), p.Epoch(1, nil)
		for _, o := range [][]int{e0, e1} {
			if s := slices.Sorted(slices.Values(o)); !slices.Equal(s, seq(n)) {
				t.Fatalf("buffer %d: an epoch is not a permutation", buffer)
			}
		}
		if slices.Equal(e0, e1) {
			t.Errorf("buffer %d: epochs 0 and 1 equal", buffer)
		}
		if again := p.Epoch(0, nil); !slices.Equal(e0, again) {
			t.Errorf("buffer %d: epoch 0 not reproduced", buffer)
		}
		// The stream position of each sample (shards in the epoch's order,
		// which buffer 1 reveals) bounds how early it can come out.
		q, _ := New(n, WithShuffleBuffer(5, shards, 1))
		stream := q.Epoch(0, nil)
		at := make([]int, n)
		for i, s := range stream {
			at[s] = i
		}
		for k, s := range e0 {
			if at[s] > k+buffer-1 {
				t.Fatalf("buffer %d: sample %d emitted at %d, read at %d", buffer, s, k, at[s])
			}
		}
	}
	// Ranks: 3 of them, 66 each, disjoint blocks of the global order.
	var all []int
	for r := range 3 {
		p, err := New(n, WithShuffleBuffer(9, shards, 8), WithRank(r, 3))
		if err != nil {
			t.Fatal(err)
		}
		e := p.Epoch(2, nil)
		if len(e) != 66 || p.Len() != 66 {
			t.Fatalf("rank %d: %d samples, want 66", r, len(e))
		}
		for k := range e {
			if p.At(2, k) != e[k] {
				t.Fatalf("rank %d: At(2, %d) = %d, Epoch says %d", r, k, p.At(2, k), e[k])
			}
		}
		part := make([]int, 10)
		p.Fill(2, 30, part)
		if !slices.Equal(part, e[30:40]) {
			t.Fatalf("rank %d: Fill from 30 differs from Epoch", r)
		}
		all = append(all, e...)
	}
	global, _ := New(n, WithShuffleBuffer(9, shards, 8))
	if !slices.Equal(all, global.Epoch(2, nil)[:198]) {
		t.Error("ranks' blocks are not the global order cut in three")
	}
	for _, bad := range []Option{WithShuffleBuffer(1, shards, 0), WithShuffleBuffer(1, []int{10, 10}, 4), WithShuffleBuffer(1, []int{-1, 201}, 4)} {
		if _, err := New(n, bad); err == nil {
			t.Error("a bad streaming plan was accepted")
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestElasticStreamIsWorldFree: with WithElastic(g), the ranks' slices of
// every global batch, put back together, are the same global stream for
// every world size that divides g (1, 2, 4), shuffled or not, full
// permutation or shuffle buffer; each rank reads whole slices, and an
// epoch is the n/g whole global batches.
func TestElasticStreamIsWorldFree(t *testing.T) {
	for _, n := range []int{96, 100, 103} {
		for _, buffer := range []int{0, 10} {
			const g = 16
			var want []int
			for _, world := range []int{1, 2, 4} {
				ranks := make([][]int, world)
				for r := range world {
					opts := []Option{WithRank(r, world), WithElastic(g)}
					if buffer > 0 {
						opts = append(opts, WithShuffleBuffer(5, []int{n / 3, n / 3, n - 2*(n/3)}, buffer))
					} else {
						opts = append(opts, WithShuffle(5))
					}
					p, err := New(n, opts...)
					if err != nil {
						t.Fatal(err)
					}
					ranks[r] = p.Epoch(1, nil)
					if len(ranks[r]) != n/g*g/world {
						t.Fatalf("n=%d world=%d: rank %d reads %d samples, want %d", n, world, r, len(ranks[r]), n/g*g/world)
					}
				}
				var got []int
				s := g / world
				for b := range n / g {
					for r := range world {
						got = append(got, ranks[r][b*s:(b+1)*s]...)
					}
				}
				if want == nil {
					want = got
				} else if !slices.Equal(got, want) {
					t.Fatalf("n=%d buffer=%d: the global stream of %d ranks differs from one rank's", n, buffer, world)
				}
			}
		}
	}
	if _, err := New(100, WithRank(0, 3), WithElastic(16)); err == nil || !strings.Contains(err.Error(), "does not divide among 3 ranks") {
		t.Errorf("16 among 3 ranks: %v", err)
	}
	if _, err := New(10, WithElastic(16)); err == nil || !strings.Contains(err.Error(), "more than the 10 samples") {
		t.Errorf("16 of 10 samples: %v", err)
	}
}
