// Command device streams an epoch to two simulated devices, one consumer
// goroutine per device as data-parallel replicas would run, and prints
// each device's stall: the "is the GPU starved" figure. With the cuda
// build, devices=all puts the same slices into GPU memory.
//
//	go run ./examples/device
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"sync"
	"time"

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
	src, err := source.NewSynthetic(4096, source.Train, 0)
	if err != nil {
		return err
	}
	crop, err := transform.RandomCrop(32, 4, transform.FillReflect)
	if err != nil {
		return err
	}
	norm, err := transform.Normalize([]float64{0.5}, []float64{0.25})
	if err != nil {
		return err
	}
	p, err := pipe.New(
		pipe.Source(src), pipe.Shuffle(7), pipe.Map(crop),
		pipe.DeviceNormalize(norm), // uint8 crosses, each device normalises its slice
		pipe.Batching(256, false), pipe.ToTensor(transform.NCHW, transform.Float32),
		pipe.Prefetch(pipe.PrefetchConfig{Depth: 3, Devices: "cpu:2"}),
	)
	if err != nil {
		return err
	}
	defer p.Close()
	x, err := p.DeviceEpoch(ctx, 0)
	if err != nil {
		return err
	}
	defer x.Close()
	var wg sync.WaitGroup
	errs := make([]error, p.Devices())
	for d := range p.Devices() {
		wg.Go(func() {
			for {
				db, err := x.Next(d)
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					errs[d] = err
					return
				}
				time.Sleep(2 * time.Millisecond) // a training step on db.Buffer
				db.Release()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := x.Close(); err != nil {
		return err
	}
	s, devs := x.Stats()
	fmt.Printf("%d images in %.3f s\n", s.Images, s.Seconds)
	for _, d := range devs {
		fmt.Printf("%s: %d slices, stalled %.1f%%, copied %.1f MB\n", d.Device, d.Batches, d.StallPct, float64(d.Bytes)/1e6)
	}
	return nil
}
