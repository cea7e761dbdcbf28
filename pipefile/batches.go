package pipefile

// Batches: batch, to_tensor, mixup, cutmix, cache and prefetch, their
// specs and constructors.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/transform"
)

// Batching groups samples into batches of size (the .pipe stage "batch");
// with dropLast the final short batch of an epoch is left out. Every
// pipeline needs one.
func Batching(size int, dropLast bool) Stage {
	return Stage{name: "batch", line: canonical("batch", "size", size, "drop_last", dropLast), apply: func(c *Compiled) error {
		if size < 1 {
			return fmt.Errorf("size=%d: must be at least 1", size)
		}
		if err := checkMax("size", size, batchBound); err != nil {
			return err
		}
		c.afterBatch, c.Batch, c.DropLast = true, size, dropLast
		return nil
	}}
}

// ToTensor sets the layout and element type of batches. A pipeline without
// one is NCHW float32, as if it ended in ToTensor(NCHW, Float32).
func ToTensor(layout transform.Layout, dtype transform.DType) Stage {
	return Stage{name: "to_tensor", line: canonical("to_tensor", "layout", layout, "dtype", dtype), apply: func(c *Compiled) error {
		c.haveTensor, c.Layout, c.DType = true, layout, dtype
		return nil
	}}
}

// MixUp blends the samples of every batch with their neighbours, as
// torchvision's transforms.v2.MixUp: with probability p, λ ~ Beta(alpha,
// alpha) is drawn for the batch, sample i becomes λ·x_i + (1−λ)·x_i−1 (for
// sample 0, the batch's last), and its targets λ·onehot(y_i) +
// (1−λ)·onehot(y_i−1); a batch not mixed keeps its pixels and gets one-hot
// targets. Batches then carry the float32 targets ([N, classes], the field
// "targets"), which the train stage learns from. classes is the targets'
// length; 0 takes the source's classes. It comes after batch (and
// to_tensor and normalize), before prefetch and train; with CutMix too,
// each batch uses one of the two, chosen at random. Its draws are keyed by
// the seed, the epoch and the batch's place in the plan (engine.Mix).
func MixUp(alpha, p float64, classes int) Stage { return mixStage("mixup", alpha, p, classes) }

// CutMix pastes a box of each batch's previous sample into every sample,
// as torchvision's transforms.v2.CutMix: with probability p, λ ~
// Beta(alpha, alpha) is drawn for the batch, a box of sqrt(1−λ) of the
// image's width and height, centred at a uniform pixel and clipped to the
// image, is copied from sample i−1 (for sample 0, the batch's last) into
// sample i, and the targets are those of MixUp with λ = 1 − the box's
// share of the image. Otherwise as MixUp.
func CutMix(alpha, p float64, classes int) Stage { return mixStage("cutmix", alpha, p, classes) }

func mixStage(name string, alpha, p float64, classes int) Stage {
	line := canonical(name, "alpha", ftoa(alpha), "p", ftoa(p), "num_classes", classes)
	return Stage{name: name, line: line, apply: func(c *Compiled) error {
		switch {
		case !(alpha > 0) || math.IsInf(alpha, 0):
			return fmt.Errorf("alpha=%g: must be above 0", alpha)
		case !(p >= 0 && p <= 1):
			return fmt.Errorf("p=%g: must be in [0, 1]", p)
		case classes < 0:
			return fmt.Errorf("num_classes=%d: must be 0 (the source's classes) or more", classes)
		case !c.afterBatch:
			return fmt.Errorf("%s mixes the samples of a batch: it comes after batch (and to_tensor)", name)
		}
		if err := checkMax("num_classes", classes, labelBound); err != nil {
			return err
		}
		if c.Schema != nil {
			for _, f := range c.Schema.Fields {
				if f.Kind != fields.Image && f.Kind != fields.Label {
					return fmt.Errorf("%s mixes images and their int labels: the %s field would not be mixed with them", name, f.Kind)
				}
			}
			if !c.Schema.Has(fields.Label) {
				return fmt.Errorf("%s makes its targets from the int labels: the fields stage has no label", name)
			}
		}
		if c.Mix == nil {
			c.Mix = &engine.Mix{}
		}
		if classes != 0 && c.Mix.Classes != 0 && classes != c.Mix.Classes {
			return fmt.Errorf("num_classes=%d conflicts with num_classes=%d of the other mixing stage", classes, c.Mix.Classes)
		}
		if classes != 0 {
			c.Mix.Classes = classes
		}
		op := &engine.MixOp{Alpha: alpha, P: p}
		if name == "mixup" {
			c.Mix.MixUp = op
		} else {
			c.Mix.CutMix = op
		}
		return nil
	}}
}

// Cache stores the output of every stage before it, per shard of samples, in
// a Badger directory, and reads it back instead of recomputing it.
func Cache(cfg cache.Config) Stage {
	d, err := cfg.WithDefaults()
	line := canonical("cache", "dir", d.Dir, "epochs", d.Epochs, "shard", d.ShardSize, "ahead", d.Ahead, "memory", d.Memory>>20)
	return Stage{name: "cache", line: line, apply: func(c *Compiled) error {
		if err != nil {
			return err
		}
		if c.afterBatch || c.haveTensor {
			return errors.New("cache must come before batch and to_tensor: it stores single images")
		}
		if err := errors.Join(checkMax("epochs", d.Epochs, epochsBound), checkMax("shard", d.ShardSize, shardBound),
			checkMax("ahead", d.Ahead, epochsBound), checkMax("memory", int(d.Memory>>20), memoryBound)); err != nil {
			return err
		}
		if c.Norm != nil {
			return errors.New("cache after normalize: put the cache before normalize (normalize is applied as the tensor is written, so the cache stores uint8 images either way)")
		}
		c.Cache, c.CacheAt = &d, len(c.Ops)
		return nil
	}}
}

const (
	defaultDepth   = 2 // where depth=auto starts
	defaultDevices = "cpu:1"
)

// PrefetchConfig configures a prefetch stage; its zero value is the
// default.
type PrefetchConfig struct {
	// Depth is how many batches each device's queue holds ahead of its
	// consumer. Default 0: auto, which starts at 2 and deepens the
	// queues on bursty stalls, within the pipeline's memory budget
	// (engine.Auto).
	Depth int
	// Devices names the devices: "cpu:N" for N simulated devices in host
	// memory (any machine), or "all" / "cuda:0,1" for GPUs (the cuda
	// build). Default "cpu:1".
	Devices string
	// Open, when set, opens device i of those Devices names in place of
	// the default (see engine.Devices.Open): the Go API's way to a device
	// of a program's own. The stage's line does not carry it.
	Open func(i int) (prefetch.Device, error)
}

// Prefetch sends every global batch to the devices, cut into contiguous,
// equal per-device slices, each copied asynchronously into device memory
// and queued for that device's consumer. It comes after batch; only train
// and eval may follow it.
func Prefetch(p PrefetchConfig) Stage {
	if p.Devices == "" {
		p.Devices = defaultDevices
	}
	depth := "auto"
	if p.Depth != 0 {
		depth = strconv.Itoa(p.Depth)
	}
	return Stage{name: "prefetch", line: canonical("prefetch", "depth", depth, "devices", p.Devices), apply: func(c *Compiled) error {
		if p.Depth < 0 {
			return fmt.Errorf("depth=%d: must be 0 (auto) or at least 1", p.Depth)
		}
		if err := checkMax("depth", p.Depth, depthBound); err != nil {
			return err
		}
		if _, err := ParseDevices(p.Devices); err != nil {
			return err
		}
		if !c.afterBatch {
			return errors.New("prefetch moves batches: it comes after batch (and to_tensor)")
		}
		// The engine starts depth=auto at defaultDepth.
		c.AutoDepth = p.Depth == 0
		q := p
		if c.AutoDepth {
			q.Depth = defaultDepth
		}
		c.Prefetch = &q
		return nil
	}}
}

// ParseDevices parses devices=: cpu:N, all (every GPU the driver sees) or
// cuda:I,J,... It checks the syntax only; whether the GPUs are there is
// the engine's question (engine.Devices.Probe), asked when a pipeline is
// built, so that parsing a file never calls the CUDA driver.
func ParseDevices(spec string) (*engine.Devices, error) {
	if rest, ok := strings.CutPrefix(spec, "cpu:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("devices=%s: want cpu:N with 1 ≤ N ≤ 64", spec)
		}
		return &engine.Devices{CPU: n}, nil
	}
	d := &engine.Devices{}
	rest, ok := strings.CutPrefix(spec, "cuda:")
	switch {
	case spec == "all":
		d.AllGPUs = true
	case ok:
		for _, f := range strings.Split(rest, ",") {
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 {
				return nil, fmt.Errorf("devices=%s: %q is not a GPU number (want cuda:0 or cuda:0,1,...)", spec, f)
			}
			if slices.Contains(d.GPUs, i) {
				return nil, fmt.Errorf("devices=%s: cuda:%d given twice", spec, i)
			}
			d.GPUs = append(d.GPUs, i)
		}
	default:
		return nil, fmt.Errorf("devices=%s: want cpu:N, all, or cuda:I,J,...", spec)
	}
	return d, nil
}

// batchSpecs are the stages that make, store and place batches.
var batchSpecs = []*StageSpec{
	{Name: "batch", Kind: "stage", Summary: "group samples into batches written straight into reusable slabs",
		Params: []Param{
			Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "samples per batch"}.with(batchBound),
			{Name: "drop_last", Type: Bool, Default: "false", Doc: "leave out the final short batch of each epoch"},
		},
		Build: func(a Args) (Stage, error) { return Batching(a.Int("size"), a.Bool("drop_last")), nil }},
	{Name: "to_tensor", Kind: "stage", Summary: "the memory layout and element type of batches",
		Params: []Param{
			{Name: "layout", Type: Enum, Enum: []string{"nchw", "nhwc"}, Default: "nchw", Doc: "nchw (channels first, cuDNN's preference) or nhwc"},
			{Name: "dtype", Type: Enum, Enum: []string{"float32", "float16", "uint8"}, Default: "float32", Doc: "element type; floats without normalize are scaled to [0,1]"},
		},
		Build: func(a Args) (Stage, error) {
			l, _ := transform.ParseLayout(a.String("layout"))
			d, _ := transform.ParseDType(a.String("dtype"))
			return ToTensor(l, d), nil
		}},
	{Name: "mixup", Kind: "stage", Summary: "blend each sample of a batch with the previous one by λ ~ Beta(alpha, alpha), and give batches soft targets (torchvision MixUp)",
		Params: mixParams(),
		Build: func(a Args) (Stage, error) {
			return MixUp(a.Float("alpha"), a.Float("p"), a.Int("num_classes")), nil
		}},
	{Name: "cutmix", Kind: "stage", Summary: "paste a box of the previous sample of a batch into each sample, sized by λ ~ Beta(alpha, alpha), and give batches soft targets (torchvision CutMix)",
		Params: mixParams(),
		Build: func(a Args) (Stage, error) {
			return CutMix(a.Float("alpha"), a.Float("p"), a.Int("num_classes")), nil
		}},
	{Name: "cache", Kind: "stage", Summary: "store the output of every stage before it in a Badger directory and read it back instead of recomputing it",
		Params: []Param{
			{Name: "dir", Type: String, Required: true, Doc: "cache directory (created if missing; one pipe process at a time)"},
			Param{Name: "epochs", Type: Int, Default: itoa(cache.DefaultEpochs), Min: bound(1), Doc: "distinct epochs cached after random stages; epoch e ≥ epochs reuses e mod epochs (data echoing)"}.with(epochsBound),
			Param{Name: "shard", Type: Int, Default: "0", Min: bound(0), Doc: "samples per cache entry (0: about 1 MiB of images after random stages, 256 KiB otherwise, at most 256)"}.with(shardBound),
			Param{Name: "ahead", Type: Int, Default: "0", Min: bound(0), Doc: "epochs pipe run warms in the background ahead of the one being read"}.with(epochsBound),
			Param{Name: "memory", Type: Int, Default: itoa(cache.DefaultMemory >> 20), Min: bound(1), Doc: "MiB of decoded entries kept in memory"}.with(memoryBound),
		},
		Build: func(a Args) (Stage, error) {
			return Cache(cache.Config{Dir: a.String("dir"), Epochs: a.Int("epochs"), ShardSize: a.Int("shard"),
				Ahead: a.Int("ahead"), Memory: int64(a.Int("memory")) << 20}), nil
		}},
	{Name: "prefetch", Kind: "stage", Summary: "cut each global batch into equal, contiguous per-device slices and copy them to the devices ahead of their consumers",
		Params: []Param{
			Param{Name: "depth", Type: Int, Default: "auto", Auto: true, Min: bound(1), Doc: "batches each device's queue holds ahead of its consumer; auto starts at 2 and deepens on bursty stalls, within the pipeline's memory="}.with(depthBound),
			{Name: "devices", Type: String, Default: defaultDevices, Doc: "cpu:N (N simulated devices, any machine), all or cuda:0,1 (GPUs, cuda build)"},
		},
		Build: func(a Args) (Stage, error) {
			if _, err := ParseDevices(a.String("devices")); err != nil {
				return Stage{}, err
			}
			return Prefetch(PrefetchConfig{Depth: a.Int("depth"), Devices: a.String("devices")}), nil // auto: Depth 0
		}},
}

// mixParams are the parameters of mixup and cutmix.
func mixParams() []Param {
	return []Param{
		{Name: "alpha", Type: Float, Default: "1", Min: bound(0), Doc: "λ ~ Beta(alpha, alpha), alpha > 0 (torchvision's default 1; its reference recipes use 0.2 for mixup, 1 for cutmix)"},
		{Name: "p", Type: Float, Default: "1", Min: bound(0), Max: bound(1), Doc: "probability that a batch is mixed (one that is not gets one-hot targets)"},
		Param{Name: "num_classes", Type: Int, Default: "0", Min: bound(0), Doc: "length of the targets; 0: the source's classes"}.with(labelBound),
	}
}
