//go:build !unix

package pipefile

import "os"

// openStream opens a file that is not a regular one.
func openStream(name string) (*os.File, error) { return os.Open(name) }
