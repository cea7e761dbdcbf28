package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
)

// checkpointVersion is the format of checkpoint files; a file with another
// version is refused rather than misread. Format 2 added the header and its
// checksum; format 1 files (a bare gob) are refused.
const checkpointVersion = 2

// A checkpoint file is a header followed by the gob-encoded checkpoint:
//
//	magic   [8]byte  "pipeckpt"
//	version uint32   little-endian, checkpointVersion
//	length  uint64   bytes of gob that follow
//	sum     [32]byte SHA-256 of those bytes
//
// so that a flipped bit, a truncated copy or a file that is not a checkpoint
// is refused by ReadCheckpoint instead of silently changing the training.
const (
	checkpointMagic  = "pipeckpt"
	checkpointHeader = len(checkpointMagic) + 4 + 8 + sha256.Size
)

// checkpoint is what a checkpoint file holds: one model (never a copy per
// replica), the optimiser's state, and where training stands.
type checkpoint struct {
	// Identity describes the run's model and data; a resume with another
	// identity is refused.
	Identity string
	Model    string
	Params   [][]float32 // every parameter and buffer, in the model's order
	OptT     int64
	OptState [][]float32
	OptSq    [][]float32
	Step     int64
	Epoch    int
	InEpoch  int // steps of Epoch done (a stop mid-epoch)
	Part     partial
	History  []byte // the caller's (metrics so far)
}

// ErrCheckpoint is wrapped by errors reading a checkpoint that does not fit
// the run.
var ErrCheckpoint = errors.New("checkpoint does not fit this run")

// ErrCheckpointDamaged is wrapped by errors reading a checkpoint whose
// bytes are not the ones WriteCheckpoint wrote: truncated, or failing its checksum.
var ErrCheckpointDamaged = errors.New("checkpoint is damaged")

// WriteCheckpoint writes the trained model (after Sync), replica 0's
// optimiser state and the position to w: a header with the body's length
// and SHA-256, then the gob. identity describes the run (model, data,
// batch) and history is the caller's to keep. Where the bytes go (a file
// written atomically, as pipe does) is the caller's business.
func (t *Trainer) WriteCheckpoint(w io.Writer, identity string, history []byte) error {
	rep := t.replicas[0]
	c := checkpoint{Identity: identity, Model: rep.model.Name,
		OptT: rep.opt.Steps(), Step: t.Step, Epoch: t.Epoch,
		InEpoch: t.InEpoch, Part: t.part, History: history}
	for i, p := range rep.model.Params() {
		c.Params = append(c.Params, p.W)
		first, second := rep.opt.State(i)
		c.OptState, c.OptSq = append(c.OptState, first), append(c.OptSq, second)
	}
	var buf bytes.Buffer
	buf.Write(make([]byte, checkpointHeader))
	if err := gob.NewEncoder(&buf).Encode(&c); err != nil {
		return err
	}
	b := buf.Bytes()
	body := b[checkpointHeader:]
	h := b[:0:checkpointHeader]
	h = append(h, checkpointMagic...)
	h = binary.LittleEndian.AppendUint32(h, checkpointVersion)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(body)))
	sum := sha256.Sum256(body)
	_ = append(h, sum[:]...)
	_, err := w.Write(b)
	return err
}

// readCheckpoint reads a checkpoint's bytes with read and checks them
// (parseCheckpoint). In a job of several ranks, rank 0 alone calls read
// and broadcasts the bytes (or its error), so that every rank resumes from
// the same checkpoint, where the others may not see rank 0's files at all.
func readCheckpoint(name string, read func() ([]byte, error), g Group) (*checkpoint, error) {
	if single(g) {
		b, err := read()
		if err != nil {
			return nil, err
		}
		return parseCheckpoint(name, b)
	}
	// A message of one status byte (0: the checkpoint follows; 1: rank
	// 0's error follows).
	var msg []byte
	if g.Rank() == 0 {
		b, err := read()
		if err != nil {
			msg = append([]byte{1}, err.Error()...)
		} else {
			msg = append([]byte{0}, b...)
		}
	}
	msg, err := g.Broadcast(msg, 0)
	if err != nil {
		return nil, err
	}
	if len(msg) == 0 || msg[0] != 0 {
		if len(msg) > 0 {
			msg = msg[1:]
		}
		return nil, fmt.Errorf("trainer: rank 0 reading the checkpoint: %s", msg)
	}
	return parseCheckpoint(name, msg[1:])
}

// parseCheckpoint checks b, the bytes of checkpoint file path: its header,
// length and checksum, then the gob.
func parseCheckpoint(path string, b []byte) (*checkpoint, error) {
	if len(b) < checkpointHeader || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("trainer: %s: %w: not a checkpoint of format %d (no %q header); move it away to start again", path, ErrCheckpoint, checkpointVersion, checkpointMagic)
	}
	h := b[len(checkpointMagic):]
	if v := binary.LittleEndian.Uint32(h); v != checkpointVersion {
		return nil, fmt.Errorf("trainer: %s: %w: format %d, this build reads %d", path, ErrCheckpoint, v, checkpointVersion)
	}
	body := b[checkpointHeader:]
	if n := binary.LittleEndian.Uint64(h[4:]); n != uint64(len(body)) {
		return nil, fmt.Errorf("trainer: %s: %w: %d bytes of %d (truncated or extended)", path, ErrCheckpointDamaged, len(body), n)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], h[12:12+sha256.Size]) {
		return nil, fmt.Errorf("trainer: %s: %w: its SHA-256 checksum does not match its contents", path, ErrCheckpointDamaged)
	}
	var c checkpoint
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&c); err != nil {
		return nil, fmt.Errorf("trainer: %s: %w: checksum ok but unreadable (%v)", path, ErrCheckpoint, err)
	}
	return &c, nil
}

// ReadCheckpoint restores a checkpoint WriteCheckpoint wrote, whose bytes
// read returns, into every replica and returns its history; name (a file's
// path) is for errors. The run must have the same identity. Bytes that
// fail their checksum are refused with ErrCheckpointDamaged. In a job of
// several ranks it is collective: rank 0 alone calls read, and every rank
// loads what it read.
func (t *Trainer) ReadCheckpoint(name string, read func() ([]byte, error), identity string) ([]byte, error) {
	path := name
	c, err := readCheckpoint(name, read, t.cfg.Group)
	if err != nil {
		return nil, err
	}
	if c.Identity != identity {
		return nil, fmt.Errorf("trainer: %s: %w: it was written by\n  %s\nand this run is\n  %s", path, ErrCheckpoint, c.Identity, identity)
	}
	for _, rep := range t.replicas {
		ps := rep.model.Params()
		if len(ps) != len(c.Params) || len(c.OptState) != len(ps) {
			return nil, fmt.Errorf("trainer: %s: %w: %d parameters, the model has %d", path, ErrCheckpoint, len(c.Params), len(ps))
		}
		for i, p := range ps {
			if len(p.W) != len(c.Params[i]) {
				return nil, fmt.Errorf("trainer: %s: %w: parameter %d has %d values, want %d", path, ErrCheckpoint, i, len(c.Params[i]), len(p.W))
			}
			copy(p.W, c.Params[i])
			first, second := rep.opt.State(i)
			copy(first, c.OptState[i])
			if i < len(c.OptSq) {
				copy(second, c.OptSq[i])
			}
		}
		rep.opt.SetSteps(c.OptT)
	}
	t.Step, t.Epoch, t.InEpoch, t.part = c.Step, c.Epoch, c.InEpoch, c.Part
	if err := t.load(); err != nil {
		return nil, err
	}
	return c.History, nil
}
