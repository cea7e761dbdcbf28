package cache

import (
	"github.com/pipefeed/pipe/cache/store"
)

// Dir is a cache directory opened for its tools (pipe cache ls, verify
// and gc): the entries of every pipeline that caches there, by
// fingerprint, rather than one pipeline's cache.
type Dir struct {
	st *store.Store
}

// Usage is what one fingerprint holds in a directory: its meta (stages,
// samples, shard size, epochs), the epochs with entries, and their bytes.
type Usage = store.Usage

// BadEntry is an entry Verify found damaged.
type BadEntry = store.BadEntry

// OpenDir opens the cache directory dir, creating it if it does not exist:
// callers that must not create one check for it first.
func OpenDir(dir string) (*Dir, error) {
	st, err := store.Open(dir)
	if err != nil {
		return nil, err
	}
	return &Dir{st: st}, nil
}

// Close closes the directory.
func (d *Dir) Close() error { return d.st.Close() }

// Usages lists every fingerprint in the directory with its entries,
// sorted.
func (d *Dir) Usages() ([]Usage, error) { return d.st.Usages() }

// DiskBytes is the size of the directory's files.
func (d *Dir) DiskBytes() int64 { return d.st.DiskBytes() }

// Verify checks the store's index, then reads and checks every entry, and
// returns the damaged ones and how many entries there are; see
// store.Store.Verify.
func (d *Dir) Verify() ([]BadEntry, int, error) { return d.st.Verify(nil) }

// GC deletes every fingerprint but those in keep (Info.Fingerprint of the
// caches to keep) and reclaims the disk space, returning the fingerprints
// dropped and the directory's size before and after.
func (d *Dir) GC(keep []string) (dropped []string, before, after int64, err error) {
	fps := make(map[store.Fingerprint]bool, len(keep))
	for _, fp := range keep {
		fps[store.Fingerprint(fp)] = true
	}
	gone, before, after, err := d.st.GC(fps)
	for _, fp := range gone {
		dropped = append(dropped, string(fp))
	}
	return dropped, before, after, err
}
