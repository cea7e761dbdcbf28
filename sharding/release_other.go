//go:build !linux

package sharding

// releaseMapped is a no-op where the mapping cannot be checked.
func releaseMapped(b []byte) {}

// prefault is a no-op where the kernel offers nothing for it.
func prefault(b []byte) {}
