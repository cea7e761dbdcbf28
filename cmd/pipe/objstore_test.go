package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestLsAndBenchFromS3: pipe ls prints what a URL expands to (exit 2 for a
// pattern it cannot read, 1 naming the URL for a missing object); pipe
// bench over the same shards in S3 gives the local files' checksums, and
// its --json counts the shards fetched, then found in the shard cache.
func TestLsAndBenchFromS3(t *testing.T) {
	shard := shareddata.Path(t, "webdataset/sample.tgz")
	srv := s3server.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3server.SecretKey)
	t.Setenv("PIPE_CACHE", t.TempDir())
	srv.Bucket(t, "data")
	for i := range 2 {
		srv.PutFile(t, "data", fmt.Sprintf("wds/shard-%d.tgz", i), shard)
	}
	ep := []string{"--endpoint", srv.Endpoint, "--path-style"}
	out, errs, code := pipeCmd(t, append([]string{"ls", "s3://data/wds/shard-{0..1}.tgz"}, ep...)...)
	if code != 0 || !strings.Contains(out, "s3://data/wds/shard-0.tgz") || !strings.Contains(out, "s3://data/wds/shard-1.tgz") || !strings.Contains(out, "2 object(s)") {
		t.Fatalf("ls: exit %d: %s%s", code, out, errs)
	}
	if out2, _, code := pipeCmd(t, append([]string{"ls", "s3://data/wds/*.tgz"}, ep...)...); code != 0 || out2 != out {
		t.Fatalf("ls of the glob: exit %d: %s; want %s", code, out2, out)
	}
	for _, c := range []struct {
		args  []string
		code  int
		holds string
	}{
		{[]string{"ls"}, 2, "needs 1 argument"},
		{append([]string{"ls", "s3://data/wds/shard-{0..1.tgz"}, ep...), 2, "'{' without '}'"},
		{append([]string{"ls", "s3://data/wds/nothere.tgz"}, ep...), 1, "s3://data/wds/nothere.tgz: not found"},
	} {
		if _, errs, code := pipeCmd(t, c.args...); code != c.code || !strings.Contains(errs, c.holds) {
			t.Errorf("%v: exit %d, %q; want exit %d holding %q", c.args, code, errs, c.code, c.holds)
		}
	}

	body := `decode
shuffle seed=3
random_crop size=24
flip horizontal
batch 16
to_tensor layout=nchw dtype=float32
`
	local := writePipe(t, fmt.Sprintf("source webdataset path=\"%s/{sample,sample}.tgz\"\n", filepath.Dir(shard))+body)
	cache := t.TempDir()
	url := writePipe(t, fmt.Sprintf("source webdataset path=\"s3://data/wds/shard-{0..1}.tgz\" endpoint=%s path_style=true cache_dir=%s\n", srv.Endpoint, cache)+body)
	want := benchJSON(t, local, "--epochs", "2", "--json", "--checksum")
	for run, wantMisses := range []float64{2, 0} {
		got := benchJSON(t, url, "--epochs", "2", "--json", "--checksum", "--workers", fmt.Sprint(1+2*run))
		for e := range got {
			if got[e]["checksum"] != want[e]["checksum"] {
				t.Errorf("run %d epoch %d: checksum %v over S3, %v over the local files", run, e, got[e]["checksum"], want[e]["checksum"])
			}
		}
		f, ok := got[0]["fetch"].(map[string]any)
		if !ok {
			t.Fatalf("run %d: epoch 1 has no fetch figures: %v", run, got[0])
		}
		if f["cache_misses"] != wantMisses || f["cache_misses"].(float64)+f["cache_hits"].(float64) != 2 || (wantMisses > 0) != (f["bytes"].(float64) > 0) {
			t.Errorf("run %d: fetch %v; want %v misses of 2 shards, bytes only when fetched", run, f, wantMisses)
		}
	}

	// A training run's --json epochs carry the fetch figures too.
	trainFile := writePipe(t, fmt.Sprintf("source webdataset path=\"s3://data/wds/shard-{0..1}.tgz\" endpoint=%s path_style=true cache_dir=%s\n", srv.Endpoint, t.TempDir())+
		"decode\nshuffle seed=3\nrandom_crop size=24\nbatch 30\nto_tensor layout=nchw dtype=float32\ntrain mlp width=16 epochs=2 lr=0.05 threads=1\n")
	out, errs, code = pipeCmd(t, "run", trainFile, "--json")
	if code != 0 {
		t.Fatalf("run of a training file over S3: exit %d: %s", code, errs)
	}
	epochs := jsonLines(t, out)
	if len(epochs) != 2 {
		t.Fatalf("training --json: %d objects, want 2: %s", len(epochs), out)
	}
	for e, want := range []float64{2, 0} {
		f, ok := epochs[e]["fetch"].(map[string]any)
		if !ok || f["cache_misses"] != want {
			t.Errorf("training epoch %d: fetch %v; want %v cache misses", e, epochs[e]["fetch"], want)
		}
	}
}
