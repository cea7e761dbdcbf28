//go:build !linux

package store

// releaser is a no-op where the mapping cannot be checked.
type releaser struct{}

func (r *releaser) flush() {}

func (c *Store) releaseMapped(b []byte) {}

// prefault is a no-op where the kernel offers nothing for it.
func prefault(b []byte) {}

func releaseAll() {}
