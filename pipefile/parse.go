package pipefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	Spec *StageSpec
	Args Args
}

// File is a parsed .pipe file.
type File struct {
	Name  string
	Lines []Line
}

// ParseFile reads and parses a .pipe file. It reads at most MaxFileBytes,
// refusing a longer file (or /dev/zero) before reading it whole, and stops
// when ctx is done, also while it waits for a FIFO's writer.
func ParseFile(ctx context.Context, name string) (*File, error) {
	b, err := readFile(ctx, name)
	if err != nil {
		return nil, err
	}
	return Parse(name, string(b), os.LookupEnv)
}

// The bounds of a .pipe file, far above any real one (the longest example
// is 2 KB), so that a file that is not a .pipe file, or an expansion that
// runs away, is refused at once rather than filling memory.
const (
	// MaxFileBytes bounds the file.
	MaxFileBytes = 1 << 20
	// maxLines bounds its lines, comments and blank ones included.
	maxLines = 10000
	// maxLine bounds a line (a path is at most 4 KiB on Linux).
	maxLine = 64 << 10
	// maxValue bounds a parameter's value after ${VAR} expansion, and
	// maxExpanded every value of the file together.
	maxValue    = 64 << 10
	maxExpanded = 4 << 20
)

// readFile reads name, at most MaxFileBytes of it. A FIFO or a device is
// opened without blocking and read through the runtime's poller, so that
// ctx stops a read that waits for a writer or for data.
func readFile(ctx context.Context, name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return nil, &os.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	case fi.Mode().IsRegular():
		if fi.Size() > MaxFileBytes {
			return nil, tooLong(name)
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readLimited(f, name)
	}
	f, err := openStream(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		b, err := readLimited(f, name)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w", name, context.Cause(ctx))
		}
		// A FIFO opened without blocking reads as empty until a writer
		// opens it: wait for one, as a blocking open would, but stoppably.
		if err != nil || len(b) > 0 || fi.Mode()&os.ModeNamedPipe == 0 {
			return b, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func readLimited(f *os.File, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, tooLong(name)
	}
	return b, nil
}

func tooLong(name string) error {
	return &SyntaxError{Pos: Pos{File: name, Line: 1, Col: 1}, Msg: fmt.Sprintf("the file is over %d bytes; a .pipe file is at most that (is this a .pipe file?)", MaxFileBytes)}
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
	if len(src) > MaxFileBytes {
		return nil, tooLong(name)
	}
	// A UTF-8 byte-order mark, as some Windows editors write, is not text.
	src = strings.TrimPrefix(src, "\ufeff")
	x := &expander{env: env, left: maxExpanded}
	i := -1
	for raw := range strings.Lines(src) {
		i++
		raw = strings.TrimSuffix(raw, "\n")
		pos := Pos{File: name, Line: i + 1, Col: 1}
		if i >= maxLines {
			return nil, &SyntaxError{Pos: pos, Msg: fmt.Sprintf("a .pipe file is at most %d lines (is this a .pipe file?)", maxLines)}
		}
		if len(raw) > maxLine {
			return nil, &SyntaxError{Pos: pos, Msg: fmt.Sprintf("the line is %d bytes long; a .pipe line is at most %d (is this a .pipe file?)", len(raw), maxLine)}
		}
		toks, err := tokenize(strings.TrimSuffix(raw, "\r"))
		if err != nil {
			pos.Col = err.col
			return nil, &SyntaxError{Pos: pos, Msg: err.msg}
		}
		if len(toks) == 0 {
			continue
		}
		l, err2 := parseLine(pos, toks, x)
		if err2 != nil {
			return nil, err2
		}
		f.Lines = append(f.Lines, l)
	}
	return f, nil
}

// clip is s for an error message: quoted, and cut short with its length
// where it is longer than any name or value a person would type.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", strings.ToValidUTF8(s[:max], ""), len(s))
}

type tokErr struct {
	col int
	msg string
}

// tokenize splits a line into words at spaces and tabs; double quotes keep
// spaces inside a word ("" inside them is a quote of the value) and '#'
// outside quotes starts a comment.
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
			if c == '"' && quoted && i+1 < len(line) && line[i+1] == '"' {
				// Two quotes inside quotes are one quote of the value.
				b.WriteByte('"')
				i += 2
				continue
			}
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

// expander expands the ${VAR} references of a file's values through env,
// within maxValue bytes a value and left bytes in all.
type expander struct {
	env  func(string) (string, bool)
	left int
}

// expand replaces ${VAR}, ${VAR:-default} and ${VAR:?message} in s: the
// last is an error carrying message where VAR is unset or empty, for a file
// that needs a path only its user can give. It stops, with an error, as
// soon as the value would pass maxValue bytes or the file's values
// maxExpanded.
func (x *expander) expand(s string) (string, error) {
	var out strings.Builder
	write := func(v string) error {
		if out.Len()+len(v) > maxValue {
			return fmt.Errorf("the value expands to over %d bytes; a value is at most that", maxValue)
		}
		if x.left < len(v) {
			return fmt.Errorf("the file's values expand to over %d bytes in all; a .pipe file's are at most that", maxExpanded)
		}
		x.left -= len(v)
		out.WriteString(v)
		return nil
	}
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			if err := write(s); err != nil {
				return "", err
			}
			return out.String(), nil
		}
		if err := write(s[:i]); err != nil {
			return "", err
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New("unterminated ${")
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		name, msg, required := strings.Cut(name, ":?")
		if name == "" || strings.ContainsAny(name, " $:{") || (hasDef && required) {
			return "", fmt.Errorf("bad variable reference ${%s}", ref)
		}
		v, ok := x.env(name)
		var err error
		switch {
		case required && v == "":
			return "", fmt.Errorf("environment variable %s is not set: %s", name, msg)
		case ok && (v != "" || !hasDef):
			err = write(v)
		case hasDef:
			err = write(def)
		default:
			return "", fmt.Errorf("environment variable %s is not set (set it, or write ${%s:-default})", name, name)
		}
		if err != nil {
			return "", err
		}
		s = s[i+end+1:]
	}
}

func parseLine(pos Pos, toks []token, x *expander) (Line, error) {
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
		msg := fmt.Sprintf("unknown %s %s", kind, clip(name))
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
				msg := fmt.Sprintf("unknown parameter %s", clip(key))
				if s := suggest(key, ps); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				} else if len(ps) > 0 {
					msg += " (it takes " + strings.Join(ps, ", ") + ")"
				} else {
					msg += " (it takes no parameters)"
				}
				return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Msg: msg}
			}
		} else if q := spec.Param(t.text); q != nil && q.Bare {
			p, val = q, ""
		} else {
			val = t.text
			for _, q := range positional {
				if !given[q.Name] {
					p = q
					break
				}
			}
			if p == nil {
				var bare []string
				for _, q := range spec.Params {
					if q.Bare {
						bare = append(bare, q.Name)
					}
				}
				if len(bare) > 0 {
					msg := fmt.Sprintf("unknown field %s", clip(t.text))
					if s := suggest(t.text, bare); s != "" {
						msg += fmt.Sprintf(" (did you mean %q?)", s)
					} else {
						msg += " (the fields are " + strings.Join(bare, ", ") + ")"
					}
					return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Msg: msg}
				}
				return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Msg: fmt.Sprintf("unexpected value %s (write name=value)", clip(t.text))}
			}
		}
		if given[p.Name] {
			return Line{}, &SyntaxError{Pos: at, Stage: spec.Name, Param: p.Name, Msg: "given twice"}
		}
		given[p.Name] = true
		v, err := x.expand(val)
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

// Stages makes the file's stages, in order, without opening anything:
// source stages (and eval's held-out source) are opened by Open. Errors
// from a stage's constructor are reported at its line.
func (f *File) Stages() ([]Stage, error) {
	var stages []Stage
	for i, l := range f.Lines {
		s, err := l.Spec.Build(l.Args)
		if err != nil {
			return nil, &SyntaxError{Pos: l.Pos, Stage: l.Spec.Name, Msg: strings.TrimPrefix(err.Error(), l.Spec.Name+": ")}
		}
		if s.name == "eval" {
			if i == 0 || f.Lines[0].Spec.Kind != "source" {
				return nil, &SyntaxError{Pos: l.Pos, Stage: "eval", Msg: "eval reads another split of the source: it needs a source stage first"}
			}
			first, split := f.Lines[0], l.Args.String("split")
			s.open = func(ctx context.Context, o *OpenOptions) (source.Source, error) {
				if first.Spec.Param("split") == nil {
					return nil, fmt.Errorf("source %s has no split to evaluate on", first.Spec.Name)
				}
				src, err := first.Spec.Build(first.Args.with("split", split))
				if err != nil {
					return nil, err
				}
				return src.open(ctx, o)
			}
		}
		stages = append(stages, s)
	}
	return stages, nil
}

// Open opens the sources of stages made by Stages, in order, and returns
// the stages with them. An error names the line of its stage; a corrupt or
// unreachable dataset keeps its sentinel (source.ErrFormat, ErrChecksum,
// ErrDownload, ErrLabel) and a cancellation its context error for
// errors.Is. On error, what was opened is closed again.
func (f *File) Open(ctx context.Context, stages []Stage, o *OpenOptions) ([]Stage, error) {
	oo := OpenOptions{}
	if o != nil {
		oo = *o
	}
	o = &oo
	for _, s := range stages {
		if s.schema != nil {
			o.Fields = s.schema
		}
	}
	out := append([]Stage(nil), stages...)
	for i := range out {
		s := &out[i]
		if s.open == nil || s.src != nil {
			continue
		}
		src, err := s.open(ctx, o)
		if err != nil {
			Close(out[:i])
			pos := f.Lines[i].Pos
			if isDataError(err) || ctx.Err() != nil {
				name := f.Lines[i].Spec.Name + ": "
				if strings.HasPrefix(err.Error(), name) {
					name = "" // the source's error names it already
				}
				return nil, fmt.Errorf("%s: %s%w", pos, name, err)
			}
			return nil, &SyntaxError{Pos: pos, Stage: f.Lines[i].Spec.Name, Msg: strings.TrimPrefix(err.Error(), f.Lines[i].Spec.Name+": ")}
		}
		s.src = src
	}
	return out, nil
}

func isDataError(err error) bool {
	for _, e := range []error{source.ErrFormat, source.ErrChecksum, source.ErrDownload, source.ErrLabel, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close closes the opened sources of stages.
func Close(stages []Stage) error {
	var errs []error
	for _, s := range stages {
		if s.src != nil {
			errs = append(errs, s.src.Close())
		}
	}
	return errors.Join(errs...)
}

// Pos returns the position of stage i of the file's stages.
func (f *File) Pos(i int) Pos { return f.Lines[i].Pos }

// suggest returns the candidate closest to s by edit distance, if it is
// close enough to be a likely typo.
func suggest(s string, candidates []string) string {
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		// The distance is at least the difference in length: a long word
		// costs no more than a short one.
		if abs(len(s)-len(c)) > limit {
			continue
		}
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" || len(s) < 3 {
		return best
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, s) || strings.HasPrefix(s, c) {
			return c
		}
	}
	return ""
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
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
