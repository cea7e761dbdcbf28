//go:build linux

package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"time"

	"github.com/alitto/pond/v2"
	"golang.org/x/sys/unix"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/fields"
)

// Serve serves p's batches over conn, the loader's end of a SOCK_SEQPACKET
// socket, until the loader goes away (nil), ctx is done, or the pipeline
// fails. It tells the loader every error it returns other than ctx's (a
// pipeline that cannot be served, the pipeline's error, the loader's breach
// of the protocol), which it wraps in a ToldError once the loader has it.
// name is the .pipe file's, for the loader's messages. p must have no
// prefetch stage: its host slabs become the ring's.
func Serve(ctx context.Context, p *pipe.Pipeline, conn *net.UnixConn, name string) error {
	ring, err := hello(p, conn, name)
	if err != nil {
		return Refuse(conn, err)
	}
	defer ring.Close()
	sv := &server{ctx: ctx, p: p, conn: conn, ring: ring, held: map[uint32]held{}, pool: pond.NewPool(1),
		freed: make(chan struct{}, 1)}
	defer sv.pool.StopAndWait()
	return sv.loop(ctx)
}

// hello makes p's ring and sends the hello.
func hello(p *pipe.Pipeline, conn *net.UnixConn, name string) (*Ring, error) {
	if err := passCred(conn); err != nil {
		return nil, err
	}
	s := p.Summary()
	if s.Devices > 0 {
		return nil, fmt.Errorf("%w: pipe feed serves host batches; remove the prefetch stage (the loader copies each batch to its device)", pipe.ErrConfig)
	}
	// The ring: the engine's slabs, and Ahead more for the batches the
	// loader holds (the one in use, the rest waiting in the socket).
	n, _, rows := p.SlabLayout()
	ring, err := NewRing(n+Ahead, rows, s.HostTensor.SampleBytes(), p.SlabBytes())
	if err != nil {
		return nil, err
	}
	if err := p.SetHostAllocator(ring, Ahead); err != nil {
		ring.Close()
		return nil, err
	}
	t := s.HostTensor
	h := Hello{Version: Version, Pipe: pipe.BuildInfo().Version, PID: os.Getpid(), File: name,
		Shape: [3]int{t.Shape.C, t.Shape.H, t.Shape.W}, Layout: t.Layout.String(), DType: t.DType.String(),
		Batch: s.BatchSize, Batches: s.Batches, Samples: s.Samples, Classes: p.Source().Info().Classes,
		Rank: s.Rank, World: s.World, Elastic: s.Elastic, GlobalBatch: s.GlobalBatch, Seed: s.Seed, Workers: s.Workers, Ahead: Ahead, Fingerprint: Fingerprint(p), Ring: ring.Layout,
		Fields: fieldsOf(p)}
	js, err := json.Marshal(h)
	if err == nil {
		_, _, err = conn.WriteMsgUnix(appendHello(nil, js), unix.UnixRights(int(ring.File().Fd())), nil)
	}
	if err != nil {
		ring.Close()
		return nil, fmt.Errorf("feed: hello: %w", err)
	}
	return ring, nil
}

// fieldsOf describes p's fields for the hello; nil without a fields stage
// or a mix stage's targets.
func fieldsOf(p *pipe.Pipeline) *Fields {
	sc := p.Schema()
	offset, regions := p.FieldLayout()
	if sc == nil && len(regions) == 0 {
		return nil
	}
	f := &Fields{Offset: offset, Regions: []Region{}}
	if sc != nil {
		f.Schema = sc.String()
		for _, fd := range sc.Fields {
			f.Names = append(f.Names, fd.Kind.String())
		}
	} else {
		f.Names = []string{fields.Image.String(), fields.Label.String()}
	}
	for _, r := range regions {
		f.Regions = append(f.Regions, Region{Kind: r.Kind.String(), DType: r.DType.String(), Shape: r.Shape,
			Offset: r.Offset, Counts: r.Counts})
		if r.Kind == fields.Targets {
			f.Names = append(f.Names, r.Kind.String())
		}
	}
	return f
}

// held is a batch the loader holds, and its batch message's sequence number.
type held struct {
	b   *pipe.Batch
	seq uint64
}

type server struct {
	ctx  context.Context
	p    *pipe.Pipeline
	conn *net.UnixConn
	ring *Ring
	pool pond.Pool

	sendMu sync.Mutex

	mu   sync.Mutex
	held map[uint32]held // slab → the batch the loader holds in it
	seq  uint64          // the last batch message's sequence number
	// ahead is the epoch after the one that ended, started before the
	// loader asks for it (as it will, unless it selects another), and
	// aheadEpoch its number.
	ahead      *pipe.Epoch
	aheadEpoch int64
	freed      chan struct{} // a slab came back (or the epoch stops)
	epoch      *pipe.Epoch
	group      pond.TaskGroup
	stopping   bool
	failed     error // the running epoch's error, once it has stopped on one
}

// loop reads the loader's messages until it goes away, ctx ends or the
// pipeline fails.
func (s *server) loop(ctx context.Context) error {
	stopRead := context.AfterFunc(ctx, func() { s.conn.SetReadDeadline(time.Now()) })
	defer stopRead()
	defer s.stop(false)
	buf := make([]byte, 64)
	for {
		n, err := readPacket(s.conn, buf)
		if err != nil {
			switch {
			case s.err() != nil:
				return s.err()
			case ctx.Err() != nil:
				return ctx.Err()
			case gone(err):
				return nil
			}
			return fmt.Errorf("feed: reading the loader's messages: %w", err)
		}
		if err := s.handle(ctx, buf[:n]); err != nil {
			return s.tell(err)
		}
	}
}

// tell sends err to the loader, and returns it, as a ToldError once sent.
func (s *server) tell(err error) error {
	if s.send(appendError(nil, err.Error())) != nil {
		return err
	}
	return ToldError{err}
}

// handle acts on the loader's message m; an error ends the connection, and
// the loader is told it.
func (s *server) handle(ctx context.Context, m []byte) error {
	if len(m) == 0 {
		return breach("an empty packet")
	}
	if len(m) < 4 {
		return breach("a %d-byte message", len(m))
	}
	switch typ := msgType(m); typ {
	case msgStart:
		sm, err := parseStart(m)
		if err != nil {
			return err
		}
		return s.start(ctx, sm)
	case msgRelease:
		r, err := parseRelease(m)
		if err != nil {
			return err
		}
		return s.release(r)
	case msgStop:
		if err := parseStop(m); err != nil {
			return err
		}
		s.stop(false)
		return nil
	default:
		return breach("message type %d", typ)
	}
}

// breach is an error about the loader's breach of the protocol: what it
// sent.
func breach(format string, args ...any) error {
	return fmt.Errorf("%w: the loader sent %s", ErrProtocol, fmt.Sprintf(format, args...))
}

func (s *server) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// start stops any running epoch and streams epoch from batch first; its
// batch and end messages carry token, so that the loader can tell them from
// those of an epoch it stopped.
func (s *server) start(ctx context.Context, m startMsg) error {
	token, epoch, first := m.token, m.epoch, m.first
	s.stop(true)
	if epoch < 0 || epoch > math.MaxInt32 || first < 0 || first > int64(s.p.Batches()) {
		s.closeAhead()
		return fmt.Errorf("%w: the loader asked for batch %d of epoch %d (an epoch has %d batches)", ErrProtocol, first, epoch, s.p.Batches())
	}
	s.mu.Lock()
	x := s.ahead
	adopt := x != nil && s.aheadEpoch == epoch && first == 0
	s.mu.Unlock()
	if !adopt {
		s.closeAhead()
		var err error
		if x, err = s.p.EpochFrom(ctx, int(epoch), int(first)); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.ahead = nil
	s.mu.Unlock()
	g := s.pool.NewGroup()
	s.mu.Lock()
	s.epoch, s.group, s.stopping = x, g, false
	s.mu.Unlock()
	g.SubmitErr(func() error { return s.stream(x, token, int(epoch)) })
	return nil
}

// stream sends epoch's batches as the pipeline makes them, then its end.
func (s *server) stream(x *pipe.Epoch, token uint32, epoch int) error {
	for {
		// The loader holds the batches sent and not released (read or
		// waiting in the socket); the pipeline needs a free slab to make
		// the next.
		for s.holding() >= Ahead {
			<-s.freed
			if s.isStopping() {
				return nil
			}
		}
		b, err := x.Next()
		if errors.Is(err, io.EOF) {
			js, _ := json.Marshal(x.Stats())
			msg := endMsg{token: token, epoch: int64(epoch)}.append(nil)
			if err := s.send(append(msg, js...)); err != nil {
				return nil // the loader is gone: loop sees it
			}
			// The loader moves on to the next epoch unless it selects
			// another: start making it now, into the free slabs, so that
			// its first batches are ready when asked for.
			x.Close()
			if next, err := s.p.EpochFrom(s.ctx, epoch+1, 0); err == nil {
				s.mu.Lock()
				s.ahead, s.aheadEpoch = next, int64(epoch+1)
				s.mu.Unlock()
			}
			return nil
		}
		if err != nil {
			s.mu.Lock()
			stopping := s.stopping
			if !stopping {
				s.failed = err
			}
			s.mu.Unlock()
			if stopping {
				return nil
			}
			err = s.tell(err)
			s.mu.Lock()
			s.failed = err
			s.mu.Unlock()
			s.conn.CloseRead() // ends loop's read with the error
			return err
		}
		if b.N == 0 { // every record of the batch skipped
			b.Release()
			continue
		}
		i, err := s.ring.slabOf(b.Data)
		if err != nil {
			b.Release()
			return err
		}
		s.ring.setLabels(i, b.Labels)
		s.mu.Lock()
		s.seq++
		m := batchMsg{slab: uint32(i), token: token, seq: s.seq, epoch: int64(b.Epoch), index: int64(b.Index), n: int64(b.N),
			slabWait: x.Stats().SlabWaitSeconds}
		s.held[uint32(i)] = held{b, s.seq}
		s.mu.Unlock()
		msg := m.append(nil)
		if err := s.send(msg); err != nil {
			return nil // the loader is gone: loop sees it
		}
	}
}

// release hands back the slab of the batch r names. A release must name
// the batch the slab holds: a late duplicate release of a slab that holds a
// newer batch by now would have pipe overwrite a batch the loader holds.
func (s *server) release(r releaseMsg) error {
	s.mu.Lock()
	h, ok := s.held[r.slab]
	if ok && h.seq == r.seq {
		delete(s.held, r.slab)
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return breach("a release of slab %d (batch %d), which it does not hold", r.slab, r.seq)
	case h.seq != r.seq:
		return breach("a stale release of slab %d, naming batch %d: the slab holds batch %d now", r.slab, r.seq, h.seq)
	}
	h.b.Release()
	s.signal()
	return nil
}

func (s *server) signal() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

func (s *server) holding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

func (s *server) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// stop stops the running epoch, if any, and takes back every slab the
// loader held; the epoch started ahead is stopped too unless keepAhead.
func (s *server) stop(keepAhead bool) {
	s.mu.Lock()
	x, g := s.epoch, s.group
	s.epoch, s.group, s.stopping = nil, nil, true
	s.mu.Unlock()
	if !keepAhead {
		defer s.closeAhead()
	}
	if x == nil {
		return
	}
	s.signal()
	x.Close()
	g.Wait()
	s.mu.Lock()
	taken := s.held
	s.held = map[uint32]held{}
	s.mu.Unlock()
	for _, h := range taken {
		h.b.Release()
	}
}

func (s *server) closeAhead() {
	s.mu.Lock()
	x := s.ahead
	s.ahead = nil
	s.mu.Unlock()
	if x != nil {
		x.Close()
	}
}

func (s *server) send(msg []byte) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_, err := s.conn.Write(msg)
	return err
}
