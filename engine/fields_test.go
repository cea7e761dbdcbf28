package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"image"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// withFields is a synthetic source whose samples carry multi-labels,
// tokens and a tensor made from their index; sample bad (when ≥ 0) has
// more tokens than max_tokens, and sample broken fails to read.
type withFields struct {
	source.Source
	bad, broken int
}

var testSchema = &fields.Schema{Fields: []fields.Field{
	{Kind: fields.Image}, {Kind: fields.Label},
	{Kind: fields.Labels, Classes: 5},
	{Kind: fields.Tokens, Max: 8},
	{Kind: fields.Tensor, DType: fields.Float32, Shape: []int{3}},
}}

// want is sample i's labels, tokens and tensor.
func (withFields) want(i int) (labels []int64, tokens []int64, tensor []float32) {
	labels = []int64{int64(i % 5)}
	if i%3 == 0 {
		labels = append(labels, int64((i+2)%5))
	}
	for t := range i % 9 {
		tokens = append(tokens, int64(100*i+t))
	}
	return labels, tokens, []float32{float32(i), float32(i) / 2, -float32(i)}
}

func (s withFields) Read(i int, rec *source.Record) error {
	if i == s.broken {
		return &source.RecordError{File: "test", Index: i, Err: source.ErrFormat}
	}
	if err := s.Source.Read(i, rec); err != nil {
		return err
	}
	labels, tokens, tensor := s.want(i)
	if i == s.bad {
		tokens = make([]int64, 9)
	}
	rec.Fields = append(rec.Fields[:0], make([]fields.Value, 5)...)
	rec.Fields[2].Ints = labels
	rec.Fields[3].Ints = tokens
	raw := make([]byte, 12)
	for k, v := range tensor {
		binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(v))
	}
	rec.Fields[4].Bytes = raw
	return nil
}

func fieldsSpec(t *testing.T, src source.Source, workers int) Spec {
	s := spec(t, src, workers)
	s.Schema = testSchema
	return s
}

// engineOf is New(s), closed when the test ends.
func engineOf(t *testing.T, s Spec) *Engine {
	t.Helper()
	e, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// eachBatch runs epoch n of e, calls f on each of its batches (released
// afterwards), and returns the epoch's checksum.
func eachBatch(t *testing.T, e *Engine, n int, f func(*Batch)) string {
	t.Helper()
	x, err := e.Epoch(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	sum := NewChecksum()
	for b, err := range x.All() {
		if err != nil {
			t.Fatal(err)
		}
		sum.Add(b)
		f(b)
	}
	return sum.String()
}

// TestFieldsInBatches: every field of every sample is in its region, in
// the batch's order, with its count, for any number of workers, and the
// checksum covers them.
func TestFieldsInBatches(t *testing.T) {
	src := withFields{Source: synthetic(t, 230), bad: -1, broken: -1}
	var first string
	for _, w := range []int{1, 3, 8} {
		sum := eachBatch(t, engineOf(t, fieldsSpec(t, src, w)), 0, func(b *Batch) { checkFields(t, src, b) })
		if first == "" {
			first = sum
		} else if sum != first {
			t.Fatalf("workers=%d: checksum %s, want %s", w, sum, first)
		}
	}
}

func checkFields(t *testing.T, src withFields, b *Batch) {
	t.Helper()
	lv, ok := b.Field(fields.Labels)
	if !ok {
		t.Fatal("no labels field")
	}
	hot, err := lv.Float32()
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := b.Field(fields.Tokens)
	toks, err := tv.Int32()
	if err != nil {
		t.Fatal(err)
	}
	xv, _ := b.Field(fields.Tensor)
	vals, err := xv.Float32()
	if err != nil {
		t.Fatal(err)
	}
	if len(hot) != 5*b.N || len(toks) != 8*b.N || len(tv.Counts) != b.N || len(vals) != 3*b.N {
		t.Fatalf("views of %d samples: %d labels, %d tokens, %d counts, %d values", b.N, len(hot), len(toks), len(tv.Counts), len(vals))
	}
	for k, idx := range b.Samples {
		labels, tokens, tensor := src.want(idx)
		want := make([]float32, 5)
		for _, l := range labels {
			want[l] = 1
		}
		if got := hot[5*k : 5*k+5]; !equal(got, want) {
			t.Fatalf("sample %d: labels %v, want %v", idx, got, want)
		}
		if int(tv.Counts[k]) != len(tokens) {
			t.Fatalf("sample %d: %d tokens, want %d", idx, tv.Counts[k], len(tokens))
		}
		for i := range 8 {
			var w int32
			if i < len(tokens) {
				w = int32(tokens[i])
			}
			if toks[8*k+i] != w {
				t.Fatalf("sample %d: tokens %v, want %v padded with zeros", idx, toks[8*k:8*k+8], tokens)
			}
		}
		if got := vals[3*k : 3*k+3]; !equal(got, tensor) {
			t.Fatalf("sample %d: tensor %v, want %v", idx, got, tensor)
		}
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFieldsOfSkippedSamples: a batch closed over skipped records keeps
// each sample's fields beside its image.
func TestFieldsOfSkippedSamples(t *testing.T) {
	src := withFields{Source: synthetic(t, 120), bad: 17, broken: 40}
	s := fieldsSpec(t, src, 3)
	s.OnError = Skip
	e := engineOf(t, s)
	n := 0
	eachBatch(t, e, 0, func(b *Batch) {
		checkFields(t, src, b)
		n += b.N
	})
	if n != 118 {
		t.Fatalf("%d samples, want 118 of 120 (two skipped)", n)
	}
	skipped, _ := e.Skipped()
	if len(skipped) != 2 || !errors.Is(skipped[0], fields.ErrValue) && !errors.Is(skipped[1], fields.ErrValue) {
		t.Fatalf("skipped %v, want sample 17's tokens over max_tokens and sample 40", skipped)
	}
}

// TestFieldValueOverItsBound: a sample whose value does not fit its field
// stops the epoch with a record error saying so.
func TestFieldValueOverItsBound(t *testing.T) {
	e, err := New(fieldsSpec(t, withFields{Source: synthetic(t, 60), bad: 7, broken: -1}, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Run(context.Background(), RunOptions{Epochs: 1})
	var re *source.RecordError
	if !errors.As(err, &re) || re.Index != 7 || !errors.Is(err, fields.ErrValue) || !strings.Contains(err.Error(), "over max_tokens=8") {
		t.Fatalf("err = %v, want sample 7's record error: 9 tokens over max_tokens=8", err)
	}
}

// withMasks is a synthetic source whose 32×32 samples are a grey
// rectangle on black, with a mask of that rectangle in class 1 + i%7,
// and the rectangle as a box.
type withMasks struct{ source.Source }

var maskSchema = &fields.Schema{Fields: []fields.Field{
	{Kind: fields.Image}, {Kind: fields.Mask, DType: fields.Uint8},
	{Kind: fields.Boxes, Max: 4}, {Kind: fields.Classes, Max: 4}, {Kind: fields.Label},
}, MinArea: 1}

func (withMasks) rect(i int) (x0, y0, x1, y1 int) {
	return i % 20, (3 * i) % 18, i%20 + 4 + i%9, (3*i)%18 + 3 + i%11
}

func (s withMasks) Read(i int, rec *source.Record) error {
	if err := s.Source.Read(i, rec); err != nil {
		return err
	}
	m := image.NewGray(image.Rect(0, 0, 32, 32))
	x0, y0, x1, y1 := s.rect(i)
	// The image is the mask's rectangle in grey 200 on black.
	rec.Buf = append(rec.Buf[:0], make([]byte, 3*32*32)...)
	rec.Pix = rec.Buf
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			m.Pix[y*32+x] = uint8(1 + i%7)
			for c := range 3 {
				rec.Pix[(c*32+y)*32+x] = 200
			}
		}
	}
	rec.Fields = append(rec.Fields[:0], make([]fields.Value, 5)...)
	rec.Fields[1].Bytes = m.Pix // a source of pixels gives a mask's values
	rec.Fields[2].Floats = []float32{float32(x0), float32(y0), float32(x1), float32(y1)}
	rec.Fields[3].Ints = []int64{int64(1 + i%7)}
	return nil
}

// TestMasksAndBoxesMoveWithImages: through a zero-padded random crop (a
// reflecting pad would mirror the rectangle into the padding, outside its
// box, as torchvision does) and a flip, the mask's class covers the
// image's rectangle exactly, every pixel of a sample's class in its mask lies inside its moved
// box, the box keeps its class, and the batches are the same for any
// number of workers.
func TestMasksAndBoxesMoveWithImages(t *testing.T) {
	src := withMasks{synthetic(t, 150)}
	var first string
	for _, workers := range []int{1, 4} {
		s := spec(t, src, workers)
		s.Schema = maskSchema
		crop, err := transform.RandomCrop(32, 4, transform.FillZero)
		if err != nil {
			t.Fatal(err)
		}
		s.Ops[0] = crop
		sum := eachBatch(t, engineOf(t, s), 1, func(b *Batch) {
			mv, _ := b.Field(fields.Mask)
			bv, _ := b.Field(fields.Boxes)
			cv, _ := b.Field(fields.Classes)
			boxes, _ := bv.Float32()
			classes, _ := cv.Int64()
			for k, idx := range b.Samples {
				class := uint8(1 + idx%7)
				mask := mv.Data[k*32*32 : (k+1)*32*32]
				img, _ := b.Float32()
				for p, v := range mask {
					if lit := img[k*3*32*32+p] > 1; lit != (v == class) {
						t.Fatalf("sample %d: pixel %d is %v in the image but class %d in the mask", idx, p, img[k*3*32*32+p], v)
					}
				}
				seen := 0
				for p, v := range mask {
					if v == class {
						seen++
					}
					if v != class && v != 0 {
						t.Fatalf("sample %d: mask pixel %d holds class %d, not %d or 0", idx, p, v, class)
					}
				}
				if seen == 0 {
					if bv.Counts[k] != 0 {
						t.Fatalf("sample %d: its rectangle left the image but its box stayed", idx)
					}
					continue
				}
				if bv.Counts[k] != 1 || classes[4*k] != int64(class) {
					t.Fatalf("sample %d: %d boxes of class %d, want 1 of %d", idx, bv.Counts[k], classes[4*k], class)
				}
				q := boxes[16*k : 16*k+4]
				for p, v := range mask {
					x, y := float32(p%32)+0.5, float32(p/32)+0.5
					if v == class && (x < q[0] || x > q[2] || y < q[1] || y > q[3]) {
						t.Fatalf("sample %d: mask pixel (%v, %v) of its class outside its box %v", idx, x, y, q)
					}
				}
			}
		})
		if first == "" {
			first = sum
		} else if sum != first {
			t.Fatalf("workers=%d: checksum %s, want %s", workers, sum, first)
		}
	}
}

// TestFieldsOnDevices: each device's slice of a batch carries its
// samples' fields, in host memory and copied to the device's.
func TestFieldsOnDevices(t *testing.T) {
	src := withFields{Source: synthetic(t, 200), bad: -1, broken: -1}
	s := fieldsSpec(t, src, 2)
	s.Devices = &Devices{CPU: 2, Depth: 2}
	e, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	x, err := e.DeviceEpoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	n := 0
	// Each device's queue is read in turn, as consumers do: a queue read
	// alone to its end would hold back the others.
	for done := false; !done; {
		for d := range 2 {
			b, err := x.Next(d)
			if err == io.EOF {
				done = true
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			checkFields(t, src, &Batch{N: b.N, Samples: b.Samples, Labels: b.Labels, Fields: b.Fields, Regions: b.Regions})
			if dev := b.FieldBuffer.Host(); !bytes.Equal(dev[:len(b.Fields)], b.Fields) {
				t.Fatalf("device %d: the fields in device memory are not the slice's", d)
			}
			n += b.N
			b.Release()
		}
	}
	if n != 200 {
		t.Fatalf("%d samples on the devices, want 200", n)
	}
}
