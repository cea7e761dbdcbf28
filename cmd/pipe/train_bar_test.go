package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/trainer"
)

// screen is what a terminal shows of the last line of out: carriage
// returns move back to the start of the line, and later text overwrites.
func screen(out string) string {
	lines := strings.Split(out, "\n")
	var line []rune
	col := 0
	for _, r := range lines[len(lines)-1] {
		if r == '\r' {
			col = 0
			continue
		}
		if col < len(line) {
			line[col] = r
		} else {
			line = append(line, r)
		}
		col++
	}
	return strings.TrimRight(string(line), " ")
}

// TestStepBarResumed: the steps bar of an epoch resumed at step 3 of 10
// starts there and is wiped before the epoch line, as is a whole epoch's
// (a resumed bar started at 0, never finished, and the epoch line was
// printed over it).
func TestStepBarResumed(t *testing.T) {
	for _, done := range []int{0, 3} {
		var out bytes.Buffer
		b := newStepBar(&out, 10, done)
		if done > 0 && !strings.Contains(out.String(), "(3/10)") {
			t.Errorf("resumed at %d: the bar starts at %q", done, screen(out.String()))
		}
		for s := done; s < 10; s++ {
			b.step(trainer.StepStats{Step: int64(s + 1), Loss: 1})
		}
		b.epochDone()
		if got := screen(out.String()); got != "" {
			t.Errorf("resumed at %d: the epoch line would be printed after %q", done, got)
		}
		// The next epoch starts at 0; stopped after 4 steps, its bar is
		// wiped in turn.
		for s := range 4 {
			time.Sleep(210 * time.Millisecond) // past the bar's throttle
			b.step(trainer.StepStats{Step: int64(11 + s), Loss: 1})
		}
		if !strings.Contains(out.String(), "(4/10)") {
			t.Errorf("resumed at %d: the next epoch's bar shows %q", done, screen(out.String()))
		}
		b.clear()
		if got := screen(out.String()); got != "" {
			t.Errorf("resumed at %d: next epoch: %q left", done, got)
		}
	}
}
