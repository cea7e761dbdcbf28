package jpegdec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomHuffTable builds ht from random code-length counts that make a
// valid canonical code, complete or not, with codes of every length from 1
// to 16 bits, and random distinct symbols: any byte for an AC table, 0 to
// 15 for a DC one. It returns the counts and symbols.
func randomHuffTable(t *testing.T, rng *rand.Rand, ht *huffTable, dc bool) (*[17]int, []byte) {
	nsym := 256
	if dc {
		nsym = 16
	}
	var counts [17]int
	total := 0
	free := 2 // codes of the current length that no shorter code prefixes
	skew := 1 + rng.IntN(4)
	for l := 1; l <= 16 && total < nsym; l++ {
		most := min(free, nsym-total)
		c := rng.IntN(most + 1)
		for range skew - 1 {
			c = min(c, rng.IntN(most+1))
		}
		if l == 16 && total == 0 {
			c = 1
		}
		counts[l] = c
		total += c
		free = min(2*(free-c), 512)
	}
	syms := make([]byte, total)
	for i, v := range rng.Perm(nsym)[:total] {
		syms[i] = byte(v)
	}
	if err := ht.build(&counts, syms, dc); err != nil {
		t.Fatalf("counts %v: %v", counts, err)
	}
	return &counts, syms
}

// TestBuildFastTables checks the fast and sym tables build makes against
// their definition, entry by entry.
func TestBuildFastTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		dc := rng.IntN(2) == 0
		var ht huffTable
		counts, syms := randomHuffTable(t, rng, &ht, dc)
		// The canonical code: lengths in order, each code one more than
		// the last, doubled at each length.
		var lens []int
		var codes []uint32
		c := uint32(0)
		for l := 1; l <= 16; l++ {
			for range counts[l] {
				lens, codes = append(lens, l), append(codes, c)
				c++
			}
			c <<= 1
		}
		for i := range uint32(1 << fastBits) {
			wantFast, wantSym := uint32(0x80), uint16(0)
			for p, l := range lens {
				if l > fastBits || i>>(fastBits-l) != codes[p] {
					continue
				}
				sym := int(syms[p])
				wantSym = uint16(l<<8 | sym)
				s, r := sym&15, sym>>4+1
				switch {
				case dc:
					s, r = sym, 0
				case sym == 0xF0:
					r = 16
				case s == 0:
					r = 64
				}
				if l+s > fastBits {
					wantFast = uint32(sym)<<8 | 0x80 | uint32(l)
					break
				}
				v := int32(0)
				if s > 0 {
					x := int32(i>>(fastBits-l-s)) & (1<<s - 1)
					v = x
					if x < 1<<(s-1) {
						v = x - (1<<s - 1)
					}
				}
				wantFast = uint32(v)<<16 | uint32(r)<<8 | uint32(l+s)
			}
			if ht.fast[i] != wantFast || ht.sym[i] != wantSym {
				t.Fatalf("dc %v, counts %v, symbols % x: entry %#x is fast %#x sym %#x, want %#x %#x",
					dc, counts[1:], syms, i, ht.fast[i], ht.sym[i], wantFast, wantSym)
			}
		}
	}
}

// randomScanData returns n bytes of entropy-coded data whose backing array
// goes on past them, so that a version reading beyond len(data) would see
// different bytes. Mode 0 has no 0xFF byte; mode 1 has one in about every
// 16, followed by 0 (stuffing), by more 0xFF (fill bytes) or by a marker;
// mode 2 is mostly zero bits (long codes and ends of blocks in most
// tables).
func randomScanData(rng *rand.Rand, n, mode int) []byte {
	buf := make([]byte, n+16)
	for i := range buf {
		b := byte(rng.Uint32())
		switch mode {
		case 0:
			if b == 0xFF {
				b = byte(rng.IntN(255))
			}
		case 1:
			if rng.IntN(16) == 0 {
				b = 0xFF
			} else if i > 0 && buf[i-1] == 0xFF && rng.IntN(2) == 0 {
				b = 0
			}
		case 2:
			b &= byte(rng.Uint32()) & byte(rng.Uint32())
		}
		buf[i] = b
	}
	return buf[:n]
}

// mcuCase is one MCU to decode from a random state.
type mcuCase struct {
	br         bitReader
	blocks     [10][64]int16
	nb         int
	comps      [10]*component
	dcs, acs   [10]*huffTable
	preds      [4]int32
	components [4]component
}

// start describes the reader's state c starts from.
func (c *mcuCase) start() string {
	b := &c.br
	return fmt.Sprintf("%d blocks from p=%d acc=%#x n=%d pad=%d hit=%v of %d bytes (% x at p)",
		c.nb, b.p, b.acc, b.n, b.pad, b.hit, len(b.data), b.data[b.p:min(b.p+16, len(b.data))])
}

// mcuResult is what decoding an mcuCase leaves.
type mcuResult struct {
	br     bitReader
	blocks [10][64]int16
	preds  [4]int32
}

// run decodes c's MCU with f, from c's state, into r.
func (c *mcuCase) run(f mcuFunc, r *mcuResult) {
	r.br, r.blocks = c.br, c.blocks
	for i := range c.components {
		c.components[i].pred = c.preds[i]
	}
	f(&r.br, &r.blocks, c.nb, &c.comps, &c.dcs, &c.acs)
	for i := range c.components {
		r.preds[i] = c.components[i].pred
	}
}

// TestBaselineMCUMatchesGo decodes MCUs with every version of baselineMCU
// and with baselineMCUGo, on random tables, data and reader states, and
// requires the same results: the coefficients written, the predictions,
// and the reader's state, the stale low bits of acc included.
func TestBaselineMCUMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	versions := baselineMCUVersions()
	var dcTabs, acTabs [4]huffTable
	var streams [8][]byte
	var c mcuCase
	var got, want mcuResult
	// The blocks start out random, to catch a stray write.
	var starts [4][10][64]int16
	for i := range starts {
		for j := range starts[i] {
			for k := range starts[i][j] {
				starts[i][j][k] = int16(rng.Uint32())
			}
		}
	}
	cases := 1_000_000
	if testing.Short() {
		cases = 100_000
	}
	for i := range cases {
		if i%1000 == 0 {
			for j := range dcTabs {
				randomHuffTable(t, rng, &dcTabs[j], true)
				randomHuffTable(t, rng, &acTabs[j], false)
			}
			for j := range streams {
				streams[j] = randomScanData(rng, rng.IntN(600), rng.IntN(3))
			}
		}
		data := streams[rng.IntN(len(streams))]
		data = data[:rng.IntN(len(data)+1)]
		c.br = bitReader{data: data, acc: rng.Uint64(), n: rng.IntN(64)}
		switch rng.IntN(3) {
		case 0:
			c.br.p = rng.IntN(len(data) + 1)
		case 1:
			c.br.p = max(len(data)-rng.IntN(12), 0)
		}
		if rng.IntN(8) == 0 {
			c.br.pad = 8 * rng.IntN(4)
			c.br.hit = rng.IntN(2) == 0
		}
		c.nb = 1 + rng.IntN(10)
		if rng.IntN(2) == 0 {
			c.nb = 1 + rng.IntN(3)
		}
		for j := range c.nb {
			ci := rng.IntN(len(c.components))
			c.comps[j] = &c.components[ci]
			c.dcs[j], c.acs[j] = &dcTabs[ci], &acTabs[(ci+i/1000)%len(acTabs)]
		}
		for j := range c.preds {
			c.preds[j] = int32(rng.Uint32()) >> rng.IntN(32)
		}
		c.blocks = starts[rng.IntN(len(starts))]
		c.run((*bitReader).baselineMCUGo, &want)
		for name, f := range versions {
			c.run(f, &got)
			g, w := &got.br, &want.br
			if g.p != w.p || g.acc != w.acc || g.n != w.n || g.pad != w.pad || g.hit != w.hit {
				t.Fatalf("case %d, %s, %s:\ngot  p=%d acc=%#x n=%d pad=%d hit=%v\nwant p=%d acc=%#x n=%d pad=%d hit=%v",
					i, name, c.start(), g.p, g.acc, g.n, g.pad, g.hit, w.p, w.acc, w.n, w.pad, w.hit)
			}
			if got.blocks != want.blocks || got.preds != want.preds {
				for j := range c.nb {
					if got.blocks[j] != want.blocks[j] {
						t.Errorf("block %d: got %v, want %v", j, got.blocks[j], want.blocks[j])
					}
				}
				t.Fatalf("case %d, %s, %s: predictions %v, want %v", i, name, c.start(), got.preds, want.preds)
			}
		}
	}
}

func TestBaselineMCUAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var dc, ac huffTable
	randomHuffTable(t, rng, &dc, true)
	randomHuffTable(t, rng, &ac, false)
	data := randomScanData(rng, 4096, 1)
	var c mcuCase
	c.nb = 6
	for j := range c.nb {
		c.comps[j], c.dcs[j], c.acs[j] = &c.components[0], &dc, &ac
	}
	versions := baselineMCUVersions()
	versions["baselineMCU"] = (*bitReader).baselineMCU
	for name, f := range versions {
		br := bitReader{data: data}
		allocs := testing.AllocsPerRun(100, func() {
			if br.p > len(data)-100 {
				br = bitReader{data: data}
			}
			f(&br, &c.blocks, c.nb, &c.comps, &c.dcs, &c.acs)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations", name, allocs)
		}
	}
}
