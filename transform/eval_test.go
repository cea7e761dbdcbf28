package transform

import (
	"strings"
	"testing"
)

// TestEvalOps: each training operation names what evaluation runs in its
// place: itself if deterministic, a centre crop for random_crop (nothing
// when the images are the crop's size, an error when only padding could
// fill it), resize then centre crop for random_resized_crop (torchvision's
// 256/224), nothing for a flip.
func TestEvalOps(t *testing.T) {
	rc, _ := RandomCrop(32, 4, FillReflect)
	rrc, _ := RandomResizedCrop(224, [2]float64{0.08, 1}, [2]float64{0.75, 4.0 / 3}, Bilinear)
	flip, _ := Flip(Horizontal, 0.5)
	cc, _ := CenterCrop(24)
	for _, c := range []struct {
		op   Op
		in   Shape
		want string // the ops' strings joined by "; ", or "error: ..." held
	}{
		{cc, Shape{C: 3, H: 32, W: 32}, cc.String()},
		{rc, Shape{C: 3, H: 32, W: 32}, ""},
		{rc, Shape{C: 3, H: 40, W: 48}, "center_crop size=32"},
		{rc, Shape{C: 3}, "center_crop size=32"},
		{rc, Shape{C: 3, H: 28, W: 28}, "error: only padding fills"},
		{rrc, Shape{C: 3}, "resize shorter=256 interpolation=bilinear; center_crop size=224"},
		{flip, Shape{C: 3, H: 32, W: 32}, ""},
	} {
		ops, err := EvalOps(c.op, c.in)
		var got string
		if err != nil {
			got = "error: " + err.Error()
		} else {
			var names []string
			for _, o := range ops {
				names = append(names, o.String())
			}
			got = strings.Join(names, "; ")
		}
		if strings.HasPrefix(c.want, "error: ") && !strings.Contains(got, strings.TrimPrefix(c.want, "error: ")) || !strings.HasPrefix(c.want, "error: ") && got != c.want {
			t.Errorf("%s on %v: %q, want %q", c.op, c.in, got, c.want)
		}
	}
}
