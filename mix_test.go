package pipe

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestMixTrains: a .pipe recipe with mixup and cutmix (as pipe run loads
// it) trains the CPU trainer on the soft targets, on the host batches and
// on two simulated devices' slices alike (the same losses, to float
// tolerance): the training loss falls and the held-out accuracy is well
// above chance.
func TestMixTrains(t *testing.T) {
	var losses [][]float64
	for _, prefetch := range []string{"", "prefetch devices=cpu:2 depth=2"} {
		dir := t.TempDir()
		recipe := `source synthetic n=2000
shuffle 3
flip horizontal
normalize mean=0.5 std=0.25
batch 100
to_tensor
mixup alpha=0.2
cutmix
` + prefetch + `
train mlp width=64 epochs=4 lr=0.01 base_batch=100 momentum=0.9 schedule=cosine out=` + filepath.Join(dir, "run") + `
eval split=test batch=250
`
		name := filepath.Join(dir, "mix.pipe")
		if err := os.WriteFile(name, []byte(recipe), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Load(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		res := mustFit(t, p, TrainOptions{})
		p.Close()
		first, last := res.History[0], res.History[len(res.History)-1]
		// Chance is 0.1.
		var l []float64
		for _, h := range res.History {
			l = append(l, h.TrainLoss)
		}
		losses = append(losses, l)
		if last.TrainLoss >= first.TrainLoss || *last.TestAccuracy < 0.4 {
			t.Errorf("%q: training loss %.3f then %.3f, test accuracy %.3f after %d epochs",
				prefetch, first.TrainLoss, last.TrainLoss, *last.TestAccuracy, len(res.History))
		}
	}
	for i, l := range losses[0] {
		if math.Abs(l-losses[1][i]) > 1e-4*l {
			t.Errorf("epoch %d: training loss %g on the host, %g on two devices", i, l, losses[1][i])
		}
	}
}
