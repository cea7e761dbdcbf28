//go:build amd64 && !purego

package transform

import "golang.org/x/sys/cpu"

// rowKernel reports whether windowRowsSSSE3 can run here; tests turn it off
// to check the pure-Go path against it.
var rowKernel = cpu.X86.HasSSSE3

// windowRowsSSSE3 is the row loop of window in assembly: see window_amd64.s.
//
//go:noescape
func windowRowsSSSE3(dst, src *byte, offs *int32, rows, w int, scol, dcol *int32, border, flags int)
