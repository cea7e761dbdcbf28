//go:build !linux

package sharding

// releaser is a no-op where the mapping cannot be checked.
type releaser struct{}

func (r *releaser) flush() {}

func (c *Cache) releaseMapped(b []byte) {}

// prefault is a no-op where the kernel offers nothing for it.
func prefault(b []byte) {}

func releaseAll() {}
