package pipe

import (
	"strings"
	"testing"
)

// TestAutoEqualsFixedWorkers: workers=auto and depth=auto, the defaults,
// give the stream of workers=1 and workers=4 with a fixed depth, byte for
// byte, on the host and through devices.
func TestAutoEqualsFixedWorkers(t *testing.T) {
	for _, devices := range []int{0, 2} {

		var want []string
		for _, w := range []int{0, 1, 4} { // 0: not given, auto
			var extra []Stage
			if w > 0 {
				extra = append(extra, Options(Settings{Workers: w}))
			}
			if devices > 0 {
				depth := 0 // auto
				if w > 0 {
					depth = w + 1
				}
				extra = append(extra, withDevices(devices, depth))
			}
			p := mustNew(t, recipe(synth(t, 64*60), extra...)...)
			if s := p.Summary(); s.WorkersAuto != (w == 0) || devices > 0 && s.DepthAuto != (w == 0) {
				t.Fatalf("workers=%d devices=%d: summary says workers auto %t, depth auto %t", w, devices, s.WorkersAuto, s.DepthAuto)
			}
			got := checksums(t, p, 2)
			// Every device buffer came back, and there are depth + 2 of
			// them: the depth the tuner reports.
			bufs := p.Buffers().Devices
			if len(bufs) != devices {
				t.Fatalf("workers=%d: buffers of %d devices, want %d", w, len(bufs), devices)
			}
			for d, b := range bufs {
				if depth := p.eng.AutoStats(-1); b.Held != 0 || depth != nil && depth.DepthAuto && b.All != depth.Depth+2 {
					t.Errorf("workers=%d device %d: %d of %d buffers held, depth %+v", w, d, b.Held, b.All, depth)
				}
			}
			if want == nil {
				want = got
				continue
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("devices=%d: workers=%d gives %v, auto %v", devices, w, got, want)
			}
		}
	}
}

// TestSetWorkersEndsAuto: a number set by the program wins over auto.
func TestSetWorkersEndsAuto(t *testing.T) {
	p := mustNew(t, recipe(synth(t, 640))...)
	p.SetWorkers(3)
	if s := p.Summary(); s.WorkersAuto || s.Workers != 3 {
		t.Errorf("after SetWorkers(3): auto %t, %d workers", s.WorkersAuto, s.Workers)
	}
	checksums(t, p, 1)
	if p.Workers() != 3 {
		t.Errorf("an epoch after SetWorkers(3) ran %d workers", p.Workers())
	}
}
