package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/source"
)

// checkEpochs is how many epochs' orders pipe check simulates where the
// file has no train stage to say.
const checkEpochs = 10

func newCheck() *cobra.Command {
	var epochs int
	c := &cobra.Command{
		Use:   "check FILE",
		Short: "validate a pipeline: parse it, open its data, and print the plan without running it",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if epochs < 0 {
				return usageError{fmt.Errorf("--epochs=%d: must be 0 (the train stage's epochs=, else %d) or more", epochs, checkEpochs)}
			}
			p, err := load(c, args[0])
			if err != nil {
				return err
			}
			defer p.Close()
			// Corrupt records found as the data opened stop a run before
			// its first batch (on_error=fail); check says so too.
			if err := p.Corrupt(); err != nil {
				return err
			}
			// So does an epoch whose order a streamed source cannot read
			// through its shard cache: a run refuses it before its first.
			if epochs == 0 {
				epochs = checkEpochs
				if s := p.Summary(); s.Train {
					epochs = s.TrainEpochs
				}
			}
			checked, err := p.CheckOrders(0, epochs)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			fmt.Fprint(out, describe(p))
			if checked > 0 {
				fmt.Fprintf(out, "stream   the orders of epochs 0-%d pass through the shard cache", checked-1)
				if checked < epochs {
					fmt.Fprintf(out, " (of %d: later ones are checked as they start)", epochs)
				}
				fmt.Fprintln(out)
			}
			fmt.Fprintln(out, "stages:")
			for _, s := range p.Stages() {
				fmt.Fprintf(out, "  %s\n", source.RedactURLs(s.String()))
			}
			fmt.Fprintf(out, "%s: ok\n", args[0])
			return nil
		},
	}
	c.Flags().IntVar(&epochs, "epochs", 0, fmt.Sprintf("epochs whose order a source streaming its shards is checked for (0: the train stage's epochs=, else %d)", checkEpochs))
	return c
}

func newStages() *cobra.Command {
	var asJSON, asMarkdown bool
	c := &cobra.Command{
		Use:   "stages",
		Short: "list every source and stage with its parameters",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case asJSON && asMarkdown:
				return usageError{errors.New("stages: --json and --markdown are two outputs; give one of them")}
			case asJSON:
				return writeStagesJSON(c.OutOrStdout())
			case asMarkdown:
				fmt.Fprint(c.OutOrStdout(), stagesMarkdown())
				return nil
			}
			fmt.Fprint(c.OutOrStdout(), stagesText())
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the registry as JSON, for programs (pipefeed's Pipeline is generated from it)")
	c.Flags().BoolVar(&asMarkdown, "markdown", false, "print the registry as Markdown: docs/stages.md is this output")
	return c
}

// stageSpec is a registry spec as pipe stages --json writes it, an
// interface programs rely on: pipefeed generates its Pipeline's methods
// from it, and its tests compare the two.
type stageSpec struct {
	Name   string      `json:"name"`
	Kind   string      `json:"kind"` // "source" (written "source NAME ...") or "stage"
	Doc    string      `json:"doc"`
	Params []paramSpec `json:"params"`
}

// paramSpec is a parameter of a stageSpec; every key is always written.
type paramSpec struct {
	Name string `json:"name"`
	Type string `json:"type"` // int, float, bool, string, enum or floats (comma-separated)
	// Default is the value when the parameter is not given, in .pipe
	// syntax; null: none (the stage decides, as Doc says).
	Default    *string `json:"default"`
	Required   bool    `json:"required"`
	Positional bool    `json:"positional"` // may be given without "name=", in order
	// Enum is the values an enum takes (null for other types); Auto says
	// an int may also be the word auto.
	Enum []string `json:"enum"`
	Auto bool     `json:"auto"`
	// Min and Max bound a number, or each number of floats, inclusively
	// (null: unbounded); Why says why Max is the bound.
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
	Why string   `json:"why"`
	Doc string   `json:"doc"`
}

// writeStagesJSON writes what pipe stages --json prints.
func writeStagesJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // docs say <hex> and &
	enc.SetIndent("", "  ")
	return enc.Encode(stagesJSON())
}

// stagesJSON is the registry as pipe stages --json writes it: an array of
// every spec, in the order of pipe stages (sources first, then by name).
func stagesJSON() []stageSpec {
	var out []stageSpec
	for _, s := range pipefile.Stages() {
		st := stageSpec{Name: s.Name, Kind: s.Kind, Doc: s.Summary, Params: []paramSpec{}}
		for _, p := range s.Params {
			ps := paramSpec{Name: p.Name, Type: p.Type.String(), Required: p.Required, Positional: p.Positional,
				Enum: p.Enum, Auto: p.Auto, Min: p.Min, Max: p.Max, Why: p.Why, Doc: p.Doc}
			if p.Default != "" {
				ps.Default = &p.Default
			}
			st.Params = append(st.Params, ps)
		}
		out = append(out, st)
	}
	return out
}

// stagesText renders the registry as pipe stages prints it.
func stagesText() string {
	var b strings.Builder
	for _, s := range pipefile.Stages() {
		fmt.Fprintf(&b, "%s\n    %s\n", specHeading(s), s.Summary)
		for _, p := range s.Params {
			typ := p.Type.String()
			if p.Type == pipefile.Enum {
				typ = strings.Join(p.Enum, "|")
			}
			if p.Auto {
				typ += "|auto"
			}
			def := ""
			switch {
			case p.Required:
				def = " (required)"
			case p.Default != "":
				def = " = " + p.Default
			}
			pos := ""
			if p.Positional {
				pos = " [positional]"
			}
			rng := ""
			if lo, hi, ok := paramRange(p); ok {
				rng = fmt.Sprintf(" in [%s, %s]", lo, hi)
			}
			fmt.Fprintf(&b, "    %-10s %s%s%s%s\n               %s\n", p.Name, typ, def, rng, pos, p.Doc)
			if p.Why != "" {
				fmt.Fprintf(&b, "               (at most %s: %s)\n", strconv.FormatFloat(*p.Max, 'f', -1, 64), p.Why)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// stagesMarkdown renders the registry as Markdown; it is docs/stages.md,
// which TestStagesMarkdown keeps equal to it. Each spec is a heading (its
// anchor is the GitHub slug of "source cifar10" or "random_crop") with its
// summary and a table of its parameters.
func stagesMarkdown() string {
	var b strings.Builder
	b.WriteString("# Stage reference\n\n" +
		"This is the output of `pipe stages --markdown`: the parser, this list, `pipe stages` and the Go API all\n" +
		"come from one registry. Do not edit it by hand; after changing a spec, run\n" +
		"`go run ./cmd/pipe stages --markdown > docs/stages.md`. How a `.pipe` file is written is in\n" +
		"[pipe-files.md](pipe-files.md).\n\n")
	specs := pipefile.Stages()
	for _, kind := range []string{"source", "stage"} {
		var links []string
		for _, s := range specs {
			if s.Kind == kind {
				links = append(links, fmt.Sprintf("[%s](#%s)", mdEscape(s.Name), mdSlug(specHeading(s))))
			}
		}
		title := map[string]string{"source": "Sources", "stage": "Stages"}[kind]
		fmt.Fprintf(&b, "%s: %s.\n\n", title, strings.Join(links, ", "))
	}
	b.WriteString("In the tables a parameter marked *positional* may be given without `name=`, in order after\n" +
		"the stage's name; a range is inclusive, and an empty side is unbounded.\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", mdEscape(specHeading(s)), mdEscape(s.Summary))
		if len(s.Params) == 0 {
			continue
		}
		b.WriteString("\n| parameter | type | default | range | meaning |\n|---|---|---|---|---|\n")
		for _, p := range s.Params {
			name := "`" + p.Name + "`"
			if p.Positional {
				name += " *positional*"
			}
			typ := p.Type.String()
			if p.Type == pipefile.Enum {
				typ = strings.Join(p.Enum, " \\| ")
			}
			if p.Auto {
				typ += " or `auto`"
			}
			def := ""
			switch {
			case p.Required:
				def = "required"
			case p.Default != "":
				def = "`" + p.Default + "`"
			}
			rng := ""
			if lo, hi, ok := paramRange(p); ok {
				rng = fmt.Sprintf("\\[%s, %s\\]", lo, hi)
			}
			doc := mdEscape(p.Doc)
			if p.Why != "" {
				doc += fmt.Sprintf(" (at most %s: %s)", strconv.FormatFloat(*p.Max, 'f', -1, 64), mdEscape(p.Why))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, typ, def, rng, doc)
		}
	}
	return b.String()
}

// paramRange is p's bounds as the listings write them, an unbounded side
// empty; ok is false where neither side is bounded.
func paramRange(p pipefile.Param) (lo, hi string, ok bool) {
	if p.Min != nil {
		lo = strconv.FormatFloat(*p.Min, 'f', -1, 64)
	}
	if p.Max != nil {
		hi = strconv.FormatFloat(*p.Max, 'f', -1, 64)
	}
	return lo, hi, p.Min != nil || p.Max != nil
}

// specHeading is how a spec is written in a .pipe file: "source cifar10"
// for a source, its name for a stage.
func specHeading(s *pipefile.StageSpec) string {
	if s.Kind == "source" {
		return "source " + s.Name
	}
	return s.Name
}

// mdEscape makes registry text literal Markdown: the characters that would
// start emphasis, a link, an HTML tag, a table cell, strikethrough or math
// are backslash-escaped.
var mdEscape = strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`,
	"[", `\[`, "]", `\]`, "<", `\<`, ">", `\>`, "|", `\|`, "~", `\~`, "$", `\$`).Replace

// mdSlug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, other punctuation but hyphens and underscores dropped.
func mdSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
