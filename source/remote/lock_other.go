//go:build !unix

package remote

import (
	"context"
	"sync"
)

// Without flock, the cache's locks hold within one process only: two
// processes sharing a cache directory may both fetch a shard (each into
// its own temporary file, so neither sees the other's half written), and
// no lock file is made.
var locks sync.Map // name → chan struct{} of capacity 1

// locksAcrossProcesses says whether a shard's lock holds for every
// process: not here, so another process's temporary file may be a fetch
// under way.
const locksAcrossProcesses = false

type fileLock struct{ ch chan struct{} }

func (l *fileLock) unlock() { <-l.ch }
func (l *fileLock) remove() { l.unlock() }

func lockFile(ctx context.Context, name string) (*fileLock, error) {
	v, _ := locks.LoadOrStore(name, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return &fileLock{ch}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func tryLockFile(name string) (*fileLock, bool) {
	v, _ := locks.LoadOrStore(name, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return &fileLock{ch}, true
	default:
		return nil, false
	}
}
