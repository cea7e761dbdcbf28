package sharding

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPlanData runs the cases in testdata/plan.txt.
func TestPlanData(t *testing.T) {
	f, err := os.Open("testdata/plan.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		cmd := strings.TrimSpace(sc.Text())
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		args := map[string]int{"world": 1, "epochs": 1, "seed": -1}
		fields := strings.Fields(cmd)
		if fields[0] != "plan" {
			t.Fatalf("plan.txt:%d: unknown command %q", line, fields[0])
		}
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("plan.txt:%d: %s: %v", line, kv, err)
			}
			args[k] = n
		}
		start := line
		sc.Scan()
		line++
		if sc.Text() != "----" {
			t.Fatalf("plan.txt:%d: want ----", line)
		}
		var want []string
		for sc.Scan() {
			line++
			if strings.TrimSpace(sc.Text()) == "" {
				break
			}
			want = append(want, sc.Text())
		}
		opts := []Option{WithRank(args["rank"], args["world"])}
		if args["seed"] >= 0 {
			opts = append(opts, WithShuffle(uint64(args["seed"])))
		}
		p, err := New(args["n"], opts...)
		if err != nil {
			t.Fatalf("plan.txt:%d: %v", start, err)
		}
		var got []string
		for e := range args["epochs"] {
			got = append(got, strings.Trim(fmt.Sprint(p.Epoch(e, nil)), "[]"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("plan.txt:%d: %s\ngot:\n%s\nwant:\n%s", start, cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
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
