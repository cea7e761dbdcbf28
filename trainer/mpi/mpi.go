//go:build mpi

package mpi

/*
#cgo pkg-config: ompi-c
#include <mpi.h>
#include <stdlib.h>

// Open MPI's handles and constants are macros over its globals, which cgo
// cannot name: these return them.
static MPI_Comm world(void) { return MPI_COMM_WORLD; }
static MPI_Datatype mpi_double(void) { return MPI_DOUBLE; }
static MPI_Datatype mpi_float(void) { return MPI_FLOAT; }
static MPI_Datatype mpi_byte(void) { return MPI_BYTE; }
static MPI_Datatype mpi_int64(void) { return MPI_INT64_T; }
// allgatherv_in_place is MPI_Allgatherv with MPI_IN_PLACE as its send
// buffer. MPI_IN_PLACE is a sentinel address (1 in Open MPI), not memory:
// handed to Go as an unsafe.Pointer it sat in a Go frame, and the
// runtime, copying the stack, died on the bad pointer. It stays in C.
static int allgatherv_in_place(void *buf, const int *counts, const int *displs, MPI_Datatype dt, MPI_Comm comm) {
	return MPI_Allgatherv(MPI_IN_PLACE, 0, dt, buf, counts, displs, dt, comm);
}
static MPI_Errhandler errors_return(void) { return MPI_ERRORS_RETURN; }
static MPI_Info info_null(void) { return MPI_INFO_NULL; }

// start initialises MPI for calls from any thread (Go moves goroutines
// between threads, and the heartbeat calls MPI while a collective waits);
// -1 if it is initialised already.
static int start(int *provided) {
	int done = 0;
	MPI_Initialized(&done);
	if (done) return -1;
	return MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
}

// beat is one rank's part of the heartbeat ring: a message in flight to
// next, a receive posted from prev. It lives in C memory, since MPI holds
// its buffers and requests between calls.
typedef struct {
	MPI_Comm comm;
	int prev, next;
	char out, in;
	MPI_Request send, recv;
} beat;

static beat *beat_start(MPI_Comm comm, int prev, int next) {
	beat *b = calloc(1, sizeof *b);
	b->comm = comm, b->prev = prev, b->next = next;
	b->send = MPI_REQUEST_NULL;
	MPI_Irecv(&b->in, 1, MPI_CHAR, prev, 0, comm, &b->recv);
	return b;
}

// beat_tick sends a heartbeat (unless the last one is still in flight) and
// returns how many arrived since the last tick.
static int beat_tick(beat *b) {
	int flag = 0, got = 0;
	if (b->send != MPI_REQUEST_NULL) MPI_Test(&b->send, &flag, MPI_STATUS_IGNORE);
	if (b->send == MPI_REQUEST_NULL) MPI_Isend(&b->out, 1, MPI_CHAR, b->next, 0, b->comm, &b->send);
	for (;;) {
		flag = 0;
		if (MPI_Test(&b->recv, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) break;
		got++;
		MPI_Irecv(&b->in, 1, MPI_CHAR, b->prev, 0, b->comm, &b->recv);
	}
	return got;
}

static void beat_stop(beat *b) {
	MPI_Cancel(&b->recv);
	MPI_Wait(&b->recv, MPI_STATUS_IGNORE);
	if (b->send != MPI_REQUEST_NULL) MPI_Request_free(&b->send);
	free(b);
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Compiled reports whether this build has MPI (the mpi build tag).
const Compiled = true

// Comm is the job's processes, MPI_COMM_WORLD's ranks: a trainer.Group and
// a trainer.AllReducer over them. Its calls are collective (every rank
// makes the same ones in the same order) and it makes one at a time. MPI
// errors are returned (MPI_ERRORS_RETURN), not fatal.
type Comm struct {
	mu                   sync.Mutex
	comm, beats          C.MPI_Comm
	rank, size           int
	localRank, localSize int
	library              string
	closed               bool

	beat     *C.beat
	stopBeat chan struct{}
	beatDone chan struct{}

	// The all-reduce's scratch, grown as needed.
	send64, recv64 []float64
	send32, recv32 []float32
	ints           []C.int
}

// Init starts MPI (once per process) and returns the job's ranks, with
// heartbeats running between them (Options). A launcher that said it
// started more (or fewer) ranks than MPI finds is a *WorldError: this
// process was started alone where a job was expected.
func Init(o Options) (*Comm, error) {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	var provided C.int
	switch rc := C.start(&provided); {
	case rc == -1:
		return nil, fmt.Errorf("mpi: MPI is initialised already (Init starts it once per process)")
	case rc != 0:
		return nil, mpiError("MPI_Init_thread", rc)
	}
	c := &Comm{}
	if provided < C.MPI_THREAD_MULTIPLE {
		C.MPI_Finalize()
		return nil, fmt.Errorf("mpi: this MPI gives thread level %d, and pipe needs MPI_THREAD_MULTIPLE (%d)", provided, C.MPI_THREAD_MULTIPLE)
	}
	if err := c.setup(); err != nil {
		C.MPI_Finalize()
		return nil, err
	}
	if l, ok := Launched(); ok && l.Size > 0 && l.Size != c.size {
		C.MPI_Finalize()
		return nil, &WorldError{Launch: l, Got: c.size}
	}
	if c.size > 1 && o.Timeout > 0 {
		if err := check("MPI_Comm_dup", C.MPI_Comm_dup(c.comm, &c.beats)); err != nil {
			C.MPI_Finalize()
			return nil, err
		}
		if o.Lost == nil {
			o.Lost = func(err error) {
				fmt.Fprintf(os.Stderr, "rank %d: %v\n", c.rank, err)
				c.Abort(1)
			}
		}
		prev, next := (c.rank+c.size-1)%c.size, (c.rank+1)%c.size
		c.beat = C.beat_start(c.beats, C.int(prev), C.int(next))
		c.stopBeat, c.beatDone = make(chan struct{}), make(chan struct{})
		go c.watch(prev, o.Timeout, o.Lost)
	}
	return c, nil
}

// setup makes the communicator the trainer uses (a duplicate of the world
// that returns errors) and finds the ranks' places.
func (c *Comm) setup() error {
	if err := check("MPI_Comm_dup", C.MPI_Comm_dup(C.world(), &c.comm)); err != nil {
		return err
	}
	C.MPI_Comm_set_errhandler(C.world(), C.errors_return())
	C.MPI_Comm_set_errhandler(c.comm, C.errors_return())
	var rank, size C.int
	C.MPI_Comm_rank(c.comm, &rank)
	C.MPI_Comm_size(c.comm, &size)
	c.rank, c.size = int(rank), int(size)
	var local C.MPI_Comm
	if err := check("MPI_Comm_split_type", C.MPI_Comm_split_type(c.comm, C.MPI_COMM_TYPE_SHARED, rank, C.info_null(), &local)); err != nil {
		return err
	}
	C.MPI_Comm_rank(local, &rank)
	C.MPI_Comm_size(local, &size)
	c.localRank, c.localSize = int(rank), int(size)
	C.MPI_Comm_free(&local)
	var buf [C.MPI_MAX_LIBRARY_VERSION_STRING]C.char
	var n C.int
	C.MPI_Get_library_version(&buf[0], &n)
	v := C.GoStringN(&buf[0], n)
	if i := strings.IndexAny(v, ",\n"); i >= 0 {
		v = v[:i]
	}
	c.library = strings.TrimSpace(v)
	return nil
}

// watch sends heartbeats to the next rank and listens for the previous
// one's, until Close; a silence of timeout calls lost.
func (c *Comm) watch(prev int, timeout time.Duration, lost func(error)) {
	defer close(c.beatDone)
	tick := time.NewTicker(min(timeout/10, time.Second))
	defer tick.Stop()
	last, told := time.Now(), false
	for {
		select {
		case <-c.stopBeat:
			C.beat_stop(c.beat)
			return
		case now := <-tick.C:
			if C.beat_tick(c.beat) > 0 {
				last = now
			}
			if silence := now.Sub(last); silence > timeout && !told {
				told = true
				lost(&LostError{Rank: prev, Silence: silence})
			}
		}
	}
}

func (c *Comm) Rank() int      { return c.rank }
func (c *Comm) Size() int      { return c.size }
func (c *Comm) LocalRank() int { return c.localRank }
func (c *Comm) LocalSize() int { return c.localSize }

// Library names the MPI library, e.g. "Open MPI v4.1.4".
func (c *Comm) Library() string { return c.library }

// AllReduce and AllReduce64 average bufs, this process's replicas, with
// every rank's: see trainer.AllReducer and the package's doc.
func (c *Comm) AllReduce(bufs [][]float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return allReduce(c, bufs, C.mpi_float(), &c.send32, &c.recv32)
}

func (c *Comm) AllReduce64(bufs [][]float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return allReduce(c, bufs, C.mpi_double(), &c.send64, &c.recv64)
}

// allReduce is AllReduce for element type T (MPI type dt), with scratch
// buffers send and recv.
func allReduce[T float32 | float64](c *Comm, bufs [][]T, dt C.MPI_Datatype, send, recv *[]T) error {
	if len(bufs) == 0 {
		return nil
	}
	n, d, w := len(bufs[0]), len(bufs), c.size
	for _, b := range bufs {
		if len(b) != n {
			return fmt.Errorf("mpi: all-reduce of buffers of %d and %d values", n, len(b))
		}
	}
	if d*n > math.MaxInt32 {
		return fmt.Errorf("mpi: all-reduce of %d replicas × %d values: more than MPI's counts hold", d, n)
	}
	if w == 1 || n == 0 {
		if w == 1 {
			fold(bufs, bufs[0], d, n)
			for _, b := range bufs[1:] {
				copy(b, bufs[0])
			}
		}
		return nil
	}
	// Rank j owns values [lo(j), lo(j+1)); it receives every replica's
	// copy of them, rank-major, adds them in that order and scales them.
	lo := func(j int) int { return j * n / w }
	mine := lo(c.rank+1) - lo(c.rank)
	*recv = grow(*recv, w*d*mine)
	r := *recv
	// What goes to rank j is every replica's copy of j's values, replica
	// after replica: with one replica, the buffer itself.
	s := bufs[0]
	if d > 1 {
		*send = grow(*send, d*n)
		s = *send
	}
	if cap(c.ints) < 4*w {
		c.ints = make([]C.int, 4*w)
	}
	sc, sd, rc, rd := c.ints[:w], c.ints[w:2*w], c.ints[2*w:3*w], c.ints[3*w:4*w]
	for j := range w {
		a, b := lo(j), lo(j+1)
		sc[j], sd[j] = C.int(d*(b-a)), C.int(d*a)
		if d > 1 {
			for k, buf := range bufs {
				copy(s[d*a+k*(b-a):], buf[a:b])
			}
		}
		rc[j], rd[j] = C.int(d*mine), C.int(j*d*mine)
	}
	if err := check("MPI_Alltoallv", C.MPI_Alltoallv(unsafe.Pointer(&s[0]), &sc[0], &sd[0], dt,
		ptr(r), &rc[0], &rd[0], dt, c.comm)); err != nil {
		return err
	}
	rows := make([][]T, w*d)
	for g := range rows {
		rows[g] = r[g*mine : (g+1)*mine]
	}
	fold(rows, bufs[0][lo(c.rank):], w*d, mine)
	for j := range w {
		sc[j], sd[j] = C.int(lo(j+1)-lo(j)), C.int(lo(j))
	}
	if err := check("MPI_Allgatherv", C.allgatherv_in_place(unsafe.Pointer(&bufs[0][0]), &sc[0], &sd[0], dt, c.comm)); err != nil {
		return err
	}
	for _, b := range bufs[1:] {
		copy(b, bufs[0])
	}
	return nil
}

// fold writes the mean of rows' first n values into dst: each value summed
// over the rows in order from the first, then multiplied by 1/replicas,
// exactly as trainer.LocalAllReduce computes it. dst may be rows[0].
func fold[T float32 | float64](rows [][]T, dst []T, replicas, n int) {
	inv := 1 / T(replicas)
	for i := range n {
		s := rows[0][i]
		for _, r := range rows[1:] {
			s += r[i]
		}
		s *= inv
		dst[i] = s
	}
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// ptr is the address of b's first element, or nil when b is empty.
func ptr[T any](b []T) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// AllGather64 returns every rank's vals in rank order (every rank passes as
// many).
func (c *Comm) AllGather64(vals []float64) ([]float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]float64, len(vals)*c.size)
	if len(vals) == 0 {
		return out, nil
	}
	n := C.int(len(vals))
	err := check("MPI_Allgather", C.MPI_Allgather(unsafe.Pointer(&vals[0]), n, C.mpi_double(), unsafe.Pointer(&out[0]), n, C.mpi_double(), c.comm))
	return out, err
}

// Broadcast returns root's buf on every rank, its length first, then its
// bytes in pieces of up to 1 GiB.
func (c *Comm) Broadcast(buf []byte, root int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := C.int64_t(len(buf))
	if err := check("MPI_Bcast", C.MPI_Bcast(unsafe.Pointer(&n), 1, C.mpi_int64(), C.int(root), c.comm)); err != nil {
		return nil, err
	}
	if c.rank != root {
		buf = make([]byte, n)
	}
	const piece = 1 << 30
	for off := 0; off < len(buf); off += piece {
		m := min(piece, len(buf)-off)
		if err := check("MPI_Bcast", C.MPI_Bcast(unsafe.Pointer(&buf[off]), C.int(m), C.mpi_byte(), C.int(root), c.comm)); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// Barrier returns once every rank has called it.
func (c *Comm) Barrier() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return check("MPI_Barrier", C.MPI_Barrier(c.comm))
}

// Abort stops every rank of the job (MPI_Abort: the launcher kills them)
// with exit status code, and does not return.
func (c *Comm) Abort(code int) {
	C.MPI_Abort(C.world(), C.int(code))
	os.Exit(code)
}

// Close ends a job that went well: it waits for every rank (with the
// heartbeats still going), stops the heartbeats and finalises MPI. After
// an error, Abort instead: a rank that failed may never reach Close.
func (c *Comm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	err := check("MPI_Barrier", C.MPI_Barrier(c.comm))
	c.mu.Unlock()
	if c.beat != nil {
		close(c.stopBeat)
		<-c.beatDone
	}
	if rc := C.MPI_Finalize(); rc != 0 && err == nil {
		err = mpiError("MPI_Finalize", rc)
	}
	return err
}

func check(op string, rc C.int) error {
	if rc == 0 { // MPI_SUCCESS
		return nil
	}
	return mpiError(op, rc)
}

func mpiError(op string, rc C.int) error {
	var buf [C.MPI_MAX_ERROR_STRING]C.char
	var n C.int
	C.MPI_Error_string(rc, &buf[0], &n)
	return fmt.Errorf("mpi: %s: %s", op, C.GoStringN(&buf[0], n))
}
