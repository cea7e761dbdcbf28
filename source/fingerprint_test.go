package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCIFARFingerprintTracksTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "data_batch_1.bin")
	rec := make([]byte, 3073*30)
	os.WriteFile(p, rec, 0o644)
	fp := func() string {
		c, err := OpenCIFAR10(t.Context(), p, Train)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := fp()
	if a != fp() {
		t.Fatal("fingerprint not stable")
	}
	// Same size and time, one byte changed near the end: the hash of the
	// last block sees it.
	st, _ := os.Stat(p)
	rec[len(rec)-10] = 1
	os.WriteFile(p, rec, 0o644)
	os.Chtimes(p, st.ModTime(), st.ModTime())
	b := fp()
	if a == b {
		t.Error("a changed byte did not change the fingerprint")
	}
	// Same bytes, new modification time.
	later := st.ModTime().Add(time.Hour)
	os.Chtimes(p, later, later)
	if fp() == b {
		t.Error("a new modification time did not change the fingerprint")
	}
}

func TestSyntheticFingerprint(t *testing.T) {
	a, _ := NewSynthetic(10, Train, 1)
	b, _ := NewSynthetic(10, Train, 2)
	fa, _ := a.Fingerprint()
	fb, _ := b.Fingerprint()
	if fa == fb {
		t.Error("seeds 1 and 2 give the same fingerprint")
	}
}
