// Package fields is the schema of a sample: the named, typed fields a
// pipeline carries beside (or instead of only) an image and a label — a
// segmentation mask, boxes with their classes, a multi-label vector, a
// token sequence, a raw tensor — and how a batch lays them out.
//
// A pipeline without a fields stage has the schema of an image and an int
// label, and its batches are exactly what they were before fields existed.
// With one, the schema is declared once, after the source ("fields
// image=jpg mask=mask.png label=cls"); sources read each field's value by
// its key (Value: the bytes, ints or floats the file holds), the engine
// turns values into the field's type, moves the spatial ones (mask,
// boxes) with the image's geometry, and writes every field into its own
// region of the batch (Layout). The schema's canonical string is part of
// the cache fingerprint.
//
// The package knows no file formats and no pixels: it is the vocabulary
// source, transform, engine, cache and feed share.
package fields
