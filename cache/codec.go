package cache

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/pipefeed/pipe/cache/store"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// Entry encoding: a little-endian uint32 count, an offset table of count
// uint32s (each sample's offset from the start of the entry), then per
// sample a header of sampleHeader bytes — label int32, C, H, W, flags
// uint16, generator state uint64 — and its CHW pixels, or for a sample
// skipped under on_error=skip, its error as "file\x00offset\x00message".
const (
	sampleHeader = 20
	flagSkipped  = 1
)

// Writer encodes one entry of n samples, appended to a buffer.
type Writer struct {
	buf   []byte
	table int // offset of the offset table in buf
	n, i  int
}

// NewWriter starts an entry of n samples appended to dst.
func NewWriter(dst []byte, n int) *Writer {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	table := len(dst)
	dst = append(dst, make([]byte, 4*n)...)
	return &Writer{buf: dst, table: table, n: n}
}

func (w *Writer) next() {
	if w.i >= w.n {
		panic(fmt.Sprintf("cache: sample %d of an entry of %d", w.i, w.n))
	}
	binary.LittleEndian.PutUint32(w.buf[w.table+4*w.i:], uint32(len(w.buf)-w.table+4))
	w.i++
}

// Sample appends a sample: its label, image and the state of its generator
// after the cached stages.
func (w *Writer) Sample(label int, img *transform.Image, state uint64) {
	w.next()
	w.buf = appendHeader(w.buf, label, img.C, img.H, img.W, 0, state)
	w.buf = append(w.buf, img.Pix...)
}

// Skipped appends a sample skipped under on_error=skip, keeping its error.
func (w *Writer) Skipped(re *source.RecordError) {
	w.next()
	w.buf = appendHeader(w.buf, -1, 0, 0, 0, flagSkipped, 0)
	w.buf = fmt.Appendf(w.buf, "%s\x00%d\x00%v", re.File, re.Offset, re.Err)
}

// Bytes returns the buffer with the entry appended; every sample must have
// been written.
func (w *Writer) Bytes() []byte {
	if w.i != w.n {
		panic(fmt.Sprintf("cache: entry of %d samples closed after %d", w.n, w.i))
	}
	return w.buf
}

func appendHeader(b []byte, label, c, h, w int, flags uint16, state uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(label)))
	b = binary.LittleEndian.AppendUint16(b, uint16(c))
	b = binary.LittleEndian.AppendUint16(b, uint16(h))
	b = binary.LittleEndian.AppendUint16(b, uint16(w))
	b = binary.LittleEndian.AppendUint16(b, flags)
	return binary.LittleEndian.AppendUint64(b, state)
}

// Sample is one decoded sample of an entry. Img aliases the entry's memory.
type Sample struct {
	Img   transform.Image
	Label int
	// State is the generator's state after the cached stages.
	State uint64
	// Skipped is the error of a sample skipped under on_error=skip, with
	// Index set to the sample's index; nil otherwise.
	Skipped *source.RecordError
	// fields are the encoded fields of a sample written by SampleFields
	// (Fields decodes them); nil for one written by Sample.
	fields []byte
}

// ParseSample decodes one encoded sample (header and body) whose sample
// index is index. b must hold at least the header (ChunkBytes and Shard
// check that).
func ParseSample(b []byte, index int) Sample {
	s := Sample{Label: int(int32(binary.LittleEndian.Uint32(b)))}
	c, h, w := int(binary.LittleEndian.Uint16(b[4:])), int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:]))
	flags := binary.LittleEndian.Uint16(b[10:])
	body := b[sampleHeader:]
	if flags&flagSkipped != 0 {
		parts := strings.SplitN(string(body), "\x00", 3)
		re := &source.RecordError{Index: index, Err: errors.New(parts[len(parts)-1])}
		if len(parts) == 3 {
			re.File = parts[0]
			fmt.Sscan(parts[1], &re.Offset)
		}
		s.Skipped = re
		return s
	}
	s.State = binary.LittleEndian.Uint64(b[12:])
	s.Img = transform.Image{Pix: body[: c*h*w : c*h*w], C: c, H: h, W: w}
	if flags&flagFields != 0 {
		s.fields = body[c*h*w:]
	}
	return s
}

// ChunkBytes returns, verified, the encoded samples [i0, i1) of an entry
// read in place and their offsets relative to the returned bytes (in offs,
// reused); nothing is returned unless every byte they need has passed its
// checksum.
func ChunkBytes(e *store.Entry, i0, i1 int, offs []int) ([]byte, []int, error) {
	head, err := e.Bytes(0, 4)
	if err != nil {
		return nil, nil, err
	}
	count := int(binary.LittleEndian.Uint32(head))
	if i0 < 0 || i1 > count || i0 >= i1 {
		return nil, nil, fmt.Errorf("%w: samples [%d, %d) of an entry of %d", store.ErrCorrupt, i0, i1, count)
	}
	tbl, err := e.Bytes(4+4*i0, 4*(min(i1+1, count)-i0))
	if err != nil {
		return nil, nil, err
	}
	start := int(binary.LittleEndian.Uint32(tbl))
	stop := e.Len()
	if i1 < count {
		stop = int(binary.LittleEndian.Uint32(tbl[4*(i1-i0):]))
	}
	offs = offs[:0]
	for i := range i1 - i0 {
		o := int(binary.LittleEndian.Uint32(tbl[4*i:])) - start
		offs = append(offs, o)
	}
	if start < 4+4*count || stop < start {
		return nil, nil, fmt.Errorf("%w: bad offsets", store.ErrCorrupt)
	}
	data, err := e.Bytes(start, stop-start)
	if err != nil {
		return nil, nil, err
	}
	if err := checkOffsets(offs, len(data)); err != nil {
		return nil, nil, err
	}
	return data, offs, nil
}

// checkOffsets checks that sample offsets into n bytes ascend and leave
// room for every header and body.
func checkOffsets(offs []int, n int) error {
	prev := 0
	for i, o := range offs {
		next := n
		if i+1 < len(offs) {
			next = offs[i+1]
		}
		if o < prev || next < o+sampleHeader {
			return fmt.Errorf("%w: bad offsets", store.ErrCorrupt)
		}
		prev = o
	}
	return nil
}

// Shard is one decoded entry in memory: the samples from key First on
// (sample indices, or plan positions of an ordered cache).
type Shard struct {
	First int
	id    ShardID
	raw   []byte
	offs  []int
	ready chan struct{}
	err   error
	refs  int
	elem  *list.Element // the shard's place in the LRU order
}

// parse reads the entry's offset table and checks it against its size, so
// Sample cannot read out of bounds whatever the bytes.
func (s *Shard) parse() error {
	if len(s.raw) < 4 {
		return fmt.Errorf("%w: shard too short", store.ErrCorrupt)
	}
	n := int(binary.LittleEndian.Uint32(s.raw))
	if n < 0 || 4+4*n > len(s.raw) {
		return fmt.Errorf("%w: offset table past the end", store.ErrCorrupt)
	}
	s.offs = s.offs[:0]
	for i := range n {
		s.offs = append(s.offs, int(binary.LittleEndian.Uint32(s.raw[4+4*i:])))
	}
	if n > 0 && s.offs[0] < 4+4*n {
		return fmt.Errorf("%w: bad offsets", store.ErrCorrupt)
	}
	return checkOffsets(s.offs, len(s.raw))
}

// Len is the number of samples in the shard.
func (s *Shard) Len() int { return len(s.offs) }

// Sample returns entry i of the shard, which is sample index.
func (s *Shard) Sample(i, index int) Sample {
	end := len(s.raw)
	if i+1 < len(s.offs) {
		end = s.offs[i+1]
	}
	return ParseSample(s.raw[s.offs[i]:end], index)
}
