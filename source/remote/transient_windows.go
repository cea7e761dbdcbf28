package remote

import "golang.org/x/sys/windows"

// osTransient are the system's errors, beyond the syscall package's,
// that a connection that may work again fails with: Windows sockets
// report WSAE* codes, which syscall.ECONNREFUSED and its kin (values Go
// made up for Windows) do not match.
var osTransient = []error{windows.WSAECONNREFUSED, windows.WSAECONNRESET, windows.WSAECONNABORTED,
	windows.WSAENETUNREACH, windows.WSAEHOSTUNREACH, windows.WSAENETRESET, windows.WSAETIMEDOUT}
