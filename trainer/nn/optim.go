package nn

import (
	"fmt"
	"math"
)

// OptimConfig chooses and configures the optimiser. Zero values take the
// defaults given per field.
type OptimConfig struct {
	// Name is sgd, adam or rmsprop. Default sgd.
	Name string
	// Momentum for sgd and rmsprop (default 0.9 for sgd, 0 for rmsprop);
	// Nesterov uses Nesterov momentum (sgd).
	Momentum float64
	Nesterov bool
	// WeightDecay is an L2 penalty added to the gradients of weights
	// (not of biases or batch-norm parameters), as PyTorch's weight_decay.
	WeightDecay float64
	// Beta1, Beta2 for adam (defaults 0.9, 0.999); Alpha is rmsprop's decay
	// of the squared-gradient average (default 0.9, as Keras). Eps guards
	// the division (default 1e-8 for adam, 1e-7 for rmsprop).
	Beta1, Beta2, Alpha, Eps float64
}

// Optimizers lists the optimiser names.
var Optimizers = []string{"sgd", "adam", "rmsprop"}

func (c *OptimConfig) defaults() error {
	if c.Name == "" {
		c.Name = "sgd"
	}
	switch c.Name {
	case "sgd":
	case "adam":
		if c.Beta1 == 0 {
			c.Beta1 = 0.9
		}
		if c.Beta2 == 0 {
			c.Beta2 = 0.999
		}
		if c.Eps == 0 {
			c.Eps = 1e-8
		}
	case "rmsprop":
		if c.Alpha == 0 {
			c.Alpha = 0.9
		}
		if c.Eps == 0 {
			c.Eps = 1e-7
		}
	default:
		return fmt.Errorf("trainer: unknown optimizer %q (want sgd, adam or rmsprop)", c.Name)
	}
	if c.Momentum < 0 || c.Momentum >= 1 || c.WeightDecay < 0 {
		return fmt.Errorf("trainer: momentum=%g weight_decay=%g: want 0 ≤ momentum < 1 and weight_decay ≥ 0", c.Momentum, c.WeightDecay)
	}
	if c.Nesterov && (c.Name != "sgd" || c.Momentum == 0) {
		return fmt.Errorf("trainer: nesterov needs sgd with momentum > 0")
	}
	return nil
}

// Optimizer updates parameters from their gradients. Its state (momentum
// buffers, moment estimates) is per parameter, in the model's order.
type Optimizer struct {
	cfg   OptimConfig
	t     int64       // steps taken
	state [][]float32 // per parameter: momentum or first moment
	sq    [][]float32 // per parameter: second moment (adam, rmsprop)
}

// NewOptimizer returns an optimiser for params (buffers are skipped).
func NewOptimizer(c OptimConfig, params []*Param) (*Optimizer, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	o := &Optimizer{cfg: c}
	for _, p := range params {
		var s, q []float32
		if !p.Buffer {
			s = make([]float32, len(p.W))
			if c.Name != "sgd" {
				q = make([]float32, len(p.W))
			}
		}
		o.state, o.sq = append(o.state, s), append(o.sq, q)
	}
	return o, nil
}

// Step applies one update with learning rate lr.
func (o *Optimizer) Step(params []*Param, lr float64) {
	o.t++
	c := o.cfg
	for i, p := range params {
		if p.Buffer {
			continue
		}
		wd := float32(0)
		if p.Decay {
			wd = float32(c.WeightDecay)
		}
		s, q := o.state[i], o.sq[i]
		switch c.Name {
		case "sgd":
			m, lrf := float32(c.Momentum), float32(lr)
			for j, g := range p.G {
				d := g + wd*p.W[j]
				if m != 0 {
					s[j] = m*s[j] + d
					if c.Nesterov {
						d += m * s[j]
					} else {
						d = s[j]
					}
				}
				p.W[j] -= lrf * d
			}
		case "adam":
			b1, b2 := float32(c.Beta1), float32(c.Beta2)
			c1 := 1 - math.Pow(c.Beta1, float64(o.t))
			c2 := 1 - math.Pow(c.Beta2, float64(o.t))
			step := float32(lr / c1)
			sc2 := float32(math.Sqrt(c2))
			eps := float32(c.Eps)
			for j, g := range p.G {
				d := g + wd*p.W[j]
				s[j] = b1*s[j] + (1-b1)*d
				q[j] = b2*q[j] + (1-b2)*d*d
				p.W[j] -= step * s[j] / (float32(math.Sqrt(float64(q[j])))/sc2 + eps)
			}
		case "rmsprop":
			a, m, lrf, eps := float32(c.Alpha), float32(c.Momentum), float32(lr), float32(c.Eps)
			for j, g := range p.G {
				d := g + wd*p.W[j]
				q[j] = a*q[j] + (1-a)*d*d
				u := d / (float32(math.Sqrt(float64(q[j]))) + eps)
				if m != 0 {
					s[j] = m*s[j] + u
					u = s[j]
				}
				p.W[j] -= lrf * u
			}
		}
	}
}

// ScheduleConfig shapes the learning rate over a run, per step.
type ScheduleConfig struct {
	// Kind is constant, step, cosine or onecycle. Default constant.
	Kind string
	// WarmupSteps ramps the rate linearly from Peak/WarmupSteps up to Peak
	// (for onecycle: from Peak/25, over at least 30% of the run).
	WarmupSteps int
	// TotalSteps is the run's length, for cosine and onecycle.
	TotalSteps int
	// StepEvery and Gamma: step multiplies the rate by Gamma every
	// StepEvery steps after warm-up (default Gamma 0.1).
	StepEvery int
	Gamma     float64
}

// Schedules lists the schedule kinds.
var Schedules = []string{"constant", "step", "cosine", "onecycle"}

// Check validates s and fills in its defaults (the constant schedule;
// gamma 0.1 for step).
func (s *ScheduleConfig) Check() error {
	switch s.Kind {
	case "":
		s.Kind = "constant"
	case "constant", "cosine", "onecycle":
	case "step":
		if s.StepEvery < 1 {
			return fmt.Errorf("trainer: schedule=step needs step_every ≥ 1 epoch")
		}
		if s.Gamma == 0 {
			s.Gamma = 0.1
		}
	default:
		return fmt.Errorf("trainer: unknown schedule %q (want constant, step, cosine or onecycle)", s.Kind)
	}
	return nil
}

// At returns the learning rate at step t (from 0) for peak rate peak.
func (s ScheduleConfig) At(t int, peak float64) float64 {
	w, total := s.WarmupSteps, max(s.TotalSteps, 1)
	if s.Kind == "onecycle" {
		w = max(w, int(0.3*float64(total)))
		if t < w {
			lo := peak / 25
			return lo + (peak-lo)*float64(t)/float64(max(w, 1))
		}
		f := float64(t-w) / float64(max(total-w, 1))
		return peak/1e4 + (peak-peak/1e4)*0.5*(1+math.Cos(math.Pi*min(f, 1)))
	}
	if t < w {
		return peak * float64(t+1) / float64(w)
	}
	switch s.Kind {
	case "step":
		return peak * math.Pow(s.Gamma, float64((t-w)/s.StepEvery))
	case "cosine":
		f := float64(t-w) / float64(max(total-w, 1))
		return peak * 0.5 * (1 + math.Cos(math.Pi*min(f, 1)))
	}
	return peak
}

// ScaleLR scales a learning rate given for batch base to batch global:
// linear (Goyal et al.), sqrt, or none.
func ScaleLR(lr float64, rule string, base, global int) (float64, error) {
	if base < 1 {
		return 0, fmt.Errorf("trainer: base_batch=%d: must be at least 1", base)
	}
	switch rule {
	case "linear", "":
		return lr * float64(global) / float64(base), nil
	case "sqrt":
		return lr * math.Sqrt(float64(global)/float64(base)), nil
	case "none":
		return lr, nil
	}
	return 0, fmt.Errorf("trainer: scale_lr=%s: want linear, sqrt or none", rule)
}

// Config returns the optimiser's configuration, its defaults filled in.
func (o *Optimizer) Config() OptimConfig { return o.cfg }

// Steps is the number of updates taken (Adam's bias correction counts them).
func (o *Optimizer) Steps() int64 { return o.t }

// SetSteps sets the number of updates taken.
func (o *Optimizer) SetSteps(t int64) { o.t = t }

// State returns parameter i's optimiser state, the slices themselves: the
// momentum or first moment, and the second moment (nil for sgd; both nil
// for a buffer).
func (o *Optimizer) State(i int) (first, second []float32) { return o.state[i], o.sq[i] }
