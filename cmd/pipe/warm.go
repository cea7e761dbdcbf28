package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe"
	pcache "github.com/pipefeed/pipe/cache"
)

func newWarm() *cobra.Command {
	var epochs, workers int
	var quiet, asJSON bool
	c := &cobra.Command{
		Use:   "warm FILE [--epochs K]",
		Short: "fill a pipeline's cache ahead of training; resumes where an earlier warm stopped",
		Long: `warm computes every missing entry of the pipeline's cache stage for its first
K distinct epochs (default: all the cache keeps) and writes them. Entries
already there are skipped, so a warm that was interrupted, even by kill -9,
resumes where it stopped.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if epochs < 0 || workers < 0 {
				return usageError{fmt.Errorf("--epochs and --workers must be 0 or more")}
			}
			p, err := load(c, args[0])
			if err != nil {
				return err
			}
			defer p.Close()
			info := p.CacheInfo()
			if info == nil {
				return usageError{fmt.Errorf("%s has no cache stage to warm (add e.g. \"cache dir=.pipe-cache epochs=10\" after the random stages)", args[0])}
			}
			if !info.Enabled {
				// A run would go on without the cache, computing live;
				// a warm has nothing to do without it.
				return fmt.Errorf("cannot warm %s: %s", info.Dir, info.Disabled)
			}
			if workers > 0 {
				p.SetWorkers(workers)
			}
			setProcs(p)
			distinct := info.Epochs
			if epochs > distinct {
				fmt.Fprintf(c.ErrOrStderr(), "pipe: the cache keeps %d distinct epochs (epoch e ≥ %d reuses e mod %d); warming those\n", distinct, distinct, distinct)
			}
			if epochs == 0 || epochs > distinct {
				epochs = distinct
			}
			out := c.OutOrStdout()
			if !asJSON {
				fmt.Fprintf(out, "cache    %s, fingerprint %s\nwarming  %d epoch(s) × %d shards of %d samples, %s\n",
					info.Dir, info.Fingerprint, epochs, info.Shards, info.ShardSize, warmWorkers(p))
			}
			var bar *progressbar.ProgressBar
			// Without a terminal (a log, a pipe) a line each tenth of
			// the shards, the first as soon as one is done.
			tenths := -1
			if !quiet && isTerminal(c.ErrOrStderr()) {
				bar = progressbar.NewOptions(epochs*info.Shards,
					progressbar.OptionSetWriter(c.ErrOrStderr()),
					progressbar.OptionSetDescription("shards"),
					progressbar.OptionShowCount(),
					progressbar.OptionShowIts(),
					progressbar.OptionSetItsString("shards"),
					progressbar.OptionSetPredictTime(true),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish())
			}
			st, err := p.Warm(c.Context(), epochs, func(w pipe.WarmProgress) {
				switch {
				case bar != nil:
					bar.Describe(fmt.Sprintf("shards (%.0f MB/s)", float64(w.RawBytes)/1e6/max(w.Elapsed.Seconds(), 1e-9)))
					bar.Set(w.Shards)
				case !quiet && 10*w.Shards/w.Total > tenths:
					tenths = 10 * w.Shards / w.Total
					fmt.Fprintf(c.ErrOrStderr(), "progress %d of %d shards, %d written, %.1f s\n", w.Shards, w.Total, w.Written, w.Elapsed.Seconds())
				}
			})
			if bar != nil {
				bar.Finish()
			}
			// What the warm met and repaired (a damaged store rebuilt).
			for _, w := range p.CacheInfo().Warnings {
				fmt.Fprintf(c.ErrOrStderr(), "warning  %s\n", w)
			}
			if err != nil {
				return err
			}
			mbps := float64(st.RawBytes) / 1e6 / max(st.Elapsed.Seconds(), 1e-9)
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{
					"shards": st.Shards, "written": st.Written, "raw_bytes": st.RawBytes,
					"seconds": st.Elapsed.Seconds(), "raw_mb_per_sec": mbps,
				})
			}
			fmt.Fprintf(out, "done     %d shards present, %d written: %.1f MB of images in %.2f s = %.0f MB/s\n",
				st.Shards, st.Written, float64(st.RawBytes)/1e6, st.Elapsed.Seconds(), mbps)
			return nil
		},
	}
	c.Flags().IntVar(&epochs, "epochs", 0, "distinct epochs to warm (0: all the cache keeps)")
	c.Flags().IntVar(&workers, "workers", 0, "goroutines computing entries (0: as the file says, else one per core)")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return c
}

// warmWorkers says how many goroutines a warm of p runs, and under
// workers=auto why: every core the memory budget allows.
func warmWorkers(p *pipe.Pipeline) string {
	n := p.WarmWorkers()
	s := fmt.Sprintf("%d workers", n)
	if n == 1 {
		s = "1 worker"
	}
	if p.Summary().WorkersAuto {
		s += " (workers=auto: the most the cores and memory= allow, as a warm has no consumer to wait for)"
	}
	return s
}

func newCache() *cobra.Command {
	c := &cobra.Command{
		Use:   "cache",
		Short: "inspect and maintain cache directories: ls, verify, gc",
		Args:  cobra.ArbitraryArgs,
		// 1, not cobra's 2: two of the names have two letters, and at 2
		// any two letters would suggest them ("cp": did you mean "gc"?).
		SuggestionsMinimumDistance: 1,
		// Without arguments, the help; with a word that is no subcommand,
		// a wrong command line (cobra itself would print the help and
		// exit 0).
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", s[0])
			}
			return usageError{fmt.Errorf("%s; its commands are ls, verify and gc", msg)}
		},
	}
	c.AddCommand(&cobra.Command{
		Use:        "ls DIR",
		Short:      "list the fingerprints in a cache with their epochs, entries, bytes on disk and compression ratio",
		SuggestFor: []string{"list"},
		Args:       exactArgs(1),
		RunE: withCacheDir(func(c *cobra.Command, dir string, cache *pcache.Dir) error {
			us, err := cache.Usages()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "FINGERPRINT\tEPOCHS\tENTRIES\tDISK MB\tRAW MB\tRATIO\tSTAGES")
			for _, u := range us {
				stages := strings.ReplaceAll(u.Meta.Stages, "\n", " | ")
				if len(stages) > 60 {
					stages = stages[:57] + "..."
				}
				epochs := epochList(u.Epochs)
				if u.Meta.EveryEpoch {
					epochs = "all (one copy)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d/%d\t%.1f\t%.1f\t%.2f\t%s\n", u.Fingerprint, epochs,
					u.Entries, len(u.Epochs)*u.Meta.Shards(), float64(u.DiskBytes)/1e6, float64(u.RawBytes)/1e6, u.Ratio(), stages)
			}
			w.Flush()
			fmt.Fprintf(c.OutOrStdout(), "%d fingerprint(s), %.1f MB on disk in %s\n", len(us), float64(cache.DiskBytes())/1e6, dir)
			return nil
		}),
	})
	c.AddCommand(&cobra.Command{
		Use:        "verify DIR",
		Short:      "read every entry and check its checksum; exits 1 if any is damaged",
		SuggestFor: []string{"check"},
		Args:       exactArgs(1),
		RunE: withCacheDir(func(c *cobra.Command, dir string, cache *pcache.Dir) error {
			bad, n, err := cache.Verify()
			if err != nil {
				return err
			}
			for _, b := range bad {
				fmt.Fprintf(c.OutOrStdout(), "damaged: %s epoch %d shard %d: %v\n", b.Fingerprint, b.Epoch, b.Shard, b.Err)
			}
			if len(bad) > 0 {
				return fmt.Errorf("%d of %d entries damaged in %s (a run recomputes and rewrites them)", len(bad), n, dir)
			}
			fmt.Fprintf(c.OutOrStdout(), "%d entries verified in %s: ok\n", n, dir)
			return nil
		}),
	})
	var keep []string
	gc := &cobra.Command{
		Use:   "gc DIR --keep FILE...",
		Short: "delete every fingerprint that none of the given pipelines uses, then reclaim disk space",
		Long: `gc keeps the entries of the caches of the .pipe files given with --keep and
deletes every other fingerprint in DIR. Each file must have a cache stage
whose dir= is DIR: any other would keep nothing, and is refused (exit 2).
--keep /dev/null keeps nothing.`,
		SuggestFor: []string{"clean", "prune"},
		Args:       exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(keep) == 0 {
				return usageError{fmt.Errorf("gc needs --keep FILE for each pipeline whose cache to keep (with none it would delete everything; pass --keep /dev/null to mean that)")}
			}
			dir, err := os.Stat(args[0])
			if err != nil {
				return usageError{fmt.Errorf("cache directory %s: %w", args[0], err)}
			}
			var fps []string
			for _, f := range keep {
				if f == os.DevNull {
					continue
				}
				fp, err := keptFingerprint(c, f, args[0], dir)
				if err != nil {
					return err
				}
				fps = append(fps, fp)
			}
			cache, err := openCacheDir(args[0])
			if err != nil {
				return err
			}
			dropped, before, after, err := cache.GC(fps)
			if cerr := cache.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			sort.Strings(dropped)
			for _, fp := range dropped {
				fmt.Fprintf(c.OutOrStdout(), "dropped %s\n", fp)
			}
			fmt.Fprintf(c.OutOrStdout(), "kept %d fingerprint(s), dropped %d; disk %.1f MB -> %.1f MB\n", len(fps), len(dropped), float64(before)/1e6, float64(after)/1e6)
			return nil
		},
	}
	gc.Flags().StringArrayVar(&keep, "keep", nil, "a .pipe file whose cache to keep (repeatable)")
	c.AddCommand(gc)
	return c
}

// keptFingerprint is the fingerprint of the cache of the .pipe file name,
// kept by pipe cache gc of dir (whose FileInfo is info). A file without a
// cache stage, or whose cache is another directory, is a wrong command line:
// it would keep nothing, and gc would delete what the user meant to keep.
func keptFingerprint(c *cobra.Command, name, dir string, info os.FileInfo) (string, error) {
	p, err := pipe.Load(c.Context(), name, pipe.WithCacheClosed())
	if err != nil {
		return "", usageError{err}
	}
	defer p.Close()
	ci := p.CacheInfo()
	if ci == nil {
		return "", usageError{fmt.Errorf("--keep %s: %s has no cache stage, so it would keep nothing (name the .pipe files whose caches are in %s; --keep %s keeps none)", name, name, dir, os.DevNull)}
	}
	if own, err := os.Stat(ci.Dir); err != nil || !os.SameFile(own, info) {
		return "", usageError{fmt.Errorf("--keep %s: %s caches in %s, not in %s, so it would keep nothing there (name the .pipe files whose caches are in %s)", name, name, ci.Dir, dir, dir)}
	}
	return ci.Fingerprint, nil
}

// withCacheDir runs f on the existing cache directory named by the
// command's argument, closing it afterwards.
func withCacheDir(f func(c *cobra.Command, dir string, cache *pcache.Dir) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		cache, err := openCacheDir(args[0])
		if err != nil {
			return err
		}
		err = f(c, args[0], cache)
		if cerr := cache.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

// openCacheDir opens an existing cache directory (never creating one).
func openCacheDir(dir string) (*pcache.Dir, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, usageError{fmt.Errorf("cache directory %s: %w", dir, err)}
	}
	return pcache.OpenDir(dir)
}

func epochList(es []int) string {
	if len(es) == 0 {
		return "-"
	}
	contiguous := es[len(es)-1]-es[0] == len(es)-1
	if contiguous && len(es) > 2 {
		return fmt.Sprintf("%d-%d", es[0], es[len(es)-1])
	}
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = fmt.Sprint(e)
	}
	return strings.Join(s, ",")
}
