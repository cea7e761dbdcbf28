package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// TestBetaMoments: betaRand's draws have the mean and variance of
// Beta(α, α), 1/2 and 1/(4(2α+1)), and stay in [0, 1], for the α of the
// reference recipes (0.2 for MixUp, 1 for CutMix) and one above 1.
func TestBetaMoments(t *testing.T) {
	const n = 200000
	for _, a := range []float64{0.2, 1, 2.5} {
		r := mixRand(7, 0, 0)
		var sum, sq float64
		for range n {
			v := betaRand(&r, a)
			if !(v >= 0 && v <= 1) {
				t.Fatalf("alpha %g: draw %g outside [0, 1]", a, v)
			}
			sum += v
			sq += v * v
		}
		mean := sum / n
		vr := sq/n - mean*mean
		// The standard errors are below 0.0011 (mean) and 0.0006
		// (variance): these bounds are over five of them.
		if want := 1 / (4 * (2*a + 1)); math.Abs(mean-0.5) > 0.006 || math.Abs(vr-want) > 0.004 {
			t.Errorf("alpha %g: mean %.4f (want 0.5), variance %.4f (want %.4f)", a, mean, vr, want)
		}
	}
}

// mixCase is one case of testdata/mix.txt (see gen_mix.py).
type mixCase struct {
	op, dtype, layout string
	n, c, h, w        int
	lam               float64
	cx, cy, k         int
	labels            []int32
	box               []float64 // x1 y1 x2 y2 λ'
	pixels, targets   []uint64
}

func readMixCases(t *testing.T) []mixCase {
	t.Helper()
	f, err := os.Open("testdata/mix.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []mixCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	hex := func(fs []string) []uint64 {
		var v []uint64
		for _, s := range fs {
			u, err := strconv.ParseUint(s, 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			v = append(v, u)
		}
		return v
	}
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch fs[0] {
		case "case":
			c := mixCase{op: fs[1], dtype: fs[2], layout: fs[3]}
			var nums []float64
			for _, s := range fs[4:] {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					t.Fatal(err)
				}
				nums = append(nums, v)
			}
			c.n, c.c, c.h, c.w = int(nums[0]), int(nums[1]), int(nums[2]), int(nums[3])
			c.lam, c.cx, c.cy, c.k = nums[4], int(nums[5]), int(nums[6]), int(nums[7])
			for _, y := range nums[8:] {
				c.labels = append(c.labels, int32(y))
			}
			cases = append(cases, c)
		case "box":
			for _, s := range fs[1:] {
				v, _ := strconv.ParseFloat(s, 64)
				cases[len(cases)-1].box = append(cases[len(cases)-1].box, v)
			}
		case "pixels":
			cases[len(cases)-1].pixels = hex(fs[1:])
		case "targets":
			cases[len(cases)-1].targets = hex(fs[1:])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// mixInput is gen_mix.py's batch in the layout and dtype.
func mixInput(c mixCase, t *transform.TensorWriter) []byte {
	data := make([]byte, c.n*t.SampleBytes())
	f32, u16 := asF32(data), asU16(data)
	for n := range c.n {
		for ch := range c.c {
			for y := range c.h {
				for x := range c.w {
					v := (n*53 + ch*131 + y*17 + x*7 + y*x) % 256
					i := ((n*c.c+ch)*c.h+y)*c.w + x
					if t.Layout == transform.NHWC {
						i = ((n*c.h+y)*c.w+x)*c.c + ch
					}
					switch t.DType {
					case transform.Float32:
						f32[i] = float32(v) / 255
					case transform.Float16:
						u16[i] = transform.Float32To16(float32(v) / 255)
					default:
						data[i] = uint8(v)
					}
				}
			}
		}
	}
	return data
}

// TestMixMatchesTorchvision: MixUp's and CutMix's pixels, CutMix's box
// and λ, and the targets, bit for bit against torchvision v2's formulas
// in PyTorch (testdata/gen_mix.py), with λ and CutMix's centre fixed, in
// float32, float16 (PyTorch's CPU rounding) and uint8 (pipe's own
// rounding), NCHW and NHWC.
func TestMixMatchesTorchvision(t *testing.T) {
	cases := readMixCases(t)
	if len(cases) < 6 {
		t.Fatalf("%d cases in testdata/mix.txt", len(cases))
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s %s %s %dx%dx%dx%d", c.op, c.dtype, c.layout, c.n, c.c, c.h, c.w)
		layout, _ := transform.ParseLayout(c.layout)
		dtype, _ := transform.ParseDType(c.dtype)
		tw, err := transform.ToTensor(layout, dtype, nil, transform.Shape{C: c.c, H: c.h, W: c.w})
		if err != nil {
			t.Fatal(err)
		}
		mx := newMixer(&Mix{MixUp: &MixOp{Alpha: 1, P: 1}, Classes: c.k}, tw)
		data := mixInput(c, tw)
		d := mixDraw{mixed: true, lam: c.lam}
		if c.op == "cutmix" {
			d.cut = true
			d.x1, d.y1, d.x2, d.y2, d.lam = cutBox(c.lam, c.cx, c.cy, c.h, c.w)
			if got := []float64{float64(d.x1), float64(d.y1), float64(d.x2), float64(d.y2), d.lam}; !slices.Equal(got, c.box) {
				t.Errorf("%s: box and λ %v, torchvision %v", name, got, c.box)
			}
		}
		if err := mx.apply(data, c.n, d); err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for i := range len(c.pixels) {
			switch dtype {
			case transform.Float32:
				got = append(got, uint64(math.Float32bits(asF32(data)[i])))
			case transform.Float16:
				got = append(got, uint64(asU16(data)[i]))
			default:
				got = append(got, uint64(data[i]))
			}
		}
		if len(c.pixels) != len(data)/dtype.Size() {
			t.Fatalf("%s: %d values in mix.txt for %d", name, len(c.pixels), len(data)/dtype.Size())
		}
		for i := range got {
			if got[i] != c.pixels[i] {
				t.Errorf("%s: value %d is %x, torchvision %x", name, i, got[i], c.pixels[i])
				break
			}
		}
		tg := make([]float32, c.n*c.k)
		writeTargets(tg, c.labels, c.k, d)
		for i, v := range tg {
			if uint64(math.Float32bits(v)) != c.targets[i] {
				t.Errorf("%s: target %d is %g, torchvision %g", name, i, v, math.Float32frombits(uint32(c.targets[i])))
				break
			}
		}
	}
}

// mixSpec is spec's recipe with m, over the synthetic source's classes
// where m has none.
func mixSpec(t *testing.T, src source.Source, workers int, m Mix) Spec {
	s := spec(t, src, workers)
	if m.Classes == 0 {
		m.Classes = len(src.Info().Classes)
	}
	s.Mix = &m
	return s
}

// batchHash hashes a batch's pixels, labels and targets.
func batchHash(t *testing.T, b *Batch) uint64 {
	t.Helper()
	v, ok := b.Field(fields.Targets)
	if !ok {
		t.Fatal("a mixed batch has no targets")
	}
	h := xxhash.New()
	h.Write(b.Data)
	h.Write(v.Data)
	fmt.Fprint(h, b.Labels)
	return h.Sum64()
}

// epochHashes returns the batch hashes of epoch n from batch first on.
func epochHashes(t *testing.T, e *Engine, n, first int) []uint64 {
	t.Helper()
	x, err := e.EpochFrom(context.Background(), n, first)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var hs []uint64
	for {
		b, err := x.Next()
		if errors.Is(err, io.EOF) {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, batchHash(t, b))
		b.Release()
	}
}

// TestMixIndependentOfWorkers: with both stages, every batch's pixels
// and targets are the same for 1 and 8 workers, and an epoch resumed at
// batch 5 gives the batches the whole epoch gave from there; the mixing
// changes the stream.
func TestMixIndependentOfWorkers(t *testing.T) {
	src := synthetic(t, 730)
	m := Mix{MixUp: &MixOp{Alpha: 0.2, P: 0.8}, CutMix: &MixOp{Alpha: 1, P: 0.8}}
	var want [2][]uint64
	for _, w := range []int{1, 8} {
		e := newEngine(t, mixSpec(t, src, w, m))
		for n := range 2 {
			got := epochHashes(t, e, n, 0)
			if want[n] == nil {
				want[n] = got
			} else if !slices.Equal(got, want[n]) {
				t.Fatalf("workers=%d epoch %d: %x, want %x", w, n, got, want[n])
			}
		}
		if got := epochHashes(t, e, 1, 5); !slices.Equal(got, want[1][5:]) {
			t.Errorf("workers=%d: epoch 1 resumed at batch 5: %x, want %x", w, got, want[1][5:])
		}
	}
	plain := sums(t, newEngine(t, spec(t, src, 2)), 1)
	mixed := sums(t, newEngine(t, mixSpec(t, src, 2, m)), 1)
	if plain[0] == mixed[0] {
		t.Error("mixing left the stream as it was")
	}
}

// TestMixBatches: the engine mixes each batch after it is complete, with
// the draw of its key (seed, epoch, batch index): MixUp's pixels are the
// blend of the unmixed batch and that batch rolled by one, its targets
// λ·onehot(y) + (1−λ)·onehot(y rolled); p=0 leaves every pixel and gives
// one-hot targets. A skipped record is left out before mixing, so sample
// 0 mixes with the batch's last sample that was kept.
func TestMixBatches(t *testing.T) {
	src := failing{Source: synthetic(t, 230), at: 17, err: &source.RecordError{File: "x", Index: 17, Err: errors.New("bad")}}
	base := spec(t, src, 3)
	base.OnError = Skip
	plain := newEngine(t, base)
	for _, p := range []float64{1, 0} {
		s := base
		s.Mix = &Mix{MixUp: &MixOp{Alpha: 0.4, P: p}, Classes: 10}
		mixed := newEngine(t, s)
		x0, err := plain.Epoch(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		x1, err := mixed.Epoch(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		sawMix := false
		for bi := 0; ; bi++ {
			b0, err0 := x0.Next()
			b1, err1 := x1.Next()
			if errors.Is(err0, io.EOF) && errors.Is(err1, io.EOF) {
				break
			}
			if err0 != nil || err1 != nil {
				t.Fatal(err0, err1)
			}
			d := s.Mix.draw(s.Seed, 1, b1.Index, 32, 32)
			if p == 0 && d.mixed {
				t.Fatal("p=0 drew a mix")
			}
			sawMix = sawMix || d.mixed
			want := slices.Clone(b0.Data)
			if d.mixed {
				if err := newMixer(s.Mix, s.Host).apply(want, b0.N, d); err != nil {
					t.Fatal(err)
				}
			}
			if b0.N != b1.N || !slices.Equal(b1.Data, want) || !slices.Equal(b0.Labels, b1.Labels) {
				t.Fatalf("p=%g batch %d (%d samples): pixels are not the unmixed batch's mixup with λ=%g", p, bi, b1.N, d.lam)
			}
			v, _ := b1.Field(fields.Targets)
			tg, _ := v.Float32()
			for i, y := range b1.Labels {
				row := tg[i*10 : (i+1)*10]
				prev := b1.Labels[(i+b1.N-1)%b1.N]
				for c, got := range row {
					var w float32
					if d.mixed && c == int(prev) {
						w = float32(1 - d.lam)
					}
					if c == int(y) {
						w += float32(d.lam)
					}
					if got != w {
						t.Fatalf("p=%g batch %d sample %d: targets %v, labels %d and %d, λ=%g", p, bi, i, row, y, prev, d.lam)
					}
				}
			}
			b0.Release()
			b1.Release()
		}
		x0.Close()
		x1.Close()
		if p == 1 && !sawMix {
			t.Error("p=1 mixed nothing")
		}
		if _, n := mixed.Skipped(); n != 1 {
			t.Errorf("%d skipped, want 1", n)
		}
	}
}

// TestCutMixDraws: CutMix's box stays in the image and its λ is one less
// the box's share, and with both stages each is chosen about half the
// time.
func TestCutMixDraws(t *testing.T) {
	m := Mix{MixUp: &MixOp{Alpha: 1, P: 1}, CutMix: &MixOp{Alpha: 1, P: 1}, Classes: 3}
	cuts := 0
	const n = 2000
	for b := range n {
		d := m.draw(3, 2, b, 24, 40)
		if !d.cut {
			continue
		}
		cuts++
		if d.x1 < 0 || d.y1 < 0 || d.x2 > 40 || d.y2 > 24 || d.x1 > d.x2 || d.y1 > d.y2 {
			t.Fatalf("batch %d: box %d,%d–%d,%d outside 40x24", b, d.x1, d.y1, d.x2, d.y2)
		}
		if want := 1 - float64((d.x2-d.x1)*(d.y2-d.y1))/(40*24); d.lam != want {
			t.Fatalf("batch %d: λ %g, want %g", b, d.lam, want)
		}
	}
	if cuts < n/2-150 || cuts > n/2+150 {
		t.Errorf("CutMix chosen for %d of %d batches", cuts, n)
	}
}

// TestMixRefusals: no classes, a label beyond them, and bad settings are
// clear errors.
func TestMixRefusals(t *testing.T) {
	src := synthetic(t, 100)
	s := mixSpec(t, src, 2, Mix{MixUp: &MixOp{Alpha: 1, P: 1}, Classes: -1})
	s.Mix.Classes = 0
	if _, err := New(s); err == nil || !strings.Contains(err.Error(), "num_classes=") {
		t.Errorf("0 classes: %v", err)
	}
	s.Mix = &Mix{CutMix: &MixOp{Alpha: 0, P: 1}, Classes: 10}
	if _, err := New(s); err == nil || !strings.Contains(err.Error(), "alpha > 0") {
		t.Errorf("alpha=0: %v", err)
	}
	s.Mix = &Mix{CutMix: &MixOp{Alpha: 1, P: 1}, Classes: 3}
	e := newEngine(t, s)
	x, err := e.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Next()
	if err == nil || !strings.Contains(err.Error(), "mixup and cutmix make targets over 3 classes") {
		t.Errorf("labels past 3 classes: %v", err)
	}
	x.Close()
}

// TestMixDevices: each device's slice carries its rows of the targets.
func TestMixDevices(t *testing.T) {
	s := mixSpec(t, synthetic(t, 200), 2, Mix{MixUp: &MixOp{Alpha: 1, P: 1}})
	s.Devices = &Devices{CPU: 2, Depth: 2}
	e := newEngine(t, s)
	want := newEngine(t, mixSpec(t, synthetic(t, 200), 2, Mix{MixUp: &MixOp{Alpha: 1, P: 1}}))
	xh, err := want.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer xh.Close()
	x, err := e.DeviceEpoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for {
		hb, err := xh.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		v, _ := hb.Field(fields.Targets)
		tg, _ := v.Float32()
		per := hb.N / 2
		for d := range 2 {
			db, err := x.Next(d)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(db.Targets, tg[d*per*10:(d+1)*per*10]) || !slices.Equal(db.Data(), hb.Data[d*per*s.Host.SampleBytes():(d+1)*per*s.Host.SampleBytes()]) {
				t.Fatalf("batch %d device %d: not the host batch's slice", hb.Index, d)
			}
			db.Release()
		}
		hb.Release()
	}
}

// TestMixParallel: a batch over mixSerialBytes, mixed in parts on several
// goroutines, comes out as mixed on one, for MixUp and CutMix, in float32
// NCHW and uint8 NHWC.
func TestMixParallel(t *testing.T) {
	for _, dt := range []transform.DType{transform.Float32, transform.Uint8} {
		layout := transform.NCHW
		if dt == transform.Uint8 {
			layout = transform.NHWC
		}
		tw, err := transform.ToTensor(layout, dt, nil, transform.Shape{C: 3, H: 100, W: 90})
		if err != nil {
			t.Fatal(err)
		}
		n := 2*mixSerialBytes/tw.SampleBytes() + 7
		in := make([]byte, n*tw.SampleBytes())
		r := transform.NewRand(1, 2, 3)
		for i := range in {
			in[i] = byte(r.Uint64() >> 58) // small values: valid float32s
		}
		for _, d := range []mixDraw{{mixed: true, lam: 0.35}, {mixed: true, cut: true, x1: 13, y1: 7, x2: 80, y2: 71}} {
			var out [2][]byte
			for i, parts := range []int{1, 4} {
				mx := newMixer(&Mix{MixUp: &MixOp{Alpha: 1, P: 1}, Classes: 2}, tw)
				mx.parts = parts
				out[i] = slices.Clone(in)
				if err := mx.apply(out[i], n, d); err != nil {
					t.Fatal(err)
				}
				mx.pool.StopAndWait()
			}
			if !slices.Equal(out[0], out[1]) || slices.Equal(out[0], in) {
				t.Errorf("%s %s cut=%v: parts differ from one goroutine's mixing (or nothing mixed)", dt, layout, d.cut)
			}
		}
	}
}

// TestBlendKernel: the AVX2 blend gives the Go loop's bits, for lengths
// around its steps of 8 and 32 (the Go loop finishes the tail).
func TestBlendKernel(t *testing.T) {
	if !blendKernel {
		t.Skip("no AVX2 kernel in this build or on this CPU")
	}
	r := transform.NewRand(5, 0, 0)
	for _, n := range []int{8, 9, 31, 32, 33, 64, 100, 1003} {
		prev, cur := make([]float32, n), make([]float32, n)
		for i := range n {
			prev[i] = float32(normalRand(&r) * 3)
			cur[i] = float32(normalRand(&r) * 3)
		}
		want := slices.Clone(cur)
		for j := range want {
			want[j] = float32(prev[j]*0.7) + float32(want[j]*0.3)
		}
		blend32(cur, prev, 0.7, 0.3)
		for j := range cur {
			if math.Float32bits(cur[j]) != math.Float32bits(want[j]) {
				t.Fatalf("n=%d: value %d is %g, the Go loop's %g", n, j, cur[j], want[j])
			}
		}
	}
}

// BenchmarkMix times one batch's mixing as Next does it, for a CIFAR
// batch and an ImageNet-sized one of 256 float32 samples, on Next's
// goroutine alone (one) and as Next splits it (split: the same for CIFAR,
// which is under mixSerialBytes).
func BenchmarkMix(b *testing.B) {
	for _, c := range []struct {
		name string
		sh   transform.Shape
	}{{"cifar", transform.Shape{C: 3, H: 32, W: 32}}, {"imagenet", transform.Shape{C: 3, H: 224, W: 224}}} {
		tw, err := transform.ToTensor(transform.NCHW, transform.Float32, nil, c.sh)
		if err != nil {
			b.Fatal(err)
		}
		const n = 256
		data := make([]byte, n*tw.SampleBytes())
		for _, op := range []string{"mixup", "cutmix"} {
			for _, split := range []bool{false, true} {
				mx := newMixer(&Mix{MixUp: &MixOp{Alpha: 1, P: 1}, Classes: 1000}, tw)
				name := c.name + "/" + op + "/one"
				if split {
					name = c.name + "/" + op + "/split"
				} else {
					mx.parts = 1
				}
				d := mixDraw{mixed: true, lam: 0.3}
				if op == "cutmix" {
					d.cut = true
					d.x1, d.y1, d.x2, d.y2, d.lam = cutBox(0.5, c.sh.W/2, c.sh.H/2, c.sh.H, c.sh.W)
				}
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(len(data)))
					b.ReportAllocs()
					for b.Loop() {
						if err := mx.apply(data, n, d); err != nil {
							b.Fatal(err)
						}
					}
				})
				mx.pool.StopAndWait()
			}
		}
	}
}
