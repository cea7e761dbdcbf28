package trainer

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/pipefeed/pipe/trainer/nn"
)

// hostAccel is an Accelerator whose "device" is a second copy of the model
// in host memory, trained with the CPU code: the trainer's accelerator path
// (load, store, gradients through the reducer, update on the device,
// evaluation, checkpoints) must then train exactly the model the CPU path
// trains, which is what lets the GPU replicas be checked against the CPU on
// a GPU machine with everything else already known to work.
type hostAccel struct {
	m     *nn.Model
	o     *nn.Optimizer
	pool  *nn.Pool
	loss  nn.SoftmaxCrossEntropy
	g     []float64
	loads int
}

func newHostAccel(t *testing.T, cfg Config) *hostAccel {
	t.Helper()
	m, err := cfg.Model.Build(cfg.Input, cfg.Classes, cfg.Seed+1) // other values: Load must overwrite them
	if err != nil {
		t.Fatal(err)
	}
	o, err := nn.NewOptimizer(cfg.Optim, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	return &hostAccel{m: m, o: o, pool: nn.NewPool(1)}
}

func (a *hostAccel) Name() string { return "host:0" }

func copyState(dm *nn.Model, do *nn.Optimizer, sm *nn.Model, so *nn.Optimizer) {
	for i, p := range sm.Params() {
		copy(dm.Params()[i].W, p.W)
		f, s := so.State(i)
		df, ds := do.State(i)
		copy(df, f)
		copy(ds, s)
	}
	do.SetSteps(so.Steps())
}

func (a *hostAccel) Load(m *nn.Model, o *nn.Optimizer) error {
	a.loads++
	copyState(a.m, a.o, m, o)
	return nil
}

func (a *hostAccel) Store(m *nn.Model, o *nn.Optimizer) error {
	copyState(m, o, a.m, a.o)
	return nil
}

func (a *hostAccel) ForwardBackward(c *nn.Context, b Batch) (nn.LossSum, int, error) {
	if b.X == nil {
		return 0, 0, errors.New("no host batch")
	}
	ctx := *c
	ctx.Pool = a.pool
	a.m.ZeroGrad()
	a.loss.Smoothing = c.Smoothing
	logits := a.m.Forward(&ctx, b.X)
	l, k, g := a.loss.Sum(logits, b.Labels)
	a.m.Backward(&ctx, g)
	return l, k, nil
}

func (a *hostAccel) Gradients() ([]float64, error) {
	a.g = a.g[:0]
	for _, p := range a.m.Params() {
		if !p.Buffer {
			a.g = append(a.g, p.G64...)
		}
	}
	return a.g, nil
}

func (a *hostAccel) SetGradients(g []float64) error {
	for _, p := range a.m.Params() {
		if !p.Buffer {
			g = g[copy(p.G64, g):]
		}
	}
	return nil
}

func (a *hostAccel) Update(lr float64) error {
	a.m.Grads()
	a.o.Step(a.m.Params(), lr)
	return nil
}

func (a *hostAccel) Evaluate(b Batch) (float64, int, error) {
	var loss nn.SoftmaxCrossEntropy
	l, k, _ := loss.Loss(a.m.Forward(&nn.Context{Pool: a.pool}, b.X), b.Labels)
	return l * float64(b.N()), k, nil
}

func (a *hostAccel) Close() error { return nil }

// hostReducer is a DeviceReducer over hostAccels.
type hostReducer struct{ calls int }

func (h *hostReducer) ReduceGradients(accs []Accelerator) error {
	h.calls++
	bufs := make([][]float64, len(accs))
	for i, a := range accs {
		g, _ := a.Gradients()
		bufs[i] = append([]float64(nil), g...)
	}
	if err := (LocalAllReduce{}).AllReduce64(bufs); err != nil {
		return err
	}
	for i, a := range accs {
		a.SetGradients(bufs[i])
	}
	return nil
}

// TestAcceleratorsTrainLikeCPU: replicas on accelerators train the model,
// to the bit, that replicas on the CPU train: through the host all-reduce
// and through a DeviceReducer, with each optimiser, with a checkpoint saved
// from the accelerators in the middle and resumed on the CPU.
func TestAcceleratorsTrainLikeCPU(t *testing.T) {
	feed := &fakeFeed{shape: []int{3, 8, 8}, global: 32, replicas: 2, batches: 4, classes: 4}
	for _, opt := range []nn.OptimConfig{{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}, {Name: "adam", WeightDecay: 1e-4}, {Name: "rmsprop", Momentum: 0.5}} {
		t.Run(opt.Name, func(t *testing.T) {
			cfg := Config{Model: nn.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 2, Optim: opt, LR: 0.05, Seed: 3,
				Smoothing: 0.1, Mode: "sync"}
			cpu := train(t, cfg, feed)

			for _, devReduce := range []bool{false, true} {
				c := cfg
				c.GlobalBatch, c.BatchesPerEpoch = feed.global, feed.batches
				c.Input, c.Classes, c.Replicas = feed.shape, feed.classes, feed.replicas
				accs := []Accelerator{newHostAccel(t, c), newHostAccel(t, c)}
				var red hostReducer
				c.Accelerators = accs
				if devReduce {
					c.DeviceReducer = &red
				}
				tr, err := New(c)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tr.RunEpoch(context.Background(), feed, nil); err != nil {
					t.Fatal(err)
				}
				// Stop after the first epoch, checkpoint, resume on the CPU.
				path := filepath.Join(t.TempDir(), "ckpt")
				if err := saveFile(tr, path, "id", nil); err != nil {
					t.Fatal(err)
				}
				c2 := c
				c2.Accelerators, c2.DeviceReducer = nil, nil
				resumed, err := New(c2)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := loadFile(resumed, path, "id"); err != nil {
					t.Fatal(err)
				}
				if _, err := resumed.RunEpoch(context.Background(), feed, nil); err != nil {
					t.Fatal(err)
				}
				if got, want := resumed.Model().Hash(), cpu.Model().Hash(); got != want {
					t.Errorf("device reducer %v: accelerators then CPU trained %s, the CPU alone %s", devReduce, got[:12], want[:12])
				}
				// The other way: the CPU's checkpoint resumed on accelerators.
				c3 := c
				c3.Accelerators = []Accelerator{newHostAccel(t, c), newHostAccel(t, c)}
				onAcc, err := New(c3)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := loadFile(onAcc, path, "id"); err != nil {
					t.Fatal(err)
				}
				if _, err := onAcc.RunEpoch(context.Background(), feed, nil); err != nil {
					t.Fatal(err)
				}
				if got, want := onAcc.Model().Hash(), cpu.Model().Hash(); got != want {
					t.Errorf("device reducer %v: resumed on accelerators, trained %s, the CPU alone %s", devReduce, got[:12], want[:12])
				}
				// And the second epoch on the accelerators too.
				if _, err := tr.RunEpoch(context.Background(), feed, nil); err != nil {
					t.Fatal(err)
				}
				if got, want := tr.Model().Hash(), cpu.Model().Hash(); got != want {
					t.Errorf("device reducer %v: accelerators trained %s, the CPU %s", devReduce, got[:12], want[:12])
				}
				if devReduce && red.calls != 3*feed.batches {
					t.Errorf("the device reducer ran %d times in %d steps", red.calls, 3*feed.batches)
				}
				ev, err := tr.Evaluate(context.Background(), &fakeFeed{shape: feed.shape, global: 16, replicas: 1, batches: 2, classes: 4})
				if err != nil {
					t.Fatal(err)
				}
				want, err := cpu.Evaluate(context.Background(), &fakeFeed{shape: feed.shape, global: 16, replicas: 1, batches: 2, classes: 4})
				if err != nil {
					t.Fatal(err)
				}
				if ev != want {
					t.Errorf("evaluation on the accelerator %+v, on the CPU %+v", ev, want)
				}
			}
		})
	}
}

// A device batch reaching a CPU replica is an error, not a crash.
func TestDeviceBatchOnCPU(t *testing.T) {
	feed := &fakeFeed{shape: []int{3, 8, 8}, global: 16, replicas: 1, batches: 1, classes: 4}
	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 8}, LR: 0.1, GlobalBatch: 16, BatchesPerEpoch: 1, Input: feed.shape, Classes: 4}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.RunEpoch(context.Background(), devFeed{feed}, nil)
	if !errors.Is(err, ErrHostBatch) {
		t.Fatalf("got %v, want ErrHostBatch", err)
	}
}

type devFeed struct{ *fakeFeed }

func (f devFeed) Epoch(ctx context.Context, e int) (EpochFeed, error) {
	x, err := f.fakeFeed.Epoch(ctx, e)
	return devEpoch{x}, err
}

type devEpoch struct{ EpochFeed }

func (x devEpoch) Next(r int) (Batch, error) {
	b, err := x.EpochFeed.Next(r)
	if err == nil {
		b.Dev, b.X = &DeviceTensor{Shape: b.X.Shape, Ptr: 1}, nil
	}
	return b, err
}
