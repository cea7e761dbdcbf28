package feed

import (
	"context"
	"encoding/binary"
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
)

// Message types: the first uint32 of every packet.
const (
	msgHello   = 1
	msgStart   = 2
	msgBatch   = 3
	msgRelease = 4
	msgEnd     = 5
	msgStop    = 6
	msgError   = 7
)

// Hello is what the hello message's JSON says: the batches and the ring.
type Hello struct {
	Version int    `json:"version"`
	Pipe    string `json:"pipe"` // pipe's module version
	PID     int    `json:"pid"`
	File    string `json:"file"`
	// Shape is one sample's [C, H, W]; Layout "nchw" or "nhwc" and DType
	// "float32", "float16" or "uint8" say how a batch lays it out.
	Shape  [3]int `json:"shape"`
	Layout string `json:"layout"`
	DType  string `json:"dtype"`
	// Batch is the batch size, Batches and Samples one epoch of this rank.
	Batch   int      `json:"batch"`
	Batches int      `json:"batches"`
	Samples int      `json:"samples"`
	Classes []string `json:"classes"`
	Rank    int      `json:"rank"`
	World   int      `json:"world"`
	Seed    uint64   `json:"seed"`
	Workers int      `json:"workers"`
	Ring    Layout   `json:"ring"`
}

// Ahead is how many batches the loader may hold at once: the one it is
// using and those sent ahead of it, waiting in the socket. The ring has
// that many slabs beyond the pipeline's own, so that its workers never
// wait for the loader's.
const Ahead = 3

// ErrProtocol is wrapped by errors about a peer that does not follow the
// protocol.
var ErrProtocol = errors.New("feed: protocol error")

// Serve serves p's batches over conn, the loader's end of a SOCK_SEQPACKET
// socket, until the loader goes away (nil), ctx is done, or the pipeline
// fails (its error, which the loader has been sent). name is the .pipe
// file's, for the loader's messages. p must have no prefetch stage: its
// host slabs become the ring's.
func Serve(ctx context.Context, p *pipe.Pipeline, conn *net.UnixConn, name string) error {
	s := p.Summary()
	if s.Devices > 0 {
		return fmt.Errorf("%w: pipe feed serves host batches; remove the prefetch stage (the loader copies each batch to its device)", pipe.ErrConfig)
	}
	// The ring: the engine's slabs, and Ahead more for the batches the
	// loader holds (the one in use, the rest waiting in the socket).
	n, _, rows := p.SlabLayout()
	ring, err := NewRing(n+Ahead, rows, s.HostTensor.SampleBytes())
	if err != nil {
		return err
	}
	defer ring.Close()
	if err := p.SetHostAllocator(ring, Ahead); err != nil {
		return err
	}
	t := s.HostTensor
	h := Hello{Version: Version, Pipe: pipe.BuildInfo().Version, PID: os.Getpid(), File: name,
		Shape: [3]int{t.Shape.C, t.Shape.H, t.Shape.W}, Layout: t.Layout.String(), DType: t.DType.String(),
		Batch: s.BatchSize, Batches: s.Batches, Samples: s.Samples, Classes: p.Source().Info().Classes,
		Rank: s.Rank, World: s.World, Seed: s.Seed, Workers: s.Workers, Ring: ring.Layout}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	msg := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, msgHello), Version)
	if _, _, err := conn.WriteMsgUnix(append(msg, js...), unix.UnixRights(int(ring.File().Fd())), nil); err != nil {
		return fmt.Errorf("feed: hello: %w", err)
	}
	sv := &server{ctx: ctx, p: p, conn: conn, ring: ring, held: map[int]*pipe.Batch{}, pool: pond.NewPool(1),
		freed: make(chan struct{}, 1)}
	defer sv.pool.StopAndWait()
	return sv.loop(ctx)
}

type server struct {
	ctx  context.Context
	p    *pipe.Pipeline
	conn *net.UnixConn
	ring *Ring
	pool pond.Pool

	sendMu sync.Mutex

	mu   sync.Mutex
	held map[int]*pipe.Batch // slab → the batch the loader holds in it
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
		n, err := s.conn.Read(buf)
		if err != nil || n == 0 {
			switch {
			case s.err() != nil:
				return s.err()
			case ctx.Err() != nil:
				return ctx.Err()
			case n == 0 && err == nil, errors.Is(err, io.EOF), errors.Is(err, unix.ECONNRESET):
				return nil // the loader is gone
			}
			return fmt.Errorf("feed: reading the loader's messages: %w", err)
		}
		m := buf[:n]
		if len(m) < 4 {
			return s.protocol("a %d-byte message", len(m))
		}
		switch typ := binary.LittleEndian.Uint32(m); typ {
		case msgStart:
			if len(m) != 24 {
				return s.protocol("a start message of %d bytes", len(m))
			}
			token := binary.LittleEndian.Uint32(m[4:])
			epoch, first := int64(binary.LittleEndian.Uint64(m[8:])), int64(binary.LittleEndian.Uint64(m[16:]))
			if err := s.start(ctx, token, epoch, first); err != nil {
				s.send(errorMsg(err))
				return err
			}
		case msgRelease:
			if len(m) != 8 {
				return s.protocol("a release message of %d bytes", len(m))
			}
			if err := s.release(int(binary.LittleEndian.Uint32(m[4:]))); err != nil {
				return err
			}
		case msgStop:
			s.stop(false)
		default:
			return s.protocol("message type %d", typ)
		}
	}
}

func (s *server) protocol(format string, args ...any) error {
	err := fmt.Errorf("%w: the loader sent %s", ErrProtocol, fmt.Sprintf(format, args...))
	s.send(errorMsg(err))
	return err
}

func (s *server) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// start stops any running epoch and streams epoch from batch first; its
// batch and end messages carry token, so that the loader can tell them from
// those of an epoch it stopped.
func (s *server) start(ctx context.Context, token uint32, epoch, first int64) error {
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
			msg := binary.LittleEndian.AppendUint32(nil, msgEnd)
			msg = binary.LittleEndian.AppendUint32(msg, token)
			msg = binary.LittleEndian.AppendUint64(msg, uint64(epoch))
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
			s.send(errorMsg(err))
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
		s.held[i] = b
		s.mu.Unlock()
		msg := binary.LittleEndian.AppendUint32(nil, msgBatch)
		msg = binary.LittleEndian.AppendUint32(msg, uint32(i))
		msg = binary.LittleEndian.AppendUint32(msg, token)
		msg = binary.LittleEndian.AppendUint32(msg, 0)
		msg = binary.LittleEndian.AppendUint64(msg, uint64(b.Epoch))
		msg = binary.LittleEndian.AppendUint64(msg, uint64(b.Index))
		msg = binary.LittleEndian.AppendUint64(msg, uint64(b.N))
		msg = binary.LittleEndian.AppendUint64(msg, math.Float64bits(x.Stats().SlabWaitSeconds))
		if err := s.send(msg); err != nil {
			return nil // the loader is gone: loop sees it
		}
	}
}

// release hands slab i back to the pipeline.
func (s *server) release(i int) error {
	s.mu.Lock()
	b, ok := s.held[i]
	delete(s.held, i)
	s.mu.Unlock()
	if !ok {
		return s.protocol("a release of slab %d, which it does not hold", i)
	}
	b.Release()
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
	held := s.held
	s.held = map[int]*pipe.Batch{}
	s.mu.Unlock()
	for _, b := range held {
		b.Release()
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

func errorMsg(err error) []byte {
	msg := binary.LittleEndian.AppendUint32(nil, msgError)
	msg = binary.LittleEndian.AppendUint32(msg, 0)
	text := err.Error()
	if len(text) > 60000 {
		text = text[:60000]
	}
	return append(msg, text...)
}

// Refuse tells the loader why no batches will come: err, for a pipeline
// that did not load.
func Refuse(conn *net.UnixConn, err error) error {
	_, werr := conn.Write(errorMsg(err))
	return werr
}

// Watch calls gone if the loader goes away (its end of conn closes) before
// the returned stop is called: pipe feed loads the pipeline under a
// context that gone cancels, so that a loader killed during a download or
// an index build does not leave pipe working for nobody. The loader sends
// nothing before the hello.
func Watch(conn *net.UnixConn, gone func()) (stop func()) {
	pool := pond.NewPool(1)
	pool.Submit(func() {
		var b [64]byte
		if n, err := conn.Read(b[:]); n == 0 && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET)) {
			gone()
		}
	})
	return func() {
		conn.SetReadDeadline(time.Now())
		pool.StopAndWait()
		conn.SetReadDeadline(time.Time{})
	}
}
