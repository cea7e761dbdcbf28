package feed

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/source"
)

// Fingerprint names the stream of batches p makes, so that a loader resumes
// a saved position only in the same stream: a hash of the source's identity
// (its data: resolved paths, split, parameters; URLs without their secrets,
// so a presigned URL whose signature rotates is the same stream), the seed, and every stage
// that shapes the batches by its canonical line (Stage.String: every
// parameter written out), so that two files, or a file and a Go program,
// that build the same pipeline share it, and any change to the data, an
// augmentation, the batching or the seed changes it. Stages that do not
// change a batch are left out: pipeline (workers, on_error, and rank and
// world, which the loader compares itself), prefetch, train and eval; a
// cache stage counts only where it echoes epochs, by how many it keeps. In
// an elastic pipeline the batch is named by the global batch, which every
// number of ranks slices alike, rather than by this rank's share of it.
func Fingerprint(p *pipe.Pipeline) string {
	s := p.Summary()
	parts := []string{"pipefeed stream 1", source.RedactURLs(p.Source().Info().Identity), fmt.Sprintf("seed=%d", s.Seed)}
	for _, st := range p.Stages() {
		switch st.Name() {
		case "source", "pipeline", "prefetch", "train", "eval":
		case "cache":
			if c := s.Cache; c != nil && c.Echo {
				parts = append(parts, fmt.Sprintf("cache epochs=%d", c.Epochs))
			}
		case "batch":
			if s.Elastic {
				parts = append(parts, fmt.Sprintf("elastic global batch=%d", s.GlobalBatch))
			} else {
				parts = append(parts, st.String())
			}
		default:
			parts = append(parts, st.String())
		}
	}
	h := sha256.New()
	var n [8]byte
	for _, part := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
