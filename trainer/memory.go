package trainer

import (
	"fmt"
	"math/bits"

	"github.com/pipefeed/pipe/internal/sysmem"
)

// ModelBytes is the host memory, in bytes, that training cfg's model takes
// for its values alone: on each of cfg.Replicas replicas, every trained
// value with its float32 and float64 gradients and the optimiser's state
// (one value for sgd, two for adam and rmsprop), and every buffer.
// Activations come on top and grow with the batch. It also returns the
// model's trained values.
func ModelBytes(cfg Config) (bytes uint64, params int, err error) {
	params, buffers, err := cfg.Model.Values(cfg.Input, cfg.Classes)
	if err != nil {
		return 0, 0, err
	}
	cfg = cfg.WithDefaults()
	per := uint64(4 + 4 + 8 + 4) // W, G, G64, the first state
	if cfg.Optim.Name != "sgd" {
		per += 4
	}
	hi, one := bits.Mul64(uint64(params), per)
	one += 4 * uint64(buffers)
	hi2, all := bits.Mul64(one, uint64(max(cfg.Replicas, 1)))
	if hi != 0 || hi2 != 0 {
		all = ^uint64(0)
	}
	return all, params, nil
}

// CheckModel refuses cfg's model, before any of it is allocated, where its
// values (ModelBytes) would not fit in the memory this process may use,
// with the figures: a class count or a width that sizes a model beyond the
// machine is an error, not a process killed for memory.
func CheckModel(cfg Config) error {
	need, params, err := ModelBytes(cfg)
	if err != nil {
		return err
	}
	have, _ := sysmem.Limit()
	if have == 0 || need <= have {
		return nil
	}
	cfg = cfg.WithDefaults()
	return fmt.Errorf("trainer: model %s for %d classes of %v inputs has %d parameters: %d replica(s) need %.1f GB for them, their gradients and %s's state, and %s (fewer classes, a narrower model or fewer replicas)",
		cfg.Model, cfg.Classes, cfg.Input, params, max(cfg.Replicas, 1), float64(need)/1e9, cfg.Optim.Name, sysmem.Describe())
}
