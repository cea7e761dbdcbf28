//go:build linux && race

package emu

// raceBuild is set under the race detector, which reports a planted race
// between streams as a Go data race before the test can see it.
const raceBuild = true
