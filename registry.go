package pipe

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// ParamType is the type of a stage parameter.
type ParamType int

const (
	Int ParamType = iota
	Float
	Bool
	String
	Enum   // one of Param.Enum
	Floats // comma-separated floats
)

var paramTypeNames = [...]string{"int", "float", "bool", "string", "enum", "floats"}

func (t ParamType) String() string { return paramTypeNames[t] }

// Param declares one parameter of a stage.
type Param struct {
	Name string
	Type ParamType
	// Default is the value when the parameter is not given, in .pipe
	// syntax; "" with Required unset means "no value" (the stage decides).
	Default  string
	Required bool
	// Positional parameters may be given without "name=", in order, after
	// the stage name: "batch 256", "flip horizontal".
	Positional bool
	Enum       []string
	// Min and Max bound numeric values (inclusive) where set.
	Min, Max *float64
	Doc      string
}

// Spec declares a stage: its name, parameters and constructor. Sources are
// specs of kind "source", used as "source NAME ...".
type Spec struct {
	Name    string
	Kind    string // "source" or "stage"
	Summary string
	Params  []Param
	// Build makes the stage from validated arguments.
	Build func(a Args) (Stage, error)
}

// Param returns the parameter called name, or nil.
func (s *Spec) Param(name string) *Param {
	for i := range s.Params {
		if s.Params[i].Name == name {
			return &s.Params[i]
		}
	}
	return nil
}

// Args holds a stage's parameter values, every one validated against its
// Param; getters of a missing parameter return its default.
type Args struct {
	spec *Spec
	vals map[string]string
	load *loadConfig
}

// Progress returns the download progress callback the pipeline is loaded
// with, or nil.
func (a Args) Progress() func(done, total int64) {
	if a.load == nil {
		return nil
	}
	return a.load.progress
}

// Has reports whether the parameter was given or has a default.
func (a Args) Has(name string) bool { return a.vals[name] != "" }

func (a Args) String(name string) string { return a.vals[name] }

func (a Args) Int(name string) int {
	n, _ := strconv.Atoi(a.vals[name])
	return n
}

func (a Args) Float(name string) float64 {
	f, _ := strconv.ParseFloat(a.vals[name], 64)
	return f
}

func (a Args) Bool(name string) bool { return a.vals[name] == "true" }

func (a Args) Floats(name string) []float64 {
	v, _ := parseFloats(a.vals[name])
	return v
}

func parseFloats(s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// check validates a value for p and returns it in canonical form.
func (p *Param) check(v string) (string, error) {
	var nums []float64
	switch p.Type {
	case Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return "", fmt.Errorf("%q is not an integer", v)
		}
		nums = []float64{float64(n)}
	case Float:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", fmt.Errorf("%q is not a finite number", v)
		}
		nums = []float64{f}
	case Floats:
		f, err := parseFloats(v)
		if err != nil || len(f) == 0 {
			return "", fmt.Errorf("%q is not a comma-separated list of numbers", v)
		}
		nums = f
	case Bool:
		switch v {
		case "true", "false":
		default:
			return "", fmt.Errorf("%q is not true or false", v)
		}
	case Enum:
		for _, e := range p.Enum {
			if e == v {
				return v, nil
			}
		}
		msg := fmt.Sprintf("%q is not one of %s", v, strings.Join(p.Enum, ", "))
		if s := suggest(v, p.Enum); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return "", fmt.Errorf("%s", msg)
	}
	for _, n := range nums {
		if p.Min != nil && n < *p.Min {
			return "", fmt.Errorf("%s must be at least %g", v, *p.Min)
		}
		if p.Max != nil && n > *p.Max {
			return "", fmt.Errorf("%s must be at most %g", v, *p.Max)
		}
	}
	return v, nil
}

var registry = map[string]*Spec{}

// Register adds a spec to the registry; names are unique within a kind.
// Stages register themselves at init; Register lets programs add their own.
func Register(s *Spec) {
	key := s.Kind + ":" + s.Name
	if _, dup := registry[key]; dup {
		panic("pipe: stage registered twice: " + key)
	}
	registry[key] = s
}

// Lookup returns the spec of a stage ("stage") or source ("source").
func Lookup(kind, name string) *Spec { return registry[kind+":"+name] }

// Stages returns every registered spec, sources first, then by name.
func Stages() []*Spec {
	var out []*Spec
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind == "source"
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func names(kind string) []string {
	var n []string
	for _, s := range Stages() {
		if s.Kind == kind {
			n = append(n, s.Name)
		}
	}
	return n
}

func bound(v float64) *float64 { return &v }

var fillParam = Param{Name: "fill", Type: Enum, Enum: transform.FillNames(), Default: "zero",
	Doc: "pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)"}

func init() {
	splitParam := Param{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: "train", Doc: "which part of the dataset"}
	cifarParams := []Param{
		{Name: "path", Type: String, Doc: "the official .tar.gz, its extracted directory, or one batch file"},
		splitParam,
		{Name: "download", Type: Bool, Default: "false", Doc: "fetch and verify the official archive into cache_dir when path is missing"},
		{Name: "cache_dir", Type: String, Doc: "where downloads go (default $PIPE_CACHE or ~/.cache/pipe)"},
		{Name: "mirror", Type: String, Doc: "download from this URL instead of the official one (needs checksum)"},
		{Name: "checksum", Type: String, Doc: "the mirror's md5:<hex> or sha256:<hex>"},
	}
	openCIFAR := func(open func(string, source.Split, ...source.CIFAROption) (*source.CIFAR, error), extra func(Args) []source.CIFAROption) func(Args) (Stage, error) {
		return func(a Args) (Stage, error) {
			split, _ := source.ParseSplit(a.String("split"))
			var opts []source.CIFAROption
			if a.Bool("download") {
				opts = append(opts, source.WithDownload(a.String("cache_dir")))
				if f := a.Progress(); f != nil {
					opts = append(opts, source.WithDownloadProgress(f))
				}
			}
			if a.Has("mirror") != a.Has("checksum") {
				return Stage{}, fmt.Errorf("mirror and checksum go together: a download is only kept if it matches its checksum")
			}
			if a.Has("mirror") {
				opts = append(opts, source.WithMirror(a.String("mirror"), a.String("checksum")))
			}
			if extra != nil {
				opts = append(opts, extra(a)...)
			}
			src, err := open(a.String("path"), split, opts...)
			if err != nil {
				return Stage{}, err
			}
			return Source(src), nil
		}
	}
	Register(&Spec{Name: "cifar10", Kind: "source", Summary: "CIFAR-10 binary distribution: 32×32 RGB, 10 classes (50,000 train, 10,000 test)",
		Params: cifarParams, Build: openCIFAR(source.CIFAR10, nil)})
	Register(&Spec{Name: "cifar100", Kind: "source", Summary: "CIFAR-100 binary distribution: 32×32 RGB, 100 fine or 20 coarse classes",
		Params: append(append([]Param{}, cifarParams...), Param{Name: "labels", Type: Enum, Enum: []string{"fine", "coarse"}, Default: "fine", Doc: "which label byte to use"}),
		Build: openCIFAR(source.CIFAR100, func(a Args) []source.CIFAROption {
			if a.String("labels") == "coarse" {
				return []source.CIFAROption{source.WithCoarseLabels()}
			}
			return nil
		})})
	Register(&Spec{Name: "synthetic", Kind: "source", Summary: "generated CIFAR-shaped data (3×32×32, 10 learnable classes); needs no files or network",
		Params: []Param{
			{Name: "n", Type: Int, Default: "50000", Min: bound(1), Doc: "number of samples"},
			splitParam,
			{Name: "seed", Type: Int, Default: "0", Min: bound(0), Doc: "generator seed (the data, not the augmentation)"},
			{Name: "shuffle_labels", Type: Bool, Default: "false", Doc: "labels independent of images: a control that nothing can learn"},
		},
		Build: func(a Args) (Stage, error) {
			split, _ := source.ParseSplit(a.String("split"))
			var opts []source.SyntheticOption
			if a.Bool("shuffle_labels") {
				opts = append(opts, source.WithShuffledLabels())
			}
			src, err := source.NewSynthetic(a.Int("n"), split, uint64(a.Int("seed")), opts...)
			if err != nil {
				return Stage{}, err
			}
			return Source(src), nil
		}})

	Register(&Spec{Name: "shuffle", Kind: "stage", Summary: "a new random order of the samples every epoch; seed also keys the augmentations",
		Params: []Param{{Name: "seed", Type: Int, Default: "0", Positional: true, Min: bound(0), Doc: "the pipeline's seed"}},
		Build:  func(a Args) (Stage, error) { return Shuffle(uint64(a.Int("seed"))), nil }})
	Register(&Spec{Name: "random_crop", Kind: "stage", Summary: "crop size×size at a random place of the image padded by pad (torchvision RandomCrop)",
		Params: []Param{
			{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the square crop in pixels"},
			{Name: "pad", Type: Int, Default: "0", Min: bound(0), Doc: "padding added on every side before cropping"},
			fillParam,
		},
		Build: func(a Args) (Stage, error) {
			f, _ := transform.ParseFill(a.String("fill"))
			op, err := transform.RandomCrop(a.Int("size"), a.Int("pad"), f)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}})
	Register(&Spec{Name: "flip", Kind: "stage", Summary: "mirror the image with probability p",
		Params: []Param{
			{Name: "direction", Type: Enum, Enum: []string{"horizontal", "vertical"}, Default: "horizontal", Positional: true, Doc: "horizontal (left-right) or vertical (top-bottom)"},
			{Name: "p", Type: Float, Default: "0.5", Min: bound(0), Max: bound(1), Doc: "probability of flipping"},
		},
		Build: func(a Args) (Stage, error) {
			d, _ := transform.ParseDirection(a.String("direction"))
			op, err := transform.Flip(d, a.Float("p"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}})
	Register(&Spec{Name: "shift", Kind: "stage", Summary: "translate by a random whole number of pixels (Keras ImageDataGenerator width/height_shift_range)",
		Params: []Param{
			{Name: "width", Type: Float, Default: "0.1", Min: bound(0), Doc: "largest horizontal shift: a fraction of the width if < 1, else pixels"},
			{Name: "height", Type: Float, Default: "0.1", Min: bound(0), Doc: "largest vertical shift: a fraction of the height if < 1, else pixels"},
			fillParam,
		},
		Build: func(a Args) (Stage, error) {
			f, _ := transform.ParseFill(a.String("fill"))
			op, err := transform.Shift(a.Float("width"), a.Float("height"), f)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}})
	Register(&Spec{Name: "cache", Kind: "stage", Summary: "store the output of every stage before it in a Badger directory and read it back instead of recomputing it",
		Params: []Param{
			{Name: "dir", Type: String, Required: true, Doc: "cache directory (created if missing; one pipe process at a time)"},
			{Name: "epochs", Type: Int, Default: "1", Min: bound(1), Doc: "distinct epochs cached after random stages; epoch e ≥ epochs reuses e mod epochs (data echoing)"},
			{Name: "shard", Type: Int, Default: "256", Min: bound(1), Doc: "samples per cache entry"},
			{Name: "ahead", Type: Int, Default: "0", Min: bound(0), Doc: "epochs pipe run warms in the background ahead of the one being read"},
			{Name: "memory", Type: Int, Default: "128", Min: bound(1), Doc: "MiB of decoded entries kept in memory"},
		},
		Build: func(a Args) (Stage, error) {
			return Cache(CacheConfig{Dir: a.String("dir"), Epochs: a.Int("epochs"), ShardSize: a.Int("shard"),
				Ahead: a.Int("ahead"), Memory: int64(a.Int("memory")) << 20}), nil
		}})
	Register(&Spec{Name: "normalize", Kind: "stage", Summary: "(v/255 - mean) / std per channel, applied as the tensor is written; needs a float dtype",
		Params: []Param{
			{Name: "mean", Type: Floats, Required: true, Doc: "per-channel means on the [0,1] scale, comma-separated (one value: all channels)"},
			{Name: "std", Type: Floats, Required: true, Doc: "per-channel standard deviations on the [0,1] scale, all > 0"},
			{Name: "where", Type: Enum, Enum: []string{"host", "device"}, Default: "host", Doc: "device: ship uint8 (4× fewer bytes) and normalise on each device; needs prefetch"},
		},
		Build: func(a Args) (Stage, error) {
			n, err := transform.Normalize(a.Floats("mean"), a.Floats("std"))
			if err != nil {
				return Stage{}, err
			}
			if a.String("where") == "device" {
				return DeviceNormalize(n), nil
			}
			return Normalize(n), nil
		}})
	Register(&Spec{Name: "batch", Kind: "stage", Summary: "group samples into batches written straight into reusable slabs",
		Params: []Param{
			{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "samples per batch"},
			{Name: "drop_last", Type: Bool, Default: "false", Doc: "leave out the final short batch of each epoch"},
		},
		Build: func(a Args) (Stage, error) { return Batching(a.Int("size"), a.Bool("drop_last")), nil }})
	Register(&Spec{Name: "to_tensor", Kind: "stage", Summary: "the memory layout and element type of batches",
		Params: []Param{
			{Name: "layout", Type: Enum, Enum: []string{"nchw", "nhwc"}, Default: "nchw", Doc: "nchw (channels first, cuDNN's preference) or nhwc"},
			{Name: "dtype", Type: Enum, Enum: []string{"float32", "float16", "uint8"}, Default: "float32", Doc: "element type; floats without normalize are scaled to [0,1]"},
		},
		Build: func(a Args) (Stage, error) {
			l, _ := transform.ParseLayout(a.String("layout"))
			d, _ := transform.ParseDType(a.String("dtype"))
			return ToTensor(l, d), nil
		}})
	Register(&Spec{Name: "prefetch", Kind: "stage", Summary: "cut each global batch into equal, contiguous per-device slices and copy them to the devices ahead of their consumers",
		Params: []Param{
			{Name: "depth", Type: Int, Default: "2", Min: bound(1), Doc: "batches each device's queue holds ahead of its consumer"},
			{Name: "devices", Type: String, Default: "cpu:1", Doc: "cpu:N (N simulated devices, any machine), all or cuda:0,1 (GPUs, cuda build)"},
		},
		Build: func(a Args) (Stage, error) {
			if _, err := parseDevices(a.String("devices")); err != nil {
				return Stage{}, err
			}
			return Prefetch(PrefetchConfig{Depth: a.Int("depth"), Devices: a.String("devices")}), nil
		}})
	Register(&Spec{Name: "pipeline", Kind: "stage", Summary: "how the pipeline runs; none of these change its output",
		Params: []Param{
			{Name: "workers", Type: Int, Default: "0", Min: bound(0), Doc: "transform goroutines (0: one per core)"},
			{Name: "on_error", Type: Enum, Enum: []string{"fail", "skip"}, Default: "fail", Doc: "a corrupt record stops the run (fail) or is skipped, counted and listed (skip)"},
			{Name: "seed", Type: Int, Min: bound(0), Doc: "the pipeline's seed when there is no shuffle stage"},
			{Name: "rank", Type: Int, Default: "0", Min: bound(0), Doc: "this process's rank in a data-parallel job, e.g. ${RANK:-0}"},
			{Name: "world", Type: Int, Default: "1", Min: bound(1), Doc: "the number of ranks, e.g. ${WORLD_SIZE:-1}; each reads an equal, disjoint share"},
		},
		Build: func(a Args) (Stage, error) {
			pol := Fail
			if a.String("on_error") == "skip" {
				pol = Skip
			}
			seed := int64(-1)
			if a.Has("seed") {
				seed = int64(a.Int("seed"))
			}
			opts := Options(a.Int("workers"), pol, seed)
			opts.desc = fmt.Sprintf("pipeline workers=%d on_error=%s", a.Int("workers"), pol)
			if seed >= 0 {
				opts.desc += fmt.Sprintf(" seed=%d", seed)
			}
			opts.desc += fmt.Sprintf(" rank=%d world=%d", a.Int("rank"), a.Int("world"))
			return both(opts, Distributed(a.Int("rank"), a.Int("world"))), nil
		}})
}
