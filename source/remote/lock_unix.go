//go:build unix

package remote

import (
	"context"
	"os"
	"syscall"
	"time"
)

// locksAcrossProcesses says whether a shard's lock holds for every
// process: it does (flock), so a temporary file of a shard found while
// holding its lock is a fetch that died with its process.
const locksAcrossProcesses = true

// fileLock is an exclusive flock on a lock file.
type fileLock struct {
	f    *os.File
	name string
}

// unlock releases the lock.
func (l *fileLock) unlock() {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// remove deletes the lock file, then releases the lock: a process waiting
// for it then holds a lock on a file no longer named, sees so (lock checks
// every lock it takes against the name), and locks the name afresh.
func (l *fileLock) remove() {
	os.Remove(l.name)
	l.unlock()
}

// tryLock opens name (created if missing) and takes its lock if it is free
// now. held is false, with no error, when another process has it or the
// file locked was removed meanwhile (try again).
func tryLock(name string) (l *fileLock, held bool, err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	return lockOpened(f, name)
}

// lockOpened is tryLock of f, opened as name. It closes f unless held.
func lockOpened(f *os.File, name string) (l *fileLock, held bool, err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK || err == syscall.EINTR {
			return nil, false, nil
		}
		return nil, false, err
	}
	// The file locked must still be the one the name gives: a holder that
	// removed it (remove) leaves this lock on an unnamed file.
	mine, err1 := f.Stat()
	now, err2 := os.Stat(name)
	if err1 != nil || err2 != nil || !os.SameFile(mine, now) {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		return nil, false, nil
	}
	return &fileLock{f: f, name: name}, true, nil
}

// lockFile takes the lock on name, polling so that ctx can end the wait.
func lockFile(ctx context.Context, name string) (*fileLock, error) {
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		l, held, err := tryLock(name)
		if err != nil || held {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// tryLockFile takes the lock only if it is free now.
func tryLockFile(name string) (*fileLock, bool) {
	l, held, err := tryLock(name)
	return l, held && err == nil
}
