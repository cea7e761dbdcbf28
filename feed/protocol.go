package feed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Version is the protocol version: the messages, the JSON of hello and the
// ring's layout. A loader of another version is refused. Version 2: a batch
// message carries its sequence number and a release echoes it. Version 3: a
// slab holds the batch's fields after its images (Hello.Fields), and its
// labels after those.
const Version = 3

// Magic opens the ring's header page.
const Magic = "PIPEFEED"

// Message types: the first uint32 of every packet.
const (
	msgHello   = 1
	msgStart   = 2
	msgBatch   = 3
	msgRelease = 4
	msgEnd     = 5
	msgStop    = 6
	msgError   = 7
)

// The sizes of the messages pipe reads. testdata/messages.txt gives every
// message's layout with an example.
const (
	startLen   = 24
	releaseLen = 16
	stopLen    = 8
)

// Ahead is how many batches the loader may hold at once: the one it is
// using and those sent ahead of it, waiting in the socket. The ring has
// that many slabs beyond the pipeline's own, so that its workers never
// wait for the loader's. Hello tells the loader (Hello.Ahead): one that
// hands slabs back late, when their copies to a GPU complete, must not
// wait for a batch while it holds this many.
const Ahead = 3

var (
	// ErrProtocol is wrapped by errors about a peer that does not follow
	// the protocol.
	ErrProtocol = errors.New("feed: protocol error")
	// ErrGone is the cause Watch cancels with when the loader goes away
	// before the hello.
	ErrGone = errors.New("feed: the loader went away")
	// ErrUnsupported is what Serve, Watch and the rest return where
	// pipe feed cannot work: anywhere but Linux.
	ErrUnsupported = errors.New("feed: pipe feed needs Linux (memfd_create and SOCK_SEQPACKET sockets)")
)

// ToldError is an error that Serve or Refuse has sent to the loader in an
// error message: the loader raises it, in pipe's words, so a command need
// not say it again.
type ToldError struct{ Err error }

func (e ToldError) Error() string { return e.Err.Error() }
func (e ToldError) Unwrap() error { return e.Err }

// Hello is what the hello message's JSON says: the batches and the ring.
type Hello struct {
	Version int    `json:"version"`
	Pipe    string `json:"pipe"` // pipe's module version
	PID     int    `json:"pid"`
	File    string `json:"file"`
	// Shape is one sample's [C, H, W]; Layout "nchw" or "nhwc" and DType
	// "float32", "float16" or "uint8" say how a batch lays it out.
	Shape  [3]int `json:"shape"`
	Layout string `json:"layout"`
	DType  string `json:"dtype"`
	// Batch is the batch size, Batches and Samples one epoch of this rank.
	Batch   int      `json:"batch"`
	Batches int      `json:"batches"`
	Samples int      `json:"samples"`
	Classes []string `json:"classes"`
	Rank    int      `json:"rank"`
	World   int      `json:"world"`
	// Elastic reports pipeline elastic=true, where the global batch,
	// GlobalBatch (batch × world), is the unit the ranks slice: batch k of
	// every rank is its slice of global batch k, so a position carries
	// over to another number of ranks.
	Elastic     bool   `json:"elastic"`
	GlobalBatch int    `json:"global_batch"`
	Seed        uint64 `json:"seed"`
	Workers     int    `json:"workers"`
	// Ahead is the most batches the loader holds (sent and not released)
	// before pipe waits for a release: the constant Ahead.
	Ahead int `json:"ahead"`
	// Fingerprint names the stream the batches make (Fingerprint): the
	// loader resumes a saved position only in a pipeline of the same one.
	Fingerprint string `json:"fingerprint"`
	Ring        Layout `json:"ring"`
	// Fields describes the fields of a pipeline with a fields stage, or
	// with the soft targets of mixup or cutmix; absent without either (a
	// batch is its images and labels).
	Fields *Fields `json:"fields,omitempty"`
}

// Fields is where a batch's fields lie in its slab: the image is the slab's
// samples and the int label its labels, as without a fields stage; every
// other field is a region from byte Offset of the slab
// (pipe.Pipeline.FieldLayout).
type Fields struct {
	// Schema is the fields stage's schema in its canonical form
	// (fields.Schema.String), and Names its fields' names in its order:
	// the batch's keys ("targets" last where the pipeline mixes). Without
	// a fields stage, Schema is "" and Names "image", "label", "targets":
	// a batch is then its images and soft targets, as a pair.
	Schema string   `json:"schema"`
	Names  []string `json:"names"`
	Offset int      `json:"offset"`
	// Regions are the fields other than the image and the label, in the
	// schema's order.
	Regions []Region `json:"regions"`
}

// Region is one field's region (fields.Region): rows values of Shape and
// DType (their names, as package fields spells them) per sample from byte
// Offset of the fields, and, for boxes, classes and tokens, rows int32
// counts from byte Counts (-1: none); classes share the boxes' counts.
type Region struct {
	Kind   string `json:"kind"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int    `json:"offset"`
	Counts int    `json:"counts"`
}

// Layout is where things are in the ring; hello's JSON carries it and the
// header page repeats it.
type Layout struct {
	Slabs int `json:"slabs"`
	// Stride is the distance between slabs, and Offset that of slab 0 from
	// the start of the ring (after the header page).
	Stride int64 `json:"stride"`
	Offset int64 `json:"offset"`
	// Rows is the most samples a slab holds, SampleBytes the bytes of one,
	// and Labels the offset of the int64 labels within a slab: after the
	// samples and, with fields, after those (Hello.Fields).
	Rows        int   `json:"rows"`
	SampleBytes int   `json:"sample_bytes"`
	Labels      int64 `json:"labels"`
	// Size is the ring's size in bytes.
	Size int64 `json:"size"`
}

const (
	page = 4096
	// labelAlign aligns each slab's labels after its samples.
	labelAlign = 64
)

// layout is the ring of slabs slabs of rows samples of sampleBytes each,
// whose images and fields take slabBytes (rows × sampleBytes without
// fields: pipe.Pipeline.SlabBytes).
func layout(slabs, rows, sampleBytes, slabBytes int) Layout {
	labels := (int64(slabBytes) + labelAlign - 1) / labelAlign * labelAlign
	stride := (labels + 8*int64(rows) + page - 1) / page * page
	return Layout{Slabs: slabs, Stride: stride, Offset: page, Rows: rows, SampleBytes: sampleBytes, Labels: labels,
		Size: page + int64(slabs)*stride}
}

// appendHeader appends the ring's header: Magic, Version, then l's slab
// count, stride, offset, rows, sample size and label offset.
func appendHeader(dst []byte, l Layout) []byte {
	dst = append(dst, Magic...)
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(l.Slabs))
	for _, v := range []int64{l.Stride, l.Offset, int64(l.Rows), int64(l.SampleBytes), l.Labels} {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// The messages other than hello (its type, Version, then Hello as JSON),
// stop (its type and a zero uint32) and error (its type, a zero uint32,
// then the text).

// startMsg (loader → pipe) asks for epoch from batch first; the epoch's
// batch and end messages carry token.
type startMsg struct {
	token        uint32
	epoch, first int64
}

// batchMsg (pipe → loader) announces n samples of batch index of epoch in
// slab. seq numbers the batch messages of a connection from 1: the release
// of the batch names it.
type batchMsg struct {
	slab, token     uint32
	seq             uint64
	epoch, index, n int64
	// slabWait is the seconds the pipeline has waited for a free slab in
	// this epoch.
	slabWait float64
}

// releaseMsg (loader → pipe) hands back the slab of batch seq.
type releaseMsg struct {
	slab uint32
	seq  uint64
}

// endMsg (pipe → loader) ends the epoch of token; the epoch's figures
// follow as JSON.
type endMsg struct {
	token uint32
	epoch int64
}

func (m batchMsg) append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, msgBatch)
	dst = binary.LittleEndian.AppendUint32(dst, m.slab)
	dst = binary.LittleEndian.AppendUint32(dst, m.token)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, m.seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.epoch))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.index))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.n))
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(m.slabWait))
}

func (m endMsg) append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, msgEnd)
	dst = binary.LittleEndian.AppendUint32(dst, m.token)
	return binary.LittleEndian.AppendUint64(dst, uint64(m.epoch))
}

func appendHello(dst []byte, js []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, msgHello)
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	return append(dst, js...)
}

// maxErrorText bounds an error message's text, well inside a packet.
const maxErrorText = 60000

func appendError(dst []byte, text string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, msgError)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	if len(text) > maxErrorText {
		text = text[:maxErrorText]
	}
	return append(dst, text...)
}

// msgType is b's type; b holds at least 4 bytes.
func msgType(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// sized checks that a message of type name is n bytes.
func sized(b []byte, name string, n int) error {
	if len(b) == n {
		return nil
	}
	return fmt.Errorf("%w: the loader sent a %s message of %d bytes (it has %d)", ErrProtocol, name, len(b), n)
}

func parseStart(b []byte) (startMsg, error) {
	if err := sized(b, "start", startLen); err != nil {
		return startMsg{}, err
	}
	return startMsg{token: binary.LittleEndian.Uint32(b[4:]), epoch: int64(binary.LittleEndian.Uint64(b[8:])),
		first: int64(binary.LittleEndian.Uint64(b[16:]))}, nil
}

func parseRelease(b []byte) (releaseMsg, error) {
	if err := sized(b, "release", releaseLen); err != nil {
		return releaseMsg{}, err
	}
	return releaseMsg{slab: binary.LittleEndian.Uint32(b[4:]), seq: binary.LittleEndian.Uint64(b[8:])}, nil
}

func parseStop(b []byte) error { return sized(b, "stop", stopLen) }
