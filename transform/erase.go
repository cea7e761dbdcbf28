package transform

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// EraseValue is what random_erasing writes into its rectangle: Levels on
// the [0,1] scale of torchvision's ToTensor (one for every channel, or one
// per channel), or, with Random, a uniform random byte per pixel and
// channel drawn from the sample's generator.
type EraseValue struct {
	Random bool
	Levels []float64
}

// ParseEraseValue reads a value as a .pipe file writes it: "random", one
// number in [0,1] ("0") or three comma-separated ones ("0.485,0.456,0.406").
func ParseEraseValue(s string) (EraseValue, error) {
	if s == "random" {
		return EraseValue{Random: true}, nil
	}
	var v EraseValue
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x >= 0 && x <= 1) {
			return EraseValue{}, paramErr("random_erasing", "value=%q: want random, or one or three levels in [0,1] (pixel level 255 is 1)", s)
		}
		v.Levels = append(v.Levels, x)
	}
	if len(v.Levels) != 1 && len(v.Levels) != 3 {
		return EraseValue{}, paramErr("random_erasing", "value=%q: want random, or one or three levels in [0,1] (pixel level 255 is 1)", s)
	}
	return v, nil
}

// String is the value in the form ParseEraseValue reads.
func (v EraseValue) String() string {
	if v.Random {
		return "random"
	}
	s := make([]string, len(v.Levels))
	for i, x := range v.Levels {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// RandomErasingOp is torchvision's RandomErasing on 8-bit pixels: with
// probability P it draws up to 10 rectangles, each with an area fraction
// of the image uniform in Scale and an aspect ratio (height/width, as
// torchvision draws it) log-uniform in Ratio, sides rounded to the nearest
// integer; the first that fits strictly inside the image is placed
// uniformly and overwritten with Value. When none fits, or P does not
// fire, the image is unchanged.
//
// torchvision erases a float tensor, usually after Normalize; pipe erases
// the uint8 image, before normalize. So Value's levels are on ToTensor's
// [0,1] scale and written as round(255·level): torchvision's value=0 after
// Normalize(mean, std) is value=mean here. Value random writes uniform
// bytes (0-255) where torchvision writes standard normal values.
type RandomErasingOp struct {
	P            float64
	Scale, Ratio [2]float64
	Value        EraseValue

	logRatio [2]float64
	levels   [3]uint8
}

// RandomErasing returns the random_erasing operation: 0 ≤ p ≤ 1,
// 0 < scale[0] ≤ scale[1] ≤ 1, 0 < ratio[0] ≤ ratio[1].
func RandomErasing(p float64, scale, ratio [2]float64, value EraseValue) (*RandomErasingOp, error) {
	if !(p >= 0 && p <= 1) {
		return nil, paramErr("random_erasing", "p=%g: must be between 0 and 1", p)
	}
	if !(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1) {
		return nil, paramErr("random_erasing", "scale=%g,%g: want 0 < min ≤ max ≤ 1", scale[0], scale[1])
	}
	if !(ratio[0] > 0 && ratio[0] <= ratio[1] && !math.IsInf(ratio[1], 0)) {
		return nil, paramErr("random_erasing", "ratio=%g,%g: want 0 < min ≤ max", ratio[0], ratio[1])
	}
	o := &RandomErasingOp{P: p, Scale: scale, Ratio: ratio,
		logRatio: [2]float64{math.Log(ratio[0]), math.Log(ratio[1])}}
	if !value.Random {
		if len(value.Levels) != 1 && len(value.Levels) != 3 {
			return nil, paramErr("random_erasing", "value=%s: want random, or one or three numbers in [0,1]", value)
		}
		for i := range o.levels {
			l := value.Levels[min(i, len(value.Levels)-1)]
			if !(l >= 0 && l <= 1) {
				return nil, paramErr("random_erasing", "value=%s: want random, or one or three numbers in [0,1]", value)
			}
			o.levels[i] = uint8(math.RoundToEven(l * 255))
		}
	}
	value.Levels = append([]float64(nil), value.Levels...)
	o.Value = value
	return o, nil
}

func (o *RandomErasingOp) Name() string { return "random_erasing" }
func (o *RandomErasingOp) Random() bool { return true }
func (o *RandomErasingOp) String() string {
	return fmt.Sprintf("random_erasing p=%g scale=%g,%g ratio=%g,%g value=%s",
		o.P, o.Scale[0], o.Scale[1], o.Ratio[0], o.Ratio[1], o.Value)
}

func (o *RandomErasingOp) OutShape(in Shape) (Shape, error) {
	if len(o.Value.Levels) == 3 && in.C != 3 {
		return Shape{}, fmt.Errorf("random_erasing: value=%s gives 3 channels, the image has %d", o.Value, in.C)
	}
	return in, nil
}

// Window draws the rectangle erased in an h×w image, as torchvision's
// RandomErasing.get_params does: ok is false when P did not fire or no
// attempt fitted, or the rectangle rounded to an empty one.
func (o *RandomErasingOp) Window(h, w int, r *Rand) (y, x, eh, ew int, ok bool) {
	if r.Float64() >= o.P {
		return 0, 0, 0, 0, false
	}
	area := float64(h) * float64(w)
	for range 10 {
		a := area * r.Uniform(o.Scale[0], o.Scale[1])
		ar := math.Exp(r.Uniform(o.logRatio[0], o.logRatio[1]))
		eh = int(math.RoundToEven(math.Sqrt(a * ar)))
		ew = int(math.RoundToEven(math.Sqrt(a / ar)))
		if eh >= h || ew >= w {
			continue
		}
		y, x = r.Intn(h-eh+1), r.Intn(w-ew+1)
		return y, x, eh, ew, eh > 0 && ew > 0
	}
	return 0, 0, 0, 0, false
}

func (o *RandomErasingOp) Apply(dst, src *Image, r *Rand) bool {
	y, x, h, w, ok := o.Window(src.H, src.W, r)
	if !ok {
		return false
	}
	o.erase(dst, src, y, x, h, w, r)
	return true
}

// erase writes src into dst with the h×w rectangle at (y, x) overwritten by
// the value; random bytes come from r, eight at a time, channel by channel
// and row by row.
func (o *RandomErasingOp) erase(dst, src *Image, y, x, h, w int, r *Rand) {
	dst.Resize(src.C, src.H, src.W)
	copy(dst.Pix, src.Pix)
	for c := 0; c < src.C; c++ {
		p := dst.Plane(c)
		for row := y; row < y+h; row++ {
			span := p[row*src.W+x : row*src.W+x+w]
			if !o.Value.Random {
				v := o.levels[min(c, 2)]
				for i := range span {
					span[i] = v
				}
				continue
			}
			var word [8]byte
			for i := 0; i < len(span); i += 8 {
				binary.LittleEndian.PutUint64(word[:], r.Uint64())
				copy(span[i:], word[:])
			}
		}
	}
}
