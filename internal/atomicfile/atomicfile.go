// Package atomicfile writes a file so that a crash leaves the old one or
// the new one, never half of one: the bytes go to a temporary file beside
// it, synced, then renamed over it. A killed writer leaves its temporary
// behind; the next Write, or RemoveStale, removes it. ClearWay removes
// what is not a file where one is to be made.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix is how Write names its temporary files beside path:
// ".checkpoint.gob-123456" for out/checkpoint.gob.
func tempPrefix(path string) string { return "." + filepath.Base(path) + "-" }

// Write creates or replaces path with what write writes, atomically, and
// removes the temporaries of earlier killed Writes of path (and files
// beside it that begin with one of the legacy prefixes, an earlier
// release's naming). One process writes a given path at a time.
func Write(path string, write func(io.Writer) error, legacy ...string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer removeStale(path, tmp, legacy)
	if err = write(f); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// RemoveStale removes the temporary files killed Writes of path left
// beside it (and, as Write, those of the legacy prefixes).
func RemoveStale(path string, legacy ...string) { removeStale(path, "", legacy) }

func removeStale(path, keep string, legacy []string) {
	dir := filepath.Dir(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefixes := append([]string{tempPrefix(path)}, legacy...)
	for _, e := range ents {
		name := e.Name()
		stale := false
		for _, p := range prefixes {
			stale = stale || strings.HasPrefix(name, p)
		}
		if stale && e.Type().IsRegular() && filepath.Join(dir, name) != keep {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// ClearWay removes what is at path if it is neither a regular file nor
// missing (a directory, a link), where a file is to be made or read: left
// there, it would fail every run. The error names path and what the file
// is for, and says to delete it.
func ClearWay(path, what string) error {
	st, err := os.Lstat(path)
	if err != nil || st.Mode().IsRegular() {
		return nil
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("%s is in the way of %s (%v): delete it", path, what, err)
	}
	return nil
}
