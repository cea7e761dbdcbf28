package pipe_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// The Go API has the same stages as a .pipe file: random_crop size=32 pad=4
// is transform.RandomCrop(32, 4, ...), wrapped by pipe.Map.
func Example() {
	src, err := source.NewSynthetic(1000, source.Train, 0) // or source.OpenCIFAR10(ctx, path, source.Train)
	if err != nil {
		log.Fatal(err)
	}
	crop, err := transform.RandomCrop(32, 4, transform.FillReflect)
	if err != nil {
		log.Fatal(err)
	}
	flip, err := transform.Flip(transform.Horizontal, 0.5)
	if err != nil {
		log.Fatal(err)
	}
	norm, err := transform.Normalize([]float64{0.5, 0.5, 0.5}, []float64{0.25, 0.25, 0.25})
	if err != nil {
		log.Fatal(err)
	}
	p, err := pipe.New(
		pipe.Source(src),
		pipe.Shuffle(42),
		pipe.Map(crop),
		pipe.Map(flip),
		pipe.Normalize(norm),
		pipe.Batching(256, false),
		pipe.ToTensor(transform.NCHW, transform.Float32),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	epoch, err := p.Epoch(context.Background(), 0)
	if err != nil {
		log.Fatal(err)
	}
	defer epoch.Close() // stops the workers if the loop ends early
	for b, err := range epoch.All() {
		if err != nil {
			log.Fatal(err)
		}
		x, err := b.Float32() // [b.N, 3, 32, 32], valid until the body returns
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(b.Index, b.N, len(x), b.Labels[:3])
	}
	if err := epoch.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0 256 786432 [3 0 3]
	// 1 256 786432 [8 0 2]
	// 2 256 786432 [8 4 9]
	// 3 232 712704 [1 3 7]
}
