package source

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/pipefeed/pipe/fields"
)

// cifarFormat describes one of the two CIFAR binary distributions.
type cifarFormat struct {
	name       string // stage name
	archive    string // official archive file name
	url        string
	checksum   string
	dir        string // directory inside the archive
	train      []string
	test       []string
	labelBytes int      // 1 (CIFAR-10) or 2 (coarse, fine: CIFAR-100)
	classes    []string // built-in class names, used when no meta file is found
	meta       string   // meta file listing class names
	coarseMeta string
	// records is the most records of an official member (a batch file of
	// CIFAR-10, train.bin of CIFAR-100): a member claiming no more is
	// read into one buffer of its size.
	records int
}

const cifarPixels = 3 * 32 * 32

var cifar10 = &cifarFormat{
	name:       "cifar10",
	archive:    "cifar-10-binary.tar.gz",
	url:        "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
	checksum:   "md5:c32a1d4ab5d03f1284b67883e8d87530",
	dir:        "cifar-10-batches-bin",
	train:      []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
	test:       []string{"test_batch.bin"},
	labelBytes: 1,
	classes:    []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"},
	meta:       "batches.meta.txt",
	records:    10000,
}

var cifar100 = &cifarFormat{
	name:       "cifar100",
	archive:    "cifar-100-binary.tar.gz",
	url:        "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
	checksum:   "md5:03b5dce01913d631647c71ecec9e9cb8",
	dir:        "cifar-100-binary",
	train:      []string{"train.bin"},
	test:       []string{"test.bin"},
	labelBytes: 2,
	meta:       "fine_label_names.txt",
	coarseMeta: "coarse_label_names.txt",
	records:    50000,
}

// CIFAR is a CIFAR-10 or CIFAR-100 split held in memory as the records of
// its files: one copy of the dataset, read by index without copying. Files
// may hold any number of records (the official ones hold 10,000); bytes
// after a file's last whole record are one more record, a corrupt one.
type CIFAR struct {
	format  *cifarFormat
	info    Info
	nfields int // the schema's fields, with WithFields: Read gives as many empty values
	recSize int
	label   int // byte of the record that holds the label
	nclass  int
	n       int
	files   []cifarFile
	corrupt []*RecordError
	bad     map[int]*RecordError
	osFiles []string // the files read, for Fingerprint
}

type cifarFile struct {
	name    string // as shown in errors: path, or archive:member
	first   int    // index of its first record
	data    []byte // its whole records, back to back
	partial int    // bytes after them: a partial record at index first+len(data)/recSize
}

type cifarConfig struct {
	download bool
	cacheDir string
	url      string
	checksum string
	coarse   bool
	progress func(done, total int64)
	dlOpts   []DownloadOption
}

// WithDownload fetches the official archive into cacheDir ("" means the
// default, [DefaultCacheDir]) when no path is given, and reads it from
// there. A path that is given and missing stays an error: a mistyped path
// does not turn into a download. Default: off.
// For OpenCIFAR10, OpenCIFAR100.
func WithDownload(cacheDir string) Option {
	return Option{"WithDownload", func(o *options) error {
		o.cifar.download = true
		o.cifar.cacheDir = cacheDir
		return nil
	}}
}

// WithMirror replaces the official download URL and its checksum
// ("md5:<hex>" or "sha256:<hex>"), for mirrors and tests.
// For OpenCIFAR10, OpenCIFAR100.
func WithMirror(url, checksum string) Option {
	return Option{"WithMirror", func(o *options) error {
		if _, _, err := parseChecksum(checksum); err != nil {
			return err
		}
		o.cifar.url, o.cifar.checksum = url, checksum
		return nil
	}}
}

// WithCoarseLabels makes a CIFAR-100 source yield its 20 coarse labels
// instead of the 100 fine ones. Default: fine. For OpenCIFAR100.
func WithCoarseLabels() Option {
	return Option{"WithCoarseLabels", func(o *options) error { o.cifar.coarse = true; return nil }}
}

// WithDownloadProgress reports download progress (total is -1 if unknown).
// For OpenCIFAR10, OpenCIFAR100.
func WithDownloadProgress(f func(done, total int64)) Option {
	return Option{"WithDownloadProgress", func(o *options) error { o.cifar.progress = f; return nil }}
}

// WithDownloadOptions sets the download's options, such as its timeouts
// ([WithConnectTimeout], [WithIdleTimeout]). Default: none, so the
// defaults of [Download].
// For OpenCIFAR10, OpenCIFAR100.
func WithDownloadOptions(opts ...DownloadOption) Option {
	return Option{"WithDownloadOptions", func(o *options) error {
		var d downloadConfig
		for _, opt := range opts {
			if err := opt(&d); err != nil {
				return err
			}
		}
		o.cifar.dlOpts = append(o.cifar.dlOpts, opts...)
		return nil
	}}
}

// OpenCIFAR10 opens a split of CIFAR-10 from path: the official
// cifar-10-binary.tar.gz, the cifar-10-batches-bin directory extracted from
// it (or a directory holding that), or a single batch file. With
// [WithDownload] and no path, the archive is fetched instead. Cancelling
// ctx stops a download (leaving nothing in the cache directory) or the
// reading of the archive; the error wraps ctx's. [WithFields] takes an
// image and a label, without keys (Read gives their values, both empty);
// any other field is refused, naming the sources that carry it.
func OpenCIFAR10(ctx context.Context, path string, split Split, opts ...Option) (*CIFAR, error) {
	return openCIFAR(ctx, cifar10, path, split, opts)
}

// OpenCIFAR100 opens a split of CIFAR-100 from path: the official
// cifar-100-binary.tar.gz, the cifar-100-binary directory, or a single file.
// ctx is as for [OpenCIFAR10].
func OpenCIFAR100(ctx context.Context, path string, split Split, opts ...Option) (*CIFAR, error) {
	return openCIFAR(ctx, cifar100, path, split, opts)
}

func openCIFAR(ctx context.Context, f *cifarFormat, p string, split Split, opts []Option) (*CIFAR, error) {
	takes := []string{"WithDownload", "WithMirror", "WithDownloadProgress", "WithDownloadOptions", "WithFields"}
	if f.labelBytes == 2 {
		takes = append(takes, "WithCoarseLabels") // coarse labels exist only in CIFAR-100
	}
	o, err := apply(f.name, opts, takes...)
	if err != nil {
		return nil, err
	}
	if err := cifarFields(f.name, o.fields); err != nil {
		return nil, err
	}
	cfg := o.cifar
	if cfg.url == "" {
		cfg.url, cfg.checksum = f.url, f.checksum
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	p, err = resolveCIFARPath(ctx, f, p, cfg)
	if err != nil {
		return nil, err
	}
	c := &CIFAR{format: f, recSize: f.labelBytes + cifarPixels, nclass: 10}
	if o.fields != nil {
		c.nfields = len(o.fields.Fields)
	}
	if f.labelBytes == 2 {
		c.label, c.nclass = 1, 100
		if cfg.coarse {
			c.label, c.nclass = 0, 20
		}
	}
	members := f.train
	if split == Test {
		members = f.test
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	switch {
	case st.IsDir():
		err = c.loadDir(ctx, p, members)
	case strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tgz"):
		err = c.loadArchive(ctx, p, members)
	default:
		err = c.loadFile(p, st.Size())
	}
	if err == nil && len(c.files) == 0 {
		err = fmt.Errorf("%s: %s: %w: no records", f.name, p, ErrFormat)
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() && !strings.HasSuffix(p, "gz") {
		c.info.Classes = readClassNames(filepath.Join(filepath.Dir(p), c.metaName()))
	}
	for i := range c.files {
		f := &c.files[i]
		f.first = c.n
		c.n += len(f.data) / c.recSize
		if f.partial > 0 {
			c.n++
		}
	}
	if c.info.Classes == nil {
		c.info.Classes = f.classes
	}
	if len(c.info.Classes) != c.nclass {
		c.info.Classes = numbered(c.nclass)
	}
	labels := "fine"
	if cfg.coarse {
		labels = "coarse"
	}
	c.info = Info{Name: f.name, C: 3, H: 32, W: 32, Classes: c.info.Classes, Fields: o.fields,
		Identity: fmt.Sprintf("%s %s split=%s", f.name, p, split),
		Args:     []Arg{{"path", p}, {"split", split.String()}}}
	if f.labelBytes == 2 {
		c.info.Identity += " labels=" + labels
		c.info.Args = append(c.info.Args, Arg{"labels", labels})
	}
	c.validate()
	return c, nil
}

// cifarFields refuses a schema (nil: none) with more than CIFAR holds, an
// image and a label, or with a key for either, naming the field and, for
// another kind, the sources that carry it.
func cifarFields(name string, schema *fields.Schema) error {
	if schema == nil {
		return nil
	}
	for _, f := range schema.Fields {
		switch {
		case f.Kind != fields.Image && f.Kind != fields.Label:
			return fmt.Errorf("%s: WithFields: %w: %s holds an image and a label, no %s: %s fields are read by %s", name, fields.ErrSchema, name, f.Kind, f.Kind, carriers[f.Kind])
		case f.Key != "":
			return fmt.Errorf("%s: WithFields: %w: %s=%s: %s's image and label have no keys: leave the key out", name, fields.ErrSchema, f.Kind, f.Key, name)
		}
	}
	return nil
}

func numbered(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return s
}

// resolveCIFARPath returns the file or directory to read: p when given,
// else the archive in the cache directory, downloaded when allowed and
// needed.
func resolveCIFARPath(ctx context.Context, f *cifarFormat, p string, cfg cifarConfig) (string, error) {
	if p != "" {
		_, err := os.Stat(p)
		switch {
		case err == nil:
			return p, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("%s: %w", f.name, err)
		case cfg.download:
			return "", fmt.Errorf("%s: %s does not exist (download=true fetches %s only when no path is given)", f.name, p, f.archive)
		}
		return "", fmt.Errorf("%s: %s does not exist (give no path and download=true to fetch %s)", f.name, p, f.archive)
	}
	if !cfg.download {
		return "", fmt.Errorf("%s: no path given (set path= to the data, or download=true)", f.name)
	}
	dir := cfg.cacheDir
	if dir == "" {
		var err error
		if dir, err = DefaultCacheDir(); err != nil {
			return "", fmt.Errorf("%s: %w", f.name, err)
		}
	}
	dst := filepath.Join(dir, f.archive)
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := Download(ctx, cfg.url, dst, cfg.checksum, cfg.progress, cfg.dlOpts...); err != nil {
		return "", fmt.Errorf("%s: %w", f.name, err)
	}
	return dst, nil
}

func (c *CIFAR) loadDir(ctx context.Context, dir string, members []string) error {
	// Accept the extracted directory itself or a directory that holds it.
	if _, err := os.Stat(filepath.Join(dir, members[0])); err != nil {
		if sub := filepath.Join(dir, c.format.dir); isDir(sub) {
			dir = sub
		} else if a := filepath.Join(dir, c.format.archive); fileExists(a) {
			return c.loadArchive(ctx, a, members)
		}
	}
	for _, m := range members {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %s: %w", c.format.name, dir, err)
		}
		name := filepath.Join(dir, m)
		st, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("%s: %s: missing %s (is this the %s binary distribution?)", c.format.name, dir, m, c.format.name)
		}
		if err := c.loadFile(name, st.Size()); err != nil {
			return err
		}
	}
	c.info.Classes = readClassNames(filepath.Join(dir, c.metaName()))
	return nil
}

func (c *CIFAR) metaName() string {
	if c.format.labelBytes == 2 && c.label == 0 {
		return c.format.coarseMeta
	}
	return c.format.meta
}

// loadFile appends the records of one batch file.
func (c *CIFAR) loadFile(name string, size int64) error {
	if size == 0 {
		return c.emptyFile(name)
	}
	fh, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("%s: %w", c.format.name, err)
	}
	defer fh.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return fmt.Errorf("%s: reading %s: %w", c.format.name, name, err)
	}
	c.files = append(c.files, c.newFile(name, data))
	c.osFiles = append(c.osFiles, name)
	return nil
}

// emptyFile is the error for a file of no bytes: it holds no record, not
// even a corrupt one.
func (c *CIFAR) emptyFile(name string) error {
	return fmt.Errorf("%s: %s: %w: empty file", c.format.name, name, ErrFormat)
}

// newFile splits data into its whole records and the bytes after them,
// which validate lists as a corrupt record.
func (c *CIFAR) newFile(name string, data []byte) cifarFile {
	whole := len(data) / c.recSize * c.recSize
	return cifarFile{name: name, data: data[:whole:whole], partial: len(data) - whole}
}

// readMember reads the size bytes a tar header promises. Up to exact bytes
// (an official member's size) it reads into one buffer of that size;
// beyond, it allocates as bytes arrive, never more than twice what has
// come, so a damaged header claiming more than the archive holds cannot
// allocate the difference. (Growing a 30 MB member by doubling left 80 MB
// of garbage, a third of a CIFAR epoch's peak memory.)
func readMember(r io.Reader, size, exact int64) ([]byte, error) {
	if size <= exact {
		data := make([]byte, size)
		n, err := io.ReadFull(r, data)
		return data[:n], err
	}
	data := make([]byte, 0, min(size, 1<<20))
	for int64(len(data)) < size {
		if len(data) == cap(data) {
			data = slices.Grow(data, int(min(size-int64(len(data)), int64(len(data)))))
		}
		n, err := r.Read(data[len(data):min(int64(cap(data)), size)])
		data = data[:len(data)+n]
		if err == io.EOF && int64(len(data)) < size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return data, err
		}
	}
	return data, nil
}

// loadArchive reads the members from the official archive. Cancelling ctx
// stops it within a megabyte of the archive.
func (c *CIFAR) loadArchive(ctx context.Context, name string, members []string) error {
	fh, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("%s: %w", c.format.name, err)
	}
	defer fh.Close()
	c.osFiles = []string{name}
	// A read that ctx stops shows below as a broken archive; ctx is the
	// reason.
	canceled := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %s: %w", c.format.name, name, err)
		}
		return nil
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(ctxReader{ctx, fh}, 1<<20))
	if err != nil {
		if err := canceled(); err != nil {
			return err
		}
		return fmt.Errorf("%s: %s: %w: not a gzip archive: %v", c.format.name, name, ErrFormat, err)
	}
	defer zr.Close()
	// Members may come in any order; each lands in its slot.
	want := map[string]int{}
	for i, m := range members {
		want[m] = i
	}
	c.files = make([]cifarFile, len(members))
	found := 0
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if err := canceled(); err != nil {
				return err
			}
			return fmt.Errorf("%s: %s: %w: %v", c.format.name, name, ErrFormat, err)
		}
		base := path.Base(h.Name)
		if base == c.metaName() {
			b, _ := io.ReadAll(io.LimitReader(tr, 1<<20))
			c.info.Classes = parseClassNames(string(b))
			continue
		}
		i, ok := want[base]
		if !ok || h.Typeflag != tar.TypeReg || c.files[i].name != "" {
			continue
		}
		member := name + ":" + h.Name
		if h.Size == 0 {
			return c.emptyFile(member)
		}
		data, err := readMember(tr, h.Size, int64(c.format.records*c.recSize))
		if err != nil {
			if err := canceled(); err != nil {
				return err
			}
			return fmt.Errorf("%s: %s: %w: member cut short at offset %d of %d: %v", c.format.name, member, ErrFormat, len(data), h.Size, err)
		}
		c.files[i] = c.newFile(member, data)
		found++
	}
	// tar stops at its end-of-archive blocks even when the read that gave
	// them also said ctx was done.
	if err := canceled(); err != nil {
		return err
	}
	if found != len(members) {
		var missing []string
		for i, m := range members {
			if c.files[i].name == "" {
				missing = append(missing, c.format.dir+"/"+m)
			}
		}
		return fmt.Errorf("%s: %s: %w: archive has no member %s (is this %s?)",
			c.format.name, name, ErrFormat, strings.Join(missing, ", "), c.format.archive)
	}
	return nil
}

// validate checks every label and every file's length once, at open, so a
// bad record is known before any batch is made.
func (c *CIFAR) validate() {
	for k := range c.files {
		f := &c.files[k]
		whole := len(f.data) / c.recSize
		for j := range whole {
			if l := int(f.data[j*c.recSize+c.label]); l >= c.nclass {
				e := c.recordError(f.first+j, fmt.Errorf("%w: label %d, want 0..%d", ErrLabel, l, c.nclass-1))
				c.corrupt = append(c.corrupt, e)
			}
		}
		if f.partial > 0 {
			e := c.recordError(f.first+whole, fmt.Errorf("%w: the last %d bytes are not a whole %d-byte record (the file is cut short?)",
				ErrFormat, f.partial, c.recSize))
			c.corrupt = append(c.corrupt, e)
		}
	}
	if len(c.corrupt) > 0 {
		c.bad = make(map[int]*RecordError, len(c.corrupt))
		for _, e := range c.corrupt {
			c.bad[e.Index] = e
		}
	}
}

func (c *CIFAR) recordError(i int, err error) *RecordError {
	f := c.file(i)
	return &RecordError{File: f.name, Offset: int64(i-f.first) * int64(c.recSize), Index: i, Err: err}
}

// file returns the file holding record i; there are at most six.
func (c *CIFAR) file(i int) *cifarFile {
	f := &c.files[0]
	for j := 1; j < len(c.files) && c.files[j].first <= i; j++ {
		f = &c.files[j]
	}
	return f
}

func (c *CIFAR) Len() int   { return c.n }
func (c *CIFAR) Info() Info { return c.info }

// Corrupt lists the records whose labels are out of range, and the partial
// record at the end of a file that is not a whole number of records.
func (c *CIFAR) Corrupt() []*RecordError { return c.corrupt }

func (c *CIFAR) Read(i int, rec *Record) error {
	if uint(i) >= uint(c.Len()) {
		return fmt.Errorf("%s: sample %d out of range [0, %d)", c.format.name, i, c.Len())
	}
	if c.bad != nil {
		if e, ok := c.bad[i]; ok {
			return e
		}
	}
	f := c.file(i)
	o := (i - f.first) * c.recSize
	r := f.data[o : o+c.recSize : o+c.recSize]
	rec.Label = int(r[c.label])
	rec.Pix = r[c.format.labelBytes:]
	rec.C, rec.H, rec.W = 3, 32, 32
	if c.nfields > 0 {
		fieldValues(rec, c.nfields)
	}
	return nil
}

// Close drops the data.
func (c *CIFAR) Close() error {
	c.files, c.n = nil, 0
	return nil
}

func readClassNames(name string) []string {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	return parseClassNames(string(b))
}

func parseClassNames(s string) []string {
	var names []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	return names
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
