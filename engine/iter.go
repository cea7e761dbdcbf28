package engine

import (
	"errors"
	"io"
	"iter"
)

// All returns the epoch's batches in order, for a range loop:
//
//	for b, err := range epoch.All() {
//		if err != nil {
//			return err
//		}
//		train(b.Float32())
//	}
//
// Each batch is released when the loop body returns for the next one, or
// the loop ends, so the loop holds one slab at a time; copy what must
// outlive the body. The end of the epoch ends the loop (no io.EOF is
// yielded); an error is yielded once, with a nil batch, as the last pair.
// Breaking out leaves the epoch open where it stood: Close it, or ask Next
// for the batches after.
func (x *Epoch) All() iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		for {
			b, err := x.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			more := yield(b, nil)
			b.Release()
			if !more {
				return
			}
		}
	}
}
