package cache

import (
	"container/list"
	"sync"
)

// shardLRU keeps decoded shards within a byte budget. Shards in use are
// pinned by a reference count; evicted shards give their buffers back for
// reuse, so a steady state does not allocate shard-sized memory.
type shardLRU struct {
	mu     sync.Mutex
	budget int64
	bytes  int64
	byID   map[ShardID]*Shard
	order  *list.List // front: most recently used
	free   [][]byte
}

func newShardLRU(budget int64) *shardLRU {
	return &shardLRU{budget: budget, byID: map[ShardID]*Shard{}, order: list.New()}
}

// acquire returns the shard for id, pinned. created reports that the caller
// must fill it (raw, offs or err) and then close its ready channel.
func (l *shardLRU) acquire(id ShardID) (s *Shard, created bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.byID[id]; s != nil {
		s.refs++
		l.order.MoveToFront(s.elem)
		return s, false
	}
	s = &Shard{id: id, ready: make(chan struct{}), refs: 1}
	if n := len(l.free); n > 0 {
		s.raw, l.free = l.free[n-1][:0], l.free[:n-1]
	}
	s.elem = l.order.PushFront(s)
	l.byID[id] = s
	return s, true
}

// release unpins a shard and evicts unpinned shards beyond the budget.
// A shard whose fill failed is dropped at once, so a later epoch retries.
func (l *shardLRU) release(s *Shard) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.refs--
	if s.err != nil && s.refs == 0 {
		l.drop(s)
	}
	for e := l.order.Back(); e != nil && l.bytes > l.budget; {
		prev := e.Prev()
		if v := e.Value.(*Shard); v.refs == 0 {
			l.drop(v)
		}
		e = prev
	}
}

// filled counts the memory of a shard just filled against the budget.
func (l *shardLRU) filled(s *Shard) {
	l.mu.Lock()
	l.bytes += int64(cap(s.raw))
	l.mu.Unlock()
}

func (l *shardLRU) drop(s *Shard) {
	if l.byID[s.id] != s {
		return
	}
	delete(l.byID, s.id)
	l.order.Remove(s.elem)
	if s.err == nil {
		l.bytes -= int64(cap(s.raw))
	}
	if s.err == nil && cap(s.raw) > 0 && len(l.free) < 8 {
		l.free = append(l.free, s.raw)
	}
}
