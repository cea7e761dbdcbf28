package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"testing"

	"github.com/pipefeed/pipe/sharding"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// pngSource is a source of PNGs held in memory.
type pngSource [][]byte

func (s pngSource) Len() int { return len(s) }
func (s pngSource) Info() source.Info {
	return source.Info{Name: "pngs", Identity: "pngs", Encoded: true, Classes: []string{"a"}}
}
func (s pngSource) Read(i int, rec *source.Record) error {
	*rec = source.Record{Enc: s[i], Path: fmt.Sprintf("%d.png", i)}
	return nil
}
func (s pngSource) Close() error { return nil }

// TestMaxPixelsIsACorruptRecord: an image over the spec's MaxPixels is a
// corrupt record, naming its file: on_error=skip leaves it out and lists
// it, on_error=fail stops on it.
func TestMaxPixelsIsACorruptRecord(t *testing.T) {
	encode := func(w, h int) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	src := make(pngSource, 20)
	for i := range src {
		src[i] = encode(10, 10)
	}
	src[7] = encode(40, 30) // 1200 pixels
	crop, err := transform.CenterCrop(8)
	if err != nil {
		t.Fatal(err)
	}
	shape := transform.Shape{C: 3, H: 8, W: 8}
	tensor, err := transform.ToTensor(transform.NCHW, transform.Uint8, nil, shape)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sharding.New(src.Len())
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []Policy{Skip, Fail} {
		e, err := New(Spec{Source: src, Ops: []transform.Op{crop}, MaxPixels: 1000, Host: tensor, Out: tensor,
			Plan: plan, Batch: 5, Workers: 2, OnError: policy})
		if err != nil {
			t.Fatal(err)
		}
		stats, err := e.Run(context.Background(), RunOptions{})
		skipped, n := e.Skipped()
		e.Close()
		switch {
		case policy == Fail:
			var re *source.RecordError
			if !errors.As(err, &re) || re.File != "7.png" || !errors.Is(err, transform.ErrTooLarge) {
				t.Errorf("on_error=fail: %v, want 7.png's ErrTooLarge", err)
			}
		case err != nil:
			t.Fatalf("on_error=skip: %v", err)
		case n != 1 || skipped[0].File != "7.png" || !errors.Is(skipped[0], transform.ErrTooLarge) || stats[0].Skipped != 1:
			t.Errorf("on_error=skip: skipped %d %v", n, skipped)
		}
	}
}
