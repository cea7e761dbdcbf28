package source

import (
	"bytes"
	"testing"
)

func TestSynthetic(t *testing.T) {
	s, err := NewSynthetic(1000, Train, 7)
	if err != nil {
		t.Fatal(err)
	}
	test, _ := NewSynthetic(1000, Test, 7)
	var a, b Record
	counts := make([]int, 10)
	for i := range 1000 {
		s.Read(i, &a)
		counts[a.Label]++
		first := append([]byte(nil), a.Pix...)
		s.Read(i, &a)
		if !bytes.Equal(first, a.Pix) {
			t.Fatalf("sample %d differs between reads", i)
		}
		test.Read(i, &b)
		if bytes.Equal(a.Pix, b.Pix) {
			t.Fatalf("sample %d is the same in train and test", i)
		}
	}
	for c, n := range counts {
		if n != 100 {
			t.Errorf("class %d: %d samples of 1000", c, n)
		}
	}
	// Images of one class differ (placement, size, noise), so the data is
	// not a lookup table.
	s.Read(0, &a)
	x := append([]byte(nil), a.Pix...)
	s.Read(10, &a)
	if bytes.Equal(x, a.Pix) {
		t.Error("two samples of class 0 are identical")
	}
	sh, _ := NewSynthetic(1000, Train, 7, WithShuffledLabels())
	same := 0
	for i := range 1000 {
		sh.Read(i, &a)
		if a.Label == i%10 {
			same++
		}
	}
	if same > 200 {
		t.Errorf("shuffled labels agree with the classes %d times of 1000", same)
	}
	if _, err := NewSynthetic(0, Train, 0); err == nil {
		t.Error("n=0 accepted")
	}
}

func BenchmarkSyntheticRead(b *testing.B) {
	s, _ := NewSynthetic(1<<20, Train, 1)
	var r Record
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Read(i&(1<<20-1), &r)
		i++
	}
}

func BenchmarkSyntheticReadFields(b *testing.B) {
	s, err := NewSynthetic(1<<20, Train, 1, WithFields(detectionSchema()))
	if err != nil {
		b.Fatal(err)
	}
	var r Record
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Read(i&(1<<20-1), &r)
		i++
	}
}
