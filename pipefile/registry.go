package pipefile

// The registry: parameters, specs and their arguments, and the lookup of a
// stage by name.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
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
	// Bare lets a String parameter be written as its name alone, which
	// gives it the empty value ("fields image label": each read from the
	// source's default key); the canonical line writes it so.
	Bare bool
}

// StageSpec declares a stage: its name, parameters and constructor. Sources are
// specs of kind "source", used as "source NAME ...". A spec is a value: the
// registry holds them, `pipe stages` prints them, and the parser checks a
// line against one before its Build makes the stage, by calling the same
// constructor Go code calls.
type StageSpec struct {
	Name    string
	Kind    string // "source" or "stage"
	Summary string
	Params  []Param
	// Build makes the stage from validated arguments. A source spec's
	// Build opens nothing: it returns a stage that Open opens.
	Build func(a Args) (Stage, error)
}

// Param returns the parameter called name, or nil.
func (s *StageSpec) Param(name string) *Param {
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
	spec *StageSpec
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
		v, ok := a.vals[p.Name]
		switch {
		case ok && v == "" && p.Bare:
			parts = append(parts, p.Name)
		case ok && (v != "" || p.Type == String):
			parts = append(parts, p.Name+"="+quote(v))
		}
	}
	return strings.Join(parts, " ")
}

// canonical is the canonical line of stage name with the values kv gives
// (name, value, name, value, …; values printed with %v): the spec's
// parameters in the spec's order, as Args.Line writes a parsed line, so a
// constructor's line and the file's cannot differ in names, order or
// quoting. A name the spec lacks is a programming error: it panics.
func canonical(name string, kv ...any) string {
	spec := Lookup("stage", name)
	if spec == nil || len(kv)%2 != 0 {
		panic("pipefile: canonical line of unknown stage " + name)
	}
	vals := make(map[string]string, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if spec.Param(k) == nil {
			panic("pipefile: stage " + name + " has no parameter " + k)
		}
		vals[k] = fmt.Sprint(kv[i+1])
	}
	return Args{spec: spec, vals: vals}.Line()
}

// OpenOptions are passed to the sources a file's stages open.
type OpenOptions struct {
	// Progress reports the progress of downloads (total is -1 when
	// unknown).
	Progress func(done, total int64)
	// Fields is the fields stage's schema, which the sources are opened
	// with (source.WithFields); nil without one. File.Open sets it from
	// the stages.
	Fields *fields.Schema
}

// with returns opts with the fields the sources are to read.
func (o *OpenOptions) with(opts []source.Option) []source.Option {
	if o.Fields == nil {
		return opts
	}
	return append(opts, source.WithFields(o.Fields))
}

// opener makes a source stage of args whose source open opens.
func opener(a Args, open func(ctx context.Context, o *OpenOptions) (source.Source, error)) Stage {
	return Stage{name: "source", line: a.Line(), open: open, apply: setSource}
}

// Has reports whether the parameter was given or has a default.
func (a Args) Has(name string) bool { return a.vals[name] != "" }

// Given reports whether the parameter was given, if only as its bare name
// (Param.Bare), or has a default.
func (a Args) Given(name string) bool {
	_, ok := a.vals[name]
	return ok
}

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
// programs Register. It is filled in init, not by its initialiser: the
// specs' Build functions call the constructors, which read the registry
// for their canonical lines (canonical).
var registry = map[string]*StageSpec{}

func init() {
	for _, s := range builtin {
		key := s.Kind + ":" + s.Name
		if registry[key] != nil {
			panic("pipe: stage declared twice: " + key)
		}
		registry[key] = s
	}
}

// Register adds a spec to the registry, for programs with stages of their
// own; names are unique within a kind.
func Register(s *StageSpec) {
	key := s.Kind + ":" + s.Name
	if _, dup := registry[key]; dup {
		panic("pipe: stage registered twice: " + key)
	}
	registry[key] = s
}

// Lookup returns the spec of a stage ("stage") or source ("source").
func Lookup(kind, name string) *StageSpec { return registry[kind+":"+name] }

// Stages returns every registered spec, sources first, then by name.
func Stages() []*StageSpec {
	var out []*StageSpec
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

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// builtin are the sources and stages pipe ships: values, one per stage,
// each declared beside its constructor, walked by Stages and `pipe stages`.
var builtin = slices.Concat(sourceSpecs, []*StageSpec{fieldsSpec}, opSpecs, batchSpecs, trainSpecs, settingsSpecs)
