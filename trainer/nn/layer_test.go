package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randTensor(r *rand.Rand, shape ...int) *Tensor {
	t := NewTensor(shape...)
	for i := range t.Data {
		t.Data[i] = r.Float32()*2 - 1
	}
	return t
}

// objective is L = Σ y·R for fixed random R: dL/dy = R.
func objective(l Layer, ctx *Context, x *Tensor, r []float32) float64 {
	y := l.Forward(ctx, x)
	var s float64
	for i, v := range y.Data {
		s += float64(v) * float64(r[i])
	}
	return s
}

// gradCheck compares Backward's dL/dx and dL/dW with central finite
// differences of L = Σ y·R, in float64 sums over float32 values.
func gradCheck(t *testing.T, name string, l Layer, x *Tensor, train bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	pool := NewPool(2)
	samples := make([]int, x.N())
	for i := range samples {
		samples[i] = 100 + i
	}
	ctx := &Context{Train: train, Pool: pool, Seed: 3, Step: 5, Samples: samples}
	initLayer(l, 11, 1)
	for _, p := range l.Params() {
		if !p.Buffer {
			for i := range p.W {
				p.W[i] += float32(rng.Float64()*0.2 - 0.1)
			}
		}
	}
	y := l.Forward(ctx, x)
	r := make([]float32, len(y.Data))
	for i := range r {
		r[i] = rng.Float32()*2 - 1
	}
	for _, p := range l.Params() {
		clear(p.G64)
	}
	dy := &Tensor{Shape: append([]int(nil), y.Shape...), Data: append([]float32(nil), r...)}
	dx := l.Backward(ctx, dy)
	dxc := append([]float32(nil), dx.Data...)
	// Buffers (running statistics) move with every training forward: keep
	// them fixed while differencing.
	saved := map[*Param][]float32{}
	for _, p := range l.Params() {
		if p.Buffer {
			saved[p] = append([]float32(nil), p.W...)
		}
	}
	eval := func() float64 {
		v := objective(l, ctx, x, r)
		for p, w := range saved {
			copy(p.W, w)
		}
		return v
	}
	const h = 1e-2
	check := func(what string, v []float32, i int, analytic float32) {
		old := v[i]
		v[i] = old + h
		up := eval()
		v[i] = old - h
		down := eval()
		v[i] = old
		num := (up - down) / (2 * h)
		if d := math.Abs(num - float64(analytic)); d > 2e-2*max(1, math.Abs(num)) {
			t.Errorf("%s: d%s[%d]: analytic %g, numeric %g", name, what, i, analytic, num)
		}
	}
	for _, i := range indices(rng, len(x.Data), 40) {
		check("x", x.Data, i, dxc[i])
	}
	for _, p := range l.Params() {
		if p.Buffer {
			continue
		}
		g := make([]float32, len(p.G64))
		for j, v := range p.G64 {
			g[j] = float32(v)
		}
		for _, i := range indices(rng, len(p.W), 20) {
			check(p.Name, p.W, i, g[i])
		}
	}
}

func indices(r *rand.Rand, n, k int) []int {
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, k)
	for i := range out {
		out[i] = r.IntN(n)
	}
	return out
}

// TestGradients checks every layer's backward pass by finite differences.
func TestGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		l     Layer
		shape []int
		train bool
	}{
		{NewConv2D(3, 4, 3, 1, 1), []int{2, 3, 6, 6}, true},
		{NewConv2D(2, 3, 3, 2, 1), []int{3, 2, 7, 7}, true},
		{NewConv2D(3, 5, 3, 1, 0), []int{2, 3, 5, 6}, true},
		{NewConv2D(4, 3, 1, 1, 0), []int{2, 4, 3, 3}, true},
		{NewConv2D(4, 3, 1, 2, 0), []int{2, 4, 5, 5}, true},
		{NewDense(12, 5), []int{3, 12}, true},
		{&ReLU{}, []int{2, 3, 4, 4}, true},
		{NewMaxPool2D(2, 2), []int{2, 3, 6, 6}, true},
		{NewMaxPool2D(3, 2), []int{2, 2, 7, 7}, true},
		{&GlobalAvgPool{}, []int{2, 3, 4, 4}, true},
		{&Flatten{}, []int{2, 3, 2, 2}, true},
		{&Dropout{P: 0.3}, []int{4, 10}, true},
		{&Dropout{P: 0.3}, []int{4, 10}, false},
		{NewBatchNorm(3), []int{4, 3, 3, 3}, true},
		{NewBatchNorm(3), []int{4, 3, 3, 3}, false},
		{NewBatchNorm(6), []int{5, 6}, true},
		{&Residual{Body: []Layer{NewConv2D(2, 4, 3, 2, 1), NewBatchNorm(4), &ReLU{}, NewConv2D(4, 4, 3, 1, 1)},
			Shortcut: []Layer{NewConv2D(2, 4, 1, 2, 0), NewBatchNorm(4)}}, []int{3, 2, 6, 6}, true},
		{&Residual{Body: []Layer{NewConv2D(3, 3, 3, 1, 1)}}, []int{2, 3, 4, 4}, true},
	} {
		x := randTensor(r, c.shape...)
		if _, ok := c.l.(*ReLU); ok {
			// Keep values away from the kink, where differences are wrong.
			for i, v := range x.Data {
				if math.Abs(float64(v)) < 0.05 {
					x.Data[i] = 0.1
				}
			}
		}
		name := fmt.Sprintf("%s on %v (train %v)", c.l.Name(), c.shape, c.train)
		if _, err := c.l.OutShape(c.shape[1:]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gradCheck(t, name, c.l, x, c.train)
	}
}

// TestLossGradient checks softmax cross-entropy with label smoothing by
// finite differences, and its value against a hand computation.
func TestLossGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, eps := range []float64{0, 0.1} {
		l := &SoftmaxCrossEntropy{Smoothing: eps}
		z := randTensor(r, 4, 5)
		labels := []int32{0, 3, 4, 1}
		_, _, g := l.Loss(z, labels)
		grad := append([]float32(nil), g.Data...)
		for i := range z.Data {
			old := z.Data[i]
			z.Data[i] = old + 1e-2
			up, _, _ := l.Loss(z, labels)
			z.Data[i] = old - 1e-2
			down, _, _ := l.Loss(z, labels)
			z.Data[i] = old
			if num := (up - down) / 2e-2; math.Abs(num-float64(grad[i])) > 1e-3 {
				t.Errorf("smoothing %g: dz[%d]: analytic %g, numeric %g", eps, i, grad[i], num)
			}
		}
	}
	// Two classes, logits 0 and ln 3: p = (1/4, 3/4); label 1, no smoothing.
	loss, correct, _ := (&SoftmaxCrossEntropy{}).Loss(&Tensor{Shape: []int{1, 2}, Data: []float32{0, float32(math.Log(3))}}, []int32{1})
	if math.Abs(loss-math.Log(4.0/3)) > 1e-6 || correct != 1 {
		t.Errorf("loss %g (want %g), correct %d", loss, math.Log(4.0/3), correct)
	}
}

// TestSoftTargetLoss checks cross-entropy against soft targets by finite
// differences, with and without smoothing, and that with one-hot targets
// (MixUp's at λ = 1) its loss, gradient and accuracy are the int labels'
// bit for bit.
func TestSoftTargetLoss(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	targets := []float32{
		0.3, 0, 0, 0.7, 0,
		0, 1, 0, 0, 0,
		0.5, 0.5, 0, 0, 0,
		0, 0, 0.9, 0, 0.1,
	}
	for _, eps := range []float64{0, 0.1} {
		l := &SoftmaxCrossEntropy{Smoothing: eps}
		z := randTensor(r, 4, 5)
		loss := func() float64 {
			s, _, _ := l.SumTargets(z, targets)
			return s.Float() / 4
		}
		_, _, g := l.SumTargets(z, targets)
		grad := append([]float32(nil), g.Data...)
		for i := range z.Data {
			old := z.Data[i]
			z.Data[i] = old + 1e-2
			up := loss()
			z.Data[i] = old - 1e-2
			down := loss()
			z.Data[i] = old
			if num := (up - down) / 2e-2; math.Abs(num-float64(grad[i])) > 1e-3 {
				t.Errorf("smoothing %g: dz[%d]: analytic %g, numeric %g", eps, i, grad[i], num)
			}
		}
		labels := []int32{3, 1, 0, 2}
		onehot := make([]float32, 20)
		for i, y := range labels {
			onehot[i*5+int(y)] = 1
		}
		s1, c1, g1 := l.SumTargets(z, onehot)
		g1c := append([]float32(nil), g1.Data...)
		s0, c0, g0 := l.Sum(z, labels)
		if s1 != s0 || c1 != c0 || !slices.Equal(g1c, g0.Data) {
			t.Errorf("smoothing %g: one-hot targets give loss %v correct %d, int labels %v correct %d", eps, s1, c1, s0, c0)
		}
	}
	// Logits 0 and ln 3: p = (1/4, 3/4); targets (0.4, 0.6): the loss is
	// -(0.4 ln 1/4 + 0.6 ln 3/4), and the top classes agree.
	tg := []float32{0.4, 0.6}
	s, correct, _ := (&SoftmaxCrossEntropy{}).SumTargets(&Tensor{Shape: []int{1, 2}, Data: []float32{0, float32(math.Log(3))}}, tg)
	if want := -(float64(tg[0])*math.Log(0.25) + float64(tg[1])*math.Log(0.75)); math.Abs(s.Float()-want) > 1e-6 || correct != 1 {
		t.Errorf("loss %g (want %g), correct %d", s.Float(), want, correct)
	}
}

// TestModelsBuild: every built-in model takes CIFAR-shaped input and gives
// ten scores, with the expected number of parameters.
func TestModelsBuild(t *testing.T) {
	for _, c := range []struct {
		spec ModelSpec
		size int
	}{
		{ModelSpec{Name: "mlp"}, 3072*512 + 512 + 512*10 + 10},
		// Keras reports 1,250,858 trainable parameters for cifar10_cnn.py.
		{ModelSpec{Name: "keras_cnn"}, 1250858},
		// He et al.: ResNet-20 has 0.27M parameters.
		{ModelSpec{Name: "resnet", Depth: 20}, 0},
		{ModelSpec{Name: "resnet", Depth: 8}, 0},
	} {
		m, err := c.spec.Build([]int{3, 32, 32}, 10, 1)
		if err != nil {
			t.Fatal(err)
		}
		if m.Classes() != 10 {
			t.Errorf("%s: %d classes", m.Name, m.Classes())
		}
		if c.size != 0 && m.Size() != c.size {
			t.Errorf("%s: %d parameters, want %d", m.Name, m.Size(), c.size)
		}
		if m.Name == "resnet20" && (m.Size() < 260000 || m.Size() > 280000) {
			t.Errorf("resnet20: %d parameters, want about 0.27M", m.Size())
		}
		x := randTensor(rand.New(rand.NewPCG(1, 1)), 2, 3, 32, 32)
		ctx := &Context{Train: true, Pool: NewPool(2), Samples: []int{0, 1}}
		if y := m.Forward(ctx, x); y.Shape[0] != 2 || y.Shape[1] != 10 {
			t.Errorf("%s: output %v", m.Name, y.Shape)
		}
	}
	if _, err := (ModelSpec{Name: "resnet", Depth: 9}).Build([]int{3, 32, 32}, 10, 1); err == nil {
		t.Error("resnet depth=9 accepted")
	}
	if _, err := (ModelSpec{Name: "vgg"}).Build([]int{3, 32, 32}, 10, 1); err == nil {
		t.Error("unknown model accepted")
	}
}
