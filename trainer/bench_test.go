package trainer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pipefeed/pipe/trainer/nn"
)

// BenchmarkTrainStep measures training throughput (images/s) of the
// built-in models on CIFAR-shaped data, batch 128, one replica on 2 threads:
// the figure to compare with bench/torch/keras_cnn.py --threads 2.
func BenchmarkTrainStep(b *testing.B) {
	for _, spec := range []nn.ModelSpec{{Name: "keras_cnn"}, {Name: "resnet", Depth: 8}, {Name: "resnet", Depth: 20}} {
		b.Run(fmt.Sprintf("%s%d", spec.Name, spec.Depth), func(b *testing.B) {
			feed := &fakeFeed{shape: []int{3, 32, 32}, global: 128, replicas: 1, batches: 1 << 30, classes: 10}
			tr, err := New(Config{Model: spec, Input: feed.shape, Classes: 10, GlobalBatch: 128, BatchesPerEpoch: feed.batches,
				Optim: nn.OptimConfig{Momentum: 0.9}, LR: 0.01, Threads: 2})
			if err != nil {
				b.Fatal(err)
			}
			ef, _ := feed.Epoch(context.Background(), 0)
			// The data is made before the timer: only training is measured.
			batch, _ := ef.Next(0)
			one := &constFeed{b: batch}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := tr.step(context.Background(), one); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// constFeed serves the same batch forever.
type constFeed struct{ b Batch }

func (c *constFeed) Next(int) (Batch, error) { return c.b, nil }
func (c *constFeed) Stall(int) time.Duration { return 0 }
func (c *constFeed) Close() error            { return nil }
