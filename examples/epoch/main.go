// Command epoch streams one epoch of a CIFAR-shaped recipe through the Go
// API and prints each batch: the loop a training step would sit in.
//
//	go run ./examples/epoch
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
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	src, err := source.NewSynthetic(2000, source.Train, 0) // or source.OpenCIFAR10(ctx, path, source.Train)
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
	norm, err := transform.Normalize([]float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616})
	if err != nil {
		return err
	}
	p, err := pipe.New(
		pipe.Source(src), pipe.Shuffle(42),
		pipe.Map(crop), pipe.Map(flip), pipe.Normalize(norm),
		pipe.Batching(256, false), pipe.ToTensor(transform.NCHW, transform.Float32),
	)
	if err != nil {
		return err
	}
	defer p.Close()
	epoch, err := p.Epoch(ctx, 0)
	if err != nil {
		return err
	}
	defer epoch.Close()
	for b, err := range epoch.All() { // each batch released when the body returns
		if err != nil {
			return err
		}
		x, err := b.Float32() // [b.N, 3, 32, 32]
		if err != nil {
			return err
		}
		fmt.Printf("batch %d: %d images, %d floats, first labels %v\n", b.Index, b.N, len(x), b.Labels[:4])
	}
	if err := epoch.Close(); err != nil {
		return err
	}
	s := epoch.Stats()
	fmt.Printf("%d images in %.3f s, consumer stalled %.3f s\n", s.Images, s.Seconds, s.StallSeconds)
	return nil
}
