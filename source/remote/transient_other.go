//go:build !windows

package remote

// osTransient are the system's errors, beyond the syscall package's,
// that a connection that may work again fails with: none elsewhere.
var osTransient []error
