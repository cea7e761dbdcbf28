package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

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
	var asJSON bool
	c := &cobra.Command{
		Use:   "stages",
		Short: "list every source and stage with its parameters",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			if !asJSON {
				fmt.Fprint(c.OutOrStdout(), stagesText())
				return nil
			}
			return writeStagesJSON(c.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the registry as JSON, for programs (pipefeed's Pipeline is generated from it)")
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

// stagesText renders the registry; it is the reference in the README.
func stagesText() string {
	var b strings.Builder
	for _, s := range pipefile.Stages() {
		name := s.Name
		if s.Kind == "source" {
			name = "source " + s.Name
		}
		fmt.Fprintf(&b, "%s\n    %s\n", name, s.Summary)
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
			if p.Min != nil || p.Max != nil {
				lo, hi := "", ""
				if p.Min != nil {
					lo = strconv.FormatFloat(*p.Min, 'f', -1, 64)
				}
				if p.Max != nil {
					hi = strconv.FormatFloat(*p.Max, 'f', -1, 64)
				}
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
