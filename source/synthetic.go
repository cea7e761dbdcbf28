package source

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

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
type Synthetic struct {
	n        int
	seed     uint64
	split    Split
	shuffled bool
}

// WithShuffledLabels gives every sample a label drawn independently of its
// image, a control for "can a model learn this?": nothing can be learned.
// For NewSynthetic.
func WithShuffledLabels() Option {
	return Option{"WithShuffledLabels", func(o *options) error { o.shuffled = true; return nil }}
}

// NewSynthetic returns n generated samples; the test split holds different
// images from the train split for the same seed.
func NewSynthetic(n int, split Split, seed uint64, opts ...Option) (*Synthetic, error) {
	if n < 1 {
		return nil, fmt.Errorf("synthetic: n=%d: must be at least 1", n)
	}
	o, err := apply("synthetic", opts, "WithShuffledLabels")
	if err != nil {
		return nil, err
	}
	return &Synthetic{n: n, seed: seed, split: split, shuffled: o.shuffled}, nil
}

func (s *Synthetic) Len() int { return s.n }

func (s *Synthetic) Info() Info {
	id := fmt.Sprintf("synthetic n=%d split=%s seed=%d", s.n, s.split, s.seed)
	args := []Arg{{"n", strconv.Itoa(s.n)}, {"split", s.split.String()}, {"seed", strconv.FormatUint(s.seed, 10)}}
	if s.shuffled {
		id += " shuffled_labels=true"
		args = append(args, Arg{"shuffle_labels", "true"})
	}
	return Info{Name: "synthetic", Identity: id, C: 3, H: 32, W: 32, Classes: SyntheticClasses, Args: args}
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
	return nil
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
