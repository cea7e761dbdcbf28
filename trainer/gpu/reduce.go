//go:build cuda || cudaemu

package gpu

import (
	"fmt"

	"github.com/pipefeed/pipe/internal/cuda"
	"github.com/pipefeed/pipe/trainer"
)

// PeerReducer averages GPU replicas' gradients in device memory: replica
// 0's GPU gathers every replica's float64 sums by peer copies (the driver
// stages them through the host where the GPUs cannot reach each other), adds
// them in replica order with one kernel, scales by 1/replicas, and copies
// the mean back to the others: LocalAllReduce's arithmetic, without the
// host. It is a trainer.DeviceReducer.
type PeerReducer struct {
	stage dbuf // on replica 0: every replica's sums, end to end
}

// ReduceGradients averages the gradients of accs, which must be Replicas
// of the same model.
func (p *PeerReducer) ReduceGradients(accs []trainer.Accelerator) error {
	if len(accs) < 2 {
		return nil
	}
	rs := make([]*Replica, len(accs))
	for i, a := range accs {
		r, ok := a.(*Replica)
		if !ok {
			return fmt.Errorf("gpu: PeerReducer: replica %d is a %T, not a GPU replica", i, a)
		}
		if rs[i] = r; r.nw != rs[0].nw {
			return fmt.Errorf("gpu: PeerReducer: %s has %d values, %s %d", r.name, r.nw, rs[0].name, rs[0].nw)
		}
	}
	r0, n := rs[0], int64(rs[0].nw)
	bytes := 8 * n
	return r0.do(func() error {
		stage := r0.ensure(&p.stage, bytes*int64(len(rs)))
		for i, r := range rs {
			// Each replica's stream finished its step (ForwardBackward
			// waits for the loss, after the backward pass).
			dst := stage + cuda.DevicePtr(int64(i)*bytes)
			if r.ordinal == r0.ordinal {
				r0.fail("copying gradients", cuda.CopyDtoDAsync(dst, r.g64, bytes, r0.stream))
				continue
			}
			r0.fail("copying gradients from "+r.name, cuda.CopyPeerAsync(dst, r0.ctx, r.g64, r.ctx, bytes, r0.stream))
		}
		r0.launch("mean_ordered", n, r0.g64, stage, len(rs), n, 1/float64(len(rs)))
		for _, r := range rs[1:] {
			if r.ordinal == r0.ordinal {
				r0.fail("copying gradients", cuda.CopyDtoDAsync(r.g64, r0.g64, bytes, r0.stream))
				continue
			}
			r0.fail("copying gradients to "+r.name, cuda.CopyPeerAsync(r.g64, r.ctx, r0.g64, r0.ctx, bytes, r0.stream))
		}
		r0.fail("waiting for the all-reduce", r0.stream.Synchronize())
		return nil
	})
}

// Close frees the reducer's staging memory on r, replica 0.
func (p *PeerReducer) Close(r *Replica) error {
	if p.stage.ptr == 0 {
		return nil
	}
	return r.do(func() error {
		r.fail("freeing device memory", cuda.MemFree(p.stage.ptr))
		p.stage = dbuf{}
		return nil
	})
}

var _ trainer.DeviceReducer = (*PeerReducer)(nil)
