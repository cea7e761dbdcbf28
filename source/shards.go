package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/pipefeed/pipe/internal/atomicfile"
	"github.com/pipefeed/pipe/source/remote"
)

// Remote is where sources fetch shards named by URLs (s3://, http://,
// https://) and where they keep them: a store and a shard cache on local
// disk. The zero value, or a nil *Remote, uses the environment's S3
// settings ([remote.Options] defaults) and the default cache directory.
type Remote struct {
	Store *remote.Store
	Cache *remote.Cache
	// Progress, when set, is told the bytes of the shards in the cache so
	// far and their total while a source fetches them, every 100 ms and
	// at the end.
	Progress func(done, total int64)
}

var (
	defaultStoreOnce sync.Once
	defaultStore     *remote.Store
)

func (r *Remote) progress() func(done, total int64) {
	if r == nil {
		return nil
	}
	return r.Progress
}

func (r *Remote) parts() (*remote.Store, *remote.Cache) {
	var s *remote.Store
	var c *remote.Cache
	if r != nil {
		s, c = r.Store, r.Cache
	}
	if s == nil {
		defaultStoreOnce.Do(func() { defaultStore = remote.New(remote.Options{}) })
		s = defaultStore
	}
	if c == nil {
		c = &remote.Cache{}
	}
	return s, c
}

// args are the parameters that reopen r's store and cache for a URL
// pattern, as a pipeline file writes them (nil for a local pattern): the
// endpoint, region, addressing, concurrency, retry budget and cache, never credentials,
// which stay with the environment.
func (r *Remote) args(pattern string) []Arg {
	if !remote.IsURL(pattern) {
		return nil
	}
	store, cache := r.parts()
	o := store.Options()
	var args []Arg
	if o.Endpoint != "" {
		args = append(args, Arg{"endpoint", o.Endpoint})
	}
	if o.Region != "" {
		args = append(args, Arg{"region", o.Region})
	}
	if o.PathStyle {
		args = append(args, Arg{"path_style", "true"})
	}
	args = append(args, Arg{"concurrency", strconv.Itoa(o.Concurrency)}, Arg{"retry_for", o.RetryFor.String()})
	if cache.Dir != "" {
		args = append(args, Arg{"cache_dir", cache.Dir})
	}
	if cache.Limit > 0 {
		args = append(args, Arg{"cache_size", strconv.FormatInt(cache.Limit, 10)})
	}
	return args
}

// shardFile is one file of a sharded source.
type shardFile struct {
	name string   // as the user knows it: a local path or a URL, for errors
	path string   // the local file holding its bytes (a cached copy for a URL)
	fh   *os.File // for a URL, path opened while the cache's lock was held; else nil
	fp   string   // for a URL, its fingerprint (URL, size, ETag, Last-Modified); else found from the file
	sum  uint64   // for a URL, the xxhash64 of its bytes in the shard cache
}

// open returns the shard's file, opened now unless it was already.
func (s *shardFile) open() (*os.File, error) {
	if s.fh != nil {
		fh := s.fh
		s.fh = nil
		return fh, nil
	}
	return os.Open(s.path)
}

// fingerprint describes the shard's data for Fingerprint and index keys.
func (s *shardFile) fingerprint() (string, error) {
	if s.fp != "" {
		return s.fp, nil
	}
	return fileFingerprint(s.path)
}

// copyKey names what is made from the shard's bytes and read in their
// place (a gzipped shard's plain copy): its fingerprint fp and, for a URL,
// the checksum of the bytes in the cache, so that a copy is only read for
// the bytes it was made from.
func (s *shardFile) copyKey(fp string) string {
	if s.fp == "" {
		return fp
	}
	return fmt.Sprintf("%s xxh64=%016x", fp, s.sum)
}

// shardList is the files of a sharded source, in index order. For a URL
// pattern they are fetched in the background, in order, several at once,
// and get hands each out as soon as it is in the cache, so a source
// indexes the first shards while the later ones still arrive.
type shardList struct {
	files []shardFile
	ready []chan struct{} // closed when files[i] is fetched or failed; nil for local files
	errs  []error

	store  *remote.Store
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	stop   func() // ends progress reports
	mu     sync.Mutex
	first  error // the first fetch's error, which cancelled the others

	// stream, for URL shards more than the shard cache holds, reads them
	// on demand (see shardStream) instead: nothing is fetched here, and
	// files hold names and fingerprints only. The source takes it.
	stream *shardStream
}

func (l *shardList) len() int { return len(l.files) }

// get waits until shard i is ready and returns it, or the first error of
// any fetch (wrapping ErrDownload unless it is the context's).
func (l *shardList) get(i int) (*shardFile, error) {
	if l.ready == nil {
		return &l.files[i], nil
	}
	<-l.ready[i]
	if l.errs[i] == nil {
		return &l.files[i], nil
	}
	l.mu.Lock()
	err := l.first
	l.mu.Unlock()
	if err == nil {
		err = l.errs[i]
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %w", ErrDownload, err)
}

// close cancels the fetches still under way, waits for them, and closes
// the files no source took.
func (l *shardList) close() {
	if l.stream != nil {
		l.stream.close()
	}
	if l.cancel != nil {
		l.cancel(context.Canceled)
		l.wg.Wait()
		l.stop()
		// Every shard is on disk now: the connections' goroutines need
		// not wait out their idle timeout.
		l.store.Close()
	}
	for _, f := range l.files {
		if f.fh != nil {
			f.fh.Close()
		}
	}
}

// shardFiles returns the files pattern names and sets an empty *dir to the
// default index directory, $PIPE_CACHE/<what>. Braces are expanded first
// (shard-{000..099}.tar, {train,extra}-*); then a local name is a glob
// (sorted matches), and a URL's objects are listed and fetched into the
// shard cache in the background (see shardList), each opened before its
// cache lock is let go. The caller closes the list.
func shardFiles(ctx context.Context, what, pattern string, rem *Remote, dir *string) (*shardList, error) {
	if *dir == "" {
		root, err := DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("%s: %w (or set index_dir)", what, err)
		}
		*dir = filepath.Join(root, what)
	}
	if remote.IsURL(pattern) {
		l, err := fetchShards(ctx, what, pattern, rem)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return l, nil
	}
	globs, err := remote.ExpandBraces(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var files []shardFile
	for _, g := range globs {
		names, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: %s: no such files", what, g)
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, shardFile{name: n, path: n})
		}
	}
	return &shardList{files: files}, nil
}

// fetchShards lists the objects pattern names and starts bringing each
// into the shard cache, in order, up to the store's concurrency at once.
// The first error cancels the other fetches. When the cache has a limit
// below the objects' total, it fetches nothing and hands the source a
// shardStream instead.
func fetchShards(ctx context.Context, what, pattern string, rem *Remote) (*shardList, error) {
	store, cache := rem.parts()
	objs, err := store.List(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDownload, err)
	}
	var total int64
	for _, o := range objs {
		total += o.Size
	}
	if cache.Limit > 0 && total > cache.Limit {
		l := &shardList{files: make([]shardFile, len(objs)), stream: newShardStream(what, store, cache, objs)}
		for i, o := range objs {
			l.files[i] = shardFile{name: remote.Redact(o.URL), fp: objectFingerprint(o)}
		}
		return l, nil
	}
	l := &shardList{store: store, files: make([]shardFile, len(objs)), ready: make([]chan struct{}, len(objs)), errs: make([]error, len(objs)), stop: func() {}}
	for i := range l.ready {
		l.ready[i] = make(chan struct{})
	}
	ctx, l.cancel = context.WithCancelCause(ctx)
	if progress := rem.progress(); progress != nil {
		l.stop = reportFetch(objs, progress)
	}
	l.wg.Go(func() {
		eachIndex(len(objs), store.Options().Concurrency, func(i int) {
			if ctx.Err() != nil {
				l.errs[i] = context.Cause(ctx)
			} else {
				l.files[i], l.errs[i] = fetchShard(ctx, store, cache, objs[i])
			}
			if l.errs[i] != nil {
				l.mu.Lock()
				if l.first == nil {
					l.first = l.errs[i]
					l.cancel(l.errs[i])
				}
				l.mu.Unlock()
			}
			close(l.ready[i])
		})
	})
	return l, nil
}

// eachIndex calls fn(i) for every i in [0, n), taken in order by at most
// conc goroutines at once, and returns once every call has. fn decides what
// a cancelled context means for the indexes still to come.
func eachIndex(n, conc int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// reportFetch tells progress the bytes received since it was called (a
// process-wide count, so other fetches at once count too, up to the total)
// every 100 ms, until stop, which reports once more.
func reportFetch(objs []remote.Object, progress func(done, total int64)) (stop func()) {
	var total int64
	for _, o := range objs {
		total += o.Size
	}
	start := remote.Totals()
	report := func() {
		t := remote.Totals()
		progress(min(t.Bytes-start.Bytes, total), total)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				report()
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		report()
	}
}

func fetchShard(ctx context.Context, store *remote.Store, cache *remote.Cache, obj remote.Object) (shardFile, error) {
	fh, sum, err := cache.Open(ctx, store, obj)
	if err != nil {
		return shardFile{}, err
	}
	return shardFile{name: remote.Redact(obj.URL), path: fh.Name(), fh: fh, fp: objectFingerprint(obj), sum: sum}, nil
}

// objectFingerprint describes an object's version for fingerprints and
// index keys: its URL without what signs it (remote.ObjectKey), shown with
// its secrets hidden and told apart by a hash of the rest (?key=a and
// ?key=b are two objects), its size, ETag and Last-Modified, to the
// second, as the shard cache tells versions apart.
func objectFingerprint(obj remote.Object) string {
	key := remote.ObjectKey(obj.URL)
	fp := fmt.Sprintf("%s key=%016x size=%d etag=%s", remote.Redact(key), xxhash.Sum64String(key), obj.Size, obj.ETag)
	if !obj.LastModified.IsZero() {
		fp += " modified=" + obj.LastModified.UTC().Format(time.RFC3339)
	}
	return fp
}

// storeIndex stores b at path, whole or not at all (see writeAtomic) and
// best effort: without a writable index directory, an index is made again
// on every open.
func storeIndex(path string, b []byte) {
	if atomicfile.ClearWay(path, "an index file") != nil {
		return
	}
	writeAtomic(path, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}
