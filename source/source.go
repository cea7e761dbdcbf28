package source

import (
	"errors"
	"fmt"

	"github.com/pipefeed/pipe/fields"
)

// Record is one labelled sample. Pix is a CHW uint8 image: channel c, row y,
// column x at Pix[(c*H+y)*W+x].
type Record struct {
	Pix     []byte
	C, H, W int
	Label   int
	// Enc holds the encoded image (JPEG or PNG bytes) instead of Pix, for
	// sources of compressed images (Info.Encoded); the decode stage makes
	// the pixels. Path names its file, for errors.
	Enc  []byte
	Path string
	// Buf is scratch the caller owns and keeps between calls; a source that
	// generates pixels writes them into Buf (growing it) and points Pix at it.
	Buf []byte
	// Fields are the sample's fields when the source was opened
	// WithFields: one Value per field of the schema, in its order, each
	// holding what the file holds for it — a mask's encoded image (PNG) in
	// Bytes (from a source of pixels, Info.Encoded false, its H×W values,
	// little-endian, as the image's H and W), boxes as 4 Floats each in the schema's format and units,
	// classes, multi-labels and tokens as Ints, a tensor's raw
	// little-endian values in Bytes (an .npy member's header checked and
	// removed). The image's entry is empty (the image is Pix or Enc) and
	// so is an int label's (it is Label). The caller owns the slice and
	// keeps it between calls, as Buf; a source resets and refills it,
	// and its values may point at memory the source owns, as Pix may.
	Fields []fields.Value
}

// Info describes a source.
type Info struct {
	// Name is the source's stage name ("cifar10").
	Name string
	// Identity names the data the source reads (resolved path, split, label
	// set), for summaries and cache fingerprints.
	Identity string
	// C, H, W is the shape of every image; zero where it varies.
	C, H, W int
	// Encoded says Read gives encoded images (Record.Enc), which a decode
	// stage must turn into pixels.
	Encoded bool
	// Classes names the labels 0..len(Classes)-1.
	Classes []string
	// NonImages counts the files the source passed over because their
	// name's extension is not an image format's (image_folder's class
	// folders: a notes.txt), which summaries report.
	NonImages int
	// Fields is the schema the source was opened with (WithFields),
	// whose values Read gives in Record.Fields; nil without one.
	Fields *fields.Schema
	// Args are the parameters of a .pipe source line, after Name, that
	// open this source again (path=..., split=...), so that a pipeline
	// built in Go is written as a file that parses back. A source of the
	// caller's own has none.
	Args []Arg
}

// Arg is one parameter of a .pipe source line: name=value.
type Arg struct{ Name, Value string }

// Source is a dataset with random access by index.
type Source interface {
	// Len is the number of samples.
	Len() int
	// Info describes the source.
	Info() Info
	// Read sets rec to sample i, 0 ≤ i < Len(). rec.Pix may point at memory
	// owned by the source, valid until Close and never to be modified, or
	// at rec.Buf. Errors about the record are *RecordError. Read is safe
	// for concurrent use.
	Read(i int, rec *Record) error
	// Close releases the source's memory and files.
	Close() error
}

// Checker is implemented by sources that validate records when they open.
// Corrupt lists every bad record found, in index order; Read of one of them
// returns the same error. A pipeline with on_error=fail stops on the first
// before any batch is produced.
type Checker interface {
	Corrupt() []*RecordError
}

// Sharded is implemented by sources whose samples live in shards (files)
// that read best in sequence, such as TFRecord and WebDataset. Shards
// returns the number of samples in each, in index order: the samples of
// shard 0 come first.
type Sharded interface {
	Shards() []int
}

var (
	// ErrLabel means a record's label is outside the dataset's classes.
	ErrLabel = errors.New("label out of range")
	// ErrFormat means a file is not in the expected format: wrong size,
	// truncated, or missing members.
	ErrFormat = errors.New("bad format")
	// ErrChecksum means downloaded or stored bytes do not match their
	// checksum.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrDownload means a download failed: no connection, an error status,
	// or a transfer cut short.
	ErrDownload = errors.New("download failed")
)

// MaxClasses bounds the classes of a source: a label must be below it, and
// a record whose label is not is a corrupt record ([ErrLabel]). A source
// names its classes in a table with one entry per label up to the largest,
// and a classifier needs an output per class, so a label read from damaged
// data (a TFRecord int64, a .cls member, a labels CSV) must not set their
// size. 1<<20 (1,048,576) is past the largest label sets trained as one
// classifier head (ImageNet-21k's 21,841 classes, MegaFace's 672,057
// identities) while the table of its names stays near 24 MiB.
const MaxClasses = 1 << 20

// MaxRecordBytes bounds the bytes of one record whose size a file's own
// header gives (a TFRecord length, a WebDataset member), beyond the file's
// size, which always bounds it. A worker reads a whole record into its
// buffer, so a record past it is corrupt rather than allocated: 1 GiB is
// far past any image a decode stage can turn into pixels.
const MaxRecordBytes = 1 << 30

// RecordError reports a bad record: where it is and what is wrong with it.
type RecordError struct {
	File   string // file (or archive member) holding the record
	Offset int64  // byte offset of the record in File
	Index  int    // sample index in the source
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s: offset %d: sample %d: %v", e.File, e.Offset, e.Index, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Split selects the part of a dataset.
type Split int

const (
	Train Split = iota
	Test
)

func (s Split) String() string {
	if s == Test {
		return "test"
	}
	return "train"
}

// ParseSplit returns the Split with the given name.
func ParseSplit(s string) (Split, error) {
	switch s {
	case "train":
		return Train, nil
	case "test":
		return Test, nil
	}
	return 0, fmt.Errorf("unknown split %q (want train or test)", s)
}

// sparseClasses is the most classes a labels file may imply without using
// half of them: ImageNet's 1,000 from a 100-image subset of its validation
// set cost a model little.
const sparseClasses = 1024

// denseLabels refuses labels that cannot be a class count: without a list
// of classes, the classes are 0..maxLabel, and the model has one output
// each, so past sparseClasses a labels file that uses fewer than half of
// them (3 images labelled 0, 1 and 1048575 would size a model of 1,048,576
// classes) is refused, an ErrLabel: what names the data, fix says how to mend it (with
// a %d for the largest label of a dense numbering).
func denseLabels(what string, distinct, maxLabel int, fix string) error {
	if maxLabel < sparseClasses || 2*distinct > maxLabel {
		return nil
	}
	return fmt.Errorf("%s: %w: labels run to %d but only %d distinct labels appear, so they cannot be the class count (%d classes): "+fix,
		what, ErrLabel, maxLabel, distinct, maxLabel+1, distinct-1)
}
