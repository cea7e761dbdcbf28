package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/prefetch"
	"github.com/pipefeed/pipe/trainer/mpi"
	"github.com/pipefeed/pipe/transform"
)

// TestVersion: `pipe --version` and `pipe version` print the module, the
// Go release, the build tags and the JPEG decoder of this build, and say
// whether CUDA and MPI are compiled in; `pipe version --json` prints the
// same as one object.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errs, code := pipeCmd(t, args...)
		if code != 0 {
			t.Fatalf("pipe %s: exit %d: %s", args[0], code, errs)
		}
		cuda, mpiLine := "cuda  not compiled in (build with -tags cuda)", "mpi   not compiled in (build with -tags mpi, which needs Open MPI"
		if prefetch.CUDACompiled {
			cuda = "cuda  compiled in"
		}
		if mpi.Compiled {
			mpiLine = "mpi   compiled in"
		}
		for _, want := range []string{"pipe github.com/pipefeed/pipe ", "go    " + runtime.Version(), "tags  ", "jpeg  " + transform.DecoderName(), cuda, mpiLine} {
			if !strings.Contains(out, want) {
				t.Errorf("pipe %s: no %q in\n%s", args[0], want, out)
			}
		}
	}
	out, errs, code := pipeCmd(t, "version", "--json")
	if code != 0 {
		t.Fatalf("pipe version --json: exit %d: %s", code, errs)
	}
	var v struct {
		Module, Version, Go, JPEG string
		Tags                      []string
		CUDA, MPI                 *bool
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("pipe version --json: %v\n%s", err, out)
	}
	if v.Module != "github.com/pipefeed/pipe" || v.Version == "" || v.Go != runtime.Version() || v.JPEG != transform.DecoderName() || v.Tags == nil || v.CUDA == nil || *v.CUDA != prefetch.CUDACompiled || v.MPI == nil || *v.MPI != mpi.Compiled {
		t.Errorf("pipe version --json: %+v", v)
	}
	if _, _, code := pipeCmd(t, "version", "extra"); code != 2 {
		t.Errorf("pipe version extra: exit %d, want 2", code)
	}
}
