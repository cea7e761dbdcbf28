//go:build linux

package feed

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// pipeline is a small CIFAR-shaped recipe with random crops and flips.
func pipeline(t *testing.T, n, batch, workers int) *pipe.Pipeline {
	t.Helper()
	src, err := source.NewSynthetic(n, source.Train, 1)
	if err != nil {
		t.Fatal(err)
	}
	crop, _ := transform.RandomCrop(32, 4, transform.FillReflect)
	flip, _ := transform.Flip(transform.Horizontal, 0.5)
	norm, _ := transform.Normalize([]float64{0.5}, []float64{0.25})
	p, err := pipe.New(pipe.Source(src), pipe.Shuffle(5), pipe.Map(crop), pipe.Map(flip), pipe.Normalize(norm),
		pipe.Options(pipe.Settings{Workers: workers}), pipe.Batching(batch, false), pipe.ToTensor(transform.NCHW, transform.Float32))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// client is a loader written in Go, as the Python one works.
type client struct {
	t     *testing.T
	conn  *net.UnixConn
	hello Hello
	mem   []byte
	token uint32
}

// socketPair is a SOCK_SEQPACKET socket pair: the loader's end and pipe's.
func socketPair(t *testing.T) (ours, theirs *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socket")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// serve starts Serve on one end of a socket pair and returns a client on
// the other, past the hello, and Serve's result.
func serve(t *testing.T, p *pipe.Pipeline) (*client, <-chan error) {
	t.Helper()
	ours, theirs := socketPair(t)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), p, theirs, "test.pipe")
		theirs.Close()
	}()
	c := &client{t: t, conn: ours}
	t.Cleanup(func() { ours.Close() })
	buf, oob := make([]byte, 1<<16), make([]byte, 64)
	n, oobn, _, _, err := ours.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if typ := msgType(buf); typ != msgHello {
		t.Fatalf("first message %d: %s", typ, buf[8:n])
	}
	version, js, err := parseHello(buf[:n])
	if err != nil || version != Version {
		t.Fatalf("hello of version %d: %v", version, err)
	}
	if err := json.Unmarshal(js, &c.hello); err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("hello's descriptor: %v", err)
	}
	rights, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(rights) != 1 {
		t.Fatalf("hello's descriptor: %v", err)
	}
	c.mem, err = unix.Mmap(rights[0], 0, int(c.hello.Ring.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(rights[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(c.mem) })
	want := c.hello.Ring
	want.Size = 0
	if v, l, err := parseHeader(c.mem); err != nil || v != Version || l != want {
		t.Fatalf("ring header: version %d, %+v (%v); hello says %+v", v, l, err, c.hello.Ring)
	}
	return c, done
}

func (c *client) send(b []byte) {
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) start(epoch, first int) {
	c.token++
	c.send(startMsg{token: c.token, epoch: int64(epoch), first: int64(first)}.append(nil))
}

// release hands back the slab of batch g.
func (c *client) release(g got) {
	c.send(releaseMsg{slab: g.slab, seq: g.seq}.append(nil))
}

// got is a message from pipe: a batch, an end or an error.
type got struct {
	typ, slab, token uint32
	seq              uint64
	index, n         int
	text             string
}

func (c *client) next() got {
	buf := make([]byte, 1<<16)
	n, err := c.conn.Read(buf)
	if err != nil {
		c.t.Fatal(err)
	}
	m := buf[:n]
	g := got{typ: msgType(m)}
	switch g.typ {
	case msgBatch:
		b, err := parseBatch(m)
		if err != nil {
			c.t.Fatal(err)
		}
		g.slab, g.token, g.seq, g.index, g.n = b.slab, b.token, b.seq, int(b.index), int(b.n)
	case msgEnd:
		e, _, err := parseEnd(m)
		if err != nil {
			c.t.Fatal(err)
		}
		g.token = e.token
	case msgError:
		if g.text, err = parseError(m); err != nil {
			c.t.Fatal(err)
		}
	}
	return g
}

// stream reads the epoch started with the current token, releasing each
// batch after hashing it as pipe's checksum does, from batch first on.
func (c *client) stream(sum *pipe.Checksum) (batches int) {
	for {
		g := c.next()
		switch {
		case g.typ == msgError:
			c.t.Fatalf("pipe: %s", g.text)
		case g.token != c.token:
			continue
		case g.typ == msgEnd:
			return batches
		}
		sum.AddSamples(c.batch(g))
		batches++
		c.release(g)
	}
}

// batch is the data and labels of the batch g announces, as in its slab.
func (c *client) batch(g got) ([]byte, []int32) {
	h := c.hello
	at := h.Ring.Offset + int64(g.slab)*h.Ring.Stride
	labels := make([]int32, g.n)
	for i := range labels {
		labels[i] = int32(*(*int64)(unsafe.Pointer(&c.mem[at+h.Ring.Labels+8*int64(i)])))
	}
	return c.mem[at : at+int64(g.n*h.Ring.SampleBytes)], labels
}

// ended waits for Serve's result after the loader went away: nil, soon.
func ended(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: Serve after the loader left: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Serve did not end when the loader went away", what)
	}
}

func ownSums(t *testing.T, p *pipe.Pipeline, epochs int) []string {
	t.Helper()
	stats, err := p.Run(context.Background(), pipe.RunOptions{Epochs: epochs, Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, st := range stats {
		s = append(s, st.Checksum)
	}
	return s
}

// TestServedStreamIsPipesStream: what a loader reads from the ring, bytes
// and labels, hashes as pipe's own stream of the same epochs, for one and
// several workers; an epoch resumed from batch k continues it exactly; and
// the loader's going away ends Serve.
func TestServedStreamIsPipesStream(t *testing.T) {
	want := ownSums(t, pipeline(t, 1000, 64, 2), 2)
	for _, workers := range []int{1, 3} {
		c, done := serve(t, pipeline(t, 1000, 64, workers))
		if c.hello.Batches != 16 || c.hello.Batch != 64 || c.hello.Shape != [3]int{3, 32, 32} || c.hello.DType != "float32" {
			t.Fatalf("hello %+v", c.hello)
		}
		for e := range 2 {
			sum := pipe.NewChecksum()
			c.start(e, 0)
			if n := c.stream(sum); n != 16 || sum.String() != want[e] {
				t.Errorf("workers %d, epoch %d: %d batches, checksum %s; pipe's own %s", workers, e, n, sum, want[e])
			}
		}
		// Epoch 1 stopped after 5 batches, then resumed at batch 5.
		sum := pipe.NewChecksum()
		c.start(1, 0)
		for range 5 {
			g := c.next()
			sum.AddSamples(c.batch(g))
			c.release(g)
		}
		c.send(appendStop(nil))
		c.start(1, 5)
		if n := c.stream(sum); n != 11 || sum.String() != want[1] {
			t.Errorf("workers %d: stopped after 5 and resumed at 5: %d more batches, checksum %s; want %s", workers, n, sum, want[1])
		}
		c.conn.Close()
		ended(t, done, fmt.Sprintf("%d workers", workers))
	}
}

// TestLoaderHoldingSlabs: a loader that holds every batch it gets stalls
// the pipeline (it is not overrun), and a start of another epoch takes every
// slab back; the loader leaving mid-epoch, holding slabs, ends Serve.
func TestLoaderHoldingSlabs(t *testing.T) {
	c, done := serve(t, pipeline(t, 2000, 32, 2))
	c.start(0, 0)
	var held []got
	for range Ahead {
		held = append(held, c.next())
	}
	c.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if _, err := c.conn.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("with every slab held, pipe sent more (%v)", err)
	}
	c.conn.SetReadDeadline(time.Time{})
	c.start(0, 60) // takes the held slabs back
	sum := pipe.NewChecksum()
	if n := c.stream(sum); n != 3 {
		t.Errorf("epoch 0 from batch 60: %d batches, want 3", n)
	}
	c.start(1, 0)
	c.next()
	c.conn.Close()
	ended(t, done, "holding slabs")
}

// TestProtocolErrors: a release of a slab the loader does not hold, an
// epoch's batch past its end, an unknown type or a message of the wrong
// size is an error the loader is told.
func TestProtocolErrors(t *testing.T) {
	for name, bad := range map[string]func(c *client){
		"release": func(c *client) { c.release(got{slab: 3, seq: 1}) },
		"start":   func(c *client) { c.start(0, 99) },
		"type":    func(c *client) { c.send(binary.LittleEndian.AppendUint32(nil, 42)) },
		"epoch":   func(c *client) { c.start(-1, 0) },
		"short":   func(c *client) { c.send([]byte{4, 0}) },
		"size": func(c *client) {
			c.send(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, msgRelease), 0))
		},
	} {
		c, done := serve(t, pipeline(t, 200, 50, 1))
		bad(c)
		g := c.next()
		if g.typ != msgError || !strings.Contains(g.text, "the loader") {
			t.Errorf("%s: %+v", name, g)
		}
		if err := <-done; !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: Serve returned %v", name, err)
		}
	}
}

// TestStaleReleaseIsRefused: a late duplicate release of a slab that holds
// a newer batch by now is a protocol error the loader is told; pipe does not
// refill the slab under it (with releases that named only the slab, it
// did, silently).
func TestStaleReleaseIsRefused(t *testing.T) {
	c, done := serve(t, pipeline(t, 2000, 32, 2))
	c.start(0, 0)
	first := c.next()
	c.release(first)
	again := c.next()
	for again.slab != first.slab {
		c.release(again)
		again = c.next()
	}
	c.release(first) // late: the slab holds batch `again` now
	for g := c.next(); g.typ != msgError; g = c.next() {
		if g.typ == msgBatch && g.slab == first.slab {
			t.Fatalf("slab %d refilled under the loader, which holds batch %d in it", g.slab, again.index)
		}
	}
	if err := <-done; !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "stale release of slab") {
		t.Errorf("Serve returned %v", err)
	}
}

// TestRingLayout: slabs are page-aligned, labels 64-byte aligned after the
// samples, and the ring hands out each slab once.
func TestRingLayout(t *testing.T) {
	r, err := NewRing(3, 100, 3*32*32*4, 100*3*32*32*4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Offset%page != 0 || r.Stride%page != 0 || r.Labels%labelAlign != 0 || r.Labels < 100*3*32*32*4 ||
		r.Stride < r.Labels+800 || r.Size != r.Offset+3*r.Stride {
		t.Fatalf("layout %+v", r.Layout)
	}
	var got []int
	for range 3 {
		b, err := r.AllocHost(100 * 3 * 32 * 32 * 4)
		if err != nil {
			t.Fatal(err)
		}
		i, err := r.slabOf(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, i)
	}
	if got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Errorf("slabs %v", got)
	}
	if _, err := r.AllocHost(10); err == nil {
		t.Error("a fourth slab from a ring of three")
	}
	if _, err := r.slabOf(make([]byte, 8)); err == nil {
		t.Error("Go memory taken for a slab")
	}
}

// TestEmptyPacketIsAProtocolError: a packet of 0 bytes mid-epoch is a
// protocol error the loader is told (it was taken for the loader's going
// away, which read as 0 bytes too); the loader closing its end mid-epoch,
// holding slabs, still ends Serve quietly.
func TestEmptyPacketIsAProtocolError(t *testing.T) {
	c, done := serve(t, pipeline(t, 2000, 32, 2))
	c.start(0, 0)
	c.next()
	c.send(nil)
	g := c.next()
	for g.typ == msgBatch {
		g = c.next()
	}
	if g.typ != msgError || !strings.Contains(g.text, "empty packet") {
		t.Errorf("after an empty packet: %+v", g)
	}
	if err := <-done; !errors.Is(err, ErrProtocol) {
		t.Errorf("Serve returned %v", err)
	}

	c, done = serve(t, pipeline(t, 2000, 32, 2))
	c.start(0, 0)
	c.next()
	c.conn.Close()
	ended(t, done, "closed mid-epoch")
}

// TestWatchBeforeTheHello: before the hello, the loader closing its end is
// ErrGone, and any packet (a start, a short one, an empty one) a protocol
// error, whether the watch is running when it comes or stopping; nothing is
// nil.
func TestWatchBeforeTheHello(t *testing.T) {
	start := startMsg{token: 1}.append(nil)
	for _, c := range []struct {
		name string
		do   func(ours *net.UnixConn)
		want error
		text string
	}{
		{"nothing", func(*net.UnixConn) {}, nil, ""},
		{"close", func(ours *net.UnixConn) { ours.Close() }, ErrGone, ""},
		{"start", func(ours *net.UnixConn) { ours.Write(start) }, ErrProtocol, "24-byte message of type 2 before the hello"},
		{"short", func(ours *net.UnixConn) { ours.Write([]byte{1, 2}) }, ErrProtocol, "2-byte message before the hello"},
		{"empty", func(ours *net.UnixConn) { ours.Write(nil) }, ErrProtocol, "empty packet before the hello"},
		{"empty, then close", func(ours *net.UnixConn) { ours.Write(nil); ours.Close() }, ErrProtocol, "empty packet"},
	} {
		for _, stopFirst := range []bool{false, true} {
			ours, theirs := socketPair(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			var stop func() error
			if stopFirst { // the packet is waiting when the watch stops
				c.do(ours)
				stop = Watch(theirs, cancel)
			} else {
				stop = Watch(theirs, cancel)
				c.do(ours)
				if c.want != nil {
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Second):
						t.Fatalf("%s: Watch did not cancel", c.name)
					}
				}
			}
			err := stop()
			if c.want == nil && err != nil || c.want != nil && (!errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text)) {
				t.Errorf("%s (stopped first %v): %v, want %v %q", c.name, stopFirst, err, c.want, c.text)
			}
			if cause := context.Cause(ctx); (cause == nil) != (c.want == nil) || c.want != nil && !errors.Is(cause, c.want) {
				t.Errorf("%s (stopped first %v): the context's cause %v", c.name, stopFirst, cause)
			}
			ours.Close()
			theirs.Close()
		}
	}
}
