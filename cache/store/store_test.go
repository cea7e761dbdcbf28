package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openTest(t *testing.T, dir string) *Store {
	t.Helper()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noise(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestCacheRoundTrip(t *testing.T) {
	c := openTest(t, t.TempDir())
	defer c.Close()
	fp := NewFingerprint("src", "stages", "seed=1")
	compressible := bytes.Repeat([]byte("pixels "), 20000)
	random := noise(50000, 1)
	if err := c.Put(fp, 0, 0, "u8", compressible); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(fp, 1, 7, "u8", random); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		epoch, shard int
		want         []byte
	}{{0, 0, compressible}, {1, 7, random}} {
		got, err := c.Get(fp, e.epoch, e.shard, "u8", nil)
		if err != nil || !bytes.Equal(got, e.want) {
			t.Fatalf("epoch %d shard %d: %v, %d bytes", e.epoch, e.shard, err, len(got))
		}
	}
	if _, err := c.Get(fp, 0, 1, "u8", nil); !errors.Is(err, ErrMiss) {
		t.Errorf("absent entry: %v", err)
	}
	if _, err := c.Get(NewFingerprint("other"), 0, 0, "u8", nil); !errors.Is(err, ErrMiss) {
		t.Errorf("other fingerprint: %v", err)
	}
	if _, err := c.Get(fp, 0, 0, "f32", nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `layout "u8"`) {
		t.Errorf("wrong layout: %v", err)
	}
	if has, err := c.Has(fp, 1, 7); !has || err != nil {
		t.Errorf("Has(present) = %v, %v", has, err)
	}
	if has, err := c.Has(fp, 1, 8); has || err != nil {
		t.Errorf("Has(absent) = %v, %v", has, err)
	}
	c.PutMeta(fp, Meta{Stages: "x", Samples: 10, ShardSize: 4, Epochs: 2})
	us, err := c.Usages()
	if err != nil || len(us) != 1 {
		t.Fatalf("Usages: %v %v", us, err)
	}
	u := us[0]
	if u.Entries != 2 || u.RawBytes != int64(len(compressible)+len(random)) || u.Meta.Shards() != 3 || len(u.Epochs) != 2 {
		t.Errorf("usage %+v", u)
	}
	if u.Ratio() < 1.5 {
		t.Errorf("compression ratio %.2f: the repetitive entry was not compressed", u.Ratio())
	}
}

func TestCacheDetectsFlippedBytesOnDisk(t *testing.T) {
	dir := t.TempDir()
	c := openTest(t, dir)
	fp := NewFingerprint("x")
	val := noise(200000, 2) // incompressible: stored raw, so its bytes are findable
	if err := c.Put(fp, 0, 0, "u8", val); err != nil {
		t.Fatal(err)
	}
	c.Close()
	flipped := false
	files, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if i := bytes.Index(b, val[1000:1032]); i >= 0 {
			b[i+5] ^= 0xff
			os.WriteFile(f, b, 0o644)
			flipped = true
		}
	}
	if !flipped {
		t.Fatal("value not found in the value log")
	}
	c = openTest(t, dir)
	defer c.Close()
	if _, err := c.Get(fp, 0, 0, "u8", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped byte: Get = %v, want ErrCorrupt", err)
	}
	bad, n, err := c.Verify(nil)
	if err != nil || n != 1 || len(bad) != 1 || bad[0].Shard != 0 {
		t.Fatalf("Verify: %v %d %v", bad, n, err)
	}
	// Overwriting heals it.
	if err := c.Put(fp, 0, 0, "u8", val); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(fp, 0, 0, "u8", nil); err != nil || !bytes.Equal(got, val) {
		t.Fatalf("after rewrite: %v", err)
	}
}

func TestCacheOpenErrors(t *testing.T) {
	dir := t.TempDir()
	c := openTest(t, dir)
	if _, err := Open(dir); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second open: %v", err)
	}
	c.Close()

	future := t.TempDir()
	os.WriteFile(filepath.Join(future, formatFile), []byte(`{"format": 2, "writer": "pipe"}`), 0o644)
	if _, err := Open(future); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "format 2") {
		t.Errorf("newer format: %v", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "not a pipe cache") {
		t.Errorf("foreign directory: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(file); err == nil {
		t.Error("a file as cache dir accepted")
	}
}

func TestCacheGC(t *testing.T) {
	c := openTest(t, t.TempDir())
	defer c.Close()
	keep, drop := NewFingerprint("keep"), NewFingerprint("drop")
	for s := range 20 {
		c.Put(keep, 0, s, "u8", noise(100000, uint64(s)))
		c.Put(drop, 0, s, "u8", noise(100000, uint64(100+s)))
	}
	dropped, before, after, err := c.GC(map[Fingerprint]bool{keep: true})
	if err != nil || len(dropped) != 1 || dropped[0] != drop {
		t.Fatalf("GC: %v %v", dropped, err)
	}
	t.Logf("disk bytes before %d, after %d", before, after)
	us, _ := c.Usages()
	if len(us) != 1 || us[0].Fingerprint != keep || us[0].Entries != 20 {
		t.Fatalf("after GC: %+v", us)
	}
	if _, err := c.Get(keep, 0, 3, "u8", nil); err != nil {
		t.Fatal(err)
	}
}

func TestFingerprintSeparatesParts(t *testing.T) {
	if NewFingerprint("ab", "c") == NewFingerprint("a", "bc") {
		t.Error("part boundaries do not count")
	}
	if NewFingerprint("a") != NewFingerprint("a") || len(NewFingerprint("a")) != 32 {
		t.Error("fingerprint not stable or wrong length")
	}
}

// TestEntryChecksOnlyWhatIsRead: a damaged segment is caught by a reader
// that touches it and by no other, for raw and compressed entries. (On
// disk, Badger may catch such damage first and drop the entry: see
// TestCacheDetectsFlippedBytesOnDisk.)
func TestEntryChecksOnlyWhatIsRead(t *testing.T) {
	c := openTest(t, t.TempDir())
	defer c.Close()
	random := noise(5*segmentSize+100, 3)
	repetitive := bytes.Repeat([]byte("0123456789abcdef"), (5*segmentSize+100)/16)
	for _, val := range [][]byte{random, repetitive} {
		v := c.encode("u8", val)
		compressed := v[5] == codecZstd
		var e Entry
		if err := c.parseEntry(v, "u8", nil, &e); err != nil {
			t.Fatal(err)
		}
		if b, err := e.Bytes(100, 2*segmentSize); err != nil || !bytes.Equal(b, val[100:100+2*segmentSize]) {
			t.Fatalf("compressed=%v: clean read: %v", compressed, err)
		}
		// Damage segment 3 of the raw bytes (in the stored value for a raw
		// entry; in the decoded buffer for a compressed one).
		e.raw[3*segmentSize+10] ^= 1
		if b, err := e.Bytes(4*segmentSize, len(val)-4*segmentSize); err != nil || !bytes.Equal(b, val[4*segmentSize:]) {
			t.Errorf("compressed=%v: segments 4-5: %v", compressed, err)
		}
		if _, err := e.Bytes(3*segmentSize-5, 10); !errors.Is(err, ErrCorrupt) {
			t.Errorf("compressed=%v: read across the damaged segment: %v", compressed, err)
		}
		if _, err := e.Bytes(len(val)-1, 2); !errors.Is(err, ErrCorrupt) {
			t.Errorf("compressed=%v: read past the end: %v", compressed, err)
		}
		if compressed != (&val[0] == &repetitive[0]) {
			t.Errorf("repetitive data should be compressed and noise kept raw")
		}
	}
	if _, err := c.decode([]byte("PIPSjunk"), "", nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short value: %v", err)
	}
}
