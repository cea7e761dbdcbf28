package engine

// Batch-level mixing: MixUp and CutMix, as torchvision's
// transforms.v2.MixUp and CutMix, with the soft targets they make.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/alitto/pond/v2"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/transform"
)

// Mix mixes every batch's samples with their neighbours and gives each
// sample soft targets (the mixup and cutmix stages). Sample i is mixed
// with sample i-1 of the batch, and sample 0 with the batch's last (the
// batch rolled by one); its targets are λ·onehot(y_i) + (1−λ)·onehot(y_i−1).
// A batch that is not mixed (see MixOp.P) keeps its pixels and gets
// one-hot targets.
type Mix struct {
	// MixUp and CutMix are the two stages' settings, nil for one not
	// given. With both, each batch uses one of them, chosen uniformly at
	// random (torchvision's RandomChoice([MixUp, CutMix]) of its reference
	// recipes).
	MixUp, CutMix *MixOp
	// Classes is the length of a sample's targets (≥ 1): every label is
	// below it.
	Classes int
}

// MixOp is one mixing stage's settings.
type MixOp struct {
	// Alpha is the parameter of the Beta(α, α) distribution λ is drawn
	// from (> 0): MixUp blends λ of the sample with 1−λ of its
	// neighbour; CutMix pastes a box of sqrt(1−λ) of the image's width
	// and height from the neighbour, centred uniformly and clipped to the
	// image, and takes λ = 1 − the box's share of the image.
	Alpha float64
	// P is the probability that a batch is mixed (0 ≤ P ≤ 1).
	P float64
}

// maxMixClasses bounds Mix.Classes, as source.MaxClasses bounds labels.
const maxMixClasses = 1 << 20

// check reports the first setting of m that cannot be used.
func (m *Mix) check() error {
	if m.MixUp == nil && m.CutMix == nil {
		return errors.New("engine: a Mix needs MixUp, CutMix or both")
	}
	if m.Classes < 1 || m.Classes > maxMixClasses {
		return fmt.Errorf("engine: mixup and cutmix make targets over %d classes: want 1 to %d (num_classes=, or a source that names its classes)", m.Classes, maxMixClasses)
	}
	for _, op := range []*MixOp{m.MixUp, m.CutMix} {
		if op != nil && (!(op.Alpha > 0) || math.IsInf(op.Alpha, 0) || !(op.P >= 0 && op.P <= 1)) {
			return fmt.Errorf("engine: mixing with alpha=%g p=%g: want alpha > 0 and 0 ≤ p ≤ 1", op.Alpha, op.P)
		}
	}
	return nil
}

// mixDraw is what one batch's mixing drew.
type mixDraw struct {
	mixed, cut bool // mixed at all; by CutMix (else by MixUp)
	// lam is the share of each sample's own label in its targets:
	// MixUp's λ, or 1 − CutMix's box area over the image's.
	lam float64
	// x1, y1, x2, y2 are CutMix's box, pixels [x1, x2) × [y1, y2).
	x1, y1, x2, y2 int
}

// mixRand is the generator of batch b of an epoch. It is NewRand's of
// sample −1−b: every sample index is ≥ 0, and for a fixed seed and epoch
// NewRand's starting point is a bijection of the sample, so a batch's
// draws never start where a sample's do. The key is the batch's place in
// the plan, so worker counts, devices and resuming change nothing.
func mixRand(seed uint64, epoch, b int) transform.Rand {
	return transform.NewRand(seed, epoch, -1-int64(b))
}

// draw draws batch b's mixing for h×w images, in this order: the stage,
// where both are given (Intn(2): 0 MixUp, 1 CutMix); whether to mix
// (Float64 < P); λ (betaRand); CutMix's box centre (Intn(w), then Intn(h)).
func (m *Mix) draw(seed uint64, epoch, b, h, w int) mixDraw {
	r := mixRand(seed, epoch, b)
	op, cut := m.MixUp, false
	switch {
	case m.MixUp == nil:
		op, cut = m.CutMix, true
	case m.CutMix != nil && r.Intn(2) == 1:
		op, cut = m.CutMix, true
	}
	d := mixDraw{cut: cut, mixed: r.Float64() < op.P, lam: 1}
	if !d.mixed {
		return d
	}
	d.lam = betaRand(&r, op.Alpha)
	if cut {
		d.x1, d.y1, d.x2, d.y2, d.lam = cutBox(d.lam, r.Intn(w), r.Intn(h), h, w)
	}
	return d
}

// cutBox is torchvision's CutMix box for λ around centre (cx, cy) of an
// h×w image: half-sides int(0.5·sqrt(1−λ)·w) and int(0.5·sqrt(1−λ)·h),
// clipped to the image, and the λ of the targets, 1 − its area share.
func cutBox(lam float64, cx, cy, h, w int) (x1, y1, x2, y2 int, adj float64) {
	r := 0.5 * math.Sqrt(1-lam)
	rw, rh := int(r*float64(w)), int(r*float64(h))
	x1, y1 = max(cx-rw, 0), max(cy-rh, 0)
	x2, y2 = min(cx+rw, w), min(cy+rh, h)
	return x1, y1, x2, y2, 1 - float64((x2-x1)*(y2-y1))/float64(w*h)
}

// betaRand draws from Beta(a, a) as X/(X+Y) of two Gamma(a) draws, taken
// in logs so that the tiny values of a small a neither underflow nor make
// 0/0.
func betaRand(r *transform.Rand, a float64) float64 {
	lx := logGammaRand(r, a)
	ly := logGammaRand(r, a)
	return 1 / (1 + math.Exp(ly-lx))
}

// logGammaRand draws log X for X ~ Gamma(a, 1) by Marsaglia and Tsang's
// method (ACM TOMS 26(3), 2000); for a < 1 it draws Gamma(a+1) and
// multiplies by U^(1/a), their boost. Each try is accepted with
// probability over 0.95.
func logGammaRand(r *transform.Rand, a float64) float64 {
	boost := 0.0
	if a < 1 {
		boost = math.Log(1-r.Float64()) / a // U in (0, 1]
		a++
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := normalRand(r)
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return math.Log(d*v) + boost
		}
	}
}

// normalRand draws from N(0, 1) by Box and Muller's method, from two
// uniforms.
func normalRand(r *transform.Rand) float64 {
	u := 1 - r.Float64() // (0, 1]
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*r.Float64())
}

// addTargets lays out m's targets after l's regions: float32 [m.Classes]
// per sample.
func (l fieldLayout) addTargets(m *Mix, rows int) fieldLayout {
	if m == nil {
		return l
	}
	l.regions = append(l.regions, fields.Region{Kind: fields.Targets, DType: fields.Float32, Shape: []int{m.Classes}, Offset: l.bytes, Counts: -1})
	l.bytes = alignSlab(l.bytes + rows*4*m.Classes)
	return l
}

// mixSerialBytes is the largest batch mixed on Next's goroutine alone: a
// CIFAR batch of 256 float32 images (3 MiB) mixes in well under a
// millisecond, but an ImageNet one (154 MB) takes about 45 ms on one core,
// so a larger batch is split among goroutines, one per mixSerialBytes up
// to one per core.
const mixSerialBytes = 8 << 20

// mixer mixes batches of one engine. last holds a copy of the batch's last
// sample, which sample 0 mixes with after the last has been overwritten.
// pool runs a large batch's parts; its goroutines live while they mix.
type mixer struct {
	m     Mix
	t     *transform.TensorWriter
	sb    int
	last  []byte
	elems int // values per sample
	pool  pond.Pool
	parts int // the most parts a batch is split into
}

func newMixer(m *Mix, t *transform.TensorWriter) *mixer {
	sb := t.SampleBytes()
	parts := runtime.GOMAXPROCS(0)
	return &mixer{m: *m, t: t, sb: sb, last: make([]byte, sb), elems: t.Shape.Len(), pool: pond.NewPool(parts), parts: parts}
}

// mix mixes the pixels of batch b in place and writes its targets; b is
// final (compacted). A label outside the classes is an error, and leaves
// the batch as it was.
func (x *Epoch) mix(b *Batch) error {
	mx := x.e.mix
	if mx == nil || b.N == 0 {
		return nil
	}
	k := mx.m.Classes
	for i, y := range b.Labels {
		if y < 0 || int(y) >= k {
			return fmt.Errorf("pipe: sample %d (batch %d of epoch %d) has label %d: mixup and cutmix make targets over %d classes (num_classes=)",
				b.Samples[i], b.Index, b.Epoch, y, k)
		}
	}
	sh := mx.t.Shape
	d := mx.m.draw(x.e.s.Seed, b.Epoch, b.Index, sh.H, sh.W)
	if d.mixed {
		if err := mx.apply(b.Data, b.N, d); err != nil {
			return err
		}
	}
	v, _ := b.Field(fields.Targets)
	t, _ := v.Float32()
	writeTargets(t, b.Labels, k, d)
	return nil
}

// apply mixes the n samples in data as d says: MixUp over the samples'
// values, CutMix over the box's rows, each split into parts that share no
// byte.
func (mx *mixer) apply(data []byte, n int, d mixDraw) error {
	if d.cut && (d.x2 <= d.x1 || d.y2 <= d.y1) {
		return nil
	}
	copy(mx.last, data[(n-1)*mx.sb:n*mx.sb])
	size := mx.elems
	if d.cut {
		size = d.y2 - d.y1
	}
	parts := min(mx.parts, size, n*mx.sb/mixSerialBytes)
	if parts <= 1 {
		mx.part(data, n, d, 0, size)
		return nil
	}
	g := mx.pool.NewGroup()
	for p := range parts {
		lo, hi := p*size/parts, (p+1)*size/parts
		g.Submit(func() { mx.part(data, n, d, lo, hi) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("pipe: mixing batch: %w", err)
	}
	return nil
}

// part mixes part [lo, hi) of the n samples in data: MixUp's values, or
// CutMix's box rows from its top.
func (mx *mixer) part(data []byte, n int, d mixDraw, lo, hi int) {
	if d.cut {
		mx.cutmix(data, n, d, d.y1+lo, d.y1+hi)
	} else {
		mx.mixup(data, n, d.lam, lo, hi)
	}
}

// writeTargets writes the [N, k] targets of labels, as torchvision's
// one_hot(y).roll(1, 0).mul_(1 − λ).add_(one_hot(y).mul(λ)) in float32.
func writeTargets(t []float32, labels []int32, k int, d mixDraw) {
	clear(t)
	n := len(labels)
	for i, y := range labels {
		row := t[i*k : (i+1)*k]
		if !d.mixed {
			row[y] = 1
			continue
		}
		row[labels[(i+n-1)%n]] = float32(1 - d.lam)
		row[y] += float32(d.lam)
	}
}

// mixup blends values [lo, hi) of sample i of the n in data with sample
// i−1's (mx.last's, for 0): torchvision's x.roll(1, 0).mul_(1 −
// λ).add_(x.mul(λ)), each product rounded to the dtype, then their sum;
// float16 computes in float32 with λ and 1 − λ rounded to float16 and
// rounds each step to float16, as PyTorch (1.13) does on the CPU; uint8
// blends in float32 and rounds to nearest (halves up).
func (mx *mixer) mixup(data []byte, n int, lam float64, lo, hi int) {
	l, m := float32(lam), float32(1-lam)
	e := mx.elems
	switch mx.t.DType {
	case transform.Float32:
		eachPair(asF32(data), asF32(mx.last), n, e, lo, hi, func(cur, prev []float32) { blend32(cur, prev, m, l) })
	case transform.Float16:
		// PyTorch's CPU kernels round the factors to float16 too.
		l, m := transform.Float16To32(transform.Float32To16(l)), transform.Float16To32(transform.Float32To16(m))
		eachPair(asU16(data), asU16(mx.last), n, e, lo, hi, func(cur, prev []uint16) {
			for j, p := range prev {
				a := transform.Float16To32(transform.Float32To16(transform.Float16To32(p) * m))
				b := transform.Float16To32(transform.Float32To16(transform.Float16To32(cur[j]) * l))
				cur[j] = transform.Float32To16(a + b)
			}
		})
	default:
		eachPair(data, mx.last, n, e, lo, hi, func(cur, prev []uint8) {
			for j, p := range prev {
				cur[j] = uint8(float32(float32(p)*m) + float32(float32(cur[j])*l) + 0.5)
			}
		})
	}
}

// eachPair calls blend with values [lo, hi) of each sample i of the n of
// e values in x and the same values of sample i−1 (of last, a copy of the
// batch's last sample, for sample 0), from the last sample to the first,
// so that every sample is blended with its neighbour as it was.
func eachPair[T any](x, last []T, n, e, lo, hi int, blend func(cur, prev []T)) {
	for i := n - 1; i >= 0; i-- {
		prev := last[lo:hi]
		if i > 0 {
			prev = x[(i-1)*e+lo : (i-1)*e+hi]
		}
		blend(x[i*e+lo:i*e+lo+len(prev)], prev)
	}
}

// blend32 sets cur[j] = prev[j]·m + cur[j]·l, each product rounded to
// float32, then the sum: with the AVX2 kernel where it runs, which rounds
// the same.
func blend32(cur, prev []float32, m, l float32) {
	cur = cur[:len(prev)]
	k := 0
	if blendKernel && len(prev) >= 8 {
		k = len(prev) &^ 7
		blend32AVX2(&cur[0], &prev[0], k, m, l)
	}
	for j := k; j < len(prev); j++ {
		cur[j] = float32(prev[j]*m) + float32(cur[j]*l)
	}
}

// cutmix pastes rows [ylo, yhi) of d's box of sample i−1 (mx.last, for 0)
// into sample i, for the n samples in data, in either layout.
func (mx *mixer) cutmix(data []byte, n int, d mixDraw, ylo, yhi int) {
	sh, es := mx.t.Shape, mx.t.DType.Size()
	// paste copies one run of the box's bytes: a row of it in a channel
	// (NCHW), or a row across the channels (NHWC).
	paste := func(cur, prev []byte, from, to int) { copy(cur[from*es:to*es], prev[from*es:to*es]) }
	for i := n - 1; i >= 0; i-- {
		prev := mx.last
		if i > 0 {
			prev = data[(i-1)*mx.sb : i*mx.sb]
		}
		cur := data[i*mx.sb : (i+1)*mx.sb]
		for y := ylo; y < yhi; y++ {
			if mx.t.Layout == transform.NHWC {
				paste(cur, prev, (y*sh.W+d.x1)*sh.C, (y*sh.W+d.x2)*sh.C)
				continue
			}
			for c := range sh.C {
				o := (c*sh.H + y) * sh.W
				paste(cur, prev, o+d.x1, o+d.x2)
			}
		}
	}
}

func asF32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func asU16(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}
