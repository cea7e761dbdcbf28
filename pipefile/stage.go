package pipefile

// A stage, the config its stages compile to, and the errors about them.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pipefeed/pipe/cache"
	"github.com/pipefeed/pipe/engine"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// Stage is one step of a pipeline, made by a constructor of this package
// (re-exported by package pipe) or from a .pipe line by its Spec. Its
// String is its canonical .pipe line, every parameter written out, so a
// pipeline's stages print as a file that builds the same pipeline.
type Stage struct {
	name string
	line string
	// src is a source stage's opened source, or open opens it (a source
	// stage from a .pipe line, before Open).
	src  source.Source
	open func(ctx context.Context, o *OpenOptions) (source.Source, error)
	op   transform.Op // set for image operations
	// schema is a fields stage's schema, which File.Open opens the
	// sources with.
	schema *fields.Schema
	// apply records the stage in a Compiled; it checks what can be checked
	// without the data: order and parameters.
	apply func(*Compiled) error
}

func (s Stage) String() string { return s.line }

// Name is the stage's registry name.
func (s Stage) Name() string { return s.name }

// Source returns a source stage's source, or nil before it is opened.
func (s Stage) Source() source.Source { return s.src }

// Op returns an image operation stage's operation, or nil.
func (s Stage) Op() transform.Op { return s.op }

// Compiled is a pipeline's stages gathered and checked for order and
// parameters, before anything is read. Compile makes it.
type Compiled struct {
	Source source.Source
	// Schema is the fields stage's schema; nil without one (an image and
	// an int label).
	Schema *fields.Schema
	// Ops are the image operations in order; Ops[:CacheAt] precede the
	// cache stage.
	Ops     []transform.Op
	CacheAt int
	Cache   *cache.Config
	// Decode is set by a decode stage; Reduce is its reduce= and
	// MaxPixels its max_pixels=.
	Decode, Reduce bool
	MaxPixels      int
	Norm           *transform.Normalization
	NormOnDevice   bool
	Layout         transform.Layout
	DType          transform.DType
	Shuffle        bool
	ShuffleBuffer  int
	Seed           uint64
	SeedSet        bool
	Rank, World    int
	Elastic        bool
	Batch          int
	DropLast       bool
	Workers        int   // 0: one per core
	AutoWorkers    bool  // workers=auto (the default)
	AutoDepth      bool  // prefetch depth=auto (the default)
	Memory         int64 // workers=auto's and depth=auto's budget in bytes; 0: engine.DefaultMemory
	OnError        engine.Policy
	Prefetch       *PrefetchConfig
	Train          *TrainConfig
	Eval           *EvalConfig

	// Mix is the mixup and cutmix stages, whose Classes is 0 where they
	// take the source's classes; nil without them.
	Mix *engine.Mix

	afterBatch, haveTensor, afterPrefetch, afterTrain bool
	given                                             map[string]bool // the stages seen, but image operations
}

// ErrConfig is wrapped by every error about stages that do not fit
// together, as opposed to errors reading data.
var ErrConfig = errors.New("invalid pipeline")

// StageError is an error in one stage: Index is its position in the stage
// list (from 0).
type StageError struct {
	Index int
	Stage string
	Err   error
}

// Error is the stage's name and the error, said once where the error
// already starts with the name (a source's own errors do).
func (e *StageError) Error() string {
	msg := e.Err.Error()
	if strings.HasPrefix(msg, e.Stage+": ") {
		return msg
	}
	return e.Stage + ": " + msg
}

func (e *StageError) Unwrap() error { return e.Err }

// Errorf is a StageError about stage i of stages, wrapping ErrConfig.
func Errorf(stages []Stage, i int, format string, args ...any) error {
	return &StageError{Index: i, Stage: stages[i].name, Err: fmt.Errorf("%w: %w", ErrConfig, fmt.Errorf(format, args...))}
}

// Compile checks the order and parameters of stages and gathers them into a
// Compiled. It reads no data: sources may still be unopened.
func Compile(stages []Stage) (*Compiled, error) {
	c := &Compiled{World: 1, Layout: transform.NCHW, DType: transform.Float32, AutoWorkers: true}
	for i, s := range stages {
		err := c.add(i, s)
		switch {
		case err != nil:
		case s.name == "source":
			c.Source = s.src
		case s.name == "eval":
			c.Eval.Source = s.src
		}
		if err != nil {
			return nil, Errorf(stages, i, "%w", err)
		}
	}
	switch {
	case len(stages) == 0:
		return nil, fmt.Errorf("%w: no source stage", ErrConfig)
	case c.Batch == 0:
		return nil, fmt.Errorf("%w: no batch stage (add e.g. \"batch 256\")", ErrConfig)
	case c.Eval != nil && c.Train == nil:
		return nil, Errorf(stages, Index(stages, "eval"), "eval needs a train stage before it")
	}
	return c, nil
}

func (c *Compiled) add(i int, s Stage) error {
	switch {
	case c.afterTrain && s.name != "eval":
		return errors.New("only eval may follow train")
	case c.afterPrefetch && s.name != "train" && s.name != "eval":
		return errors.New("nothing may follow prefetch: it hands batches to the devices")
	case i > 0 && s.name == "source":
		return errors.New("source must be the first stage")
	case i == 0 && s.name != "source":
		return fmt.Errorf("the first stage must be source, not %s", s.name)
	case c.Mix != nil && (s.name == "to_tensor" || s.name == "normalize"):
		return fmt.Errorf("%s must come before mixup and cutmix: they mix finished batches", s.name)
	}
	// Every stage but the image operations is given once: a second would
	// merge with the first or override it without a word.
	if s.op == nil {
		if c.given[s.name] {
			return errors.New("given twice: write all its parameters on one line")
		}
		if c.given == nil {
			c.given = map[string]bool{}
		}
		c.given[s.name] = true
	}
	c.afterTrain = c.afterTrain || s.name == "train"
	c.afterPrefetch = c.afterPrefetch || s.name == "prefetch"
	return s.apply(c)
}

// Index is the position of the first stage called name, or -1.
func Index(stages []Stage, name string) int {
	for i, s := range stages {
		if s.name == name {
			return i
		}
	}
	return -1
}

// quote writes a value so that the parser reads it back whole: in double
// quotes where it is empty or holds a space, a tab, '#' or a quote, each
// quote of it doubled.
func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \t#\"") {
		return `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
	}
	return v
}
