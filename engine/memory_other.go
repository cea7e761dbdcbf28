//go:build !linux

package engine

// physicalMemory is the machine's RAM in bytes: unknown here.
func physicalMemory() uint64 { return 0 }
