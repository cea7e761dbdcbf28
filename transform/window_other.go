//go:build !amd64 || purego

package transform

// rowKernel is false where there is no assembly row kernel: window's
// pure-Go loop does all the work.
var rowKernel = false

func windowRowsSSSE3(dst, src *byte, offs *int32, rows, w int, scol, dcol *int32, border, flags int) {
	panic("transform: no row kernel on this platform")
}
