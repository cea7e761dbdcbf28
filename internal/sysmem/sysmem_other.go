//go:build !linux

package sysmem

func limit() (uint64, string) { return 0, "" }

func least() Headroom { return Headroom{} }

func threadStack() uint64 { return 8 << 20 }
