package prefetch

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"
)

func TestSlabPoolBlocksAndCounts(t *testing.T) {
	p, err := NewSlabPool(2, 100, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _ := p.Get(ctx)
	b, _ := p.Get(ctx)
	for _, s := range []*Slab{a, b} {
		if uintptr(unsafe.Pointer(&s.Data[0]))%Align != 0 || len(s.Data) != 100 || len(s.Labels) != 4 {
			t.Fatalf("slab %d: misaligned or wrong size", s.ID)
		}
	}
	if p.Out() != 2 {
		t.Fatalf("Out = %d", p.Out())
	}
	got := make(chan *Slab)
	go func() { s, _ := p.Get(ctx); got <- s }()
	select {
	case <-got:
		t.Fatal("Get returned with every slab out")
	case <-time.After(20 * time.Millisecond):
	}
	p.Put(a)
	if s := <-got; s != a {
		t.Fatal("Get did not return the slab put back")
	}
	if p.Wait() < 10*time.Millisecond {
		t.Errorf("Wait = %v, want the time Get blocked", p.Wait())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Get(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get on a cancelled context: %v", err)
	}
	p.Put(b)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("double Put did not panic")
			}
		}()
		p.Put(b)
		p.Put(b)
	}()
}
