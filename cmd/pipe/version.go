package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe"
)

func newVersion() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version [--json]",
		Short: "print the module version, Go version, build tags, JPEG decoder and whether CUDA and MPI are compiled in",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(pipe.BuildInfo())
			}
			fmt.Fprint(c.OutOrStdout(), versionText(pipe.BuildInfo()))
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

// versionText is what `pipe version` and `pipe --version` print.
func versionText(b pipe.Build) string {
	var s strings.Builder
	v := b.Version
	if b.Revision != "" {
		v += " (commit " + b.Revision
		if b.Modified {
			v += ", modified"
		}
		v += ")"
	}
	tags := strings.Join(b.Tags, ",")
	if tags == "" {
		tags = "none"
	}
	cuda := "not compiled in (build with -tags cuda)"
	if b.CUDA {
		cuda = "compiled in"
	}
	mpi := "not compiled in (build with -tags mpi, which needs Open MPI: scripts/openmpi installs it)"
	if b.MPI {
		mpi = "compiled in"
	}
	fmt.Fprintf(&s, "pipe %s %s\n", b.Module, v)
	fmt.Fprintf(&s, "go    %s\n", b.Go)
	fmt.Fprintf(&s, "tags  %s\n", tags)
	fmt.Fprintf(&s, "jpeg  %s\n", b.JPEG)
	fmt.Fprintf(&s, "cuda  %s\n", cuda)
	fmt.Fprintf(&s, "mpi   %s\n", mpi)
	return s.String()
}
