package sharding

import (
	"bufio"
	"fmt"
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
