package source

import (
	"math"
	"testing"
)

// features pools a 3×32×32 image to 3×8×8 means scaled to [0, 1].
func features(pix []byte) []float64 {
	f := make([]float64, 3*8*8)
	for c := range 3 {
		for y := range 32 {
			for x := range 32 {
				f[(c*8+y/4)*8+x/4] += float64(pix[(c*32+y)*32+x]) / (255 * 16)
			}
		}
	}
	return f
}

// accuracy trains a softmax regression on train and returns its test accuracy.
func accuracy(t *testing.T, train, test *Synthetic) float64 {
	t.Helper()
	load := func(s *Synthetic) ([][]float64, []int) {
		var xs [][]float64
		var ys []int
		var r Record
		for i := range s.Len() {
			if err := s.Read(i, &r); err != nil {
				t.Fatal(err)
			}
			xs = append(xs, features(r.Pix))
			ys = append(ys, r.Label)
		}
		return xs, ys
	}
	xs, ys := load(train)
	const k, d = 10, 192
	w := make([]float64, k*(d+1))
	p := make([]float64, k)
	for epoch := range 30 {
		lr := 0.5 / (1 + 0.1*float64(epoch))
		for i, x := range xs {
			maxz := math.Inf(-1)
			for c := range k {
				z := w[c*(d+1)+d]
				for j, v := range x {
					z += w[c*(d+1)+j] * v
				}
				p[c] = z
				maxz = math.Max(maxz, z)
			}
			sum := 0.0
			for c := range k {
				p[c] = math.Exp(p[c] - maxz)
				sum += p[c]
			}
			for c := range k {
				g := p[c] / sum
				if c == ys[i] {
					g--
				}
				for j, v := range x {
					w[c*(d+1)+j] -= lr * g * v
				}
				w[c*(d+1)+d] -= lr * g
			}
		}
	}
	txs, tys := load(test)
	right := 0
	for i, x := range txs {
		best, bestZ := 0, math.Inf(-1)
		for c := range k {
			z := w[c*(d+1)+d]
			for j, v := range x {
				z += w[c*(d+1)+j] * v
			}
			if z > bestZ {
				best, bestZ = c, z
			}
		}
		if best == tys[i] {
			right++
		}
	}
	return float64(right) / float64(len(txs))
}

// TestSyntheticIsLearnable: even a linear model on pooled pixels learns the
// synthetic classes well from the train split and generalises to the test
// split; with shuffled labels it stays at chance.
func TestSyntheticIsLearnable(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	train, _ := NewSynthetic(3000, Train, 1)
	test, _ := NewSynthetic(1000, Test, 1)
	acc := accuracy(t, train, test)
	shuffledTrain, _ := NewSynthetic(3000, Train, 1, WithShuffledLabels())
	chance := accuracy(t, shuffledTrain, test)
	t.Logf("test accuracy: %.1f%% with true labels, %.1f%% trained on shuffled labels", 100*acc, 100*chance)
	if acc < 0.7 {
		t.Errorf("a linear model reaches only %.1f%%: the classes are not learnable enough", 100*acc)
	}
	if chance > 0.16 {
		t.Errorf("trained on shuffled labels it reaches %.1f%%, want chance (10%%)", 100*chance)
	}
}
