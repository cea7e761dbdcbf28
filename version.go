package pipe

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/trainer/mpi"
	"github.com/pipefeed/pipe/transform"
)

// Build describes the pipe library linked into this program: what `pipe
// --version` and `pipe version --json` print.
type Build struct {
	// Module is the module path and Version its version as the Go
	// toolchain recorded it: a release tag, a pseudo-version, or "(devel)"
	// for a build inside the repository (then Revision and Modified say
	// which commit, when the toolchain recorded it).
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the Go release that built the program, and Tags its build
	// tags (jpegturbo, cuda, purego), in the order given.
	Go   string   `json:"go"`
	Tags []string `json:"tags"`
	// JPEG names the JPEG decoder (transform.DecoderName): pipe's own, or
	// the libjpeg-turbo release of the jpegturbo build (the same pixels).
	JPEG string `json:"jpeg"`
	// CUDA reports whether the cuda build tag compiled the GPU device in,
	// and MPI whether the mpi build tag compiled multi-process training
	// in (trainer/mpi).
	CUDA bool `json:"cuda"`
	MPI  bool `json:"mpi"`
}

// BuildInfo returns what this program's build of pipe is.
func BuildInfo() Build {
	b := Build{Module: "github.com/pipefeed/pipe", Version: "(unknown)", Go: runtime.Version(), Tags: []string{},
		JPEG: transform.DecoderName(), CUDA: prefetch.CUDACompiled, MPI: mpi.Compiled}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	mod := &info.Main
	for _, d := range info.Deps {
		if d.Path == b.Module {
			mod = d
		}
	}
	if mod.Path == b.Module && mod.Version != "" {
		b.Version = mod.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "-tags":
			if s.Value != "" {
				b.Tags = strings.Split(s.Value, ",")
			}
		case "vcs.revision":
			if mod == &info.Main {
				b.Revision = s.Value
			}
		case "vcs.modified":
			b.Modified = mod == &info.Main && s.Value == "true"
		}
	}
	return b
}
