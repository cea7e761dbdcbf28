package source

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/gzip"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/atomicfile"
)

// TFRecord reads tf.train.Example records from TFRecord files: each record
// is a little-endian uint64 length, the masked CRC-32C of those 8 bytes,
// the data, and the masked CRC-32C of the data; both checksums are
// verified on every read. A header that cannot be trusted (cut short,
// failing its CRC, or giving a length past the end of the file or
// MaxRecordBytes) ends what can be read of its file: the records before it
// read, and it is one more record, a corrupt one, standing for the rest of
// the file. Random access goes through an offset index built
// on first use and stored in an index directory, keyed by the file's
// fingerprint, so a changed file gets a new one; the index of a URL's
// file also holds the checksum of the bytes it was made from, and is made
// again for others. GZIP-compressed files are decompressed once into that
// directory. Indexes and decompressed copies
// appear there only whole, so an open that fails or is cancelled leaves
// nothing half written.
type TFRecord struct {
	files    []*tfFile
	stream   *shardStream // URL files more than the shard cache holds; else nil
	starts   []int        // global index of each file's first record
	n        int
	imageKey string
	labelKey string
	textKey  string
	offset   int // subtracted from labels
	// keys are the features parseExample finds: the image's, the
	// label's, the class text's, then the fields' (see tfField).
	keys      []string
	schema    *fields.Schema // from WithFields; else nil
	at        []tfField      // where each schema field is, by field index
	needLabel bool           // a record without a label is corrupt
	corrupt   []*RecordError
	bad       map[int]*RecordError // corrupt by index
	info      Info
	fp        string
}

type tfFile struct {
	name    string   // as given
	path    string   // the plain TFRecord data read (the decompressed copy for GZIP)
	fh      *os.File // nil when streamed
	size    int64    // of path
	offsets []int64  // record start offsets in path; the last may be a corrupt tail
}

type tfConfig struct {
	imageKey, labelKey, textKey string
	indexDir                    string
	labelOffset                 int
	remote                      *Remote
}

// tfField is where a TFRecord's field is: the feature keys[key] (-1: the
// image or int label, read as without fields), and for the TF Object
// Detection API's boxes the four keys from key on.
type tfField struct {
	key  int
	four bool
}

// maxTFKeys bounds the features a record is searched for: the image, the
// label, the class text, and the fields' (at most 9: boxes take four).
const maxTFKeys = 16

// Default feature keys of the fields, where the TF Object Detection API
// and the TF segmentation tools write them.
const (
	tfMaskKey    = "image/segmentation/class/encoded"
	tfClassesKey = "image/object/class/label"
	tfTokensKey  = "tokens"
	tfTensorKey  = "tensor"
)

// tfBoxKeys are the TF Object Detection API's box corners: four float
// lists, fractions of the image's width and height.
var tfBoxKeys = [4]string{"image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax"}

// compileFields sets the keys of the image, the label and every field of
// schema, refusing boxes in the OD API's four lists unless the schema
// takes them as they are (normalized, xyxy).
func (t *TFRecord) compileFields(schema *fields.Schema, cfg *tfConfig) error {
	t.schema, t.at, t.needLabel = schema, make([]tfField, len(schema.Fields)), schema.Has(fields.Label)
	if f := schema.Field(fields.Image); f.Key != "" {
		cfg.imageKey = f.Key
	}
	if f := schema.Field(fields.Label); f != nil && f.Key != "" {
		cfg.labelKey = f.Key
	}
	keys := []string{cfg.imageKey, cfg.labelKey, cfg.textKey}
	for k, f := range schema.Fields {
		key := f.Key
		switch f.Kind {
		case fields.Image, fields.Label:
			t.at[k] = tfField{key: -1}
			continue
		case fields.Boxes:
			if key == "" {
				if !schema.Normalized || schema.BoxFormat != fields.XYXY {
					return fmt.Errorf("%w: tfrecord: boxes: the TF Object Detection API's %s, ymin, xmax and ymax are fractions of the image, "+
						"left, top, right, bottom: set normalized=true (and box_format=xyxy), or name a float feature of 4 numbers a box in your format (boxes=KEY)",
						fields.ErrSchema, tfBoxKeys[0])
				}
				t.at[k] = tfField{key: len(keys), four: true}
				keys = append(keys, tfBoxKeys[:]...)
				continue
			}
		case fields.Mask:
			key = cmp.Or(key, tfMaskKey)
		case fields.Classes:
			key = cmp.Or(key, tfClassesKey)
		case fields.Labels:
			key = cmp.Or(key, cfg.labelKey)
		case fields.Tokens:
			key = cmp.Or(key, tfTokensKey)
		case fields.Tensor:
			key = cmp.Or(key, tfTensorKey)
		}
		t.at[k] = tfField{key: len(keys)}
		keys = append(keys, key)
	}
	t.keys = keys
	return nil
}

// WithFeatureKeys sets the Example features holding the encoded image and
// the integer label. Defaults: image/encoded and image/class/label (the
// build_image_data layout).
// For OpenTFRecord.
func WithFeatureKeys(image, label string) Option {
	return Option{"WithFeatureKeys", func(o *options) error {
		if image == "" || label == "" {
			return fmt.Errorf("image key %q, label key %q: both must be named", image, label)
		}
		o.tf.imageKey, o.tf.labelKey = image, label
		return nil
	}}
}

// WithLabelOffset subtracts off (≥ 0) from every label: build_image_data
// numbers classes from 1 (0 was background), so 1 makes them 0-based.
// Default 0. For OpenTFRecord.
func WithLabelOffset(off int) Option {
	return Option{"WithLabelOffset", func(o *options) error {
		if off < 0 {
			return fmt.Errorf("offset %d: must be 0 or more", off)
		}
		o.tf.labelOffset = off
		return nil
	}}
}

// ErrCRC means a TFRecord checksum does not match its bytes. It wraps
// [ErrChecksum]: a CRC mismatch is damaged data, like any other checksum
// mismatch.
var ErrCRC = fmt.Errorf("CRC-32C %w", ErrChecksum)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// OpenTFRecord opens the files pattern names: its brace groups expanded
// (train-{00000..01023}-of-01024), each then a glob of local files, in
// sorted order, or a URL (s3://bucket/train-*, https://host/train-0.tfrecord)
// whose objects are fetched into the shard cache (see [Remote]) and read
// from there; errors name the URL.
// Opening reads every file: it decompresses GZIP files and builds indexes
// the index directory lacks, then reads every record's label. Records that
// fail their checks then (a CRC, the Example, a missing image or label, a
// label below label_offset or not below MaxClasses, a corrupt tail) are
// listed by Corrupt, and Read of one returns the same error. Cancelling ctx
// stops opening within about a megabyte of reading; the error wraps ctx's.
//
// It takes WithFields. A field's key is then a feature's name (an image's
// or label's replaces WithFeatureKeys'). Without a key: mask
// image/segmentation/class/encoded, bytes; boxes the TF Object Detection
// API's image/object/bbox/xmin, ymin, xmax and ymax float lists,
// interleaved into one box each, left, top, right, bottom — fractions of
// the image, so the schema must say normalized and xyxy (a named key is
// one float or int64 list of 4 numbers a box, in the schema's format and
// units); classes image/object/class/label, int64, as written (the OD API
// numbers them from 1); labels an int64 list, by default the label's
// feature (a multi-label record lists its labels where a single-label one
// has one), label_offset subtracted from each; tokens "tokens", int64; tensor
// "tensor": a bytes feature of exactly the tensor's bytes, or a float or
// int64 list of its values, each converted to the field's dtype, which
// must hold it exactly. A mask's bytes point into Record.Buf. A record
// without a feature a field needs is corrupt (ErrFormat, naming it: an
// image without objects has its lists, empty, as the OD API writes them),
// as is one of another type, or holding what does not fit its field
// (fields.ErrValue); records are checked as their labels are read at open.
// Without a label field, a record needs no label (its Label is 0).
func OpenTFRecord(ctx context.Context, pattern string, opts ...Option) (*TFRecord, error) {
	o, err := apply("tfrecord", opts, "WithFeatureKeys", "WithLabelOffset", "WithIndexDir", "WithRemote", "WithFields")
	if err != nil {
		return nil, err
	}
	cfg := o.tf
	if cfg.imageKey == "" {
		cfg.imageKey, cfg.labelKey = "image/encoded", "image/class/label"
	}
	cfg.textKey, cfg.indexDir, cfg.remote = "image/class/text", o.indexDir, o.remote
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tfrecord: %w", err)
	}
	args := []Arg{{"path", pattern}, {"image_key", cfg.imageKey}, {"label_key", cfg.labelKey}, {"label_offset", strconv.Itoa(cfg.labelOffset)}}
	if cfg.indexDir != "" {
		args = append(args, Arg{"index_dir", cfg.indexDir})
	}
	args = append(args, cfg.remote.args(pattern)...)
	t := &TFRecord{offset: cfg.labelOffset, needLabel: true}
	if o.fields != nil {
		if err := t.compileFields(o.fields, &cfg); err != nil {
			return nil, err
		}
	} else {
		t.keys = []string{cfg.imageKey, cfg.labelKey, cfg.textKey}
	}
	t.imageKey, t.labelKey, t.textKey = cfg.imageKey, cfg.labelKey, cfg.textKey
	files, err := shardFiles(ctx, "tfrecord", pattern, cfg.remote, &cfg.indexDir)
	if err != nil {
		return nil, err
	}
	defer files.close()
	h := xxhash.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00", cfg.imageKey, cfg.labelKey, cfg.labelOffset)
	if t.schema != nil {
		fmt.Fprintf(h, "%s\x00%q\x00", t.schema, t.keys)
	}
	labs := make([]*tfLabels, files.len())
	if files.stream != nil {
		t.stream, files.stream = files.stream, nil
		if err := t.openStreamed(ctx, files, cfg, h, labs); err != nil {
			t.Close()
			return nil, err
		}
	}
	for i := range files.len() {
		if t.stream != nil {
			break
		}
		sf, err := files.get(i)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tfrecord: %w", err)
		}
		fp, err := sf.fingerprint()
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("tfrecord: %w", err)
		}
		h.WriteString(fp)
		f, err := openTFFile(ctx, sf, fp, cfg.indexDir)
		if err != nil {
			t.Close()
			return nil, err
		}
		t.starts = append(t.starts, t.n)
		t.n += len(f.offsets)
		t.files = append(t.files, f)
	}
	t.fp = fmt.Sprintf("%016x", h.Sum64())
	if t.n == 0 {
		t.Close()
		return nil, fmt.Errorf("tfrecord: %s: %w: no records", pattern, ErrFormat)
	}
	classes, err := t.classes(ctx, pattern, cfg.labelOffset, labs)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.info = Info{Name: "tfrecord", Identity: fmt.Sprintf("tfrecord %s (%d files)", pattern, files.len()), C: 3, Classes: classes, Encoded: true, Args: args, Fields: o.fields}
	return t, nil
}

// tfKey names a file's index and copies in the index directory: its base
// name and a hash of its fingerprint.
func tfKey(name, fp string) string {
	return fmt.Sprintf("%s-%016x", filepath.Base(name), xxhash.Sum64String(fp))
}

// openStreamed opens URL files that the shard cache cannot hold all at
// once (see shardStream) from their stored offsets and labels, fetching
// (read-ahead keeping the next ones coming), indexing and reading the
// labels of those whose are not stored yet, and letting each go. labs
// gets each file's labels. A GZIP file is refused: its records are read
// from a plain copy, another copy of the dataset on local disk.
func (t *TFRecord) openStreamed(ctx context.Context, files *shardList, cfg tfConfig, h io.StringWriter, labs []*tfLabels) error {
	defer context.AfterFunc(ctx, t.stream.stopAll)()
	n := files.len()
	what := fmt.Sprintf("%s\x00%s\x00%s\x00%d", cfg.imageKey, cfg.labelKey, cfg.textKey, cfg.labelOffset)
	if t.schema != nil {
		// The records were checked for the fields too.
		what += fmt.Sprintf("\x00%s\x00%q", t.schema, t.keys)
	}
	labelsKey := fmt.Sprintf("%016x", xxhash.Sum64String(what))
	// What is stored of each file, beside its other indexes: its offsets
	// (stored[k].index, as openTFFile keeps them), then its labels, both
	// made from bytes of checksum stored[k].sum.
	stored := make([]tfStored, n)
	var missing []int
	for k := range n {
		sf := &files.files[k]
		h.WriteString(sf.fp)
		key := filepath.Join(cfg.indexDir, tfKey(sf.name, sf.fp))
		stored[k].index, stored[k].labels = key+".index", key+"-"+labelsKey+".labels"
		f := &tfFile{name: sf.name, size: t.stream.objs[k].Size}
		if b, err := os.ReadFile(stored[k].index); err == nil {
			f.offsets, stored[k].sum = parseIndex(b, f.size)
		}
		if f.offsets != nil {
			labs[k] = loadLabels(stored[k].labels, stored[k].sum)
		}
		if labs[k] == nil {
			missing = append(missing, k)
		} else {
			t.stream.indexed(k, stored[k].sum, stored[k].index, stored[k].labels)
		}
		t.files = append(t.files, f)
	}
	defer t.stream.planEach(missing)()
	p := poller{ctx: ctx}
	for k, f := range t.files {
		t.starts = append(t.starts, t.n)
		if labs[k] == nil {
			if err := t.fetchLabels(ctx, &p, k, cfg.labelOffset, stored[k], labs); err != nil {
				return err
			}
		}
		t.n += len(f.offsets)
	}
	return nil
}

// tfStored is what is stored of a streamed file: where its offsets and its
// labels are kept, and the checksum of the bytes the offsets were made
// from.
type tfStored struct {
	index, labels string
	sum           uint64
}

// fetchLabels fetches streamed file k (t.starts[k] set), indexes it unless
// its offsets were stored from the bytes fetched (else storing them at
// st.index), reads its labels into labs[k] and stores them at st.labels
// (unless a record is bad: such a file is read at every open, as a
// WebDataset shard with a bad member is walked).
func (t *TFRecord) fetchLabels(ctx context.Context, p *poller, k, labelOffset int, st tfStored, labs []*tfLabels) error {
	f := t.files[k]
	r, err := t.stream.acquire(k)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("tfrecord: %w", context.Cause(ctx))
		}
		return err
	}
	defer t.stream.release(k, r, true)
	o := r.o // read once each, the files of this pass are never let go
	if gz, err := isGzip(o.fh); err != nil {
		return fmt.Errorf("tfrecord: %w", err)
	} else if gz {
		return fmt.Errorf("tfrecord: %s: %w: a GZIP file cannot be streamed through a shard cache smaller than the dataset "+
			"(cache_size=%d): its records are read from a plain copy, another copy of the dataset on local disk; "+
			"use uncompressed files, or a cache_size that holds the dataset", f.name, ErrFormat, t.stream.cache.Limit)
	}
	if f.offsets == nil || st.sum != o.sum {
		if f.offsets, err = scanTF(ctx, o.fh, f.size, f.name); err != nil {
			return err
		}
		writeIndex(st.index, o.sum, f.offsets)
	}
	lab, err := t.fileLabels(p, k, o.fh, labelOffset)
	if err != nil {
		return err
	}
	labs[k] = lab
	lab.Sum = o.sum
	if len(lab.corrupt) == 0 {
		if b, err := json.Marshal(lab); err == nil {
			storeIndex(st.labels, b)
		}
	}
	t.stream.indexed(k, o.sum, st.index, st.labels)
	return nil
}

// loadLabels reads a file's stored labels, or nil unless they were read
// from bytes of checksum sum.
func loadLabels(path string, sum uint64) *tfLabels {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var lab tfLabels
	if json.Unmarshal(b, &lab) != nil || lab.Labels == nil || lab.Sum != sum {
		return nil
	}
	return &lab
}

// tfIndexMagic starts a stored index; the checksum of the bytes it was
// made from (0 for a local file, which its key alone names) and the record
// offsets follow, each a little-endian uint64.
const tfIndexMagic = "pipetfi\x01"

// writeIndex stores a file's record offsets, found in bytes of checksum
// sum, at path (see storeIndex).
func writeIndex(path string, sum uint64, offsets []int64) {
	out := binary.LittleEndian.AppendUint64([]byte(tfIndexMagic), sum)
	for _, o := range offsets {
		out = binary.LittleEndian.AppendUint64(out, uint64(o))
	}
	storeIndex(path, out)
}

// ReadAhead fetches the streamed files ahead of an epoch reading order
// (see [ReadAheader]); for files on local disk, or all in the shard cache,
// it has nothing to do.
func (t *TFRecord) ReadAhead(order func() []int) (stop func(), err error) {
	if t.stream == nil {
		return func() {}, nil
	}
	return t.stream.planOrder(order, t.fileOf)
}

// CheckOrder refuses an order that ReadAhead would refuse (see
// [OrderChecker]).
func (t *TFRecord) CheckOrder(order func() []int) error {
	if t.stream == nil {
		return nil
	}
	return t.stream.checkOrder(order, t.fileOf)
}

// fileOf is the file record i is read from, or -1 for a bad record (no
// read).
func (t *TFRecord) fileOf(i int) int {
	if i < 0 || i >= t.n || t.bad[i] != nil {
		return -1
	}
	k, _ := t.locate(i)
	return k
}

// openTFFile opens one file through its index, building the index (and,
// for GZIP, the plain copy) if the index directory lacks it.
func openTFFile(ctx context.Context, sf *shardFile, fp, dir string) (*tfFile, error) {
	name := sf.name
	f := &tfFile{name: name, path: sf.path}
	fh, err := sf.open()
	if err != nil {
		return nil, fmt.Errorf("tfrecord: %w", err)
	}
	gz, err := isGzip(fh)
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("tfrecord: %w", err)
	}
	index := filepath.Join(dir, tfKey(name, fp)+".index")
	if gz {
		f.path = filepath.Join(dir, tfKey(name, sf.copyKey(fp))+".tfrecord")
		if fh, err = openPlain(ctx, fh, name, f.path, "tfrecord"); err != nil {
			return nil, err
		}
	}
	f.fh = fh
	st, err := f.fh.Stat()
	if err != nil {
		f.fh.Close()
		return nil, fmt.Errorf("tfrecord: %w", err)
	}
	f.size = st.Size()
	if b, err := os.ReadFile(index); err == nil {
		var made uint64
		if f.offsets, made = parseIndex(b, f.size); made != sf.sum {
			f.offsets = nil // made from other bytes of the object
		}
	}
	if f.offsets == nil {
		if f.offsets, err = scanTF(ctx, f.fh, f.size, name); err != nil {
			f.fh.Close()
			return nil, err
		}
		writeIndex(index, sf.sum, f.offsets)
	}
	return f, nil
}

// parseIndex returns the offsets of an index file and the checksum of the
// bytes they were found in, or nil if it is not one for a file of size
// bytes: after tfIndexMagic and the checksum, offsets rise, each leaving
// room for a header. (An index stored before checksums were, offsets
// alone, is not one.)
func parseIndex(b []byte, size int64) ([]int64, uint64) {
	head := len(tfIndexMagic) + 8
	if len(b) <= head || len(b)%8 != 0 || string(b[:len(tfIndexMagic)]) != tfIndexMagic {
		return nil, 0
	}
	sum := binary.LittleEndian.Uint64(b[len(tfIndexMagic):])
	offs := make([]int64, 0, (len(b)-head)/8)
	for i := head; i < len(b); i += 8 {
		o := int64(binary.LittleEndian.Uint64(b[i:]))
		if o < 0 || o >= size || (len(offs) > 0 && o < offs[len(offs)-1]+16) {
			return nil, 0
		}
		offs = append(offs, o)
	}
	return offs, sum
}

// openPlain opens dst, the plain copy of the gzipped file in (named src),
// decompressing in into it first unless it is there (something other than
// a file in its place is removed); in is closed whatever happens. what
// names the source in errors.
func openPlain(ctx context.Context, in *os.File, src, dst, what string) (*os.File, error) {
	defer in.Close()
	if err := atomicfile.ClearWay(dst, "an index file"); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := os.Stat(dst); err != nil {
		if err := gunzipCopy(ctx, in, src, dst, what); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(dst)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return f, nil
}

// gunzipCopy decompresses the gzipped file in, named src, from its start
// into dst, which appears only whole (see writeAtomic); what names the
// source in errors. Cancelling ctx stops it within a megabyte of src.
func gunzipCopy(ctx context.Context, in *os.File, src, dst, what string) error {
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(ctxReader{ctx, in}, 1<<20))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: %s: %w", what, src, cerr)
		}
		return fmt.Errorf("%s: %s: %w: bad gzip header: %v", what, src, ErrFormat, err)
	}
	err = writeAtomic(dst, func(out *os.File) error {
		_, err := io.Copy(out, zr)
		var pe *fs.PathError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%s: decompressing: %w", src, ctx.Err())
		case errors.As(err, &pe):
			return err // reading src or writing dst, not the data's fault
		}
		return fmt.Errorf("%s: %w: %v", src, ErrFormat, err)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// scanTF walks a plain TFRecord file, checking every length, and returns
// the record offsets. A header that cannot be trusted ends the walk, its
// offset the last: readRaw finds it corrupt, and with it the rest of the
// file, since no record after it can be found. (Data CRCs are checked on
// every read.)
func scanTF(ctx context.Context, fh *os.File, size int64, name string) ([]int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(fh, 0, size), 1<<20)
	var offs []int64
	var head [12]byte
	p := poller{ctx: ctx}
	for off := int64(0); off < size; {
		offs = append(offs, off)
		if _, err := io.ReadFull(r, head[:]); err == io.ErrUnexpectedEOF || err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("tfrecord: %s: indexing: %w", name, err)
		}
		n, err := tfLength(head[:], size-off)
		if err != nil {
			break
		}
		if _, err := r.Discard(int(n) + 4); err != nil {
			return nil, fmt.Errorf("tfrecord: %s: indexing (did the file shrink?): %w", name, err)
		}
		off += 16 + n
		if err := p.poll(16 + n); err != nil {
			return nil, fmt.Errorf("tfrecord: %s: indexing: %w", name, err)
		}
	}
	return offs, nil
}

// tfLength returns the data length a record's 12-byte header gives, having
// checked the length's CRC, that the record fits in the left bytes of the
// file from its start, and MaxRecordBytes.
func tfLength(head []byte, left int64) (int64, error) {
	if maskedCRC(head[:8]) != binary.LittleEndian.Uint32(head[8:12]) {
		return 0, fmt.Errorf("%w: record length", ErrCRC)
	}
	n := binary.LittleEndian.Uint64(head[:8])
	switch {
	case left < 16 || n > uint64(left-16):
		return 0, fmt.Errorf("%w: record of %d bytes runs past the end of the file (%d bytes left)", ErrFormat, n, left)
	case n > MaxRecordBytes:
		return 0, fmt.Errorf("%w: record of %d bytes, past MaxRecordBytes (%d)", ErrFormat, n, MaxRecordBytes)
	}
	return int64(n), nil
}

// readRaw returns record j of file f, read from fh, its length and data
// CRCs verified, in buf.
func (f *tfFile) readRaw(fh io.ReaderAt, j, index int, buf []byte) ([]byte, error) {
	off := f.offsets[j]
	bad := func(err error) ([]byte, error) {
		return nil, &RecordError{File: f.name, Offset: off, Index: index, Err: err}
	}
	var head [12]byte
	if k, err := fh.ReadAt(head[:], off); err == io.EOF {
		return bad(fmt.Errorf("%w: record header cut short: %d of 12 bytes", ErrFormat, k))
	} else if err != nil {
		return bad(fmt.Errorf("%w: %v", ErrFormat, err))
	}
	n, err := tfLength(head[:], f.size-off)
	if err != nil {
		if off == 0 && errors.Is(err, ErrCRC) {
			err = fmt.Errorf("%w (not a TFRecord file?)", err)
		}
		if j == len(f.offsets)-1 {
			// scanTF stopped here: the bytes after the header are lost too.
			err = fmt.Errorf("%w; the rest of the file (%d bytes) cannot be read", err, f.size-off)
		}
		return bad(err)
	}
	if int64(cap(buf)) < n+4 {
		buf = make([]byte, n+4)
	}
	buf = buf[:n+4]
	if _, err := fh.ReadAt(buf, off+12); err != nil {
		return bad(fmt.Errorf("%w: %v", ErrFormat, err))
	}
	if maskedCRC(buf[:n]) != binary.LittleEndian.Uint32(buf[n:]) {
		return bad(fmt.Errorf("%w: record data", ErrCRC))
	}
	return buf[:n], nil
}

// locate returns the file number and record number of global index i.
func (t *TFRecord) locate(i int) (k, j int) {
	k = sort.Search(len(t.starts), func(k int) bool { return t.starts[k] > i }) - 1
	return k, i - t.starts[k]
}

func (t *TFRecord) Len() int { return t.n }

// Corrupt lists the records that failed their checks when the file was
// opened (every record is read once then, to name the classes).
func (t *TFRecord) Corrupt() []*RecordError { return t.corrupt }
func (t *TFRecord) Info() Info              { return t.info }

// Fingerprint covers every file, the feature keys and, with fields, the
// schema.
func (t *TFRecord) Fingerprint() (string, error) { return t.fp, nil }

// Read sets rec.Enc to record i's image bytes and rec.Label to its label,
// and with fields rec.Fields to its fields' values (see [WithFields]): a
// mask's or bytes tensor's bytes in rec.Buf, where the record is read.
func (t *TFRecord) Read(i int, rec *Record) error {
	if i < 0 || i >= t.n {
		return fmt.Errorf("tfrecord: sample %d out of range [0, %d)", i, t.n)
	}
	if e, ok := t.bad[i]; ok {
		return e
	}
	k, j := t.locate(i)
	f := t.files[k]
	var fh io.ReaderAt = f.fh
	if t.stream != nil {
		r, err := t.stream.acquire(k)
		if err != nil {
			return err
		}
		defer t.stream.release(k, r, true)
		fh = r
	}
	data, err := f.readRaw(fh, j, i, rec.Buf)
	if err != nil {
		return err
	}
	var ex example
	err = parseExample(data, t.keys, &ex)
	if err == nil && ex.image == nil {
		err = fmt.Errorf("%w: no bytes feature %q", ErrFormat, t.imageKey)
	}
	if err == nil && !ex.hasLabel && t.needLabel {
		err = fmt.Errorf("%w: no int64 feature %q", ErrFormat, t.labelKey)
	}
	label := 0
	if ex.hasLabel && t.needLabel {
		label = int(ex.label) - t.offset
		if err == nil && (label < 0 || label >= len(t.info.Classes)) {
			err = fmt.Errorf("%w: %d (classes 0..%d, label_offset %d)", ErrLabel, ex.label, len(t.info.Classes)-1, t.offset)
		}
	}
	if err == nil && t.schema != nil {
		err = t.fillFields(&ex, fieldValues(rec, len(t.schema.Fields)))
	}
	if err != nil {
		return &RecordError{File: f.name, Offset: f.offsets[j], Index: i, Err: err}
	}
	*rec = Record{Enc: ex.image, Label: label, Buf: data[:cap(data)], Path: fmt.Sprintf("%s record %d", f.name, j), Fields: rec.Fields}
	return nil
}

// fillFields sets vals (reset, one per schema field) from the features
// of a record.
func (t *TFRecord) fillFields(ex *example, vals []fields.Value) error {
	for k := range t.schema.Fields {
		f, a, v := &t.schema.Fields[k], t.at[k], &vals[k]
		if a.key < 0 {
			continue
		}
		var err error
		if a.four {
			err = t.fourBoxes(ex, a.key, f, v)
		} else {
			err = t.fillField(ex.feats[a.key], t.keys[a.key], f, v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.Kind, err)
		}
		if err := checkValue(f, v); err != nil {
			return fmt.Errorf("%s: %w", f.Kind, err)
		}
	}
	return checkBoxClasses(t.schema, vals)
}

// fillField sets v from feat, the Feature of key.
func (t *TFRecord) fillField(feat []byte, key string, f *fields.Field, v *fields.Value) error {
	if feat == nil {
		return fmt.Errorf("%w: no feature %q", ErrFormat, key)
	}
	kind, list := featureList(feat)
	wrong := func(want string) error {
		return fmt.Errorf("%w: feature %q is %s, not %s", ErrFormat, key, kind, want)
	}
	var n int
	var err error
	switch f.Kind {
	case fields.Mask:
		if kind != bytesList {
			return wrong(bytesList.String())
		}
		var ok bool
		if v.Bytes, ok = field(list, 1); !ok {
			return fmt.Errorf("%w: feature %q holds no bytes", ErrFormat, key)
		}
		return nil
	case fields.Boxes:
		switch kind {
		case floatList:
			v.Floats, n, err = appendFeatureFloats(v.Floats, list, listBound(f))
		case int64List:
			v.Ints, n, err = appendFeatureInts(v.Ints, list, listBound(f))
			if err == nil && n <= listBound(f) {
				v.Floats = grow(v.Floats, n)
				for i, x := range v.Ints {
					v.Floats[i] = float32(x)
				}
				v.Ints = v.Ints[:0]
			}
		default:
			return wrong("a float list")
		}
	case fields.Classes, fields.Labels, fields.Tokens:
		if kind != int64List {
			return wrong(int64List.String())
		}
		v.Ints, n, err = appendFeatureInts(v.Ints, list, listBound(f))
		if f.Kind == fields.Labels {
			for i := range v.Ints {
				v.Ints[i] -= int64(t.offset)
			}
		}
	case fields.Tensor:
		return tensorFeature(kind, list, key, f, v)
	}
	if err == nil && n > listBound(f) {
		err = fmt.Errorf("feature %q holds %d values: %w", key, n, tooMany(f))
	}
	return err
}

// fourBoxes sets v to the boxes of the TF Object Detection API's four
// lists (features from key on: xmin, ymin, xmax, ymax), interleaved.
func (t *TFRecord) fourBoxes(ex *example, key int, f *fields.Field, v *fields.Value) error {
	n := -1
	for c := range 4 {
		feat := ex.feats[key+c]
		if feat == nil {
			return fmt.Errorf("%w: no feature %q", ErrFormat, t.keys[key+c])
		}
		kind, list := featureList(feat)
		if kind != floatList {
			return fmt.Errorf("%w: feature %q is %s, not %s", ErrFormat, t.keys[key+c], kind, floatList)
		}
		m, err := eachFloat(list, nil)
		if err != nil {
			return err
		}
		if n < 0 {
			if m > f.Max {
				return fmt.Errorf("%w: %d boxes, more than max_boxes=%d", fields.ErrValue, m, f.Max)
			}
			n = m
			v.Floats = grow(v.Floats, 4*n)
		}
		if m != n {
			return fmt.Errorf("%w: %d values in %q but %d in %q: want one per box in each", ErrFormat, n, t.keys[key], m, t.keys[key+c])
		}
		eachFloat(list, func(i int, x float32) { v.Floats[4*i+c] = x })
	}
	return nil
}

// tensorFeature sets v.Bytes to a tensor's values from a feature: a bytes
// feature's raw bytes (exactly the tensor's size), or a float or int64
// list of exactly its values, converted to its dtype.
func tensorFeature(kind featureKind, list []byte, key string, f *fields.Field, v *fields.Value) error {
	want := tensorBytes(f)
	switch kind {
	case bytesList:
		b, _ := field(list, 1)
		if len(b) != want {
			return fmt.Errorf("%w: feature %q holds %d bytes, want %d (%s %v)", fields.ErrValue, key, len(b), want, f.DType, f.Shape)
		}
		v.Bytes = append(v.Bytes[:0], b...)
		return nil
	case floatList:
		var err error
		v.Floats, err = listTensor(v.Floats, list, appendFeatureFloats, key, f, v)
		return err
	case int64List:
		var err error
		v.Ints, err = listTensor(v.Ints, list, appendFeatureInts, key, f, v)
		return err
	}
	return fmt.Errorf("%w: feature %q is empty: want bytes or a list", ErrFormat, key)
}

// listTensor sets v.Bytes to a list feature's values converted to f's
// dtype, read by read into buf (scratch, returned empty for the next
// record): exactly the tensor's values, each one the dtype holds.
func listTensor[T int64 | float32](buf []T, list []byte, read func([]T, []byte, int) ([]T, int, error), key string, f *fields.Field, v *fields.Value) ([]T, error) {
	want := tensorBytes(f)
	values := want / f.DType.Size()
	buf, n, err := read(buf[:0], list, values)
	if err == nil && n != values {
		err = fmt.Errorf("%w: feature %q holds %d values, want %d (%s %v)", fields.ErrValue, key, n, values, f.DType, f.Shape)
	}
	if err != nil {
		return buf[:0], err
	}
	v.Bytes = grow(v.Bytes, want)
	err = putTensor(v.Bytes, f.DType, n, func(i int) (int64, float64) { return int64(buf[i]), float64(buf[i]) })
	return buf[:0], err
}

// tfLabels is what one file's records say of the classes: the labels they
// hold and the class names (the text feature) they give, with the records
// that fail the checks Read makes.
type tfLabels struct {
	Labels []int          `json:"labels"`
	Names  map[int]string `json:"names,omitempty"`
	// Sum is the checksum of the file's bytes the labels were read from
	// (see tfStored).
	Sum     uint64 `json:"sum"`
	corrupt []*RecordError
}

// fileLabels reads every record of file k, from fh, for its label.
func (t *TFRecord) fileLabels(p *poller, k int, fh io.ReaderAt, offset int) (*tfLabels, error) {
	f := t.files[k]
	lab := &tfLabels{Names: map[int]string{}}
	seen := map[int]bool{}
	var buf []byte
	var ex example
	var vals []fields.Value
	if t.schema != nil {
		vals = make([]fields.Value, len(t.schema.Fields))
	}
	for j := range f.offsets {
		bad := func(err error) {
			lab.corrupt = append(lab.corrupt, &RecordError{File: f.name, Offset: f.offsets[j], Index: t.starts[k] + j, Err: err})
		}
		data, err := f.readRaw(fh, j, t.starts[k]+j, buf)
		if err := p.poll(16 + int64(len(data))); err != nil {
			return nil, fmt.Errorf("tfrecord: %s: reading labels: %w", f.name, err)
		}
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				return nil, err
			}
			lab.corrupt = append(lab.corrupt, re)
			continue
		}
		buf = data[:cap(data)]
		err = parseExample(data, t.keys, &ex)
		switch {
		case err != nil:
			bad(err)
			continue
		case ex.image == nil:
			bad(fmt.Errorf("%w: no bytes feature %q", ErrFormat, t.imageKey))
			continue
		case !t.needLabel:
		case !ex.hasLabel:
			bad(fmt.Errorf("%w: no int64 feature %q", ErrFormat, t.labelKey))
			continue
		case ex.label < int64(offset):
			bad(fmt.Errorf("%w: %d with label_offset %d", ErrLabel, ex.label, offset))
			continue
		case ex.label-int64(offset) >= MaxClasses:
			bad(fmt.Errorf("%w: %d with label_offset %d is not below MaxClasses (%d)", ErrLabel, ex.label, offset, MaxClasses))
			continue
		}
		if t.schema != nil {
			for k := range vals {
				vals[k].Reset()
			}
			if err := t.fillFields(&ex, vals); err != nil {
				bad(err)
				continue
			}
		}
		if !t.needLabel {
			continue
		}
		l := int(ex.label) - offset
		if !seen[l] {
			seen[l] = true
			lab.Labels = append(lab.Labels, l)
		}
		if ex.text != nil {
			lab.Names[l] = string(ex.text)
		}
	}
	sort.Ints(lab.Labels)
	return lab, nil
}

// classes names the classes from every file's labels (labs[k], read now
// from the open file where nil): the text of each label, else its number.
// Records that fail the checks Read makes are kept in t.corrupt and t.bad.
func (t *TFRecord) classes(ctx context.Context, pattern string, offset int, labs []*tfLabels) ([]string, error) {
	names := map[int]string{}
	seen := map[int]bool{}
	maxLabel := -1
	p := poller{ctx: ctx}
	for k, f := range t.files {
		lab := labs[k]
		if lab == nil {
			var err error
			if lab, err = t.fileLabels(&p, k, f.fh, offset); err != nil {
				return nil, err
			}
		}
		t.corrupt = append(t.corrupt, lab.corrupt...)
		for _, l := range lab.Labels {
			if l < 0 || l >= MaxClasses {
				return nil, fmt.Errorf("tfrecord: %s: %w: a stored label %d", f.name, ErrFormat, l)
			}
			seen[l] = true
			maxLabel = max(maxLabel, l)
		}
		for l, n := range lab.Names {
			names[l] = n // a later file's name wins, as a later record's does
		}
	}
	if len(t.corrupt) > 0 {
		t.bad = make(map[int]*RecordError, len(t.corrupt))
		for _, e := range t.corrupt {
			t.bad[e.Index] = e
		}
	}
	if err := denseLabels("tfrecord: "+pattern, len(seen), maxLabel, "number the classes 0..%d (label_offset= shifts them)"); err != nil {
		return nil, err
	}
	out := make([]string, maxLabel+1)
	for i := range out {
		if n, ok := names[i]; ok {
			out[i] = n
		} else {
			out[i] = strconv.Itoa(i)
		}
	}
	return out, nil
}

func (t *TFRecord) Close() error {
	if t.stream != nil {
		t.stream.close()
	}
	var errs []error
	for _, f := range t.files {
		if f.fh != nil {
			errs = append(errs, f.fh.Close())
		}
	}
	return errors.Join(errs...)
}

// example is what a record's tf.train.Example gives: the image, label and
// class text, and the Feature of each of the source's keys (nil where the
// record has none).
type example struct {
	image    []byte
	label    int64
	hasLabel bool
	text     []byte
	feats    [maxTFKeys][]byte
}

// parseExample reads the features named keys (the image's, the label's,
// the class text's, then any others: see TFRecord.keys) of a serialised
// tf.train.Example into ex, in one pass:
//
//	Example { Features features = 1; }
//	Features { map<string, Feature> feature = 1; }
//	Feature { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//	BytesList { repeated bytes value = 1; }  Int64List { repeated int64 value = 1 [packed]; }
func parseExample(b []byte, keys []string, ex *example) error {
	*ex = example{}
	bad := func(what string) error {
		return fmt.Errorf("%w: not a tf.train.Example (%s)", ErrFormat, what)
	}
	feats, ok := field(b, 1)
	if !ok {
		return bad("no features")
	}
	for len(feats) > 0 {
		num, typ, n := protowire.ConsumeTag(feats)
		if n < 0 {
			return bad("bad tag")
		}
		feats = feats[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, feats)
			if n < 0 {
				return bad("bad field")
			}
			feats = feats[n:]
			continue
		}
		entry, n := protowire.ConsumeBytes(feats)
		if n < 0 {
			return bad("bad map entry")
		}
		feats = feats[n:]
		key, _ := field(entry, 1)
		val, _ := field(entry, 2)
		for k, want := range keys {
			if string(key) == want {
				ex.feats[k] = val[:len(val):len(val)]
			}
		}
	}
	if list, ok := field(ex.feats[0], 1); ok {
		ex.image, _ = field(list, 1)
	}
	if list, ok := field(ex.feats[2], 1); ok && keys[2] != "" {
		ex.text, _ = field(list, 1)
	}
	if list, ok := field(ex.feats[1], 3); ok {
		ex.label, ex.hasLabel = firstInt(list)
	}
	return nil
}

// field returns the last length-delimited field num of a message.
func field(b []byte, num protowire.Number) ([]byte, bool) {
	var out []byte
	found := false
	for len(b) > 0 {
		n, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return nil, false
		}
		b = b[k:]
		if n == num && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return nil, false
			}
			out, found = v, true
			b = b[k:]
			continue
		}
		k = protowire.ConsumeFieldValue(n, typ, b)
		if k < 0 {
			return nil, false
		}
		b = b[k:]
	}
	return out, found
}

// firstInt returns the first value of an Int64List, packed or not.
func firstInt(list []byte) (int64, bool) {
	for len(list) > 0 {
		n, typ, k := protowire.ConsumeTag(list)
		if k < 0 {
			return 0, false
		}
		list = list[k:]
		if n != 1 {
			k = protowire.ConsumeFieldValue(n, typ, list)
			if k < 0 {
				return 0, false
			}
			list = list[k:]
			continue
		}
		switch typ {
		case protowire.VarintType:
			v, k := protowire.ConsumeVarint(list)
			return int64(v), k >= 0
		case protowire.BytesType:
			packed, k := protowire.ConsumeBytes(list)
			if k < 0 || len(packed) == 0 {
				return 0, false
			}
			v, k := protowire.ConsumeVarint(packed)
			return int64(v), k >= 0
		default:
			return 0, false
		}
	}
	return 0, false
}

// featureKind is which list a Feature holds.
type featureKind int

const (
	noList featureKind = iota
	bytesList
	floatList
	int64List
)

func (k featureKind) String() string {
	return [...]string{"empty", "a bytes list", "a float list", "an int64 list"}[k]
}

// featureList returns which list a Feature holds, and the list.
func featureList(feat []byte) (featureKind, []byte) {
	for len(feat) > 0 {
		n, typ, k := protowire.ConsumeTag(feat)
		if k < 0 {
			return noList, nil
		}
		feat = feat[k:]
		if n >= 1 && n <= 3 && typ == protowire.BytesType {
			list, k := protowire.ConsumeBytes(feat)
			if k < 0 {
				return noList, nil
			}
			return featureKind(n), list
		}
		if k = protowire.ConsumeFieldValue(n, typ, feat); k < 0 {
			return noList, nil
		}
		feat = feat[k:]
	}
	return noList, nil
}

// errList is a FloatList or Int64List that does not parse.
var errList = fmt.Errorf("%w: a feature's list does not parse", ErrFormat)

// eachFloat calls fn (unless nil) with each value of a FloatList, packed
// or not, and its position, and returns how many there are.
func eachFloat(list []byte, fn func(i int, x float32)) (int, error) {
	n := 0
	for len(list) > 0 {
		num, typ, k := protowire.ConsumeTag(list)
		if k < 0 {
			return n, errList
		}
		list = list[k:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			packed, k := protowire.ConsumeBytes(list)
			if k < 0 || len(packed)%4 != 0 {
				return n, errList
			}
			list = list[k:]
			for ; len(packed) > 0; packed = packed[4:] {
				if fn != nil {
					fn(n, math.Float32frombits(binary.LittleEndian.Uint32(packed)))
				}
				n++
			}
		case num == 1 && typ == protowire.Fixed32Type:
			v, k := protowire.ConsumeFixed32(list)
			if k < 0 {
				return n, errList
			}
			list = list[k:]
			if fn != nil {
				fn(n, math.Float32frombits(v))
			}
			n++
		default:
			if k = protowire.ConsumeFieldValue(num, typ, list); k < 0 {
				return n, errList
			}
			list = list[k:]
		}
	}
	return n, nil
}

// eachInt calls fn (unless nil) with each value of an Int64List, packed
// or not, and its position, and returns how many there are.
func eachInt(list []byte, fn func(i int, x int64)) (int, error) {
	n := 0
	for len(list) > 0 {
		num, typ, k := protowire.ConsumeTag(list)
		if k < 0 {
			return n, errList
		}
		list = list[k:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			packed, k := protowire.ConsumeBytes(list)
			if k < 0 {
				return n, errList
			}
			list = list[k:]
			for len(packed) > 0 {
				v, k := protowire.ConsumeVarint(packed)
				if k < 0 {
					return n, errList
				}
				packed = packed[k:]
				if fn != nil {
					fn(n, int64(v))
				}
				n++
			}
		case num == 1 && typ == protowire.VarintType:
			v, k := protowire.ConsumeVarint(list)
			if k < 0 {
				return n, errList
			}
			list = list[k:]
			if fn != nil {
				fn(n, int64(v))
			}
			n++
		default:
			if k = protowire.ConsumeFieldValue(num, typ, list); k < 0 {
				return n, errList
			}
			list = list[k:]
		}
	}
	return n, nil
}

// appendFeatureFloats appends a FloatList's values to dst unless there are
// more than limit, and returns how many the list holds.
func appendFeatureFloats(dst []float32, list []byte, limit int) ([]float32, int, error) {
	n, err := eachFloat(list, nil)
	if err != nil || n > limit {
		return dst, n, err
	}
	at := len(dst)
	dst = slices.Grow(dst, n)[:at+n]
	eachFloat(list, func(i int, x float32) { dst[at+i] = x })
	return dst, n, nil
}

// appendFeatureInts appends an Int64List's values to dst unless there are
// more than limit, and returns how many the list holds.
func appendFeatureInts(dst []int64, list []byte, limit int) ([]int64, int, error) {
	n, err := eachInt(list, nil)
	if err != nil || n > limit {
		return dst, n, err
	}
	at := len(dst)
	dst = slices.Grow(dst, n)[:at+n]
	eachInt(list, func(i int, x int64) { dst[at+i] = x })
	return dst, n, nil
}

// Shards returns the number of records in each file, in index order.
func (t *TFRecord) Shards() []int {
	n := make([]int, len(t.files))
	for i, f := range t.files {
		n[i] = len(f.offsets)
	}
	return n
}
