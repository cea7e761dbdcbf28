package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/internal/faults"
)

// buildPipe builds the pipe command into a temporary directory.
func buildPipe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pipe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func cachePipe(t *testing.T, dir string, withCache bool) string {
	cache := ""
	if withCache {
		cache = "cache dir=" + dir + " epochs=3 shard=64\n"
	}
	return writePipe(t, "source synthetic n=12000\nshuffle seed=3\nrandom_crop size=32 pad=4 fill=reflect\n"+cache+
		"flip horizontal\nnormalize mean=0.5 std=0.25\nbatch 100\nto_tensor layout=nchw dtype=float32\n")
}

func sums(t *testing.T, bin, file string) ([]string, []map[string]any) {
	t.Helper()
	out, err := exec.Command(bin, "bench", file, "--epochs", "3", "--json", "--checksum").Output()
	if err != nil {
		t.Fatalf("bench %s: %v", file, err)
	}
	var s []string
	var objs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		s = append(s, fmt.Sprint(m["checksum"]))
		objs = append(objs, m)
	}
	return s, objs
}

// TestWarmSurvivesSIGKILL: a warm killed part-way leaves only whole entries;
// a second warm resumes, the cache verifies, and a fresh process reading it
// gets exactly the stream of the same pipeline without a cache.
func TestWarmSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it several times")
	}
	bin := buildPipe(t)
	dir := filepath.Join(t.TempDir(), "cache")
	cached, plain := cachePipe(t, dir, true), cachePipe(t, dir, false)

	// Killed once its progress says a shard is written, whatever the
	// machine's load: it writes its first line after the first shard of
	// 564, its next after the 57th.
	warm := exec.Command(bin, "warm", cached, "--workers", "1")
	progress, err := warm.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(progress)
	written := 0
	for written == 0 && lines.Scan() {
		var shards, total int
		fmt.Sscanf(lines.Text(), "progress %d of %d shards, %d written", &shards, &total, &written)
	}
	if err := warm.Process.Signal(syscall.SIGKILL); err != nil || written == 0 {
		t.Fatalf("the warm ended (%v) before it said a shard was written; its last line %q", err, lines.Text())
	}
	io.Copy(io.Discard, progress)
	err = warm.Wait()
	if ws, ok := err.(*exec.ExitError); !ok || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the warm ended with %v, not killed after its first shard: %q", err, lines.Text())
	}

	out, err := exec.Command(bin, "warm", cached, "--json", "-q").Output()
	if err != nil {
		t.Fatalf("second warm: %v", err)
	}
	var st map[string]float64
	json.Unmarshal(out, &st)
	if st["shards"] != 3*188 { // 3 epochs of ⌈12000/64⌉ shards
		t.Errorf("second warm saw %v shards, want 564", st["shards"])
	}
	if st["written"] <= 0 || st["written"] >= st["shards"] {
		t.Errorf("second warm wrote %v of %v shards: it should resume, not start over or find nothing to do", st["written"], st["shards"])
	}
	if out, err := exec.Command(bin, "cache", "verify", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), ": ok") {
		t.Fatalf("verify after the kill: %v\n%s", err, out)
	}
	want, _ := sums(t, bin, plain)
	got, objs := sums(t, bin, cached)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("checksums with the cache %v, without %v", got, want)
	}
	for _, o := range objs {
		if o["cache_misses"] != nil {
			t.Errorf("a fresh process missed the warm cache: %v", o)
		}
	}
}

// TestWarmSaysWhatItRuns: pipe warm says how many goroutines it runs: under
// workers=auto every core (it said the tuner's start, half of them, "1
// workers" on 2 cores), and "1 worker" in the singular. Without a terminal
// it says its progress in lines, the first after the first shard.
func TestWarmSaysWhatItRuns(t *testing.T) {
	file := cachePipe(t, filepath.Join(t.TempDir(), "cache"), true)
	out, errs, code := pipeCmd(t, "warm", file, "--epochs", "1")
	want := fmt.Sprintf("samples, %d workers (workers=auto: the most the cores and memory= allow", runtime.GOMAXPROCS(0))
	if runtime.GOMAXPROCS(0) == 1 {
		want = "samples, 1 worker (workers=auto: "
	}
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("warm under workers=auto: exit %d, want %q in\n%s", code, want, out)
	}
	if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 11 || !strings.HasPrefix(lines[0], "progress 1 of 188 shards, 1 written, ") ||
		!strings.HasPrefix(lines[10], "progress 188 of 188 shards, 188 written, ") {
		t.Errorf("warm's progress without a terminal, a line each tenth:\n%s", errs)
	}
	out, errs, code = pipeCmd(t, "warm", file, "--epochs", "1", "--workers", "1", "-q")
	if code != 0 || !strings.Contains(out, "samples, 1 worker\n") || errs != "" {
		t.Errorf("warm --workers 1 -q: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

func TestCacheCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	cached := cachePipe(t, dir, true)
	out, errs, code := pipeCmd(t, "warm", cached, "--epochs", "1")
	if code != 0 || !strings.Contains(out, "188 shards present, 188 written") {
		t.Fatalf("warm: %d %s %s", code, out, errs)
	}
	out, _, code = pipeCmd(t, "warm", cached, "--epochs", "9")
	if code != 0 || !strings.Contains(out, "564 shards present, 376 written") {
		t.Fatalf("warm of all 3 distinct epochs: %d %s", code, out)
	}
	out, _, code = pipeCmd(t, "cache", "ls", dir)
	if code != 0 || !strings.Contains(out, "0-2") || !strings.Contains(out, "564/564") || !strings.Contains(out, "1 fingerprint(s)") {
		t.Errorf("ls: %s", out)
	}
	out, _, code = pipeCmd(t, "run", cached)
	if code != 0 || !strings.Contains(out, "cache: 188 read, 0 computed") || !strings.Contains(out, "replays epoch e mod 3's order") {
		t.Errorf("run on the warm cache: %s", out)
	}
	// A changed pipeline writes under another fingerprint; gc keeps only
	// what the given files use.
	other := writePipe(t, strings.Replace(readFile(t, cached), "pad=4", "pad=2", 1))
	pipeCmd(t, "warm", other, "--epochs", "1")
	out, _, _ = pipeCmd(t, "cache", "ls", dir)
	if !strings.Contains(out, "2 fingerprint(s)") {
		t.Fatalf("ls after a second pipeline: %s", out)
	}
	out, errs, code = pipeCmd(t, "cache", "gc", dir, "--keep", cached)
	if code != 0 || !strings.Contains(out, "kept 1 fingerprint(s), dropped 1") {
		t.Errorf("gc: %d %s %s", code, out, errs)
	}
	out, _, _ = pipeCmd(t, "cache", "ls", dir)
	if !strings.Contains(out, "1 fingerprint(s)") || !strings.Contains(out, "564/564") {
		t.Errorf("ls after gc: %s", out)
	}
	// Wrong command lines exit 2 and change nothing; a --keep file that
	// has no cache stage, or caches elsewhere, would keep nothing.
	noCache := writePipe(t, "source synthetic n=10\nbatch 5\n")
	elsewhereDir := filepath.Join(t.TempDir(), "cache")
	elsewhere := cachePipe(t, elsewhereDir, true)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "gc", dir}, "needs --keep"},
		{[]string{"cache", "ls", filepath.Join(dir, "absent")}, "no such file"},
		{[]string{"warm", noCache}, "has no cache stage"},
		{[]string{"cache", "gc", dir, "--keep", noCache}, noCache + " has no cache stage, so it would keep nothing"},
		{[]string{"cache", "gc", dir, "--keep", cached, "--keep", elsewhere}, elsewhere + " caches in " + elsewhereDir + ", not in " + dir + ", so it would keep nothing there"},
		{[]string{"cache", "list", dir}, `unknown command "list" for "pipe cache" (did you mean "ls"?)`},
		{[]string{"cache", "clean", dir}, `(did you mean "gc"?)`},
		{[]string{"cache", "verfy", dir}, `(did you mean "verify"?)`},
		{[]string{"cache", "frobnicate", dir}, `unknown command "frobnicate" for "pipe cache"; its commands are ls, verify and gc`},
	} {
		_, errs, code := pipeCmd(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %s", c.args, code, errs)
		}
	}
	out, _, _ = pipeCmd(t, "cache", "ls", dir)
	if !strings.Contains(out, "1 fingerprint(s)") || !strings.Contains(out, "564/564") {
		t.Errorf("ls after the refusals: %s", out)
	}
}

// TestCacheLsOneCopy: a cache before any random stage holds one copy that
// every epoch reads, and ls says so (it said EPOCHS 0).
func TestCacheLsOneCopy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	file := writePipe(t, "source synthetic n=600\nshuffle seed=3\ncache dir="+dir+" shard=64\nrandom_crop size=32 pad=4 fill=reflect\nbatch 100\nto_tensor layout=nchw dtype=float32\n")
	if out, errs, code := pipeCmd(t, "warm", file); code != 0 || !strings.Contains(out, "10 shards present, 10 written") {
		t.Fatalf("warm: exit %d\n%s%s", code, out, errs)
	}
	out, _, code := pipeCmd(t, "cache", "ls", dir)
	lines := strings.Split(out, "\n")
	if code != 0 || len(lines) < 2 || !strings.Contains(out, "EPOCHS") || !strings.Contains(lines[1], "  all (one copy)  ") || !strings.Contains(lines[1], "10/10") {
		t.Errorf("ls: exit %d\n%s", code, out)
	}
}

func readFile(t *testing.T, name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWarmOnACacheInUse: a warm whose cache another pipeline holds open
// says the cache is in use and exits 1, before it prints a plan it cannot
// carry out ("computing live" was said, and then it failed). --json runs
// bypassing such a cache say so on stderr.
func TestWarmOnACacheInUse(t *testing.T) {
	file := cachePipe(t, t.TempDir(), true)
	holder, err := pipe.Load(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	out, errs, code := pipeCmd(t, "warm", file)
	if code != 1 || !strings.Contains(errs, "pipe: cannot warm ") || !strings.Contains(errs, "in use by another process") ||
		strings.Contains(errs, "computing live") || strings.Contains(out, "warming") {
		t.Errorf("warm on a cache in use: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	out, errs, code = pipeCmd(t, "bench", file, "--epochs", "1", "--json")
	if code != 0 || !strings.Contains(errs, "pipe: warning: cache disabled, computing live: ") || len(jsonLines(t, out)) != 1 {
		t.Errorf("bench --json on a cache in use: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
}

// TestDamagedCacheRepaired: a cache whose MANIFEST header, KEYREGISTRY or
// pipe-cache.json is damaged is repaired by pipe warm, which says so once
// (naming the directory, the file and what was done) and exits 0; the next
// run reads every entry. A run or bench --json meeting the damage says it
// once too. (Before: warm exited 1 with Badger's message, or pipe's
// "unreadable", and runs printed their warning twice.)
func TestDamagedCacheRepaired(t *testing.T) {
	base := filepath.Join(t.TempDir(), "cache")
	body := func(dir string) string {
		return "source synthetic n=600\nshuffle seed=3\nrandom_crop size=32 pad=4 fill=reflect\ncache dir=" + dir +
			" epochs=2 shard=64\nflip horizontal\nbatch 100\nto_tensor layout=nchw dtype=float32\n"
	}
	if _, errs, code := pipeCmd(t, "warm", writePipe(t, body(base)), "-q"); code != 0 {
		t.Fatalf("warm: exit %d: %s", code, errs)
	}
	damaged := func(file string, at int) (string, string) {
		dir := faults.CopyDir(t, base)
		name := filepath.Join(dir, file)
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b[at] ^= 0x11
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir, writePipe(t, body(dir))
	}
	for _, k := range []struct {
		file string
		at   int
	}{{"MANIFEST", 7}, {"KEYREGISTRY", 20}, {"pipe-cache.json", 3}} {
		dir, file := damaged(k.file, k.at)
		out, errs, code := pipeCmd(t, "warm", file, "-q")
		if code != 0 || strings.Count(out+errs, "damaged cache store") != 1 || !strings.Contains(out, "20 shards present, 0 written") {
			t.Errorf("%s: warm: exit %d\nstdout %s\nstderr %s", k.file, code, out, errs)
		}
		if w := strings.Join(warningLines(errs), "\n"); !strings.Contains(w, dir) || !strings.Contains(w, k.file+": damaged") && !strings.Contains(w, k.file+": unreadable") || !strings.Contains(w, "repaired, no entry lost") {
			t.Errorf("%s: warm's warning %q", k.file, w)
		}
		out, errs, code = pipeCmd(t, "run", file, "--epochs", "2")
		if code != 0 || strings.Count(out, "cache: 10 read, 0 computed") != 2 || strings.Contains(out+errs, "warning") {
			t.Errorf("%s: run after the warm: exit %d\nstdout %s\nstderr %s", k.file, code, out, errs)
		}

		_, file = damaged(k.file, k.at)
		out, errs, code = pipeCmd(t, "run", file)
		if code != 0 || strings.Count(out+errs, "damaged cache store") != 1 || !strings.Contains(out, "cache: 10 read, 0 computed") {
			t.Errorf("%s: run: exit %d\nstdout %s\nstderr %s", k.file, code, out, errs)
		}
		_, file = damaged(k.file, k.at)
		out, errs, code = pipeCmd(t, "bench", file, "--epochs", "1", "--json")
		if code != 0 || strings.Count(out+errs, "damaged cache store") != 1 || !strings.Contains(errs, "pipe: warning: cache ") {
			t.Errorf("%s: bench --json: exit %d\nstdout %s\nstderr %s", k.file, code, out, errs)
		}
	}
}

// warningLines are the lines of s that carry a warning.
func warningLines(s string) []string {
	var w []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "warning") {
			w = append(w, l)
		}
	}
	return w
}
