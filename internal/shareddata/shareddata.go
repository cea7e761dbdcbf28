// Package shareddata finds the real datasets that tests and benchmarks read
// from ../shared/data beside the repository, and skips cleanly where a
// machine does not have them.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the absolute path of ../shared/data relative to the module
// root (found by walking up to go.mod), whether or not it exists.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("..", "shared", "data")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(d), "shared", "data")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "..", "shared", "data")
		}
	}
}

// Path returns the absolute path of rel under the shared data directory,
// skipping tb with a message naming the path when it is absent.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(Root(), rel)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("real data not available: %s is absent (see ../shared/data/README.md)", p)
	}
	return p
}

// ImageNetJPEGs reads the real ImageNet sample (100 JPEGs), skipping tb
// where it is absent.
func ImageNetJPEGs(tb testing.TB) (names []string, data [][]byte) {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(Path(tb, "imagenet-sample"), "*.JPEG"))
	if len(files) == 0 {
		tb.Fatal("no JPEGs in the ImageNet sample")
	}
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		names, data = append(names, filepath.Base(f)), append(data, d)
	}
	return names, data
}
