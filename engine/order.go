package engine

import (
	"errors"

	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
)

// MaxCheckedEpochs bounds the epochs CheckOrders simulates ahead: an
// epoch's order costs about as much to simulate as to plan (an ImageNet
// epoch, 50-90 ms), and a run of more epochs has each later one checked as
// it starts. maxFailing bounds the failing epochs it looks for before it
// refuses: finding what passes costs a dozen simulations of each.
const (
	MaxCheckedEpochs = 100
	maxFailing       = 4
)

// CheckOrders checks, before any of them runs, that a source streaming its
// shards through a shard cache smaller than them (source.OrderChecker) can
// read epochs [first, first+n) in their order, at most MaxCheckedEpochs of
// them: the first epoch that cannot would otherwise be refused only as it
// starts, hours into a run. It returns how many epochs it checked: 0 where
// nothing streams in a planned order (the source holds its shards, or an
// augmentation cache orders the reads). The refusal is a
// *source.OrderError naming the first epoch that fails, with a cache_size
// and a shorter shuffle buffer that pass each failing epoch found (up to
// maxFailing of them, where the check stops).
func (e *Engine) CheckOrders(first, n int) (checked int, err error) {
	s := &e.s
	oc, ok := s.Source.(source.OrderChecker)
	if !ok || s.Cache != nil || n <= 0 {
		return 0, nil
	}
	n = min(n, MaxCheckedEpochs)
	streams := false
	var bad *source.OrderError
	var failing []int
	for k := first; k < first+n && len(failing) < maxFailing; k++ {
		checked++
		err := oc.CheckOrder(func() []int { streams = true; return e.order(s.Plan, k) })
		var oe *source.OrderError
		switch {
		case !errors.As(err, &oe):
			if err != nil {
				return 0, err
			}
		case bad == nil:
			bad, oe.Epoch = oe, k
			failing = append(failing, k)
		default:
			bad.PassHold, bad.PassSize = max(bad.PassHold, oe.PassHold), max(bad.PassSize, oe.PassSize)
			failing = append(failing, k)
		}
		if !streams {
			return 0, nil
		}
	}
	if bad == nil {
		return checked, nil
	}
	bad.Failing, bad.Checked = len(failing), checked
	e.explain(bad, oc, failing)
	return checked, bad
}

// orderError completes the refusal of epoch n's order by the source's
// ReadAhead (a *source.OrderError) with the epoch and the buffer; other
// errors it returns as they are.
func (e *Engine) orderError(err error, n int) error {
	var oe *source.OrderError
	if oc, ok := e.s.Source.(source.OrderChecker); ok && errors.As(err, &oe) {
		oe.Epoch = n
		e.explain(oe, oc, []int{n})
	}
	return err
}

// explain sets the refusal's shuffle buffer and the longest shorter one
// with which the epochs pass, found by halving (a shorter buffer keeps
// fewer shards in use, so the epochs that passed pass with it too).
func (e *Engine) explain(oe *source.OrderError, oc source.OrderChecker, epochs []int) {
	oe.Buffer = e.s.Plan.Buffer()
	passes := func(b int) bool {
		p, err := e.planWithBuffer(b)
		if err != nil {
			return false
		}
		for _, k := range epochs {
			if oc.CheckOrder(func() []int { return e.order(p, k) }) != nil {
				return false
			}
		}
		return true
	}
	if oe.Buffer < 2 || !passes(1) {
		return
	}
	lo, hi := 1, oe.Buffer // lo passes, hi fails
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; passes(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	oe.PassBuffer = lo
}

// planWithBuffer is the engine's plan with a shuffle buffer of b samples.
func (e *Engine) planWithBuffer(b int) (*sharding.Plan, error) {
	p := e.s.Plan
	shards := []int{e.s.Source.Len()}
	if s, ok := e.s.Source.(source.Sharded); ok {
		shards = s.Shards()
	}
	opts := []sharding.Option{sharding.WithShuffleBuffer(p.Seed(), shards, b), sharding.WithRank(p.Rank(), p.World())}
	switch {
	case p.Elastic() > 0:
		opts = append(opts, sharding.WithElastic(p.Elastic()))
	case p.Slice() > 0:
		opts = append(opts, sharding.WithSlices(p.Slice()))
	}
	return sharding.New(e.s.Source.Len(), opts...)
}

// order is the samples epoch n of plan p reads, in order, from its first
// batch.
func (e *Engine) order(p *sharding.Plan, n int) []int {
	o := make([]int, min(e.Batches()*e.s.Batch, p.Len()))
	p.Fill(n, 0, o)
	return o
}
