package main

import (
	"testing"
	"time"

	"github.com/pipefeed/pipe/source/remote"
)

// TestWaitLine: the notice names the longest wait once it passes 5 s, and
// counts the others.
func TestWaitLine(t *testing.T) {
	w := remote.Wait{URL: "s3://b/k", Endpoint: "http://127.0.0.1:9", For: 5 * time.Second, RetryFor: time.Minute}
	for _, c := range []struct {
		waits []remote.Wait
		want  string
	}{
		{nil, ""},
		{[]remote.Wait{{URL: "s3://b/k", For: 4 * time.Second}}, ""},
		{[]remote.Wait{w}, "pipe: waiting for s3://b/k at http://127.0.0.1:9: no answer for 5 s (retrying until 60 s)"},
		{[]remote.Wait{w, {URL: "s3://b/j", For: time.Second}}, "pipe: waiting for s3://b/k at http://127.0.0.1:9: no answer for 5 s (retrying until 60 s) (1 more waiting)"},
	} {
		if got := waitLine(c.waits); got != c.want {
			t.Errorf("%v: %q, want %q", c.waits, got, c.want)
		}
	}
}
