//go:build unix

package remote

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLockOfARemovedFile: a process that opened a lock file before its
// holder removed it (as eviction does) must not count the lock it then
// gets on the unnamed file as the lock: a newcomer would lock the name's
// new file, and both would hold "the" lock.
func TestLockOfARemovedFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "k.lock")
	holder, held := tryLockFile(name)
	if !held {
		t.Fatal("no lock on a fresh file")
	}
	waiter, err := os.OpenFile(name, os.O_RDWR, 0) // opened, not yet locked
	if err != nil {
		t.Fatal(err)
	}
	holder.remove()
	if l, held, err := lockOpened(waiter, name); held || err != nil {
		if held {
			l.unlock()
		}
		t.Fatalf("the lock of a removed lock file was taken as the lock (err %v)", err)
	}
	l, held := tryLockFile(name)
	if !held {
		t.Fatal("the name could not be locked afresh")
	}
	defer l.unlock()
	if _, err := os.Stat(name); err != nil {
		t.Fatalf("locking afresh made no lock file: %v", err)
	}
	if _, again := tryLockFile(name); again {
		t.Fatal("a second lock of a held name")
	}
}
