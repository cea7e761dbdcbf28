package trainer

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// checkpointVersion is the format of checkpoint files; a file with another
// version is refused rather than misread.
const checkpointVersion = 1

// checkpoint is what a checkpoint file holds: one model (never a copy per
// replica), the optimiser's state, and where training stands.
type checkpoint struct {
	Version int
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

// Save writes the trained model (after Sync), replica 0's optimiser state
// and the position to path atomically: a temporary file in the same
// directory, synced, then renamed over path, so a crash leaves the old
// checkpoint or the new one, never half of one. identity describes the run
// (model, data, batch) and history is the caller's to keep.
func (t *Trainer) Save(path, identity string, history []byte) error {
	rep := t.replicas[0]
	c := checkpoint{Version: checkpointVersion, Identity: identity, Model: rep.model.Name,
		OptT: rep.opt.t, OptState: rep.opt.state, OptSq: rep.opt.sq, Step: t.Step, Epoch: t.Epoch,
		InEpoch: t.InEpoch, Part: t.part, History: history}
	for _, p := range rep.model.Params() {
		c.Params = append(c.Params, p.W)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&c); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(buf.Bytes()); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("trainer: writing checkpoint %s: %w", path, err)
	}
	return nil
}

// Load restores a checkpoint written by Save into every replica and returns
// its history. The run must have the same identity.
func (t *Trainer) Load(path, identity string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c checkpoint
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&c); err != nil {
		return nil, fmt.Errorf("trainer: %s: %w: not a checkpoint (%v)", path, ErrCheckpoint, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("trainer: %s: %w: format %d, this build reads %d", path, ErrCheckpoint, c.Version, checkpointVersion)
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
			copy(rep.opt.state[i], c.OptState[i])
			copy(rep.opt.sq[i], c.OptSq[i])
		}
		rep.opt.t = c.OptT
	}
	t.Step, t.Epoch, t.InEpoch, t.part = c.Step, c.Epoch, c.InEpoch, c.Part
	return c.History, nil
}
