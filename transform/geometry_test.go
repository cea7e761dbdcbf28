package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
)

// spatialOps are every spatial operation of the package, in the settings
// the tests move masks and boxes with: pads and fills of every kind, flips
// that fire half the time, resizes up and down.
func spatialOps(t *testing.T) []Op {
	t.Helper()
	var ops []Op
	add := func(op Op, err error) {
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	for _, f := range []Fill{FillZero, FillReflect, FillEdge, FillWrap} {
		add(RandomCrop(9, 3, f))
		add(Shift(0.3, 4, f))
	}
	add(RandomCrop(5, 0, FillZero))
	add(Flip(Horizontal, 0.5))
	add(Flip(Vertical, 0.5))
	add(CenterCrop(7))
	add(CenterCrop(23))
	add(Resize(11, Bilinear))
	add(Resize(4, Bicubic))
	add(RandomResizedCrop(10, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear))
	add(RandomResizedCrop(6, [2]float64{0.5, 1}, [2]float64{0.2, 5}, Lanczos))
	crop, _ := RandomCrop(8, 2, FillReflect)
	shift, _ := Shift(3, 0.2, FillEdge)
	flip, _ := Flip(Horizontal, 0.5)
	ops = append(ops, Fuse([]Op{crop, flip})[0], Fuse([]Op{shift, flip})[0])
	return ops
}

// randomImage is a c×h×w image of values drawn from r.
func randomImage(c, h, w int, r *Rand) *Image {
	m := &Image{}
	m.Resize(c, h, w)
	for i := range m.Pix {
		m.Pix[i] = uint8(r.Uint64())
	}
	return m
}

// TestGeometryMatchesApply: every spatial operation's Apply is its
// Geometry followed by ApplyGeometry, with the same draws (the generator
// ends where Apply leaves it) and the same pixels, and the geometry's
// output size is the image's.
func TestGeometryMatchesApply(t *testing.T) {
	ops := spatialOps(t)
	if _, ok := ops[len(ops)-1].(*windowFlipOp); !ok {
		t.Fatalf("Fuse did not fuse: %T", ops[len(ops)-1])
	}
	for _, op := range ops {
		s, ok := op.(Spatial)
		if !ok {
			t.Fatalf("%s is not Spatial", op)
		}
		for seed := range 300 {
			in := NewRand(uint64(seed), 1, 2)
			src := randomImage(1+2*(seed%2), 3+in.Intn(30), 3+in.Intn(30), &in)
			r1, r2 := NewRand(uint64(seed), 3, 4), NewRand(uint64(seed), 3, 4)
			var want, got Image
			applied := op.Apply(&want, src, &r1)
			g := s.Geometry(src.Shape(), &r2)
			if r1 != r2 {
				t.Fatalf("%s seed %d: Geometry drew otherwise than Apply", op, seed)
			}
			if s.ApplyGeometry(&got, src, g) != applied {
				t.Fatalf("%s seed %d: ApplyGeometry returned %v, Apply %v", op, seed, !applied, applied)
			}
			if applied != (g.Kind != GeomIdentity) {
				t.Fatalf("%s seed %d: applied %v with geometry %+v", op, seed, applied, g)
			}
			if !applied {
				continue
			}
			if got.Shape() != want.Shape() || !bytes.Equal(got.Pix, want.Pix) {
				t.Fatalf("%s seed %d: ApplyGeometry gives other pixels than Apply", op, seed)
			}
			if g.OH != want.H || g.OW != want.W {
				t.Fatalf("%s seed %d: geometry of %dx%d, image %dx%d", op, seed, g.OW, g.OH, want.W, want.H)
			}
		}
	}
}

// formulaMask is the h×w mask testdata/gen_geom.py builds.
func formulaMask(h, w int) Mask {
	m := Mask{Pix: make([]byte, h*w), H: h, W: w, Size: 1}
	for y := range h {
		for x := range w {
			m.Pix[y*w+x] = byte((x*7 + y*13 + x*y*3) % 251)
		}
	}
	return m
}

type geomCase struct {
	Op    string
	H, W  int
	Args  map[string]any
	OutH  int `json:"out_h"`
	OutW  int `json:"out_w"`
	Mask  []int
	Boxes [][4]float64
	Want  [][4]float64
}

func (c *geomCase) String() string { return fmt.Sprintf("%s %dx%d %v", c.Op, c.W, c.H, c.Args) }

func (c *geomCase) int(k string) int { return int(c.Args[k].(float64)) }

// geometry is the Geometry of the torchvision call c describes.
func (c *geomCase) geometry(t *testing.T) Geometry {
	switch c.Op {
	case "hflip":
		return Geometry{Kind: GeomWindow, OH: c.H, OW: c.W, MirrorX: true}
	case "vflip":
		return Geometry{Kind: GeomWindow, OH: c.H, OW: c.W, MirrorY: true}
	case "crop":
		fill := map[string]Fill{"constant": FillZero, "reflect": FillReflect, "edge": FillEdge}[c.Args["fill"].(string)]
		return Geometry{Kind: GeomWindow, OH: c.int("ch"), OW: c.int("cw"),
			Y: c.int("top") - c.int("pad"), X: c.int("left") - c.int("pad"), Fill: fill}
	case "resize":
		return Geometry{Kind: GeomResample, OH: c.int("oh"), OW: c.int("ow"), SH: float64(c.H), SW: float64(c.W)}
	case "resized_crop":
		return Geometry{Kind: GeomResample, OH: c.int("oh"), OW: c.int("ow"),
			SY: float64(c.int("top")), SX: float64(c.int("left")), SH: float64(c.int("ch")), SW: float64(c.int("cw"))}
	case "center_crop":
		op, err := CenterCrop(c.int("size"))
		if err != nil {
			t.Fatal(err)
		}
		return op.Geometry(Shape{C: 1, H: c.H, W: c.W}, nil)
	case "affine":
		g := Geometry{Kind: GeomAffine, OH: c.H, OW: c.W}
		for i, v := range c.Args["m"].([]any) {
			g.M[i] = v.(float64)
		}
		return g
	}
	t.Fatalf("unknown case %q", c.Op)
	return Geometry{}
}

func readGeomCases(t *testing.T) (masks, boxes []geomCase) {
	t.Helper()
	b, err := os.ReadFile("testdata/geom.json")
	if err != nil {
		t.Fatal(err)
	}
	var all struct{ Masks, Boxes []geomCase }
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("testdata/geom.json: %v", err)
	}
	if len(all.Masks) == 0 || len(all.Boxes) == 0 {
		t.Fatalf("testdata/geom.json: %d mask and %d box cases", len(all.Masks), len(all.Boxes))
	}
	return all.Masks, all.Boxes
}

// TestMaskMatchesTorchvision: a mask moved by the geometry of a flip, a
// padded crop (zero, reflect and edge padding), a resize, a resized crop,
// a center crop and an affine map is torchvision 0.14's functional op on
// it with InterpolationMode.NEAREST, exactly; as 16-bit values too.
func TestMaskMatchesTorchvision(t *testing.T) {
	masks, _ := readGeomCases(t)
	for _, c := range masks {
		var f Fields
		f.Mask = formulaMask(c.H, c.W)
		g := c.geometry(t)
		f.Move(g)
		if f.Mask.H != c.OutH || f.Mask.W != c.OutW || len(f.Mask.Pix) != len(c.Mask) {
			t.Fatalf("%s: %dx%d mask of %d bytes, torchvision %dx%d", &c, f.Mask.W, f.Mask.H, len(f.Mask.Pix), c.OutW, c.OutH)
		}
		for i, v := range c.Mask {
			if int(f.Mask.Pix[i]) != v {
				t.Fatalf("%s: pixel (%d, %d) is %d, torchvision %d", &c, i%c.OutW, i/c.OutW, f.Mask.Pix[i], v)
			}
		}
		// 16-bit: each value v as v·257, whose two bytes differ from
		// each other's neighbours'.
		m8 := formulaMask(c.H, c.W)
		f = Fields{Mask: Mask{Pix: make([]byte, 2*c.H*c.W), H: c.H, W: c.W, Size: 2}}
		for i, v := range m8.Pix {
			f.Mask.set(i, uint16(v)*257+uint16(i%3))
		}
		f.Move(g)
		for i, v := range c.Mask {
			got := uint16(f.Mask.Pix[2*i]) | uint16(f.Mask.Pix[2*i+1])<<8
			if got/257 != uint16(v) {
				t.Fatalf("%s, 16-bit: pixel %d is %d, torchvision %d·257", &c, i, got, v)
			}
		}
	}
}

// TestMaskWindowIsTheImagesWindow: under every fill, mirrored or not, a
// mask moved by a window geometry is the image's channel that geometry
// makes, byte for byte (FillZero gives class 0).
func TestMaskWindowIsTheImagesWindow(t *testing.T) {
	for _, op := range spatialOps(t) {
		s := op.(Spatial)
		for seed := range 100 {
			r := NewRand(uint64(seed), 0, 9)
			h, w := 2+r.Intn(25), 2+r.Intn(25)
			img := randomImage(1, h, w, &r)
			g := s.Geometry(img.Shape(), &r)
			if g.Kind != GeomWindow {
				break
			}
			var out Image
			s.ApplyGeometry(&out, img, g)
			f := Fields{Mask: Mask{Pix: img.Pix, H: h, W: w, Size: 1}}
			f.Move(g)
			if f.Mask.H != out.H || f.Mask.W != out.W || !bytes.Equal(f.Mask.Pix, out.Pix) {
				t.Fatalf("%s seed %d (%+v): the mask is not the image's window", op, seed, g)
			}
		}
	}
}

// TestBoxesMatchTorchvisionV2: boxes moved by the geometry of a flip, a
// padded crop, a resize, a resized crop, a center crop and an affine map
// are those torchvision.transforms.v2's formulas give (written out in
// testdata/gen_geom.py), clamped to the output, to 1e-4.
func TestBoxesMatchTorchvisionV2(t *testing.T) {
	_, cases := readGeomCases(t)
	for _, c := range cases {
		var f Fields
		for i, b := range c.Boxes {
			f.Boxes = append(f.Boxes, Box{X0: float32(b[0]), Y0: float32(b[1]), X1: float32(b[2]), Y1: float32(b[3]), Class: int64(i)})
		}
		f.Move(c.geometry(t))
		if len(f.Boxes) != len(c.Want) {
			t.Fatalf("%s: %d boxes, want %d", &c, len(f.Boxes), len(c.Want))
		}
		for i, b := range f.Boxes {
			got := [4]float64{float64(b.X0), float64(b.Y0), float64(b.X1), float64(b.Y1)}
			for k := range got {
				if math.Abs(got[k]-c.Want[i][k]) > 1e-4 {
					t.Fatalf("%s: box %d is %v, torchvision v2 %v", &c, i, got, c.Want[i])
				}
			}
			if b.Class != int64(i) {
				t.Fatalf("%s: box %d has class %d", &c, i, b.Class)
			}
		}
	}
}
