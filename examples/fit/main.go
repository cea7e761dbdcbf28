// Command fit trains a small MLP on the synthetic source with the built-in
// trainer and evaluates it on the held-out split after every epoch.
//
//	go run ./examples/fit
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
	train, err := source.NewSynthetic(4000, source.Train, 0)
	if err != nil {
		return err
	}
	test, err := source.NewSynthetic(1000, source.Test, 0)
	if err != nil {
		return err
	}
	norm, err := transform.Normalize([]float64{0.5}, []float64{0.25})
	if err != nil {
		return err
	}
	model := pipe.DefaultTrain("mlp") // the .pipe line "train mlp", as a value
	model.Epochs, model.LR, model.BaseBatch, model.Out = 3, 0.05, 100, ""
	p, err := pipe.New(
		pipe.Source(train), pipe.Shuffle(3), pipe.Normalize(norm),
		pipe.Batching(100, false), pipe.ToTensor(transform.NCHW, transform.Float32),
		pipe.Train(model), pipe.Eval(pipe.EvalConfig{Source: test}),
	)
	if err != nil {
		return err
	}
	defer p.Close()
	res, err := p.Fit(ctx, pipe.TrainOptions{OnEpoch: func(e pipe.TrainEpoch) {
		fmt.Printf("epoch %d: train loss %.3f, test accuracy %.1f%%\n", e.Epoch, e.TrainLoss, 100**e.TestAccuracy)
	}})
	if err != nil {
		return err
	}
	fmt.Printf("%d parameters trained\n", res.Trainer.Model().Size())
	return nil
}
