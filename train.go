package pipe

// Training: Fit over the pipeline's batches (package fit runs it).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
	"unsafe"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/fit"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/nn"
)

// Fit trains the model of the pipeline's train stage (package fit): after
// every epoch it writes the checkpoint (out/checkpoint.gob) and appends the
// epoch to out/metrics.jsonl; with Resume it first restores the
// checkpoint. In a job of several ranks (WithGroup) every rank calls Fit:
// the ranks train together, rank 0 alone writes the files, and every rank
// resumes from rank 0's checkpoint. An error on one rank leaves the others
// waiting in their next collective call, so a program stops the whole job
// on an error (as pipe does, through MPI_Abort), unless it is a
// trainer.RankError: the failing rank is stopping it.
func (p *Pipeline) Fit(ctx context.Context, o TrainOptions) (*TrainResult, error) {
	c := p.cfg.Train
	if c == nil {
		return nil, errors.New("pipe: the pipeline has no train stage")
	}
	if p.group == nil && p.at.world > 1 {
		return nil, fmt.Errorf("%w: world=%d: this process was started alone, and would train a model of its own on 1/%d of the data; start the %d ranks together with an MPI launcher (mpirun -np %d pipe run, built with -tags mpi)",
			ErrConfig, p.at.world, p.at.world, p.at.world, p.at.world)
	}
	cfg := p.trainConfig()
	s := fit.Spec{Config: cfg, Feed: &trainFeed{p: p}, Out: c.Out, LogEvery: c.LogEvery,
		Identity: fit.Identity(p.cfg.Source.Info(), p.stages[1:], cfg), Auto: p.eng.AutoStats,
		Check: func(first, n int) error { _, err := p.CheckOrders(first, n); return err }}
	if p.devs != nil {
		s.GPUs = p.devs.GPUs
	}
	if p.evalP != nil {
		s.Eval, s.EvalEvery = &trainFeed{p: p.evalP}, p.cfg.Eval.Every
	}
	return fit.Run(ctx, s, o)
}

// trainFeed hands the pipeline's batches to the trainer: each device's
// slices to its replica, or the host batches to a single replica.
type trainFeed struct{ p *Pipeline }

func (f *trainFeed) Epoch(ctx context.Context, e int) (trainer.EpochFeed, error) {
	return f.EpochFrom(ctx, e, 0)
}

// EpochFrom starts epoch e at global batch first (a resumed epoch), without
// making the batches before it: on any number of ranks and devices, the
// rank's batch first is its slice of global batch first.
func (f *trainFeed) EpochFrom(ctx context.Context, e, first int) (trainer.EpochFeed, error) {
	if f.p.devs != nil {
		x, err := f.p.eng.DeviceEpochFrom(ctx, e, first)
		if err != nil {
			return nil, err
		}
		return &deviceFeed{p: f.p, x: x}, nil
	}
	x, err := f.p.EpochFrom(ctx, e, first)
	if err != nil {
		return nil, err
	}
	return &hostFeed{p: f.p, x: x}, nil
}

// batchTensor views NCHW float32 batch bytes as a tensor, without copying.
func batchTensor(p *Pipeline, data []byte, n int) *nn.Tensor {
	s := p.out.Shape
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/4)
	return &nn.Tensor{Shape: []int{n, s.C, s.H, s.W}, Data: f[:n*s.Len()]}
}

type deviceFeed struct {
	p *Pipeline
	x *DeviceEpoch
}

func (f *deviceFeed) Next(r int) (trainer.Batch, error) {
	db, err := f.x.Next(r)
	if err != nil {
		return trainer.Batch{}, err
	}
	if data := db.Data(); data != nil {
		return trainer.Batch{X: batchTensor(f.p, data, db.N), Labels: db.Labels, Targets: db.Targets, Samples: db.Samples, Release: db.Release}, nil
	}
	// A GPU's slice: the replica on that GPU reads it where it is.
	ptr, ok := prefetch.DevicePointer(db.Buffer)
	if !ok {
		db.Release()
		return trainer.Batch{}, fmt.Errorf("pipe: %s: a batch in memory the trainer cannot address", db.Name)
	}
	s := f.p.out.Shape
	dev := &trainer.DeviceTensor{Shape: []int{db.N, s.C, s.H, s.W}, Ptr: ptr}
	return trainer.Batch{Dev: dev, Labels: db.Labels, Targets: db.Targets, Samples: db.Samples, Release: db.Release}, nil
}

func (f *deviceFeed) Stall(r int) time.Duration { return f.x.Stall(r) }

func (f *deviceFeed) Close() error { return f.x.Close() }

type hostFeed struct {
	p *Pipeline
	x *Epoch
}

func (f *hostFeed) Next(r int) (trainer.Batch, error) {
	if r != 0 {
		return trainer.Batch{}, fmt.Errorf("pipe: replica %d of a pipeline without devices", r)
	}
	b, err := f.x.Next()
	if errors.Is(err, io.EOF) {
		return trainer.Batch{}, io.EOF
	}
	if err != nil {
		return trainer.Batch{}, err
	}
	tb := trainer.Batch{X: batchTensor(f.p, b.Data, b.N), Labels: b.Labels, Samples: b.Samples, Release: b.Release}
	if v, ok := b.Field(fields.Targets); ok {
		tb.Targets, _ = v.Float32()
	}
	return tb, nil
}

func (f *hostFeed) Stall(int) time.Duration {
	return time.Duration(f.x.Stats().StallSeconds * float64(time.Second))
}

func (f *hostFeed) Close() error { return f.x.Close() }
