//go:build cuda || cudaemu

// These tests compare every kernel with package trainer's CPU code, the
// reference. In the cudaemu build they run on the CUDA emulator, in CI
// (go test -tags cudaemu ./trainer/gpu), on smaller sizes; in the cuda
// build on a GPU: build the binary where Go and the CUDA headers are
// (scripts/gpu-check does it) and run it on the GPU machine:
//
//	go test -tags cuda -c -o gpu.test ./trainer/gpu
//	./gpu.test -test.v
//	./gpu.test -test.run '^$' -test.bench . -test.benchtime 20x

package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/cuda"
	"github.com/pipefeed/pipe/internal/splitmix"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/nn"
)

// TestMain prints the emulator's seed after a failure, so that the thread
// orders and stream delays that failed can be repeated.
func TestMain(m *testing.M) {
	start := time.Now()
	code := m.Run()
	if n, ok := cuda.Instructions(); ok {
		fmt.Printf("cuda emulator: %d PTX instructions in %v\n", n, time.Since(start).Round(time.Millisecond))
	}
	if seed, ok := cuda.Seed(); ok && code != 0 {
		fmt.Fprintf(os.Stderr, "cuda emulator seed %d: PIPE_CUDAEMU_SEED=%d repeats its thread orders and stream delays\n", seed, seed)
	}
	os.Exit(code)
}

// ordinal is the GPU the tests use; a second replica goes on the next one
// when there is one, else on the same.
const ordinal = 0

func newReplica(tb testing.TB, m *nn.Model, ord int) *Replica {
	tb.Helper()
	r, err := New(ord, m)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Error(err)
		}
	})
	return r
}

// value is a deterministic value in [-1, 1) keyed by a, b.
func value(a, b int) float32 {
	return float32(splitmix.Mix(uint64(a)<<32^uint64(b))>>40)/float32(1<<23) - 1
}

// batch is n samples of shape in, labels in [0, classes), samples from
// first.
func batch(in []int, n, classes, first int) trainer.Batch {
	x := nn.NewTensor(append([]int{n}, in...)...)
	per := x.PerSample()
	b := trainer.Batch{X: x, Release: func() {}}
	for i := range n {
		s := first + i
		label := s % classes
		for j := range per {
			x.Data[i*per+j] = value(s, j) + float32(label)*0.3*float32(j%2)
		}
		b.Labels = append(b.Labels, int32(label))
		b.Samples = append(b.Samples, s)
	}
	return b
}

// norm is ||a||; diff is ||a-b||.
func norm[T float32 | float64](a []T) float64 {
	var n float64
	for _, v := range a {
		n += float64(v) * float64(v)
	}
	return math.Sqrt(n)
}

func diff[T float32 | float64](a, b []T) float64 {
	var d float64
	for i := range a {
		d += math.Pow(float64(a[i])-float64(b[i]), 2)
	}
	return math.Sqrt(d)
}

// relDiff is ||a-b|| / ||b||.
func relDiff[T float32 | float64](a, b []T) float64 {
	var d, n float64
	for i := range a {
		d += math.Pow(float64(a[i])-float64(b[i]), 2)
		n += math.Pow(float64(b[i]), 2)
	}
	if d == 0 {
		return 0
	}
	return math.Sqrt(d / max(n, 1e-30))
}

// cpuStep runs the CPU reference on b and returns the loss sum, the
// correct predictions and the gradient sums in the replica's order.
func cpuStep(m *nn.Model, b trainer.Batch, ctx nn.Context) (float64, int, []float64) {
	ctx.Pool = nn.NewPool(1)
	m.ZeroGrad()
	loss := nn.SoftmaxCrossEntropy{Smoothing: ctx.Smoothing}
	logits := m.Forward(&ctx, b.X)
	l, k, g := loss.Loss(logits, b.Labels)
	if ctx.Train {
		m.Backward(&ctx, g)
	}
	var g64 []float64
	for _, p := range m.Params() {
		if !p.Buffer {
			g64 = append(g64, p.G64...)
		}
	}
	return l * float64(b.N()), k, g64
}

// sizes are the tests' image sides, ResNet width and batches. A GPU runs
// the full ones in moments; the emulator (the cudaemu build, in CI)
// interprets some 10^8 PTX instructions a second on a core, so it gets
// smaller images, a narrower ResNet and smaller batches: the same layers,
// kernels and code paths on less data.
type sizes struct {
	side   int // the layer models' input side
	cnn    int // keras_cnn's input side (10 is its least)
	train  int // the training tests' input side
	width  int // the ResNets' first-stage channels
	global int // the training tests' global batch (two replicas take half each)
	big    int // TestDeviceBatchInPlace's larger batch
	// model is what the training tests train (with no batch norm, whose
	// statistics differ between one replica and two); trained are the
	// models TestTrainingMatchesCPU compares with the CPU's.
	model   nn.ModelSpec
	trained []nn.ModelSpec
}

var size = func() sizes {
	if cuda.Emulated {
		// keras_cnn costs 25 million instructions a sample and step on
		// the 10×10 images: the layer test runs it once, the training
		// tests take an MLP and resnet8 of width 4.
		return sizes{side: 8, cnn: 10, train: 8, width: 4, global: 16, big: 48, model: nn.ModelSpec{Name: "mlp", Width: 64},
			trained: []nn.ModelSpec{{Name: "mlp", Width: 64}, {Name: "resnet", Depth: 8, Width: 4}}}
	}
	return sizes{side: 12, cnn: 16, train: 16, width: 16, global: 64, big: 96, model: nn.ModelSpec{Name: "keras_cnn"},
		trained: []nn.ModelSpec{{Name: "keras_cnn"}, {Name: "resnet", Depth: 8}}}
}()

// layerModels are small models that put every layer, in every
// configuration the built-in models use, between a parameter and the loss,
// so that each layer's forward pass shows in the loss and its backward pass
// in the gradients before it.
func layerModels() map[string]func() (*nn.Model, error) {
	sd := size.side
	in := []int{3, sd, sd}
	valid := (sd - 2) / 2   // a valid 3×3 convolution, then 2×2 pooling
	overlap := (sd-3)/2 + 1 // 3×3 pooling at stride 2
	half := (sd + 1) / 2    // a 1×1 convolution at stride 2
	return map[string]func() (*nn.Model, error){
		"conv3x3-bias-relu": func() (*nn.Model, error) {
			return nn.NewModel("a", in, 1, nn.NewConv2D(3, 8, 3, 1, 1), &nn.ReLU{}, &nn.Flatten{}, nn.NewDense(8*sd*sd, 5))
		},
		"conv3x3-valid-maxpool-dropout": func() (*nn.Model, error) {
			return nn.NewModel("b", in, 2, nn.NewConv2D(3, 8, 3, 1, 0), &nn.ReLU{}, nn.NewMaxPool2D(2, 2),
				&nn.Dropout{P: 0.25}, &nn.Flatten{}, nn.NewDense(8*valid*valid, 16), &nn.ReLU{}, &nn.Dropout{P: 0.5},
				nn.NewDense(16, 5))
		},
		"maxpool-overlapping": func() (*nn.Model, error) {
			return nn.NewModel("c", in, 3, nn.NewConv2D(3, 4, 3, 1, 1), nn.NewMaxPool2D(3, 2), &nn.Flatten{},
				nn.NewDense(4*overlap*overlap, 5))
		},
		"conv-stride2-batchnorm-gap": func() (*nn.Model, error) {
			return nn.NewModel("d", in, 4, nn.NewConv2DNoBias(3, 8, 3, 2, 1), nn.NewBatchNorm(8), &nn.ReLU{},
				&nn.GlobalAvgPool{}, nn.NewDense(8, 5))
		},
		"conv1x1-stride2": func() (*nn.Model, error) {
			return nn.NewModel("e", in, 5, nn.NewConv2DNoBias(3, 8, 1, 2, 0), &nn.Flatten{}, nn.NewDense(8*half*half, 5))
		},
		"dense-batchnorm": func() (*nn.Model, error) {
			return nn.NewModel("f", in, 6, &nn.Flatten{}, nn.NewDense(3*sd*sd, 24), nn.NewBatchNorm(24),
				&nn.ReLU{}, nn.NewDense(24, 5))
		},
		// Channels of 40 samples summed in 5 parts of planes wider than
		// a block, and in 2 parts of planes narrower than one (bnParts).
		"batchnorm-in-parts-wide": func() (*nn.Model, error) {
			return nn.NewModel("h", []int{2, 23, 23}, 8, nn.NewBatchNorm(2), &nn.ReLU{}, &nn.GlobalAvgPool{}, nn.NewDense(2, 5))
		},
		"batchnorm-in-parts-narrow": func() (*nn.Model, error) {
			return nn.NewModel("i", []int{3, 15, 15}, 9, nn.NewBatchNorm(3), &nn.ReLU{}, &nn.GlobalAvgPool{}, nn.NewDense(3, 5))
		},
		"residual-identity-and-projection": func() (*nn.Model, error) {
			block := func(i, o, s int) nn.Layer {
				body := []nn.Layer{nn.NewConv2DNoBias(i, o, 3, s, 1), nn.NewBatchNorm(o), &nn.ReLU{},
					nn.NewConv2DNoBias(o, o, 3, 1, 1), nn.NewBatchNorm(o)}
				var short []nn.Layer
				if s != 1 || i != o {
					short = []nn.Layer{nn.NewConv2DNoBias(i, o, 1, s, 0), nn.NewBatchNorm(o)}
				}
				return &nn.Residual{Body: body, Shortcut: short}
			}
			return nn.NewModel("g", in, 7, nn.NewConv2DNoBias(3, 4, 3, 1, 1), block(4, 4, 1), &nn.ReLU{},
				block(4, 8, 2), &nn.ReLU{}, &nn.GlobalAvgPool{}, nn.NewDense(8, 5))
		},
		"keras_cnn": func() (*nn.Model, error) {
			return nn.ModelSpec{Name: "keras_cnn"}.Build([]int{3, size.cnn, size.cnn}, 5, 8)
		},
		"resnet8": func() (*nn.Model, error) {
			return nn.ModelSpec{Name: "resnet", Depth: 8, Width: size.width}.Build(in, 5, 9)
		},
	}
}

// TestLayersMatchCPU: every layer's forward pass (the loss, the
// predictions, the batch-norm running statistics, the evaluation loss) and
// backward pass (every gradient) on the GPU agree with the CPU trainer's,
// to float32 rounding: 1e-5 for the loss, 1e-4 for the gradients.
func TestLayersMatchCPU(t *testing.T) {
	for name, build := range layerModels() {
		t.Run(name, func(t *testing.T) {
			m, err := build()
			if err != nil {
				t.Fatal(err)
			}
			opt, _ := nn.NewOptimizer(nn.OptimConfig{}, m.Params())
			r := newReplica(t, m, ordinal)
			if err := r.Load(m, opt); err != nil {
				t.Fatal(err)
			}
			// 40 samples: two full dense chunks of 16 and a partial one.
			b := batch(m.In, 40, 5, 1000)
			ctx := nn.Context{Train: true, Seed: 11, Step: 3, Samples: b.Samples, Smoothing: 0.1}
			gs, gk, err := r.ForwardBackward(&ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			gl := gs.Float()
			grads, err := r.Gradients()
			if err != nil {
				t.Fatal(err)
			}
			cl, ck, cg := cpuStep(m, b, ctx)
			if d := math.Abs(gl-cl) / math.Abs(cl); !(d <= 1e-5) {
				t.Errorf("loss: GPU %.9g, CPU %.9g (relative %.2g)", gl, cl, d)
			}
			if gk != ck {
				t.Errorf("correct: GPU %d, CPU %d", gk, ck)
			}
			// Relative to the gradient, or to a thousandth of the whole
			// model's where a gradient is rounding noise around zero (a
			// dense bias before batch norm, which subtracts it).
			floor := 1e-3 * norm(cg)
			off := 0
			for _, p := range m.Params() {
				if p.Buffer {
					continue
				}
				a, b := grads[off:off+len(p.G64)], cg[off:off+len(p.G64)]
				if d := diff(a, b) / max(norm(b), floor); !(d <= 1e-4) {
					t.Errorf("gradient of %s %v: relative difference %.2g", p.Name, p.Shape, d)
				}
				off += len(p.G64)
			}
			// The running statistics the training pass updated.
			host, _ := build()
			hopt, _ := nn.NewOptimizer(nn.OptimConfig{}, host.Params())
			if err := r.Store(host, hopt); err != nil {
				t.Fatal(err)
			}
			for i, p := range m.Params() {
				if p.Buffer {
					if d := relDiff(host.Params()[i].W, p.W); !(d <= 1e-5) {
						t.Errorf("%s after a training pass: relative difference %.2g", p.Name, d)
					}
				}
			}
			// Inference mode, with the running statistics.
			el, ek, err := r.Evaluate(b)
			if err != nil {
				t.Fatal(err)
			}
			cl, ck, _ = cpuStep(m, b, nn.Context{})
			if d := math.Abs(el-cl) / math.Abs(cl); !(d <= 1e-5) || ek != ck {
				t.Errorf("evaluation: GPU %.9g (%d correct), CPU %.9g (%d)", el, ek, cl, ck)
			}
		})
	}
}

// TestDropoutMasksMatchCPU: a dropout layer right after the input passes
// exactly the CPU's values (the masks are the same bits), so the gradient
// of the dense layer after it matches to float32 rounding of one GEMM.
func TestDropoutMasksMatchCPU(t *testing.T) {
	m, err := nn.NewModel("drop", []int{3, 4, 4}, 1, &nn.Dropout{P: 0.5}, &nn.Flatten{}, nn.NewDense(48, 3))
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := nn.NewOptimizer(nn.OptimConfig{}, m.Params())
	r := newReplica(t, m, ordinal)
	r.Load(m, opt)
	b := batch(m.In, 16, 3, 77)
	for step := range int64(3) {
		ctx := nn.Context{Train: true, Seed: 5, Step: step, Samples: b.Samples}
		if _, _, err := r.ForwardBackward(&ctx, b); err != nil {
			t.Fatal(err)
		}
		g, _ := r.Gradients()
		_, _, want := cpuStep(m, b, ctx)
		if d := relDiff(g, want); !(d <= 1e-6) {
			t.Errorf("step %d: gradients differ by %.2g: the masks are not the CPU's", step, d)
		}
	}
}

// TestOptimizersMatchCPU: each optimiser's update on the GPU gives the
// CPU's parameters and state bit for bit, from the same gradients, over
// several steps (Adam's bias correction counts them).
func TestOptimizersMatchCPU(t *testing.T) {
	for _, c := range []nn.OptimConfig{
		{Name: "sgd"}, {Name: "sgd", Momentum: 0.9, WeightDecay: 5e-4}, {Name: "sgd", Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4},
		{Name: "adam"}, {Name: "adam", WeightDecay: 1e-4}, {Name: "rmsprop"}, {Name: "rmsprop", Momentum: 0.9, WeightDecay: 1e-4},
	} {
		t.Run(fmt.Sprintf("%s-m%g-n%v-wd%g", c.Name, c.Momentum, c.Nesterov, c.WeightDecay), func(t *testing.T) {
			m, err := nn.NewModel("o", []int{2, 6, 6}, 3, nn.NewConv2DNoBias(2, 4, 3, 1, 1), nn.NewBatchNorm(4),
				&nn.Flatten{}, nn.NewDense(144, 3))
			if err != nil {
				t.Fatal(err)
			}
			opt, err := nn.NewOptimizer(c, m.Params())
			if err != nil {
				t.Fatal(err)
			}
			r := newReplica(t, m, ordinal)
			if err := r.Load(m, opt); err != nil {
				t.Fatal(err)
			}
			for s := range 4 {
				var g []float64
				for pi, p := range m.Params() {
					for j := range p.G64 {
						p.G64[j] = float64(value(100*s+pi, j)) * 1e-2
					}
					if !p.Buffer {
						g = append(g, p.G64...)
					}
				}
				if err := r.SetGradients(g); err != nil {
					t.Fatal(err)
				}
				lr := 0.1 / float64(s+1)
				if err := r.Update(lr); err != nil {
					t.Fatal(err)
				}
				m.Grads()
				opt.Step(m.Params(), lr)
			}
			host, _ := nn.NewModel("o", []int{2, 6, 6}, 99, nn.NewConv2DNoBias(2, 4, 3, 1, 1), nn.NewBatchNorm(4),
				&nn.Flatten{}, nn.NewDense(144, 3))
			hopt, _ := nn.NewOptimizer(c, host.Params())
			if err := r.Store(host, hopt); err != nil {
				t.Fatal(err)
			}
			if got, want := host.Hash(), m.Hash(); got != want {
				t.Errorf("parameters after 4 updates: GPU %s, CPU %s", got[:12], want[:12])
			}
			for i, p := range m.Params() {
				a1, a2 := opt.State(i)
				b1, b2 := hopt.State(i)
				if relDiff(b1, a1) != 0 || relDiff(b2, a2) != 0 {
					t.Errorf("optimiser state of %s differs", p.Name)
				}
			}
			if hopt.Steps() != opt.Steps() {
				t.Errorf("steps: GPU %d, CPU %d", hopt.Steps(), opt.Steps())
			}
		})
	}
}

// TestSoftTargetsRefused: a batch with soft targets (mixup, cutmix) is
// refused, not trained on its int labels.
func TestSoftTargetsRefused(t *testing.T) {
	m, _ := size.trained[0].Build(trainIn, 5, 1)
	opt, _ := nn.NewOptimizer(nn.OptimConfig{}, m.Params())
	r := newReplica(t, m, ordinal)
	r.Load(m, opt)
	b := batch(m.In, 8, 5, 0)
	b.Targets = make([]float32, 8*5)
	ctx := nn.Context{Train: true, Seed: 1, Samples: b.Samples}
	if _, _, err := r.ForwardBackward(&ctx, b); !errors.Is(err, trainer.ErrSoftTargets) {
		t.Fatalf("got %v, want trainer.ErrSoftTargets", err)
	}
}

// TestDeviceBatchInPlace: a batch already in device memory (as the
// prefetch queue leaves it) trains exactly as the same batch copied in.
func TestDeviceBatchInPlace(t *testing.T) {
	m, _ := size.trained[0].Build(trainIn, 5, 1)
	opt, _ := nn.NewOptimizer(nn.OptimConfig{}, m.Params())
	r := newReplica(t, m, ordinal)
	r.Load(m, opt)
	b := batch(m.In, 32, 5, 0)
	ctx := nn.Context{Train: true, Seed: 1, Samples: b.Samples}
	l1, k1, err := r.ForwardBackward(&ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	g1 := append([]float64(nil), must(r.Gradients())...)
	db := onDevice(t, r, b)
	l2, k2, err := r.ForwardBackward(&ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if l1 != l2 || k1 != k2 || relDiff(must(r.Gradients()), g1) != 0 {
		t.Errorf("device batch: loss %v (%d correct), host batch %v (%d)", l2, k2, l1, k1)
	}
	// A larger batch grows every buffer (the stream drained, the old ones
	// freed); the first batch then trains as before.
	if _, _, err := r.Evaluate(batch(m.In, size.big, 5, 500)); err != nil {
		t.Fatal(err)
	}
	l3, k3, err := r.ForwardBackward(&ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if l3 != l1 || k3 != k1 || relDiff(must(r.Gradients()), g1) != 0 {
		t.Errorf("after a larger batch: loss %v (%d correct), before %v (%d)", l3, k3, l1, k1)
	}
}

// onDevice returns b with its samples copied into r's GPU, as the prefetch
// queue leaves them (freed when the test ends).
func onDevice(tb testing.TB, r *Replica, b trainer.Batch) trainer.Batch {
	tb.Helper()
	var ptr cuda.DevicePtr
	err := r.do(func() error {
		var err error
		if ptr, err = cuda.MemAlloc(int64(4 * len(b.X.Data))); err != nil {
			return err
		}
		if err := cuda.CopyHtoDAsync(ptr, cuda.Bytes(b.X.Data), r.stream); err != nil {
			return err
		}
		return r.stream.Synchronize()
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.do(func() error { return cuda.MemFree(ptr) }) })
	db := b
	db.X, db.Dev = nil, &trainer.DeviceTensor{Shape: b.X.Shape, Ptr: uintptr(ptr)}
	return db
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// feed serves deterministic global batches, replica r taking rows
// [r·G/R, (r+1)·G/R) of each.
type feed struct {
	in                        []int
	global, replicas, batches int
}

type epoch struct {
	f    *feed
	e    int
	next []int
}

func (f *feed) Epoch(_ context.Context, e int) (trainer.EpochFeed, error) {
	return &epoch{f: f, e: e, next: make([]int, f.replicas)}, nil
}

func (x *epoch) Next(r int) (trainer.Batch, error) {
	f := x.f
	if x.next[r] >= f.batches {
		return trainer.Batch{}, io.EOF
	}
	b := x.next[r]
	x.next[r]++
	per := f.global / f.replicas
	return batch(f.in, per, 10, (x.e*f.batches+b)*f.global+r*per), nil
}

func (x *epoch) Stall(int) time.Duration { return 0 }
func (x *epoch) Close() error            { return nil }

// gpuTrainer trains cfg on the feed with one GPU replica per ordinal.
func gpuTrainer(t testing.TB, cfg trainer.Config, f *feed, ords []int) *trainer.Trainer {
	t.Helper()
	cfg.GlobalBatch, cfg.BatchesPerEpoch, cfg.Input, cfg.Classes, cfg.Replicas = f.global, f.batches, f.in, 10, f.replicas
	if ords != nil {
		arch, err := cfg.Model.Build(f.in, 10, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		red := &PeerReducer{}
		for _, o := range ords {
			cfg.Accelerators = append(cfg.Accelerators, newReplica(t, arch, o))
		}
		t.Cleanup(func() { red.Close(cfg.Accelerators[0].(*Replica)) })
		cfg.DeviceReducer = red
	}
	tr, err := trainer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for tr.Epoch < cfg.Epochs {
		if _, err := tr.RunEpoch(context.Background(), f, nil); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// worst is the largest relative difference of a trained parameter.
func worst(a, b *nn.Model) (float64, string) {
	w, name := 0.0, ""
	for i, p := range a.Params() {
		if d := relDiff(p.W, b.Params()[i].W); d > w || math.IsNaN(d) {
			w, name = d, p.Name
		}
	}
	return w, name
}

// ordinals returns n GPU ordinals: distinct GPUs where the machine has
// them, else GPU 0 again.
func ordinals(n int) []int {
	count, _ := cuda.DeviceCount()
	var o []int
	for i := range n {
		o = append(o, i%max(count, 1))
	}
	return o
}

// trainCfg trains keras_cnn on a GPU, an MLP under the emulator
// (size.model).
var trainCfg = trainer.Config{Model: size.model, Epochs: 1, LR: 0.05, BaseBatch: 64, Seed: 5,
	Optim: nn.OptimConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}, Smoothing: 0.1}

// trainIn is the training tests' per-sample input shape.
var trainIn = []int{3, size.train, size.train}

// TestTrainingMatchesCPU: 20 training steps of keras_cnn (dropout
// included) and of resnet8 (under the emulator an MLP and a narrow
// resnet8), each on the GPU from the CPU trainer's parameters and optimiser
// state after the step before, end where the CPU's step ends: each
// parameter within 1e-5 of the CPU's (relative, with a floor of 1e-3 of
// the model's norm for values near zero, such as fresh biases). Steps start
// from the CPU's state because a free run cannot be held to a tolerance:
// keras_cnn's trajectory at this learning rate amplifies a one-ulp change
// of its initial weights 10^5-fold in 20 steps on the CPU alone (ReLU and
// max-pool choices flip), so a GPU that rounds sums in another order ends
// as far away without a wrong kernel. TestTrainerDrivesTheGPU covers the
// trainer's free run.
func TestTrainingMatchesCPU(t *testing.T) {
	for _, spec := range size.trained {
		m, err := spec.Build(trainIn, 10, trainCfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		host, _ := spec.Build(trainIn, 10, trainCfg.Seed+1)
		opt, err := nn.NewOptimizer(trainCfg.Optim, m.Params())
		if err != nil {
			t.Fatal(err)
		}
		hopt, _ := nn.NewOptimizer(trainCfg.Optim, host.Params())
		r := newReplica(t, m, ordinal)
		floor := 1e-3 * modelNorm(m)
		worstAll, worstName, worstStep := 0.0, "", 0
		for s := range 20 {
			b := batch(trainIn, size.global, 10, s*size.global)
			ctx := nn.Context{Train: true, Seed: trainCfg.Seed, Step: int64(s), Samples: b.Samples, Smoothing: trainCfg.Smoothing}
			if err := r.Load(m, opt); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.ForwardBackward(&ctx, b); err != nil {
				t.Fatal(err)
			}
			if err := r.Update(trainCfg.LR); err != nil {
				t.Fatal(err)
			}
			cpuStep(m, b, ctx)
			m.Grads()
			opt.Step(m.Params(), trainCfg.LR)
			if err := r.Store(host, hopt); err != nil {
				t.Fatal(err)
			}
			for i, p := range m.Params() {
				d := diff(host.Params()[i].W, p.W) / max(norm(p.W), floor)
				if d > worstAll || math.IsNaN(d) {
					worstAll, worstName, worstStep = d, fmt.Sprintf("%s (parameter %d)", p.Name, i), s
				}
			}
		}
		t.Logf("%s: 20 steps from the CPU's state: worst relative difference %.2g (%s at step %d)", spec.Name, worstAll, worstName, worstStep)
		if !(worstAll <= 1e-5) {
			t.Errorf("%s: a step from the CPU's state ends %.2g away from the CPU's (%s at step %d)", spec.Name, worstAll, worstName, worstStep)
		}
	}
}

// TestTrainerDrivesTheGPU: the trainer's own loop (its step counter keying
// dropout, its learning rate, label smoothing, the replica's updates) runs
// keras_cnn and resnet8 (under the emulator an MLP and a narrow resnet8) on
// the GPU to where it runs them on the CPU, within 1e-5. Five steps: far
// enough for a wrong step key, scale or schedule to move the biases, which
// start at zero, by far more; short of where a free run amplifies rounding
// differences (on an H100, 20 steps of keras_cnn ended 0.45 apart while
// every step from the CPU's state agreed to 5e-7, and 5 steps to 1e-6).
func TestTrainerDrivesTheGPU(t *testing.T) {
	for _, spec := range size.trained {
		cfg := trainCfg
		cfg.Model = spec
		f := &feed{in: trainIn, global: size.global, replicas: 1, batches: 5}
		cpu := gpuTrainer(t, cfg, f, nil)
		gpu := gpuTrainer(t, cfg, f, ordinals(1))
		d, name := worst(gpu.Model(), cpu.Model())
		t.Logf("%s: GPU vs CPU after 5 steps of the trainer: worst relative difference %.2g (%s)", spec.Name, d, name)
		if !(d <= 1e-5) {
			t.Errorf("%s: GPU vs CPU after 5 steps of the trainer: %s differs by %.2g", spec.Name, name, d)
		}
	}
}

// modelNorm is the norm of every value of m.
func modelNorm(m *nn.Model) float64 {
	var s float64
	for _, p := range m.Params() {
		s += math.Pow(norm(p.W), 2)
	}
	return math.Sqrt(s)
}

// TestGPUsEqualOne: two GPU replicas of 32, their gradients averaged by
// peer copies, train keras_cnn as one GPU of 64 does (under the emulator
// an MLP, 2×8 against 1×16), within the CPU trainer's tolerance for
// replicas (1e-4); and a run repeats bit for bit.
func TestGPUsEqualOne(t *testing.T) {
	g := size.global
	one := gpuTrainer(t, trainCfg, &feed{in: trainIn, global: g, replicas: 1, batches: 20}, ordinals(1))
	two := gpuTrainer(t, trainCfg, &feed{in: trainIn, global: g, replicas: 2, batches: 20}, ordinals(2))
	d, name := worst(two.Model(), one.Model())
	t.Logf("2×%d vs 1×%d on GPUs %v after 20 steps: worst relative difference %.2g (%s); hashes %s %s", g/2, g, ordinals(2), d, name,
		two.Model().Hash()[:12], one.Model().Hash()[:12])
	if !(d <= 1e-4) {
		t.Errorf("2×%d vs 1×%d: %s differs by %.2g", g/2, g, name, d)
	}
	again := gpuTrainer(t, trainCfg, &feed{in: trainIn, global: g, replicas: 2, batches: 20}, ordinals(2))
	if a, b := again.Model().Hash(), two.Model().Hash(); a != b {
		t.Errorf("the same run twice: %s then %s", b[:12], a[:12])
	}
}

// TestCheckpointGPUToCPU: a checkpoint written by a GPU run is the model
// the GPU trained, and a CPU trainer resumes from it.
func TestCheckpointGPUToCPU(t *testing.T) {
	f := &feed{in: trainIn, global: size.global, replicas: 1, batches: 5}
	g := gpuTrainer(t, trainCfg, f, ordinals(1))
	var ckpt bytes.Buffer
	if err := g.WriteCheckpoint(&ckpt, "id", nil); err != nil {
		t.Fatal(err)
	}
	cfg := trainCfg
	cfg.GlobalBatch, cfg.BatchesPerEpoch, cfg.Input, cfg.Classes, cfg.Replicas = f.global, 5, f.in, 10, 1
	c, err := trainer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadCheckpoint("ckpt", func() ([]byte, error) { return ckpt.Bytes(), nil }, "id"); err != nil {
		t.Fatal(err)
	}
	if a, b := c.Model().Hash(), g.Model().Hash(); a != b {
		t.Errorf("the CPU resumed %s, the GPU trained %s", a[:12], b[:12])
	}
}

// BenchmarkTrainStep is the GPU trainer's throughput, images/s, at batch
// 256 of CIFAR-sized float32 images already in device memory: what
// bench/torch/train_gpu.py measures for PyTorch eager on the same GPU.
func BenchmarkTrainStep(b *testing.B) {
	for _, spec := range []nn.ModelSpec{{Name: "keras_cnn"}, {Name: "resnet", Depth: 20}} {
		b.Run(spec.Name+fmt.Sprint(spec.Depth), func(b *testing.B) {
			const n = 256
			in := []int{3, 32, 32}
			m, err := spec.Build(in, 10, 1)
			if err != nil {
				b.Fatal(err)
			}
			opt, _ := nn.NewOptimizer(nn.OptimConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}, m.Params())
			r := newReplica(b, m, ordinal)
			r.Load(m, opt)
			hb := batch(in, n, 10, 0)
			db := onDevice(b, r, hb)
			ctx := nn.Context{Train: true, Seed: 1, Samples: hb.Samples, Smoothing: 0.1}
			step := func() {
				if _, _, err := r.ForwardBackward(&ctx, db); err != nil {
					b.Fatal(err)
				}
				if err := r.Update(0.01); err != nil {
					b.Fatal(err)
				}
			}
			for range 3 {
				step()
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				step()
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "images/s")
		})
	}
}
