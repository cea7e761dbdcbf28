package jpegdec

import (
	"errors"
	"fmt"
	"unsafe"
)

// Abort forgets the image whose header was read.
func (d *Decoder) Abort() { d.data = nil }

// Need returns the bytes of memory that decoding the window of cw×ch
// pixels at (x0, y0), at scale num/8, of the image whose header Header
// read, takes beside dst and a row of each component: the sample planes
// the window needs and, for a progressive or multi-scan image, the whole
// image's coefficients. It is what Decode would refuse, found before
// anything is allocated: a window outside the image, an image whose blocks
// cannot fit in the scan bytes it has (every block costs at least one bit
// of the scans, so a header claiming millions of them over a few hundred
// bytes is refused), and one whose buffers would exceed MaxMemory.
func (d *Decoder) Need(num, x0, y0, cw, ch int) (int, error) {
	p, err := d.plan(num, x0, y0, cw, ch)
	if err != nil {
		d.Abort()
		return 0, err
	}
	return p.scratch(), nil
}

// plan is a decode worked out from the headers, before anything is
// allocated for it.
type plan struct {
	m0, m1 int // the iMCU rows decoded
	sc     scanInfo
	next   int // the offset of the first scan's data
	multi  bool
	sizes  [4]int // each component's plane, in bytes
	planes int    // their sum
	coef   int    // coefficients of a multi-scan image, 0 for one scan
}

// scratch is the bytes of the buffers the decode takes, as Scratch lays
// them out: the coefficients (int16), then the planes.
func (p *plan) scratch() int { return 2*p.coef + p.planes }

func (d *Decoder) plan(num, x0, y0, cw, ch int) (plan, error) {
	var p plan
	if d.data == nil {
		return p, errors.New("Decode without a header")
	}
	if num != 1 && num != 2 && num != 4 && num != 8 {
		return p, fmt.Errorf("scale %d/8: only 1/8, 2/8, 4/8 and 8/8 are decoded", num)
	}
	if cw <= 0 || ch <= 0 {
		return p, fmt.Errorf("a %dx%d window", cw, ch)
	}
	if err := d.geometry(num); err != nil {
		return p, err
	}
	if x0 < 0 || y0 < 0 || x0+cw > d.outW || y0+ch > d.outH {
		return p, fmt.Errorf("window %dx%d+%d+%d outside the %dx%d output", cw, ch, x0, y0, d.outW, d.outH)
	}
	p.m0, p.m1 = d.window(x0, y0, cw, ch)
	var err error
	if p.sc, p.next, err = d.readSOS(d.sos); err != nil {
		return p, err
	}
	p.multi = d.progressive || p.sc.n != d.nc
	blocks := 0
	for i := range d.nc {
		c := &d.comp[i]
		blocks += c.bw * c.bh
		c.stride = c.bw * c.ss
		c.py0 = p.m0 * c.v * c.ss
		p.sizes[i] = c.stride * (p.m1 + 1 - p.m0) * c.v * c.ss
		p.planes += p.sizes[i]
	}
	if blocks > 8*(len(d.data)-p.next) {
		return p, fmt.Errorf("%w: %d bytes of scan data cannot hold the %d blocks of a %dx%d image", ErrTruncated, len(d.data)-p.next, blocks, d.w, d.h)
	}
	if p.multi {
		p.coef = 64 * blocks
	}
	if need := p.scratch() + 2*cw; d.MaxMemory > 0 && need > d.MaxMemory {
		return p, fmt.Errorf("the image's buffers need %d bytes, more than the %d allowed", need, d.MaxMemory)
	}
	return p, nil
}

// Decode decodes the window of cw×ch pixels at (x0, y0) of the image whose
// header Header read, at scale num/8 (1, 2, 4 or 8; the window is in
// scaled pixels), into dst as R, G and B planes; dst holds at least
// 3·cw·ch bytes. It refuses what Need refuses, before allocating.
func (d *Decoder) Decode(dst []byte, num, x0, y0, cw, ch int) error {
	defer d.Abort()
	scratch := d.Scratch
	d.Scratch = nil
	p, err := d.plan(num, x0, y0, cw, ch)
	if err != nil {
		return err
	}
	if len(dst) < 3*cw*ch {
		return fmt.Errorf("%d bytes for a %dx%d window", len(dst), cw, ch)
	}
	var mem []byte
	var coef []int16
	if n := p.scratch(); n > 0 && len(scratch) >= n {
		// The coefficients first, where scratch is aligned for them.
		if p.coef > 0 {
			coef = unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(scratch))), p.coef)
		}
		mem = scratch[2*p.coef : n : n]
		defer func() {
			// Scratch is the caller's again once Decode returns.
			for i := range d.nc {
				d.comp[i].plane, d.comp[i].coef = nil, nil
			}
		}()
	} else {
		if cap(d.mem) < p.planes {
			d.mem = make([]byte, p.planes)
		}
		if cap(d.coefMem) < p.coef {
			d.coefMem = make([]int16, p.coef)
		}
		mem, coef = d.mem[:p.planes], d.coefMem[:p.coef]
	}
	for i := range d.nc {
		c := &d.comp[i]
		n := p.sizes[i]
		c.plane, mem = mem[:n:n], mem[n:]
		if cap(c.row) < cw+8 {
			c.row = make([]byte, cw+8)
		}
	}
	if p.multi {
		err = d.decodeMulti(p.m0, p.m1, coef)
	} else {
		err = d.decodeBaseline(&p.sc, p.next, p.m0, p.m1)
	}
	if err != nil {
		return err
	}
	d.output(dst, x0, y0, cw, ch)
	return nil
}

// geometry sets the sizes of a decode at scale num/8, as libjpeg-turbo's
// jpeg_core_output_dimensions does: chroma components are decoded at a
// larger DCT scale where that spares upsampling.
func (d *Decoder) geometry(num int) error {
	d.outW, d.outH = Scaled(d.w, num), Scaled(d.h, num)
	d.mcusX = (d.w + 8*d.hmax - 1) / (8 * d.hmax)
	d.mcusY = (d.h + 8*d.vmax - 1) / (8 * d.vmax)
	for i := range d.nc {
		c := &d.comp[i]
		ss := num
		for ss < 8 && (d.hmax*num)%(c.h*ss*2) == 0 && (d.vmax*num)%(c.v*ss*2) == 0 {
			ss *= 2
		}
		c.ss = ss
		c.bw, c.bh = d.mcusX*c.h, d.mcusY*c.v
		c.dsw = (d.w*c.h*ss + d.hmax*8 - 1) / (d.hmax * 8)
		c.dsh = (d.h*c.v*ss + d.vmax*8 - 1) / (d.vmax * 8)
		hin, vin := c.h*ss/num, c.v*ss/num
		if d.hmax%hin != 0 || d.vmax%vin != 0 {
			return fmt.Errorf("%w: sampling factors %dx%d against %dx%d", ErrUnsupported, c.h, c.v, d.hmax, d.vmax)
		}
		c.fx, c.fy = d.hmax/hin, d.vmax/vin
		// libjpeg's main controller gives no context rows at scale 1/8,
		// so its upsampler is plain there (jdsample.c).
		c.fancy = num > 1
	}
	return nil
}

// window works out which blocks the output window needs: for each
// component the block columns [bx0, bx1), and the iMCU rows [m0, m1] for
// all of them, including the neighbouring samples fancy upsampling reads.
func (d *Decoder) window(x0, y0, cw, ch int) (m0, m1 int) {
	m0, m1 = d.mcusY, 0
	for i := range d.nc {
		c := &d.comp[i]
		sx0, sx1 := span(x0, x0+cw, c.fx, c.dsw)
		sy0, sy1 := span(y0, y0+ch, c.fy, c.dsh)
		c.bx0, c.bx1 = sx0/c.ss, sx1/c.ss+1
		rows := c.v * c.ss
		m0, m1 = min(m0, sy0/rows), max(m1, sy1/rows)
	}
	return m0, m1
}

// span returns the first and last samples (of n) that output pixels
// [p0, p1) read at f output pixels a sample, a neighbour either side
// included.
func span(p0, p1, f, n int) (int, int) {
	s0, s1 := p0/f, (p1-1)/f
	if f == 2 {
		s0, s1 = s0-1, s1+1
	}
	return max(s0, 0), min(s1, n-1)
}

// scanInfo is a scan header.
type scanInfo struct {
	comps          [4]*component
	n              int
	ss, se, ah, al int
}

// readSOS parses the scan header at at and returns it and the offset of
// its entropy-coded data.
func (d *Decoder) readSOS(at int) (scanInfo, int, error) {
	var sc scanInfo
	seg, next, err := d.segment(at)
	if err != nil {
		return sc, 0, err
	}
	if len(seg) < 1 || seg[0] < 1 || seg[0] > 4 || len(seg) != 4+2*int(seg[0]) {
		return sc, 0, errors.New("SOS: bad length")
	}
	sc.n = int(seg[0])
	for i := range sc.n {
		id, tabs := seg[1+2*i], seg[2+2*i]
		var c *component
		for j := range d.nc {
			if d.comp[j].id == id {
				c = &d.comp[j]
			}
		}
		if c == nil {
			return sc, 0, fmt.Errorf("SOS: no component %d", id)
		}
		for j := range i {
			if sc.comps[j] == c {
				return sc, 0, fmt.Errorf("SOS: component %d twice", id)
			}
		}
		c.dct, c.act = int(tabs>>4), int(tabs&15)
		if c.dct > 3 || c.act > 3 {
			return sc, 0, errors.New("SOS: bad table selector")
		}
		sc.comps[i] = c
	}
	if sc.n > 1 {
		// An interleaved scan holds the components in frame order.
		blocks := 0
		for i := range sc.n {
			blocks += sc.comps[i].h * sc.comps[i].v
		}
		if blocks > 10 {
			return sc, 0, fmt.Errorf("SOS: %d blocks in an MCU", blocks)
		}
	}
	p := 1 + 2*sc.n
	sc.ss, sc.se, sc.ah, sc.al = int(seg[p]), int(seg[p+1]), int(seg[p+2]>>4), int(seg[p+2]&15)
	for i := range sc.n {
		c := sc.comps[i]
		if !c.qset {
			if !d.qdef[c.tq] {
				return sc, 0, fmt.Errorf("no quantisation table %d", c.tq)
			}
			c.q, c.qset = d.qt[c.tq], true
		}
	}
	if !d.progressive {
		if sc.ss != 0 || sc.se != 63 || sc.ah != 0 || sc.al != 0 {
			// libjpeg warns and decodes the whole block.
			sc.ss, sc.se, sc.ah, sc.al = 0, 63, 0, 0
		}
		for i := range sc.n {
			c := sc.comps[i]
			if !d.dc[c.dct].defined || !d.ac[c.act].defined {
				return sc, 0, errors.New("SOS: a Huffman table the scan uses is not defined")
			}
		}
		return sc, next, nil
	}
	bad := false
	if sc.ss == 0 {
		bad = sc.se != 0
	} else {
		bad = sc.ss > sc.se || sc.se > 63 || sc.n != 1
	}
	if sc.ah != 0 && sc.al != sc.ah-1 || sc.al > 13 {
		bad = true
	}
	if bad {
		return sc, 0, fmt.Errorf("invalid progressive parameters Ss=%d Se=%d Ah=%d Al=%d", sc.ss, sc.se, sc.ah, sc.al)
	}
	for i := range sc.n {
		c := sc.comps[i]
		if sc.ss == 0 && sc.ah == 0 && !d.dc[c.dct].defined || sc.ss > 0 && !d.ac[c.act].defined {
			return sc, 0, errors.New("SOS: a Huffman table the scan uses is not defined")
		}
	}
	return sc, next, nil
}

// idctFor returns the IDCT of scaled size ss.
func idctFor(ss int) func(*[64]int16, *[64]int32, []byte, int) {
	switch ss {
	case 1:
		return idct1
	case 2:
		return idct2
	case 4:
		return idct4
	}
	return idct8
}

// decodeBaseline decodes a single-scan sequential image, MCU row by MCU
// row through the last the window needs, each block going straight to the
// IDCT if the window needs it.
func (d *Decoder) decodeBaseline(sc *scanInfo, at, m0, m1 int) error {
	var comps [10]*component
	var dcs, acs [10]*huffTable
	var bxs, bys [10]int // a block's place in its component's MCU
	var idcts [10]func(*[64]int16, *[64]int32, []byte, int)
	nb := 0
	for i := range sc.n {
		c := sc.comps[i]
		c.pred = 0
		for by := range c.v {
			for bx := range c.h {
				comps[nb], dcs[nb], acs[nb] = c, &d.dc[c.dct], &d.ac[c.act]
				idcts[nb] = idctFor(c.ss)
				bxs[nb], bys[nb] = bx, by
				nb++
			}
		}
	}
	// A decode that failed may have left coefficients behind.
	d.blocks = [10][64]int16{}
	var br bitReader
	br.reset(d.data, at)
	iv := restarts{br: &br, sc: sc, ri: d.ri, togo: d.ri, rows: d.mcusY}
	for my := 0; my <= m1; my++ {
		for mx := range d.mcusX {
			if _, err := iv.next(my); err != nil {
				return err
			}
			br.baselineMCU(&d.blocks, nb, &comps, &dcs, &acs)
			if err := iv.done(my); err != nil {
				return err
			}
			if my < m0 {
				for i := range nb {
					d.blocks[i] = [64]int16{}
				}
				continue
			}
			for i := range nb {
				blk := &d.blocks[i]
				c := comps[i]
				bx := mx*c.h + bxs[i]
				if bx >= c.bx0 && bx < c.bx1 {
					by := my*c.v + bys[i]
					o := (by*c.ss-c.py0)*c.stride + bx*c.ss
					idcts[i](blk, &c.q, c.plane[o:], c.stride)
				}
				*blk = [64]int16{}
			}
		}
	}
	return nil
}

// restarts follows a scan's restart intervals, and the data running out.
type restarts struct {
	br   *bitReader
	sc   *scanInfo
	ri   int // the restart interval in MCUs, 0 for none
	togo int // MCUs left in the interval
	rows int // the image's iMCU rows, for errors
}

// next is called before each MCU, in iMCU row row. Where an interval
// begins it moves past the RSTn marker and resets the DC predictions
// (restarted). A marker other than RSTn there, or the end of the data,
// means the scan's data ran out before its blocks did: an error. libjpeg
// warns (JWRN_HIT_MARKER) and leaves the rest of the image grey, which a
// pipeline would take for a good image.
func (r *restarts) next(row int) (restarted bool, err error) {
	if r.ri > 0 {
		if r.togo == 0 {
			if !r.br.restart() {
				return false, r.truncated(row)
			}
			for i := range r.sc.n {
				r.sc.comps[i].pred = 0
			}
			r.togo, restarted = r.ri, true
		}
		r.togo--
	}
	return restarted, nil
}

// done is called after each MCU: a reader that used zero bits from past a
// marker or the end of the data has run out of data, an error.
func (r *restarts) done(row int) error {
	if r.br.overrun() {
		return r.truncated(row)
	}
	return nil
}

func (r *restarts) truncated(row int) error {
	return fmt.Errorf("%w: truncated scan data: %d of %d MCU rows", ErrTruncated, row, r.rows)
}
