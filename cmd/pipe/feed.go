package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

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
device). The protocol is described in the README and in package feed.
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
			ctx := c.Context()
			err = serveLoader(c, conn, args[0], protocol, rank, world, workers)
			conn.Close()
			if errors.As(err, new(feed.ToldError)) {
				// The loader raises the error it was sent, in pipe's
				// words, and pipe's stderr is the loader's: printed here
				// too, it would be said twice.
				os.Exit(exitCode(ctx, err))
			}
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

// serveLoader serves file's batches to the loader at the other end of conn,
// the pipe feed command once the socket is known. Every error it returns
// from then on has been sent to the loader where it could be (a
// feed.ToldError).
func serveLoader(c *cobra.Command, conn *net.UnixConn, file string, protocol, rank, world, workers int) error {
	if protocol != feed.Version {
		return feed.Refuse(conn, usageError{fmt.Errorf("the loader speaks feed protocol %d and this pipe speaks %d: install the pipefeed and pipe of one release", protocol, feed.Version)})
	}
	if err := noPrefetch(file); err != nil {
		return feed.Refuse(conn, usageError{err})
	}
	var opts []pipe.LoadOption
	if world > 0 {
		opts = append(opts, pipe.WithRank(rank, world))
	}
	ctx, cancel := context.WithCancelCause(c.Context())
	defer cancel(nil)
	c.SetContext(ctx)
	stop := feed.Watch(conn, cancel)
	p, err := load(c, file, opts...)
	if werr := stop(); werr != nil {
		if p != nil {
			p.Close()
		}
		if errors.Is(werr, feed.ErrGone) {
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
	if err := feed.Serve(c.Context(), p, conn, file); err != nil {
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
func noPrefetch(file string) error {
	f, err := pipefile.ParseFile(file)
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
