package jpegdec

import (
	"encoding/binary"
	"errors"
)

// fastBits is how many bits of code a table looks up at once.
const fastBits = 11

// huffTable is one Huffman table unpacked for decoding.
type huffTable struct {
	// fast is indexed by the next fastBits bits. Bit 7 clear: the code
	// and the extra bits of its coefficient fit; bits 0-4 count them
	// (bits 5 and 6 are clear), bits 8-15 hold, in an AC table, the zero
	// run before the coefficient plus one (64 for the end of a block),
	// and bits 16-31 its value. Bit 7 set: bits 0-4 are the code's length
	// and bits 8-15 its symbol, or 0 when the code is longer than
	// fastBits bits.
	fast [1 << fastBits]uint32
	// sym is indexed likewise: the code's length times 256 plus its
	// symbol, 0 for a longer code (progressive scans read symbols alone).
	sym     [1 << fastBits]uint16
	maxcode [18]int32 // the largest code of each length, -1 for none
	valoff  [18]int32 // the index of a code's symbol in val, less the code
	val     [256]uint8
	defined bool
}

// build unpacks a DHT table: counts[l] codes of l bits, symbols vals.
func (t *huffTable) build(counts *[17]int, vals []byte, dc bool) error {
	var size [257]int
	var code [257]uint32
	n := 0
	for l := 1; l <= 16; l++ {
		for range counts[l] {
			size[n] = l
			n++
		}
	}
	c := uint32(0)
	for p, l := 0, 1; p < n; l++ {
		for p < n && size[p] == l {
			code[p] = c
			p++
			c++
		}
		if c > 1<<l {
			return errors.New("DHT: bad Huffman table")
		}
		c <<= 1
	}
	p := 0
	for l := 1; l <= 17; l++ {
		t.maxcode[l], t.valoff[l] = -1, 0
		if l <= 16 && counts[l] > 0 {
			t.valoff[l] = int32(p) - int32(code[p])
			p += counts[l]
			t.maxcode[l] = int32(code[p-1])
		}
	}
	clear(t.val[:])
	copy(t.val[:], vals)
	// The codes of up to fastBits bits, in order, fill the tables from the
	// start, each its span of entries: those its code prefixes.
	end := uint32(0)
	for p := range n {
		l := size[p]
		sym := int(vals[p])
		if dc && sym > 15 {
			return errors.New("DHT: bad Huffman table (DC symbol over 15)")
		}
		if l > fastBits {
			continue
		}
		s, r := sym&15, sym>>4+1
		if dc {
			s, r = sym, 0
		} else if s == 0 && r != 16 {
			r = 64 // end of block
		}
		base, span := code[p]<<(fastBits-l), uint32(1)<<(fastBits-l)
		end = base + span
		for i := range t.sym[base:end] {
			t.sym[base+uint32(i)] = uint16(l<<8 | sym)
		}
		fast := t.fast[base:end]
		if l+s > fastBits {
			for i := range fast {
				fast[i] = uint32(sym)<<8 | 0x80 | uint32(l)
			}
			continue
		}
		// Each value of the extra bits has span>>s entries.
		step := span >> s
		for x := range uint32(1) << s {
			v := 0
			if s > 0 {
				v = extend(x, s)
			}
			e := uint32(int32(v))<<16 | uint32(r)<<8 | uint32(l+s)
			for i := range fast[x*step : (x+1)*step] {
				fast[x*step+uint32(i)] = e
			}
		}
	}
	for i := end; i < 1<<fastBits; i++ {
		t.fast[i] = 0x80
		t.sym[i] = 0
	}
	t.defined = true
	return nil
}

// extend turns s extra bits x into the value they code (F.12).
func extend(x uint32, s int) int {
	if x < 1<<(s-1) {
		return int(x) - (1<<s - 1)
	}
	return int(x)
}

// slow decodes a code longer than fastBits bits at the top of acc and
// returns its symbol and length; a code no table has decodes as symbol 0
// of 16 bits, as in libjpeg.
func (t *huffTable) slow(acc uint64) (sym, n int) {
	c16 := int32(acc >> 48)
	for l := fastBits + 1; l <= 16; l++ {
		c := c16 >> (16 - l)
		if c <= t.maxcode[l] {
			return int(t.val[(c+t.valoff[l])&0xFF]), l
		}
	}
	return 0, 16
}

// bitReader reads the entropy-coded data of a scan: the next bit is the
// top bit of acc, which holds n bits. At a marker or the end of the data
// it stops and adds zero bits, counting them in pad, as libjpeg does.
type bitReader struct {
	data []byte
	p    int
	acc  uint64
	n    int
	pad  int
	hit  bool // p stands at a marker, or at the end of the data
}

func (b *bitReader) reset(data []byte, p int) {
	*b = bitReader{data: data, p: p}
}

// fill tops acc up to at least 56 bits, eight bytes at once where none of
// them is 0xFF, else a byte at a time undoing 0xFF 0x00 stuffing.
func (b *bitReader) fill() { b.p, b.acc, b.n = b.refill(b.p, b.acc, b.n) }

func (b *bitReader) fillSlow() {
	data, p := b.data, b.p
	for b.n <= 56 {
		var c byte
		switch {
		case b.hit:
			b.pad += 8
		case p >= len(data):
			b.hit = true
			b.pad += 8
		case data[p] != 0xFF:
			c = data[p]
			p++
		default:
			q := p + 1
			for q < len(data) && data[q] == 0xFF {
				q++ // fill bytes
			}
			if q < len(data) && data[q] == 0 {
				c = 0xFF
				p = q + 1
			} else {
				b.hit = true // a marker: p stays on it
				b.pad += 8
			}
		}
		b.acc |= uint64(c) << (56 - b.n)
		b.n += 8
	}
	b.p = p
}

// bits reads s (≤ 16) bits.
func (b *bitReader) bits(s int) uint32 {
	if s == 0 {
		return 0
	}
	if b.n < s {
		b.fill()
	}
	v := uint32(b.acc >> (64 - s))
	b.acc <<= s
	b.n -= s
	return v
}

// bit reads one bit.
func (b *bitReader) bit() bool {
	if b.n < 1 {
		b.fill()
	}
	v := b.acc>>63 != 0
	b.acc <<= 1
	b.n--
	return v
}

// symbol decodes one Huffman symbol with t.
func (b *bitReader) symbol(t *huffTable) int {
	if b.n < 16 {
		b.fill()
	}
	e := t.sym[b.acc>>(64-fastBits)]
	var sym, l int
	if e != 0 {
		sym, l = int(e&0xFF), int(e>>8)
	} else {
		sym, l = t.slow(b.acc)
	}
	b.acc <<= l
	b.n -= l
	return sym
}

// overrun reports whether the reader has handed out zero bits from past a
// marker or the end of the data.
func (b *bitReader) overrun() bool { return b.pad > b.n }

// restart moves past the restart marker the reader has stopped at (any
// RSTn: a wrong number resynchronises here), throwing away the bits of the
// last byte. It reports whether the scan goes on: false where the data
// holds another marker, or ends.
func (b *bitReader) restart() bool {
	data, p := b.data, b.p
	b.acc, b.n, b.pad, b.hit = 0, 0, 0, false
	for p+1 < len(data) && !(data[p] == 0xFF && data[p+1] != 0 && data[p+1] != 0xFF) {
		p++
	}
	if p+1 < len(data) && data[p+1] >= mRST0 && data[p+1] <= mRST7 {
		b.p = p + 2
		return true
	}
	b.p = p
	b.hit = true
	return false
}

// baselineMCUGo decodes one MCU of a sequential scan into blocks (which
// must be zero), blocks of components comps with tables dcs and acs. It
// is the reference for baselineMCU, whose assembly versions follow it step
// for step and leave the same state, the stale low bits of acc included.
//
// The bit reader's state lives in locals for the length of the MCU. Like
// the decoder of jpegturbo/huff.c, it refills without asking whether it
// needs to (a branch the predictor would miss at every other refill), and
// decodes five symbols a refill, a block's DC symbol counting as one of
// its AC ones: a symbol the fast table holds, code and extra bits, takes
// at most fastBits bits, and a refill leaves at least 56. One it does not
// hold takes up to 31 bits (16 of code, 15 extra): it is decoded after a
// refill to 32 bits, and a refill follows it. A refill always follows a
// symbol, so n is at most 63 there, as refill needs; the reader holds at
// most 63 bits between MCUs.
func (b *bitReader) baselineMCUGo(blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable) {
	data, p, acc, n := b.data, b.p, b.acc, b.n
	for i := range nb {
		blk := &blocks[i]
		t := dcs[i]
		if w, ok := word8(data, p); ok { // refill, inline
			p, acc, n = p+(63-n)>>3, acc|w>>(uint(n)&63), n|56
		} else {
			p, acc, n = b.refillSlow(p, acc, n)
		}
		e := t.fast[acc>>(64-fastBits)]
		var diff int32
		j := 1 // fast symbols since the refill
		if e&0x80 == 0 {
			acc <<= e & 63
			n -= int(e & 31)
			diff = int32(e) >> 16
		} else {
			l, s := int(e&31), int(e>>8&0xFF)
			if l == 0 {
				s, l = t.slow(acc)
			}
			acc <<= l
			n -= l
			if s != 0 {
				diff = int32(extend(uint32(acc>>(64-s)), s))
				acc <<= s
				n -= s
			}
			j = 5
		}
		c := comps[i]
		c.pred += diff
		blk[0] = int16(c.pred)

		t = acs[i]
		for k := 1; k < 64; {
			if j == 5 {
				if w, ok := word8(data, p); ok {
					p, acc, n = p+(63-n)>>3, acc|w>>(uint(n)&63), n|56
				} else {
					p, acc, n = b.refillSlow(p, acc, n)
				}
				j = 0
			}
			e := t.fast[acc>>(64-fastBits)]
			if e&0x80 != 0 {
				if n < 32 {
					p, acc, n = b.refill(p, acc, n)
				}
				k, acc, n = t.acSlow(blk, k, acc, n)
				j = 5
				continue
			}
			acc <<= e & 63
			n -= int(e & 31)
			k += int(e >> 8 & 0xFF)
			blk[zigzag[(k-1)&127]&63] = int16(int32(e) >> 16)
			j++
		}
	}
	b.p, b.acc, b.n = p, acc, n
}

// mcuFunc is baselineMCU's signature as a function of the reader, which
// each version of it has.
type mcuFunc func(b *bitReader, blocks *[10][64]int16, nb int, comps *[10]*component, dcs, acs *[10]*huffTable)

// refill is fill for the decoding loops, which keep the reader's state in
// locals: it returns them topped up to at least 56 bits. Where none of
// the next 8 bytes is 0xFF it ors them in whether or not there is room
// for them, taking only the whole bytes that fit; the stale low bits it
// leaves are the stream's own, so or-ing them in again later changes
// nothing. n must be at most 63.
func (b *bitReader) refill(p int, acc uint64, n int) (int, uint64, int) {
	if w, ok := word8(b.data, p); ok {
		return p + (63-n)>>3, acc | w>>(uint(n)&63), n | 56
	}
	return b.refillSlow(p, acc, n)
}

// word8 returns the eight bytes of data at p, big-endian, and whether
// there are eight, none of them 0xFF: refill's common case.
func word8(data []byte, p int) (uint64, bool) {
	if p+8 > len(data) {
		return 0, false
	}
	w := binary.BigEndian.Uint64(data[p:])
	return w, (^w-0x0101010101010101)&w&0x8080808080808080 == 0
}

// refillSlow is the rest of refill, kept out of line where its common
// case is written inline.
//
//go:noinline
func (b *bitReader) refillSlow(p int, acc uint64, n int) (int, uint64, int) {
	b.p, b.acc, b.n = p, acc, n
	b.fillSlow()
	return b.p, b.acc, b.n
}

// acSlow decodes the AC symbol at the top of acc, at zigzag position k of
// blk, that the fast table does not hold: a code longer than fastBits
// bits, or one whose extra bits do not fit with it. acc holds at least 32
// bits.
func (t *huffTable) acSlow(blk *[64]int16, k int, acc uint64, n int) (int, uint64, int) {
	e := t.fast[acc>>(64-fastBits)]
	l, sym := int(e&31), int(e>>8&0xFF)
	if l == 0 {
		sym, l = t.slow(acc)
	}
	acc <<= l
	n -= l
	s, r := sym&15, sym>>4
	switch {
	case s != 0:
		k += r
		blk[zigzag[k&127]&63] = int16(extend(uint32(acc>>(64-s)), s))
		acc <<= s
		n -= s
		k++
	case r == 15:
		k += 16
	default:
		k = 64
	}
	return k, acc, n
}

// The progressive scans' block decoders (G.1.2), as libjpeg's jdphuff.c
// decodes them.

func (b *bitReader) dcFirst(blk []int16, c *component, t *huffTable, al int) {
	s := b.symbol(t)
	var diff int32
	if s != 0 {
		diff = int32(extend(b.bits(s), s))
	}
	c.pred += diff
	blk[0] = int16(c.pred << al)
}

func (b *bitReader) dcRefine(blk []int16, al int) {
	if b.bit() {
		blk[0] |= 1 << al
	}
}

func (b *bitReader) acFirst(blk []int16, t *huffTable, ss, se, al int, eobrun *int) {
	if *eobrun > 0 {
		*eobrun--
		return
	}
	for k := ss; k <= se; k++ {
		sym := b.symbol(t)
		r, s := sym>>4, sym&15
		if s != 0 {
			k += r
			blk[zigzag[k]] = int16(extend(b.bits(s), s) << al)
			continue
		}
		if r != 15 {
			*eobrun = 1 << r
			if r != 0 {
				*eobrun += int(b.bits(r))
			}
			*eobrun--
			return
		}
		k += 15
	}
}

func (b *bitReader) acRefine(blk []int16, t *huffTable, ss, se, al int, eobrun *int) {
	p1 := int16(1) << al
	m1 := int16(-1) << al
	k := ss
	if *eobrun == 0 {
		for ; k <= se; k++ {
			sym := b.symbol(t)
			r, s := sym>>4, sym&15
			var v int16
			if s != 0 {
				// s is 1 in valid data (libjpeg warns otherwise).
				if b.bit() {
					v = p1
				} else {
					v = m1
				}
			} else if r != 15 {
				*eobrun = 1 << r
				if r != 0 {
					*eobrun += int(b.bits(r))
				}
				break
			}
			for ; k <= se; k++ {
				z := &blk[zigzag[k]]
				if *z != 0 {
					if b.bit() && *z&p1 == 0 {
						if *z >= 0 {
							*z += p1
						} else {
							*z += m1
						}
					}
				} else {
					if r == 0 {
						break
					}
					r--
				}
			}
			if v != 0 {
				blk[zigzag[k]] = v
			}
		}
	}
	if *eobrun > 0 {
		for ; k <= se; k++ {
			z := &blk[zigzag[k]]
			if *z != 0 && b.bit() && *z&p1 == 0 {
				if *z >= 0 {
					*z += p1
				} else {
					*z += m1
				}
			}
		}
		*eobrun--
	}
}
