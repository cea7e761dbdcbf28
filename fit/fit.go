package fit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/gpu"
)

// Epoch is one epoch of training as reported: the fields `pipe run
// --json` prints. In a job of several ranks they are the job's.
type Epoch struct {
	Epoch         int       `json:"epoch"`
	Steps         int       `json:"steps"`
	Images        int       `json:"images"`
	TrainLoss     float64   `json:"train_loss"`
	TrainAccuracy float64   `json:"train_accuracy"`
	TestLoss      *float64  `json:"test_loss,omitempty"`
	TestAccuracy  *float64  `json:"test_accuracy,omitempty"`
	LR            float64   `json:"lr"`
	ImagesPerSec  float64   `json:"images_per_sec"`
	StallPct      float64   `json:"stall_pct"`
	DeviceStall   []float64 `json:"device_stall_pct"`
	Seconds       float64   `json:"seconds"`
	// WallSeconds is the run's training time up to the end of this epoch,
	// across resumes.
	WallSeconds float64 `json:"wall_seconds"`
	// ParamsHash is the SHA-256 of the model's parameters and buffers after
	// the epoch (nn.Model.Hash): two runs that trained the same model
	// bit for bit show the same hashes.
	ParamsHash string `json:"params_hash"`
	// Auto reports workers=auto and depth=auto after the epoch, with its
	// decisions; absent where both are fixed.
	Auto *engine.AutoStats `json:"auto,omitempty"`
	// AllReduceSeconds is the time spent averaging gradients across the
	// replicas (and ranks) this epoch; RankWaitSeconds, in a job of several
	// ranks, the time rank 0 waited for the others at the steps' ends.
	AllReduceSeconds float64 `json:"allreduce_seconds"`
	RankWaitSeconds  float64 `json:"rank_wait_seconds,omitempty"`
}

// Options configures Run.
type Options struct {
	// Resume continues from the checkpoint in the out directory, at the
	// step it was written.
	Resume bool
	// OnStart sees the trainer once it is built (and resumed).
	OnStart func(*trainer.Trainer)
	// OnEpoch sees every epoch's figures as it ends; OnStep every step's
	// loss.
	OnEpoch func(Epoch)
	OnStep  func(trainer.StepStats)
}

// Step is a step's figures as out/steps.jsonl records them: the mean over
// the LogEvery steps up to this one.
type Step struct {
	Step         int64   `json:"step"`
	Epoch        int     `json:"epoch"`
	Loss         float64 `json:"loss"`
	Accuracy     float64 `json:"accuracy"`
	LR           float64 `json:"lr"`
	ImagesPerSec float64 `json:"images_per_sec"`
}

// Result is a finished (or stopped) run.
type Result struct {
	Trainer *trainer.Trainer
	// History holds every epoch, including those before a resume.
	History []Epoch
}

// Spec is a run: the trainer's configuration, where its batches come from
// and where its files go.
type Spec struct {
	// Config is the trainer's, complete: the model, the input and classes,
	// the replicas, the global batch, the epoch's steps, the job's Group.
	Config trainer.Config
	// GPUs are the CUDA ordinals the replicas run on, one each; none: the
	// replicas run on the CPU.
	GPUs []int
	// Feed gives the training batches; Eval, if not nil, the held-out
	// ones, evaluated every EvalEvery epochs and after the last.
	Feed      trainer.Feed
	Eval      trainer.Feed
	EvalEvery int
	// Out is the directory of checkpoint.gob, metrics.jsonl and (with
	// LogEvery > 0, every LogEvery-th step) steps.jsonl; "" for none.
	Out      string
	LogEvery int
	// Identity is what a checkpoint must match to be resumed (Identity).
	Identity string
	// Auto, if not nil, reports the pipeline's tuner after an epoch.
	Auto func(epoch int) *engine.AutoStats
	// Check, if not nil, is given the epochs the run will train,
	// [first, first+n), before the first step: its error stops the run
	// there (a streamed source's epoch orders, Engine.CheckOrders).
	Check func(first, n int) error
}

// Run trains the model s describes. After every epoch it writes the
// checkpoint (out/checkpoint.gob) and appends the epoch to
// out/metrics.jsonl; with Resume it first restores the checkpoint. In a
// job of several ranks every rank calls Run: the ranks train together,
// rank 0 alone writes the files, and every rank resumes from rank 0's
// checkpoint. Stopped mid-epoch (ctx cancelled), it keeps the steps done
// in the checkpoint, so a resume continues at the next one.
func Run(ctx context.Context, s Spec, o Options) (*Result, error) {
	cfg := s.Config
	closeGPUs, err := gpuReplicas(&cfg, s.GPUs)
	if err != nil {
		return nil, err
	}
	defer closeGPUs()
	tr, err := trainer.New(cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{Trainer: tr}
	// Every rank reads the checkpoint (through rank 0); rank 0 alone
	// writes it, the metrics and the steps.
	ckpt, metrics := "", ""
	if s.Out != "" {
		ckpt, metrics = filepath.Join(s.Out, "checkpoint.gob"), filepath.Join(s.Out, "metrics.jsonl")
	}
	writes := ckpt != "" && (cfg.Group == nil || cfg.Group.Rank() == 0)
	if o.Resume {
		if ckpt == "" {
			return nil, errors.New("pipe: --resume needs the train stage's out= directory, where the checkpoint is")
		}
		hist, err := loadCheckpoint(tr, ckpt, s.Identity)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(hist, &res.History); err != nil {
			return nil, fmt.Errorf("pipe: %s: the metrics history: %w", ckpt, err)
		}
	}
	if s.Check != nil && tr.Epoch < cfg.Epochs {
		if err := s.Check(tr.Epoch, cfg.Epochs-tr.Epoch); err != nil {
			return nil, err
		}
	}
	if o.OnStart != nil {
		o.OnStart(tr)
	}
	wall := 0.0
	if n := len(res.History); n > 0 {
		wall = res.History[n-1].WallSeconds
	}
	onStep := o.OnStep
	if s.LogEvery > 0 && writes {
		onStep = stepLogger(filepath.Join(s.Out, "steps.jsonl"), s.LogEvery, !o.Resume, o.OnStep)
	}
	every := max(s.EvalEvery, 1)
	for tr.Epoch < cfg.Epochs {
		start := time.Now()
		st, err := tr.RunEpoch(ctx, s.Feed, onStep)
		if err != nil {
			// Stopped mid-epoch (Ctrl-C, a cancelled context, here or on
			// another rank): keep the steps done, so --resume continues at
			// the next one.
			stopped := ctx.Err() != nil || errors.Is(err, context.Canceled)
			if writes && stopped && tr.InEpoch > 0 {
				hist, _ := json.Marshal(res.History)
				if serr := saveCheckpoint(tr, ckpt, s.Identity, hist); serr != nil {
					return res, errors.Join(err, serr)
				}
			}
			return res, err
		}
		ep := Epoch{Epoch: st.Epoch, Steps: st.Steps, Images: st.Images, TrainLoss: st.TrainLoss, TrainAccuracy: st.TrainAccuracy,
			LR: st.LR, ImagesPerSec: st.ImagesPerSec, StallPct: st.StallPct, DeviceStall: st.DeviceStall, Seconds: st.Seconds,
			ParamsHash: tr.Model().Hash(), AllReduceSeconds: st.ReduceSeconds, RankWaitSeconds: st.WaitSeconds}
		if s.Auto != nil {
			ep.Auto = s.Auto(st.Epoch)
		}
		if s.Eval != nil && ((st.Epoch+1)%every == 0 || tr.Epoch == cfg.Epochs) {
			ev, err := tr.Evaluate(ctx, s.Eval)
			if err != nil {
				return res, err
			}
			ep.TestLoss, ep.TestAccuracy = &ev.Loss, &ev.Accuracy
		}
		wall += time.Since(start).Seconds() + st.PriorSeconds
		ep.WallSeconds = wall
		res.History = append(res.History, ep)
		if writes {
			hist, _ := json.Marshal(res.History)
			if err := saveCheckpoint(tr, ckpt, s.Identity, hist); err != nil {
				return res, err
			}
			if err := appendJSONLine(metrics, ep, st.Epoch == 0 && !o.Resume); err != nil {
				return res, err
			}
		}
		if o.OnEpoch != nil {
			o.OnEpoch(ep)
		}
	}
	return res, nil
}

// Identity describes what a checkpoint must match: the source and the
// stages after it (the data, its augmentation and batching) and the model;
// the checkpoint stores it, so the source's URLs are in it redacted
// (source.RedactURLs).
// Where the global batches go is left out (the pipeline stage's ranks, the
// prefetch stage's devices), and the evaluation: a run stopped on 8 GPUs or
// ranks resumes on 4, reading the same global batches from the step it
// stopped at.
func Identity(src source.Info, after []pipefile.Stage, model trainer.Config) string {
	id := source.RedactURLs(src.Identity)
	for _, s := range after {
		if s.Name() != "eval" && s.Name() != "pipeline" && s.Name() != "train" && s.Name() != "prefetch" {
			id += " | " + s.String()
		}
	}
	m := model.Model
	return id + fmt.Sprintf(" | model %s depth=%d width=%d seed=%d", m.Name, m.Depth, m.Width, model.Seed)
}

// gpuReplicas puts the replicas on the GPUs, one each; a no-op without
// GPUs. It returns what frees them.
func gpuReplicas(cfg *trainer.Config, gpus []int) (func() error, error) {
	none := func() error { return nil }
	if len(gpus) == 0 {
		return none, nil
	}
	arch, err := cfg.Model.Build(cfg.Input, cfg.Classes, cfg.Seed)
	if err != nil {
		return none, err
	}
	var rs []*gpu.Replica
	red := &gpu.PeerReducer{}
	closeAll := func() error {
		var errs []error
		if len(rs) > 0 {
			errs = append(errs, red.Close(rs[0]))
		}
		for _, r := range rs {
			errs = append(errs, r.Close())
		}
		return errors.Join(errs...)
	}
	for _, ord := range gpus {
		r, err := gpu.New(ord, arch)
		if err != nil {
			closeAll()
			return none, err
		}
		rs = append(rs, r)
		cfg.Accelerators = append(cfg.Accelerators, r)
	}
	cfg.DeviceReducer = red
	return closeAll, nil
}

// stepLogger appends a Step to path every every steps, then calls next.
func stepLogger(path string, every int, truncate bool, next func(trainer.StepStats)) func(trainer.StepStats) {
	var loss float64
	var correct, images int
	last := time.Now()
	return func(s trainer.StepStats) {
		loss += s.Loss * float64(s.Images)
		correct += s.Correct
		images += s.Images
		if s.Step%int64(every) == 0 && images > 0 {
			rec := Step{Step: s.Step, Epoch: s.Epoch, Loss: loss / float64(images), Accuracy: float64(correct) / float64(images),
				LR: s.LR, ImagesPerSec: float64(images) / time.Since(last).Seconds()}
			appendJSONLine(path, rec, truncate)
			truncate = false
			loss, correct, images, last = 0, 0, 0, time.Now()
		}
		if next != nil {
			next(s)
		}
	}
}

func appendJSONLine(path string, v any, truncate bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if truncate {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
