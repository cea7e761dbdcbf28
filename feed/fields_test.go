//go:build linux

package feed

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// withFields is a synthetic source whose samples carry multi-labels,
// tokens and a tensor made from their index (as engine's test source
// does): the tensor is (i, i/2, -i), so a loader can tell which sample a
// row is and check the rest against wantFields.
type withFields struct {
	source.Source
	schema *fields.Schema
}

// fieldsSchemas are the schemas the tests serve: every field that pipe
// fills today, and the same without the int label.
var fieldsSchemas = map[string]*fields.Schema{
	"all": {Fields: []fields.Field{
		{Kind: fields.Image}, {Kind: fields.Label},
		{Kind: fields.Labels, Classes: 5},
		{Kind: fields.Tokens, Max: 8},
		{Kind: fields.Tensor, DType: fields.Float32, Shape: []int{3}},
	}},
	"nolabel": {Fields: []fields.Field{
		{Kind: fields.Image},
		{Kind: fields.Tokens, Max: 8},
		{Kind: fields.Tensor, DType: fields.Float32, Shape: []int{3}},
		{Kind: fields.Labels, Classes: 5},
	}},
}

// wantFields is sample i's labels, tokens and tensor.
func wantFields(i int) (labels []int64, tokens []int64, tensor []float32) {
	labels = []int64{int64(i % 5)}
	if i%3 == 0 {
		labels = append(labels, int64((i+2)%5))
	}
	for t := range i % 9 {
		tokens = append(tokens, int64(100*i+t))
	}
	return labels, tokens, []float32{float32(i), float32(i) / 2, -float32(i)}
}

func (s withFields) Info() source.Info {
	info := s.Source.Info()
	info.Fields = s.schema
	return info
}

func (s withFields) Read(i int, rec *source.Record) error {
	if err := s.Source.Read(i, rec); err != nil {
		return err
	}
	labels, tokens, tensor := wantFields(i)
	rec.Fields = append(rec.Fields[:0], make([]fields.Value, len(s.schema.Fields))...)
	for k, f := range s.schema.Fields {
		switch f.Kind {
		case fields.Labels:
			rec.Fields[k].Ints = labels
		case fields.Tokens:
			rec.Fields[k].Ints = tokens
		case fields.Tensor:
			for _, v := range tensor {
				rec.Fields[k].Bytes = binary.LittleEndian.AppendUint32(rec.Fields[k].Bytes, math.Float32bits(v))
			}
		}
	}
	return nil
}

// fieldsPipeline is a small recipe with random crops and flips over n
// samples of withFields of the named schema.
func fieldsPipeline(schema string, n, batch, workers int) (*pipe.Pipeline, error) {
	sc := fieldsSchemas[schema]
	if sc == nil {
		return nil, fmt.Errorf("no test schema %q", schema)
	}
	syn, err := source.NewSynthetic(n, source.Train, 1)
	if err != nil {
		return nil, err
	}
	crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	return pipe.New(pipe.Source(withFields{syn, sc}), pipe.Fields(sc), pipe.Shuffle(5), pipe.Map(crop), pipe.Map(flip),
		pipe.Options(pipe.Settings{Workers: workers}), pipe.Batching(batch, false), pipe.ToTensor(transform.NCHW, transform.Uint8))
}

// regions reads the regions of the hello's fields h as package fields has
// them.
func regions(t *testing.T, h *Fields) []fields.Region {
	t.Helper()
	var rs []fields.Region
	for _, r := range h.Regions {
		k, err := fields.ParseKind(r.Kind)
		if err != nil {
			t.Fatal(err)
		}
		d, err := fields.ParseDType(r.DType)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, fields.Region{Kind: k, DType: d, Shape: r.Shape, Offset: r.Offset, Counts: r.Counts})
	}
	return rs
}

// fieldsBatch is the batch g announces, as a loader reads it with the
// hello's description of the fields alone: its images, labels and fields.
func (c *client) fieldsBatch(g got) *pipe.Batch {
	c.t.Helper()
	data, labels := c.batch(g)
	at := c.hello.Ring.Offset + int64(g.slab)*c.hello.Ring.Stride
	return &pipe.Batch{N: g.n, Data: data, Labels: labels, Regions: regions(c.t, c.hello.Fields),
		Fields: c.mem[at+int64(c.hello.Fields.Offset) : at+c.hello.Ring.Labels]}
}

// checkServedFields checks every sample of b against wantFields, finding
// its index in its tensor.
func checkServedFields(t *testing.T, b *pipe.Batch) {
	t.Helper()
	lv, _ := b.Field(fields.Labels)
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
	for k := range b.N {
		i := int(vals[3*k])
		labels, tokens, tensor := wantFields(i)
		if !slices.Equal(vals[3*k:3*k+3], tensor) {
			t.Fatalf("row %d: tensor %v, want %v", k, vals[3*k:3*k+3], tensor)
		}
		want := make([]float32, 5)
		for _, l := range labels {
			want[l] = 1
		}
		if !slices.Equal(hot[5*k:5*k+5], want) {
			t.Fatalf("sample %d: labels %v, want %v", i, hot[5*k:5*k+5], want)
		}
		padded := make([]int32, 8)
		for j, v := range tokens {
			padded[j] = int32(v)
		}
		if int(tv.Counts[k]) != len(tokens) || !slices.Equal(toks[8*k:8*k+8], padded) {
			t.Fatalf("sample %d: %d tokens %v, want %d: %v", i, tv.Counts[k], toks[8*k:8*k+8], len(tokens), padded)
		}
	}
}

// TestFieldsServed: a pipeline with a fields stage is served with its
// fields in every slab, between the images and the labels, where the
// hello says: what a loader reads by the hello alone (images, labels and
// every field with its counts) hashes as pipe's own stream does, and holds
// each sample's values. Another schema is another stream (its
// fingerprint), and a pipeline without fields has none in its hello.
func TestFieldsServed(t *testing.T) {
	for _, schema := range []string{"all", "nolabel"} {
		own, err := fieldsPipeline(schema, 300, 32, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { own.Close() })
		want := ownSums(t, own, 2)
		p, err := fieldsPipeline(schema, 300, 32, 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		c, done := serve(t, p)
		h := c.hello.Fields
		names := []string{"image", "label", "labels", "tokens", "tensor"}
		if schema == "nolabel" {
			names = []string{"image", "tokens", "tensor", "labels"}
		}
		if h == nil || !slices.Equal(h.Names, names) || h.Schema != fieldsSchemas[schema].String() || len(h.Regions) != 3 {
			t.Fatalf("%s: hello's fields %+v", schema, h)
		}
		end := int64(h.Offset)
		for _, r := range regions(t, h) {
			end = max(end, int64(h.Offset+r.Offset+32*r.SampleBytes()), int64(h.Offset+r.Counts+4*32))
		}
		if h.Offset < 32*c.hello.Ring.SampleBytes || end > c.hello.Ring.Labels {
			t.Fatalf("%s: fields from %d to %d in slabs whose images end at %d and labels start at %d",
				schema, h.Offset, end, 32*c.hello.Ring.SampleBytes, c.hello.Ring.Labels)
		}
		for e := range 2 {
			sum := pipe.NewChecksum()
			c.start(e, 0)
			batches := 0
			for g := c.next(); g.typ != msgEnd; g = c.next() {
				if g.typ == msgError {
					t.Fatalf("pipe: %s", g.text)
				}
				b := c.fieldsBatch(g)
				checkServedFields(t, b)
				sum.Add(b)
				batches++
				c.release(g)
			}
			if batches != 10 || sum.String() != want[e] {
				t.Errorf("%s, epoch %d: %d batches, checksum %s; pipe's own %s", schema, e, batches, sum, want[e])
			}
		}
		c.conn.Close()
		ended(t, done, schema)
	}
	a, _ := fieldsPipeline("all", 300, 32, 1)
	b, _ := fieldsPipeline("nolabel", 300, 32, 1)
	defer a.Close()
	defer b.Close()
	if Fingerprint(a) == Fingerprint(b) {
		t.Errorf("two schemas, one fingerprint %s: a state of one would resume the other", Fingerprint(a))
	}
	c, done := serve(t, pipeline(t, 100, 10, 1))
	if c.hello.Fields != nil || c.hello.Ring.Labels != 10*3*32*32*4 {
		t.Errorf("without fields: hello's fields %+v, labels at %d", c.hello.Fields, c.hello.Ring.Labels)
	}
	c.conn.Close()
	ended(t, done, "without fields")
}
