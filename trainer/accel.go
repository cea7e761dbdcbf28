package trainer

import (
	"errors"
	"fmt"

	"github.com/pipefeed/pipe/trainer/nn"
)

// Accelerator runs one replica on a device other than the host CPU: the
// model's forward and backward passes, its gradients and the optimiser's
// update, all in the device's memory (package trainer/gpu makes one per
// GPU). The replica's host Model and Optimizer stay the model of record:
// Load copies them into the device, Store copies them back, and the trainer
// stores before anything reads them (a checkpoint, Model, Hash) and loads
// after anything writes them (a resume, a parameter average), so a
// checkpoint is one model in one format whatever trained it.
//
// Gradients are float64 sums per trained value, as Param.G64 holds them on
// the CPU: Gradients copies them to the host for the AllReducer (or a
// DeviceReducer averages them where they are) and SetGradients copies the
// average back, before Update rounds them and steps the optimiser.
type Accelerator interface {
	// Name is the device's name: "cuda:0".
	Name() string
	// Load copies m's parameters and buffers and o's state into the device.
	Load(m *nn.Model, o *nn.Optimizer) error
	// Store copies them from the device into m and o.
	Store(m *nn.Model, o *nn.Optimizer) error
	// ForwardBackward trains on b: the gradients of b's mean loss replace
	// the device's, and it returns the loss summed over b's samples (each
	// sample's in fixed point, nn.LossOf) and the correct top-1 predictions.
	ForwardBackward(c *nn.Context, b Batch) (lossSum nn.LossSum, correct int, err error)
	// Gradients returns the gradient sums, every trained value of the model
	// in its order, in host memory owned by the accelerator.
	Gradients() ([]float64, error)
	// SetGradients replaces the device's gradient sums with g.
	SetGradients(g []float64) error
	// Update rounds the gradients to float32 and applies the optimiser
	// with learning rate lr.
	Update(lr float64) error
	// Evaluate runs b in inference mode and returns its unsmoothed loss
	// summed over the samples and the correct top-1 predictions.
	Evaluate(b Batch) (lossSum float64, correct int, err error)
	Close() error
}

// DeviceReducer averages the accelerators' gradients where they are (peer
// copies between GPUs, NCCL), with AllReducer's contract: each value's sum
// runs over the replicas in order. The trainer uses it when the job is this
// process alone; across processes the gradients go through the host and the
// Group's AllReducer.
type DeviceReducer interface {
	ReduceGradients(accs []Accelerator) error
}

// DeviceTensor is a batch in an accelerator's memory: float32 values of
// Shape, NCHW, at device address Ptr.
type DeviceTensor struct {
	Shape []int
	Ptr   uintptr
}

// N is the number of samples of the batch.
func (b Batch) N() int {
	if b.X != nil {
		return b.X.N()
	}
	if b.Dev != nil {
		return b.Dev.Shape[0]
	}
	return 0
}

// ErrHostBatch is returned for a device batch given to a CPU replica.
var ErrHostBatch = errors.New("trainer: a batch in device memory reached a replica on the CPU")

// accelerate binds the accelerators to the replicas and loads the model
// into them.
func (t *Trainer) accelerate(accs []Accelerator) error {
	if len(accs) != len(t.replicas) {
		return fmt.Errorf("trainer: %d accelerators for %d replicas", len(accs), len(t.replicas))
	}
	for i, rep := range t.replicas {
		if accs[i] == nil {
			return fmt.Errorf("trainer: replica %d has no accelerator (every replica needs one, or none does)", i)
		}
		rep.acc = accs[i]
	}
	return t.load()
}

// load copies every replica's host model and optimiser into its
// accelerator.
func (t *Trainer) load() error {
	for _, rep := range t.replicas {
		if rep.acc == nil {
			continue
		}
		if err := rep.acc.Load(rep.model, rep.opt); err != nil {
			return fmt.Errorf("trainer: %s: loading the model: %w", rep.acc.Name(), err)
		}
	}
	return nil
}

// store copies every accelerator's model and optimiser state back into its
// replica's host copies.
func (t *Trainer) store() error {
	for _, rep := range t.replicas {
		if rep.acc == nil {
			continue
		}
		if err := rep.acc.Store(rep.model, rep.opt); err != nil {
			return fmt.Errorf("trainer: %s: reading the model back: %w", rep.acc.Name(), err)
		}
	}
	return nil
}

// reduceDeviceGrads averages the accelerators' gradients: on the devices
// when a DeviceReducer is set and the job is this process, through the host
// and the AllReducer otherwise.
func (t *Trainer) reduceDeviceGrads() error {
	accs := make([]Accelerator, len(t.replicas))
	for i, rep := range t.replicas {
		accs[i] = rep.acc
	}
	if t.cfg.DeviceReducer != nil && t.ranks == 1 {
		return t.cfg.DeviceReducer.ReduceGradients(accs)
	}
	bufs := make([][]float64, len(accs))
	for i, a := range accs {
		g, err := a.Gradients()
		if err != nil {
			return fmt.Errorf("trainer: %s: %w", a.Name(), err)
		}
		bufs[i] = g
	}
	if err := t.cfg.Reducer.AllReduce64(bufs); err != nil {
		return err
	}
	for i, a := range accs {
		if err := a.SetGradients(bufs[i]); err != nil {
			return fmt.Errorf("trainer: %s: %w", a.Name(), err)
		}
	}
	return nil
}

// Devices names where each replica runs: an accelerator's name, or "cpu".
func (t *Trainer) Devices() []string {
	var names []string
	for _, rep := range t.replicas {
		if rep.acc != nil {
			names = append(names, rep.acc.Name())
		} else {
			names = append(names, "cpu")
		}
	}
	return names
}
