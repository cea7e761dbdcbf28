package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/internal/shareddata"
)

// TestCheckRefusesALaterEpoch: 16 WebDataset shards in S3 through a cache
// of 4, shuffled by seed=40 buffer=15, stream in epoch 0 but not in epoch 1.
// pipe check, bench and run refuse the file (exit 2) before any epoch,
// naming epoch 1 and what would pass; with 1 epoch, check and bench pass.
func TestCheckRefusesALaterEpoch(t *testing.T) {
	srv := s3server.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3server.SecretKey)
	t.Setenv("PIPE_CACHE", t.TempDir())
	srv.Bucket(t, "data")
	_, jpegs := shareddata.ImageNetJPEGs(t)
	var largest int64
	for s := range 16 {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i := s; i < len(jpegs); i += 16 {
			for _, m := range []struct {
				name string
				data []byte
			}{{fmt.Sprintf("%06d.jpg", i), jpegs[i]}, {fmt.Sprintf("%06d.cls", i), []byte(fmt.Sprint(i % 10))}} {
				tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg})
				tw.Write(m.data)
			}
		}
		tw.Close()
		largest = max(largest, int64(b.Len()))
		srv.Put(t, "data", fmt.Sprintf("wds/shard-%03d.tar", s), b.Bytes())
	}
	file := writePipe(t, fmt.Sprintf(`source webdataset path="s3://data/wds/shard-*.tar" endpoint=%s path_style=true cache_dir=%s cache_size=%d concurrency=2
decode
shuffle seed=40 buffer=15
resize 24
center_crop 24
batch 8
to_tensor layout=nchw dtype=uint8
`, srv.Endpoint, t.TempDir(), 4*largest))
	for _, args := range [][]string{{"check", file}, {"check", file, "--epochs", "3"}, {"bench", file, "--json"}, {"run", file, "--epochs", "2"}} {
		out, errs, code := pipeCmd(t, args...)
		if code != 2 || !strings.Contains(errs, "epoch 1: the order would read") || !strings.Contains(errs, "shuffle buffer=15") ||
			!strings.Contains(errs, "passes with it, or buffer=") {
			t.Errorf("%v: exit %d: %s; want exit 2 naming epoch 1, the buffer and what passes", args, code, errs)
		}
		if strings.Contains(out, "images_per_sec") || strings.Contains(out, "total ") {
			t.Errorf("%v: an epoch ran before the refusal: %s", args, out)
		}
	}
	out, errs, code := pipeCmd(t, "check", file, "--epochs", "1")
	if code != 0 || !strings.Contains(out, "stream   the orders of epochs 0-0 pass through the shard cache") {
		t.Errorf("check --epochs 1: exit %d: %s%s", code, out, errs)
	}
	if _, errs, code := pipeCmd(t, "bench", file, "--epochs", "1", "--json"); code != 0 {
		t.Errorf("bench --epochs 1: exit %d: %s", code, errs)
	}
}
