package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/klauspost/compress/zstd"
)

// FormatVersion is the on-disk format this package writes and reads. A
// directory written by a newer format is refused, never guessed at. A
// change of Badger's own format (the version in its MANIFEST header) must
// bump it too: this package takes any other MANIFEST header for damage.
const FormatVersion = 1

// formatFile records the format of a cache directory beside Badger's files.
const formatFile = "pipe-cache.json"

var (
	// ErrMiss means the cache holds no entry for a key.
	ErrMiss = errors.New("cache miss")
	// ErrCorrupt means a stored entry failed its checksum or does not
	// parse; the caller recomputes it and Puts it again.
	ErrCorrupt = errors.New("corrupt cache entry")
	// ErrLocked means another process has the cache directory open.
	ErrLocked = errors.New("cache directory is in use by another process")
	// ErrNewerFormat means the directory was written by a newer pipe.
	ErrNewerFormat = errors.New("cache directory written by a newer format")
	// ErrDiskFull means a write was refused because the disk is nearly
	// full. Badger writes through memory-mapped files, and a process that
	// fills its disk that way dies of SIGBUS instead of seeing an error, so
	// the cache stops writing while there is room left.
	ErrDiskFull = errors.New("disk nearly full")
	// ErrReadOnly means the cache was opened read-only (its directory
	// cannot be written) and a write was asked of it.
	ErrReadOnly = errors.New("cache is read-only")
	// ErrDamaged means the store itself is damaged, not one entry: a table
	// of Badger's index, a value log header, the MANIFEST, the KEYREGISTRY
	// or pipe's format record fails its check, Badger cannot open its
	// files, or Badger panicked inside a call. A store found
	// damaged while open is not entered again: every later call returns the
	// same error. Open with WithRepair mends or rebuilds it.
	ErrDamaged = errors.New("damaged cache store")
)

// Fingerprint names the content of a cache: a hash of everything that
// decides the cached bytes (source identity, stages, seed, shard size).
// Change any of it and the fingerprint changes, so stale entries are never
// found, only left for GC.
type Fingerprint string

// NewFingerprint hashes parts (each length-prefixed, so part boundaries
// count) into a fingerprint of 32 hex digits.
func NewFingerprint(parts ...string) Fingerprint {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return Fingerprint(hex.EncodeToString(h.Sum(nil)[:16]))
}

// Meta describes what a fingerprint's entries hold; it is written once per
// fingerprint, for `pipe cache ls`.
type Meta struct {
	// Stages is the canonical text of the stages whose output is cached.
	Stages string `json:"stages"`
	// Samples and ShardSize give the number of shards per epoch.
	Samples   int `json:"samples"`
	ShardSize int `json:"shard_size"`
	// Epochs is how many distinct epochs the pipeline caches (1 when
	// nothing random runs before the cache).
	Epochs int `json:"epochs"`
	// EveryEpoch reports one copy, stored as epoch 0, that every epoch
	// reads: nothing random runs before the cache. (Absent from what
	// pipe wrote before it was recorded: false.)
	EveryEpoch bool      `json:"every_epoch,omitempty"`
	Created    time.Time `json:"created"`
}

// Shards is the number of shards of an epoch.
func (m Meta) Shards() int { return (m.Samples + m.ShardSize - 1) / m.ShardSize }

// Store is a directory of cached shards in Badger. Values are compressed
// with zstd (or kept raw when that does not pay) and carry a checksum of
// their raw bytes and the layout they hold. Each Put is one Badger
// transaction, so a crash leaves only whole entries visible. A Store is safe
// for concurrent use.
type Store struct {
	db       *badger.DB
	dir      string
	enc      *zstd.Encoder
	dec      *zstd.Decoder
	readOnly bool
	reserve  int64
	rel      releaser
	written  atomic.Int64 // bytes Put since the last releaseAll
	repairs  []string
	damaged  atomic.Pointer[error] // set once: see Damaged
	// unreadable is set when Badger could not read a value from the value
	// log, which may leave the file read-locked and Badger's Close waiting.
	unreadable atomic.Bool
}

// releaseEvery is how many bytes Put writes between releases of what the
// writes left mapped.
const releaseEvery = 64 << 20

// Option configures Open.
type Option func(*config)

type config struct {
	badger  badger.Options
	reserve int64
	repair  bool
}

// WithMemTableSize sets Badger's memtable size in bytes (default 16 MiB; two
// memtables are kept). Larger speeds up warming of huge caches and costs
// resident memory.
func WithMemTableSize(n int64) Option {
	return func(c *config) { c.badger = c.badger.WithMemTableSize(n) }
}

// WithIndexCacheSize sets Badger's index cache in bytes (default 8 MiB).
func WithIndexCacheSize(n int64) Option {
	return func(c *config) { c.badger = c.badger.WithIndexCacheSize(n) }
}

// WithReserve sets the free disk space below which the cache stops writing
// (default 64 MiB: room for Badger to flush its memtables and finish the
// value log write in progress). Writes then fail with ErrDiskFull.
func WithReserve(n int64) Option {
	return func(c *config) { c.reserve = n }
}

// WithRepair makes Open mend a damaged store rather than fail with
// ErrDamaged (default false, for tools that report, like pipe cache verify).
// Damage to bytes whose content is known (a value log header, the MANIFEST's
// header, the KEYREGISTRY of a store that is never encrypted, pipe's format
// record) is written again as it was and no entry is lost; any other damage
// rebuilds the store empty, so its entries are computed and written again.
// Repairs says what was done. A read-only directory is never changed.
func WithRepair(on bool) Option {
	return func(c *config) { c.repair = on }
}

// badgerOptions are Badger's options sized for a cache beside a training job
// rather than a database server: about 50 MB of Badger's own memory (two
// 16 MiB memtables, an 8 MiB index cache, no block cache since blocks are
// not compressed by Badger) instead of Badger's default of several hundred.
// Shard values (hundreds of KB) live in the value log, which is memory
// mapped: the kernel, not the heap, holds what is read. Value log files are
// 64 MiB rather than Badger's 1 GiB because Badger reads the whole last file
// through its mapping when it opens, and that read counts as resident memory
// (and GC reclaims space a file at a time).
func badgerOptions(dir string) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(nil).
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(0).
		WithIndexCacheSize(8 << 20).
		WithValueThreshold(1 << 10).
		WithValueLogFileSize(64 << 20).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(12).
		WithNumCompactors(2).
		WithCompression(options.None).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithSyncWrites(false).
		WithMetricsEnabled(false)
}

type formatRecord struct {
	Format int    `json:"format"`
	Writer string `json:"writer"`
}

// Open opens (creating if needed) the cache in dir. A directory that
// exists but cannot be written opens read-only: what it holds can be read,
// and Put returns ErrReadOnly. Before Badger reads them, the tables of its
// index and the value log headers are checked: a damaged store is an error
// wrapping ErrDamaged, or is repaired (see WithRepair).
func Open(dir string, opts ...Option) (*Store, error) {
	cfg := config{badger: badgerOptions(dir), reserve: 64 << 20}
	for _, f := range opts {
		f(&cfg)
	}
	readOnly := false
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	if err := checkFormat(dir); err != nil {
		if !isReadOnly(err) {
			return nil, err
		}
		return nil, fmt.Errorf("cache %s: cannot be written and holds no pipe cache: %w", dir, err)
	}
	if !writable(dir) {
		readOnly = true
		cfg.badger = cfg.badger.WithReadOnly(true)
	}
	var rep repair
	found, err := checkOrRepair(dir, cfg, readOnly, nil)
	if err != nil {
		return nil, err
	}
	rep.add(found)
	db, err := openBadger(cfg.badger)
	if errors.Is(err, ErrDamaged) {
		// Damage only Badger saw: rebuild if allowed, and open again.
		found, rerr := checkOrRepair(dir, cfg, readOnly, err)
		if rerr != nil {
			return nil, rerr
		}
		rep.add(found)
		db, err = openBadger(cfg.badger)
	}
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, lockedError(dir)
		}
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	releaseAll() // what Badger's open-time checks read
	// No zstd frame checksum: every segment already carries an xxhash that
	// reads verify, and hashing twice cost 6 % of a warm ImageNet epoch.
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.IgnoreChecksum(true))
	return &Store{db: db, dir: dir, enc: enc, dec: dec, readOnly: readOnly, reserve: cfg.reserve, repairs: rep.lines(dir)}, nil
}

func lockedError(dir string) error {
	return fmt.Errorf("cache %s: %w (another pipe run or warm has it open; wait for it, or use another dir=)", dir, ErrLocked)
}

// ReadOnly reports whether the cache was opened read-only.
func (c *Store) ReadOnly() bool { return c.readOnly }

// Repairs describes the damage Open found and what it did, in one line
// that names the directory and each damaged file; none when the store was
// whole.
func (c *Store) Repairs() []string { return c.repairs }

// writable reports whether files can be created in dir.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".pipe-write-test-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

func isReadOnly(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// checkFormat refuses a directory of a newer format, or one that holds
// other files and no format record, and stamps a new one. A record that
// cannot be read is damage, which checkStore reports.
func checkFormat(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, formatFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		entries, _ := os.ReadDir(dir)
		if len(entries) > 0 {
			return fmt.Errorf("cache %s: the directory is not empty and has no %s: not a pipe cache (choose an empty or new dir=)", dir, formatFile)
		}
		if err := writeFormat(dir); err != nil {
			return fmt.Errorf("cache %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("cache %s: %w", dir, err)
	}
	var f formatRecord
	if json.Unmarshal(b, &f) == nil && f.Format > FormatVersion {
		return fmt.Errorf("cache %s: %w: format %d, this pipe reads format %d (upgrade pipe, or use another dir=)", dir, ErrNewerFormat, f.Format, FormatVersion)
	}
	return nil
}

// writeFormat writes the format record of this package.
func writeFormat(dir string) error {
	b, _ := json.Marshal(formatRecord{Format: FormatVersion, Writer: "pipe"})
	return os.WriteFile(filepath.Join(dir, formatFile), b, 0o644)
}

// Close flushes and closes the cache. It does not wait for Badger for good:
// a Badger close that is still waiting after a minute (two seconds once
// damage was seen) is reported as an error wrapping ErrDamaged and left to
// finish, or not, before the process exits.
func (c *Store) Close() error {
	c.rel.flush()
	err := c.closeDB()
	c.enc.Close()
	c.dec.Close()
	return err
}

// Dir is the cache's directory.
func (c *Store) Dir() string { return c.dir }

func shardKey(fp Fingerprint, epoch, shard int) []byte {
	return fmt.Appendf(nil, "s/%s/%08x/%08x", fp, epoch, shard)
}

func metaKey(fp Fingerprint) []byte { return []byte("m/" + string(fp)) }

// Value layout: magic, entry format, codec, reserved, raw length, segment
// size, segment count, layout length; then the layout, one xxhash64 per
// segment of the raw bytes, and the payload (raw or zstd). Checksums per
// segment let a reader verify just the bytes it uses (see View).
const (
	magic       = "PIPS"
	entryFormat = 2
	headerSize  = 4 + 1 + 1 + 2 + 4 + 4 + 4 + 2
	segmentSize = 64 << 10
	codecRaw    = 0
	codecZstd   = 1
)

// Put stores raw as the entry (fp, epoch, shard), with layout describing
// what the bytes are (the reader checks it). It overwrites any entry there.
func (c *Store) Put(fp Fingerprint, epoch, shard int, layout string, raw []byte) error {
	if c.readOnly {
		return fmt.Errorf("cache %s: %w", c.dir, ErrReadOnly)
	}
	if free, ok := freeBytes(c.dir); ok && free < c.reserve+int64(len(raw)) {
		return fmt.Errorf("cache %s: %w: %d MiB free, keeping %d MiB in reserve", c.dir, ErrDiskFull, free>>20, c.reserve>>20)
	}
	val := c.encode(layout, raw)
	err := c.call("Update", func() error {
		return c.db.Update(func(txn *badger.Txn) error { return txn.Set(shardKey(fp, epoch, shard), val) })
	})
	if errors.Is(err, ErrDamaged) {
		return err
	}
	if err != nil {
		return fmt.Errorf("cache %s: writing %s epoch %d shard %d: %w", c.dir, fp, epoch, shard, err)
	}
	if c.written.Add(int64(len(val))) >= releaseEvery {
		c.written.Store(0)
		releaseAll()
	}
	return nil
}

// encode builds the stored value for raw.
func (c *Store) encode(layout string, raw []byte) []byte {
	nseg := (len(raw) + segmentSize - 1) / segmentSize
	val := make([]byte, headerSize, headerSize+len(layout)+8*nseg+len(raw)/2)
	copy(val, magic)
	val[4] = entryFormat
	binary.LittleEndian.PutUint32(val[8:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(val[12:], segmentSize)
	binary.LittleEndian.PutUint32(val[16:], uint32(nseg))
	binary.LittleEndian.PutUint16(val[20:], uint16(len(layout)))
	val = append(val, layout...)
	for i := range nseg {
		val = binary.LittleEndian.AppendUint64(val, xxhash.Sum64(raw[i*segmentSize:min(len(raw), (i+1)*segmentSize)]))
	}
	n := len(val)
	val = c.enc.EncodeAll(raw, val)
	val[5] = codecZstd
	// Keep bytes raw when zstd saves under 10 %: reading them back is then
	// a view of the mapped file, not a decompression.
	if len(val)-n > len(raw)-len(raw)/10 {
		val = append(val[:n], raw...)
		val[5] = codecRaw
	}
	return val
}

// Entry is a stored value being read inside View. Its bytes are valid only
// until View's callback returns.
type Entry struct {
	raw      []byte // the raw bytes: a view of the stored value, or decoded
	hashes   []byte // one little-endian xxhash64 per segment
	verified []bool
	mapped   bool // raw is a view of the mapped value: prefault, then release
	lo, hi   int  // the span of raw handed out, to release afterwards
}

// Len is the number of raw bytes.
func (e *Entry) Len() int { return len(e.raw) }

// Bytes returns raw bytes [off, off+n) after checking the checksums of the
// segments they lie in (each segment is checked once). It returns an error
// wrapping ErrCorrupt if one does not match.
func (e *Entry) Bytes(off, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+n > len(e.raw) {
		return nil, fmt.Errorf("%w: bytes [%d, %d) of a %d-byte entry", ErrCorrupt, off, off+n, len(e.raw))
	}
	if e.mapped && n > 0 {
		prefault(e.raw[off : off+n])
		if e.hi == 0 {
			e.lo, e.hi = off, off+n
		}
		e.lo, e.hi = min(e.lo, off), max(e.hi, off+n)
	}
	for s := off / segmentSize; n > 0 && s <= (off+n-1)/segmentSize; s++ {
		if e.verified[s] {
			continue
		}
		seg := e.raw[s*segmentSize : min(len(e.raw), (s+1)*segmentSize)]
		if xxhash.Sum64(seg) != binary.LittleEndian.Uint64(e.hashes[8*s:]) {
			return nil, fmt.Errorf("%w: checksum mismatch in bytes [%d, %d)", ErrCorrupt, s*segmentSize, s*segmentSize+len(seg))
		}
		e.verified[s] = true
	}
	return e.raw[off : off+n], nil
}

// parseEntry reads a stored value's header into e. For a raw entry e.raw is
// a view of v; a zstd entry is decoded into dst.
func (c *Store) parseEntry(v []byte, layout string, dst []byte, e *Entry) error {
	if len(v) < headerSize || string(v[:4]) != magic {
		return fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	if v[4] != entryFormat {
		return fmt.Errorf("%w: entry format %d, want %d", ErrCorrupt, v[4], entryFormat)
	}
	rawLen := int(binary.LittleEndian.Uint32(v[8:]))
	seg := int(binary.LittleEndian.Uint32(v[12:]))
	nseg := int(binary.LittleEndian.Uint32(v[16:]))
	ll := int(binary.LittleEndian.Uint16(v[20:]))
	if seg != segmentSize || nseg != (rawLen+segmentSize-1)/segmentSize || headerSize+ll+8*nseg > len(v) {
		return fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	if got := string(v[headerSize : headerSize+ll]); layout != "" && got != layout {
		return fmt.Errorf("%w: holds layout %q, want %q", ErrCorrupt, got, layout)
	}
	e.hashes = v[headerSize+ll : headerSize+ll+8*nseg]
	payload := v[headerSize+ll+8*nseg:]
	switch v[5] {
	case codecRaw:
		e.raw, e.mapped = payload, true
	case codecZstd:
		if cap(dst) < rawLen {
			// Headroom, so the buffer serves the next shard too when
			// sample sizes vary (decoded photos).
			dst = make([]byte, 0, rawLen+rawLen/4)
		}
		out, err := c.dec.DecodeAll(payload, dst[:0])
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		e.raw = out
	default:
		return fmt.Errorf("%w: unknown codec %d", ErrCorrupt, v[5])
	}
	if len(e.raw) != rawLen {
		return fmt.Errorf("%w: %d bytes, header says %d", ErrCorrupt, len(e.raw), rawLen)
	}
	if cap(e.verified) < nseg {
		e.verified = make([]bool, nseg)
	}
	e.verified = e.verified[:nseg]
	clear(e.verified)
	return nil
}

// View calls fn with entry (fp, epoch, shard), which must hold layout, while
// the entry is readable: a raw entry is read in place from the mapped file,
// with no copy, and Entry.Bytes checks only the segments a reader touches.
// It returns an error wrapping ErrMiss when there is no such entry,
// ErrCorrupt when its header is damaged, and ErrDamaged when the store is;
// fn's own error is returned as is, and a panic of fn is raised again once
// Badger has returned.
func (c *Store) View(fp Fingerprint, epoch, shard int, layout string, fn func(*Entry) error) error {
	return c.view(fp, epoch, shard, layout, nil, fn)
}

// view is View with dst as the memory a compressed entry is decompressed
// into.
func (c *Store) view(fp Fingerprint, epoch, shard int, layout string, dst []byte, fn func(*Entry) error) error {
	var inner error
	var panicked *callbackPanic
	err := c.call("View", func() error {
		return c.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(shardKey(fp, epoch, shard))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return ErrMiss
			}
			if err != nil {
				return err
			}
			return c.value(item, func(v []byte) error {
				var e Entry
				if err := c.parseEntry(v, layout, dst, &e); err != nil {
					return err
				}
				inner = catch(&panicked, func() error { return fn(&e) })
				if e.mapped && e.hi > e.lo {
					c.releaseMapped(e.raw[e.lo:e.hi])
				}
				return nil
			})
		})
	})
	if panicked != nil {
		panic(panicked)
	}
	if errors.Is(err, ErrDamaged) {
		return err
	}
	if err != nil {
		return fmt.Errorf("cache %s: %s epoch %d shard %d: %w", c.dir, fp, epoch, shard, err)
	}
	return inner
}

// catch runs f, a caller's function called from inside Badger, holding a
// panic of it in *p instead of letting it unwind through Badger.
func catch(p **callbackPanic, f func() error) error {
	defer func() {
		if v := recover(); v != nil {
			*p = &callbackPanic{value: v, stack: debug.Stack()}
		}
	}()
	return f()
}

// value calls f with item's value. Badger hands over an empty value when it
// could not read one from the value log (it logs the error and returns
// none). Every value this package stores has bytes, so an empty one is a
// damaged entry; and since Badger 4.9.6 may then leave the value log file
// read-locked, Close will not wait long for it.
func (c *Store) value(item *badger.Item, f func([]byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) == 0 {
			c.unreadable.Store(true)
			return fmt.Errorf("%w: its value could not be read from the value log", ErrCorrupt)
		}
		return f(v)
	})
}

// Get returns the raw bytes of entry (fp, epoch, shard), appended to dst[:0],
// after checking every segment and that it holds layout. It returns an error
// wrapping ErrMiss when there is no such entry and ErrCorrupt when the entry
// is damaged.
func (c *Store) Get(fp Fingerprint, epoch, shard int, layout string, dst []byte) ([]byte, error) {
	var out []byte
	err := c.view(fp, epoch, shard, layout, dst, func(e *Entry) error {
		b, err := e.Bytes(0, e.Len())
		if err != nil {
			return err
		}
		if e.mapped {
			out = append(dst[:0], b...) // a view of Badger's memory
		} else {
			out = b // decompressed into dst (or a larger buffer)
		}
		return nil
	})
	if err != nil && !strings.HasPrefix(err.Error(), "cache ") {
		err = fmt.Errorf("cache %s: %s epoch %d shard %d: %w", c.dir, fp, epoch, shard, err)
	}
	return out, err
}

// decode checks a whole stored value and returns its raw bytes in dst.
func (c *Store) decode(v []byte, layout string, dst []byte) ([]byte, error) {
	var e Entry
	if err := c.parseEntry(v, layout, dst, &e); err != nil {
		return nil, err
	}
	b, err := e.Bytes(0, e.Len())
	if err != nil {
		return nil, err
	}
	return append(dst[:0], b...), nil
}

// Has reports whether an entry exists, without reading it. The error wraps
// ErrDamaged when the store is damaged.
func (c *Store) Has(fp Fingerprint, epoch, shard int) (bool, error) {
	err := c.call("Get", func() error {
		return c.db.View(func(txn *badger.Txn) error {
			_, err := txn.Get(shardKey(fp, epoch, shard))
			return err
		})
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	case errors.Is(err, ErrDamaged):
		return false, err
	}
	return false, fmt.Errorf("cache %s: %s epoch %d shard %d: %w", c.dir, fp, epoch, shard, err)
}

// PutMeta records what a fingerprint holds; GetMeta reads it back.
func (c *Store) PutMeta(fp Fingerprint, m Meta) error {
	if c.readOnly {
		return fmt.Errorf("cache %s: %w", c.dir, ErrReadOnly)
	}
	b, _ := json.Marshal(m)
	return c.call("Update", func() error {
		return c.db.Update(func(txn *badger.Txn) error { return txn.Set(metaKey(fp), b) })
	})
}

// GetMeta returns a fingerprint's Meta, or ErrMiss.
func (c *Store) GetMeta(fp Fingerprint) (Meta, error) {
	var m Meta
	err := c.call("View", func() error {
		return c.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(metaKey(fp))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return ErrMiss
			}
			if err != nil {
				return err
			}
			return c.value(item, func(v []byte) error { return json.Unmarshal(v, &m) })
		})
	})
	return m, err
}

// Usage summarises one fingerprint's entries.
type Usage struct {
	Fingerprint Fingerprint
	Meta        Meta
	Epochs      []int // epochs with at least one entry
	Entries     int
	DiskBytes   int64 // bytes the values take in Badger
	RawBytes    int64 // bytes they hold uncompressed
}

// Ratio is RawBytes / DiskBytes.
func (u Usage) Ratio() float64 {
	if u.DiskBytes == 0 {
		return 0
	}
	return float64(u.RawBytes) / float64(u.DiskBytes)
}

// eachShard calls f with every entry, in key order, within one read
// transaction made through call (a panic inside Badger is damage); an error
// from f stops it and is returned.
func (c *Store) eachShard(f func(item *badger.Item, fp Fingerprint, epoch, shard int) error) error {
	return c.call("iteration", func() error {
		return c.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("s/")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				fp, epoch, shard, ok := parseShardKey(item.Key())
				if !ok {
					continue
				}
				if err := f(item, fp, epoch, shard); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// errProgressPanicked stops Verify's iteration when its progress callback
// panicked; the panic is raised again once the iteration is over.
var errProgressPanicked = errors.New("cache store: the progress callback panicked")

// Usages lists every fingerprint in the cache with its entries, sorted.
func (c *Store) Usages() ([]Usage, error) {
	by := map[Fingerprint]*Usage{}
	epochs := map[Fingerprint]map[int]bool{}
	err := c.eachShard(func(item *badger.Item, fp Fingerprint, epoch, _ int) error {
		u := by[fp]
		if u == nil {
			u = &Usage{Fingerprint: fp}
			by[fp], epochs[fp] = u, map[int]bool{}
		}
		epochs[fp][epoch] = true
		u.Entries++
		u.DiskBytes += item.ValueSize()
		err := c.value(item, func(v []byte) error {
			if len(v) >= headerSize {
				u.RawBytes += int64(binary.LittleEndian.Uint32(v[8:]))
			}
			return nil
		})
		if errors.Is(err, ErrCorrupt) {
			return nil
		}
		return err
	})
	if errors.Is(err, ErrDamaged) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", c.dir, err)
	}
	var out []Usage
	for fp, u := range by {
		u.Meta, _ = c.GetMeta(fp)
		for e := range epochs[fp] {
			u.Epochs = append(u.Epochs, e)
		}
		sort.Ints(u.Epochs)
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Fingerprint < out[j].Fingerprint })
	return out, nil
}

func parseShardKey(k []byte) (fp Fingerprint, epoch, shard int, ok bool) {
	parts := bytes.Split(k, []byte("/"))
	if len(parts) != 4 || string(parts[0]) != "s" {
		return "", 0, 0, false
	}
	var e, s uint32
	if _, err := fmt.Sscanf(string(parts[2])+" "+string(parts[3]), "%x %x", &e, &s); err != nil {
		return "", 0, 0, false
	}
	return Fingerprint(parts[1]), int(e), int(s), true
}

// BadEntry is an entry Verify found damaged.
type BadEntry struct {
	Fingerprint  Fingerprint
	Epoch, Shard int
	Err          error
}

// Verify checks the store's index (every table's checksums), then reads
// and checks every entry, calling progress (if not nil) after each, and
// returns the damaged ones. A damaged index is an error wrapping
// ErrDamaged, since entries it hides cannot be listed; the store is then
// marked damaged, and the next Open with WithRepair rebuilds it.
func (c *Store) Verify(progress func(done int, bytes int64)) ([]BadEntry, int, error) {
	err := c.call("VerifyChecksum", c.db.VerifyChecksum)
	if err != nil && !errors.Is(err, ErrDamaged) {
		err = c.markDamaged(fmt.Errorf("cache %s: %w: %v%s", c.dir, ErrDamaged, err, c.rebuildHint()))
	}
	if err != nil {
		return nil, 0, err
	}
	var bad []BadEntry
	n := 0
	var total int64
	var buf []byte
	var panicked *callbackPanic
	err = c.eachShard(func(item *badger.Item, fp Fingerprint, epoch, shard int) error {
		err := c.value(item, func(v []byte) error {
			var err error
			buf, err = c.decode(v, "", buf[:0])
			total += int64(len(v))
			c.releaseMapped(v)
			return err
		})
		if err != nil {
			bad = append(bad, BadEntry{Fingerprint: fp, Epoch: epoch, Shard: shard, Err: err})
		}
		n++
		if progress != nil {
			if catch(&panicked, func() error { progress(n, total); return nil }); panicked != nil {
				return errProgressPanicked // re-raised below
			}
		}
		return nil
	})
	if panicked != nil {
		panic(panicked)
	}
	if errors.Is(err, ErrDamaged) {
		return bad, n, err
	}
	if err != nil {
		return bad, n, fmt.Errorf("cache %s: %w", c.dir, err)
	}
	return bad, n, nil
}

// GC deletes every fingerprint not in keep, then has Badger rewrite value
// log files that are mostly garbage. It returns the fingerprints dropped and
// the bytes on disk before and after. Where a value could not be read (see
// Verify), the value log is not rewritten, since Badger may still hold the
// file, and GC says so in its error.
func (c *Store) GC(keep map[Fingerprint]bool) (dropped []Fingerprint, before, after int64, err error) {
	before = dirSize(c.dir)
	usages, err := c.Usages()
	if err != nil {
		return nil, 0, 0, err
	}
	for _, u := range usages {
		if keep[u.Fingerprint] {
			continue
		}
		err := c.call("DropPrefix", func() error {
			return c.db.DropPrefix([]byte("s/"+string(u.Fingerprint)+"/"), metaKey(u.Fingerprint))
		})
		if err != nil {
			return dropped, before, 0, fmt.Errorf("cache %s: dropping %s: %w", c.dir, u.Fingerprint, err)
		}
		dropped = append(dropped, u.Fingerprint)
	}
	if len(dropped) > 0 {
		if err := c.call("Flatten", func() error { return c.db.Flatten(1) }); err != nil {
			return dropped, before, 0, fmt.Errorf("cache %s: compacting: %w", c.dir, err)
		}
		if c.unreadable.Load() {
			return dropped, before, dirSize(c.dir), fmt.Errorf("cache %s: value log not compacted: some values could not be read (pipe cache verify lists them)", c.dir)
		}
		for c.call("RunValueLogGC", func() error { return c.db.RunValueLogGC(0.5) }) == nil {
		}
	}
	return dropped, before, dirSize(c.dir), c.Damaged()
}

// dirSize is the disk space the directory's files take: allocated blocks
// where the system reports them (Badger preallocates value log files, so
// their apparent size overstates what is used).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += allocated(info)
		}
		return nil
	})
	return n
}

// DiskBytes is the disk space the cache directory takes.
func (c *Store) DiskBytes() int64 { return dirSize(c.dir) }
