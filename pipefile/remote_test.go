package pipefile

import (
	"strings"
	"testing"
)

// TestRetryFor: retry_for= takes a positive duration and refuses anything
// else, naming the parameter.
func TestRetryFor(t *testing.T) {
	spec := Lookup("source", "webdataset")
	for v, want := range map[string]string{"90s": "", "5m": "", "soon": "retry_for=soon: want a positive duration", "-1s": "retry_for=-1s"} {
		_, err := remoteOption(Args{spec: spec, vals: map[string]string{"retry_for": v, "concurrency": "8"}}, nil)
		if (want == "" && err != nil) || (want != "" && (err == nil || !strings.Contains(err.Error(), want))) {
			t.Errorf("retry_for=%s: %v, want %q", v, err, want)
		}
	}
}
