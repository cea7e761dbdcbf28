package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/pipefeed/pipe/internal/atomicfile"
)

// Cache is a directory of whole shards fetched from a store, shared by the
// processes of one machine (the ranks of an MPI job): a shard is fetched
// once, by whichever process asks first, while the others wait for it.
//
// A shard's file is named by a hash of its URL and a hash of its version
// (ETag, size and Last-Modified, to the second), so a changed object is a
// new file and the old one is removed when the new one is fetched. Beside
// each shard, a checksum file holds the xxhash64 of its bytes, taken as
// they were fetched: a process that finds the shard in the cache reads it
// whole to check it before handing it out (once: a file it fetched or
// checked, unchanged since by size and modification time, is not read
// again), and a shard that fails the check, or has no checksum (one cached
// before checksums were kept), is fetched again; the damaged ones are
// counted ([DamagedShards]) and reported (Warn). Each URL has a lock file,
// held (flock) while its shard is checked, fetched, or opened by a reader;
// a fetch is written to a temporary name and renamed when whole. Something
// other than a regular file where a shard, its checksum or its lock file
// belongs (a directory, a link) is removed. When the files pass Limit, the
// least recently used shards (by their checksum file's modification time,
// which a hit renews: the shard's own is left as it was written, so a hit
// in one process does not make the others read the shard again to check
// it) are removed with their checksum and lock files, except those locked
// at that moment: a shard a process has open stays readable through its
// descriptor until closed.
type Cache struct {
	// Dir is the cache directory. Default: $PIPE_SHARD_CACHE, else
	// pipe/shards under the user cache directory (~/.cache on Linux).
	Dir string
	// Limit bounds the bytes of the shards kept, 0 for no bound (the
	// default: a source holds every shard open while it is open, so a
	// bound below the dataset's size only makes every epoch fetch again).
	Limit int64
	// Warn, when set, is told of each damaged shard found, in a line that
	// names its file; default: the line goes to standard error.
	Warn func(msg string)
}

// damaged counts the cached shards found damaged and fetched again.
var damaged atomic.Int64

// DamagedShards returns how many shards this process found damaged in a
// shard cache (their bytes not those checksummed when fetched) and fetched
// again.
func DamagedShards() int64 { return damaged.Load() }

// verified is the cached files this process fetched or checked, as a stat
// found them just after: one still the same file, of the same size and
// modification time, is not read again to check it.
var verified = struct {
	sync.Mutex
	m map[string]os.FileInfo
}{m: map[string]os.FileInfo{}}

// DefaultCacheDir is where shards go when Cache.Dir is empty.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("PIPE_SHARD_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no shard cache directory: %w (set PIPE_SHARD_CACHE or cache_dir)", err)
	}
	return filepath.Join(d, "pipe", "shards"), nil
}

func (c *Cache) dir() (string, error) {
	if c.Dir != "" {
		return c.Dir, nil
	}
	return DefaultCacheDir()
}

// Fetch returns the path of obj's bytes in the cache, fetching them from s
// first if the cache lacks that version or holds it damaged, and whether it
// was there. The shard's lock is held until release is called: open the
// file, then release, so no other process evicts it between the two.
// Cancelling ctx stops a fetch (or a wait for another process's) promptly;
// nothing is left under the shard's name.
func (c *Cache) Fetch(ctx context.Context, s *Store, obj Object) (p string, hit bool, release func(), err error) {
	e, lock, err := c.get(ctx, s, obj)
	if err != nil {
		return "", false, nil, err
	}
	return e.path, e.hit, lock.unlock, nil
}

// Open is Fetch, then opening the file while the shard's lock is held, so
// it cannot be evicted in between; open, it stays readable. sum is the
// xxhash64 of its bytes, checked against them since they were fetched.
func (c *Cache) Open(ctx context.Context, s *Store, obj Object) (f *os.File, sum uint64, err error) {
	e, lock, err := c.get(ctx, s, obj)
	if err != nil {
		return nil, 0, err
	}
	defer lock.unlock()
	f, err = os.Open(e.path)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
	}
	return f, e.sum, nil
}

// entry is a shard in the cache: its file, the checksum of its bytes, and
// whether it was there before the call that found it.
type entry struct {
	path string
	sum  uint64
	hit  bool
}

// get finds obj's shard in the cache, checked, or fetches it, and returns
// it with its lock held.
func (c *Cache) get(ctx context.Context, s *Store, obj Object) (e entry, _ *fileLock, err error) {
	dir, err := c.dir()
	if err != nil {
		return entry{}, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return entry{}, nil, err
	}
	// Keyed by the URL without what signs it: a presigned URL signed
	// again is the same shard. Only its hash is written into the
	// directory.
	key := fmt.Sprintf("%016x", xxhash.Sum64String(ObjectKey(obj.URL)))
	var modified int64
	if !obj.LastModified.IsZero() {
		modified = obj.LastModified.Unix() // HTTP dates, and HEAD's, are to the second
	}
	ver := fmt.Sprintf("%016x", xxhash.Sum64String(fmt.Sprintf("%s\x00%d\x00%d", obj.ETag, obj.Size, modified)))
	e.path = filepath.Join(dir, key+"-"+ver+"-"+safeBase(obj.URL))
	sums := sumPath(dir, key, ver)
	lockName := filepath.Join(dir, key+".lock")
	if err := atomicfile.ClearWay(lockName, "a cached file"); err != nil {
		return entry{}, nil, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
	}
	held, err := lockFile(ctx, lockName)
	if err != nil {
		return entry{}, nil, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
	}
	defer func() {
		if err != nil {
			held.unlock()
		}
	}()
	for _, p := range []string{e.path, sums} {
		if err := atomicfile.ClearWay(p, "a cached file"); err != nil {
			return entry{}, nil, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
		}
	}
	if sum, ok := c.check(e.path, sums, obj); ok {
		totals.hits.Add(1)
		return entry{path: e.path, sum: sum, hit: true}, held, nil
	}
	os.Remove(sums) // a crash before the new one is written leaves the shard unchecked, to be fetched again
	if e.sum, err = c.fetch(ctx, s, obj, e.path); err != nil {
		return entry{}, nil, err
	}
	if err := writeSum(sums, e.sum); err != nil {
		return entry{}, nil, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
	}
	stamp(e.path, sums)
	totals.misses.Add(1)
	old, _ := filepath.Glob(filepath.Join(dir, key+"-*"))
	for _, o := range old {
		if o == e.path || o == sums || (strings.Contains(o, ".tmp-") && !locksAcrossProcesses) {
			continue
		}
		// Older versions, and what a fetch killed with its process left
		// (which no cache_size counted).
		forget(o)
		os.Remove(o)
	}
	if c.Limit > 0 {
		c.evict(dir, key)
	}
	return e, held, nil
}

// check returns the checksum of the shard at p, of obj, if it is there,
// whole and undamaged: of obj's size, with a checksum file at sums, and
// its bytes matching that checksum (read unless this process fetched or
// checked the file and it has not changed since). A damaged shard is
// counted and reported. A hit renews the checksum file's modification
// time, the LRU stamp.
func (c *Cache) check(p, sums string, obj Object) (uint64, bool) {
	st, err := os.Stat(p)
	if err != nil || st.Size() != obj.Size {
		return 0, false
	}
	want, ok := readSum(sums)
	if !ok {
		return 0, false // cached before checksums were kept, or cut short
	}
	verified.Lock()
	seen, ok := verified.m[p]
	verified.Unlock()
	if !ok || !os.SameFile(seen, st) || seen.Size() != st.Size() || !seen.ModTime().Equal(st.ModTime()) {
		got, err := fileSum(p)
		if err != nil {
			return 0, false
		}
		if got != want {
			damaged.Add(1)
			c.warn(fmt.Sprintf("shard cache: %s (%s) was damaged (checksum %016x, %016x when fetched); fetched again", p, Redact(obj.URL), got, want))
			return 0, false
		}
	}
	stamp(p, sums)
	return want, true
}

func (c *Cache) warn(msg string) {
	if c.Warn != nil {
		c.Warn(msg)
		return
	}
	fmt.Fprintf(os.Stderr, "pipe: warning: %s\n", msg)
}

// stamp sets the modification time of the checksum file at sums, the LRU
// stamp of the shard at p, to now (best effort), and notes the shard as
// checked, as it is then. The shard's own time stays the time it was
// written, so that a process that checked it finds it unchanged however
// often other processes use it, and a write to it is noticed.
func stamp(p, sums string) {
	now := time.Now()
	os.Chtimes(sums, now, now)
	st, err := os.Stat(p)
	verified.Lock()
	defer verified.Unlock()
	if err != nil {
		delete(verified.m, p)
		return
	}
	verified.m[p] = st
}

// forget drops the shard at p, removed, from those checked.
func forget(p string) {
	verified.Lock()
	delete(verified.m, p)
	verified.Unlock()
}

// sumPath is where the checksum of a shard of key and ver is kept:
// key-ver.sum, which no shard's name (key-ver-base) can be.
func sumPath(dir, key, ver string) string {
	return filepath.Join(dir, key+"-"+ver+".sum")
}

// isSum reports whether name, in a cache directory, is a checksum file.
func isSum(name string) bool {
	return len(name) == 16+1+16+len(".sum") && strings.HasSuffix(name, ".sum")
}

// readSum returns the checksum stored at p: 16 hex digits and a newline.
func readSum(p string) (uint64, bool) {
	b, err := os.ReadFile(p)
	if err != nil || len(b) != 17 || b[16] != '\n' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:16]), 16, 64)
	return v, err == nil
}

// writeSum stores sum at p, through a temporary file renamed when whole.
func writeSum(p string, sum uint64) error {
	tmp := fmt.Sprintf("%s.tmp-%016x", p, rand.Uint64())
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%016x\n", sum), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// fileSum returns the xxhash64 of the file at p.
func fileSum(p string) (uint64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := xxhash.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// fetch copies obj into a temporary file renamed to dst when whole and
// returns the xxhash64 of its bytes.
func (c *Cache) fetch(ctx context.Context, s *Store, obj Object, dst string) (sum uint64, err error) {
	tmp, err := os.OpenFile(fmt.Sprintf("%s.tmp-%016x", dst, rand.Uint64()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	r, err := s.Open(ctx, obj)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	h := xxhash.New()
	n, err := io.CopyBuffer(io.MultiWriter(tmp, h), r, make([]byte, 1<<20))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return 0, fmt.Errorf("%s: shard cache: %w", Redact(obj.URL), err)
		}
		return 0, err
	}
	if n != obj.Size {
		return 0, fmt.Errorf("%s: %d bytes received, %d expected", Redact(obj.URL), n, obj.Size)
	}
	if err = tmp.Sync(); err != nil {
		return 0, err
	}
	if err = tmp.Close(); err != nil {
		return 0, err
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// evict removes the least recently used shards until the rest fit in
// c.Limit, sparing keep (the shard just fetched) and shards locked now.
func (c *Cache) evict(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type shard struct {
		key, ver, path string
		size           int64
		used           time.Time
	}
	var shards []shard
	var total int64
	// A shard's use is its checksum file's time (stamp).
	used := map[string]time.Time{}
	for _, e := range entries {
		if name := e.Name(); isSum(name) && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				used[name] = info.ModTime()
			}
		}
	}
	for _, e := range entries {
		name := e.Name()
		key, rest, ok := strings.Cut(name, "-")
		if !ok || strings.Contains(name, ".tmp-") || isSum(name) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		ver, _, _ := strings.Cut(rest, "-")
		t, ok := used[filepath.Base(sumPath(dir, key, ver))]
		if !ok {
			t = info.ModTime()
		}
		shards = append(shards, shard{key, ver, filepath.Join(dir, name), info.Size(), t})
		total += info.Size()
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i].used.Before(shards[j].used) })
	for _, sh := range shards {
		if total <= c.Limit {
			return
		}
		if sh.key == keep {
			continue
		}
		lock, ok := tryLockFile(filepath.Join(dir, sh.key+".lock"))
		if !ok {
			continue
		}
		forget(sh.path)
		if os.Remove(sh.path) == nil {
			total -= sh.size
		}
		os.Remove(sumPath(dir, sh.key, sh.ver))
		lock.remove() // the shard's lock file goes with it
	}
}

// safeBase is the last element of u's path (without an http(s) query),
// kept for people reading the directory, with characters other than
// letters, digits, '.', '_' and '-' replaced.
func safeBase(u string) string {
	if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		u, _, _ = strings.Cut(u, "?")
	}
	b := []byte(path.Base(u))
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[len(b)-100:]
	}
	return string(b)
}

// ParseSize reads a size in bytes: digits, then optionally K, M, G or T
// (powers of 1024; any case, with or without a trailing B or iB). "" is 0.
func ParseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if u == "" {
		return 0, nil
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "B"), "I")
	if u == "" {
		return 0, fmt.Errorf("%q is not a size (like 500G)", s)
	}
	shift := 0
	if k := strings.IndexByte("KMGT", u[len(u)-1]); k >= 0 && len(u) > 1 {
		shift = 10 * (k + 1)
		u = u[:len(u)-1]
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a size (like 500G)", s)
	}
	return n << shift, nil
}
