// Package s3server starts a real S3 server (versitygw with its posix
// backend) on the loopback for tests, in a temporary directory, and puts
// objects into it. Tests skip, naming scripts/s3-server, where versitygw is
// not installed, except under CI=true, where they fail: CI installs it.
package s3server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Keys of the servers Start starts.
const (
	AccessKey = "pipetestaccess"
	SecretKey = "pipetestsecret0123456789"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is its URL, http://127.0.0.1:port.
	Endpoint string
	// Dir is its posix root: a bucket is a directory, an object a file.
	Dir    string
	client *minio.Client
}

// Binary finds versitygw: $PIPE_VERSITYGW, else on $PATH, else in
// $GOPATH/bin (default ~/go/bin), where scripts/s3-server installs it.
func Binary() (string, error) {
	if p := os.Getenv("PIPE_VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(filepath.SplitList(gopath)[0], "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("versitygw is not installed (not on $PATH, not %s): run scripts/s3-server --install", p)
	}
	return p, nil
}

// Start starts a server that lives until tb's cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("S3 tests: %v", err)
		}
		tb.Skipf("S3 tests skipped: %v", err)
	}
	dir := tb.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--port", addr, "--access", AccessKey, "--secret", SecretKey, "--quiet", "posix", dir)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(15 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			tb.Fatalf("versitygw exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("versitygw did not listen on %s in 15 s: %s", addr, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	client, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		tb.Fatal(err)
	}
	return &Server{Endpoint: "http://" + addr, Dir: dir, client: client}
}

// Bucket makes a bucket.
func (s *Server) Bucket(tb testing.TB, name string) {
	tb.Helper()
	if err := s.client.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		tb.Fatalf("make bucket %s: %v", name, err)
	}
}

// Put stores data as bucket/key.
func (s *Server) Put(tb testing.TB, bucket, key string, data []byte) {
	tb.Helper()
	_, err := s.client.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	if err != nil {
		tb.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

// PutFile stores the file at name as bucket/key.
func (s *Server) PutFile(tb testing.TB, bucket, key, name string) {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	s.Put(tb, bucket, key, b)
}
