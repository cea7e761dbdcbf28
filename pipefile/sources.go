package pipefile

// The sources: their specs, constructor and canonical lines.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/source/remote"
)

// Source makes a source stage from an opened source; it must be the first
// stage. Its line is the .pipe source line that opens the same data
// (sourceLine), from the source's Info().Args.
func Source(src source.Source) Stage {
	return Stage{name: "source", line: sourceLine(src.Info()), src: src, apply: setSource}
}

// sourceLine is the canonical line of an opened source, as the registry's
// source of that name writes it (every parameter with a value, defaults
// filled in), so that the pipeline's String parses back. A source the
// registry does not know, or one without Args, is written as its name
// with its identity in a comment: parsing that back says which source is
// unknown or which parameter is missing.
func sourceLine(info source.Info) string {
	spec := Lookup("source", info.Name)
	if spec == nil || len(info.Args) == 0 {
		return "source " + info.Name + " # " + info.Identity
	}
	a := Args{spec: spec, vals: map[string]string{}}
	for _, p := range spec.Params {
		if p.Default != "" {
			a.vals[p.Name] = p.Default
		}
	}
	for _, arg := range info.Args {
		if spec.Param(arg.Name) == nil {
			return "source " + info.Name + " # " + info.Identity
		}
		a.vals[arg.Name] = arg.Value
	}
	return a.Line()
}

// setSource records nothing: Compile takes the opened source from the stage,
// and add checks that it is first and given once.
func setSource(*Compiled) error { return nil }

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

func openCIFAR(open func(context.Context, string, source.Split, ...source.Option) (*source.CIFAR, error), extra func(Args) []source.Option) func(Args) (Stage, error) {
	return func(a Args) (Stage, error) {
		if a.Has("mirror") != a.Has("checksum") {
			return Stage{}, fmt.Errorf("mirror and checksum go together: a download is only kept if it matches its checksum")
		}
		return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
			split, _ := source.ParseSplit(a.String("split"))
			var opts []source.Option
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
			return open(ctx, a.String("path"), split, o.with(opts)...)
		}), nil
	}
}

// openSiblingURL opens the held-out folder beside a train folder named by
// a URL (.../train → .../val, .../validation or .../test): the first that
// holds objects.
func openSiblingURL(ctx context.Context, train string, opts []source.Option) (source.Source, error) {
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
	{Name: "retry_for", Type: String, Doc: "how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)"},
}

// remoteOption is the source option of the store and shard cache a
// source's params ask for (source.WithRemote).
func remoteOption(a Args, o *OpenOptions) (source.Option, error) {
	size, err := remote.ParseSize(a.String("cache_size"))
	if err != nil {
		return source.Option{}, fmt.Errorf("cache_size: %w", err)
	}
	var retryFor time.Duration
	if a.Has("retry_for") {
		if retryFor, err = time.ParseDuration(a.String("retry_for")); err != nil || retryFor <= 0 {
			return source.Option{}, fmt.Errorf("retry_for=%s: want a positive duration such as 90s or 5m", a.String("retry_for"))
		}
	}
	store := remote.New(remote.Options{Endpoint: a.String("endpoint"), Region: a.String("region"),
		PathStyle: a.Bool("path_style"), Concurrency: a.Int("concurrency"), RetryFor: retryFor})
	rem := &source.Remote{Store: store, Cache: &remote.Cache{Dir: a.String("cache_dir"), Limit: size}}
	if o != nil {
		rem.Progress = o.Progress
	}
	return source.WithRemote(rem), nil
}

// sourceSpecs are the sources pipe ships.
var sourceSpecs = []*StageSpec{
	{Name: "cifar10", Kind: "source", Summary: "CIFAR-10 binary distribution: 32×32 RGB, 10 classes (50,000 train, 10,000 test)",
		Params: cifarParams, Build: openCIFAR(source.OpenCIFAR10, nil)},
	{Name: "cifar100", Kind: "source", Summary: "CIFAR-100 binary distribution: 32×32 RGB, 100 fine or 20 coarse classes",
		Params: append(append([]Param{}, cifarParams...), Param{Name: "labels", Type: Enum, Enum: []string{"fine", "coarse"}, Default: "fine", Doc: "which label byte to use"}),
		Build: openCIFAR(source.OpenCIFAR100, func(a Args) []source.Option {
			if a.String("labels") == "coarse" {
				return []source.Option{source.WithCoarseLabels()}
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
			return opener(a, func(_ context.Context, o *OpenOptions) (source.Source, error) {
				split, _ := source.ParseSplit(a.String("split"))
				var opts []source.Option
				if a.Bool("shuffle_labels") {
					opts = append(opts, source.WithShuffledLabels())
				}
				return source.NewSynthetic(a.Int("n"), split, uint64(a.Int("seed")), o.with(opts)...)
			}), nil
		}},
	{Name: "image_folder", Kind: "source", Summary: "JPEG/PNG files: one sub-directory per class (torchvision ImageFolder, ILSVRC train/), or a flat directory with labels= (ImageNet val); needs decode",
		Params: slices.Concat([]Param{
			{Name: "path", Type: String, Required: true, Doc: "the directory, or a URL: s3://bucket/train/ (class folders found by listing), https://host/val/ (with labels=), each file fetched into the shard cache"},
			{Name: "labels", Type: String, Doc: "flat layout: a CSV of file,label lines (a header is skipped), a path or URL; without classes= the classes are 0..the largest label (past 1,024, half must appear)"},
			{Name: "classes", Type: String, Doc: "a CSV of label,name lines naming the classes (e.g. ILSVRC synsets), a path or URL"},
			{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: "train", Doc: "eval split=test reads path/../val (or path/../test) when it exists"},
		}, remoteParams),
		Build: func(a Args) (Stage, error) {
			return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				var opts []source.Option
				if a.Has("labels") {
					opts = append(opts, source.WithLabels(a.String("labels")))
				}
				if a.Has("classes") {
					opts = append(opts, source.WithClassNames(a.String("classes")))
				}
				rem, err := remoteOption(a, o)
				if err != nil {
					return nil, err
				}
				opts = o.with(append(opts, rem))
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
		Params: slices.Concat([]Param{
			{Name: "path", Type: String, Required: true, Doc: "the files: a glob with braces (data/train-{00000..01023}-of-01024, data/train-*), or a URL (s3://bucket/train-*, https://host/train-{0..9}.tfrecord) fetched into the shard cache"},
			{Name: "image_key", Type: String, Default: "image/encoded", Doc: "the bytes feature holding the encoded image"},
			{Name: "label_key", Type: String, Default: "image/class/label", Doc: "the int64 feature holding the label"},
			Param{Name: "label_offset", Type: Int, Default: "0", Min: bound(0), Doc: "subtracted from labels (build_image_data numbers classes from 1: use 1)"}.with(labelBound),
			{Name: "index_dir", Type: String, Doc: "where offset indexes and decompressed GZIP copies go (default $PIPE_CACHE/tfrecord)"},
			{Name: "split", Type: Enum, Enum: []string{"train", "test"}, Default: "train", Doc: "eval split=test reads the path with train replaced by validation (or val, test)"},
		}, remoteParams),
		Build: func(a Args) (Stage, error) {
			return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				opts := []source.Option{source.WithFeatureKeys(a.String("image_key"), a.String("label_key")),
					source.WithLabelOffset(a.Int("label_offset"))}
				if a.Has("index_dir") {
					opts = append(opts, source.WithIndexDir(a.String("index_dir")))
				}
				rem, err := remoteOption(a, o)
				if err != nil {
					return nil, err
				}
				opts = append(opts, rem)
				path := a.String("path")
				if a.String("split") == "test" {
					if path = siblingGlob(path); path == "" {
						return nil, fmt.Errorf("split=test: no files like %s with train replaced by validation, val or test", a.String("path"))
					}
				}
				return source.OpenTFRecord(ctx, path, o.with(opts)...)
			}), nil
		}},
	{Name: "webdataset", Kind: "source", Summary: "WebDataset tar shards (plain, .tar.gz, .tgz): members grouped by key, image from .jpg/.jpeg/.png, label from .cls or .json; needs decode",
		Params: slices.Concat([]Param{
			{Name: "path", Type: String, Required: true, Doc: "the shards: a glob with braces (data/shard-{000000..001023}.tar, data/shard-*.tar), or a URL (s3://bucket/shard-*.tar, https://host/shard-{000..099}.tar) fetched into the shard cache"},
			{Name: "label_field", Type: String, Default: "label", Doc: "the .json field holding the label, for samples without a .cls member"},
			{Name: "index_dir", Type: String, Doc: "where gzipped shards are decompressed once (default $PIPE_CACHE/webdataset)"},
		}, remoteParams),
		Build: func(a Args) (Stage, error) {
			return opener(a, func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				opts := []source.Option{source.WithJSONLabel(a.String("label_field"))}
				if a.Has("index_dir") {
					opts = append(opts, source.WithIndexDir(a.String("index_dir")))
				}
				rem, err := remoteOption(a, o)
				if err != nil {
					return nil, err
				}
				opts = append(opts, rem)
				return source.OpenWebDataset(ctx, a.String("path"), o.with(opts)...)
			}), nil
		}},
}
