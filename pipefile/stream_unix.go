//go:build unix

package pipefile

import (
	"os"
	"syscall"
)

// openStream opens a FIFO or a device without blocking: the open of a FIFO
// would otherwise wait for a writer, beyond any context's reach, and the
// file is read through the runtime's poller, whose deadlines stop a read.
func openStream(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
