package pipefile

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/source/remote"
	"github.com/pipefeed/pipe/trainer"
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
	// Min and Max bound numeric values (inclusive) where set; Why says
	// why Max is the bound, for the error that refuses a larger value.
	Min, Max *float64
	Why      string
	Doc      string
	// Auto lets an Int parameter be the word auto as well: the pipeline
	// then sets it as it runs.
	Auto bool
}

// Spec declares a stage: its name, parameters and constructor. Sources are
// specs of kind "source", used as "source NAME ...". A spec is a value: the
// registry holds them, `pipe stages` prints them, and the parser checks a
// line against one before its Build makes the stage, by calling the same
// constructor Go code calls.
type Spec struct {
	Name    string
	Kind    string // "source" or "stage"
	Summary string
	Params  []Param
	// Build makes the stage from validated arguments. A source spec's
	// Build opens nothing: it returns a stage that Open opens.
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
}

// with returns a copy of a with one value changed.
func (a Args) with(name, value string) Args {
	vals := make(map[string]string, len(a.vals))
	for k, v := range a.vals {
		vals[k] = v
	}
	vals[name] = value
	return Args{spec: a.spec, vals: vals}
}

// Line is the canonical line of the arguments: the stage name (or "source"
// and the source name), then every parameter that has a value, in the
// spec's order.
func (a Args) Line() string {
	parts := []string{a.spec.Name}
	if a.spec.Kind == "source" {
		parts = []string{"source", a.spec.Name}
	}
	for _, p := range a.spec.Params {
		if v, ok := a.vals[p.Name]; ok && (v != "" || p.Type == String) {
			parts = append(parts, p.Name+"="+quote(v))
		}
	}
	return strings.Join(parts, " ")
}

// OpenOptions are passed to the sources a file's stages open.
type OpenOptions struct {
	// Progress reports the progress of downloads (total is -1 when
	// unknown).
	Progress func(done, total int64)
}

// opener makes a source stage of args whose source open opens.
func opener(a Args, open func(ctx context.Context, o *OpenOptions) (source.Source, error)) Stage {
	return Stage{name: "source", line: a.Line(), open: open, apply: setSource}
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

// Auto reports whether the parameter is auto (Param.Auto).
func (a Args) Auto(name string) bool { return a.vals[name] == "auto" }

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
			return nil, fmt.Errorf("%s is not a number", clip(f))
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
		if p.Auto && v == "auto" {
			return v, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil && p.Auto {
			return "", fmt.Errorf("%s is not an integer or auto", clip(v))
		}
		if err != nil {
			return "", fmt.Errorf("%s is not an integer", clip(v))
		}
		nums = []float64{float64(n)}
	case Float:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", fmt.Errorf("%s is not a finite number", clip(v))
		}
		nums = []float64{f}
	case Floats:
		f, err := parseFloats(v)
		if err != nil || len(f) == 0 {
			return "", fmt.Errorf("%s is not a comma-separated list of numbers", clip(v))
		}
		nums = f
	case Bool:
		switch v {
		case "true", "false":
		default:
			return "", fmt.Errorf("%s is not true or false", clip(v))
		}
	case Enum:
		for _, e := range p.Enum {
			if e == v {
				return v, nil
			}
		}
		msg := fmt.Sprintf("%s is not one of %s", clip(v), strings.Join(p.Enum, ", "))
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
			why := ""
			if p.Why != "" {
				why = " (" + p.Why + ")"
			}
			return "", fmt.Errorf("%s must be at most %s%s", v, strconv.FormatFloat(*p.Max, 'f', -1, 64), why)
		}
	}
	return v, nil
}

// registry holds every spec by kind and name: the builtin ones and those
// programs Register.
var registry = func() map[string]*Spec {
	m := map[string]*Spec{}
	for _, s := range builtin {
		key := s.Kind + ":" + s.Name
		if m[key] != nil {
			panic("pipe: stage declared twice: " + key)
		}
		m[key] = s
	}
	return m
}()

// Register adds a spec to the registry, for programs with stages of their
// own; names are unique within a kind.
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

// with returns p bounded above by b.
func (p Param) with(b upTo) Param {
	p.Max, p.Why = bound(b.max), b.why
	return p
}

var fillParam = Param{Name: "fill", Type: Enum, Enum: transform.FillNames(), Default: "zero",
	Doc: "pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)"}

// Parameters and constructors several specs share.
var splitParam = Param{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: "train", Doc: "which part of the dataset"}
var cifarParams = []Param{
	{Name: "path", Type: String, Doc: "the official .tar.gz, its extracted directory, or one batch file"},
	splitParam,
	{Name: "download", Type: Bool, Default: "false", Doc: "fetch and verify the official archive into cache_dir when no path is given"},
	{Name: "cache_dir", Type: String, Doc: "where downloads go (default $PIPE_CACHE or ~/.cache/pipe)"},
	{Name: "mirror", Type: String, Doc: "download from this URL instead of the official one (needs checksum)"},
	{Name: "checksum", Type: String, Doc: "the mirror's md5:<hex> or sha256:<hex>"},
}

func openCIFAR(open func(context.Context, string, source.Split, ...source.CIFAROption) (*source.CIFAR, error), extra func(Args) []source.CIFAROption) func(Args) (Stage, error) {
	return func(a Args) (Stage, error) {
		if a.Has("mirror") != a.Has("checksum") {
			return Stage{}, fmt.Errorf("mirror and checksum go together: a download is only kept if it matches its checksum")
		}
		return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
			split, _ := source.ParseSplit(a.String("split"))
			var opts []source.CIFAROption
			if a.Bool("download") {
				opts = append(opts, source.WithDownload(a.String("cache_dir")))
				if o.Progress != nil {
					opts = append(opts, source.WithDownloadProgress(o.Progress))
				}
			}
			if a.Has("mirror") {
				opts = append(opts, source.WithMirror(a.String("mirror"), a.String("checksum")))
			}
			if extra != nil {
				opts = append(opts, extra(a)...)
			}
			return open(ctx, a.String("path"), split, opts...)
		}), nil
	}
}

var interpParam = Param{Name: "interpolation", Type: Enum, Enum: []string{"bilinear", "bicubic", "lanczos"}, Default: "bilinear",
	Doc: "resampling filter, antialiased when shrinking (as PIL)"}

// builtin are the sources and stages pipe ships: values, one per stage,
// walked by Stages and `pipe stages`.
var builtin = []*Spec{
	{Name: "cifar10", Kind: "source", Summary: "CIFAR-10 binary distribution: 32×32 RGB, 10 classes (50,000 train, 10,000 test)",
		Params: cifarParams, Build: openCIFAR(source.OpenCIFAR10, nil)},
	{Name: "cifar100", Kind: "source", Summary: "CIFAR-100 binary distribution: 32×32 RGB, 100 fine or 20 coarse classes",
		Params: append(append([]Param{}, cifarParams...), Param{Name: "labels", Type: Enum, Enum: []string{"fine", "coarse"}, Default: "fine", Doc: "which label byte to use"}),
		Build: openCIFAR(source.OpenCIFAR100, func(a Args) []source.CIFAROption {
			if a.String("labels") == "coarse" {
				return []source.CIFAROption{source.WithCoarseLabels()}
			}
			return nil
		})},
	{Name: "synthetic", Kind: "source", Summary: "generated CIFAR-shaped data (3×32×32, 10 learnable classes); needs no files or network",
		Params: []Param{
			Param{Name: "n", Type: Int, Default: "50000", Min: bound(1), Doc: "number of samples"}.with(samplesBound),
			splitParam,
			{Name: "seed", Type: Int, Default: "0", Min: bound(0), Doc: "generator seed (the data, not the augmentation)"},
			{Name: "shuffle_labels", Type: Bool, Default: "false", Doc: "labels independent of images: a control that nothing can learn"},
		},
		Build: func(a Args) (Stage, error) {
			return opener(a, func(context.Context, *OpenOptions) (source.Source, error) {
				split, _ := source.ParseSplit(a.String("split"))
				var opts []source.SyntheticOption
				if a.Bool("shuffle_labels") {
					opts = append(opts, source.WithShuffledLabels())
				}
				return source.NewSynthetic(a.Int("n"), split, uint64(a.Int("seed")), opts...)
			}), nil
		}},
	{Name: "image_folder", Kind: "source", Summary: "JPEG/PNG files: one sub-directory per class (torchvision ImageFolder, ILSVRC train/), or a flat directory with labels= (ImageNet val); needs decode",
		Params: []Param{
			{Name: "path", Type: String, Required: true, Doc: "the directory, or a URL: s3://bucket/train/ (class folders found by listing), https://host/val/ (with labels=), each file fetched into the shard cache"},
			{Name: "labels", Type: String, Doc: "flat layout: a CSV of file,label lines (a header is skipped), a path or URL; without classes= the classes are 0..the largest label (past 1,024, half must appear)"},
			{Name: "classes", Type: String, Doc: "a CSV of label,name lines naming the classes (e.g. ILSVRC synsets), a path or URL"},
			{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: "train", Doc: "eval split=test reads path/../val (or path/../test) when it exists"},
			remoteParams[0], remoteParams[1], remoteParams[2], remoteParams[3], remoteParams[4], remoteParams[5],
		},
		Build: func(a Args) (Stage, error) {
			return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				var opts []source.FolderOption
				if a.Has("labels") {
					opts = append(opts, source.WithLabels(a.String("labels")))
				}
				if a.Has("classes") {
					opts = append(opts, source.WithClassNames(a.String("classes")))
				}
				rem, err := remoteArgs(a, o)
				if err != nil {
					return nil, err
				}
				opts = append(opts, source.WithFolderRemote(rem))
				path := a.String("path")
				if a.String("split") != "test" {
					return source.OpenFolder(ctx, path, opts...)
				}
				if remote.IsURL(path) {
					return openSiblingURL(ctx, path, opts)
				}
				if path = siblingSplit(path); path == "" {
					return nil, fmt.Errorf("split=test: no val/ or test/ directory beside %s", a.String("path"))
				}
				return source.OpenFolder(ctx, path, opts...)
			}), nil
		}},
	{Name: "tfrecord", Kind: "source", Summary: "tf.train.Example records in TFRecord files (plain or GZIP, both CRC-32Cs checked, offsets indexed once); needs decode",
		Params: []Param{
			{Name: "path", Type: String, Required: true, Doc: "the files: a glob with braces (data/train-{00000..01023}-of-01024, data/train-*), or a URL (s3://bucket/train-*, https://host/train-{0..9}.tfrecord) fetched into the shard cache"},
			{Name: "image_key", Type: String, Default: "image/encoded", Doc: "the bytes feature holding the encoded image"},
			{Name: "label_key", Type: String, Default: "image/class/label", Doc: "the int64 feature holding the label"},
			Param{Name: "label_offset", Type: Int, Default: "0", Min: bound(0), Doc: "subtracted from labels (build_image_data numbers classes from 1: use 1)"}.with(labelBound),
			{Name: "index_dir", Type: String, Doc: "where offset indexes and decompressed GZIP copies go (default $PIPE_CACHE/tfrecord)"},
			{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: "train", Doc: "eval split=test reads the path with train replaced by validation (or val, test)"},
			remoteParams[0], remoteParams[1], remoteParams[2], remoteParams[3], remoteParams[4], remoteParams[5],
		},
		Build: func(a Args) (Stage, error) {
			return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				opts := []source.TFRecordOption{source.WithFeatureKeys(a.String("image_key"), a.String("label_key")),
					source.WithLabelOffset(a.Int("label_offset"))}
				if a.Has("index_dir") {
					opts = append(opts, source.WithIndexDir(a.String("index_dir")))
				}
				rem, err := remoteArgs(a, o)
				if err != nil {
					return nil, err
				}
				opts = append(opts, source.WithTFRemote(rem))
				path := a.String("path")
				if a.String("split") == "test" {
					if path = siblingGlob(path); path == "" {
						return nil, fmt.Errorf("split=test: no files like %s with train replaced by validation, val or test", a.String("path"))
					}
				}
				return source.OpenTFRecord(ctx, path, opts...)
			}), nil
		}},
	{Name: "webdataset", Kind: "source", Summary: "WebDataset tar shards (plain, .tar.gz, .tgz): members grouped by key, image from .jpg/.jpeg/.png, label from .cls or .json; needs decode",
		Params: []Param{
			{Name: "path", Type: String, Required: true, Doc: "the shards: a glob with braces (data/shard-{000000..001023}.tar, data/shard-*.tar), or a URL (s3://bucket/shard-*.tar, https://host/shard-{000..099}.tar) fetched into the shard cache"},
			{Name: "label_field", Type: String, Default: "label", Doc: "the .json field holding the label, for samples without a .cls member"},
			{Name: "index_dir", Type: String, Doc: "where gzipped shards are decompressed once (default $PIPE_CACHE/webdataset)"},
			remoteParams[0], remoteParams[1], remoteParams[2], remoteParams[3], remoteParams[4], remoteParams[5],
		},
		Build: func(a Args) (Stage, error) {
			return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				opts := []source.WebDatasetOption{source.WithJSONLabel(a.String("label_field"))}
				if a.Has("index_dir") {
					opts = append(opts, source.WithWDSIndexDir(a.String("index_dir")))
				}
				rem, err := remoteArgs(a, o)
				if err != nil {
					return nil, err
				}
				opts = append(opts, source.WithWDSRemote(rem))
				return source.OpenWebDataset(ctx, a.String("path"), opts...)
			}), nil
		}},
	{Name: "shuffle", Kind: "stage", Summary: "a new random order of the samples every epoch; seed also keys the augmentations",
		Params: []Param{
			{Name: "seed", Type: Int, Default: "0", Positional: true, Min: bound(0), Doc: "the pipeline's seed"},
			Param{Name: "buffer", Type: Int, Default: "0", Min: bound(0), Doc: "0: a full permutation; N: shards (tfrecord, webdataset files) in random order, read in sequence through an N-sample shuffle buffer (tf.data, WebDataset)"}.with(samplesBound),
		},
		Build: func(a Args) (Stage, error) { return ShuffleBuffer(uint64(a.Int("seed")), a.Int("buffer")), nil }},
	{Name: "random_crop", Kind: "stage", Summary: "crop size×size at a random place of the image padded by pad (torchvision RandomCrop)",
		Params: []Param{
			Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the square crop in pixels"}.with(sideBound),
			Param{Name: "pad", Type: Int, Default: "0", Min: bound(0), Doc: "padding added on every side before cropping"}.with(sideBound),
			fillParam,
		},
		Build: func(a Args) (Stage, error) {
			f, _ := transform.ParseFill(a.String("fill"))
			op, err := transform.RandomCrop(a.Int("size"), a.Int("pad"), f)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "flip", Kind: "stage", Summary: "mirror the image with probability p",
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
		}},
	{Name: "shift", Kind: "stage", Summary: "translate by a random whole number of pixels (Keras ImageDataGenerator width/height_shift_range)",
		Params: []Param{
			Param{Name: "width", Type: Float, Default: "0.1", Min: bound(0), Doc: "largest horizontal shift: a fraction of the width if < 1, else pixels"}.with(sideBound),
			Param{Name: "height", Type: Float, Default: "0.1", Min: bound(0), Doc: "largest vertical shift: a fraction of the height if < 1, else pixels"}.with(sideBound),
			fillParam,
		},
		Build: func(a Args) (Stage, error) {
			f, _ := transform.ParseFill(a.String("fill"))
			op, err := transform.Shift(a.Float("width"), a.Float("height"), f)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
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
	{Name: "decode", Kind: "stage", Summary: "JPEG/PNG bytes to RGB pixels (greyscale and CMYK become RGB); right after an image source, before a cache that should skip decoding",
		Params: []Param{
			{Name: "reduce", Type: Bool, Default: "true", Doc: "decode only the window a following resize/random_resized_crop reads at the smallest DCT scale (1/8, 1/4, 1/2) that keeps it at least its output size; false: at full scale"},
			Param{Name: "max_pixels", Type: Int, Default: itoa(transform.DefaultMaxPixels), Min: bound(1), Doc: "largest image decoded, width × height (the default, 2^26, is an 8192×8192 square, above a 61-MP photograph); checked from the header before anything is allocated: a larger image is a corrupt record, which on_error=skip skips"}.with(pixelsBound),
		},
		Build: func(a Args) (Stage, error) {
			return Decode(DecodeConfig{FullScale: !a.Bool("reduce"), MaxPixels: a.Int("max_pixels")}), nil
		}},
	{Name: "resize", Kind: "stage", Summary: "scale so the shorter side is shorter= pixels, keeping the aspect ratio (torchvision Resize(int))",
		Params: []Param{
			Param{Name: "shorter", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "length of the shorter side after resizing"}.with(sideBound),
			interpParam,
		},
		Build: func(a Args) (Stage, error) {
			in, _ := transform.ParseInterp(a.String("interpolation"))
			op, err := transform.Resize(a.Int("shorter"), in)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "center_crop", Kind: "stage", Summary: "the central size×size window, zero-padded if the image is smaller (torchvision CenterCrop)",
		Params: []Param{Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the square crop"}.with(sideBound)},
		Build: func(a Args) (Stage, error) {
			op, err := transform.CenterCrop(a.Int("size"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "random_resized_crop", Kind: "stage", Summary: "a random area and aspect-ratio crop resized to size×size (torchvision RandomResizedCrop, with its centre-crop fallback)",
		Params: []Param{
			Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the output"}.with(sideBound),
			{Name: "scale", Type: Floats, Default: "0.08,1", Doc: "range of the crop's area as a fraction of the image's"},
			{Name: "ratio", Type: Floats, Default: "0.75,1.3333333333333333", Doc: "range of the crop's aspect ratio (width/height), drawn log-uniformly"},
			interpParam,
		},
		Build: func(a Args) (Stage, error) {
			sc, ra := a.Floats("scale"), a.Floats("ratio")
			if len(sc) != 2 || len(ra) != 2 {
				return Stage{}, fmt.Errorf("scale and ratio take two values each: min,max")
			}
			in, _ := transform.ParseInterp(a.String("interpolation"))
			op, err := transform.RandomResizedCrop(a.Int("size"), [2]float64{sc[0], sc[1]}, [2]float64{ra[0], ra[1]}, in)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "color_jitter", Kind: "stage", Summary: "random brightness, contrast and saturation in a random order (torchvision ColorJitter without hue)",
		Params: []Param{
			{Name: "brightness", Type: Float, Default: "0", Min: bound(0), Doc: "factor drawn from [max(0, 1-v), 1+v]"},
			{Name: "contrast", Type: Float, Default: "0", Min: bound(0), Doc: "factor drawn from [max(0, 1-v), 1+v], around the mean grey"},
			{Name: "saturation", Type: Float, Default: "0", Min: bound(0), Doc: "factor drawn from [max(0, 1-v), 1+v], around each pixel's grey"},
		},
		Build: func(a Args) (Stage, error) {
			op, err := transform.ColorJitter(a.Float("brightness"), a.Float("contrast"), a.Float("saturation"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "normalize", Kind: "stage", Summary: "(v/255 - mean) / std per channel, applied as the tensor is written; needs a float dtype",
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
		}},
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
	{Name: "train", Kind: "stage", Summary: "train a model on the batches, one replica per device (data parallel); comes last, before eval",
		Params: []Param{
			{Name: "model", Type: Enum, Enum: trainer.Models, Required: true, Positional: true, Doc: "mlp, keras_cnn (Keras' cifar10_cnn.py) or resnet (CIFAR ResNet, He et al.)"},
			Param{Name: "depth", Type: Int, Default: itoa(dt.Model.Depth), Min: bound(8), Doc: "resnet depth, 6n+2: 8, 14, 20, 32, 44, 56, 110"}.with(resnetBound),
			Param{Name: "width", Type: Int, Default: itoa(dt.Model.Width), Min: bound(0), Doc: "resnet's first-stage channels (0: 16) or mlp's hidden units (0: 512)"}.with(widthBound),
			Param{Name: "epochs", Type: Int, Default: itoa(dt.Epochs), Min: bound(1), Doc: "epochs to train"}.with(epochsBound),
			Param{Name: "steps_per_epoch", Type: Int, Default: itoa(dt.StepsPerEpoch), Min: bound(0), Doc: "cap on steps per epoch (0: the whole epoch), for quick runs"}.with(stepsBound),
			{Name: "optimizer", Type: Enum, Enum: trainer.Optimizers, Default: dt.Optim.Name, Doc: "sgd, adam or rmsprop (PyTorch's update rules)"},
			{Name: "lr", Type: Float, Default: ftoa(dt.LR), Min: bound(0), Doc: "peak learning rate for base_batch, scaled to the global batch by scale_lr"},
			Param{Name: "base_batch", Type: Int, Default: itoa(dt.BaseBatch), Min: bound(1), Doc: "the batch size lr is given for"}.with(batchBound),
			{Name: "scale_lr", Type: Enum, Enum: []string{"linear", "sqrt", "none"}, Default: dt.ScaleLR, Doc: "how lr grows with the global batch (Goyal et al.: linear)"},
			{Name: "momentum", Type: Float, Default: ftoa(dt.Optim.Momentum), Min: bound(0), Max: bound(0.999), Doc: "sgd and rmsprop momentum"},
			{Name: "nesterov", Type: Bool, Default: strconv.FormatBool(dt.Optim.Nesterov), Doc: "Nesterov momentum (sgd)"},
			{Name: "weight_decay", Type: Float, Default: ftoa(dt.Optim.WeightDecay), Min: bound(0), Doc: "L2 penalty on weights (not biases or batch-norm parameters)"},
			{Name: "schedule", Type: Enum, Enum: trainer.Schedules, Default: dt.Schedule, Doc: "learning-rate schedule after warm-up: constant, step, cosine or onecycle"},
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
			t.Optim = trainer.OptimConfig{Name: a.String("optimizer"), Momentum: a.Float("momentum"), Nesterov: a.Bool("nesterov"), WeightDecay: a.Float("weight_decay")}
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
	{Name: "pipeline", Kind: "stage", Summary: "how the pipeline runs; none of these change a rank's output",
		Params: []Param{
			Param{Name: "workers", Type: Int, Default: "auto", Auto: true, Min: bound(0), Doc: "transform goroutines: auto (sized as the first epoch runs, within the cores and memory=), 0 (one per core) or a number"}.with(workersBound),
			Param{Name: "memory", Type: Int, Default: "auto", Auto: true, Min: bound(1), Doc: "MiB that workers=auto and depth=auto may hold in batches (host slabs and device buffers); auto: a quarter of the memory this process may use"}.with(memoryBound),
			{Name: "on_error", Type: Enum, Enum: []string{"fail", "skip"}, Default: "fail", Doc: "a corrupt record stops the run (fail) or is skipped, counted and listed (skip)"},
			{Name: "seed", Type: Int, Min: bound(0), Doc: "the pipeline's seed when there is no shuffle stage"},
			Param{Name: "rank", Type: Int, Default: "0", Min: bound(0), Doc: "this process's rank in a data-parallel job, e.g. ${RANK:-0}"}.with(ranksBound),
			Param{Name: "world", Type: Int, Default: "1", Min: bound(1), Doc: "the number of ranks, e.g. ${WORLD_SIZE:-1}; each reads an equal, disjoint share"}.with(ranksBound),
			{Name: "elastic", Type: Bool, Default: "false", Doc: "ranks read slices of whole global batches of one order, so the stream and a resume do not depend on the number of ranks (a last, partial global batch sits out)"},
		},
		Build: func(a Args) (Stage, error) {
			s := Settings{Workers: a.Int("workers"), Rank: a.Int("rank"), World: a.Int("world"), Elastic: a.Bool("elastic")}
			switch {
			case a.Auto("workers"):
				s.Workers = AutoWorkers
			case s.Workers == 0:
				s.Workers = PerCore
			}
			if !a.Auto("memory") {
				s.Memory = int64(a.Int("memory")) << 20
			}
			if a.String("on_error") == "skip" {
				s.OnError = engine.Skip
			}
			if a.Has("seed") {
				seed := uint64(a.Int("seed"))
				s.Seed = &seed
			}
			return Pipeline(s), nil
		}},
}

// dt is the train stage's defaults, for the registry's parameter docs: the
// other config-struct stages' defaults are constants (defaultDepth, …,
// cache.DefaultEpochs, cache.DefaultMemory).
var dt = DefaultTrain("")

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// openSiblingURL opens the held-out folder beside a train folder named by
// a URL (.../train → .../val, .../validation or .../test): the first that
// holds objects.
func openSiblingURL(ctx context.Context, train string, opts []source.FolderOption) (source.Source, error) {
	parent := train[:strings.LastIndex(strings.TrimRight(train, "/"), "/")]
	for _, name := range []string{"val", "validation", "test"} {
		f, err := source.OpenFolder(ctx, parent+"/"+name, opts...)
		if !errors.Is(err, remote.ErrNotFound) {
			return f, err
		}
	}
	return nil, fmt.Errorf("split=test: no val/, validation/ or test/ folder beside %s", train)
}

// siblingSplit returns the held-out directory beside a train directory
// (.../train → .../val or .../test), or "".
func siblingSplit(train string) string {
	parent := filepath.Dir(filepath.Clean(train))
	for _, name := range []string{"val", "validation", "test"} {
		if st, err := os.Stat(filepath.Join(parent, name)); err == nil && st.IsDir() {
			return filepath.Join(parent, name)
		}
	}
	return ""
}

// siblingGlob returns the held-out files' glob for a train glob (train
// replaced by validation, val or test), or "".
func siblingGlob(train string) string {
	for _, name := range []string{"validation", "val", "test"} {
		g := strings.Replace(train, "train", name, 1)
		if m, _ := filepath.Glob(g); g != train && len(m) > 0 {
			return g
		}
	}
	return ""
}

// remoteParams are the parameters of sources whose path may be a URL.
var remoteParams = []Param{
	{Name: "endpoint", Type: String, Doc: "S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)"},
	{Name: "region", Type: String, Doc: "S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)"},
	{Name: "path_style", Type: Bool, Default: "false", Doc: "address buckets as endpoint/bucket/key, as most S3-compatible servers want"},
	{Name: "cache_dir", Type: String, Doc: "the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)"},
	{Name: "cache_size", Type: String, Doc: "bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)"},
	Param{Name: "concurrency", Type: Int, Default: "8", Min: bound(1), Doc: "shards fetched at once for URL paths, each one streaming 1 MiB buffer"},
}

// remoteArgs makes the store and shard cache a source's params ask for.
func remoteArgs(a Args, o *OpenOptions) (*source.Remote, error) {
	size, err := remote.ParseSize(a.String("cache_size"))
	if err != nil {
		return nil, fmt.Errorf("cache_size: %w", err)
	}
	store := remote.New(remote.Options{Endpoint: a.String("endpoint"), Region: a.String("region"),
		PathStyle: a.Bool("path_style"), Concurrency: a.Int("concurrency")})
	rem := &source.Remote{Store: store, Cache: &remote.Cache{Dir: a.String("cache_dir"), Limit: size}}
	if o != nil {
		rem.Progress = o.Progress
	}
	return rem, nil
}
