package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/source/remote"
)

// folderFields is what an image folder opened WithFields reads beside
// the image: where each field is in the schema, and where it comes from.
type folderFields struct {
	schema *fields.Schema
	mask   int // index of the mask field in the schema, or -1
	labels int // index of the multi-label field, or -1
	// maskDir is the mask field's key: the mask folder, absolute or
	// relative to the image folder's parent.
	maskDir string
	// hasLabel says the schema has an int label; labelCol and labelsCol
	// name the labels file's columns ("" for label: the second).
	hasLabel            bool
	labelCol, labelsCol string
	classes             int // the multi-labels' bound (Field.Classes)
}

// carriers says which sources carry each kind of field beyond an image
// and a label, with their default keys, for the errors of sources that
// refuse it.
var carriers = map[fields.Kind]string{
	fields.Mask:    "image_folder (a mask folder), webdataset (mask.png), tfrecord (image/segmentation/class/encoded) and synthetic",
	fields.Boxes:   "webdataset (json:boxes), tfrecord (image/object/bbox/*) and synthetic",
	fields.Classes: "webdataset (json:classes), tfrecord (image/object/class/label) and synthetic",
	fields.Labels:  "image_folder (a labels file's column), webdataset (json:labels), tfrecord and synthetic",
	fields.Tokens:  "webdataset (json:tokens), tfrecord (tokens) and synthetic",
	fields.Tensor:  "webdataset (npy), tfrecord and synthetic",
}

// newFolderFields reads schema for an image folder; flat says it has a
// labels file (WithLabels). It refuses the fields a folder does not hold
// and the keys that cannot be read: a column of a labels file without
// one, a key on the image.
func newFolderFields(schema *fields.Schema, flat bool) (*folderFields, error) {
	ff := &folderFields{schema: schema, mask: -1, labels: -1}
	for i, f := range schema.Fields {
		switch f.Kind {
		case fields.Image:
			if f.Key != "" {
				return nil, fmt.Errorf("%w: image=%s: an image folder's images are its files: leave the key out", fields.ErrSchema, f.Key)
			}
		case fields.Mask:
			ff.mask, ff.maskDir = i, f.Key
			if ff.maskDir == "" {
				ff.maskDir = "masks"
			}
		case fields.Label:
			ff.hasLabel, ff.labelCol = true, f.Key
			if f.Key != "" && !flat {
				return nil, fmt.Errorf("%w: label=%s names a column of a labels file, and class folders have none (their labels are the folders): give labels=FILE, or leave the key out", fields.ErrSchema, f.Key)
			}
		case fields.Labels:
			ff.labels, ff.labelsCol, ff.classes = i, f.Key, f.Classes
			if ff.labelsCol == "" {
				ff.labelsCol = "labels"
			}
			if !flat {
				return nil, fmt.Errorf("%w: labels come from a column of a labels file, and class folders have none: give labels=FILE with a %q column", fields.ErrSchema, ff.labelsCol)
			}
		default:
			return nil, fmt.Errorf("%w: an image folder holds no %s: it reads an image, a mask from a sibling folder, and label and labels from a labels file; %s are read by %s",
				fields.ErrSchema, f.Kind, f.Kind, carriers[f.Kind])
		}
	}
	return ff, nil
}

// identity is what the fields add to the folder's Identity: the mask
// folder (resolved) and the labels file's columns; "" for an image and a
// label from their default places.
func (ff *folderFields) identity(maskRoot string) string {
	var s string
	if ff.mask >= 0 {
		s += " masks=" + maskRoot
	}
	if ff.labelCol != "" {
		s += " label=" + ff.labelCol
	}
	if ff.labels >= 0 {
		s += fmt.Sprintf(" labels=%s[%d]", ff.labelsCol, ff.classes)
	}
	return s
}

// maskName is the mask of the image named name under the image folder:
// the same path under the mask folder, its extension replaced by .png.
func maskName(name string) string {
	return strings.TrimSuffix(name, path.Ext(name)) + ".png"
}

// maskRoot resolves the mask folder key for the image folder root (a
// local absolute path, or a URL without its trailing slash): an absolute
// path or a URL as it is, else relative to the root's parent. A local
// folder's masks are local, a remote folder's remote; the mask folder is
// not the image folder (whose listing would take the masks for images).
func maskRoot(root, key string) (string, error) {
	var dir string
	switch {
	case !remote.IsURL(root):
		if remote.IsURL(key) {
			return "", fmt.Errorf("%w: mask=%s: the masks of a local folder are a local folder", fields.ErrSchema, remote.Redact(key))
		}
		dir = key
		if !filepath.IsAbs(key) {
			dir = filepath.Join(filepath.Dir(root), key)
		}
		dir = filepath.Clean(dir)
	case remote.IsURL(key):
		dir = strings.TrimRight(key, "/")
	default:
		clean := path.Clean(key)
		host := strings.Index(root, "://") + 3
		slash := strings.LastIndex(root, "/")
		if path.IsAbs(key) || clean == ".." || strings.HasPrefix(clean, "../") || slash < host {
			return "", fmt.Errorf("%w: mask=%s: name the mask folder of %s by its URL, or by a path under the folder's parent (masks)", fields.ErrSchema, key, remote.Redact(root))
		}
		dir = root[:slash] + "/" + clean
	}
	if dir == root {
		return "", fmt.Errorf("%w: mask=%s is the image folder %s itself: its masks would be listed as images", fields.ErrSchema, key, remote.Redact(root))
	}
	return dir, nil
}

// listFields takes ff for f once its images are listed: it lists their
// masks.
func (f *Folder) listFields(ctx context.Context, ff *folderFields) error {
	f.fields = ff
	if ff == nil || ff.mask < 0 {
		return nil
	}
	dir, err := maskRoot(f.root, ff.maskDir)
	if err != nil {
		return fmt.Errorf("image_folder: WithFields: %w", err)
	}
	return f.listMasks(ctx, dir)
}

// listMasks finds the mask of every listed sample not already corrupt, in
// the mask folder at dir: f.masks[i] is its file (URL empty where it is
// missing). A local mask folder is listed one directory at a time (those
// that hold images), a mask's size and modification time taken from its
// entry; an s3:// one in one listing; over http(s)://, which cannot be
// listed, each mask costs a HEAD, the store's concurrency at once. A
// missing mask folder is an error; a missing mask, a corrupt record, as is
// a mask that is a symbolic link to no file.
func (f *Folder) listMasks(ctx context.Context, dir string) error {
	f.maskRoot = dir
	f.masks = make([]remote.Object, len(f.files))
	if f.remote == nil {
		return f.listLocalMasks(ctx, dir)
	}
	store := f.remote.store
	if strings.HasPrefix(dir, "s3://") {
		objs, err := store.ListTree(ctx, dir)
		if errors.Is(err, remote.ErrNotFound) {
			return fmt.Errorf("image_folder: masks: %s: %w: no mask folder there (masks mirror the images of %s)", remote.Redact(dir), ErrFormat, remote.Redact(f.root))
		}
		if err != nil {
			return listingErr(dir, err)
		}
		have := make(map[string]remote.Object, len(objs))
		for _, o := range objs {
			have[o.URL] = o
		}
		for i, name := range f.files {
			f.masks[i] = have[dir+"/"+maskName(name)]
		}
		return nil
	}
	urls := make([]string, len(f.files))
	for i, name := range f.files {
		urls[i] = dir + "/" + maskName(name)
	}
	objs, found, err := statAll(ctx, store, urls)
	if err != nil {
		return listingErr(dir, err)
	}
	for i := range objs {
		if found[i] {
			f.masks[i] = objs[i]
		}
	}
	return nil
}

func (f *Folder) listLocalMasks(ctx context.Context, dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return fmt.Errorf("image_folder: masks: %s: %w: %v (the mask folder mirrors the images of %s)", dir, ErrFormat, err, f.root)
	}
	listed := map[string]map[string]os.DirEntry{}
	for i, name := range f.files {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("image_folder: %s: listing masks: %w", dir, err)
		}
		if _, bad := f.bad[i]; bad {
			continue
		}
		sub, base := filepath.Split(filepath.FromSlash(maskName(name)))
		entries, ok := listed[sub]
		if !ok {
			entries = map[string]os.DirEntry{}
			list, err := os.ReadDir(filepath.Join(dir, sub))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("image_folder: masks: %w", err)
			}
			for _, e := range list {
				entries[e.Name()] = e
			}
			listed[sub] = entries
		}
		e, ok := entries[base]
		if !ok {
			continue
		}
		p := filepath.Join(dir, sub, base)
		st, err := e.Info()
		if err == nil && e.Type()&os.ModeSymlink != 0 {
			st, err = os.Stat(p)
			if broken := brokenLink(p, err); broken != nil {
				f.bad[i] = &RecordError{File: p, Index: i, Err: fmt.Errorf("the mask of %s: %w", f.path(i), broken)}
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("image_folder: masks: %w", err)
		}
		if st.IsDir() {
			continue
		}
		f.masks[i] = remote.Object{URL: p, Size: st.Size(), LastModified: st.ModTime()}
	}
	return nil
}

// maskError is the corrupt record of sample i, whose mask is missing or
// empty.
func (f *Folder) maskError(i int) *RecordError {
	m := f.masks[i]
	if m.URL != "" {
		return &RecordError{File: remote.Redact(m.URL), Index: i, Err: fmt.Errorf("%w: the mask of %s is an empty file", ErrFormat, remote.Redact(f.path(i)))}
	}
	want := remote.Redact(f.maskRoot + "/" + maskName(f.files[i]))
	if f.remote == nil {
		want = filepath.Join(f.maskRoot, filepath.FromSlash(maskName(f.files[i])))
	}
	return &RecordError{File: remote.Redact(f.path(i)), Index: i,
		Err: fmt.Errorf("%w: no mask %s for the image %s (the mask folder mirrors the image folder, each mask a .png)", ErrFormat, want, remote.Redact(f.path(i)))}
}

// readFields fills rec.Fields for sample i: the mask's file into its
// Bytes, the multi-labels into its Ints, both in the memory rec.Fields
// already holds; the image's and label's entries are empty.
func (f *Folder) readFields(i int, rec *Record) error {
	vals := fieldValues(rec, len(f.fields.schema.Fields))
	if j := f.fields.labels; j >= 0 {
		vals[j].Ints = append(vals[j].Ints, f.multi[f.multiOff[i]:f.multiOff[i+1]]...)
	}
	j := f.fields.mask
	if j < 0 {
		return nil
	}
	m := f.masks[i]
	var fh *os.File
	var err error
	if f.remote != nil {
		r := f.remote
		fh, _, err = r.cache.Open(r.ctx, r.store, m)
		switch {
		case errors.Is(err, context.Canceled):
			return fmt.Errorf("image_folder: %s: %w", remote.Redact(m.URL), err)
		case err != nil:
			return fmt.Errorf("image_folder: %w: %w", ErrDownload, err)
		}
	} else if fh, err = os.Open(m.URL); err != nil {
		return &RecordError{File: m.URL, Index: i, Err: fmt.Errorf("the mask of %s: %w", f.path(i), err)}
	}
	defer fh.Close()
	b := vals[j].Bytes
	if cap(b) < int(m.Size) {
		b = make([]byte, m.Size)
	}
	b = b[:m.Size]
	if _, err := io.ReadFull(fh, b); err != nil {
		return &RecordError{File: remote.Redact(m.URL), Index: i, Err: fmt.Errorf("%w: the mask of %s: %v (the file changed since it was listed?)", ErrFormat, remote.Redact(f.path(i)), err)}
	}
	vals[j].Bytes = b
	return nil
}

// labelTable is a labels file read: its rows (a CSV's lines, or a JSON
// file's entries as rows of file, label, labels) and the columns of the
// int label and the multi-labels in them (-1: not read).
type labelTable struct {
	rows          []csvRow
	label, labels int
}

// readLabels reads the labels file cfg.labels: a JSON file (by its .json
// extension) or a CSV, whose columns are found as cfg.fields names them.
func readLabels(read readFunc, cfg folderConfig) (*labelTable, error) {
	ff := cfg.fields
	if strings.EqualFold(path.Ext(cfg.labels), ".json") {
		return readJSONLabels(read, cfg.labels, ff)
	}
	rows, err := readCSV(read, cfg.labels, ff != nil)
	if err != nil {
		return nil, err
	}
	t := &labelTable{rows: rows, label: 1, labels: -1}
	named := ff != nil && (ff.labelCol != "" || ff.labels >= 0)
	if !named {
		if ff != nil && !ff.hasLabel {
			t.label = -1
		}
		if len(rows) > 0 && rows[0].line == 1 {
			if _, err := strconv.Atoi(rows[0].fields[1]); err != nil {
				rows[0].head = true
			}
		}
		return t, nil
	}
	where := remote.Redact(cfg.labels)
	if len(rows) == 0 {
		return nil, fmt.Errorf("image_folder: %s: %w: no lines, so no header naming the columns", where, ErrFormat)
	}
	head := rows[0]
	head.head, rows[0].head = true, true
	column := func(name string) (int, error) {
		for c, h := range head.fields[1:] {
			if h == name {
				return c + 1, nil
			}
		}
		return 0, fmt.Errorf("image_folder: %s:%d: %w: no column %q in the header (%s): a field's key names a column after the file's", where, head.line, ErrFormat, name, strings.Join(head.fields, ","))
	}
	if !ff.hasLabel {
		t.label = -1
	} else if ff.labelCol != "" {
		if t.label, err = column(ff.labelCol); err != nil {
			return nil, err
		}
	}
	if ff.labels >= 0 {
		if t.labels, err = column(ff.labelsCol); err != nil {
			return nil, err
		}
		if t.labels == t.label {
			return nil, fmt.Errorf("image_folder: %s: %w: label and labels both read column %d (%s): name the label's column (label=COLUMN)", where, ErrFormat, t.label+1, ff.labelsCol)
		}
	}
	return t, nil
}

// readJSONLabels reads a labels file that is JSON: a list of objects with
// the file under "file", or an object from each file to its object; in
// each, the label under the label field's key (default "label") and the
// multi-labels, a list of ints, under the labels field's (default
// "labels"). Its entries become rows of file, label, labels, the values'
// JSON text (a list's numbers separated by spaces, an absent label key or
// null empty) for the CSV's checks, each row at its entry's line.
func readJSONLabels(read readFunc, name string, ff *folderFields) (*labelTable, error) {
	b, err := read(name)
	if err != nil {
		return nil, fmt.Errorf("image_folder: %w", err)
	}
	where := remote.Redact(name)
	t := &labelTable{label: 1, labels: -1}
	labelKey, labelsKey := "label", ""
	if ff != nil {
		if !ff.hasLabel {
			t.label = -1
		} else if ff.labelCol != "" {
			labelKey = ff.labelCol
		}
		if ff.labels >= 0 {
			t.labels, labelsKey = 2, ff.labelsCol
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	line, seen := 1, 0
	lineAt := func(off int64) int {
		if int(off) < seen {
			line, seen = 1, 0
		}
		line += bytes.Count(b[seen:off], []byte{'\n'})
		seen = int(off)
		return line
	}
	bad := func(off int64, format string, args ...any) error {
		return fmt.Errorf("image_folder: %s:%d: %w: "+format, append([]any{where, lineAt(off), ErrFormat}, args...)...)
	}
	entry := func(file string, off int64, obj map[string]json.RawMessage) {
		row := csvRow{line: lineAt(off), off: off, fields: []string{file, jsonCell(obj[labelKey]), ""}}
		if labelsKey != "" {
			row.fields[2] = jsonCell(obj[labelsKey])
		}
		t.rows = append(t.rows, row)
	}
	start, err := dec.Token()
	if err != nil {
		return nil, bad(dec.InputOffset(), "not JSON: %v", err)
	}
	if start != json.Delim('[') && start != json.Delim('{') {
		return nil, bad(0, `want a list of objects with a "file" key, or an object from each file to its labels`)
	}
	for dec.More() {
		off := dec.InputOffset()
		for off < int64(len(b)) && strings.IndexByte(" \t\r\n,:", b[off]) >= 0 {
			off++
		}
		var file string
		if start == json.Delim('{') {
			tok, err := dec.Token()
			if err != nil {
				return nil, bad(off, "%v", err)
			}
			file = tok.(string)
		}
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			return nil, bad(off, "an entry that is not an object of the file's labels: %v", err)
		}
		if obj == nil {
			return nil, bad(off, "an entry that is null, not an object of the file's labels")
		}
		if start == json.Delim('[') {
			if err := json.Unmarshal(obj["file"], &file); err != nil || file == "" {
				return nil, bad(off, `an entry without a "file" string`)
			}
		}
		entry(file, off, obj)
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(dec.InputOffset(), "%v", err)
	}
	return t, nil
}

// jsonCell is a JSON value as a labels cell: a list's values separated by
// spaces, anything else its JSON text; null or absent, empty.
func jsonCell(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	var list []json.RawMessage
	if strings.HasPrefix(s, "[") && json.Unmarshal(raw, &list) == nil {
		cells := make([]string, len(list))
		for i, v := range list {
			cells[i] = string(v)
		}
		return strings.Join(cells, " ")
	}
	if s == "null" {
		return ""
	}
	return s
}

// parseLabels appends to f.multi the multi-labels of a labels cell: ints
// separated by spaces or semicolons, each in 0..classes-1 (and below
// MaxClasses); an empty cell is none. What is wrong with it is an
// ErrLabel naming the line and the file; a label past classes wraps
// fields.ErrValue too.
func (f *Folder) parseLabels(cell string, line int, name string, classes int) error {
	start := len(f.multi)
	for s := range strings.FieldsFuncSeq(cell, func(r rune) bool { return r == ' ' || r == ';' || r == '\t' }) {
		v, err := strconv.Atoi(s)
		switch {
		case err != nil:
			err = fmt.Errorf("%w: line %d: %s: labels %q: %q is not a number", ErrLabel, line, name, cell, s)
		case v < 0 || v >= MaxClasses:
			err = fmt.Errorf("%w: line %d: %s: labels %q: %d is not in 0..%d (MaxClasses-1)", ErrLabel, line, name, cell, v, MaxClasses-1)
		case v >= classes:
			err = fmt.Errorf("%w: %w: line %d: %s: labels %q: %d is not below the field's classes (%d)", ErrLabel, fields.ErrValue, line, name, cell, v, classes)
		}
		if err != nil {
			f.multi = f.multi[:start]
			return err
		}
		f.multi = append(f.multi, int64(v))
	}
	return nil
}
