package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/feed"
	"github.com/pipefeed/pipe/pipefile"
)

func newFeed() *cobra.Command {
	var fd, protocol, rank, world, workers int
	c := &cobra.Command{
		Use:   "feed FILE --fd N --protocol V",
		Short: "serve a pipeline's batches to a loader in another process over shared memory (the Python package pipefeed starts it)",
		Long: `feed is the other end of pipefeed.Loader: it reads the loader's requests on
file descriptor --fd (a Unix SOCK_SEQPACKET socket the loader made), and
writes each batch into a ring of slabs in shared memory the loader maps,
without copying. It exits when the loader goes away. A train stage in the
file is left out; a prefetch stage is refused (the loader copies to its
device). The protocol is described in docs/python.md and in package feed.
It needs Linux (memfd_create and SOCK_SEQPACKET sockets); elsewhere it
says so and exits 1.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := feed.Supported(); err != nil {
				return err
			}
			if fd < 3 {
				return usageError{fmt.Errorf("--fd=%d: the loader's socket is a descriptor from 3 on", fd)}
			}
			if (rank >= 0) != (world > 0) || workers < 0 {
				return usageError{errors.New("--rank and --world go together (0 ≤ rank < world), and --workers must be 0 or more")}
			}
			f := os.NewFile(uintptr(fd), "loader")
			if f == nil {
				return usageError{fmt.Errorf("--fd=%d is not open", fd)}
			}
			fc, err := net.FileConn(f)
			f.Close()
			if err != nil {
				return usageError{fmt.Errorf("--fd=%d: not the loader's socket: %w", fd, err)}
			}
			conn, ok := fc.(*net.UnixConn)
			if !ok {
				fc.Close()
				return usageError{fmt.Errorf("--fd=%d: not a Unix socket", fd)}
			}
			err = serveLoader(c, conn, args[0], protocol, rank, world, workers)
			conn.Close()
			return err
		},
	}
	c.Flags().IntVar(&fd, "fd", 3, "the descriptor of the loader's socket")
	c.Flags().IntVar(&protocol, "protocol", 0, "the loader's feed protocol version (refused unless it is this pipe's)")
	c.Flags().IntVar(&rank, "rank", -1, "serve rank's share of --world ranks, whatever the file says")
	c.Flags().IntVar(&world, "world", 0, "the number of ranks")
	c.Flags().IntVar(&workers, "workers", 0, "transform workers (0: as the file says, else one per core)")
	return c
}

// serveLoader serves file's batches to the loader at the other end of conn:
// the pipe feed command once the socket is known. An error it has sent the
// loader comes back as a feed.ToldError.
func serveLoader(c *cobra.Command, conn *net.UnixConn, file string, protocol, rank, world, workers int) error {
	if protocol != feed.Version {
		return feed.Refuse(conn, usageError{fmt.Errorf("the loader speaks feed protocol %d and this pipe speaks %d: install the pipefeed and pipe of one release", protocol, feed.Version)})
	}
	if err := noPrefetch(c.Context(), file); err != nil {
		return feed.Refuse(conn, usageError{err})
	}
	var opts []pipe.LoadOption
	if world > 0 {
		opts = append(opts, pipe.WithRank(rank, world))
	}
	ctx, cancel := context.WithCancelCause(c.Context())
	defer cancel(nil)
	c.SetContext(ctx)
	defer watchParent(cancel)()
	stop := feed.Watch(conn, cancel)
	p, err := load(c, file, opts...)
	werr := stop()
	if werr == nil && errors.Is(context.Cause(ctx), errParentGone) {
		werr = errParentGone
	}
	if werr != nil {
		if p != nil {
			p.Close()
		}
		if errors.Is(werr, feed.ErrGone) || errors.Is(werr, errParentGone) {
			return nil // nobody to serve, nobody to tell
		}
		return feed.Refuse(conn, werr)
	}
	if err != nil {
		return feed.Refuse(conn, err)
	}
	defer p.Close()
	if workers > 0 {
		p.SetWorkers(workers)
	}
	setProcs(p)
	if err := feed.Serve(ctx, p, conn, file); err != nil {
		if errors.Is(context.Cause(ctx), errParentGone) {
			return nil // nobody to tell
		}
		if errors.Is(err, pipe.ErrConfig) {
			return usageError{err}
		}
		return err
	}
	return nil
}

// noPrefetch refuses, by its line, a file with a prefetch stage, before
// anything is loaded: pipe feed serves host batches, and the loader copies
// them to its device. A file that does not parse is load's to report.
func noPrefetch(ctx context.Context, file string) error {
	f, err := pipefile.ParseFile(ctx, file)
	if err != nil {
		return nil
	}
	for i, l := range f.Lines {
		if l.Spec.Name == "prefetch" {
			return fmt.Errorf("%s: prefetch: %w: pipe feed serves host batches: remove the prefetch stage (the loader copies each batch to a GPU itself: Loader(device=...))", f.Pos(i), pipe.ErrConfig)
		}
	}
	return nil
}

var errParentGone = errors.New("the process that started pipe feed is gone")

// parentPoll is how often watchParent looks, and parentGrace how long pipe
// feed has to end by itself once it has seen the parent go.
const (
	parentPoll  = 200 * time.Millisecond
	parentGrace = 5 * time.Second
)

// watchParent ends pipe feed when the process that started it, the
// loader's, is gone, even where the loader's socket stays open (a process
// the loader started inherited it) or pipe does not get to read it: it
// cancels with errParentGone, and exits the process if the command has not
// ended parentGrace later. It looks at the parent's pid, which changes
// when the parent dies and pipe is handed to init or a subreaper, rather
// than set PR_SET_PDEATHSIG, which fires when the thread that started pipe
// ends: a loader made in a thread that then ends would kill it. The
// returned stop ends the watch.
func watchParent(cancel context.CancelCauseFunc) (stop func()) {
	ppid := os.Getppid()
	done := make(chan struct{})
	pool := pond.NewPool(1)
	pool.Submit(func() {
		tick := time.NewTicker(parentPoll)
		defer tick.Stop()
		for os.Getppid() == ppid {
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
		cancel(errParentGone)
		select {
		case <-done:
		case <-time.After(parentGrace):
			fmt.Fprintf(os.Stderr, "pipe: feed: the loader's process (pid %d) is gone, and pipe did not end within %v of it\n", ppid, parentGrace)
			os.Exit(1)
		}
	})
	return func() {
		close(done)
		pool.StopAndWait()
	}
}
