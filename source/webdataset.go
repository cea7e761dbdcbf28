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
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
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
}

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
func OpenWebDataset(ctx context.Context, pattern string, opts ...Option) (*WebDataset, error) {
	o, err := apply("webdataset", opts, "WithJSONLabel", "WithIndexDir", "WithRemote")
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
	if cfg.indexDir != "" {
		args = append(args, Arg{"index_dir", cfg.indexDir})
	}
	args = append(args, cfg.remote.args(pattern)...)
	files, err := shardFiles(ctx, "webdataset", pattern, cfg.remote, &cfg.indexDir)
	if err != nil {
		return nil, err
	}
	defer files.close()
	w := &WebDataset{}
	h := xxhash.New()
	fmt.Fprintf(h, "%s\x00", cfg.labelField)
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
		if err := w.index(ctx, si, fh, cfg.labelField); err != nil {
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
		switch {
		case s.err != nil:
			e.Offset, e.Err = s.errOff, s.err
		case s.imageName == "":
			e.Offset, e.Err = s.first, fmt.Errorf("%w: sample %q has no .jpg, .jpeg or .png member", ErrUnknownFormat, s.key)
		case !s.labelFound:
			e.Offset, e.Err = s.off, fmt.Errorf("%w: sample %q has no .cls member and no %q in a .json member", ErrFormat, s.key, cfg.labelField)
		default:
			maxLabel = max(maxLabel, s.label)
			seen[s.label] = true
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
	w.info = Info{Name: "webdataset", Identity: fmt.Sprintf("webdataset %s (%d shards)", pattern, files.len()), C: 3, Classes: classes, Encoded: true, Args: args}
	return w, nil
}

// wdsIndexPath is where a URL shard's index is kept: beside its other
// indexes, keyed by the object's version (see objectFingerprint) and the
// label field, so that a later open does not walk the shard again.
func wdsIndexPath(cfg wdsConfig, sf *shardFile) string {
	return filepath.Join(cfg.indexDir, fmt.Sprintf("%s-%016x.wdsindex", filepath.Base(sf.name), xxhash.Sum64String(sf.fp+"\x00"+cfg.labelField)))
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
		if stored[si], sum = readIndex(saved, w.stream.objs[si].Size); stored[si] == nil {
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
	if err := w.index(ctx, si, fh, cfg.labelField); err != nil {
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

// index walks one shard's members into samples. A problem with a member
// is its sample's (wdsSample.fail); a header that cannot be read ends the
// walk, the rest of the shard one more sample, a corrupt one.
func (w *WebDataset) index(ctx context.Context, si int, fh *os.File, labelField string) error {
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
			w.samples = append(w.samples, wdsSample{shard: si, key: fmt.Sprintf("(rest of the shard from offset %d)", off), first: off,
				err: fmt.Errorf("%w: bad tar header: %v; the rest of the shard (%d bytes) cannot be read", ErrFormat, err, size-off), errOff: off})
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
			w.samples = append(w.samples, wdsSample{shard: si, key: key, first: off})
		}
		s := &w.samples[k]
		if hdr.Size > size-off {
			// A truncated shard: the member's bytes are not all there.
			s.fail(off, fmt.Errorf("%w: member %s of %d bytes is cut short at %d", ErrFormat, hdr.Name, hdr.Size, size-off))
			return nil
		}
		switch strings.ToLower(ext) {
		case "jpg", "jpeg", "png":
			if hdr.Size > MaxRecordBytes {
				s.fail(off, fmt.Errorf("%w: member %s of %d bytes, past MaxRecordBytes (%d)", ErrFormat, hdr.Name, hdr.Size, MaxRecordBytes))
				continue
			}
			s.imageName, s.off, s.size = hdr.Name, off, hdr.Size
		case "cls":
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
		case "json":
			if s.labelFound {
				continue
			}
			var m map[string]any
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
				s.fail(off, fmt.Errorf("%w: %s: %v", ErrFormat, hdr.Name, err))
				continue
			}
			v, ok := m[labelField]
			if !ok {
				continue
			}
			f, isNum := v.(float64)
			if !isNum || f != math.Trunc(f) || f < 0 || f >= MaxClasses {
				s.fail(off, fmt.Errorf("%w: %s: %q is %v, not a class number in 0..%d (MaxClasses-1)", ErrLabel, hdr.Name, labelField, v, MaxClasses-1))
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

// Fingerprint covers every shard and the label field.
func (w *WebDataset) Fingerprint() (string, error) { return w.fp, nil }

// Read sets rec.Enc to sample i's image bytes.
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
	if cap(rec.Buf) < int(s.size) {
		rec.Buf = make([]byte, s.size)
	}
	buf := rec.Buf[:s.size]
	if _, err := fh.ReadAt(buf, s.off); err != nil {
		return &RecordError{File: sh.name, Offset: s.off, Index: i, Err: fmt.Errorf("%w: %v", ErrFormat, err)}
	}
	*rec = Record{Enc: buf, Label: s.label, Buf: rec.Buf, Path: sh.name + ":" + s.imageName}
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
		idx.Samples[i] = wdsIndexEntry{s.key, s.first, s.off, s.size, s.label, s.imageName, s.labelFound}
	}
	if b, err := json.Marshal(idx); err == nil {
		storeIndex(path, b)
	}
}

// loadIndex appends shard si's samples from the index stored at path and
// reports whether it could: the file must parse, be made from bytes of
// checksum sum, and every member must lie within the shard's size bytes.
func (w *WebDataset) loadIndex(path string, si int, size int64, sum uint64) bool {
	entries, made := readIndex(path, size)
	if entries == nil || made != sum {
		return false
	}
	w.appendIndex(si, entries)
	return true
}

// readIndex returns the entries of the index stored at path for a shard
// of size bytes and the checksum of the bytes it was made from, or nil if
// there is none that parses with every member within the shard (an index
// stored before checksums were, a bare list of entries, does not).
func readIndex(path string, size int64) ([]wdsIndexEntry, uint64) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0
	}
	var idx wdsIndex
	if json.Unmarshal(b, &idx) != nil || idx.Samples == nil {
		return nil, 0
	}
	for _, e := range idx.Samples {
		if e.First < 0 || e.First > size || e.Off < 0 || e.Size < 0 || e.Size > MaxRecordBytes || e.Off > size-e.Size ||
			e.Label < 0 || e.Label >= MaxClasses {
			return nil, 0
		}
	}
	return idx.Samples, idx.Sum
}

// appendIndex appends shard si's samples from its stored index.
func (w *WebDataset) appendIndex(si int, entries []wdsIndexEntry) {
	for _, e := range entries {
		w.samples = append(w.samples, wdsSample{shard: si, key: e.Key, first: e.First, off: e.Off, size: e.Size,
			label: e.Label, imageName: e.Image, labelFound: e.HasLabel})
	}
}
