package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/prefetch"
)

// pipeCmd runs the command line in-process and returns stdout, stderr and
// the exit code main would use.
func pipeCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	ctx := context.Background()
	err := execute(ctx, root)
	code := 0
	if err != nil {
		errb.WriteString(errorLine(err) + "\n")
		code = exitCode(ctx, err)
	}
	return out.String(), errb.String(), code
}

func writePipe(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.pipe")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const small = `source synthetic n=600
shuffle seed=9
random_crop size=32 pad=4 fill=reflect
flip horizontal
normalize mean=0.5 std=0.25
batch 64
to_tensor layout=nchw dtype=float32
`

func benchJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, errs, code := pipeCmd(t, append([]string{"bench"}, args...)...)
	if code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, code, errs)
	}
	return jsonLines(t, out)
}

// jsonLines parses one JSON object per line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		objs = append(objs, m)
	}
	return objs
}

func TestBenchJSONInterface(t *testing.T) {
	f := writePipe(t, small)
	for _, m := range benchJSON(t, f, "--epochs", "1", "--json", "--consume", "1ms") {
		if _, ok := m["stall_seconds"]; !ok {
			t.Errorf("stall_seconds lacking with --consume: %v", m)
		}
	}
	one := benchJSON(t, f, "--epochs", "2", "--workers", "1", "--json", "--checksum")
	eight := benchJSON(t, f, "--epochs", "2", "--workers", "8", "--json", "--checksum")
	if len(one) != 2 {
		t.Fatalf("%d objects for 2 epochs", len(one))
	}
	for i, m := range one {
		for _, k := range []string{"epoch", "images", "seconds", "images_per_sec", "checksum", "slab_wait_seconds"} {
			if _, ok := m[k]; !ok {
				t.Errorf("epoch object lacks %q: %v", k, m)
			}
		}
		// Without a consumer the stall says only that batches were dropped
		// at once: it is left out.
		if _, ok := m["stall_seconds"]; ok {
			t.Errorf("stall_seconds without --consume: %v", m)
		}
		if m["images"].(float64) != 600 || m["epoch"].(float64) != float64(i) {
			t.Errorf("epoch %d: %v", i, m)
		}
		if m["checksum"] != eight[i]["checksum"] {
			t.Errorf("epoch %d: checksum %v with 1 worker, %v with 8", i, m["checksum"], eight[i]["checksum"])
		}
	}
	if one[0]["checksum"] == one[1]["checksum"] {
		t.Error("two epochs have the same checksum")
	}
	plain := benchJSON(t, f, "--epochs", "1", "--json")
	if _, ok := plain[0]["checksum"]; ok {
		t.Error("checksum present without --checksum")
	}
}

func TestRunPrintsSummary(t *testing.T) {
	out, errs, code := pipeCmd(t, "run", writePipe(t, small), "--epochs", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"600 samples", "10 batches of 64", "float32 [64 3 32 32]", "epoch 0: 600 images", "epoch 1: 600 images", "total    1200 images"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	// Without a consumer (--consume) the consumer's wait is no figure: a
	// stream that drops each batch waits for nearly all of them ("consumer
	// starved 100%" on every run).
	if strings.Contains(out, "consumer") || strings.Contains(out, "starved") {
		t.Errorf("without --consume, the output speaks of the consumer:\n%s", out)
	}
	out, errs, code = pipeCmd(t, "bench", writePipe(t, small), "--epochs", "1", "--consume", "1ms")
	if code != 0 || !strings.Contains(out, "consumer stalled ") || !strings.Contains(out, "the consumer waited for data ") {
		t.Errorf("with --consume: exit %d, %s\n%s", code, errs, out)
	}
}

// TestNonImageFilesCounted: an image folder with stray files (issue 24: a
// zebra/notes.txt stopped the run) is read without them, and check and run
// say how many they passed over on the source line.
func TestNonImageFilesCounted(t *testing.T) {
	root := t.TempDir()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cat/a.png", "cat/b.PNG", "zebra/c.png", "zebra/notes.txt", "zebra/Thumbs.db", "cat/labels"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(root, name), img.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := writePipe(t, "source image_folder path="+root+"\ndecode\ncenter_crop 4\nbatch 3\nto_tensor layout=nchw dtype=uint8\n")
	for _, cmd := range []string{"check", "run"} {
		out, errs, code := pipeCmd(t, cmd, f)
		if code != 0 || !strings.Contains(out, ": 3 samples, 2 classes, 3 non-image files skipped\n") {
			t.Errorf("pipe %s: exit %d, %s\n%s", cmd, code, errs, out)
		}
	}
	out, _, _ := pipeCmd(t, "check", writePipe(t, small))
	if strings.Contains(out, "non-image") {
		t.Errorf("a source with no files passed over speaks of them:\n%s", out)
	}
}

// TestDevicesFromTheCommandLine: normalize where=device on simulated
// devices, as the README shows it: the summary says what crosses, the
// per-device figures are printed and in --json, and --consume runs one
// consumer per device.
func TestDevicesFromTheCommandLine(t *testing.T) {
	f := writePipe(t, strings.Replace(small, "std=0.25", "std=0.25 where=device", 1)+"prefetch depth=3 devices=cpu:2\n")
	out, errs, code := pipeCmd(t, "run", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"crosses to the devices as uint8 (196608 bytes) and is normalized there", "devices  2 × cpu: per-device batch 32, global batch 64",
		"cpu:0: 10 batches", "cpu:1: 10 batches", "copied 0.9 MB"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	for _, m := range benchJSON(t, f, "--epochs", "1", "--json", "--consume", "1ms") {
		devs, _ := m["devices"].([]any)
		if len(devs) != 2 {
			t.Fatalf("devices in --json: %v", m["devices"])
		}
		for _, d := range devs {
			d := d.(map[string]any)
			for _, k := range []string{"device", "batches", "stall_seconds", "stall_pct", "producer_wait_seconds", "bytes", "copy_gb_per_sec"} {
				if _, ok := d[k]; !ok {
					t.Errorf("device object lacks %q: %v", k, d)
				}
			}
			if d["batches"].(float64) != 10 || d["bytes"].(float64) != 300*3*32*32 { // 600 samples, half each, uint8
				t.Errorf("device figures %v", d)
			}
		}
	}
}

func TestErrorsAndExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", writePipe(t, "source synthetic\nrandom_crop size=32 padd=4\nbatch 8\n")}, 2, `t.pipe:2:21: random_crop: unknown parameter "padd" (did you mean "pad"?)`},
		{[]string{"check", writePipe(t, "source synthetic\nflip p=1.5\nbatch 8\n")}, 2, "t.pipe:2:6: flip: p: 1.5 must be at most 1"},
		{[]string{"bench", writePipe(t, "source cifar10 path=/no/such/dir\nbatch 8\n")}, 2, "/no/such/dir does not exist"},
		{[]string{"run", "/no/such.pipe"}, 2, "no such file"},
		{[]string{"run"}, 2, "run needs 1 argument"},
		{[]string{"bench", writePipe(t, small), "--epochs", "0"}, 2, "--epochs=0"},
		{[]string{"run", writePipe(t, small), "--bogus"}, 2, "unknown flag"},
		{[]string{"preview", writePipe(t, small)}, 2, "needs -o"},
		{[]string{"bench", writePipe(t, small), "--consume", "1ms", "--checksum"}, 2, "cannot go with --checksum"},
		{[]string{"bench", writePipe(t, small+"prefetch devices=all\n")}, 2, "t.pipe:8:1: prefetch: devices=all: GPU devices need the cuda build"},
		{[]string{"bench", writePipe(t, strings.Replace(small, "std=0.25", "std=0.25 where=device", 1))}, 2, "where=device normalizes on the devices: add a prefetch stage"},
		{[]string{"run", writePipe(t, small+"train mlp epochs=1 out=\n"), "--resume"}, 2, "pipe: --resume needs the train stage's out= directory"},
		// The stage's name is said once, though the source's error says it too.
		{[]string{"check", writePipe(t, "source cifar10 download=true cache_dir="+t.TempDir()+" mirror=http://127.0.0.1:9/x.tar.gz checksum=md5:c58f30108f718f92721af3b95e74349a\nbatch 8\n")},
			1, "t.pipe:1:8: cifar10: download failed: "},
	}
	for _, c := range cases {
		if strings.Contains(c.want, "need the cuda build") && prefetch.CUDACompiled {
			continue // devices=all finds GPUs in the cuda and cudaemu builds
		}
		_, errs, code := pipeCmd(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("pipe %v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
		if strings.Contains(errs, "pipe: pipe:") || strings.Contains(errs, "cifar10: cifar10:") {
			t.Errorf("pipe %v: the prefix is said twice: %q", c.args, errs)
		}
	}
}

func TestCorruptDataExitsOne(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "trunc.bin"), make([]byte, 3073+10), 0o644)
	_, errs, code := pipeCmd(t, "check", writePipe(t, "source cifar10 path="+filepath.Join(dir, "trunc.bin")+"\nbatch 2\n"))
	if code != 1 || !strings.Contains(errs, "trunc.bin: offset 3073: sample 1: bad format: the last 10 bytes are not a whole 3073-byte record") {
		t.Errorf("truncated file: exit %d, stderr %q", code, errs)
	}
	rec := make([]byte, 3073*3)
	rec[3073] = 42 // label of sample 1
	os.WriteFile(filepath.Join(dir, "b.bin"), rec, 0o644)
	_, errs, code = pipeCmd(t, "run", writePipe(t, "source cifar10 path="+filepath.Join(dir, "b.bin")+"\nbatch 2\n"))
	if code != 1 || !strings.Contains(errs, "b.bin: offset 3073: sample 1: label out of range") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	out, errs, code := pipeCmd(t, "run", writePipe(t, "source cifar10 path="+filepath.Join(dir, "b.bin")+"\npipeline on_error=skip\nbatch 2\n"))
	if code != 0 || !strings.Contains(out, "skipped  1 record that could not be used") || !strings.Contains(out, "sample 1: label out of range") {
		t.Errorf("skip: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestStagesAndCheck(t *testing.T) {
	out, _, code := pipeCmd(t, "stages")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"source cifar10", "source cifar100", "source synthetic", "random_crop", "pad        int = 0 in [0, 32768]", "(at most 16777216: 256 times the largest batch trained on ImageNet)", "flip", "shift", "normalize", "to_tensor", "layout     nchw|nhwc = nchw"} {
		if !strings.Contains(out, want) {
			t.Errorf("stages lacks %q", want)
		}
	}
	out, errs, code := pipeCmd(t, "check", "../../examples/quickstart.pipe")
	if code != 0 || !strings.Contains(out, "quickstart.pipe: ok") {
		t.Errorf("check quickstart: %d %s %s", code, out, errs)
	}
}

func TestPreviewWritesGrid(t *testing.T) {
	png1 := filepath.Join(t.TempDir(), "grid.png")
	out, errs, code := pipeCmd(t, "preview", writePipe(t, small), "-o", png1, "-n", "12", "--cols", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "wrote 12 samples") {
		t.Errorf("output %q", out)
	}
	f, err := os.Open(png1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// A tile is as wide as the longest caption and a glyph (7 px) more, so
	// every caption is drawn whole with a gap: a CIFAR caption
	// "automobile #41433" used to be cut to "automobile #4143", touching
	// the next tile's.
	p, err := pipe.Load(context.Background(), writePipe(t, small))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cw := 96
	for i := range 12 {
		_, label, idx, err := p.Augmented(0, i)
		if err != nil {
			t.Fatal(err)
		}
		cw = max(cw, 7*(len(caption(p.Source().Info().Classes, label, idx))+1))
	}
	if b := img.Bounds(); b.Dx() != 4*(cw+4)+4 || b.Dy() != 3*(96+14+4)+4 {
		t.Errorf("grid is %v, want 4×3 tiles of 96 px, %d wide for captions", b, cw)
	}
	// -o picks the format by the extension.
	jpg := filepath.Join(t.TempDir(), "grid.jpg")
	if _, errs, code := pipeCmd(t, "preview", writePipe(t, small), "-o", jpg, "-n", "4"); code != 0 {
		t.Fatalf("-o grid.jpg: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(jpg); len(b) < 3 || b[0] != 0xff || b[1] != 0xd8 {
		t.Errorf("-o grid.jpg did not write a JPEG: % x", b[:min(len(b), 8)])
	}
	if _, errs, code := pipeCmd(t, "preview", writePipe(t, small), "-o", "grid.gif"); code != 2 || !strings.Contains(errs, ".png or .jpg") {
		t.Errorf("-o grid.gif: exit %d, %s", code, errs)
	}
}

// TestRealCIFARChecksums is the determinism check on real data:
// --workers 1 and --workers 8 give the same checksums, and so does a rerun.
func TestRealCIFARChecksums(t *testing.T) {
	archive := shareddata.Path(t, "cifar10/cifar-10-binary.tar.gz")
	f := writePipe(t, "source cifar10 path="+archive+"\nshuffle seed=42\nrandom_crop size=32 pad=4 fill=reflect\nflip horizontal\n"+
		"normalize mean=0.4914,0.4822,0.4465 std=0.2470,0.2435,0.2616\nbatch 256\nto_tensor layout=nchw dtype=float32\n")
	a := benchJSON(t, f, "--epochs", "2", "--workers", "1", "--json", "--checksum")
	b := benchJSON(t, f, "--epochs", "2", "--workers", "8", "--json", "--checksum")
	c := benchJSON(t, f, "--epochs", "2", "--workers", "8", "--json", "--checksum")
	for i := range a {
		if a[i]["images"].(float64) != 50000 {
			t.Fatalf("epoch %d has %v images", i, a[i]["images"])
		}
		if a[i]["checksum"] != b[i]["checksum"] || b[i]["checksum"] != c[i]["checksum"] {
			t.Errorf("epoch %d: checksums %v / %v / %v", i, a[i]["checksum"], b[i]["checksum"], c[i]["checksum"])
		}
	}
}

// TestDownloadFromMirror is a user's first run with download=true: the
// archive is fetched, verified, cached, and the run goes on; a wrong
// checksum stops it with a clear error and leaves nothing behind.
func TestDownloadFromMirror(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		rec := make([]byte, 3073*4)
		tw.WriteHeader(&tar.Header{Name: "cifar-10-batches-bin/" + name, Size: int64(len(rec)), Mode: 0o644, Typeflag: tar.TypeReg})
		tw.Write(rec)
	}
	tw.Close()
	zw.Close()
	archive := b.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(archive) }))
	defer srv.Close()
	sum := md5.Sum(archive)
	cache := t.TempDir()
	good := fmt.Sprintf("source cifar10 download=true cache_dir=%s mirror=%s/c.tgz checksum=md5:%x\nbatch 5\n", cache, srv.URL, sum)
	out, errs, code := pipeCmd(t, "run", writePipe(t, good))
	if code != 0 || !strings.Contains(out, "total    20 images") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(cache, "cifar-10-binary.tar.gz")); err != nil {
		t.Fatal("archive not cached:", err)
	}
	empty := t.TempDir()
	bad := fmt.Sprintf("source cifar10 download=true cache_dir=%s mirror=%s/c.tgz checksum=md5:%032x\nbatch 5\n", empty, srv.URL, 0)
	_, errs, code = pipeCmd(t, "run", writePipe(t, bad))
	if code != 1 || !strings.Contains(errs, "checksum mismatch") {
		t.Errorf("wrong checksum: exit %d, %s", code, errs)
	}
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Errorf("a failed download left %v", left)
	}
	_, errs, code = pipeCmd(t, "check", writePipe(t, "source cifar10 download=true mirror=http://x/y\nbatch 5\n"))
	if code != 2 || !strings.Contains(errs, "mirror and checksum go together") {
		t.Errorf("mirror without checksum: exit %d, %s", code, errs)
	}
}

// TestTrainFromTheCommandLine: pipe run trains a file's model, prints an
// epoch line each and a summary, writes the checkpoint, metrics and plots,
// and --json gives the documented fields; --resume continues.
func TestTrainFromTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	body := strings.Replace(small, "source synthetic n=600", "source synthetic n=400", 1) +
		"train mlp width=32 epochs=2 lr=0.1 log_every=2 out=" + dir + "\neval split=test batch=100\n"
	f := writePipe(t, body)
	out, errs, code := pipeCmd(t, "run", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"model    mlp: ", "per-device 64 × 1 devices = global 64; peak lr 0.025", "epoch 0: train loss", "epoch 1: train loss",
		"test loss", "trained  2 epochs", "best     test accuracy", "accuracy.png"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"checkpoint.gob", "metrics.jsonl", "steps.jsonl", "accuracy.png", "loss.png"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	lines, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if n := strings.Count(string(lines), "\n"); n != 2 {
		t.Errorf("metrics.jsonl has %d lines, want 2", n)
	}
	// --resume of the finished run trains nothing more and says where it is.
	out, errs, code = pipeCmd(t, "run", f, "--resume")
	if code != 0 || !strings.Contains(out, "resumed  at epoch 2, step 0 of it (step 14 in all): the run's 2 epochs are done, nothing is left to train") ||
		!strings.Contains(out, "trained  nothing in this run (the checkpoint has all 2 epochs)") || strings.Contains(out, "trained  2 epochs") {
		t.Errorf("resume: exit %d, %s\n%s", code, errs, out)
	}
	// bench does not offer --resume, and refuses it as any unknown flag.
	if out, _, _ := pipeCmd(t, "bench", "--help"); strings.Contains(out, "resume") {
		t.Errorf("bench --help offers --resume:\n%s", out)
	}
	if _, _, code := pipeCmd(t, "bench", f, "--resume"); code != 2 {
		t.Errorf("bench --resume: exit %d, want 2", code)
	}
	js := writePipe(t, strings.Replace(body, "epochs=2", "epochs=1", 1))
	os.RemoveAll(dir)
	out, errs, code = pipeCmd(t, "run", js, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	objs := jsonLines(t, out)
	if len(objs) != 1 {
		t.Fatalf("%d objects for 1 epoch", len(objs))
	}
	for _, k := range []string{"epoch", "train_loss", "test_accuracy", "lr", "images_per_sec", "stall_pct", "seconds", "params_hash", "allreduce_seconds"} {
		if _, ok := objs[0][k]; !ok {
			t.Errorf("epoch object lacks %q: %v", k, objs[0])
		}
	}
	// bench leaves the train stage out; run refuses streaming flags.
	if _, errs, code := pipeCmd(t, "bench", f, "--epochs", "1"); code != 0 {
		t.Errorf("bench of a training file: exit %d: %s", code, errs)
	}
	if _, errs, code := pipeCmd(t, "run", f, "--epochs", "3"); code != 2 || !strings.Contains(errs, "set epochs= on it") {
		t.Errorf("run --epochs with a train stage: exit %d: %s", code, errs)
	}
}

// TestUsageExitCodes: a command line or a file that is wrong exits 2, as
// the README says, with a message that says what to do (an unknown command
// and a directory for a file once exited 1).
func TestUsageExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"benchmark", "x"}, `unknown command "benchmark" for "pipe" (pipe --help lists the commands)`},
		{[]string{"bnch", "x"}, "Did you mean this?\n\tbench"},
		{[]string{"run", t.TempDir()}, "is a directory"},
		{[]string{"check", "/nonexistent.pipe"}, "no such file"},
		{[]string{"check", "/dev/zero"}, "the file is over 1048576 bytes"},
		{[]string{"check", writePipe(t, "source synthetic n=100\nbatch 10\ntrain resnet depth=10\n")}, "resnet depth=10: want 6n+2"},
		{[]string{"check", writePipe(t, "source synthetic n=100\nbatch 9223372036854775807\n")}, "must be at most 16777216"},
	} {
		_, errs, code := pipeCmd(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("pipe %v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/stages.md from the registry")

// TestStagesMarkdown keeps docs/stages.md equal to pipe stages --markdown,
// so that the reference cannot drift from the specs; go test ./cmd/pipe
// -run TestStagesMarkdown -update rewrites it.
func TestStagesMarkdown(t *testing.T) {
	out, errs, code := pipeCmd(t, "stages", "--markdown")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	const file = "../../docs/stages.md"
	if *update {
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != out {
		t.Errorf("docs/stages.md differs from pipe stages --markdown: a spec changed since it was written; " +
			"regenerate it with go test ./cmd/pipe -run TestStagesMarkdown -update " +
			"(or go run ./cmd/pipe stages --markdown > docs/stages.md)")
	}
	for _, s := range pipefile.Stages() {
		if !strings.Contains(out, "\n## "+mdEscape(specHeading(s))+"\n") {
			t.Errorf("no heading for %s", specHeading(s))
		}
	}
	if _, errs, code := pipeCmd(t, "stages", "--markdown", "--json"); code != 2 || !strings.Contains(errs, "give one of them") {
		t.Errorf("--markdown with --json: exit %d, %s", code, errs)
	}
}

// TestStagesJSON: pipe stages --json is the registry, every spec and
// parameter with each of its fields, in the order of pipe stages; programs
// (pipefeed's generated Pipeline) rely on its keys.
func TestStagesJSON(t *testing.T) {
	out, errs, code := pipeCmd(t, "stages", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	specs := pipefile.Stages()
	if len(got) != len(specs) {
		t.Fatalf("%d stages, the registry has %d", len(got), len(specs))
	}
	str := func(s *string) any {
		if s == nil {
			return nil
		}
		return *s
	}
	num := func(f *float64) any {
		if f == nil {
			return nil
		}
		return *f
	}
	for i, s := range specs {
		g := got[i]
		if g["name"] != s.Name || g["kind"] != s.Kind || g["doc"] != s.Summary {
			t.Errorf("stage %d: %v %v %q, want %s %s %q", i, g["kind"], g["name"], g["doc"], s.Kind, s.Name, s.Summary)
			continue
		}
		params, _ := g["params"].([]any)
		if len(params) != len(s.Params) {
			t.Errorf("%s: %d parameters, want %d", s.Name, len(params), len(s.Params))
			continue
		}
		for j, p := range s.Params {
			gp := params[j].(map[string]any)
			var def *string
			if p.Default != "" {
				def = &p.Default
			}
			var enum any
			if p.Enum != nil {
				var e []any
				for _, v := range p.Enum {
					e = append(e, v)
				}
				enum = e
			}
			want := map[string]any{"name": p.Name, "type": p.Type.String(), "default": str(def), "required": p.Required,
				"positional": p.Positional, "enum": enum, "auto": p.Auto, "min": num(p.Min), "max": num(p.Max), "why": p.Why, "doc": p.Doc}
			if !reflect.DeepEqual(gp, want) {
				t.Errorf("%s %s:\n got %v\nwant %v", s.Name, p.Name, gp, want)
			}
		}
	}
	// Fixed points a reader of the JSON can check by eye.
	for _, want := range []string{`"name": "random_crop"`, `"enum": [
          "zero",
          "reflect",
          "edge",
          "wrap"
        ]`, `"doc": "the mirror's md5:<hex> or sha256:<hex>"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stages --json lacks %s", want)
		}
	}
	if _, errs, code := pipeCmd(t, "stages", "--json", "x"); code != 2 || !strings.Contains(errs, "stages needs 0 argument(s), got 1") {
		t.Errorf("stages --json x: exit %d, %s", code, errs)
	}
}

// TestPythonStages keeps pipefeed's generated Pipeline (python/pipefeed/
// _stages.py, which holds the pipe stages --json it was made from) equal to
// the registry: a stage or parameter added, removed or changed here fails
// until it is generated again. python/tests/test_pipeline.py checks the
// methods made from it.
func TestPythonStages(t *testing.T) {
	const regenerate = "cd python && PIPE_BIN=/path/to/pipe python3 -m pipefeed._gen > /tmp/_stages.py && mv /tmp/_stages.py pipefeed/_stages.py (not straight into the file: the generator imports pipefeed, which imports it)"
	b, err := os.ReadFile("../../python/pipefeed/_stages.py")
	if err != nil {
		t.Fatal(err)
	}
	_, held, ok := strings.Cut(string(b), "STAGES = json.loads(r'''\n")
	held, _, ok2 := strings.Cut(held, "''')\n")
	if !ok || !ok2 {
		t.Fatal("python/pipefeed/_stages.py holds no STAGES = json.loads(r'''...''')")
	}
	var want bytes.Buffer
	if err := writeStagesJSON(&want); err != nil {
		t.Fatal(err)
	}
	if held == want.String() {
		return
	}
	var py []stageSpec
	if err := json.Unmarshal([]byte(held), &py); err != nil {
		t.Fatalf("_stages.py's STAGES: %v (%s)", err, regenerate)
	}
	params := func(specs []stageSpec) map[string][]string {
		m := map[string][]string{}
		for _, s := range specs {
			key := s.Name
			if s.Kind == "source" {
				key = "source " + s.Name
			}
			m[key] = []string{}
			for _, p := range s.Params {
				m[key] = append(m[key], p.Name)
			}
		}
		return m
	}
	have, reg := params(py), params(stagesJSON())
	for name, ps := range reg {
		if _, ok := have[name]; !ok {
			t.Errorf("pipefeed has no stage %s", name)
			continue
		}
		for _, p := range ps {
			if !slices.Contains(have[name], p) {
				t.Errorf("pipefeed's %s has no parameter %s", name, p)
			}
		}
	}
	for name, ps := range have {
		if _, ok := reg[name]; !ok {
			t.Errorf("pipefeed has a stage %s the registry lacks", name)
			continue
		}
		for _, p := range ps {
			if !slices.Contains(reg[name], p) {
				t.Errorf("pipefeed's %s has a parameter %s the registry lacks", name, p)
			}
		}
	}
	t.Errorf("python/pipefeed/_stages.py is not generated from this registry: %s", regenerate)
}
