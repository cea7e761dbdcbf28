package source

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/fields"
)

// This file holds what the WebDataset, TFRecord and synthetic sources share
// to fill Record.Fields: growing the caller's values, bounding and checking
// them against their field, and the small allocation-free parsers of what
// files hold (a JSON member's list, a .cls-style text list, an .npy
// header).

// fieldValues returns rec.Fields holding n values, each reset, reusing the
// slice and the values' memory.
func fieldValues(rec *Record, n int) []fields.Value {
	if cap(rec.Fields) < n {
		rec.Fields = append(rec.Fields[:cap(rec.Fields)], make([]fields.Value, n-cap(rec.Fields))...)
	}
	rec.Fields = rec.Fields[:n]
	for i := range rec.Fields {
		rec.Fields[i].Reset()
	}
	return rec.Fields
}

// grow returns b[:n], allocating only when b's capacity is short.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// tensorBytes is the bytes of a tensor field's values (its Shape was
// checked by Schema.Check: under 2^30 values).
func tensorBytes(f *fields.Field) int {
	n := f.DType.Size()
	for _, d := range f.Shape {
		n *= d
	}
	return n
}

// listBound is the most values a field's list may hold: a sample with more
// is corrupt, so parsers stop there rather than allocate for what a file
// claims (4 per box).
func listBound(f *fields.Field) int {
	switch f.Kind {
	case fields.Boxes:
		return 4 * f.Max
	case fields.Classes, fields.Tokens:
		return f.Max
	case fields.Labels:
		return f.Classes
	}
	return 0
}

// errTooMany is what a parser returns past listBound; tooMany says it in
// the field's terms.
var errTooMany = fmt.Errorf("%w: too many values", fields.ErrValue)

// tooMany is the error of a list past its field's listBound.
func tooMany(f *fields.Field) error {
	switch f.Kind {
	case fields.Boxes:
		return fmt.Errorf("%w: more than max_boxes=%d boxes", fields.ErrValue, f.Max)
	case fields.Classes:
		return fmt.Errorf("%w: more than max_boxes=%d classes", fields.ErrValue, f.Max)
	case fields.Tokens:
		return fmt.Errorf("%w: more than max_tokens=%d tokens", fields.ErrValue, f.Max)
	}
	return fmt.Errorf("%w: more than classes=%d labels", fields.ErrValue, f.Classes)
}

// checkValue checks a list field's value against its field: the count
// against its bound, a box's corners finite, a multi-label below the
// classes, a token within int32.
func checkValue(f *fields.Field, v *fields.Value) error {
	switch f.Kind {
	case fields.Boxes:
		if len(v.Floats)%4 != 0 {
			return fmt.Errorf("%w: boxes: %d numbers, not 4 per box", ErrFormat, len(v.Floats))
		}
		if n := len(v.Floats) / 4; n > f.Max {
			return fmt.Errorf("%w: %d boxes, more than max_boxes=%d", fields.ErrValue, n, f.Max)
		}
		for _, x := range v.Floats {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: a box corner is %v", fields.ErrValue, x)
			}
		}
	case fields.Classes:
		if len(v.Ints) > f.Max {
			return fmt.Errorf("%w: %d classes, more than max_boxes=%d", fields.ErrValue, len(v.Ints), f.Max)
		}
	case fields.Tokens:
		if len(v.Ints) > f.Max {
			return fmt.Errorf("%w: %d tokens, more than max_tokens=%d", fields.ErrValue, len(v.Ints), f.Max)
		}
		for _, t := range v.Ints {
			if t != int64(int32(t)) {
				return fmt.Errorf("%w: token %d is not an int32", fields.ErrValue, t)
			}
		}
	case fields.Labels:
		if len(v.Ints) > f.Classes {
			return fmt.Errorf("%w: %d labels, more than classes=%d", fields.ErrValue, len(v.Ints), f.Classes)
		}
		for _, l := range v.Ints {
			if l < 0 || l >= int64(f.Classes) {
				return fmt.Errorf("%w: label %d, not in 0..%d (classes=%d)", fields.ErrValue, l, f.Classes-1, f.Classes)
			}
		}
	}
	return nil
}

// checkBoxClasses checks that a sample's classes are one per box, when
// the schema has both.
func checkBoxClasses(s *fields.Schema, vals []fields.Value) error {
	bi, ci := -1, -1
	for k, f := range s.Fields {
		switch f.Kind {
		case fields.Boxes:
			bi = k
		case fields.Classes:
			ci = k
		}
	}
	if bi < 0 || ci < 0 {
		return nil
	}
	if nb, nc := len(vals[bi].Floats)/4, len(vals[ci].Ints); nb != nc {
		return fmt.Errorf("%w: %d boxes but %d classes: want one class per box", fields.ErrValue, nb, nc)
	}
	return nil
}

// isSpace reports the separators of a text list: white space and commas.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' }

// parseInt parses a decimal integer, optionally signed, without
// allocating.
func parseInt(tok []byte) (int64, bool) {
	neg := false
	if len(tok) > 0 && (tok[0] == '-' || tok[0] == '+') {
		neg = tok[0] == '-'
		tok = tok[1:]
	}
	if len(tok) == 0 || len(tok) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseFloat parses a number as a float32. (A conversion of a short token
// to a string for strconv does not allocate.)
func parseFloat(tok []byte) (float32, bool) {
	if len(tok) == 0 || len(tok) > 64 {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 32)
	return float32(f), err == nil
}

// quote shows a token in an error, cut to 20 bytes.
func quote(tok []byte) string {
	if len(tok) > 20 {
		return strconv.Quote(string(tok[:20])) + "…"
	}
	return strconv.Quote(string(tok))
}

// appendTextInts appends the integers of a .cls-style text (separated by
// white space or commas) to dst, at most limit of them.
func appendTextInts(dst []int64, b []byte, limit int) ([]int64, error) {
	return appendText(dst, b, limit, parseInt, "an integer")
}

// appendTextFloats appends the numbers of a text (separated by white space
// or commas) to dst, at most limit of them.
func appendTextFloats(dst []float32, b []byte, limit int) ([]float32, error) {
	return appendText(dst, b, limit, parseFloat, "a number")
}

// appendText appends the values parse reads from the words of b (separated
// by white space or commas) to dst, at most limit of them; a word parse
// refuses is not what (its error says so).
func appendText[T any](dst []T, b []byte, limit int, parse func([]byte) (T, bool), what string) ([]T, error) {
	for i := 0; i < len(b); {
		if isSpace(b[i]) {
			i++
			continue
		}
		j := i
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		v, ok := parse(b[i:j])
		if !ok {
			return dst, fmt.Errorf("%w: %s is not %s", ErrFormat, quote(b[i:j]), what)
		}
		if limit--; limit < 0 {
			return dst, errTooMany
		}
		dst = append(dst, v)
		i = j
	}
	return dst, nil
}

// errJSON is wrapped by the JSON scanner's errors: the member does not
// parse where the key is sought.
var errJSON = fmt.Errorf("%w: bad JSON", ErrFormat)

func jsonSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonStringEnd returns the index after the string that starts at b[i]
// ('"').
func jsonStringEnd(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: a string runs to the end", errJSON)
}

// jsonSkip returns the index after the JSON value that starts at b[i]
// (after white space). It finds where values end, not whether they are
// well formed: encoding/json checks that when the shard is indexed.
func jsonSkip(b []byte, i int) (int, error) {
	depth := 0
	for {
		i = jsonSpace(b, i)
		if i >= len(b) {
			return 0, fmt.Errorf("%w: a value runs to the end", errJSON)
		}
		switch c := b[i]; c {
		case '"':
			var err error
			if i, err = jsonStringEnd(b, i); err != nil {
				return 0, err
			}
		case '{', '[':
			depth++
			i++
			continue
		case '}', ']':
			if depth == 0 {
				return 0, fmt.Errorf("%w: %q where a value belongs", errJSON, c)
			}
			depth--
			i++
		case ',', ':':
			if depth == 0 {
				return 0, fmt.Errorf("%w: %q where a value belongs", errJSON, c)
			}
			i++
			continue
		default:
			for i < len(b) && !strings.ContainsRune(",]} \t\r\n:", rune(b[i])) {
				i++
			}
		}
		if depth == 0 {
			return i, nil
		}
	}
}

// jsonMember returns the value of key in the JSON object doc (the raw
// bytes of the member's value), and whether it has it. Keys are compared
// as written, so a key written with escapes is not found.
func jsonMember(doc []byte, key string) ([]byte, bool, error) {
	i := jsonSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false, fmt.Errorf("%w: not an object", errJSON)
	}
	i = jsonSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return nil, false, nil
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return nil, false, fmt.Errorf("%w: an object's key is not a string", errJSON)
		}
		end, err := jsonStringEnd(doc, i)
		if err != nil {
			return nil, false, err
		}
		name := doc[i+1 : end-1]
		i = jsonSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return nil, false, fmt.Errorf("%w: no ':' after key %s", errJSON, quote(name))
		}
		start := jsonSpace(doc, i+1)
		if i, err = jsonSkip(doc, start); err != nil {
			return nil, false, err
		}
		if string(name) == key {
			return doc[start:i], true, nil
		}
		i = jsonSpace(doc, i)
		switch {
		case i < len(doc) && doc[i] == ',':
			i = jsonSpace(doc, i+1)
		case i < len(doc) && doc[i] == '}':
			return nil, false, nil
		default:
			return nil, false, fmt.Errorf("%w: no ',' or '}' after key %s's value", errJSON, quote(name))
		}
	}
}

// jsonPath returns the value at path in the JSON object doc: keys joined
// by dots ("annotations.boxes"), each in the object the one before names.
func jsonPath(doc []byte, path string) ([]byte, bool, error) {
	for {
		key, rest, nested := strings.Cut(path, ".")
		v, ok, err := jsonMember(doc, key)
		if err != nil || !ok || !nested {
			return v, ok, err
		}
		doc, path = v, rest
	}
}

// jsonList calls item for each element of the JSON array v (its raw bytes,
// white space trimmed).
func jsonList(v []byte, item func(elem []byte) error) error {
	i := jsonSpace(v, 0)
	if i >= len(v) || v[i] != '[' {
		return fmt.Errorf("%w: %s is not a list", ErrFormat, quote(v))
	}
	i = jsonSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return nil
	}
	for {
		end, err := jsonSkip(v, i)
		if err != nil {
			return err
		}
		if err := item(v[i:end]); err != nil {
			return err
		}
		i = jsonSpace(v, end)
		switch {
		case i < len(v) && v[i] == ',':
			i = jsonSpace(v, i+1)
		case i < len(v) && v[i] == ']':
			return nil
		default:
			return fmt.Errorf("%w: a list without ',' or ']' after an element", errJSON)
		}
	}
}

// appendJSONInts appends the integers of the JSON list v to dst, at most
// limit of them.
func appendJSONInts(dst []int64, v []byte, limit int) ([]int64, error) {
	err := jsonList(v, func(e []byte) error {
		x, ok := parseInt(e)
		if !ok {
			return fmt.Errorf("%w: %s is not an integer", ErrFormat, quote(e))
		}
		if len(dst) >= limit {
			return errTooMany
		}
		dst = append(dst, x)
		return nil
	})
	return dst, err
}

// appendJSONBoxes appends the boxes of the JSON list v, a list of lists of
// 4 numbers, to dst, at most limit numbers.
func appendJSONBoxes(dst []float32, v []byte, limit int) ([]float32, error) {
	err := jsonList(v, func(box []byte) error {
		n := 0
		err := jsonList(box, func(e []byte) error {
			x, ok := parseFloat(e)
			if !ok {
				return fmt.Errorf("%w: %s is not a number", ErrFormat, quote(e))
			}
			if n++; n > 4 {
				return fmt.Errorf("%w: box %s has more than 4 numbers", ErrFormat, quote(box))
			}
			if len(dst) >= limit {
				return errTooMany
			}
			dst = append(dst, x)
			return nil
		})
		if err == nil && n != 4 {
			err = fmt.Errorf("%w: box %s has %d numbers, not 4", ErrFormat, quote(box), n)
		}
		return err
	})
	return dst, err
}

// npyDescr is the .npy descr of each DType: little-endian, or '|u1'.
var npyDescr = [...]string{fields.Uint8: "|u1", fields.Uint16: "<u2", fields.Int32: "<i4", fields.Int64: "<i8", fields.Float32: "<f4"}

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// npyData checks the .npy file b (or its start, holding the header) against
// a tensor field — format version 1, 2 or 3, its dtype, C order, its
// shape — and returns where the data starts.
func npyData(b []byte, f *fields.Field) (int, error) {
	if len(b) < 10 || string(b[:6]) != npyMagic {
		return 0, fmt.Errorf("%w: not an .npy file (no \\x93NUMPY magic)", ErrFormat)
	}
	var start, n int
	switch b[6] {
	case 1:
		start, n = 10, int(binary.LittleEndian.Uint16(b[8:]))
	case 2, 3:
		if len(b) < 12 {
			return 0, fmt.Errorf("%w: .npy header cut short", ErrFormat)
		}
		start, n = 12, int(binary.LittleEndian.Uint32(b[8:]))
	default:
		return 0, fmt.Errorf("%w: .npy format version %d (want 1, 2 or 3)", ErrFormat, b[6])
	}
	if n > len(b)-start {
		return 0, fmt.Errorf("%w: .npy header of %d bytes runs past the data", ErrFormat, n)
	}
	h := b[start : start+n]
	descr, ok := npyKey(h, "descr")
	if !ok || len(descr) < 2 || (descr[0] != '\'' && descr[0] != '"') {
		return 0, fmt.Errorf("%w: .npy header without a descr", ErrFormat)
	}
	end := bytes.IndexByte(descr[1:], descr[0])
	if end < 0 {
		return 0, fmt.Errorf("%w: .npy header's descr is not a string", ErrFormat)
	}
	if d := descr[1 : 1+end]; string(d) != npyDescr[f.DType] {
		return 0, fmt.Errorf("%w: .npy dtype %s, want %q (%s)", fields.ErrValue, quote(d), npyDescr[f.DType], f.DType)
	}
	order, ok := npyKey(h, "fortran_order")
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: .npy header without fortran_order", ErrFormat)
	case bytes.HasPrefix(order, []byte("True")):
		return 0, fmt.Errorf("%w: .npy array in Fortran order: want C order (numpy.ascontiguousarray)", fields.ErrValue)
	case !bytes.HasPrefix(order, []byte("False")):
		return 0, fmt.Errorf("%w: .npy fortran_order is neither True nor False", ErrFormat)
	}
	shape, ok := npyKey(h, "shape")
	if !ok || len(shape) == 0 || shape[0] != '(' {
		return 0, fmt.Errorf("%w: .npy header without a shape", ErrFormat)
	}
	end = bytes.IndexByte(shape, ')')
	if end < 0 {
		return 0, fmt.Errorf("%w: .npy shape without ')'", ErrFormat)
	}
	dims := shape[1:end]
	k := 0
	same := true
	for len(dims) > 0 {
		var d []byte
		d, dims, _ = bytes.Cut(dims, []byte(","))
		d = bytes.TrimRight(bytes.TrimSpace(d), "L")
		if len(d) == 0 {
			continue
		}
		v, ok := parseInt(d)
		if !ok {
			return 0, fmt.Errorf("%w: .npy shape %s", ErrFormat, quote(shape[:end+1]))
		}
		same = same && k < len(f.Shape) && int64(f.Shape[k]) == v
		k++
	}
	if !same || k != len(f.Shape) {
		return 0, fmt.Errorf("%w: .npy shape %s, want %v", fields.ErrValue, shape[:end+1], f.Shape)
	}
	return start + n, nil
}

// npyKey returns what follows the key name (quoted) and its colon in an
// .npy header dict, white space trimmed.
func npyKey(h []byte, name string) ([]byte, bool) {
	for at := 0; ; {
		i := bytes.Index(h[at:], []byte(name))
		if i < 0 {
			return nil, false
		}
		i += at
		at = i + len(name)
		if i == 0 || at >= len(h) || (h[i-1] != '\'' && h[i-1] != '"') || h[at] != h[i-1] {
			continue
		}
		rest := bytes.TrimLeft(h[at+1:], " ")
		if len(rest) == 0 || rest[0] != ':' {
			return nil, false
		}
		return bytes.TrimLeft(rest[1:], " "), true
	}
}

// putTensor writes n values, got by at(i) as int64 or float64 (isFloat),
// into dst as dtype's little-endian values, refusing one the dtype cannot
// hold exactly (a float where an integer belongs, one out of range).
func putTensor(dst []byte, dt fields.DType, n int, at func(i int) (int64, float64)) error {
	for i := range n {
		iv, fv := at(i)
		if dt == fields.Float32 {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(float32(fv)))
			continue
		}
		if fv != float64(iv) {
			return fmt.Errorf("%w: tensor value %v is not a %s", fields.ErrValue, fv, dt)
		}
		var lo, hi int64
		switch dt {
		case fields.Uint8:
			lo, hi = 0, math.MaxUint8
		case fields.Uint16:
			lo, hi = 0, math.MaxUint16
		case fields.Int32:
			lo, hi = math.MinInt32, math.MaxInt32
		default:
			lo, hi = math.MinInt64, math.MaxInt64
		}
		if iv < lo || iv > hi {
			return fmt.Errorf("%w: tensor value %d is not a %s", fields.ErrValue, iv, dt)
		}
		switch dt {
		case fields.Uint8:
			dst[i] = byte(iv)
		case fields.Uint16:
			binary.LittleEndian.PutUint16(dst[2*i:], uint16(iv))
		case fields.Int32:
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(iv))
		default:
			binary.LittleEndian.PutUint64(dst[8*i:], uint64(iv))
		}
	}
	return nil
}
