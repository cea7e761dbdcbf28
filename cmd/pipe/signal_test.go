package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this test binary as the pipe command: with
// PIPE_AS_COMMAND=1 it is main(), so signals reach a real process (and
// mpirun can start it as ranks, each of which writes its process id into
// the directory PIPE_TEST_PIDDIR, if set, as the file rank<N>).
func TestMain(m *testing.M) {
	if os.Getenv("PIPE_AS_COMMAND") == "1" {
		if dir := os.Getenv("PIPE_TEST_PIDDIR"); dir != "" {
			name := filepath.Join(dir, "rank"+os.Getenv("OMPI_COMM_WORLD_RANK"))
			os.WriteFile(name, []byte(strconv.Itoa(os.Getpid())), 0o644)
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stalled is a server that accepts a download, sends the headers and a few
// bytes, then never answers again (until the test ends).
func stalled(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "170498071")
		w.WriteHeader(http.StatusOK)
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL
}

// TestCtrlCStopsADownload: pipe check of a file whose source is being
// downloaded from a server that stalls stops at the first SIGINT, with exit
// status 130, and leaves no partial file.
func TestCtrlCStopsADownload(t *testing.T) {
	cache := t.TempDir()
	file := writePipe(t, "source cifar10 download=true cache_dir="+cache+" mirror="+stalled(t)+"/cifar-10-binary.tar.gz checksum=md5:c58f30108f718f92721af3b95e74349a\nbatch 8\n")
	cmd := exec.Command(os.Args[0], "check", file)
	cmd.Env = append(os.Environ(), "PIPE_AS_COMMAND=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until the download has begun: its partial file appears.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		entries, _ := os.ReadDir(cache)
		if len(entries) > 0 {
			break
		}
		if time.Since(start) > 20*time.Second {
			cmd.Process.Kill()
			t.Fatalf("the download never started: %s", stderr.String())
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Errorf("exit %v after SIGINT, want 130; stderr %q", err, stderr.String())
		}
		if took := time.Since(sent); took > 2*time.Second {
			t.Errorf("took %v to stop", took)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("SIGINT did not stop a stalled download; stderr %q", stderr.String())
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("a stopped download left %v", entries)
	}
}
