package source

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/splitmix"
)

// SyntheticClasses names the classes of [Synthetic]: each is a shape drawn in
// a class-dependent colour at a random place and size, over a noisy random
// background. Shape and hue both carry the class, so a model can learn it,
// while placement, size, brightness and noise vary enough that memorising
// pixels does not work.
var SyntheticClasses = []string{"disk", "square", "triangle", "cross", "ring", "hstripes", "vstripes", "diagonal", "checker", "dots"}

// Synthetic is a generated dataset with CIFAR's shape (3×32×32, 10 classes).
// Samples are made on demand from (seed, split, index), so it needs no files
// or network and its memory does not grow with its length.
//
// WithFields makes every field of the schema too (a key is refused: there
// is nothing to name), from the same (seed, split, index), after the
// image's shape is drawn and from the same SplitMix64 stream:
//
//   - Rectangles: k = 1 + ⌊3u⌋ of them are drawn; each is a width and
//     height of 6 to 14 pixels, a top-left corner where it fits in the
//     32×32 image, and a class in 1..C-1, where C is the labels field's
//     classes, else 10; one that does not keep a pixel clear of every
//     earlier rectangle is drawn again, up to 16 draws in all, so a
//     sample has 1 to 3 apart. With boxes, only the first max_boxes are
//     kept. Each is painted over the image, every pixel the fully
//     saturated, fully bright colour of hue 360°·(class-1)/(C-1).
//   - mask: H×W class ids, the rectangles' on 0, one byte each for uint8
//     and two (little-endian) for uint16: the raw values, not an encoded
//     image, as the image is pixels (Info.Encoded is false).
//   - boxes: each rectangle's, in drawing order, in the schema's format,
//     in pixels (x0, y0, x0+w, y0+h for xyxy), or fractions of 32 when the
//     schema says normalized; classes: each rectangle's class.
//   - label: the int label, Record.Label, as without fields; labels: the
//     rectangles' classes, each once, in increasing order.
//   - tokens: a caption, 1+label then 10+class for each rectangle, cut to
//     max_tokens.
//   - tensor: its values in row-major order, each one draw: a float32
//     its top 24 bits over 2^24 (uniform in [0, 1)), a uint8 or uint16
//     its top bits, an int32 its top 31 bits, an int64 its top 63.
type Synthetic struct {
	n        int
	seed     uint64
	split    Split
	shuffled bool
	schema   *fields.Schema // from WithFields; else nil
	classes  int            // C: rectangles take classes 1..C-1
}

// syntheticTries bounds the draws of a sample's rectangles.
const syntheticTries = 16

// WithShuffledLabels gives every sample a label drawn independently of its
// image, a control for "can a model learn this?": nothing can be learned.
// For NewSynthetic.
func WithShuffledLabels() Option {
	return Option{"WithShuffledLabels", func(o *options) error { o.shuffled = true; return nil }}
}

// NewSynthetic returns n generated samples; the test split holds different
// images from the train split for the same seed. It takes
// WithShuffledLabels and WithFields (see [Synthetic] for what it makes).
func NewSynthetic(n int, split Split, seed uint64, opts ...Option) (*Synthetic, error) {
	if n < 1 {
		return nil, fmt.Errorf("synthetic: n=%d: must be at least 1", n)
	}
	o, err := apply("synthetic", opts, "WithShuffledLabels", "WithFields")
	if err != nil {
		return nil, err
	}
	s := &Synthetic{n: n, seed: seed, split: split, shuffled: o.shuffled, schema: o.fields, classes: len(SyntheticClasses)}
	if s.schema == nil {
		return s, nil
	}
	for _, f := range s.schema.Fields {
		if f.Key != "" {
			return nil, fmt.Errorf("%w: synthetic: %s=%s: the synthetic source makes its fields and reads none: leave the key out", fields.ErrSchema, f.Kind, f.Key)
		}
	}
	if f := s.schema.Field(fields.Labels); f != nil {
		s.classes = f.Classes
	}
	if s.classes < 2 {
		return nil, fmt.Errorf("%w: synthetic: labels classes=%d: the rectangles take classes 1..classes-1, so want at least 2", fields.ErrSchema, s.classes)
	}
	if f := s.schema.Field(fields.Mask); f != nil && s.classes > 1<<(8*f.DType.Size()) {
		return nil, fmt.Errorf("%w: synthetic: labels classes=%d: a %s mask holds classes below %d", fields.ErrSchema, s.classes, f.DType, 1<<(8*f.DType.Size()))
	}
	return s, nil
}

func (s *Synthetic) Len() int { return s.n }

func (s *Synthetic) Info() Info {
	id := fmt.Sprintf("synthetic n=%d split=%s seed=%d", s.n, s.split, s.seed)
	args := []Arg{{"n", strconv.Itoa(s.n)}, {"split", s.split.String()}, {"seed", strconv.FormatUint(s.seed, 10)}}
	if s.shuffled {
		id += " shuffled_labels=true"
		args = append(args, Arg{"shuffle_labels", "true"})
	}
	return Info{Name: "synthetic", Identity: id, C: 3, H: 32, W: 32, Classes: SyntheticClasses, Args: args, Fields: s.schema}
}

func (s *Synthetic) Close() error { return nil }

// rng is a SplitMix64 stream; the source keeps its own so that it does not
// depend on the transform package.
type rng uint64

func (r *rng) next() uint64 {
	*r += splitmix.Golden
	return splitmix.Mix(uint64(*r))
}

func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }
func (r *rng) intn(n int) int { hi, _ := bits.Mul64(r.next(), uint64(n)); return int(hi) }

func (s *Synthetic) Read(i int, rec *Record) error {
	if uint(i) >= uint(s.n) {
		return fmt.Errorf("synthetic: sample %d out of range [0, %d)", i, s.n)
	}
	r := rng(s.seed*0x2545f4914f6cdd1d ^ uint64(s.split+1)<<56 ^ uint64(i))
	r.next()
	class := i % len(SyntheticClasses)
	label := class
	if s.shuffled {
		label = r.intn(len(SyntheticClasses))
	}
	const n = 3 * 32 * 32
	if cap(rec.Buf) < n {
		rec.Buf = make([]byte, n)
	}
	pix := rec.Buf[:n]
	draw(pix, class, &r)
	rec.Pix, rec.C, rec.H, rec.W, rec.Label = pix, 3, 32, 32, label
	if s.schema != nil {
		s.drawFields(pix, label, &r, fieldValues(rec, len(s.schema.Fields)))
	}
	return nil
}

// rect is one of a sample's rectangles: pixels [x0, x0+w) × [y0, y0+h).
type rect struct{ x0, y0, w, h, class int }

// apart reports whether a and b keep a pixel between them.
func (a rect) apart(b rect) bool {
	return a.x0 > b.x0+b.w || b.x0 > a.x0+a.w || a.y0 > b.y0+b.h || b.y0 > a.y0+a.h
}

// drawFields draws a sample's rectangles from r, paints them into pix and
// sets vals, as Synthetic's doc says.
func (s *Synthetic) drawFields(pix []byte, label int, r *rng, vals []fields.Value) {
	var rects [3]rect
	want, n := 1+r.intn(3), 0
	for try := 0; n < want && try < syntheticTries; try++ {
		q := rect{w: 6 + r.intn(9), h: 6 + r.intn(9)}
		q.x0, q.y0, q.class = r.intn(32-q.w+1), r.intn(32-q.h+1), 1+r.intn(s.classes-1)
		apart := true
		for _, p := range rects[:n] {
			apart = apart && q.apart(p)
		}
		if apart {
			rects[n] = q
			n++
		}
	}
	if f := s.schema.Field(fields.Boxes); f != nil {
		n = min(n, f.Max)
	}
	for _, q := range rects[:n] {
		col := hsv(360*float64(q.class-1)/float64(s.classes-1), 1, 1)
		for c := range 3 {
			for y := q.y0; y < q.y0+q.h; y++ {
				row := pix[(c*32+y)*32:]
				for x := q.x0; x < q.x0+q.w; x++ {
					row[x] = uint8(col[c])
				}
			}
		}
	}
	for k, f := range s.schema.Fields {
		v := &vals[k]
		switch f.Kind {
		case fields.Mask:
			size := f.DType.Size()
			v.Bytes = grow(v.Bytes, 32*32*size)
			clear(v.Bytes)
			for _, q := range rects[:n] {
				for y := q.y0; y < q.y0+q.h; y++ {
					for x := q.x0; x < q.x0+q.w; x++ {
						if size == 1 {
							v.Bytes[y*32+x] = byte(q.class)
						} else {
							binary.LittleEndian.PutUint16(v.Bytes[2*(y*32+x):], uint16(q.class))
						}
					}
				}
			}
		case fields.Boxes:
			scale := float32(1)
			if s.schema.Normalized {
				scale = 32
			}
			for _, q := range rects[:n] {
				x0, y0, w, h := float32(q.x0)/scale, float32(q.y0)/scale, float32(q.w)/scale, float32(q.h)/scale
				switch s.schema.BoxFormat {
				case fields.XYWH:
					v.Floats = append(v.Floats, x0, y0, w, h)
				case fields.CXCYWH:
					v.Floats = append(v.Floats, x0+w/2, y0+h/2, w, h)
				default:
					v.Floats = append(v.Floats, x0, y0, x0+w, y0+h)
				}
			}
		case fields.Classes:
			for _, q := range rects[:n] {
				v.Ints = append(v.Ints, int64(q.class))
			}
		case fields.Labels:
			for _, q := range rects[:n] {
				if !slices.Contains(v.Ints, int64(q.class)) {
					v.Ints = append(v.Ints, int64(q.class))
				}
			}
			slices.Sort(v.Ints)
		case fields.Tokens:
			v.Ints = append(v.Ints, int64(1+label))
			for _, q := range rects[:n] {
				v.Ints = append(v.Ints, int64(10+q.class))
			}
			v.Ints = v.Ints[:min(len(v.Ints), f.Max)]
		case fields.Tensor:
			size := f.DType.Size()
			v.Bytes = grow(v.Bytes, tensorBytes(&f))
			for i := 0; i < len(v.Bytes); i += size {
				d := r.next()
				switch f.DType {
				case fields.Uint8:
					v.Bytes[i] = byte(d >> 56)
				case fields.Uint16:
					binary.LittleEndian.PutUint16(v.Bytes[i:], uint16(d>>48))
				case fields.Int32:
					binary.LittleEndian.PutUint32(v.Bytes[i:], uint32(d>>33))
				case fields.Int64:
					binary.LittleEndian.PutUint64(v.Bytes[i:], d>>1)
				default:
					binary.LittleEndian.PutUint32(v.Bytes[i:], math.Float32bits(float32(d>>40)/(1<<24)))
				}
			}
		}
	}
}

// hsv converts hue (degrees), saturation and value in [0, 1] to RGB in [0, 255].
func hsv(h, s, v float64) [3]float64 {
	h = math.Mod(h+360, 360) / 60
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	var rgb [3]float64
	switch int(h) {
	case 0:
		rgb = [3]float64{c, x, 0}
	case 1:
		rgb = [3]float64{x, c, 0}
	case 2:
		rgb = [3]float64{0, c, x}
	case 3:
		rgb = [3]float64{0, x, c}
	case 4:
		rgb = [3]float64{x, 0, c}
	default:
		rgb = [3]float64{c, 0, x}
	}
	for i := range rgb {
		rgb[i] = (rgb[i] + v - c) * 255
	}
	return rgb
}

// draw paints one sample of class into pix (CHW, 3×32×32).
func draw(pix []byte, class int, r *rng) {
	// Background: a dull random colour with a gentle gradient.
	bg := hsv(r.float()*360, 0.1+0.25*r.float(), 0.2+0.5*r.float())
	gx, gy := (r.float()-0.5)*2, (r.float()-0.5)*2
	// Foreground: the class hue, jittered, bright and saturated.
	fg := hsv(float64(class)*36+(r.float()-0.5)*24, 0.6+0.4*r.float(), 0.65+0.35*r.float())
	cx, cy := 9+r.float()*14, 9+r.float()*14
	size := 5 + r.float()*5
	angle := r.float() * math.Pi
	period := 3 + r.intn(3)
	var dots [5][2]float64
	for k := range dots {
		dots[k] = [2]float64{cx + (r.float()-0.5)*2*size, cy + (r.float()-0.5)*2*size}
	}
	sin, cos := math.Sincos(angle)
	for y := 0; y < 32; y++ {
		for x := 0; x < 32; x++ {
			dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
			in := inside(class, dx, dy, size, sin, cos, period, x, y, dots[:], float64(x)+0.5, float64(y)+0.5)
			col := bg
			if in {
				col = fg
			}
			noise := (r.float() + r.float() + r.float() - 1.5) * 24
			for c := 0; c < 3; c++ {
				v := col[c] + noise + (gx*float64(x-16)+gy*float64(y-16))*1.5
				pix[(c*32+y)*32+x] = uint8(math.Max(0, math.Min(255, v)))
			}
		}
	}
}

func inside(class int, dx, dy, size, sin, cos float64, period, x, y int, dots [][2]float64, px, py float64) bool {
	ax, ay := math.Abs(dx), math.Abs(dy)
	box := ax <= size && ay <= size
	switch class {
	case 0: // disk
		return dx*dx+dy*dy <= size*size
	case 1: // square, rotated
		u, v := dx*cos+dy*sin, -dx*sin+dy*cos
		return math.Abs(u) <= size*0.85 && math.Abs(v) <= size*0.85
	case 2: // triangle, apex up
		return dy <= size && dy >= -size && ax <= (dy+size)/2
	case 3: // cross
		return box && (ax <= size/3.5 || ay <= size/3.5)
	case 4: // ring
		d := math.Sqrt(dx*dx + dy*dy)
		return d <= size && d >= size*0.55
	case 5: // horizontal stripes
		return box && (y/period)%2 == 0
	case 6: // vertical stripes
		return box && (x/period)%2 == 0
	case 7: // diagonal band through the centre
		return box && math.Abs(dx*sin-dy*cos) <= 1.6
	case 8: // checkerboard
		return box && ((x/period)+(y/period))%2 == 0
	default: // dots
		for _, d := range dots {
			if (px-d[0])*(px-d[0])+(py-d[1])*(py-d[1]) <= 3.2 {
				return true
			}
		}
		return false
	}
}
