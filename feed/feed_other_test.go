//go:build !linux

package feed

import (
	"context"
	"errors"
	"testing"
)

// TestUnsupported: where pipe feed cannot work, everything says so.
func TestUnsupported(t *testing.T) {
	if err := Supported(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Supported: %v", err)
	}
	if _, err := NewRing(1, 1, 1, 1); !errors.Is(err, ErrUnsupported) {
		t.Errorf("NewRing: %v", err)
	}
	if err := Serve(context.Background(), nil, nil, "t.pipe"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Serve: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	if err := Watch(nil, cancel)(); !errors.Is(err, ErrUnsupported) || !errors.Is(context.Cause(ctx), ErrUnsupported) {
		t.Errorf("Watch: %v, cause %v", err, context.Cause(ctx))
	}
}
