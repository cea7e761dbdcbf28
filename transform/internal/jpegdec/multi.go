package jpegdec

import "fmt"

// decodeMulti decodes a progressive or multi-scan image: every scan into
// the whole image's coefficients, coef, then the blocks the window needs
// through the IDCT.
func (d *Decoder) decodeMulti(m0, m1 int, coef []int16) error {
	mem := coef
	clear(mem)
	for i := range d.nc {
		c := &d.comp[i]
		k := 64 * c.bw * c.bh
		c.coef, mem = mem[:k:k], mem[k:]
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
	iv := restarts{br: &br, sc: sc, ri: d.ri, togo: d.ri, rows: d.mcusY}
	eobrun := 0
	block := func(c *component, bx, by int) {
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
	}
	// An interleaved scan's MCU holds each component's h×v blocks; a
	// non-interleaved scan's is one block of its component's own grid.
	cols, rows := d.mcusX, d.mcusY
	if c := sc.comps[0]; sc.n == 1 {
		cols = ((d.w*c.h+d.hmax-1)/d.hmax + 7) / 8
		rows = ((d.h*c.v+d.vmax-1)/d.vmax + 7) / 8
	}
	// Errors give the iMCU row, as libjpeg counts them: a component's
	// block rows are v to one.
	perRow := 1
	if sc.n == 1 {
		perRow = sc.comps[0].v
	}
	for m := range cols * rows {
		mx, my := m%cols, m/cols
		restarted, err := iv.next(my / perRow)
		if err != nil {
			return 0, err
		}
		if restarted {
			eobrun = 0
		}
		if sc.n == 1 {
			block(sc.comps[0], mx, my)
		} else {
			for i := range sc.n {
				c := sc.comps[i]
				for by := range c.v {
					for bx := range c.h {
						block(c, mx*c.h+bx, my*c.v+by)
					}
				}
			}
		}
		if err := iv.done(my / perRow); err != nil {
			return 0, err
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
