package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pipefeed/pipe/source/remote"
)

// waitNotice is how long a store's request may go unanswered, or be
// retried, before the command says so: long enough that a healthy store
// never shows, short enough that a silent endpoint is not a silent
// command.
const waitNotice = 5 * time.Second

// sayWaits tells w, until stop, what the process's stores have waited
// for longer than waitNotice (remote.Waits): the longest wait, at most
// every waitNotice. On a terminal the line first clears the progress bar's.
func sayWaits(ctx context.Context, w io.Writer, terminal bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if now.Sub(last) < waitNotice {
					continue
				}
				if line := waitLine(remote.Waits()); line != "" {
					if terminal {
						line = "\r\033[K" + line
					}
					fmt.Fprintln(w, line)
					last = now
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// waitLine is the notice for waits, longest first: the longest if it has
// gone on for waitNotice, with how many more are waiting; "" if none has.
func waitLine(waits []remote.Wait) string {
	if len(waits) == 0 || waits[0].For < waitNotice {
		return ""
	}
	line := "pipe: " + waits[0].String()
	if len(waits) > 1 {
		line += fmt.Sprintf(" (%d more waiting)", len(waits)-1)
	}
	return line
}
