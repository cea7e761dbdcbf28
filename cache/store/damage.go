package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// How a damaged store is found and kept from hanging or killing the
// process. Badger trusts its files: on a damaged table it panics in its
// table iterator (in our goroutine, or in one of its own while opening,
// where nothing can recover it), exits the process through log.Fatal when a
// table's footer points outside the file, and when a value pointer is
// damaged it may leave a value log file read-locked for good, after which
// its Close waits forever. So Open checks, before Badger opens them,
// every table the manifest lists (footer bounds, index and block checksums)
// and every value log header; every later call into Badger recovers a
// panic; and Close waits for Badger only so long.

// damagedFile marks a store found damaged while it was open (Badger
// panicked inside a call), so that the next open repairs or reports it.
const damagedFile = "pipe-cache.damaged"

// closeWait bounds how long Close waits for Badger to close a store with no
// known damage: flushing two 16 MiB memtables and finishing a compaction
// take well under a second. closeWaitDamaged is the bound once damage has
// been seen; it is a variable so that tests can shorten it.
const closeWait = time.Minute

var closeWaitDamaged = 2 * time.Second

// Damaged returns the error every call returns once the store was found
// damaged while open (wrapping ErrDamaged), or nil.
func (c *Store) Damaged() error {
	if p := c.damaged.Load(); p != nil {
		return *p
	}
	return nil
}

// markDamaged records err as the store's damage, unless damage was
// recorded already, marks the directory for repair at the next open, and
// returns the damage recorded first.
func (c *Store) markDamaged(err error) error {
	if c.damaged.CompareAndSwap(nil, &err) && !c.readOnly {
		os.WriteFile(filepath.Join(c.dir, damagedFile), []byte(err.Error()+"\n"), 0o644)
	}
	return c.Damaged()
}

// call runs f, a call into Badger, unless the store is damaged. A panic
// inside Badger means damage it did not check for, and may leave its locks
// held, so the store is marked damaged and not entered again.
func (c *Store) call(op string, f func() error) (err error) {
	if err := c.Damaged(); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = c.markDamaged(fmt.Errorf("cache %s: %w: Badger panicked in %s: %s%s", c.dir, ErrDamaged, op, oneLine(p), c.rebuildHint()))
		}
	}()
	return f()
}

// rebuildHint says what becomes of a store marked damaged.
func (c *Store) rebuildHint() string {
	if c.readOnly {
		return ""
	}
	return " (the next pipe run or warm with this cache rebuilds it)"
}

// callbackPanic carries a panic of View's callback out of Badger, to be
// raised again once Badger has returned: it is the caller's, not damage,
// and unwinding through Badger could leave Badger's locks held.
type callbackPanic struct {
	value any
	stack []byte
}

func (p *callbackPanic) Error() string { return fmt.Sprintf("%v\n%s", p.value, p.stack) }

// Unwrap returns the original panic value where it was an error.
func (p *callbackPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// oneLine is a panic value as one line of at most 300 bytes (Badger's own
// panics carry a multi-line dump).
func oneLine(p any) string {
	s := strings.Join(strings.Fields(fmt.Sprint(p)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// closeDB closes Badger within closeWait (closeWaitDamaged after damage or
// an unreadable value). A close that does not finish is left running until
// the process exits, and reported.
func (c *Store) closeDB() error {
	wait := closeWait
	if c.Damaged() != nil || c.unreadable.Load() {
		wait = closeWaitDamaged
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("cache %s: %w: Badger panicked in Close: %s", c.dir, ErrDamaged, oneLine(p))
			}
		}()
		done <- c.db.Close()
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("cache %s: closing: %w", c.dir, err)
		}
		return err
	case <-timer.C:
		return fmt.Errorf("cache %s: %w: Badger did not close within %v (it waits for reads a damaged value left unfinished); left to finish as the process exits", c.dir, ErrDamaged, wait)
	}
}

// damage is what checkStore found: fixes mend what can be mended exactly
// (the bytes Badger or pipe wrote there are known), err is any other damage.
type damage struct {
	fixes []fix
	err   error
}

// fix is damage to bytes whose content is known, and how to write them.
type fix struct {
	what  string
	apply func() error
}

func (d damage) found() bool { return d.err != nil || len(d.fixes) > 0 }

// list names the damage, a phrase each.
func (d damage) list() []string {
	var s []string
	for _, f := range d.fixes {
		s = append(s, f.what)
	}
	if d.err != nil {
		s = append(s, d.err.Error())
	}
	return s
}

// mend applies the fixes; it is for damage with no err.
func (d damage) mend() error {
	for _, f := range d.fixes {
		if err := f.apply(); err != nil {
			return fmt.Errorf("%s: %w", f.what, err)
		}
	}
	return nil
}

// checkStore checks what Badger would trust blindly, or refuse, when it
// opens dir: the damage mark an earlier run left, pipe's format record,
// Badger's key registry and the header of its manifest, every change the
// manifest holds and every table it lists, and the header of every value
// log file. A manifest whose header is damaged is not read further: once
// its header is mended, checkStore runs again.
func checkStore(dir string, opt badger.Options) damage {
	if b, err := os.ReadFile(filepath.Join(dir, damagedFile)); err == nil {
		return damage{err: fmt.Errorf("marked damaged by an earlier run: %s", strings.TrimSpace(string(b)))}
	}
	var d damage
	if f, ok := formatDamaged(dir); ok {
		d.fixes = append(d.fixes, f)
	}
	if f, ok := keyRegistryDamaged(dir); ok {
		d.fixes = append(d.fixes, f)
	}
	f, ok, err := manifestDamaged(dir)
	switch {
	case err != nil:
		return damage{err: err}
	case ok:
		d.fixes = append(d.fixes, f)
	default:
		if err := checkTables(dir, opt); err != nil {
			return damage{err: err}
		}
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	slices.Sort(vlogs)
	for _, name := range vlogs {
		if bad, err := vlogHeaderDamaged(name); err != nil {
			return damage{err: fmt.Errorf("value log %s: %w", filepath.Base(name), err)}
		} else if bad {
			d.fixes = append(d.fixes, fix{
				what:  fmt.Sprintf("value log %s: damaged header", filepath.Base(name)),
				apply: func() error { return writeAt(name, make([]byte, 8)) },
			})
		}
	}
	return d
}

// formatDamaged reports a format record that exists and cannot be read
// (checkFormat has dealt with a missing one and a newer format); the fix
// writes it again. Its entries are kept: each carries its own format and
// layout, checked when it is read, and Badger checks its own version.
func formatDamaged(dir string) (fix, bool) {
	name := filepath.Join(dir, formatFile)
	b, err := readSmall(name, 4<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return fix{}, false
	}
	var f formatRecord
	if err == nil && json.Unmarshal(b, &f) == nil && f.Format >= 1 {
		return fix{}, false
	}
	what := fmt.Sprintf("%s: unreadable (%q)", formatFile, b)
	if err != nil {
		what = fmt.Sprintf("%s: unreadable (%v)", formatFile, err)
	}
	return fix{what: what, apply: func() error { return writeFormat(dir) }}, true
}

// readSmall reads a file of at most limit bytes; a larger one is an error.
func readSmall(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("over %d bytes", limit)
	}
	return b, err
}

// sanityText is what Badger's key registry holds after its 16-byte IV,
// encrypted with the store's key, or in clear where there is none.
const sanityText = "Hello Badger"

// keyRegistryDamaged checks Badger's KEYREGISTRY. The store is never
// encrypted, so Badger wrote exactly a random IV and the sanity text in
// clear, and no data keys; anything else is damage, on which Badger refuses
// the store ("Encryption key mismatch"). The fix removes the file, and
// Badger writes a new one as it opens: nothing in the store needs a key.
func keyRegistryDamaged(dir string) (fix, bool) {
	name := filepath.Join(dir, badger.KeyRegistryFileName)
	b, err := readSmall(name, 4<<10)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fix{}, false // Badger writes one
	case err != nil:
		what = err.Error()
	case len(b) != 16+len(sanityText):
		what = fmt.Sprintf("%d bytes, Badger writes %d", len(b), 16+len(sanityText))
	case string(b[16:]) != sanityText:
		what = fmt.Sprintf("sanity text %q, Badger writes %q", b[16:], sanityText)
	default:
		return fix{}, false
	}
	return fix{
		what:  fmt.Sprintf("%s: damaged (%s)", badger.KeyRegistryFileName, what),
		apply: func() error { return os.Remove(name) },
	}, true
}

// manifestHeader is what Badger writes at the start of its MANIFEST: the
// magic "Bdgr", the external magic version (big-endian uint16; pipe sets
// none, 0) and Badger's manifest format (uint16, 8 in Badger 4).
// TestManifestHeader compares it with a store Badger writes, so an upgrade
// of Badger that changes its format is noticed (and must bump
// FormatVersion, or this check would take the new header for damage).
var manifestHeader = [8]byte{'B', 'd', 'g', 'r', 0, 0, 0, 8}

// manifestDamaged checks Badger's MANIFEST. A damaged header (Badger
// refuses the store for it: "bad magic", "unsupported version") is a fix
// that writes it again, keeping every change after it; a manifest too short
// to hold one, or a change Badger cannot replay, is an error.
func manifestDamaged(dir string) (fix, bool, error) {
	name := filepath.Join(dir, badger.ManifestFilename)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return fix{}, false, nil // a new store
	}
	if err != nil {
		return fix{}, false, fmt.Errorf("%s: %w", badger.ManifestFilename, err)
	}
	defer f.Close()
	var head [8]byte
	if n, _ := io.ReadFull(f, head[:]); n < len(head) {
		return fix{}, false, fmt.Errorf("%s: %d bytes, shorter than its header", badger.ManifestFilename, n)
	}
	if head == manifestHeader {
		return fix{}, false, nil
	}
	var bad []string
	if !bytes.Equal(head[:4], manifestHeader[:4]) {
		bad = append(bad, fmt.Sprintf("magic %q, want %q", head[:4], manifestHeader[:4]))
	}
	for _, part := range []struct {
		name string
		at   int
	}{{"external magic", 4}, {"version", 6}} {
		got, want := binary.BigEndian.Uint16(head[part.at:]), binary.BigEndian.Uint16(manifestHeader[part.at:])
		if got != want {
			bad = append(bad, fmt.Sprintf("%s %d, want %d", part.name, got, want))
		}
	}
	return fix{
		what:  fmt.Sprintf("%s: damaged header (%s)", badger.ManifestFilename, strings.Join(bad, ", ")),
		apply: func() error { return writeAt(name, manifestHeader[:]) },
	}, true, nil
}

// checkTables replays the manifest as Badger will (a change that does not
// replay is damage) and checks every table it lists that this package
// wrote.
func checkTables(dir string, opt badger.Options) error {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil // none yet, or left to Badger to report
	}
	m, _, err := badger.ReplayManifestFile(f, opt.ExternalMagicVersion, opt)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %s", badger.ManifestFilename, oneLine(err))
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		tm := m.Tables[id]
		if tm.Compression != options.None || tm.KeyID != 0 {
			continue // not written by this package: Badger checks it
		}
		name := fmt.Sprintf("%06d.sst", id)
		if err := checkTable(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
	}
	return nil
}

// vlogHeaderDamaged reports whether a value log file's header is damaged.
// The header is the data key's ID (8 bytes) and an IV (12 bytes) used only
// for encryption, which this package never turns on: an ID other than 0
// can only be damage, and Badger refuses to open the store for it.
func vlogHeaderDamaged(name string) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var id [8]byte
	if _, err := f.ReadAt(id[:], 0); err != nil {
		return false, nil // shorter than a header: Badger truncates it
	}
	return binary.BigEndian.Uint64(id[:]) != 0, nil
}

// checkTable checks one table (uncompressed, not encrypted) as Badger reads
// it, with every length checked against the file before it is used. From
// the end: the index checksum's length (uint32), the checksum (protobuf),
// the index's length (uint32), the index (flatbuffer, listing each block's
// offset and length). A block ends the same way: its checksum's length,
// the checksum, covering everything before it. A table that checks is
// byte for byte what Badger wrote. A table that is gone was compacted away
// while being checked by another process's run, and is not damage.
func checkTable(name string) error {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	body, sum, err := trailer(b)
	if err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	if len(body) < 4 {
		return errors.New("footer: no index length")
	}
	n := len(body) - 4
	indexLen := int(binary.BigEndian.Uint32(body[n:]))
	if indexLen > n {
		return fmt.Errorf("footer: index of %d bytes in a %d-byte table", indexLen, len(b))
	}
	index := body[n-indexLen : n]
	if err := verifyChecksum(index, sum); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	ti := fb.GetRootAsTableIndex(index, 0)
	var bo fb.BlockOffset
	for i := range ti.OffsetsLength() {
		ti.Offsets(&bo, i)
		off, size := int(bo.Offset()), int(bo.Len())
		if off+size > n-indexLen {
			return fmt.Errorf("block %d: bytes [%d, %d) beyond the blocks' end %d", i, off, off+size, n-indexLen)
		}
		data, sum, err := trailer(b[off : off+size])
		if err == nil {
			err = verifyChecksum(data, sum)
		}
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return nil
}

// trailer splits b into what precedes its checksum and the checksum, read
// from its last 4 bytes (the checksum's length) and the bytes before them.
func trailer(b []byte) ([]byte, *pb.Checksum, error) {
	if len(b) < 4 {
		return nil, nil, errors.New("too short for a checksum")
	}
	n := len(b) - 4
	size := int(binary.BigEndian.Uint32(b[n:]))
	if size > n {
		return nil, nil, fmt.Errorf("checksum of %d bytes in %d", size, len(b))
	}
	var sum pb.Checksum
	if err := proto.Unmarshal(b[n-size:n], &sum); err != nil {
		return nil, nil, fmt.Errorf("checksum unreadable: %v", err)
	}
	return b[:n-size], &sum, nil
}

// verifyChecksum is Badger's y.VerifyChecksum, which panics on an unknown
// algorithm where this returns an error.
func verifyChecksum(data []byte, sum *pb.Checksum) error {
	var got uint64
	switch sum.Algo {
	case pb.Checksum_CRC32C:
		got = uint64(crc32.Checksum(data, castagnoli))
	case pb.Checksum_XXHash64:
		got = xxhash.Sum64(data)
	default:
		return fmt.Errorf("unknown checksum algorithm %d", sum.Algo)
	}
	if got != sum.Sum {
		return errors.New("checksum mismatch")
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeAt writes b at the start of the file.
func writeAt(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rebuild empties the store in dir, so that Badger starts a new one there:
// every file is removed and the format record written again.
func rebuild(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return writeFormat(dir)
}

// damageSigns are the words of Badger's open errors that mean its files
// are damaged rather than that the directory is in use or the system
// refused (Badger flattens its errors into text, so errors.Is cannot tell).
var damageSigns = []string{
	"checksum", "Invalid datakey id", "manifest has bad magic", "might be corrupted", "MANIFEST invalid",
	"invalid manifestChange", "file does not exist for table", "failed to read index", "Data corrupted",
	"sanity text", "invalid wire-format", "unexpected EOF", "While opening vlog file", "unsupported version",
	"external magic number", "Encryption key mismatch", "key registry",
}

// badgerDamage is damage Badger met opening a store: an error that means
// its files are damaged, or a panic.
type badgerDamage struct{ detail string }

func (e *badgerDamage) Error() string        { return e.detail }
func (e *badgerDamage) Is(target error) bool { return target == ErrDamaged }

// openBadger opens Badger; damage it meets is a *badgerDamage.
func openBadger(opt badger.Options) (db *badger.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, &badgerDamage{"Badger panicked opening it: " + oneLine(p)}
		}
	}()
	db, err = badger.Open(opt)
	if err != nil && slices.ContainsFunc(damageSigns, func(s string) bool { return strings.Contains(err.Error(), s) }) {
		err = &badgerDamage{oneLine(err)}
	}
	return db, err
}

// repair is the damage an open found and mended.
type repair struct {
	found   []string // a phrase each
	rebuilt bool     // the store was rebuilt empty; else no entry was lost
}

func (r *repair) add(more repair) {
	r.found = append(r.found, more.found...)
	r.rebuilt = r.rebuilt || more.rebuilt
}

// lines says what was done, in one line; none when nothing was damaged.
func (r repair) lines(dir string) []string {
	if len(r.found) == 0 {
		return nil
	}
	what := "repaired, no entry lost"
	if r.rebuilt {
		what = "rebuilt empty; its entries are computed and written again"
	}
	return []string{fmt.Sprintf("cache %s: %v: %s: %s", dir, ErrDamaged, strings.Join(r.found, "; "), what)}
}

// checkOrRepair checks the store in dir (or takes found, damage Badger met
// opening it) under Badger's directory lock, and repairs it when the
// configuration allows and dir is writable: damage to bytes whose content
// is known is mended and the store checked again; any other damage, or
// damage left after mending, rebuilds it empty. It returns what it found
// and did, or an error wrapping ErrDamaged for damage left in place.
func checkOrRepair(dir string, cfg config, readOnly bool, found error) (repair, error) {
	unlock, err := lockDir(dir, readOnly)
	if errors.Is(err, ErrLocked) {
		return repair{}, lockedError(dir)
	}
	if err != nil {
		return repair{}, fmt.Errorf("cache %s: %w", dir, err)
	}
	defer unlock()
	d := damage{err: found}
	if found == nil {
		d = checkStore(dir, cfg.badger)
	}
	if !d.found() {
		return repair{}, nil
	}
	r := repair{found: d.list()}
	what := fmt.Errorf("cache %s: %w: %s", dir, ErrDamaged, strings.Join(r.found, "; "))
	switch {
	case readOnly:
		return repair{}, fmt.Errorf("%w (the directory is read-only, so it is not repaired)", what)
	case !cfg.repair:
		return repair{}, fmt.Errorf("%w (a pipe run or warm with this cache repairs it)", what)
	}
	if d.err == nil {
		err := d.mend()
		if err == nil {
			again := checkStore(dir, cfg.badger)
			if !again.found() {
				return r, nil
			}
			r.found = append(r.found, again.list()...)
		} else {
			r.found = append(r.found, "mending it failed: "+err.Error())
		}
	}
	r.rebuilt = true
	if err := rebuild(dir); err != nil {
		return repair{}, fmt.Errorf("%w; rebuilding it failed: %v", what, err)
	}
	return r, nil
}
