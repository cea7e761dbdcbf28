// Command warm fills an augmentation cache ahead of training (3 distinct
// pre-augmented epochs), then reads an epoch back from it: the second pass
// computes nothing.
//
//	go run ./examples/warm [DIR]
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir := ""
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := run(ctx, dir); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "pipe-warm-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	src, err := source.NewSynthetic(5000, source.Train, 0)
	if err != nil {
		return err
	}
	crop, err := transform.RandomCrop(32, 4, transform.FillReflect)
	if err != nil {
		return err
	}
	flip, err := transform.Flip(transform.Horizontal, 0.5)
	if err != nil {
		return err
	}
	p, err := pipe.New(
		pipe.Source(src), pipe.Shuffle(42), pipe.Map(crop),
		pipe.Cache(pipe.CacheConfig{Dir: dir, Epochs: 3}), // everything above is cached
		pipe.Map(flip), pipe.Batching(128, false), pipe.ToTensor(transform.NCHW, transform.Uint8),
	)
	if err != nil {
		return err
	}
	defer p.Close()
	st, err := p.Warm(ctx, 0, nil)
	if err != nil {
		return err
	}
	fmt.Printf("warmed %d shards (%d written, %.1f MB) in %v\n", st.Shards, st.Written, float64(st.RawBytes)/1e6, st.Elapsed)
	stats, err := p.Run(ctx, pipe.RunOptions{Epochs: 1, FirstEpoch: 1})
	if err != nil {
		return err
	}
	s := stats[0]
	fmt.Printf("epoch %d: %d images, cache %d read, %d computed\n", s.Epoch, s.Images, s.CacheHits, s.CacheMisses)
	return nil
}
