// Package onearena keeps glibc's malloc to one arena in a process under an
// address-space limit (ulimit -v), for the programs and builds that import
// it: pipe, and the jpegturbo build, whose decoder mallocs in every
// worker's thread.
//
// glibc gives each thread that mallocs an arena of its own, 64 MiB of
// address space each, up to 8 a core, and in a cgo build (the default one
// links the C library, for DNS and user look-ups) the Go runtime mallocs in
// every thread that starts another: pipe on 2 cores held 7 of them (448
// MiB), where the Go runtime's own reservations already take 1.2 GiB.
// Without such a limit an arena's untouched address space costs nothing,
// and nothing is changed; nor is anything in a build without cgo.
package onearena
