// Package faults is support for the tests that damage a cache store on
// disk (sharding's and cache's): copying a store, picking one of its files,
// flipping bits in it, and running each step under a deadline that turns a
// hang into a failure with every goroutine's stack.
package faults

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// CopyDir copies the files of directory src into a new temporary directory
// and returns it.
func CopyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	CopyFiles(t, src, dst)
	return dst
}

// CopyFiles copies the files of directory src into directory dst.
func CopyFiles(t testing.TB, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// File names the first (or, with last, the last) file of dir whose name
// ends in ext (".sst", ".vlog"), in name order.
func File(t testing.TB, dir, ext string, last bool) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	if len(names) == 0 {
		t.Fatalf("no %s file in %s", ext, dir)
	}
	slices.Sort(names)
	if last {
		return names[len(names)-1]
	}
	return names[0]
}

// FlipBits flips n bits of the file, chosen by a generator seeded with seed.
func FlipBits(t testing.TB, name string, seed uint64, n int) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for range n {
		i := r.IntN(8 * len(b))
		b[i/8] ^= 1 << (i % 8)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Within runs f on a goroutine of its own and fails the test, with every
// goroutine's stack, if f panics or is still running after d.
func Within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("%s: panic escaped: %v", what, p)
		}
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s: still running after %v:\n%s", what, d, buf[:runtime.Stack(buf, true)])
	}
}
