package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
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

// TestFieldsInBatches: every field of every sample is in its region, in
// the batch's order, with its count, for any number of workers, and the
// checksum covers them.
func TestFieldsInBatches(t *testing.T) {
	src := withFields{Source: synthetic(t, 230), bad: -1, broken: -1}
	var first string
	for _, w := range []int{1, 3, 8} {
		e, err := New(fieldsSpec(t, src, w))
		if err != nil {
			t.Fatal(err)
		}
		x, err := e.Epoch(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		sum := NewChecksum()
		for {
			b, err := x.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sum.Add(b)
			checkFields(t, src, b)
			b.Release()
		}
		x.Close()
		e.Close()
		if first == "" {
			first = sum.String()
		} else if sum.String() != first {
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
	e, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	x, err := e.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	n := 0
	for {
		b, err := x.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		checkFields(t, src, b)
		n += b.N
		b.Release()
	}
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
