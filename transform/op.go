package transform

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"
)

// Op is one per-sample image operation. Implementations are immutable after
// construction and safe for concurrent use: all per-call state lives in the
// arguments.
type Op interface {
	// Name is the stage name, as in a .pipe file ("random_crop").
	Name() string
	// String is the stage with every parameter in canonical form
	// ("random_crop size=32 pad=4 fill=reflect"); pipelines hash it into
	// cache fingerprints, so two ops with equal strings must behave alike.
	String() string
	// Random reports whether Apply draws from its generator.
	Random() bool
	// OutShape returns the shape Apply produces from an input of shape in,
	// or an error when in cannot be handled (too small, wrong channels).
	OutShape(in Shape) (Shape, error)
	// Apply writes the result for src into dst (resizing dst as needed) and
	// returns true, or returns false when the result equals src and dst was
	// left untouched (a flip that did not fire). src is never modified and
	// must not share memory with dst.
	Apply(dst, src *Image, r *Rand) bool
}

// Evaluator is implemented by a random operation that has an evaluation
// form: the deterministic operations a model trained through it is
// evaluated with, for images of shape in (H, W 0 where sizes vary).
type Evaluator interface {
	EvalOps(in Shape) ([]Op, error)
}

// EvalOps is what evaluation runs in place of the training operation op:
// op itself when it is deterministic; its evaluation form when it has one
// ([Evaluator]: random_resized_crop, random_crop); nothing for the other
// random operations (flips, shifts, colour jitter, grayscale, blur,
// erasing), which only vary the training images.
func EvalOps(op Op, in Shape) ([]Op, error) {
	if !op.Random() {
		return []Op{op}, nil
	}
	if e, ok := op.(Evaluator); ok {
		return e.EvalOps(in)
	}
	return nil, nil
}

// MaxSide is the longest image side pipe handles: the decoder refuses a
// longer one, and no operation makes one (crop, resize and pad sizes are
// bounded by it), since the cache stores sides in 16 bits.
const MaxSide = maxSide

// ErrParam is wrapped by every error a constructor returns for an invalid
// parameter, so callers can tell configuration errors from data errors.
var ErrParam = errors.New("invalid parameter")

func paramErr(op, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", op, ErrParam, fmt.Sprintf(format, args...))
}

// Fill says where pixels outside the source image come from.
type Fill int

const (
	// FillZero is constant zero (black) padding.
	FillZero Fill = iota
	// FillReflect mirrors without repeating the edge pixel (dcb|abcd|cba),
	// as numpy's "reflect" and torchvision's padding_mode="reflect".
	FillReflect
	// FillEdge repeats the edge pixel (aaa|abcd|ddd), numpy's "edge" and
	// Keras's fill_mode="nearest".
	FillEdge
	// FillWrap tiles the image (bcd|abcd|abc), Keras's fill_mode="wrap".
	FillWrap
)

var fillNames = [...]string{"zero", "reflect", "edge", "wrap"}

func (f Fill) String() string {
	if int(f) < len(fillNames) {
		return fillNames[f]
	}
	return fmt.Sprintf("Fill(%d)", int(f))
}

// FillNames lists the accepted fill names, in order.
func FillNames() []string { return fillNames[:] }

// ParseFill returns the Fill with the given name.
func ParseFill(s string) (Fill, error) {
	for i, n := range fillNames {
		if n == s {
			return Fill(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown fill %q (want zero, reflect, edge or wrap)", ErrParam, s)
}

// source maps coordinate i, which may lie outside [0, n), to the index it
// reads under fill f, or -1 for a constant-zero pixel.
func (f Fill) source(i, n int) int {
	if uint(i) < uint(n) {
		return i
	}
	switch f {
	case FillEdge:
		if i < 0 {
			return 0
		}
		return n - 1
	case FillWrap:
		i %= n
		if i < 0 {
			i += n
		}
		return i
	case FillReflect:
		if n == 1 {
			return 0
		}
		if i < 0 && -i < n {
			return -i
		}
		if i >= n && i < 2*n-1 {
			return 2*(n-1) - i
		}
		period := 2 * (n - 1)
		i %= period
		if i < 0 {
			i += period
		}
		if i >= n {
			i = period - i
		}
		return i
	}
	return -1
}

// window copies the h×w window of src whose top-left corner sits at (oy, ox)
// in src coordinates (possibly outside the image) into dst, filling pixels
// outside src by f, and mirroring columns when mirror is set. It is the one
// kernel behind random_crop, shift and horizontal flip: the part of a row
// inside src is a block copy (or an 8-byte-word reversal when mirrored), and
// border columns read through a map computed once per call.
func window(dst, src *Image, oy, ox, h, w int, f Fill, mirror bool) {
	dst.Resize(src.C, h, w)
	sw, sh := src.W, src.H
	// Output columns [x0, x1) of the window read source columns inside src.
	x0 := min(max(0, -ox), w)
	x1 := max(min(w, sw-ox), x0)
	border := x0 + w - x1
	if border > 2*maxBorder {
		windowSlow(dst, src, oy, ox, h, w, f, mirror)
		return
	}
	// Border column i reads source column scol[i] (-1: zero) into dcol[i].
	var scol, dcol [2 * maxBorder]int
	for i := 0; i < border; i++ {
		x := i
		if i >= x0 {
			x = x1 + i - x0
		}
		scol[i] = f.source(ox+x, sw)
		if mirror {
			x = w - 1 - x
		}
		dcol[i] = x
	}
	if windowKernel(dst, src, oy, ox, h, w, f, mirror, scol[:border], dcol[:border]) {
		return
	}
	// Under FillZero every border pixel is zero; under the other fills every
	// border pixel maps inside src, so the row loop needs no branch on it.
	zero := f == FillZero
	// Where the window's inside part starts in an output row.
	m0 := x0
	if mirror {
		m0 = w - x1
	}
	// Every index below is in range by construction: rows come from
	// f.source (in [0, sh) or -1), the inside span [ox+x0, ox+x1) lies in
	// [0, sw), border sources come from f.source, and dst was sized above.
	// So the row loop moves words through raw pointers without bounds checks.
	if len(src.Pix) < src.C*sh*sw {
		panic("transform: image buffer shorter than its shape")
	}
	sbase := unsafe.Pointer(unsafe.SliceData(src.Pix))
	dbase := unsafe.Pointer(unsafe.SliceData(dst.Pix))
	n := x1 - x0
	// Pointers are formed from offsets inside their allocations; Go's rules
	// (checked by -race's checkptr) forbid even forming one past the end.
	d := 0
	for c := 0; c < src.C; c++ {
		so := c * sh * sw
		for y := oy; y < oy+h; y, d = y+1, d+w {
			dp := unsafe.Add(dbase, d)
			sy := y
			if uint(sy) >= uint(sh) {
				sy = f.source(y, sh)
			}
			if sy < 0 {
				clear(dst.Pix[d : d+w])
				continue
			}
			srow := unsafe.Add(sbase, so+sy*sw)
			if n > 0 {
				if mirror {
					reverseWords(unsafe.Add(dp, m0), unsafe.Add(srow, ox+x0), n)
				} else {
					copyWords(unsafe.Add(dp, m0), unsafe.Add(srow, ox+x0), n)
				}
			}
			if zero {
				for _, x := range dcol[:border] {
					*(*byte)(unsafe.Add(dp, x)) = 0
				}
			} else {
				for i, x := range dcol[:border] {
					*(*byte)(unsafe.Add(dp, x)) = *(*byte)(unsafe.Add(srow, scol[i]))
				}
			}
		}
	}
}

// copyWords copies n bytes from s to d (not overlapping) in 8-byte words,
// finishing with one overlapping word; short spans go byte by byte.
func copyWords(d, s unsafe.Pointer, n int) {
	if n < 8 {
		for i := 0; i < n; i++ {
			*(*byte)(unsafe.Add(d, i)) = *(*byte)(unsafe.Add(s, i))
		}
		return
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(d, i)) = *(*uint64)(unsafe.Add(s, i))
	}
	if i < n {
		*(*uint64)(unsafe.Add(d, n-8)) = *(*uint64)(unsafe.Add(s, n-8))
	}
}

// reverseWords writes the n bytes at s to d in reverse order, a byte-swapped
// word at a time, finishing with one overlapping word (which rewrites bytes
// with the values they already hold).
func reverseWords(d, s unsafe.Pointer, n int) {
	if n < 8 {
		for i := 0; i < n; i++ {
			*(*byte)(unsafe.Add(d, n-1-i)) = *(*byte)(unsafe.Add(s, i))
		}
		return
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(d, n-i-8)) = bits.ReverseBytes64(*(*uint64)(unsafe.Add(s, i)))
	}
	if i < n {
		*(*uint64)(d) = bits.ReverseBytes64(*(*uint64)(unsafe.Add(s, n-8)))
	}
}

// windowSlow is window for very large pads or images: the same result, one
// pixel at a time.
func windowSlow(dst, src *Image, oy, ox, h, w int, f Fill, mirror bool) {
	d := 0
	for c := 0; c < src.C; c++ {
		sp := src.Plane(c)
		for y := 0; y < h; y++ {
			sy := f.source(oy+y, src.H)
			for x := 0; x < w; x++ {
				wx := x
				if mirror {
					wx = w - 1 - x
				}
				sx := f.source(ox+wx, src.W)
				var v uint8
				if sy >= 0 && sx >= 0 {
					v = sp[sy*src.W+sx]
				}
				dst.Pix[d] = v
				d++
			}
		}
	}
}

// maxBorder bounds the border columns window maps ahead on each side; wider
// borders (huge pads) fall back to computing each pixel's source.
const maxBorder = 32
