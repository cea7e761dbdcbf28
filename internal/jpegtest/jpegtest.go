// Package jpegtest makes JPEG files for tests: valid ones, of any size,
// that cost a few hundred KB where a photograph of that size costs
// megabytes, so that a test can make them when it runs.
package jpegtest

import "bytes"

// Flat is a valid w×h progressive YCbCr 4:2:0 JPEG of one flat grey,
// made as Pillow makes one, with the scans of libjpeg's simple progression
// that matter here: an interleaved DC scan (every block's difference a
// 2-bit code, the least a standard table spends: about 3 bits a 16×16
// MCU, so 394 KB at 8192×8192), then one AC scan per component, all
// end-of-block runs. It decodes to 128 everywhere, and its whole-image
// coefficients (2 bytes each) are what a progressive JPEG costs a decoder.
func Flat(w, h int) []byte {
	b := []byte{0xff, 0xd8}
	seg := func(marker byte, payload ...byte) {
		n := len(payload) + 2
		b = append(b, 0xff, marker, byte(n>>8), byte(n))
		b = append(b, payload...)
	}
	dqt := bytes.Repeat([]byte{1}, 65)
	dqt[0] = 0
	seg(0xdb, dqt...)
	seg(0xc2, 8, byte(h>>8), byte(h), byte(w>>8), byte(w), 3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0)
	// DC table 0: symbol 0 (no difference) as 00; AC table 0: EOB14 (an
	// end-of-block run of 2^14 plus 14 bits) as 0.
	dht := append([]byte{0x00, 0, 1}, make([]byte, 14)...)
	dht = append(dht, 0)
	dht = append(append(dht, 0x10, 1), make([]byte, 15)...)
	dht = append(dht, 0xe0)
	seg(0xc4, dht...)
	var bits bitWriter
	seg(0xda, 3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 0, 0)
	for range ((w + 15) / 16) * ((h + 15) / 16) * 6 {
		bits.put(0, 2)
	}
	b = append(b, bits.flush()...)
	for i, sub := range []int{1, 2, 2} {
		seg(0xda, 1, byte(i+1), 0x00, 1, 63, 0)
		for n := (((w+sub-1)/sub + 7) / 8) * (((h+sub-1)/sub + 7) / 8); n > 0; {
			run := min(n, 1<<15-1)
			bits.put(0, 1)
			bits.put(uint32(run-1<<14), 14)
			n -= run
		}
		b = append(b, bits.flush()...)
	}
	return append(b, 0xff, 0xd9)
}

// bitWriter writes entropy-coded data, most significant bit first, with
// 0xFF bytes stuffed.
type bitWriter struct {
	out  []byte
	acc  uint32
	bits int
}

func (w *bitWriter) put(v uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		w.acc = w.acc<<1 | v>>i&1
		if w.bits++; w.bits == 8 {
			w.out = append(w.out, byte(w.acc))
			if byte(w.acc) == 0xff {
				w.out = append(w.out, 0)
			}
			w.acc, w.bits = 0, 0
		}
	}
}

// flush pads the last byte with 1 bits and returns the data, leaving the
// writer empty.
func (w *bitWriter) flush() []byte {
	for w.bits != 0 {
		w.put(1, 1)
	}
	out := w.out
	w.out = nil
	return out
}
