package pipe

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/source/remote"
)

// wdsShards writes the real ImageNet sample as n plain WebDataset shards
// (a .jpg and a .cls member per sample) into dir and returns their paths.
func wdsShards(t *testing.T, dir string, n int) []string {
	t.Helper()
	names, data := shareddata.ImageNetJPEGs(t)
	var paths []string
	for s := range n {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i := s; i < len(names); i += n {
			key := fmt.Sprintf("%06d", i)
			for _, m := range []struct {
				name string
				data []byte
			}{{key + ".jpg", data[i]}, {key + ".cls", []byte(fmt.Sprint(i % 10))}} {
				tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg})
				tw.Write(m.data)
			}
		}
		tw.Close()
		p := filepath.Join(dir, fmt.Sprintf("shard-%03d.tar", s))
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// dataBucket starts an S3 server with a bucket "data", its keys in the
// environment as users set them (the standard chain), and a fresh index
// directory.
func dataBucket(t *testing.T) *s3server.Server {
	t.Helper()
	srv := s3server.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3server.SecretKey)
	t.Setenv("PIPE_CACHE", t.TempDir())
	srv.Bucket(t, "data")
	return srv
}

// objstoreSums loads a pipeline reading src (a source line) as rank of
// world with workers workers and returns its checksums of 2 epochs.
func objstoreSums(t *testing.T, src string, rank, world, workers int) []string {
	t.Helper()
	text := src + `
decode
shuffle seed=7 buffer=16
random_resized_crop 32 scale=0.35,1
flip horizontal
batch 8
to_tensor layout=nchw dtype=float32
`
	sums, err := textSums(t, text, rank, world, workers)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// textSums loads the pipeline file text as rank of world with workers
// workers and returns its checksums of 2 epochs, or the error loading or
// running it.
func textSums(t *testing.T, text string, rank, world, workers int) ([]string, error) {
	t.Helper()
	f, err := pipefile.Parse("objstore.pipe", text, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadFile(context.Background(), f, WithRank(rank, world))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	p.SetWorkers(workers)
	stats, err := p.Run(context.Background(), RunOptions{Epochs: 2, Checksum: true})
	if err != nil {
		return nil, err
	}
	var sums []string
	for _, s := range stats {
		sums = append(sums, s.Checksum)
	}
	return sums, nil
}

// TestObjectStoreChecksums is the determinism contract over object
// storage: WebDataset and TFRecord shards read from a real S3 server (by
// glob and by braces) give the epoch checksums of the same files on local
// disk, for 1 and 3 workers and each rank of 2, cold and from the shard
// cache.
func TestObjectStoreChecksums(t *testing.T) {
	tfDir := shareddata.Path(t, "tfrecord")
	srv := dataBucket(t)
	local := t.TempDir()
	for _, p := range wdsShards(t, local, 4) {
		srv.PutFile(t, "data", "wds/"+filepath.Base(p), p)
	}
	srv.PutFile(t, "data", "tf/train-00000-of-00001", filepath.Join(tfDir, "train-00000-of-00001"))
	cache := t.TempDir()
	remoteArgs := fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s", srv.Endpoint, cache)
	for _, c := range []struct{ local, url string }{
		{`source webdataset path="` + local + `/shard-*.tar"`, `source webdataset path="s3://data/wds/shard-*.tar"` + remoteArgs},
		{`source webdataset path="` + local + `/shard-{000..003}.tar"`, `source webdataset path="s3://data/wds/shard-{000..003}.tar"` + remoteArgs},
		{`source tfrecord label_offset=1 path="` + tfDir + `/train-*"`, `source tfrecord label_offset=1 path="s3://data/tf/train-*"` + remoteArgs},
	} {
		for _, run := range []struct{ rank, world, workers int }{{0, 1, 1}, {0, 1, 3}, {0, 2, 2}, {1, 2, 2}} {
			want := objstoreSums(t, c.local, run.rank, run.world, run.workers)
			got := objstoreSums(t, c.url, run.rank, run.world, run.workers)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s, rank %d of %d, %d workers: checksums %v, local files give %v", c.url, run.rank, run.world, run.workers, got, want)
			}
		}
	}
}

// TestObjectStoreCacheDamaged: bytes flipped in every shard of the shard
// cache between runs are found, the shards fetched again, and the epochs'
// checksums are those of the undamaged run, for WebDataset and TFRecord
// shards, whose stored indexes are used again.
func TestObjectStoreCacheDamaged(t *testing.T) {
	srv := dataBucket(t)
	local := t.TempDir()
	for _, p := range wdsShards(t, local, 4) {
		srv.PutFile(t, "data", "wds/"+filepath.Base(p), p)
	}
	for _, p := range tfSplit(t, filepath.Join(shareddata.Path(t, "tfrecord"), "train-00000-of-00001"), t.TempDir(), 2) {
		srv.PutFile(t, "data", "tf/"+filepath.Base(p), p)
	}
	for _, c := range []struct{ src, shards string }{
		{`source webdataset path="s3://data/wds/shard-*.tar"`, "*-shard-*.tar"},
		{`source tfrecord label_offset=1 path="s3://data/tf/part-*"`, "*-part-*"},
	} {
		cache := t.TempDir()
		src := c.src + fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s", srv.Endpoint, cache)
		want := objstoreSums(t, src, 0, 1, 2)
		shards, _ := filepath.Glob(filepath.Join(cache, c.shards))
		if len(shards) == 0 {
			t.Fatalf("%s: no shards in the cache", c.src)
		}
		for _, p := range shards {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for off := 1000; off < len(b); off += 997 {
				b[off] ^= 0x55
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := remote.DamagedShards()
		got := objstoreSums(t, src, 0, 1, 2)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s, the cached shards damaged: checksums %v, undamaged %v", c.src, got, want)
		}
		if n := remote.DamagedShards() - before; n != int64(len(shards)) {
			t.Errorf("%s: %d damaged shards found, %d damaged", c.src, n, len(shards))
		}
	}
}

// TestObjectStoreStringRoundTrip: a pipeline built in Go over shards in
// S3, with its own endpoint and shard cache, writes a String whose source
// line reopens them (the endpoint, addressing and cache, not the keys).
func TestObjectStoreStringRoundTrip(t *testing.T) {
	srv := dataBucket(t)
	for _, p := range wdsShards(t, t.TempDir(), 2) {
		srv.PutFile(t, "data", "wds/"+filepath.Base(p), p)
	}
	rem := &source.Remote{Store: remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true}), Cache: &remote.Cache{Dir: t.TempDir(), Limit: 1 << 30}}
	w, err := source.OpenWebDataset(context.Background(), "s3://data/wds/shard-*.tar", source.WithRemote(rem))
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, imagenetRecipe(w, 4)...)
	first, _, _ := strings.Cut(p.String(), "\n")
	for _, want := range []string{"endpoint=" + srv.Endpoint, "path_style=true", "cache_dir=", "cache_size=1073741824"} {
		if !strings.Contains(first, want) {
			t.Errorf("source line %q lacks %s", first, want)
		}
	}
	if strings.Contains(first, s3server.SecretKey) {
		t.Errorf("source line %q holds the secret key", first)
	}
	roundTrip(t, "s3 webdataset", p, nil)
}

// TestObjectStoreErrors: a pipeline over a missing bucket, a missing key,
// or with refused credentials fails to load with an error that names the
// URL and is a download failure.
func TestObjectStoreErrors(t *testing.T) {
	srv := dataBucket(t)
	srv.Put(t, "data", "a.tar", []byte("x"))
	for _, c := range []struct{ url, secret, holds string }{
		{"s3://nobucket/a.tar", s3server.SecretKey, "NoSuchBucket"},
		{"s3://data/b-{0..1}.tar", s3server.SecretKey, "s3://data/b-0.tar: not found"},
		{"s3://data/a.tar", "wrong", "access denied"},
	} {
		t.Setenv("AWS_SECRET_ACCESS_KEY", c.secret)
		text := fmt.Sprintf("source webdataset path=%q endpoint=%s path_style=true cache_dir=%s\ndecode\nbatch 2\n", c.url, srv.Endpoint, t.TempDir())
		f, err := pipefile.Parse("e.pipe", text, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		_, err = loadFile(t.Context(), f)
		if err == nil || !strings.Contains(err.Error(), c.holds) || !errors.Is(err, source.ErrDownload) {
			t.Errorf("%s: %v; want a download error holding %q", c.url, err, c.holds)
		}
	}
}

// folderTree writes the real ImageNet sample as class folders under dir
// (with a class whose name sorts differently from its prefix, a class of
// one non-image, a notes file, a dot file and a deeper folder, all of
// which listing must treat as a disk does) and returns the files written,
// relative to dir.
func folderTree(t *testing.T, dir string) []string {
	t.Helper()
	names, data := shareddata.ImageNetJPEGs(t)
	classes := []string{"n01", "n01-b", "n02", "n02_c"}
	var files []string
	put := func(rel string, b []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	for i, n := range names[:40] {
		put(classes[i%len(classes)]+"/"+n, data[i])
	}
	put("n01/notes.txt", []byte("not an image"))
	put("n02/.DS_Store", []byte("x"))
	put("n02/deeper/x.JPEG", data[0])
	put("only-notes/readme.txt", []byte("a class with no images"))
	put("README.md", []byte("beside the classes"))
	return files
}

// TestObjectStoreFolders: image folders in S3 (class folders found by
// listing; a flat folder with labels and class names read from URLs) and
// over HTTP (flat, with labels) give the epoch checksums and non-image
// counts of the same files on local disk, and what cannot work says so.
func TestObjectStoreFolders(t *testing.T) {
	sample := shareddata.Path(t, "imagenet-sample")
	srv := dataBucket(t)
	local := t.TempDir()
	for _, rel := range folderTree(t, filepath.Join(local, "train")) {
		srv.PutFile(t, "data", "train/"+rel, filepath.Join(local, "train", rel))
	}
	entries, err := os.ReadDir(sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		srv.PutFile(t, "data", "flat/"+e.Name(), filepath.Join(sample, e.Name()))
	}
	web := httptest.NewServer(http.FileServer(http.Dir(sample)))
	defer web.Close()
	remoteArgs := fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s", srv.Endpoint, t.TempDir())
	for _, c := range []struct{ local, url string }{
		{`source image_folder path="` + local + `/train"`, `source image_folder path="s3://data/train/"` + remoteArgs},
		{`source image_folder path="` + sample + `" labels="` + sample + `/labels.csv" classes="` + sample + `/synsets.csv"`,
			`source image_folder path="s3://data/flat" labels="s3://data/flat/labels.csv" classes="s3://data/flat/synsets.csv"` + remoteArgs},
		{`source image_folder path="` + sample + `" labels="` + sample + `/labels.csv"`,
			`source image_folder path="` + web.URL + `" labels="` + web.URL + `/labels.csv"` + remoteArgs},
	} {
		for _, run := range []struct{ rank, world, workers int }{{0, 1, 1}, {0, 1, 3}, {1, 2, 2}} {
			want := objstoreSums(t, c.local, run.rank, run.world, run.workers)
			got := objstoreSums(t, c.url, run.rank, run.world, run.workers)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s, rank %d of %d, %d workers: checksums %v, local files give %v", c.url, run.rank, run.world, run.workers, got, want)
			}
		}
	}

	rem := &source.Remote{Store: remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true}), Cache: &remote.Cache{Dir: t.TempDir()}}
	want, err := source.OpenFolder(t.Context(), filepath.Join(local, "train"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := source.OpenFolder(t.Context(), "s3://data/train", source.WithRemote(rem))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if w, g := want.Info(), got.Info(); g.NonImages != w.NonImages || strings.Join(g.Classes, ",") != strings.Join(w.Classes, ",") || got.Len() != want.Len() {
		t.Errorf("s3 folder: %d samples, classes %q, %d non-images; on disk %d, %q, %d", got.Len(), g.Classes, g.NonImages, want.Len(), w.Classes, w.NonImages)
	}

	for _, c := range []struct {
		path, labels string
		is           error
		holds        string
	}{
		{web.URL, "", remote.ErrBadURL, "give labels="},
		{"s3://nobucket/train", "", source.ErrDownload, "NoSuchBucket"},
		{"s3://data/none", "", source.ErrDownload, "s3://data/none"},
		{"s3://data/train", "s3://data/flat/labels.csv", remote.ErrNotFound, "s3://data/train/n01440764_tench.JPEG"},
		{web.URL, web.URL + "/missing.csv", source.ErrDownload, web.URL + "/missing.csv"},
	} {
		opts := []source.Option{source.WithRemote(rem)}
		if c.labels != "" {
			opts = append(opts, source.WithLabels(c.labels))
		}
		_, err := source.OpenFolder(t.Context(), c.path, opts...)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.holds) {
			t.Errorf("%s labels=%q: %v; want %v holding %q", c.path, c.labels, err, c.is, c.holds)
		}
	}
}

// pipeSums loads a pipeline of the source line src, decoding, shuffled by
// the shuffle line, as rank of world with workers workers, and returns its
// checksums of 2 epochs, or the error loading or running it.
func pipeSums(t *testing.T, src, shuffle string, rank, world, workers int) ([]string, error) {
	t.Helper()
	return textSums(t, src+"\ndecode\n"+shuffle+"\nresize 24\ncenter_crop 24\nbatch 8\nto_tensor layout=nchw dtype=uint8\n", rank, world, workers)
}

// diskWatch polls the bytes dir holds and the bytes and number of its
// files this process holds open (removed ones too) until stop, which
// returns the most of each seen at once.
func diskWatch(t *testing.T, dir string) (stop func() (bytes int64, open int)) {
	t.Helper()
	var most int64
	var mostOpen int
	done := make(chan struct{})
	finished := make(chan struct{})
	poll := func() {
		var n int64
		seen := map[string]bool{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if info, err := e.Info(); err == nil && e.Type().IsRegular() && !strings.HasSuffix(e.Name(), ".lock") {
				n += info.Size()
				seen[info.Name()] = true
			}
		}
		open := 0
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			target, err := os.Readlink("/proc/self/fd/" + fd.Name())
			if err != nil || !strings.HasPrefix(target, dir+"/") || strings.HasSuffix(target, ".lock") {
				continue
			}
			open++
			if strings.HasSuffix(target, " (deleted)") {
				if info, err := os.Stat("/proc/self/fd/" + fd.Name()); err == nil {
					n += info.Size() // removed from the directory, still on disk
				}
			}
		}
		most, mostOpen = max(most, n), max(mostOpen, open)
	}
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				poll()
			}
		}
	}()
	return func() (int64, int) {
		close(done)
		<-finished
		return most, mostOpen
	}
}

// TestObjectStoreStreaming: WebDataset shards in S3 more than the shard
// cache holds (cache_size= of 6 of 16 shards) stream through it: the
// checksums equal the local files' for 1 and 3 workers and a rank of 2,
// every epoch fetches the shards again, and the cache's disk (with the
// files held open after their removal) stays within the bound, far below
// the dataset. TFRecord files stream too, cold and from their stored
// offsets and labels. A full shuffle and gzipped shards, which cannot
// stream, are refused with errors that say what to do.
func TestObjectStoreStreaming(t *testing.T) {
	srv := dataBucket(t)
	local := t.TempDir()
	var largest, total int64
	for _, p := range wdsShards(t, local, 16) {
		srv.PutFile(t, "data", "wds/"+filepath.Base(p), p)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		largest, total = max(largest, st.Size()), total+st.Size()
	}
	limit := 6 * largest
	cache := t.TempDir()
	args := fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s cache_size=%d concurrency=2", srv.Endpoint, cache, limit)
	url := `source webdataset path="s3://data/wds/shard-*.tar"` + args
	stream := "shuffle seed=7 buffer=8"
	watch := diskWatch(t, cache)
	before := remote.Totals()
	for _, run := range []struct{ rank, world, workers int }{{0, 1, 1}, {0, 1, 3}, {1, 2, 2}} {
		want, err := pipeSums(t, `source webdataset path="`+local+`/shard-*.tar"`, stream, run.rank, run.world, run.workers)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pipeSums(t, url, stream, run.rank, run.world, run.workers)
		if err != nil {
			t.Fatalf("rank %d of %d, %d workers: %v", run.rank, run.world, run.workers, err)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("rank %d of %d, %d workers: checksums %v, local files give %v", run.rank, run.world, run.workers, got, want)
		}
	}
	fetched := remote.Totals().CacheMisses - before.CacheMisses
	most, open := watch()
	// The cache's limit, the shards fetched ahead (concurrency=2) and
	// the one being read past it.
	bound := limit + 3*largest
	t.Logf("16 shards, %d bytes; cache_size=%d: %d fetches, at most %d bytes on disk and %d shard files open", total, limit, fetched, most, open)
	if most > bound || most >= total {
		t.Errorf("the shard cache took up to %d bytes of disk: want at most %d (cache_size=%d, shards of up to %d bytes; the dataset is %d)", most, bound, limit, largest, total)
	}
	// The shards the cache holds, and those fetched ahead.
	if open > 6+2 {
		t.Errorf("%d shard files open at once: want at most 8", open)
	}
	// The index pass, then three runs of two epochs (the last reading half
	// the shards), each epoch fetching what the cache no longer holds: a
	// cache that held the dataset would fetch each shard once.
	if fetched < 4*16 {
		t.Errorf("%d shards fetched: every epoch should fetch its shards again", fetched)
	}

	// Reads with no epoch's order (the library's Read, an augmentation
	// cache's shards) fetch on demand and keep few shards open.
	rem := &source.Remote{Store: remote.New(remote.Options{Endpoint: srv.Endpoint, PathStyle: true, Concurrency: 2}),
		Cache: &remote.Cache{Dir: cache, Limit: limit}}
	streamed, err := source.OpenWebDataset(t.Context(), "s3://data/wds/shard-*.tar", source.WithRemote(rem))
	if err != nil {
		t.Fatal(err)
	}
	defer streamed.Close()
	plain, err := source.OpenWebDataset(t.Context(), local+"/shard-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	watch = diskWatch(t, cache)
	var a, b source.Record
	for k := range plain.Len() {
		i := (k * 37) % plain.Len() // every sample, hopping between shards
		if err := streamed.Read(i, &a); err != nil {
			t.Fatal(err)
		}
		if err := plain.Read(i, &b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Enc, b.Enc) || a.Label != b.Label {
			t.Fatalf("sample %d read on demand differs from the local file's", i)
		}
	}
	if _, open := watch(); open > 4+1 {
		t.Errorf("reads on demand kept %d shard files open: want at most 5 (4 idle, 1 read)", open)
	}

	for _, c := range []struct {
		name, src, shuffle, holds string
	}{
		{"a full shuffle", url, "shuffle seed=7", "shuffle with buffer="},
	} {
		if _, err := pipeSums(t, c.src, c.shuffle, 0, 1, 2); err == nil || !strings.Contains(err.Error(), c.holds) {
			t.Errorf("%s: %v; want an error holding %q", c.name, err, c.holds)
		}
	}
	// TFRecord files stream too: the real training file cut into 6 by
	// records, through a cache of 3 of them.
	tfLocal := t.TempDir()
	var tfLargest int64
	for _, p := range tfSplit(t, filepath.Join(shareddata.Path(t, "tfrecord"), "train-00000-of-00001"), tfLocal, 6) {
		srv.PutFile(t, "data", "tf/"+filepath.Base(p), p)
		st, _ := os.Stat(p)
		tfLargest = max(tfLargest, st.Size())
	}
	tfArgs := fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s cache_size=%d concurrency=2", srv.Endpoint, t.TempDir(), 3*tfLargest)
	for _, run := range []struct{ rank, world, workers int }{{0, 1, 1}, {1, 2, 2}} {
		want, err := pipeSums(t, `source tfrecord label_offset=1 path="`+tfLocal+`/part-*"`, "shuffle seed=7 buffer=4", run.rank, run.world, run.workers)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // indexing and reading the labels, then from what is stored
			got, err := pipeSums(t, `source tfrecord label_offset=1 path="s3://data/tf/part-*"`+tfArgs, "shuffle seed=7 buffer=4", run.rank, run.world, run.workers)
			if err != nil {
				t.Fatalf("tfrecord, rank %d of %d: %v", run.rank, run.world, err)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("tfrecord, rank %d of %d, %d workers: checksums %v, local files give %v", run.rank, run.world, run.workers, got, want)
			}
		}
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	tarBytes, _ := os.ReadFile(filepath.Join(local, "shard-000.tar"))
	zw.Write(tarBytes)
	zw.Close()
	for i := range 4 {
		srv.Put(t, "data", fmt.Sprintf("gz/shard-%d.tar.gz", i), gz.Bytes())
	}
	gzArgs := fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s cache_size=%d", srv.Endpoint, t.TempDir(), gz.Len()*2)
	if _, err := pipeSums(t, `source webdataset path="s3://data/gz/shard-*.tar.gz"`+gzArgs, stream, 0, 1, 1); err == nil || !strings.Contains(err.Error(), "gzipped shard cannot be streamed") {
		t.Errorf("gzipped shards: %v; want an error saying they cannot be streamed", err)
	}
	gz.Reset()
	zw = gzip.NewWriter(&gz)
	part, _ := os.ReadFile(filepath.Join(tfLocal, "part-0"))
	zw.Write(part)
	zw.Close()
	for i := range 4 {
		srv.Put(t, "data", fmt.Sprintf("tfgz/part-%d", i), gz.Bytes())
	}
	gzArgs = fmt.Sprintf(" endpoint=%s path_style=true cache_dir=%s cache_size=%d", srv.Endpoint, t.TempDir(), gz.Len()*2)
	if _, err := pipeSums(t, `source tfrecord label_offset=1 path="s3://data/tfgz/part-*"`+gzArgs, stream, 0, 1, 1); err == nil || !strings.Contains(err.Error(), "GZIP file cannot be streamed") {
		t.Errorf("GZIP TFRecord files: %v; want an error saying they cannot be streamed", err)
	}
}

// tfSplit cuts the TFRecord file src into n files of consecutive records
// in dir and returns their paths.
func tfSplit(t *testing.T, src, dir string, n int) []string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for off := 0; off+12 <= len(b); {
		size := 16 + int(binary.LittleEndian.Uint64(b[off:]))
		recs = append(recs, b[off:off+size])
		off += size
	}
	var paths []string
	per := (len(recs) + n - 1) / n
	for k := range n {
		p := filepath.Join(dir, fmt.Sprintf("part-%d", k))
		if err := os.WriteFile(p, bytes.Join(recs[k*per:min((k+1)*per, len(recs))], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}
