package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestSecretsInURLsNeverShown: a password in a URL's userinfo and the
// signature and token of a presigned URL reach the server, and appear in
// nothing pipe prints or writes: pipe ls (and --json), check, bench --json,
// a training run with a checkpoint, metrics, plots, an augmentation cache
// and its shard cache and index files, a resumed run, and a failed
// download's error.
func TestSecretsInURLsNeverShown(t *testing.T) {
	const (
		user, pw      = "reader", "pw-SECRET-basic"
		sig, token    = "SECRET-signature", "SECRET-token"
		cred          = "SECRET-credential"
		shardsPerPath = 2
	)
	shard, err := os.ReadFile(shareddata.Path(t, "webdataset/sample.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	archive := cifarArchive(t)
	sum := md5.Sum(archive)
	mod := time.Unix(1_700_000_000, 0)
	var authed, signed int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		switch dir, _, _ := strings.Cut(name, "/"); dir {
		case "auth":
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pw {
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
			authed++
		case "signed":
			q := r.URL.Query()
			if q.Get("X-Amz-Signature") != sig || q.Get("token") != token || q.Get("X-Amz-Credential") != cred {
				http.Error(w, "bad signature", http.StatusForbidden)
				return
			}
			signed++
		}
		switch {
		case strings.HasSuffix(name, "/shard-0.tgz"), strings.HasSuffix(name, "/shard-1.tgz"):
			http.ServeContent(w, r, name, mod, bytes.NewReader(shard))
		case strings.HasSuffix(name, "/cifar.tgz"):
			http.ServeContent(w, r, name, mod, bytes.NewReader(archive))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	authURL := fmt.Sprintf("http://%s:%s@%s/auth/shard-{0..1}.tgz", user, pw, host)
	query := fmt.Sprintf("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Signature=%s&token=%s", cred, sig, token)
	signedURL := fmt.Sprintf("http://%s/signed/shard-0.tgz?%s", host, query)

	// Every file pipe writes lands under these.
	root := t.TempDir()
	t.Setenv("PIPE_CACHE", filepath.Join(root, "pipe-cache"))
	t.Setenv("HOME", filepath.Join(root, "home"))
	var shown []string
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, errs, code := pipeCmd(t, args...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d: %s%s", args, code, wantCode, out, errs)
		}
		shown = append(shown, out, errs)
		return out + errs
	}
	pipeFile := func(name, url, extra string) string {
		p := filepath.Join(root, name+".pipe")
		body := fmt.Sprintf(`source webdataset path="%s" cache_dir=%s
decode
shuffle seed=3
random_crop size=24
cache dir=%s
batch 16
to_tensor layout=nchw dtype=float32
%s`, url, filepath.Join(root, name, "shards"), filepath.Join(root, name, "augment"), extra)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// try runs a command whose outcome is not the point, only what it
	// shows.
	try := func(args ...string) string {
		out, errs, _ := pipeCmd(t, args...)
		shown = append(shown, out, errs)
		return out + errs
	}
	for _, c := range []struct{ name, url string }{{"auth", authURL}} {
		if out := run(0, "ls", c.url); !strings.Contains(out, "shard-0.tgz") {
			t.Errorf("ls %s: %s", c.name, out)
		}
		run(0, "ls", "--json", c.url)
		stream := pipeFile(c.name+"-stream", c.url, "")
		if out := run(0, "check", stream); !strings.Contains(out, "REDACTED") {
			t.Errorf("check %s: the source is not shown redacted: %s", c.name, out)
		}
		run(0, "bench", stream, "--epochs", "2", "--json", "--checksum")
		run(0, "run", stream, "--epochs", "1")
		train := pipeFile(c.name+"-train", c.url, fmt.Sprintf("train mlp width=8 epochs=1 lr=0.05 threads=1 log_every=1 out=%s\n", filepath.Join(root, c.name, "out")))
		run(0, "run", train, "--json")
		if out := run(0, "run", train); !strings.Contains(out, "epoch 0: train loss") {
			t.Errorf("run %s: %s", c.name, out)
		}
		run(0, "run", train, "--resume")
		run(0, "warm", stream)
		run(0, "cache", "ls", filepath.Join(root, c.name+"-stream", "augment"))
	}
	// A shard missing from the server: the error names its URL, redacted.
	missing := strings.Replace(authURL, "shard-{0..1}", "shard-{0..2}", 1)
	if out := run(1, "check", pipeFile("missing", missing, "")); !strings.Contains(out, "REDACTED") {
		t.Errorf("a failed download does not name the URL, redacted: %s", out)
	}
	run(1, "ls", missing)
	// A presigned URL as a source's path, whatever becomes of it.
	try("ls", signedURL)
	try("ls", "--json", signedURL)
	try("check", pipeFile("signed-stream", signedURL, ""))
	try("bench", pipeFile("signed-bench", signedURL, ""), "--epochs", "1", "--json")

	// A dataset downloaded from a mirror behind each kind of credential,
	// then from a path the server lacks.
	for _, mirror := range []string{
		fmt.Sprintf("http://%s:%s@%s/auth/cifar.tgz", user, pw, host),
		fmt.Sprintf("http://%s/signed/cifar.tgz?%s", host, query),
	} {
		dir := filepath.Join(root, "cifar", fmt.Sprint(len(shown)))
		good := writePipe(t, fmt.Sprintf("source cifar10 download=true cache_dir=%s mirror=%q checksum=md5:%x\nbatch 5\n", dir, mirror, sum))
		if out := run(0, "check", good); !strings.Contains(out, "REDACTED") {
			t.Errorf("check of a mirror: the stages do not show it redacted: %s", out)
		}
		run(0, "run", good)
		bad := writePipe(t, fmt.Sprintf("source cifar10 download=true cache_dir=%s mirror=%q checksum=md5:%x\nbatch 5\n", dir+"-bad", strings.Replace(mirror, "cifar.tgz", "gone.tgz", 1), sum))
		if out := run(1, "run", bad); !strings.Contains(out, "REDACTED") || !strings.Contains(out, "404") {
			t.Errorf("a failed download does not name the URL, redacted, and the server's answer: %s", out)
		}
	}
	if authed == 0 || signed == 0 {
		t.Fatalf("the server saw %d requests with the password and %d with the signature: the credentials did not reach it", authed, signed)
	}

	secrets := []string{pw, sig, token, cred}
	for i, s := range shown {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("output %d shows %q:\n%s", i, secret, s)
			}
		}
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".pipe") {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, secret := range secrets {
			if bytes.Contains(b, []byte(secret)) || strings.Contains(path, secret) {
				t.Errorf("%s holds %q", path, secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files written, none holding a secret", files)
	if files < 10 {
		t.Errorf("only %d files written: the runs did not write what they should", files)
	}
}

// cifarArchive is a CIFAR-10 binary archive of 4 zero records per file.
func cifarArchive(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		rec := make([]byte, 3073*4)
		if err := tw.WriteHeader(&tar.Header{Name: "cifar-10-batches-bin/" + name, Size: int64(len(rec)), Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(rec)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
