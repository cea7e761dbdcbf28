package source

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/pipefeed/pipe/fields"
)

// WebDataset reads WebDataset shards: tar files (plain, or gzipped .tar.gz
// and .tgz) whose members are grouped into samples by key — the member
// name up to the first dot of its base name — with the image in a .jpg,
// .jpeg or .png member and the label in a .cls member (a decimal number)
// or a field of a .json member. The members are indexed when the shards
// open (a gzipped shard is decompressed once into the index directory,
// where the copy appears only whole), so samples are read by index like any
// other source, and a shuffle stage permutes all of them.
type WebDataset struct {
	shards  []*wdsShard
	stream  *shardStream // URL shards more than the shard cache holds; else nil
	samples []wdsSample
	info    Info
	corrupt []*RecordError
	fp      string
	cfg     wdsConfig
}

type wdsShard struct {
	name string   // as found
	fh   *os.File // nil when streamed
}

type wdsSample struct {
	shard      int
	key        string
	first      int64 // the data of its first member
	off, size  int64 // the image member's data
	label      int
	imageName  string
	labelFound bool
	err        error        // the first problem found in its members
	errOff     int64        // the data offset of the member at fault
	bad        *RecordError // what Read returns, for a corrupt sample
	// With fields: the .json member, when a field reads one of its keys,
	// and the member of each schema field read from one (by field index;
	// off < 0: the sample has none).
	json    wdsMember
	members []wdsMember
}

// wdsMember is where a member's data lies in its shard.
type wdsMember struct{ off, size int64 }

// fail records a problem with the member at off, unless there was one.
func (s *wdsSample) fail(off int64, err error) {
	if s.err == nil {
		s.err, s.errOff = err, off
	}
}

type wdsConfig struct {
	labelField string
	indexDir   string
	remote     *Remote

	// From WithFields (nil without): the schema, where each of its fields
	// is found (by field index), and what the image and label fields make
	// of today's rules.
	schema     *fields.Schema
	at         []wdsField
	imageExt   string // "": .jpg, .jpeg or .png
	labelExt   string // the text member of an int label: "cls"; "" for none
	needLabel  bool   // a sample without a label is corrupt
	jsonFields bool   // a field reads a key of the .json member
}

// wdsField is where a WebDataset sample's field is found: a member (by its
// extension, lower case) or, with ext "", a key path of the .json member.
type wdsField struct {
	ext  string
	path string
	npy  bool // a tensor's member is an .npy file, else its raw bytes
	json bool // a list's member is JSON (a .json extension), else text
}

// wdsDefaultKeys are the keys of the fields a WebDataset reads when the
// schema names none (the image's and label's are today's rules).
var wdsDefaultKeys = map[fields.Kind]string{
	fields.Mask: "mask.png", fields.Boxes: "json:boxes", fields.Classes: "json:classes",
	fields.Labels: "json:labels", fields.Tokens: "json:tokens", fields.Tensor: "npy",
}

// wdsImageExts are the extensions of an image member without an image key.
var wdsImageExts = []string{"jpg", "jpeg", "png"}

// isImage reports whether a member of extension ext (lower case) is the
// sample's image.
func (c *wdsConfig) isImage(ext string) bool {
	if c.imageExt != "" {
		return ext == c.imageExt
	}
	return slices.Contains(wdsImageExts, ext)
}

// compileFields sets where each field of schema is found, refusing a key
// that cannot name it.
func (c *wdsConfig) compileFields(schema *fields.Schema) error {
	c.schema, c.at = schema, make([]wdsField, len(schema.Fields))
	c.labelExt, c.needLabel = "cls", schema.Has(fields.Label)
	for k, f := range schema.Fields {
		key := strings.TrimPrefix(f.Key, ".")
		if key == "" {
			key = wdsDefaultKeys[f.Kind]
		}
		path, inJSON := strings.CutPrefix(key, "json:")
		bad := func(why string) error {
			return fmt.Errorf("%w: webdataset: %s=%s: %s", fields.ErrSchema, f.Kind, key, why)
		}
		if inJSON && path == "" {
			return bad("no key after json:")
		}
		switch f.Kind {
		case fields.Image:
			if inJSON {
				return bad("an image is a member (image=jpg), not a JSON key")
			}
			c.imageExt = strings.ToLower(key)
			continue
		case fields.Label:
			switch {
			case inJSON && strings.Contains(path, "."):
				return bad("a label is a top-level key of the .json member")
			case inJSON:
				c.labelField, c.labelExt = path, ""
			case key != "":
				c.labelField, c.labelExt = "", strings.ToLower(key)
			}
			continue
		case fields.Mask, fields.Tensor:
			if inJSON {
				return bad(fmt.Sprintf("a %s is a member's bytes (a member's extension, as %s=%s), not a JSON key", f.Kind, f.Kind, wdsDefaultKeys[f.Kind]))
			}
		}
		if inJSON {
			c.at[k] = wdsField{path: path}
			c.jsonFields = true
			continue
		}
		ext := strings.ToLower(key)
		c.at[k] = wdsField{ext: ext, npy: ext == "npy" || strings.HasSuffix(ext, ".npy"), json: ext == "json" || strings.HasSuffix(ext, ".json")}
	}
	for k, a := range c.at {
		if a.ext != "" && c.isImage(a.ext) {
			f := schema.Fields[k]
			return fmt.Errorf("%w: webdataset: %s=%s: .%s members are the images (name the image's extension, image=jpg, and another for the %s)",
				fields.ErrSchema, f.Kind, a.ext, a.ext, f.Kind)
		}
	}
	return nil
}

// WithJSONLabel takes labels from field of each sample's .json member when
// it has no .cls member. Default "label". For OpenWebDataset.
func WithJSONLabel(field string) Option {
	return Option{"WithJSONLabel", func(o *options) error {
		if field == "" {
			return errors.New("an empty field name")
		}
		o.wds.labelField = field
		return nil
	}}
}

// OpenWebDataset opens the shards pattern names: its brace groups expanded
// (shard-{000000..001023}.tar), each then a glob of local files, in sorted
// order, or a URL (s3://bucket/train-*.tar, https://host/shard-0.tar) whose
// objects are fetched into the shard cache (see [Remote]) and read from
// there; errors name the URL. Samples without an image or a label, with a label that is not a
// number in 0..MaxClasses-1, with a .json that does not parse, with an
// image past MaxRecordBytes, or with a member cut short by a truncated
// shard are corrupt records (see Corrupt). So is the rest of a shard from a
// tar header that is cut short or garbage: the samples before it read, and
// it is one more sample. Opening reads every shard (and decompresses the
// gzipped ones the index directory lacks); cancelling ctx stops that
// within about a megabyte of reading, and the error wraps ctx's.
//
// It takes WithFields. A field's key is then a member's extension after
// the sample's key ("mask.png", "npy", "cls") or json:NAME, a key of the
// sample's .json member (json:annotations.boxes names a key of the object
// at key annotations; keys written with escapes are not found). Without a
// key: the image and the label as above (label=EXT or label=json:NAME
// names another), mask mask.png, boxes json:boxes, classes json:classes,
// labels json:labels, tokens json:tokens, tensor npy. A mask is its
// member's bytes; boxes are a JSON list of lists of 4 numbers (a member
// other than .json: a text of numbers, 4 a box); classes, labels and
// tokens a JSON list of integers, or a text of integers separated by white
// space or commas; a tensor an .npy file (format version 1, 2 or 3, the
// field's dtype little-endian or '|u1', C order, the field's shape), its
// header removed, or a member of exactly the tensor's bytes. A sample
// without a member a field needs is corrupt (ErrFormat, naming it), as is
// one whose member does not parse (ErrFormat) or holds what does not fit
// its field (fields.ErrValue: more boxes than max_boxes, a class per box,
// a multi-label past classes, a token past int32, a tensor's dtype or
// shape): each member is read and checked as the shard is indexed, as
// Read reads it. A list's member (a .json one included, when a field
// reads it) past 64 MiB is corrupt. Without a label field, a sample needs
// no label (its Label is 0).
func OpenWebDataset(ctx context.Context, pattern string, opts ...Option) (*WebDataset, error) {
	o, err := apply("webdataset", opts, "WithJSONLabel", "WithIndexDir", "WithRemote", "WithFields")
	if err != nil {
		return nil, err
	}
	cfg := o.wds
	if cfg.labelField == "" {
		cfg.labelField = "label"
	}
	cfg.indexDir, cfg.remote = o.indexDir, o.remote
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("webdataset: %w", err)
	}
	args := []Arg{{"path", pattern}, {"label_field", cfg.labelField}}
	cfg.labelExt, cfg.needLabel = "cls", true
	if o.fields != nil {
		if err := cfg.compileFields(o.fields); err != nil {
			return nil, err
		}
	}
	if cfg.indexDir != "" {
		args = append(args, Arg{"index_dir", cfg.indexDir})
	}
	args = append(args, cfg.remote.args(pattern)...)
	files, err := shardFiles(ctx, "webdataset", pattern, cfg.remote, &cfg.indexDir)
	if err != nil {
		return nil, err
	}
	defer files.close()
	w := &WebDataset{cfg: cfg}
	h := xxhash.New()
	fmt.Fprintf(h, "%s\x00", cfg.labelField)
	if cfg.schema != nil {
		fmt.Fprintf(h, "%s\x00", cfg.schema)
	}
	maxLabel := -1
	seen := map[int]bool{}
	if files.stream != nil {
		w.stream, files.stream = files.stream, nil
		if err := w.indexStreamed(ctx, files, cfg, h); err != nil {
			w.Close()
			return nil, err
		}
	}
	for si := range files.len() {
		if w.stream != nil {
			break
		}
		sf, err := files.get(si)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		}
		name := sf.name
		fp, err := sf.fingerprint()
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		}
		h.WriteString(fp)
		fh, err := sf.open()
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		}
		if gz, err := isGzip(fh); err != nil {
			fh.Close()
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		} else if gz {
			plain := filepath.Join(cfg.indexDir, fmt.Sprintf("%s-%016x.tar", filepath.Base(name), xxhash.Sum64String(sf.copyKey(fp))))
			if fh, err = openPlain(ctx, fh, name, plain, "webdataset"); err != nil {
				w.Close()
				return nil, err
			}
		}
		w.shards = append(w.shards, &wdsShard{name: name, fh: fh})
		// A URL shard's index is kept beside its other indexes, keyed
		// by the object's version and the label field, with the checksum
		// of the bytes it was made from, so a later open does not walk
		// the shard again, and one of other bytes does.
		var saved string
		if sf.fp != "" {
			saved = wdsIndexPath(cfg, sf)
			if st, err := fh.Stat(); err == nil && w.loadIndex(saved, si, st.Size(), sf.sum) {
				continue
			}
		}
		start := len(w.samples)
		if err := w.index(ctx, si, fh, &cfg); err != nil {
			w.Close()
			return nil, err
		}
		if saved != "" {
			w.saveIndex(saved, sf.sum, w.samples[start:])
		}
	}
	for i := range w.samples {
		s := &w.samples[i]
		e := &RecordError{File: w.shards[s.shard].name, Index: i}
		missing := cfg.missing(s)
		switch {
		case s.err != nil:
			e.Offset, e.Err = s.errOff, s.err
		case s.imageName == "":
			e.Offset, e.Err = s.first, fmt.Errorf("%w: sample %q has no %s member", ErrUnknownFormat, s.key, cfg.imageMembers())
		case !s.labelFound && cfg.needLabel:
			e.Offset, e.Err = s.off, fmt.Errorf("%w: sample %q has %s", ErrFormat, s.key, cfg.noLabel())
		case missing != nil:
			e.Offset, e.Err = s.first, missing
		default:
			if s.labelFound {
				maxLabel = max(maxLabel, s.label)
				seen[s.label] = true
			}
			continue
		}
		s.bad = e
		w.corrupt = append(w.corrupt, e)
	}
	if len(w.samples) == 0 {
		w.Close()
		return nil, fmt.Errorf("webdataset: %s: %w: no samples", pattern, ErrFormat)
	}
	if err := denseLabels("webdataset: "+pattern, len(seen), maxLabel, "number the classes 0..%d"); err != nil {
		w.Close()
		return nil, err
	}
	classes := make([]string, maxLabel+1)
	for i := range classes {
		classes[i] = strconv.Itoa(i)
	}
	w.fp = fmt.Sprintf("%016x", h.Sum64())
	w.info = Info{Name: "webdataset", Identity: fmt.Sprintf("webdataset %s (%d shards)", pattern, files.len()), C: 3, Classes: classes, Encoded: true, Args: args, Fields: o.fields}
	return w, nil
}

// imageMembers names the members a sample's image may be.
func (c *wdsConfig) imageMembers() string {
	if c.imageExt != "" {
		return "." + c.imageExt
	}
	return ".jpg, .jpeg or .png"
}

// noLabel says what a sample without a label lacks.
func (c *wdsConfig) noLabel() string {
	switch {
	case c.labelExt == "":
		return fmt.Sprintf("no %q in a .json member", c.labelField)
	case c.labelField == "":
		return fmt.Sprintf("no .%s member", c.labelExt)
	}
	return fmt.Sprintf("no .%s member and no %q in a .json member", c.labelExt, c.labelField)
}

// missing says which member sample s lacks that a field needs, or nil.
func (c *wdsConfig) missing(s *wdsSample) error {
	if c.schema == nil {
		return nil
	}
	if c.jsonFields && s.json.off < 0 {
		for k, a := range c.at {
			if a.ext == "" && a.path != "" {
				return fmt.Errorf("%w: sample %q has no .json member (for %s=json:%s)", ErrFormat, s.key, c.schema.Fields[k].Kind, a.path)
			}
		}
	}
	for k, a := range c.at {
		if a.ext != "" && s.members[k].off < 0 {
			return fmt.Errorf("%w: sample %q has no .%s member (for %s)", ErrFormat, s.key, a.ext, c.schema.Fields[k].Kind)
		}
	}
	return nil
}

// wdsIndexPath is where a URL shard's index is kept: beside its other
// indexes, keyed by the object's version (see objectFingerprint), the
// label field and the schema's fields, so that a later open does not walk
// the shard again.
func wdsIndexPath(cfg wdsConfig, sf *shardFile) string {
	key := sf.fp + "\x00" + cfg.labelField
	if cfg.schema != nil {
		key += "\x00" + cfg.schema.String()
	}
	return filepath.Join(cfg.indexDir, fmt.Sprintf("%s-%016x.wdsindex", filepath.Base(sf.name), xxhash.Sum64String(key)))
}

// indexStreamed indexes URL shards that the shard cache cannot hold all
// at once (see shardStream): from their stored indexes, and where one is
// missing by fetching the shard (read-ahead keeps the next ones coming),
// walking it and letting it go. Each index is given to the stream with the
// checksum of the bytes it was made from. A gzipped shard is refused: its
// members are read by offset from a plain copy, which would be another
// copy of the dataset on local disk.
func (w *WebDataset) indexStreamed(ctx context.Context, files *shardList, cfg wdsConfig, h io.StringWriter) error {
	defer context.AfterFunc(ctx, w.stream.stopAll)()
	n := files.len()
	stored := make([][]wdsIndexEntry, n) // nil: not stored
	var missing []int
	for si := range n {
		sf := &files.files[si]
		h.WriteString(sf.fp)
		w.shards = append(w.shards, &wdsShard{name: sf.name})
		saved := wdsIndexPath(cfg, sf)
		var sum uint64
		if stored[si], sum = readIndex(saved, w.stream.objs[si].Size, len(cfg.at)); stored[si] == nil {
			missing = append(missing, si)
		} else {
			w.stream.indexed(si, sum, saved)
		}
	}
	defer w.stream.planEach(missing)()
	for si := range n {
		if stored[si] != nil {
			w.appendIndex(si, stored[si])
			continue
		}
		r, err := w.stream.acquire(si)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("webdataset: %w", context.Cause(ctx))
			}
			return err
		}
		// Read once each, the shards of this pass are never let go.
		err = w.indexStreamedShard(ctx, si, r.o, cfg, wdsIndexPath(cfg, &files.files[si]))
		w.stream.release(si, r, true)
		if err != nil {
			return err
		}
	}
	return nil
}

// indexStreamedShard walks shard si, fetched as o, and stores its index.
func (w *WebDataset) indexStreamedShard(ctx context.Context, si int, o *openShard, cfg wdsConfig, saved string) error {
	fh := o.fh
	if gz, err := isGzip(fh); err != nil {
		return fmt.Errorf("webdataset: %w", err)
	} else if gz {
		return fmt.Errorf("webdataset: %s: %w: a gzipped shard cannot be streamed through a shard cache smaller than the dataset "+
			"(cache_size=%d): its members are read from a plain copy, another copy of the dataset on local disk; "+
			"use plain .tar shards, or a cache_size that holds the dataset", w.shards[si].name, ErrFormat, w.stream.cache.Limit)
	}
	start := len(w.samples)
	if err := w.index(ctx, si, fh, &cfg); err != nil {
		return err
	}
	w.saveIndex(saved, o.sum, w.samples[start:])
	w.stream.indexed(si, o.sum, saved)
	return nil
}

// ReadAhead fetches the streamed shards ahead of an epoch reading order
// (see [ReadAheader]); for shards on local disk, or all in the shard
// cache, it has nothing to do.
func (w *WebDataset) ReadAhead(order func() []int) (stop func(), err error) {
	if w.stream == nil {
		return func() {}, nil
	}
	return w.stream.planOrder(order, w.shardOf)
}

// CheckOrder refuses an order that ReadAhead would refuse (see
// [OrderChecker]).
func (w *WebDataset) CheckOrder(order func() []int) error {
	if w.stream == nil {
		return nil
	}
	return w.stream.checkOrder(order, w.shardOf)
}

// shardOf is the shard sample i is read from, or -1 for a corrupt sample
// (no read).
func (w *WebDataset) shardOf(i int) int {
	if i < 0 || i >= len(w.samples) || w.samples[i].bad != nil {
		return -1
	}
	return w.samples[i].shard
}

// isGzip reports whether f starts with gzip's magic number.
func isGzip(f *os.File) (bool, error) {
	var magic [2]byte
	n, err := f.ReadAt(magic[:], 0)
	if err != nil && err != io.EOF {
		return false, err
	}
	return n == 2 && magic == [2]byte{0x1f, 0x8b}, nil
}

// counter counts the bytes read through it: after tar's Next, the count is
// the offset of the member's data (tar reads whole 512-byte blocks).
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// index walks one shard's members into samples (see walk), then, with
// fields, reads each sample's fields as Read does, so that a value that
// does not parse or fit its field is found now: a problem is the sample's
// (wdsSample.fail).
func (w *WebDataset) index(ctx context.Context, si int, fh *os.File, cfg *wdsConfig) error {
	start := len(w.samples)
	if err := w.walk(ctx, si, fh, cfg); err != nil || cfg.schema == nil {
		return err
	}
	vals := make([]fields.Value, len(cfg.schema.Fields))
	var scratch []byte
	for i := start; i < len(w.samples); i++ {
		s := &w.samples[i]
		if s.err != nil || s.imageName == "" || (!s.labelFound && cfg.needLabel) || cfg.missing(s) != nil {
			continue // corrupt already
		}
		for k := range vals {
			vals[k].Reset()
		}
		if off, err := w.readFields(fh, s, vals, &scratch, true); err != nil {
			s.fail(off, err)
		}
	}
	return nil
}

// maxListMember bounds a member a list field is parsed from (a .json
// member, a .cls-style text), which is read whole: 64 MiB is past the
// text of MaxTokens tokens.
const maxListMember = 64 << 20

// walk walks one shard's members into samples. A problem with a member
// is its sample's (wdsSample.fail); a header that cannot be read ends the
// walk, the rest of the shard one more sample, a corrupt one.
func (w *WebDataset) walk(ctx context.Context, si int, fh *os.File, cfg *wdsConfig) error {
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	c := &counter{r: fh}
	tr := tar.NewReader(c)
	byKey := map[string]int{}
	name := w.shards[si].name
	p := poller{ctx: ctx}
	var polled int64 // c.n at the last poll
	var next int64   // where the next header starts: after the last member's data, padded to 512 bytes
	for {
		if err := p.poll(c.n - polled); err != nil {
			return fmt.Errorf("webdataset: %s: indexing: %w", name, err)
		}
		polled = c.n
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("webdataset: %w", err) // reading the file, not its contents
		}
		if err != nil {
			off := min(next, size)
			rest := cfg.newSample(si, fmt.Sprintf("(rest of the shard from offset %d)", off), off)
			rest.fail(off, fmt.Errorf("%w: bad tar header: %v; the rest of the shard (%d bytes) cannot be read", ErrFormat, err, size-off))
			w.samples = append(w.samples, rest)
			return nil
		}
		off := c.n
		if hdr.Size > size-off {
			next = size
		} else {
			next = off + (hdr.Size+511)&^511
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		dir, base := path.Split(hdr.Name)
		stem, ext, _ := strings.Cut(base, ".")
		key := dir + stem
		k, ok := byKey[key]
		if !ok {
			k = len(w.samples)
			byKey[key] = k
			w.samples = append(w.samples, cfg.newSample(si, key, off))
		}
		s := &w.samples[k]
		if hdr.Size > size-off {
			// A truncated shard: the member's bytes are not all there.
			s.fail(off, fmt.Errorf("%w: member %s of %d bytes is cut short at %d", ErrFormat, hdr.Name, hdr.Size, size-off))
			return nil
		}
		ext = strings.ToLower(ext)
		for fi, a := range cfg.at {
			if a.ext == "" || a.ext != ext {
				continue
			}
			kind, limit := cfg.schema.Fields[fi].Kind, int64(MaxRecordBytes)
			if kind != fields.Mask && kind != fields.Tensor {
				limit = maxListMember
			}
			if hdr.Size > limit {
				s.fail(off, fmt.Errorf("%w: member %s of %d bytes, past the %d a %s member may hold", ErrFormat, hdr.Name, hdr.Size, limit, kind))
				continue
			}
			s.members[fi] = wdsMember{off, hdr.Size}
		}
		switch {
		case cfg.isImage(ext):
			if hdr.Size > MaxRecordBytes {
				s.fail(off, fmt.Errorf("%w: member %s of %d bytes, past MaxRecordBytes (%d)", ErrFormat, hdr.Name, hdr.Size, MaxRecordBytes))
				continue
			}
			s.imageName, s.off, s.size = hdr.Name, off, hdr.Size
		case ext == cfg.labelExt && ext != "":
			b, err := io.ReadAll(io.LimitReader(tr, 64))
			if err != nil {
				return fmt.Errorf("webdataset: %s: %w", name, err)
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				s.fail(off, fmt.Errorf("%w: %s holds %q, not a class number", ErrLabel, hdr.Name, b))
				continue
			}
			if v < 0 || v >= MaxClasses {
				s.fail(off, fmt.Errorf("%w: %s holds %d, not in 0..%d (MaxClasses-1)", ErrLabel, hdr.Name, v, MaxClasses-1))
				continue
			}
			s.label, s.labelFound = v, true
		case ext == "json":
			if cfg.jsonFields {
				if hdr.Size > maxListMember {
					s.fail(off, fmt.Errorf("%w: member %s of %d bytes, past the %d a .json member may hold", ErrFormat, hdr.Name, hdr.Size, maxListMember))
					continue
				}
				s.json = wdsMember{off, hdr.Size}
			}
			if s.labelFound || cfg.labelField == "" {
				continue
			}
			var m map[string]any
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
				s.fail(off, fmt.Errorf("%w: %s: %v", ErrFormat, hdr.Name, err))
				continue
			}
			v, ok := m[cfg.labelField]
			if !ok {
				continue
			}
			f, isNum := v.(float64)
			if !isNum || f != math.Trunc(f) || f < 0 || f >= MaxClasses {
				s.fail(off, fmt.Errorf("%w: %s: %q is %v, not a class number in 0..%d (MaxClasses-1)", ErrLabel, hdr.Name, cfg.labelField, v, MaxClasses-1))
				continue
			}
			s.label, s.labelFound = int(f), true
		}
	}
}

func (w *WebDataset) Len() int   { return len(w.samples) }
func (w *WebDataset) Info() Info { return w.info }

// Corrupt lists the samples found unusable when the shards were indexed.
func (w *WebDataset) Corrupt() []*RecordError { return w.corrupt }

// Fingerprint covers every shard, the label field and, with fields, the
// schema.
func (w *WebDataset) Fingerprint() (string, error) { return w.fp, nil }

// newSample is the sample key of shard si whose first member's data is at
// off, with no member found yet.
func (c *wdsConfig) newSample(si int, key string, off int64) wdsSample {
	s := wdsSample{shard: si, key: key, first: off, json: wdsMember{-1, 0}}
	if c.schema != nil {
		s.members = make([]wdsMember, len(c.at))
		for k := range s.members {
			s.members[k].off = -1
		}
	}
	return s
}

// scratch is the bytes readFields needs beside a sample's values: the
// largest member it parses.
func (c *wdsConfig) scratch(s *wdsSample) int64 {
	var n int64
	if c.jsonFields {
		n = s.json.size
	}
	for k, a := range c.at {
		if kind := c.schema.Fields[k].Kind; a.ext != "" && kind != fields.Mask && kind != fields.Tensor {
			n = max(n, s.members[k].size)
		}
	}
	return n
}

// readFields reads sample s's fields from its shard, fh, into vals (reset,
// one per schema field), parsing the members of lists in *scratch (grown
// when short), and returns the data offset of the member at fault with an
// error. check is the walk's check of every sample: it also checks that a
// .json member is well formed, and reads no mask (nothing is checked of
// its bytes) and of a tensor only its .npy header.
func (w *WebDataset) readFields(fh io.ReaderAt, s *wdsSample, vals []fields.Value, scratch *[]byte, check bool) (int64, error) {
	c := &w.cfg
	read := func(m wdsMember, dst []byte) error {
		if _, err := fh.ReadAt(dst, m.off); err != nil {
			return fmt.Errorf("%w: %v", ErrFormat, err)
		}
		return nil
	}
	var doc []byte
	if c.jsonFields {
		doc = grow(*scratch, int(s.json.size))
		*scratch = doc
		if err := read(s.json, doc); err != nil {
			return s.json.off, err
		}
		if check && !json.Valid(doc) {
			return s.json.off, fmt.Errorf("%w: %s.json does not parse as JSON", ErrFormat, s.key)
		}
	}
	for k := range c.schema.Fields {
		f, a, v := &c.schema.Fields[k], c.at[k], &vals[k]
		if f.Kind == fields.Image || f.Kind == fields.Label {
			continue
		}
		m := s.members[k]
		var err error
		switch {
		case a.ext == "":
			m = s.json
			var raw []byte
			var ok bool
			if raw, ok, err = jsonPath(doc, a.path); err == nil && !ok {
				err = fmt.Errorf("%w: no %q", ErrFormat, a.path)
			}
			if err == nil {
				err = parseList(f, v, raw, true)
			}
			if err != nil {
				return m.off, fmt.Errorf("%s.json: %s: %w", s.key, f.Kind, err)
			}
			continue
		case f.Kind == fields.Mask:
			if !check {
				v.Bytes = grow(v.Bytes, int(m.size))
				err = read(m, v.Bytes)
			}
		case f.Kind == fields.Tensor:
			err = w.readTensor(f, a, m, v, read, scratch, check)
		default:
			b := grow(*scratch, int(m.size))
			*scratch = b
			if err = read(m, b); err == nil {
				err = parseList(f, v, b, a.json)
			}
		}
		if err != nil {
			return m.off, fmt.Errorf("%s.%s: %s: %w", s.key, a.ext, f.Kind, err)
		}
	}
	return s.first, checkBoxClasses(c.schema, vals)
}

// readTensor reads a tensor's member m into v.Bytes: an .npy file's data,
// its header checked, or raw bytes of exactly the tensor's size. With
// check, it reads only an .npy header, into *scratch.
func (w *WebDataset) readTensor(f *fields.Field, a wdsField, m wdsMember, v *fields.Value, read func(wdsMember, []byte) error, scratch *[]byte, check bool) error {
	want := int64(tensorBytes(f))
	if !a.npy {
		if m.size != want {
			return fmt.Errorf("%w: %d bytes, want %d (%s %v)", fields.ErrValue, m.size, want, f.DType, f.Shape)
		}
		if check {
			return nil
		}
		v.Bytes = grow(v.Bytes, int(m.size))
		return read(m, v.Bytes)
	}
	b := v.Bytes
	if check {
		b = grow(*scratch, int(min(m.size, 1<<16)))
		*scratch = b
	} else {
		b = grow(b, int(m.size))
		v.Bytes = b
	}
	if err := read(wdsMember{m.off, int64(len(b))}, b); err != nil {
		return err
	}
	n, err := npyData(b, f)
	if err != nil {
		return err
	}
	if m.size-int64(n) != want {
		return fmt.Errorf("%w: .npy data of %d bytes, want %d (%s %v)", fields.ErrValue, m.size-int64(n), want, f.DType, f.Shape)
	}
	if !check {
		v.Bytes = b[:copy(b, b[n:])]
	}
	return nil
}

// parseList parses b, a member's text or a JSON value (inJSON), into a
// list field's value and checks it against the field.
func parseList(f *fields.Field, v *fields.Value, b []byte, inJSON bool) error {
	var err error
	limit := listBound(f)
	switch {
	case f.Kind == fields.Boxes && inJSON:
		v.Floats, err = appendJSONBoxes(v.Floats, b, limit)
	case f.Kind == fields.Boxes:
		v.Floats, err = appendTextFloats(v.Floats, b, limit)
	case inJSON:
		v.Ints, err = appendJSONInts(v.Ints, b, limit)
	default:
		v.Ints, err = appendTextInts(v.Ints, b, limit)
	}
	if errors.Is(err, errTooMany) {
		err = tooMany(f)
	}
	if err != nil {
		return err
	}
	return checkValue(f, v)
}

// Read sets rec.Enc to sample i's image bytes, and with fields
// rec.Fields to its fields' values (see [WithFields]): a mask's or
// tensor's bytes in memory of its value's, the members of lists parsed in
// rec.Buf after the image.
func (w *WebDataset) Read(i int, rec *Record) error {
	if i < 0 || i >= len(w.samples) {
		return fmt.Errorf("webdataset: sample %d out of range [0, %d)", i, len(w.samples))
	}
	s := &w.samples[i]
	if s.bad != nil {
		return s.bad
	}
	sh := w.shards[s.shard]
	var fh io.ReaderAt = sh.fh
	if w.stream != nil {
		r, err := w.stream.acquire(s.shard)
		if err != nil {
			return err
		}
		defer w.stream.release(s.shard, r, true)
		fh = r
	}
	need := s.size
	if w.cfg.schema != nil {
		need += w.cfg.scratch(s)
	}
	if cap(rec.Buf) < int(need) {
		rec.Buf = make([]byte, need)
	}
	buf := rec.Buf[:s.size]
	if _, err := fh.ReadAt(buf, s.off); err != nil {
		return &RecordError{File: sh.name, Offset: s.off, Index: i, Err: fmt.Errorf("%w: %v", ErrFormat, err)}
	}
	if w.cfg.schema != nil {
		scratch := rec.Buf[s.size:need]
		if off, err := w.readFields(fh, s, fieldValues(rec, len(w.cfg.schema.Fields)), &scratch, false); err != nil {
			return &RecordError{File: sh.name, Offset: off, Index: i, Err: err}
		}
	}
	*rec = Record{Enc: buf, Label: s.label, Buf: rec.Buf, Path: sh.name + ":" + s.imageName, Fields: rec.Fields}
	return nil
}

func (w *WebDataset) Close() error {
	if w.stream != nil {
		w.stream.close()
	}
	var errs []error
	for _, s := range w.shards {
		if s.fh != nil {
			errs = append(errs, s.fh.Close())
		}
	}
	return errors.Join(errs...)
}

// Shards returns the number of samples in each shard, in index order.
func (w *WebDataset) Shards() []int {
	n := make([]int, len(w.shards))
	for _, s := range w.samples {
		n[s.shard]++
	}
	return n
}

// wdsIndex is a stored shard index: the xxhash64 of the shard's bytes it
// was made from, as the shard cache keeps it, and its samples.
type wdsIndex struct {
	Sum     uint64          `json:"sum"`
	Samples []wdsIndexEntry `json:"samples"`
}

// wdsIndexEntry is one sample of a stored shard index.
type wdsIndexEntry struct {
	Key      string `json:"k"`
	First    int64  `json:"f"`
	Off      int64  `json:"o"`
	Size     int64  `json:"s"`
	Label    int    `json:"l"`
	Image    string `json:"i"`
	HasLabel bool   `json:"h"`
	// With fields: the .json member and each field's member, as offset
	// and size (offset -1: none).
	JSON    *[2]int64  `json:"j,omitempty"`
	Members [][2]int64 `json:"m,omitempty"`
}

// saveIndex stores the samples of one shard, made from bytes of checksum
// sum, at path (see storeIndex), unless one of them has a problem (whose
// error would not survive the trip): such a shard is walked on every open.
func (w *WebDataset) saveIndex(path string, sum uint64, samples []wdsSample) {
	idx := wdsIndex{Sum: sum, Samples: make([]wdsIndexEntry, len(samples))}
	for i, s := range samples {
		if s.err != nil {
			return
		}
		e := wdsIndexEntry{Key: s.key, First: s.first, Off: s.off, Size: s.size, Label: s.label, Image: s.imageName, HasLabel: s.labelFound}
		if w.cfg.schema != nil {
			e.JSON = &[2]int64{s.json.off, s.json.size}
			e.Members = make([][2]int64, len(s.members))
			for k, m := range s.members {
				e.Members[k] = [2]int64{m.off, m.size}
			}
		}
		idx.Samples[i] = e
	}
	if b, err := json.Marshal(idx); err == nil {
		storeIndex(path, b)
	}
}

// loadIndex appends shard si's samples from the index stored at path and
// reports whether it could: the file must parse, be made from bytes of
// checksum sum, and every member must lie within the shard's size bytes.
func (w *WebDataset) loadIndex(path string, si int, size int64, sum uint64) bool {
	entries, made := readIndex(path, size, len(w.cfg.at))
	if entries == nil || made != sum {
		return false
	}
	w.appendIndex(si, entries)
	return true
}

// readIndex returns the entries of the index stored at path for a shard
// of size bytes and the checksum of the bytes it was made from, or nil if
// there is none that parses with every member within the shard and the
// members of fields fields (an index stored before checksums were, a bare
// list of entries, does not).
func readIndex(path string, size int64, fields int) ([]wdsIndexEntry, uint64) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0
	}
	var idx wdsIndex
	if json.Unmarshal(b, &idx) != nil || idx.Samples == nil {
		return nil, 0
	}
	within := func(m [2]int64) bool {
		return m[0] == -1 || (m[0] >= 0 && m[1] >= 0 && m[1] <= MaxRecordBytes && m[0] <= size-m[1])
	}
	for _, e := range idx.Samples {
		if e.First < 0 || e.First > size || e.Off < 0 || e.Size < 0 || e.Size > MaxRecordBytes || e.Off > size-e.Size ||
			e.Label < 0 || e.Label >= MaxClasses || len(e.Members) != fields || (fields > 0 && (e.JSON == nil || !within(*e.JSON))) {
			return nil, 0
		}
		for _, m := range e.Members {
			if !within(m) {
				return nil, 0
			}
		}
	}
	return idx.Samples, idx.Sum
}

// appendIndex appends shard si's samples from its stored index.
func (w *WebDataset) appendIndex(si int, entries []wdsIndexEntry) {
	for _, e := range entries {
		s := w.cfg.newSample(si, e.Key, e.First)
		s.off, s.size, s.label, s.imageName, s.labelFound = e.Off, e.Size, e.Label, e.Image, e.HasLabel
		if e.JSON != nil {
			s.json = wdsMember{e.JSON[0], e.JSON[1]}
		}
		for k, m := range e.Members {
			s.members[k] = wdsMember{m[0], m[1]}
		}
		w.samples = append(w.samples, s)
	}
}
