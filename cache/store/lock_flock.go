//go:build !windows && !plan9 && !js && !wasip1 && !aix

package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes the lock Badger takes on dir (flock on the directory,
// shared when read-only; its build constraint is Badger's), so that no
// other process has the store open while it is checked or repaired. It
// fails at once, with ErrLocked, if the lock is held.
func lockDir(dir string, shared bool) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}
