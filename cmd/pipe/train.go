package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/trainer"
)

// train runs the pipeline's train stage: a header, a line (or --json
// object, with the fetch figures since lastFetch for a source over URLs)
// per epoch, plots and a summary at the end.
func train(c *cobra.Command, p *pipe.Pipeline, f runFlags, lastFetch pipe.FetchStats) error {
	out, errw := output(c), c.ErrOrStderr()
	if f.resume && p.Summary().TrainOut == "" {
		return usageError{errors.New("--resume needs the train stage's out= directory, where the checkpoint is")}
	}
	if !f.json {
		fmt.Fprint(out, describe(p))
	}
	enc := json.NewEncoder(out)
	var bar *stepBar
	started := time.Now()
	dir := p.Summary().TrainOut
	ran := 0 // epochs trained by this process (a resume may have none left)
	opts := pipe.TrainOptions{
		Resume: f.resume,
		OnStart: func(tr *trainer.Trainer) {
			if f.json {
				return
			}
			m := tr.Model()
			// "2 replica(s)", "on cuda:0, cuda:1" or "on each of 2 ranks";
			// "per-device 32 × 2 devices", "per-GPU 128 × 2 GPUs", "× 2 ranks".
			n, ranks := p.Devices(), p.Ranks()
			unit, where := "device", ""
			if devs := tr.Devices(); devs[0] != "cpu" {
				unit, where = "GPU", " on "+strings.Join(devs, ", ")
			}
			split := fmt.Sprintf("per-%s %d × %d %ss", unit, p.BatchSize()/n, n, unit)
			if ranks > 1 {
				where = fmt.Sprintf(" on each of %d ranks", ranks)
				split += fmt.Sprintf(" × %d ranks", ranks)
			}
			fmt.Fprintf(out, "model    %s: %d parameters for %d classes, %d replica(s)%s\n", m.Name, m.Size(), m.Classes(), n, where)
			fmt.Fprintf(out, "batch    %s = global %d; peak lr %.4g after scaling; %d steps per epoch\n",
				split, p.GlobalBatch(), tr.PeakLR(), tr.StepsPerEpoch())
			if f.resume {
				fmt.Fprintf(out, "resumed  at epoch %d, step %d of it (step %d in all)", tr.Epoch, tr.InEpoch, tr.Step)
				if epochs := p.Summary().TrainEpochs; tr.Epoch >= epochs {
					fmt.Fprintf(out, ": the run's %d epochs are done, nothing is left to train", epochs)
				}
				fmt.Fprintln(out)
			}
			if !f.quiet && isTerminal(errw) && rank0() {
				bar = newStepBar(errw, tr.StepsPerEpoch(), tr.InEpoch)
			}
		},
		OnStep: func(s trainer.StepStats) {
			if bar != nil {
				bar.step(s)
			}
		},
		OnEpoch: func(e pipe.TrainEpoch) {
			ran++
			if bar != nil {
				bar.epochDone()
			}
			if f.json {
				fetched := pipe.Fetched()
				enc.Encode(withFetch(e, fetched, lastFetch))
				lastFetch = fetched
				return
			}
			fmt.Fprintln(out, trainLine(e))
		},
	}
	res, err := p.Fit(c.Context(), opts)
	if bar != nil {
		bar.clear()
	}
	var files []string
	if res != nil && len(res.History) > 0 && dir != "" && rank0() {
		var perr error
		if files, perr = plotHistory(dir, res.History); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		if (c.Context().Err() != nil || errors.Is(err, context.Canceled)) && res != nil && dir != "" && rank0() {
			tr := res.Trainer
			fmt.Fprintf(errw, "stopped at epoch %d, step %d of it; the checkpoint in %s has it: continue with --resume\n", tr.Epoch, tr.InEpoch, dir)
		}
		return err
	}
	if !f.json {
		fmt.Fprint(out, trainSummary(res.History, ran, time.Since(started), dir, files))
	}
	return nil
}

// stepBar is the steps of an epoch as a progress bar on a terminal, cleared
// at the end of each epoch before its line is printed.
type stepBar struct{ *progressbar.ProgressBar }

// newStepBar shows steps steps, done of them already (a resumed epoch).
func newStepBar(w io.Writer, steps, done int) *stepBar {
	b := &stepBar{progressbar.NewOptions64(int64(steps), progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("steps"), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(200*time.Millisecond))}
	if done > 0 {
		b.Set(done)
	}
	return b
}

func (b *stepBar) step(s trainer.StepStats) {
	b.Add(1)
	b.Describe(fmt.Sprintf("epoch %d, loss %.3f", s.Epoch, s.Loss))
}

// epochDone clears the bar, then starts the next epoch's at 0. (Reset
// first forgot how wide the bar was, so that the clear wrote nothing and
// the epoch line was printed over a bar that had not finished: a resumed
// epoch's.)
func (b *stepBar) epochDone() {
	b.clear()
	b.Reset()
}

func (b *stepBar) clear() { b.Clear() }

func trainLine(e pipe.TrainEpoch) string {
	line := fmt.Sprintf("epoch %d: train loss %.4f acc %.2f%%", e.Epoch, e.TrainLoss, 100*e.TrainAccuracy)
	if e.TestAccuracy != nil {
		line += fmt.Sprintf(", test loss %.4f acc %.2f%%", *e.TestLoss, 100**e.TestAccuracy)
	}
	line += fmt.Sprintf(", lr %.4g, %.0f images/s, data stall %.1f%%", e.LR, e.ImagesPerSec, e.StallPct)
	if len(e.DeviceStall) > 1 {
		per := make([]string, len(e.DeviceStall))
		for i, s := range e.DeviceStall {
			per[i] = fmt.Sprintf("%.1f", s)
		}
		line += " (per device " + strings.Join(per, "/") + "%)"
	}
	line += fmt.Sprintf(", %.1f s (%.0f s in all)", e.Seconds, e.WallSeconds)
	if e.Auto != nil && (len(e.Auto.Decisions) > 0 || e.Epoch == 0) {
		line += "\n  " + autoLine(e.Auto)
	}
	return line
}

// trainSummary is the one screen at the end of a run: h is every epoch's
// figures, the last ran of them trained by this process.
func trainSummary(h []pipe.TrainEpoch, ran int, took time.Duration, dir string, files []string) string {
	var b strings.Builder
	last := h[len(h)-1]
	var images int
	var secs, stall float64
	best, bestEpoch := -1.0, -1
	for _, e := range h {
		images += e.Images
		secs += e.Seconds
		stall += e.StallPct * e.Seconds / 100
		if e.TestAccuracy != nil && *e.TestAccuracy > best {
			best, bestEpoch = *e.TestAccuracy, e.Epoch
		}
	}
	switch {
	case ran == len(h):
		fmt.Fprintf(&b, "trained  %d epochs, ", len(h))
	case ran == 0:
		fmt.Fprintf(&b, "trained  nothing in this run (the checkpoint has all %d epochs); over them, ", len(h))
	default:
		fmt.Fprintf(&b, "trained  %d epochs, %d of them in this run after --resume; ", len(h), ran)
	}
	fmt.Fprintf(&b, "%d images in %.0f s of training (%.0f images/s), data stall %.1f%% of it\n",
		images, secs, float64(images)/secs, 100*stall/secs)
	var steps int
	var reduce, wait float64
	for _, e := range h {
		steps += e.Steps
		reduce += e.AllReduceSeconds
		wait += e.RankWaitSeconds
	}
	if reduce > 0 && steps > 0 {
		fmt.Fprintf(&b, "reduce   gradient all-reduce %.2f ms a step (%.1f%% of training)", 1000*reduce/float64(steps), 100*reduce/secs)
		if wait > 0 {
			fmt.Fprintf(&b, "; rank 0 waited %.2f ms a step for the other ranks", 1000*wait/float64(steps))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "final    train loss %.4f, train accuracy %.2f%%", last.TrainLoss, 100*last.TrainAccuracy)
	if last.TestAccuracy != nil {
		fmt.Fprintf(&b, ", test loss %.4f, test accuracy %.2f%%", *last.TestLoss, 100**last.TestAccuracy)
	}
	b.WriteString("\n")
	if bestEpoch >= 0 {
		fmt.Fprintf(&b, "best     test accuracy %.2f%% at epoch %d, %.0f s into training\n", 100*best, bestEpoch, h[bestEpoch-h[0].Epoch].WallSeconds)
	}
	if dir != "" {
		fmt.Fprintf(&b, "files    %s/checkpoint.gob, %s/metrics.jsonl", dir, dir)
		for _, f := range files {
			b.WriteString(", " + f)
		}
		b.WriteString("\n")
	}
	return b.String()
}
