package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/transform"
)

type runFlags struct {
	epochs   int
	workers  int
	json     bool
	checksum bool
	quiet    bool
	consume  time.Duration
	resume   bool
	bench    bool // pipe bench: stream the data even where the file trains
	// rankTimeout is how long a rank of an MPI job may be silent.
	rankTimeout time.Duration
}

func (f *runFlags) register(c *cobra.Command, epochs int) {
	c.Flags().IntVar(&f.epochs, "epochs", epochs, "epochs to run")
	c.Flags().IntVar(&f.workers, "workers", 0, "transform workers (0: as the file says, else one per core); the output does not depend on it")
	c.Flags().BoolVar(&f.json, "json", false, "print one JSON object per epoch on stdout")
	c.Flags().BoolVar(&f.checksum, "checksum", false, "hash every output byte and label of each epoch (costs throughput)")
	c.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	c.Flags().DurationVar(&f.consume, "consume", 0, "make each batch's consumer take this long, as a training step would (one consumer per device); the stall figures then say whether the pipeline keeps up")
	c.Flags().DurationVar(&f.rankTimeout, "rank-timeout", 10*time.Second, "started by mpirun or srun: a rank that sends no heartbeat for this long is taken for dead or hung, and the job is stopped (0: never)")
}

func newRun() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run FILE",
		Short: "run a pipeline: train its model if it has a train stage, else stream its epochs; print a summary",
		Args:  exactArgs(1),
		RunE:  func(c *cobra.Command, args []string) error { return stream(c, args[0], f) },
	}
	f.register(c, 1)
	c.Flags().BoolVar(&f.resume, "resume", false, "with a train stage: continue from the checkpoint in its out= directory")
	return c
}

func newBench() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "bench FILE",
		Short: "measure a pipeline's throughput, epoch by epoch",
		Long: `bench streams epochs of the pipeline as fast as it can and reports images/s.
With --json it prints one object per epoch with epoch, images, seconds,
images_per_sec, stall_seconds, slab_wait_seconds, skipped, workers, and with
--checksum also checksum: a hash of every output byte and label in order,
and, where sources read URLs, fetch: the bytes, requests, retries and shard
cache hits and misses since the epoch before (the first epoch's count the
shards fetched as the source opened).
A train stage in the file is left out: bench measures the data side.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error { f.bench = true; return stream(c, args[0], f) },
	}
	f.register(c, 3)
	return c
}

func stream(c *cobra.Command, file string, f runFlags) error {
	if f.epochs < 1 {
		return usageError{fmt.Errorf("--epochs=%d: must be at least 1", f.epochs)}
	}
	if f.workers < 0 {
		return usageError{fmt.Errorf("--workers=%d: must be 0 or more", f.workers)}
	}
	if f.consume < 0 || (f.consume > 0 && f.checksum) {
		return usageError{fmt.Errorf("--consume=%v: must be positive, and cannot go with --checksum (concurrent consumers do not keep the order a checksum needs)", f.consume)}
	}
	if f.rankTimeout < 0 {
		return usageError{fmt.Errorf("--rank-timeout=%v: must be 0 (never) or more", f.rankTimeout)}
	}
	if err := joinJob(f.rankTimeout); err != nil {
		return err
	}
	var lopts []pipe.LoadOption
	if job != nil {
		lopts = append(lopts, pipe.WithGroup(job.comm))
	}
	lastFetch := pipe.Fetched() // as the last epoch printed saw it: the first epoch counts the load's
	p, err := load(c, file, lopts...)
	if err != nil {
		return err
	}
	defer p.Close()
	if f.workers > 0 {
		p.SetWorkers(f.workers)
	}
	setProcs(p)
	if p.Summary().Train && !f.bench {
		if c.Flags().Changed("epochs") || f.checksum || f.consume > 0 {
			return usageError{errors.New("with a train stage, set epochs= on it; --epochs, --checksum and --consume are for streaming")}
		}
		return train(c, p, f, lastFetch)
	}
	if f.resume {
		return usageError{errors.New("--resume continues training: the file has no train stage")}
	}
	out, errw := output(c), c.ErrOrStderr()
	// The warnings met loading the file are said here, and the summary
	// says only those that arose after.
	said := 0
	if c := p.CacheInfo(); c != nil {
		said = len(c.Warnings)
	}
	if f.json {
		// stdout is the JSON objects; the warnings the summary would
		// carry go to stderr rather than nowhere.
		warnings(errw, p, 0)
	} else {
		fmt.Fprint(out, describe(p))
	}
	var bar *progressbar.ProgressBar
	if !f.quiet && isTerminal(errw) && rank0() {
		bar = progressbar.NewOptions64(int64(p.Samples()*f.epochs),
			progressbar.OptionSetWriter(errw),
			progressbar.OptionSetDescription("images"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("images"),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish())
	}
	enc := json.NewEncoder(out)
	opts := pipe.RunOptions{
		Epochs:   f.epochs,
		Checksum: f.checksum,
		Consume:  f.consume,
		OnEpoch: func(s pipe.EpochStats) {
			if bar != nil {
				bar.Clear()
			}
			if f.json {
				fetched := pipe.Fetched()
				enc.Encode(withFetch(streamEpoch(s, f.consume > 0), fetched, lastFetch))
				lastFetch = fetched
				return
			}
			fmt.Fprintln(out, epochLine(s, f.consume > 0))
		},
	}
	if bar != nil {
		opts.OnImages = func(n int) { bar.Add(n) }
	}
	stats, err := p.Run(c.Context(), opts)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	if f.json {
		warnings(errw, p, said)
	} else {
		fmt.Fprint(out, summary(p, stats, f.consume > 0, said))
	}
	return nil
}

// streamEpoch is a streamed epoch as --json prints it: without a consumer
// (--consume), the stall figures, which would say only that batches were
// dropped at once, are left out.
func streamEpoch(s pipe.EpochStats, consumed bool) any {
	if consumed {
		return s
	}
	type device struct {
		pipe.DeviceStats
		StallSeconds *float64 `json:"stall_seconds,omitempty"`
		StallPct     *float64 `json:"stall_pct,omitempty"`
	}
	var devs []device
	for _, d := range s.Devices {
		devs = append(devs, device{DeviceStats: d})
	}
	return struct {
		pipe.EpochStats
		StallSeconds *float64 `json:"stall_seconds,omitempty"`
		Devices      []device `json:"devices,omitempty"`
	}{EpochStats: s, Devices: devs}
}

// withFetch adds to an epoch's JSON the fetch figures since the last epoch
// (the first's hold the load's, when URL shards were fetched as the source
// opened), where there were any.
func withFetch(epoch any, now, last pipe.FetchStats) any {
	if now == (pipe.FetchStats{}) {
		return epoch // no source read a URL
	}
	d := pipe.FetchStats{Bytes: now.Bytes - last.Bytes, Requests: now.Requests - last.Requests, Retries: now.Retries - last.Retries,
		CacheHits: now.CacheHits - last.CacheHits, CacheMisses: now.CacheMisses - last.CacheMisses, CacheDamaged: now.CacheDamaged - last.CacheDamaged}
	b, err := json.Marshal(epoch)
	if err != nil {
		return epoch
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return epoch
	}
	m["fetch"], _ = json.Marshal(d)
	return m
}

// warnings writes the cache's warnings after the first said to w, one
// "pipe: warning:" line each: what --json leaves out of stdout.
func warnings(w io.Writer, p *pipe.Pipeline, said int) {
	if c := p.CacheInfo(); c != nil && rank0() {
		for _, m := range c.Warnings[min(said, len(c.Warnings)):] {
			fmt.Fprintf(w, "pipe: warning: %s\n", m)
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func describe(p *pipe.Pipeline) string {
	var b strings.Builder
	s := p.Summary()
	t := s.Tensor
	d := t.Dims(s.BatchSize)
	fmt.Fprintf(&b, "source   %s: %d samples, %d classes", s.Source, s.SourceSamples, s.Classes)
	switch n := p.Source().Info().NonImages; {
	case n == 1:
		b.WriteString(", 1 non-image file skipped")
	case n > 1:
		fmt.Fprintf(&b, ", %d non-image files skipped", n)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "plan     %d samples in %d batches of %d per epoch, seed %d", s.Samples, s.Batches, s.BatchSize, s.Seed)
	if s.FileBatch > s.GlobalBatch {
		fmt.Fprintf(&b, "; the batch stage's %d exceeds the epoch's %d samples, so each epoch is one batch of them", s.FileBatch, s.Samples)
	}
	if s.ShuffleBuffer > 0 {
		fmt.Fprintf(&b, "; shards in random order through a %d-sample shuffle buffer", s.ShuffleBuffer)
	}
	if s.World > 1 {
		fmt.Fprintf(&b, "; rank %d of %d", s.Rank, s.World)
		if s.GlobalBatch != s.BatchSize {
			fmt.Fprintf(&b, ", each a slice of every global batch of %d", s.GlobalBatch)
		}
	}
	if s.Elastic {
		fmt.Fprintf(&b, "; elastic: whole global batches of %d, the same for any number of ranks that divides it", s.GlobalBatch)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "output   %s %s [%d %d %d %d], %d bytes per batch", t.Layout, t.DType, d[0], d[1], d[2], d[3], s.BatchSize*t.SampleBytes())
	if h := s.HostTensor; s.NormalizeOnDevice {
		fmt.Fprintf(&b, "; crosses to the devices as %s (%d bytes) and is normalized there", h.DType, s.BatchSize*h.SampleBytes())
	}
	b.WriteString("\n")
	if s.Fields != nil {
		fmt.Fprintf(&b, "fields   %s", s.Fields)
		for i, r := range s.FieldRegions {
			sep := "; "
			if i > 0 {
				sep = ", "
			}
			fmt.Fprintf(&b, "%s%s %s %v", sep, r.Kind, r.DType, r.Shape)
			if r.Counts >= 0 {
				b.WriteString(" with counts")
			}
		}
		if s.FieldBytes > 0 {
			fmt.Fprintf(&b, "; %d bytes per batch", s.FieldBytes)
		}
		b.WriteString("\n")
	}
	if s.Decode != "" {
		fmt.Fprintf(&b, "decode   %s\n", s.Decode)
		fmt.Fprintf(&b, "memory   decode budget %s\n", transform.DescribeDecodeMemory())
	}
	if s.WorkersAuto {
		fmt.Fprintf(&b, "workers  auto: from %d, up to %d", s.Workers, s.MaxWorkers)
	} else {
		fmt.Fprintf(&b, "workers  %d", s.Workers)
	}
	if s.WorkersAuto || s.DepthAuto {
		fmt.Fprintf(&b, " within a budget of %.0f MiB (memory=)", float64(s.MemoryBudget)/(1<<20))
	}
	fmt.Fprintf(&b, ", on_error=%s\n", s.OnError)
	if n := s.Devices; n > 0 {
		depth := fmt.Sprintf("depth %d", s.Depth)
		if s.DepthAuto {
			depth = fmt.Sprintf("depth auto from %d", s.Depth)
		}
		fmt.Fprintf(&b, "devices  %d × %s: per-device batch %d, global batch %d, %s\n", n, s.DeviceKind, s.BatchSize/n, s.GlobalBatch, depth)
	}
	if job != nil {
		fmt.Fprintf(&b, "ranks    %d, started by %s (%s): %d on this machine, %d core(s) each; rank 0 prints and writes the files\n",
			job.comm.Size(), job.launch.Launcher, job.comm.Library(), job.comm.LocalSize(), job.cores)
	}
	if c := s.Cache; c != nil {
		fmt.Fprintf(&b, "cache    %s, fingerprint %s, %d shards of %d per epoch", c.Dir, c.Fingerprint, c.Shards, c.ShardSize)
		if c.Echo {
			fmt.Fprintf(&b, "; %d distinct epochs: epoch e ≥ %d replays epoch e mod %d's order and pre-cache augmentation (data echoing; stages after the cache draw afresh)", c.Epochs, c.Epochs, c.Epochs)
		} else {
			b.WriteString("; one copy serves every epoch (nothing random before the cache)")
		}
		b.WriteString("\n")
		for _, w := range c.Warnings {
			fmt.Fprintf(&b, "warning  %s\n", w)
		}
	}
	return b.String()
}

// epochLine is a streamed epoch's line. The consumer's stall and the
// producer's wait are figures only when there is a consumer (consumed:
// --consume): a stream that drops each batch at once waits for nearly every
// one, and its producer waits only for the workers, which says nothing.
func epochLine(s pipe.EpochStats, consumed bool) string {
	line := fmt.Sprintf("epoch %d: %d images in %.3f s = %.0f images/s", s.Epoch, s.Images, s.Seconds, s.ImagesPerSec)
	var notes []string
	if consumed {
		notes = append(notes, fmt.Sprintf("consumer stalled %.3f s", s.StallSeconds), fmt.Sprintf("producer waited %.3f s for slabs", s.SlabWaitSeconds))
	}
	if s.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d skipped", s.Skipped))
	}
	if s.CacheHits+s.CacheMisses > 0 || s.CacheCorrupt > 0 {
		c := fmt.Sprintf("cache: %d read, %d computed", s.CacheHits, s.CacheMisses)
		if s.CacheCorrupt > 0 {
			c += fmt.Sprintf(", %d damaged and rewritten", s.CacheCorrupt)
		}
		notes = append(notes, c)
	}
	if len(notes) > 0 {
		line += " (" + strings.Join(notes, ", ") + ")"
	}
	if s.Checksum != "" {
		line += " checksum " + s.Checksum
	}
	if s.Auto != nil {
		line += "\n  " + autoLine(s.Auto)
	}
	for _, d := range s.Devices {
		line += fmt.Sprintf("\n  %s: %d batches, ", d.Device, d.Batches)
		if consumed {
			line += fmt.Sprintf("stalled %.3f s (%.1f%%), ", d.StallSeconds, d.StallPct)
		}
		line += fmt.Sprintf("held production back %.3f s, copied %.1f MB at %.1f GB/s", d.ProducerWaitSeconds, float64(d.Bytes)/1e6, d.CopyGBps)
	}
	return line
}

// autoLine is the tuner's line: what it chose, why, and whether it has
// settled.
func autoLine(a *pipe.AutoStats) string {
	line := "auto: " + a.Why
	changes := fmt.Sprintf("%d changes", a.Changes)
	if a.Changes == 1 {
		changes = "1 change"
	}
	if a.Settled {
		return line + fmt.Sprintf("; settled in epoch %d at %.2f s after %s", a.SettledEpoch, a.SettledSeconds, changes)
	}
	return line + "; " + changes + " so far"
}

// summary is a stream's closing lines, with the cache's warnings after the
// first said; consumed as for epochLine.
func summary(p *pipe.Pipeline, stats []pipe.EpochStats, consumed bool, said int) string {
	var b strings.Builder
	images, secs, stall := 0, 0.0, 0.0
	for _, s := range stats {
		images += s.Images
		secs += s.Seconds
		stall += s.StallSeconds
	}
	fmt.Fprintf(&b, "total    %d images in %.3f s = %.0f images/s over %d epochs", images, secs, float64(images)/secs, len(stats))
	if consumed && secs > 0 {
		fmt.Fprintf(&b, "; the consumer waited for data %.0f%% of the time", 100*stall/secs)
	}
	b.WriteString("\n")
	if c := p.CacheInfo(); c != nil {
		// Warnings that arose during the run (damaged entries, failed writes).
		for _, w := range c.Warnings[min(said, len(c.Warnings)):] {
			fmt.Fprintf(&b, "warning  %s\n", w)
		}
	}
	skipped, n := p.Skipped()
	if n > 0 {
		// Corrupt records, and ones refused for their size (a decode
		// over the memory budget): each line says which.
		what := "records"
		if n == 1 {
			what = "record"
		}
		fmt.Fprintf(&b, "skipped  %d %s that could not be used (on_error=skip), each with why:\n", n, what)
		for i, e := range skipped {
			if i == 20 {
				fmt.Fprintf(&b, "  ... and %d more\n", n-20)
				break
			}
			fmt.Fprintf(&b, "  %v\n", e)
		}
	}
	return b.String()
}
