//go:build unix

package remote

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestDeadFetchRemoved: a temporary file that a fetch killed with its
// process left beside a shard is removed when the shard is next fetched,
// under its lock, so the space comes back.
func TestDeadFetchRemoved(t *testing.T) {
	var etag atomic.Value
	etag.Store("v1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"`+etag.Load().(string)+`"`)
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(strings.Repeat("x", 1000)))
	}))
	defer srv.Close()
	s := New(Options{Backoff: time.Millisecond})
	defer s.Close()
	c := &Cache{Dir: t.TempDir()}
	fetch := func() {
		objs, err := s.List(t.Context(), srv.URL+"/a.tar")
		if err != nil {
			t.Fatal(err)
		}
		_, _, release, err := c.Fetch(t.Context(), s, objs[0])
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	fetch()
	names, _ := filepath.Glob(filepath.Join(c.Dir, "*-*-a.tar"))
	if len(names) != 1 {
		t.Fatalf("cached files %v", names)
	}
	key, _, _ := strings.Cut(filepath.Base(names[0]), "-")
	dead := filepath.Join(c.Dir, fmt.Sprintf("%s-%016x-a.tar.tmp-%016x", key, 7, 9))
	if err := os.WriteFile(dead, make([]byte, 500), 0o644); err != nil {
		t.Fatal(err)
	}
	etag.Store("v2") // the next open fetches
	fetch()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead fetch's %s is still there (%v)", filepath.Base(dead), err)
	}
}
