package pipe

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pipefeed/pipe/source"
)

// Pos is a place in a .pipe file; Line and Col count from 1.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// SyntaxError is an error in a .pipe file, at a position, about a stage and
// (where there is one) a parameter.
type SyntaxError struct {
	Pos   Pos
	Stage string
	Param string
	Msg   string
}

func (e *SyntaxError) Error() string {
	s := e.Pos.String() + ": "
	if e.Stage != "" {
		s += e.Stage + ": "
	}
	if e.Param != "" {
		s += e.Param + ": "
	}
	return s + e.Msg
}

// Line is one parsed stage line: its spec and validated arguments.
type Line struct {
	Pos  Pos
	Spec *Spec
	Args Args
}

// File is a parsed .pipe file.
type File struct {
	Name  string
	Lines []Line
}

// ParseFile reads and parses a .pipe file.
func ParseFile(name string) (*File, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return Parse(name, string(b), os.LookupEnv)
}

type token struct {
	text string
	col  int
}

// Parse parses .pipe source; name is used in error positions and env looks
// up ${VAR} references (os.LookupEnv in ParseFile). It checks every stage
// name, parameter name, type and range, and reports the first error.
func Parse(name, src string, env func(string) (string, bool)) (*File, error) {
	f := &File{Name: name}
	for i, raw := range strings.Split(src, "\n") {
		pos := Pos{File: name, Line: i + 1, Col: 1}
		toks, err := tokenize(strings.TrimSuffix(raw, "\r"))
		if err != nil {
			pos.Col = err.col
			return nil, &SyntaxError{Pos: pos, Msg: err.msg}
		}
		if len(toks) == 0 {
			continue
		}
		l, err2 := parseLine(pos, toks, env)
		if err2 != nil {
			return nil, err2
		}
		f.Lines = append(f.Lines, l)
	}
	return f, nil
}

type tokErr struct {
	col int
	msg string
}

// tokenize splits a line into words at spaces and tabs; double quotes keep
// spaces inside a word and '#' outside quotes starts a comment.
func tokenize(line string) ([]token, *tokErr) {
	var toks []token
	i := 0
	for i < len(line) {
		c := line[i]
		if c == ' ' || c == '\t' {
			i++
			continue
		}
		if c == '#' {
			break
		}
		start := i
		var b strings.Builder
		quoted := false
		for i < len(line) {
			c := line[i]
			if c == '"' {
				quoted = !quoted
				i++
				continue
			}
			if !quoted && (c == ' ' || c == '\t' || c == '#') {
				break
			}
			b.WriteByte(c)
			i++
		}
		if quoted {
			return nil, &tokErr{col: start + 1, msg: "unterminated quote"}
		}
		toks = append(toks, token{text: b.String(), col: start + 1})
	}
	return toks, nil
}

// expand replaces ${VAR} and ${VAR:-default} in s.
func expand(s string, env func(string) (string, bool)) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		out.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New("unterminated ${")
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if name == "" || strings.ContainsAny(name, " $:{") {
			return "", fmt.Errorf("bad variable reference ${%s}", ref)
		}
		v, ok := env(name)
		switch {
		case ok && (v != "" || !hasDef):
			out.WriteString(v)
		case hasDef:
			out.WriteString(def)
		default:
			return "", fmt.Errorf("environment variable %s is not set (set it, or write ${%s:-default})", name, name)
		}
		s = s[i+end+1:]
	}
}

func parseLine(pos Pos, toks []token, env func(string) (string, bool)) (Line, error) {
	kind, name := "stage", toks[0].text
	rest := toks[1:]
	pos.Col = toks[0].col
	if name == "source" {
		if len(rest) == 0 || strings.Contains(rest[0].text, "=") {
			return Line{}, &SyntaxError{Pos: pos, Stage: "source", Msg: "missing the source name (one of " + strings.Join(names("source"), ", ") + ")"}
		}
		kind, name = "source", rest[0].text
		pos.Col = rest[0].col
		rest = rest[1:]
	}
	spec := Lookup(kind, name)
	if spec == nil {
		msg := fmt.Sprintf("unknown %s %q", kind, name)
		if s := suggest(name, names(kind)); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		} else if Lookup("source", name) != nil {
			msg += fmt.Sprintf(" (sources are written \"source %s ...\")", name)
		} else {
			msg += " (`pipe stages` lists them)"
		}
		return Line{}, &SyntaxError{Pos: pos, Msg: msg}
	}
	l := Line{Pos: pos, Spec: spec, Args: Args{spec: spec, vals: map[string]string{}}}
	var positional []*Param
	for i := range spec.Params {
		if spec.Params[i].Positional {
			positional = append(positional, &spec.Params[i])
		}
	}
	given := map[string]bool{}
	for _, t := range rest {
		at := pos
		at.Col = t.col
		key, val, named := strings.Cut(t.text, "=")
		var p *Param
		if named {
			if p = spec.Param(key); p == nil {
				var ps []string
				for _, q := range spec.Params {
					ps = append(ps, q.Name)
				}
				msg := fmt.Sprintf("unknown parameter %q", key)
				if s := suggest(key, ps); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				} else if len(ps) > 0 {
					msg += " (it takes " + strings.Join(ps, ", ") + ")"
				} else {
					msg += " (it takes no parameters)"
				}
				return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Msg: msg}
			}
		} else {
			val = t.text
			for _, q := range positional {
				if !given[q.Name] {
					p = q
					break
				}
			}
			if p == nil {
				return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Msg: fmt.Sprintf("unexpected value %q (write name=value)", t.text)}
			}
		}
		if given[p.Name] {
			return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Param: p.Name, Msg: "given twice"}
		}
		given[p.Name] = true
		v, err := expand(val, env)
		if err != nil {
			return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Param: p.Name, Msg: err.Error()}
		}
		if p.Type != String || v != "" {
			if v, err = p.check(v); err != nil {
				return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Param: p.Name, Msg: err.Error()}
			}
		}
		l.Args.vals[p.Name] = v
	}
	for _, p := range spec.Params {
		if given[p.Name] {
			continue
		}
		if p.Required {
			return Line{}, &SyntaxError{Pos: pos, Stage: spec.Name, Param: p.Name, Msg: "required parameter missing: " + p.Doc}
		}
		if p.Default != "" {
			l.Args.vals[p.Name] = p.Default
		}
	}
	return l, nil
}

// LoadOption configures how a file's stages are built.
type LoadOption func(*loadConfig)

type loadConfig struct {
	progress    func(done, total int64)
	cacheClosed bool
	// reopen opens the file's source again with another split (for eval).
	reopen func(split string) (source.Source, error)
}

// WithCacheClosed builds the pipeline without opening its cache directory:
// its fingerprint is known (CacheInfo) but nothing is read or written. It
// is for tools that work on the cache directory themselves, like pipe
// cache gc.
func WithCacheClosed() LoadOption {
	return func(c *loadConfig) { c.cacheClosed = true }
}

// WithDownloadProgress reports the progress of downloads that sources make
// while they open (total is -1 when unknown).
func WithDownloadProgress(f func(done, total int64)) LoadOption {
	return func(c *loadConfig) { c.progress = f }
}

// Build turns a parsed file into stages, opening its source. Errors from a
// stage's constructor are reported at its line.
func (f *File) Build(opts ...LoadOption) ([]Stage, error) {
	cfg := &loadConfig{}
	for _, o := range opts {
		o(cfg)
	}
	var stages []Stage
	for i, l := range f.Lines {
		args := l.Args
		args.load = cfg
		if i == 0 {
			first := l
			cfg.reopen = func(split string) (source.Source, error) {
				if first.Spec.Param("split") == nil {
					return nil, fmt.Errorf("source %s has no split to evaluate on", first.Spec.Name)
				}
				a := first.Args.with("split", split)
				a.load = cfg
				s, err := first.Spec.Build(a)
				if err != nil {
					return nil, err
				}
				return s.src, nil
			}
		}
		s, err := l.Spec.Build(args)
		if err != nil {
			closeSources(stages)
			msg := strings.TrimPrefix(err.Error(), l.Spec.Name+": ")
			if isDataError(err) {
				// Bad bytes or a failed fetch, not a mistake in the file:
				// keep the sentinel for errors.Is, and the position.
				return nil, fmt.Errorf("%s: %s: %w", l.Pos, l.Spec.Name, err)
			}
			return nil, &SyntaxError{Pos: l.Pos, Stage: l.Spec.Name, Msg: msg}
		}
		stages = append(stages, s)
	}
	return stages, nil
}

func isDataError(err error) bool {
	for _, e := range []error{source.ErrFormat, source.ErrChecksum, source.ErrDownload, source.ErrLabel} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func closeSources(stages []Stage) {
	for _, s := range stages {
		if s.src != nil {
			s.src.Close()
		}
	}
}

// Load parses and builds a .pipe file into a pipeline. Errors in the file
// carry file:line:col; errors in how stages fit together also point at the
// line of the stage they are about.
func Load(name string, opts ...LoadOption) (*Pipeline, error) {
	f, err := ParseFile(name)
	if err != nil {
		return nil, err
	}
	return f.Pipeline(opts...)
}

// Pipeline builds the file's stages into a pipeline.
func (f *File) Pipeline(opts ...LoadOption) (*Pipeline, error) {
	stages, err := f.Build(opts...)
	if err != nil {
		return nil, err
	}
	cfg := &loadConfig{}
	for _, o := range opts {
		o(cfg)
	}
	if cfg.cacheClosed {
		stages = append(stages, Stage{name: "pipeline", desc: "", apply: func(b *builder) error {
			b.p.cacheClosed = true
			return nil
		}})
	}
	p, err := New(stages...)
	if err != nil {
		closeSources(stages)
		var se *StageError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: %w", f.Lines[se.Index].Pos, err)
		}
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return p, nil
}

// suggest returns the candidate closest to s by edit distance, if it is
// close enough to be a likely typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	if bestD <= limit || (best != "" && (strings.HasPrefix(best, s) || strings.HasPrefix(s, best)) && len(s) >= 3) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
