package pipefile

// Training and evaluation: the train and eval stages.

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
	"github.com/pipefeed/pipe/trainer/nn"
)

const (
	defaultEvalSplit = "test"
	defaultEvalEvery = 1
	defaultEvalBatch = 500
)

// TrainConfig is the train stage: the trainer's configuration, of which the
// pipeline fills in what it decides (input shape, classes, replicas, global
// batch, batches per epoch, seed; Threads 0 means every core), and where
// the run's files go. Start from DefaultTrain: its values are the .pipe
// file's defaults.
type TrainConfig struct {
	trainer.Config
	// Out is the directory for the checkpoint, the metrics and the plots
	// ("" for none).
	Out string
	// LogEvery writes every LogEvery-th step's figures to out/steps.jsonl
	// (0: none).
	LogEvery int
}

// DefaultTrain is the train stage of model with every parameter at its
// default, as the .pipe line "train MODEL" gives it.
func DefaultTrain(model string) TrainConfig {
	return TrainConfig{Config: trainer.Config{
		Model:  nn.ModelSpec{Name: model, Depth: 20},
		Epochs: 10, Optim: nn.OptimConfig{Momentum: 0.9},
		LR: 0.1, Gamma: 0.1,
	}.WithDefaults(), Out: "runs/train"}
}

// Train makes the pipeline train a model on its batches (the .pipe stage
// "train"). It comes after batch and to_tensor (NCHW float32), and after
// prefetch if there is one: each device feeds one replica.
func Train(t TrainConfig) Stage {
	return Stage{name: "train", line: trainLine(t), apply: func(c *Compiled) error {
		if !c.afterBatch {
			return errors.New("train takes batches: it comes after batch, to_tensor and prefetch")
		}
		if t.Epochs < 1 {
			return fmt.Errorf("epochs=%d: must be at least 1", t.Epochs)
		}
		if err := t.checkBounds(); err != nil {
			return err
		}
		c.Train = &t
		return nil
	}}
}

// checkBounds checks t's sizes against the registry's bounds (the Go API
// has no parser to do it).
func (t TrainConfig) checkBounds() error {
	return errors.Join(checkMax("epochs", t.Epochs, epochsBound), checkMax("steps_per_epoch", t.StepsPerEpoch, stepsBound),
		checkMax("depth", t.Model.Depth, resnetBound), checkMax("width", t.Model.Width, widthBound),
		checkMax("base_batch", t.BaseBatch, batchBound), checkMax("step_every", t.StepEvery, epochsBound),
		checkMax("average_every", t.AverageEvery, stepsBound), checkMax("threads", t.Threads, threadsBound),
		checkMax("log_every", t.LogEvery, stepsBound))
}

// trainLine is t's canonical line: every parameter of the train spec, the
// unset ones at the trainer's defaults.
func trainLine(t TrainConfig) string {
	c := t.Config.WithDefaults()
	m, o := c.Model, c.Optim
	return canonical("train", "model", m.Name, "depth", m.Depth, "width", m.Width, "epochs", t.Epochs, "steps_per_epoch", c.StepsPerEpoch,
		"optimizer", o.Name, "lr", c.LR, "base_batch", t.BaseBatch, "scale_lr", c.ScaleLR, "momentum", o.Momentum, "nesterov", o.Nesterov,
		"weight_decay", o.WeightDecay, "schedule", c.Schedule, "warmup", c.WarmupEpochs, "step_every", c.StepEvery, "gamma", c.Gamma,
		"label_smoothing", c.Smoothing, "mode", c.Mode, "average_every", c.AverageEvery, "threads", t.Threads, "out", t.Out, "log_every", t.LogEvery)
}

// EvalConfig is the eval stage: a held-out source, evaluated every Every
// epochs (default 1) in batches of Batch (default 500).
type EvalConfig struct {
	Source source.Source
	// Split names the held-out split, for the stage's line. Default "test".
	Split string
	Every int
	Batch int
}

// Eval evaluates the trained model on a held-out source (the .pipe stage
// "eval"); it needs a train stage.
func Eval(e EvalConfig) Stage {
	s := evalStage(e)
	s.src = e.Source
	return s
}

func evalStage(e EvalConfig) Stage {
	if e.Split == "" {
		e.Split = defaultEvalSplit
	}
	if e.Every == 0 {
		e.Every = defaultEvalEvery
	}
	if e.Batch == 0 {
		e.Batch = defaultEvalBatch
	}
	line := canonical("eval", "split", e.Split, "every", e.Every, "batch", e.Batch)
	return Stage{name: "eval", line: line, apply: func(c *Compiled) error {
		if e.Every < 1 || e.Batch < 1 {
			return fmt.Errorf("every=%d batch=%d: both must be at least 1", e.Every, e.Batch)
		}
		if err := errors.Join(checkMax("every", e.Every, epochsBound), checkMax("batch", e.Batch, batchBound)); err != nil {
			return err
		}
		cfg := e
		c.Eval = &cfg
		return nil
	}}
}

// dt is the train stage's defaults, for the registry's parameter docs: the
// other config-struct stages' defaults are constants (defaultDepth, …,
// cache.DefaultEpochs, cache.DefaultMemory).
var dt = DefaultTrain("")

// trainSpecs are the training and evaluation stages.
var trainSpecs = []*StageSpec{
	{Name: "train", Kind: "stage", Summary: "train a model on the batches, one replica per device (data parallel); comes last, before eval",
		Params: []Param{
			{Name: "model", Type: Enum, Enum: nn.Models, Required: true, Positional: true, Doc: "mlp, keras_cnn (Keras' cifar10_cnn.py) or resnet (CIFAR ResNet, He et al.)"},
			Param{Name: "depth", Type: Int, Default: itoa(dt.Model.Depth), Min: bound(8), Doc: "resnet depth, 6n+2: 8, 14, 20, 32, 44, 56, 110"}.with(resnetBound),
			Param{Name: "width", Type: Int, Default: itoa(dt.Model.Width), Min: bound(0), Doc: "resnet's first-stage channels (0: 16) or mlp's hidden units (0: 512)"}.with(widthBound),
			Param{Name: "epochs", Type: Int, Default: itoa(dt.Epochs), Min: bound(1), Doc: "epochs to train"}.with(epochsBound),
			Param{Name: "steps_per_epoch", Type: Int, Default: itoa(dt.StepsPerEpoch), Min: bound(0), Doc: "cap on steps per epoch (0: the whole epoch), for quick runs"}.with(stepsBound),
			{Name: "optimizer", Type: Enum, Enum: nn.Optimizers, Default: dt.Optim.Name, Doc: "sgd, adam or rmsprop (PyTorch's update rules)"},
			{Name: "lr", Type: Float, Default: ftoa(dt.LR), Min: bound(0), Doc: "peak learning rate for base_batch, scaled to the global batch by scale_lr"},
			Param{Name: "base_batch", Type: Int, Default: itoa(dt.BaseBatch), Min: bound(1), Doc: "the batch size lr is given for"}.with(batchBound),
			{Name: "scale_lr", Type: Enum, Enum: []string{"linear", "sqrt", "none"}, Default: dt.ScaleLR, Doc: "how lr grows with the global batch (Goyal et al.: linear)"},
			{Name: "momentum", Type: Float, Default: ftoa(dt.Optim.Momentum), Min: bound(0), Max: bound(0.999), Doc: "sgd and rmsprop momentum"},
			{Name: "nesterov", Type: Bool, Default: strconv.FormatBool(dt.Optim.Nesterov), Doc: "Nesterov momentum (sgd)"},
			{Name: "weight_decay", Type: Float, Default: ftoa(dt.Optim.WeightDecay), Min: bound(0), Doc: "L2 penalty on weights (not biases or batch-norm parameters)"},
			{Name: "schedule", Type: Enum, Enum: nn.Schedules, Default: dt.Schedule, Doc: "learning-rate schedule after warm-up: constant, step, cosine or onecycle"},
			{Name: "warmup", Type: Float, Default: ftoa(dt.WarmupEpochs), Min: bound(0), Doc: "epochs of linear warm-up (gradual warm-up for large batches)"},
			Param{Name: "step_every", Type: Int, Default: itoa(dt.StepEvery), Min: bound(0), Doc: "schedule=step: epochs between decays"}.with(epochsBound),
			{Name: "gamma", Type: Float, Default: ftoa(dt.Gamma), Min: bound(0), Doc: "schedule=step: the decay factor"},
			{Name: "label_smoothing", Type: Float, Default: ftoa(dt.Smoothing), Min: bound(0), Max: bound(0.999), Doc: "ε of the smoothed one-hot target"},
			{Name: "mode", Type: Enum, Enum: trainer.Modes, Default: dt.Mode, Doc: "sync: average gradients every step; local: average parameters every average_every steps; mixture: once per epoch"},
			Param{Name: "average_every", Type: Int, Default: itoa(dt.AverageEvery), Min: bound(0), Doc: "mode=local: steps between parameter averages"}.with(stepsBound),
			Param{Name: "threads", Type: Int, Default: itoa(dt.Threads), Min: bound(0), Doc: "cores the replicas share (0: all)"}.with(threadsBound),
			{Name: "out", Type: String, Default: dt.Out, Doc: "directory for checkpoint.gob, metrics.jsonl and the plots (resume with pipe run --resume)"},
			Param{Name: "log_every", Type: Int, Default: itoa(dt.LogEvery), Min: bound(0), Doc: "write every Nth step's loss, accuracy, lr and images/s to out/steps.jsonl (0: none)"}.with(stepsBound),
		},
		Build: func(a Args) (Stage, error) {
			t := DefaultTrain(a.String("model"))
			t.Model.Depth, t.Model.Width = a.Int("depth"), a.Int("width")
			t.Epochs, t.StepsPerEpoch = a.Int("epochs"), a.Int("steps_per_epoch")
			t.Optim = nn.OptimConfig{Name: a.String("optimizer"), Momentum: a.Float("momentum"), Nesterov: a.Bool("nesterov"), WeightDecay: a.Float("weight_decay")}
			t.LR, t.BaseBatch, t.ScaleLR = a.Float("lr"), a.Int("base_batch"), a.String("scale_lr")
			t.Schedule, t.WarmupEpochs, t.StepEvery, t.Gamma = a.String("schedule"), a.Float("warmup"), a.Int("step_every"), a.Float("gamma")
			t.Smoothing, t.Mode, t.AverageEvery, t.Threads = a.Float("label_smoothing"), a.String("mode"), a.Int("average_every"), a.Int("threads")
			t.Out, t.LogEvery = a.String("out"), a.Int("log_every")
			return Train(t), nil
		}},
	{Name: "eval", Kind: "stage", Summary: "evaluate the trained model on another split of the source (top-1 accuracy and loss), without augmentation",
		Params: []Param{
			{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: defaultEvalSplit, Doc: "the split to evaluate on"},
			Param{Name: "every", Type: Int, Default: itoa(defaultEvalEvery), Min: bound(1), Doc: "epochs between evaluations (the last epoch is always evaluated)"}.with(epochsBound),
			Param{Name: "batch", Type: Int, Default: itoa(defaultEvalBatch), Min: bound(1), Doc: "evaluation batch size"}.with(batchBound),
		},
		Build: func(a Args) (Stage, error) {
			return evalStage(EvalConfig{Split: a.String("split"), Every: a.Int("every"), Batch: a.Int("batch")}), nil
		}},
}
