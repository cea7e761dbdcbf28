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
	"time"

	"github.com/cespare/xxhash/v2"
)

// Cache is a directory of whole shards fetched from a store, shared by the
// processes of one machine (the ranks of an MPI job): a shard is fetched
// once, by whichever process asks first, while the others wait for it.
//
// A shard's file is named by a hash of its URL and a hash of its ETag and
// size, so a changed object is a new file and the old one is removed when
// the new one is fetched. Each URL has a lock file, held (flock) while its
// shard is checked, fetched, or opened by a reader; a fetch is written to
// a temporary name and renamed when whole. When the files pass Limit, the
// least recently used shards (by modification time, which a hit renews)
// are removed with their lock files, except those locked at that moment: a
// shard a process has open stays readable through its descriptor until
// closed.
type Cache struct {
	// Dir is the cache directory. Default: $PIPE_SHARD_CACHE, else
	// pipe/shards under the user cache directory (~/.cache on Linux).
	Dir string
	// Limit bounds the bytes of the shards kept, 0 for no bound (the
	// default: a source holds every shard open while it is open, so a
	// bound below the dataset's size only makes every epoch fetch again).
	Limit int64
}

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
// first if the cache lacks that version, and whether it was there. The
// shard's lock is held until release is called: open the file, then
// release, so no other process evicts it between the two. Cancelling ctx
// stops a fetch (or a wait for another process's) promptly; nothing is
// left under the shard's name.
func (c *Cache) Fetch(ctx context.Context, s *Store, obj Object) (p string, hit bool, release func(), err error) {
	dir, err := c.dir()
	if err != nil {
		return "", false, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, nil, err
	}
	key := fmt.Sprintf("%016x", xxhash.Sum64String(obj.URL))
	ver := fmt.Sprintf("%016x", xxhash.Sum64String(fmt.Sprintf("%s\x00%d", obj.ETag, obj.Size)))
	p = filepath.Join(dir, key+"-"+ver+"-"+safeBase(obj.URL))
	lock, err := lockFile(ctx, filepath.Join(dir, key+".lock"))
	if err != nil {
		return "", false, nil, fmt.Errorf("%s: shard cache: %w", obj.URL, err)
	}
	if st, err := os.Stat(p); err == nil && st.Size() == obj.Size {
		now := time.Now()
		os.Chtimes(p, now, now) // the LRU stamp; best effort
		totals.hits.Add(1)
		return p, true, lock.unlock, nil
	}
	if err := c.fetch(ctx, s, obj, p); err != nil {
		lock.unlock()
		return "", false, nil, err
	}
	totals.misses.Add(1)
	old, _ := filepath.Glob(filepath.Join(dir, key+"-*"))
	for _, o := range old {
		if o != p && !strings.Contains(o, ".tmp-") {
			os.Remove(o)
		}
	}
	if c.Limit > 0 {
		c.evict(dir, key)
	}
	return p, false, lock.unlock, nil
}

// fetch copies obj into a temporary file renamed to dst when whole.
func (c *Cache) fetch(ctx context.Context, s *Store, obj Object, dst string) (err error) {
	tmp, err := os.OpenFile(fmt.Sprintf("%s.tmp-%016x", dst, rand.Uint64()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("%s: shard cache: %w", obj.URL, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	r, err := s.Open(ctx, obj)
	if err != nil {
		return err
	}
	defer r.Close()
	n, err := io.CopyBuffer(tmp, r, make([]byte, 1<<20))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: shard cache: %w", obj.URL, err)
		}
		return err
	}
	if n != obj.Size {
		return fmt.Errorf("%s: %d bytes received, %d expected", obj.URL, n, obj.Size)
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// evict removes the least recently used shards until the rest fit in
// c.Limit, sparing keep (the shard just fetched) and shards locked now.
func (c *Cache) evict(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type shard struct {
		key, path string
		size      int64
		used      time.Time
	}
	var shards []shard
	var total int64
	for _, e := range entries {
		name := e.Name()
		key, _, ok := strings.Cut(name, "-")
		if !ok || strings.Contains(name, ".tmp-") || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		shards = append(shards, shard{key, filepath.Join(dir, name), info.Size(), info.ModTime()})
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
		if os.Remove(sh.path) == nil {
			total -= sh.size
		}
		lock.remove() // the shard's lock file goes with it
	}
}

// safeBase is the last element of u, kept for people reading the
// directory, with characters other than letters, digits, '.', '_' and '-'
// replaced.
func safeBase(u string) string {
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
