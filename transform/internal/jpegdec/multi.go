package jpegdec

import "fmt"

// decodeMulti decodes a progressive or multi-scan image: every scan into
// the whole image's coefficients, then the blocks the window needs through
// the IDCT.
func (d *Decoder) decodeMulti(m0, m1 int) error {
	n := 0
	for i := range d.nc {
		n += 64 * d.comp[i].bw * d.comp[i].bh
	}
	if cap(d.coefMem) < n {
		d.coefMem = make([]int16, n)
	}
	mem := d.coefMem[:n]
	clear(mem)
	for i := range d.nc {
		c := &d.comp[i]
		k := 64 * c.bw * c.bh
		c.coef, mem = mem[:k:k], mem[k:]
		for j := range c.coefBits {
			c.coefBits[j] = -1
		}
	}
	for p := d.sos; ; {
		m, at, err := d.nextMarker(p)
		if err != nil {
			return fmt.Errorf("%w: the data ends before the image's last scan", ErrTruncated)
		}
		switch m {
		case mEOI:
			d.idctAll(m0, m1)
			return nil
		case mSOS:
			sc, next, err := d.readSOS(at)
			if err != nil {
				return err
			}
			if p, err = d.scan(&sc, next); err != nil {
				return err
			}
		case mSOF0, mSOF1, mSOF2:
			return fmt.Errorf("a frame header (SOF) after the first scan")
		default:
			seg, next, err := d.segment(at)
			if err != nil {
				return err
			}
			if err := d.tables(m, seg); err != nil {
				return err
			}
			p = next
		}
	}
}

// scan decodes one scan whose entropy-coded data starts at at into the
// coefficients, and returns the offset where its data ends.
func (d *Decoder) scan(sc *scanInfo, at int) (int, error) {
	var br bitReader
	br.reset(d.data, at)
	for i := range sc.n {
		sc.comps[i].pred = 0
	}
	eobrun, togo, skip := 0, d.ri, false
	// mcu handles the restart interval, then decodes one MCU's blocks.
	mcu := func(each func(block func(c *component, bx, by int))) error {
		if d.ri > 0 {
			if togo == 0 {
				skip = !br.restart()
				for i := range sc.n {
					sc.comps[i].pred = 0
				}
				eobrun, togo = 0, d.ri
			}
			togo--
		}
		if skip {
			if br.eof {
				return fmt.Errorf("%w: the data ends inside a scan", ErrTruncated)
			}
			return nil
		}
		each(func(c *component, bx, by int) {
			blk := c.coef[(by*c.bw+bx)*64:][:64:64]
			switch {
			case !d.progressive:
				br.sequential(blk, c, &d.dc[c.dct], &d.ac[c.act])
			case sc.ss == 0 && sc.ah == 0:
				br.dcFirst(blk, c, &d.dc[c.dct], sc.al)
			case sc.ss == 0:
				br.dcRefine(blk, sc.al)
			case sc.ah == 0:
				br.acFirst(blk, &d.ac[c.act], sc.ss, sc.se, sc.al, &eobrun)
			default:
				br.acRefine(blk, &d.ac[c.act], sc.ss, sc.se, sc.al, &eobrun)
			}
		})
		if br.overrun() {
			if br.eof {
				return fmt.Errorf("%w: the data ends inside a scan", ErrTruncated)
			}
			skip = true // libjpeg leaves the rest of the interval as it is
		}
		return nil
	}
	if sc.n == 1 {
		// A non-interleaved scan: the component's own blocks, one an MCU.
		c := sc.comps[0]
		bw := ((d.w*c.h+d.hmax-1)/d.hmax + 7) / 8
		bh := ((d.h*c.v+d.vmax-1)/d.vmax + 7) / 8
		for by := range bh {
			for bx := range bw {
				err := mcu(func(block func(*component, int, int)) { block(c, bx, by) })
				if err != nil {
					return 0, err
				}
			}
		}
		return br.p, nil
	}
	for my := range d.mcusY {
		for mx := range d.mcusX {
			err := mcu(func(block func(*component, int, int)) {
				for i := range sc.n {
					c := sc.comps[i]
					for by := range c.v {
						for bx := range c.h {
							block(c, mx*c.h+bx, my*c.v+by)
						}
					}
				}
			})
			if err != nil {
				return 0, err
			}
		}
	}
	return br.p, nil
}

// sequential decodes one whole block of a sequential scan (F.2.2).
func (b *bitReader) sequential(blk []int16, c *component, dc, ac *huffTable) {
	s := b.symbol(dc)
	if s != 0 {
		c.pred += int32(extend(b.bits(s), s))
	}
	blk[0] = int16(c.pred)
	for k := 1; k < 64; k++ {
		sym := b.symbol(ac)
		r, s := sym>>4, sym&15
		if s != 0 {
			k += r
			blk[zigzag[k]] = int16(extend(b.bits(s), s))
		} else if r == 15 {
			k += 15
		} else {
			break
		}
	}
}

// idctAll puts the blocks the window needs, from the coefficients,
// through the IDCT.
func (d *Decoder) idctAll(m0, m1 int) {
	for i := range d.nc {
		c := &d.comp[i]
		idct := idctFor(c.ss)
		for by := m0 * c.v; by < (m1+1)*c.v; by++ {
			for bx := c.bx0; bx < c.bx1; bx++ {
				blk := (*[64]int16)(c.coef[(by*c.bw+bx)*64:])
				o := (by*c.ss-c.py0)*c.stride + bx*c.ss
				idct(blk, &c.q, c.plane[o:], c.stride)
			}
		}
	}
}
