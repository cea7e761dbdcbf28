package pipe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/internal/golden"
	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// summaryText is a pipeline's Summary and compiled configuration with
// pointers written out, for comparing two pipelines.
func summaryText(p *Pipeline) string {
	s := p.Summary()
	t, h := s.Tensor.String(), s.HostTensor.String()
	s.Tensor, s.HostTensor, s.Cache = nil, nil, nil
	c := *p.cfg
	var ops []string
	for _, op := range c.Ops {
		ops = append(ops, op.String())
	}
	c.Source, c.Ops, c.Norm = nil, nil, nil
	train, cache, pf, eval := "", "", "", ""
	if c.Train != nil {
		train = fmt.Sprintf("%+v", *c.Train)
	}
	if c.Cache != nil {
		cache = fmt.Sprintf("%+v", *c.Cache)
	}
	if c.Prefetch != nil {
		pf = fmt.Sprintf("%+v", *c.Prefetch)
	}
	if c.Eval != nil {
		e := *c.Eval
		e.Source = nil
		eval = fmt.Sprintf("%+v", e)
	}
	mix := ""
	if m := c.Mix; m != nil {
		op := func(o *engine.MixOp) string {
			if o == nil {
				return "none"
			}
			return fmt.Sprintf("%+v", *o)
		}
		mix = fmt.Sprintf("classes=%d mixup=%s cutmix=%s", m.Classes, op(m.MixUp), op(m.CutMix))
	}
	c.Train, c.Cache, c.Prefetch, c.Eval, c.Mix = nil, nil, nil, nil, nil
	return fmt.Sprintf("%+v tensor=%s host=%s\nconfig %+v ops=%q train=%s cache=%s prefetch=%s eval=%s mix=%s",
		s, t, h, c, ops, train, cache, pf, eval, mix)
}

// roundTrip checks that p's String parses back to a pipeline equal to p:
// the same stages, line for line, and the same summary.
func roundTrip(t *testing.T, name string, p *Pipeline, env func(string) (string, bool)) {
	t.Helper()
	text := p.String()
	want := summaryText(p)
	p.Close() // a cache directory is open by one pipeline at a time
	f, err := pipefile.Parse(name+" (String)", text, env)
	if err != nil {
		t.Errorf("%s: String does not parse: %v\n%s", name, err, text)
		return
	}
	q, err := loadFile(context.Background(), f)
	if err != nil {
		t.Errorf("%s: String does not build: %v\n%s", name, err, text)
		return
	}
	defer q.Close()
	if got := q.String(); got != text {
		t.Errorf("%s: String changed on the round trip:\n%s\nthen:\n%s", name, text, got)
	}
	if got := summaryText(q); got != want {
		t.Errorf("%s: the pipeline changed on the round trip:\n%s\nthen:\n%s", name, want, got)
	}
}

// TestStringRoundTrip: the String of every example and of every pipeline in
// testdata/parse.txt parses back to an equal pipeline.
func TestStringRoundTrip(t *testing.T) {
	cases, err := golden.Read("testdata/parse.txt")
	if err != nil {
		t.Fatal(err)
	}
	built := 0
	for i, c := range cases {
		f, err := pipefile.Parse("x.pipe", c.Input, testEnv)
		if err != nil {
			continue
		}
		p, err := loadFile(context.Background(), f)
		if err != nil {
			continue // a case about an error
		}
		built++
		roundTrip(t, fmt.Sprintf("case %d", i), p, testEnv)
	}
	if built < 3 {
		t.Fatalf("only %d testdata pipelines built", built)
	}
	shared, _ := filepath.Abs("../shared/data")
	cifar := smallCIFAR(t)
	env := func(name string) (string, bool) {
		switch name {
		case "DEVICES":
			return "cpu:2", true
		case "PIPE_CACHE", "OUT":
			return t.TempDir(), true
		case "CIFAR10":
			return cifar, true
		case "IMAGENET":
			return filepath.Join(shared, "imagenet-sample"), true
		case "LABELS":
			return filepath.Join(shared, "imagenet-sample", "labels.csv"), true
		case "TFRECORD":
			return filepath.Join(shared, "tfrecord", "*-of-*"), true
		case "SHARDS":
			return filepath.Join(shared, "webdataset", "sample.tgz"), true
		}
		return "", false
	}
	files, _ := filepath.Glob("examples/*.pipe")
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			text, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(text), "${IMAGENET") || strings.Contains(string(text), "${TFRECORD") || strings.Contains(string(text), "${SHARDS") {
				if _, err := os.Stat(shared); err != nil {
					t.Skipf("%s reads %s, which is absent", name, shared)
				}
			}
			t.Setenv("PIPE_CACHE", t.TempDir())
			f, err := pipefile.Parse(name, string(text), env)
			if err != nil {
				t.Fatal(err)
			}
			p, err := loadFile(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, name, p, env)
		})
	}
}

// smallCIFAR is a CIFAR-10 directory of 10 records per file, for the
// examples that read CIFAR-10 (their round trip needs a source, not 170 MB
// to decompress).
func smallCIFAR(t *testing.T) string {
	dir := t.TempDir()
	for _, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		b := make([]byte, 10*3073)
		for i := range 10 {
			b[i*3073] = byte(i)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadChecksBeforeOpening: a file whose stages are out of order is
// refused before its source is opened: here opening would fail (the path
// does not exist), and the error must be about the order instead.
func TestLoadChecksBeforeOpening(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "x.pipe")
	text := "source cifar10 path=" + filepath.Join(dir, "missing.tar.gz") + "\nbatch 8\nrandom_crop 32\n"
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(context.Background(), name)
	if err == nil || !strings.Contains(err.Error(), "x.pipe:3:1: random_crop") || !strings.Contains(err.Error(), "must come before batch") {
		t.Fatalf("want the order error at line 3, got %v", err)
	}
}

// TestGoBuiltStringRoundTrip (issue 24): a pipeline built in Go, from
// sources opened in Go, writes a String that parses back to an equal
// pipeline: its source line names the source's parameters, not its
// identity ("unexpected value /…tar.gz" before).
func TestGoBuiltStringRoundTrip(t *testing.T) {
	ctx := context.Background()
	t.Setenv("PIPE_CACHE", t.TempDir())
	rest := func(src source.Source) []Stage {
		return imagenetRecipe(src, 4)
	}
	cifarRest := func(src source.Source) []Stage {
		return []Stage{Source(src), Shuffle(3), Batching(8, false), ToTensor(transform.NCHW, transform.Float32)}
	}
	cases := map[string]func(t *testing.T) []Stage{
		"synthetic": func(t *testing.T) []Stage {
			s, err := source.NewSynthetic(40, source.Test, 9, source.WithShuffledLabels())
			if err != nil {
				t.Fatal(err)
			}
			return cifarRest(s)
		},
		"cifar10": func(t *testing.T) []Stage {
			s, err := source.OpenCIFAR10(ctx, smallCIFAR(t), source.Test)
			if err != nil {
				t.Fatal(err)
			}
			return cifarRest(s)
		},
		"image_folder": func(t *testing.T) []Stage {
			dir := shareddata.Path(t, "imagenet-sample")
			s, err := source.OpenFolder(ctx, dir, source.WithLabels(filepath.Join(dir, "labels.csv")))
			if err != nil {
				t.Fatal(err)
			}
			return rest(s)
		},
		"tfrecord": func(t *testing.T) []Stage {
			dir := shareddata.Path(t, "tfrecord")
			s, err := source.OpenTFRecord(ctx, filepath.Join(dir, "train-*"), source.WithLabelOffset(1), source.WithIndexDir(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			return rest(s)
		},
		"webdataset": func(t *testing.T) []Stage {
			s, err := source.OpenWebDataset(ctx, shareddata.Path(t, "webdataset/sample.tgz"))
			if err != nil {
				t.Fatal(err)
			}
			return rest(s)
		},
	}
	for name, stages := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, stages(t)...)
			if first, _, _ := strings.Cut(p.String(), "\n"); !strings.HasPrefix(first, "source "+name+" ") || strings.Contains(first, "#") {
				t.Errorf("source line %q", first)
			}
			roundTrip(t, name, p, nil)
		})
	}
}

// ownSource is a source of a program's own, which no .pipe line opens.
type ownSource struct{ *source.Synthetic }

func (s ownSource) Info() source.Info {
	return source.Info{Name: "mine", Identity: "mine from the database", C: 3, H: 32, W: 32, Classes: source.SyntheticClasses}
}

// TestOwnSourceString: a source of the program's own is written as its
// name with its identity in a comment, and parsing that says the source is
// unknown rather than taking the identity for parameters.
func TestOwnSourceString(t *testing.T) {
	s, _ := source.NewSynthetic(8, source.Train, 0)
	p := mustNew(t, Source(ownSource{s}), Batching(4, false), ToTensor(transform.NCHW, transform.Float32))
	defer p.Close()
	first, _, _ := strings.Cut(p.String(), "\n")
	if first != "source mine # mine from the database" {
		t.Fatalf("source line %q", first)
	}
	if _, err := pipefile.Parse("x", p.String(), nil); err == nil || !strings.Contains(err.Error(), "mine") {
		t.Errorf("parsing it: %v", err)
	}
}
