package transform

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/jpegtest"
)

// held is the budget's memory handed out to decodes in progress.
func (b *budget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	idle := int64(0)
	for _, buf := range b.idle {
		idle += int64(cap(buf))
	}
	return b.used - idle - b.garbage
}

// mustGet is b.get of a request within the budget, which is not refused.
func mustGet(t *testing.T, b *budget, n0, n1 int, extra int64) [2][]byte {
	t.Helper()
	bufs, err := b.get(n0, n1, extra)
	if err != nil {
		t.Errorf("get(%d, %d, %d) of a budget of %d: %v", n0, n1, extra, b.limit, err)
	}
	return bufs
}

// TestBudgetBounds: goroutines asking a budget of 1000 bytes for buffers
// and extra bytes of every size never hold more than 1000 at once; one
// asking for more than the whole budget is refused with ErrOverBudget and
// holds nothing (it once went ahead alone, over the budget); and
// everything comes back.
func TestBudgetBounds(t *testing.T) {
	b := newBudget(1000)
	var live, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 100 {
				n0, n1, extra := rng.IntN(300), rng.IntN(300), int64(rng.IntN(300))
				if g == 0 && rng.IntN(10) == 0 {
					n0 = 1500 // more than the budget
				}
				bufs, err := b.get(n0, n1, extra)
				if n0 > 1000 {
					if !errors.Is(err, ErrOverBudget) || !errors.Is(err, ErrDecode) || bufs[0] != nil || bufs[1] != nil {
						t.Errorf("asked for %d bytes of 1000: %v, %d and %d bytes", n0, err, len(bufs[0]), len(bufs[1]))
						b.put(bufs[0], extra)
						b.put(bufs[1], 0)
					}
					refused.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("asked for %d, %d and %d bytes of 1000: %v", n0, n1, extra, err)
					continue
				}
				n := int64(cap(bufs[0])+cap(bufs[1])) + extra
				if len(bufs[0]) < n0 || len(bufs[1]) < n1 {
					t.Errorf("asked for %d and %d bytes, got %d and %d", n0, n1, len(bufs[0]), len(bufs[1]))
				}
				if now := live.Add(n); now > 1000 {
					t.Errorf("%d bytes handed out at once, over the budget of 1000 (this request %d)", now, n)
				}
				time.Sleep(time.Duration(rng.IntN(20)) * time.Microsecond)
				live.Add(-n)
				b.put(bufs[0], extra)
				b.put(bufs[1], 0)
			}
		})
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Error("no request over the budget was made")
	}
	if h := b.held(); h != 0 {
		t.Errorf("%d bytes still handed out", h)
	}
}

// TestBudgetInTurn: a request that does not fit waits, and one after it
// that would fit waits behind it, so large requests are not starved. The
// small request (30) fits beside the first (60) but not beside the large
// one (80), so it is served only once the large one has given its bytes
// back, after reporting: the order the test reads is the order served.
func TestBudgetInTurn(t *testing.T) {
	b := newBudget(100)
	first := mustGet(t, b, 60, 0, 0)
	order := make(chan string, 2)
	go func() {
		bufs := mustGet(t, b, 80, 0, 0)
		order <- "large"
		b.put(bufs[0], 0)
	}()
	for b.waiting() < 1 {
		runtime.Gosched()
	}
	go func() {
		bufs := mustGet(t, b, 30, 0, 0)
		order <- "small"
		b.put(bufs[0], 0)
	}()
	for b.waiting() < 2 {
		runtime.Gosched()
	}
	select {
	case s := <-order:
		t.Fatalf("%s served while 60 of 100 bytes are held and the large request waits", s)
	case <-time.After(20 * time.Millisecond):
	}
	b.put(first[0], 0)
	if a, c := <-order, <-order; a != "large" || c != "small" {
		t.Errorf("served %s then %s, want large then small", a, c)
	}
}

// waiting is how many requests have taken a ticket and not been served.
func (b *budget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.next - b.turn)
}

// TestBudgetReusesAndCollects: a buffer given back serves the next
// request that fits in it; where only dropping it makes room, it is
// dropped and still counted until the collector has freed it, and the
// request is served after that, never over the budget.
func TestBudgetReusesAndCollects(t *testing.T) {
	b := newBudget(100)
	other := mustGet(t, b, 20, 0, 0) // held throughout: the requests cannot go alone
	a := mustGet(t, b, 50, 0, 0)
	b.put(a[0], 0)
	c := mustGet(t, b, 40, 0, 0)
	if !sameBuf(a[0], c[0]) {
		t.Error("a 50-byte buffer given back did not serve a request for 40")
	}
	b.put(c[0], 0)
	a, c = [2][]byte{}, [2][]byte{}
	d := mustGet(t, b, 60, 0, 0) // 20 held, 50 idle: room only once the idle one is gone
	b.mu.Lock()
	used, garbage, peak := b.used, b.garbage, b.peak
	b.mu.Unlock()
	if len(d[0]) < 60 || used != 80 || garbage != 0 || peak > 100 {
		t.Errorf("got %d bytes; %d counted, %d of them garbage, peak %d; want 60, 80, 0 and at most 100", len(d[0]), used, garbage, peak)
	}
	b.put(d[0], 0)
	b.put(other[0], 0)
}

// TestDecodersShareTheBudget: workers decoding large JPEGs at once (each
// needing 18 MiB of buffers and a 12 MiB window, over what a decoder keeps
// for itself) hold no more than the budget between them, decode correctly,
// and give everything back when released.
func TestDecodersShareTheBudget(t *testing.T) {
	old := SetDecodeMemory(64 << 20)
	defer SetDecodeMemory(old)
	decodeMemory.mu.Lock()
	decodeMemory.peak = 0
	decodeMemory.mu.Unlock()
	data := jpegtest.Flat(2048, 2048)
	cc, err := CenterCrop(64)
	if err != nil {
		t.Fatal(err)
	}
	rrc, err := RandomResizedCrop(64, [2]float64{0.5, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			d := NewDecoder(w%2 == 0)
			chain := NewChain([]Op{cc})
			if w%3 == 0 {
				chain = NewChain([]Op{rrc})
			}
			for i := range 8 {
				out, err := chain.ApplyEncoded(d, data, NewRand(1, 0, int64(i)))
				if err != nil {
					t.Error(err)
					return
				}
				if out.Shape() != (Shape{3, 64, 64}) || bytes.Count(out.Pix, []byte{128}) != len(out.Pix) {
					t.Errorf("decoded to %s, not flat grey", out.Shape())
				}
				if i%2 == 0 {
					d.Release()
				}
			}
			d.Release()
		})
	}
	wg.Wait()
	if h := decodeMemory.held(); h != 0 {
		t.Errorf("%d bytes of the budget still held after Release", h)
	}
	decodeMemory.mu.Lock()
	peak := decodeMemory.peak
	decodeMemory.mu.Unlock()
	if peak == 0 || peak > 64<<20 {
		t.Errorf("the budget's peak was %d bytes, want some and at most 64 MiB", peak)
	}
}

// TestParseBytes: PIPE_DECODE_MEMORY's sizes.
func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"": 0, "1000": 1000, "512M": 512 << 20, "2g": 2 << 30, "64KiB": 64 << 10, " 3GB ": 3 << 30} {
		if n, err := parseBytes(s); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", s, n, err, want)
		}
	}
	for _, s := range []string{"lots", "-1G", "1.5G", "99999999999G"} {
		if n, err := parseBytes(s); err == nil {
			t.Errorf("%q: %d, want an error", s, n)
		}
	}
}

// TestDecodeMemoryEnvError: a PIPE_DECODE_MEMORY that is not a size leaves
// the default budget and says so (DecodeMemoryError, which a pipeline that
// decodes refuses to run on); unset or a size, there is no error.
func TestDecodeMemoryEnvError(t *testing.T) {
	defer func(e error) { envErr = e }(envErr)
	for v, bad := range map[string]bool{"lots": true, "-5M": true, "0": true, "": false, "512M": false, "2G": false} {
		envErr = nil
		t.Setenv("PIPE_DECODE_MEMORY", v)
		n := budgetFromEnv()
		if bad != (envErr != nil) || (bad && (n != DefaultDecodeMemory || !strings.Contains(envErr.Error(), "PIPE_DECODE_MEMORY="+v))) {
			t.Errorf("PIPE_DECODE_MEMORY=%q: budget %d, error %v", v, n, envErr)
		}
	}
}
