package source

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/pipefeed/pipe/source/remote"
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

// RedactURLs returns s with every URL in it passed through [remote.Redact],
// for text that shows or stores URLs among other words: an identity, a
// fingerprint, a pipeline's stages, an error's message. A URL runs from its
// scheme to the next space or quote (a URL holds neither unescaped), less
// the punctuation that ends a clause (:,;.) after it).
func RedactURLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := len(s)
		if n := strings.IndexAny(s[i+3:], " \t\n\"'`"); n >= 0 {
			end = i + 3 + n
		}
		u := strings.TrimRight(s[start:end], ":,;.)")
		b.WriteString(s[:start])
		b.WriteString(remote.Redact(u))
		s = s[start+len(u):]
	}
}

// isSchemeByte reports whether c may be part of a URL's scheme.
func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

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
