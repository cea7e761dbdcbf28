// Command pipe runs, benchmarks, checks and previews .pipe pipelines.
//
// Exit status: 0 on success, 1 when the run fails, 2 when the command line or
// the .pipe file is wrong, 130 when interrupted.
//
// Started by an MPI launcher (mpirun -np N, srun) as one of several ranks,
// pipe run and pipe bench start MPI (in the build with -tags mpi) and take
// their rank and world size from it; rank 0 alone prints, and an error on
// any rank is reported with its rank and aborts the whole job.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/feed"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/source"
)

// usageError marks errors in how pipe was called or in the .pipe file.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C cancels the command's context, which stops every
	// goroutine, download and index build; once it has, the signals get
	// their default action back, so a second Ctrl-C exits at once.
	context.AfterFunc(ctx, stop)
	stopWaits := sayWaits(ctx, os.Stderr, isTerminal(os.Stderr))
	err := execute(ctx, newRoot())
	stopWaits()
	if job != nil {
		code := 0
		if err != nil {
			code = exitCode(ctx, err)
		}
		endJob(err, code)
	}
	if err == nil {
		return
	}
	// An error pipe feed sent its loader is raised there, in pipe's words,
	// and pipe's stderr is the loader's: said here too, it is said twice.
	if !errors.As(err, new(feed.ToldError)) {
		fmt.Fprintln(os.Stderr, errorLine(err))
	}
	os.Exit(exitCode(ctx, err))
}

// execute runs the command line root was given, marking as a usage error
// a command line that names no command pipe has.
func execute(ctx context.Context, root *cobra.Command) error {
	c, err := root.ExecuteContextC(ctx)
	if err != nil && !c.Runnable() {
		// Cobra suggests a near name; else say where the list is.
		if !strings.Contains(err.Error(), "Did you mean") {
			err = fmt.Errorf("%w (%s --help lists the commands)", err, c.CommandPath())
		}
		err = usageError{err}
	}
	return err
}

// errorLine is how the command reports err: "pipe: " and the message, whose
// own "pipe: " (the library's package prefix) is not said twice.
func errorLine(err error) string {
	return "pipe: " + strings.TrimSpace(strings.TrimPrefix(source.RedactURLs(err.Error()), "pipe: "))
}

func exitCode(ctx context.Context, err error) int {
	var se *pipe.SyntaxError
	var ue usageError
	switch {
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return 130
	case errors.As(err, &se), errors.As(err, &ue), errors.Is(err, pipe.ErrConfig):
		return 2
	case errors.Is(err, prefetch.ErrNoCUDA):
		return 2 // the file asks for GPUs of a build without them
	case errors.Is(err, source.ErrOrder):
		return 2 // the file's shuffle does not stream through its cache_size
	}
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "pipe",
		Short:         "pipe streams deterministic, augmented batches fast enough to keep GPUs busy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.Version = pipe.BuildInfo().Version
	root.SetVersionTemplate(versionText(pipe.BuildInfo()))
	root.AddCommand(newRun(), newBench(), newCheck(), newStages(), newPreview(), newWarm(), newCache(), newVersion(), newFeed(), newLs())
	return root
}

// load parses and builds a .pipe file under the command's context, with
// opts, marking its errors as usage errors. Downloads show a progress bar
// on stderr when it is a terminal.
func load(c *cobra.Command, name string, opts ...pipe.LoadOption) (*pipe.Pipeline, error) {
	if isTerminal(os.Stderr) {
		var bar *progressbar.ProgressBar
		opts = append(opts, pipe.WithDownloadProgress(func(done, total int64) {
			if bar == nil {
				bar = progressbar.DefaultBytes(total, "downloading")
			}
			bar.Set64(done)
		}))
	}
	p, err := pipe.Load(c.Context(), name, opts...)
	if err != nil {
		if c.Context().Err() != nil {
			return nil, err
		}
		var se *pipe.SyntaxError
		if errors.As(err, &se) || errors.Is(err, pipe.ErrConfig) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EISDIR) {
			return nil, usageError{err}
		}
		return nil, err
	}
	return p, nil
}

// setProcs applies the GOMAXPROCS the pipeline's epochs should run under
// (Summary.Procs: a spare P beside workers that decode in C). A process-wide
// setting is the command's to make, not the library's.
func setProcs(p *pipe.Pipeline) {
	if n := p.Summary().Procs; n > runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s needs %d argument(s), got %d (usage: %s)", cmd.Name(), n, len(args), cmd.UseLine())}
		}
		return nil
	}
}
