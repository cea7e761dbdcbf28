package source

import (
	"archive/tar"
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
	samples []wdsSample
	info    Info
	corrupt []*RecordError
	fp      string
}

type wdsShard struct {
	name string // as found
	fh   *os.File
}

type wdsSample struct {
	shard      int
	key        string
	off, size  int64 // the image member's data
	label      int
	imageName  string
	labelFound bool
}

// WebDatasetOption configures a WebDataset source.
type WebDatasetOption func(*wdsConfig)

type wdsConfig struct {
	labelField string
	indexDir   string
}

// WithJSONLabel takes labels from field of each sample's .json member when
// it has no .cls member.
func WithJSONLabel(field string) WebDatasetOption { return func(c *wdsConfig) { c.labelField = field } }

// WithWDSIndexDir sets where gzipped shards are decompressed to. Default:
// $PIPE_CACHE/webdataset.
func WithWDSIndexDir(dir string) WebDatasetOption { return func(c *wdsConfig) { c.indexDir = dir } }

// OpenWebDataset opens the shards matching pattern (a glob), in sorted
// order. Samples without an image or a label, and a member cut short by a
// truncated shard, are corrupt records (see Corrupt). Opening reads every
// shard (and decompresses the gzipped ones the index directory lacks);
// cancelling ctx stops that within about a megabyte of reading, and the
// error wraps ctx's.
func OpenWebDataset(ctx context.Context, pattern string, opts ...WebDatasetOption) (*WebDataset, error) {
	cfg := wdsConfig{labelField: "label"}
	for _, o := range opts {
		o(&cfg)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("webdataset: %w", err)
	}
	names, err := shardFiles("webdataset", pattern, &cfg.indexDir)
	if err != nil {
		return nil, err
	}
	w := &WebDataset{}
	h := xxhash.New()
	fmt.Fprintf(h, "%s\x00", cfg.labelField)
	maxLabel := -1
	for si, name := range names {
		fp, err := fileFingerprint(name)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		}
		h.WriteString(fp)
		plain := name
		if gz, err := isGzip(name); err != nil {
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		} else if gz {
			plain = filepath.Join(cfg.indexDir, fmt.Sprintf("%s-%016x.tar", filepath.Base(name), xxhash.Sum64String(fp)))
			if _, err := os.Stat(plain); err != nil {
				if err := gunzipCopy(ctx, name, plain, "webdataset"); err != nil {
					w.Close()
					return nil, err
				}
			}
		}
		fh, err := os.Open(plain)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("webdataset: %w", err)
		}
		w.shards = append(w.shards, &wdsShard{name: name, fh: fh})
		if err := w.index(ctx, si, fh, cfg.labelField); err != nil {
			w.Close()
			return nil, err
		}
	}
	for i, s := range w.samples {
		switch {
		case s.imageName == "":
			w.corrupt = append(w.corrupt, &RecordError{File: w.shards[s.shard].name, Index: i,
				Err: fmt.Errorf("%w: sample %q has no .jpg, .jpeg or .png member", ErrUnknownFormat, s.key)})
		case !s.labelFound:
			w.corrupt = append(w.corrupt, &RecordError{File: w.shards[s.shard].name, Offset: s.off, Index: i,
				Err: fmt.Errorf("%w: sample %q has no .cls member and no %q in a .json member", ErrFormat, s.key, cfg.labelField)})
		case s.label < 0:
			w.corrupt = append(w.corrupt, &RecordError{File: w.shards[s.shard].name, Offset: s.off, Index: i,
				Err: fmt.Errorf("%w: sample %q: label %d", ErrLabel, s.key, s.label)})
		default:
			maxLabel = max(maxLabel, s.label)
		}
	}
	if len(w.samples) == 0 {
		w.Close()
		return nil, fmt.Errorf("webdataset: %s: %w: no samples", pattern, ErrFormat)
	}
	classes := make([]string, maxLabel+1)
	for i := range classes {
		classes[i] = strconv.Itoa(i)
	}
	w.fp = fmt.Sprintf("%016x", h.Sum64())
	w.info = Info{Name: "webdataset", Identity: fmt.Sprintf("webdataset %s (%d shards)", pattern, len(names)), C: 3, Classes: classes, Encoded: true}
	return w, nil
}

func isGzip(name string) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [2]byte
	n, _ := io.ReadFull(f, magic[:])
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

// index walks one shard's members into samples.
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
	for {
		if err := p.poll(c.n - polled); err != nil {
			return fmt.Errorf("webdataset: %s: indexing: %w", name, err)
		}
		polled = c.n
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &RecordError{File: name, Offset: c.n, Index: len(w.samples), Err: fmt.Errorf("%w: bad tar header: %v", ErrFormat, err)}
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		off := c.n
		dir, base := path.Split(hdr.Name)
		stem, ext, _ := strings.Cut(base, ".")
		key := dir + stem
		k, ok := byKey[key]
		if !ok {
			k = len(w.samples)
			byKey[key] = k
			w.samples = append(w.samples, wdsSample{shard: si, key: key, label: -1})
		}
		s := &w.samples[k]
		if off+hdr.Size > size {
			// A truncated shard: the member's bytes are not all there.
			w.corrupt = append(w.corrupt, &RecordError{File: name, Offset: off, Index: k,
				Err: fmt.Errorf("%w: member %s of %d bytes is cut short at %d", ErrFormat, hdr.Name, hdr.Size, size-off)})
			s.imageName = "" // unusable whatever it held
			return nil
		}
		switch strings.ToLower(ext) {
		case "jpg", "jpeg", "png":
			s.imageName, s.off, s.size = hdr.Name, off, hdr.Size
		case "cls":
			b, err := io.ReadAll(io.LimitReader(tr, 64))
			if err != nil {
				return &RecordError{File: name, Offset: off, Index: k, Err: fmt.Errorf("%w: %v", ErrFormat, err)}
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return &RecordError{File: name, Offset: off, Index: k, Err: fmt.Errorf("%w: %s holds %q, not a class number", ErrLabel, hdr.Name, b)}
			}
			s.label, s.labelFound = v, true
		case "json":
			if s.labelFound {
				continue
			}
			var m map[string]any
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
				return &RecordError{File: name, Offset: off, Index: k, Err: fmt.Errorf("%w: %s: %v", ErrFormat, hdr.Name, err)}
			}
			if v, ok := m[labelField].(float64); ok && v == float64(int(v)) {
				s.label, s.labelFound = int(v), true
			}
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
	s := w.samples[i]
	sh := w.shards[s.shard]
	if s.imageName == "" || !s.labelFound || s.label < 0 {
		for _, c := range w.corrupt {
			if c.Index == i {
				return c
			}
		}
		return &RecordError{File: sh.name, Index: i, Err: fmt.Errorf("%w: sample %q is incomplete", ErrFormat, s.key)}
	}
	if cap(rec.Buf) < int(s.size) {
		rec.Buf = make([]byte, s.size)
	}
	buf := rec.Buf[:s.size]
	if _, err := sh.fh.ReadAt(buf, s.off); err != nil {
		return &RecordError{File: sh.name, Offset: s.off, Index: i, Err: fmt.Errorf("%w: %v", ErrFormat, err)}
	}
	*rec = Record{Enc: buf, Label: s.label, Buf: rec.Buf, Path: sh.name + ":" + s.imageName}
	return nil
}

func (w *WebDataset) Close() error {
	var errs []error
	for _, s := range w.shards {
		errs = append(errs, s.fh.Close())
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
