package source

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Fingerprinter is implemented by sources that can name the exact data they
// read, so that a cache of their output is found again only for that data.
type Fingerprinter interface {
	// Fingerprint changes whenever the data changes: it covers each file's
	// path, size and modification time and a hash of its first and last
	// 64 KiB, and the source's own parameters.
	Fingerprint() (string, error)
}

const fingerprintBlock = 64 << 10

// fileFingerprint describes one file for Fingerprint.
func fileFingerprint(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := xxhash.New()
	buf := make([]byte, fingerprintBlock)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	h.Write(buf[:n])
	if st.Size() > fingerprintBlock {
		n, err := f.ReadAt(buf, max(st.Size()-fingerprintBlock, fingerprintBlock))
		if err != nil && err != io.EOF {
			return "", err
		}
		h.Write(buf[:n])
	}
	return fmt.Sprintf("%s size=%d mtime=%d hash=%016x", name, st.Size(), st.ModTime().UnixNano(), h.Sum64()), nil
}

// Fingerprint covers the files the source was read from and its identity.
func (c *CIFAR) Fingerprint() (string, error) {
	parts := []string{c.info.Identity}
	for _, name := range c.osFiles {
		fp, err := fileFingerprint(name)
		if err != nil {
			return "", fmt.Errorf("%s: fingerprint: %w", c.format.name, err)
		}
		parts = append(parts, fp)
	}
	return strings.Join(parts, "\n"), nil
}

// syntheticVersion changes whenever the generator's output does.
const syntheticVersion = "synthetic-v1"

// Fingerprint is the generator's version and parameters: the data is a
// function of them alone.
func (s *Synthetic) Fingerprint() (string, error) {
	return syntheticVersion + " " + s.Info().Identity, nil
}
