package trainer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/pipefeed/pipe/trainer/nn"
)

// chanJob is a job of ranks inside one process, each rank a goroutine: the
// Group and AllReducer the trainer's tests need without MPI. Its sums are
// those trainer/mpi's Comm takes: every replica of the job in order.
type chanJob struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	round   int
	arrived int
	slots   []any
}

func newChanJob(n int) []*chanRank {
	j := &chanJob{n: n, slots: make([]any, n)}
	j.cond = sync.NewCond(&j.mu)
	ranks := make([]*chanRank, n)
	for r := range ranks {
		ranks[r] = &chanRank{j: j, rank: r}
	}
	return ranks
}

// exchange gives v as this rank's contribution and returns every rank's.
func (j *chanJob) exchange(rank int, v any) []any {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.slots[rank] = v
	j.arrive()
	out := slices.Clone(j.slots)
	// Nobody writes the next round's slot before everyone has read.
	j.arrive()
	return out
}

// arrive waits, with mu held, until every rank has arrived.
func (j *chanJob) arrive() {
	r := j.round
	if j.arrived++; j.arrived == j.n {
		j.arrived = 0
		j.round++
		j.cond.Broadcast()
		return
	}
	for r == j.round {
		j.cond.Wait()
	}
}

type chanRank struct {
	j    *chanJob
	rank int
}

func (c *chanRank) Rank() int      { return c.rank }
func (c *chanRank) Size() int      { return c.j.n }
func (c *chanRank) LocalRank() int { return c.rank }
func (c *chanRank) LocalSize() int { return c.j.n }
func (c *chanRank) Barrier() error { c.j.exchange(c.rank, nil); return nil }

func (c *chanRank) AllGather64(vals []float64) ([]float64, error) {
	var out []float64
	for _, v := range c.j.exchange(c.rank, slices.Clone(vals)) {
		out = append(out, v.([]float64)...)
	}
	return out, nil
}

func (c *chanRank) Broadcast(buf []byte, root int) ([]byte, error) {
	return c.j.exchange(c.rank, slices.Clone(buf))[root].([]byte), nil
}

func (c *chanRank) AllReduce(bufs [][]float32) error   { return chanReduce(c, bufs) }
func (c *chanRank) AllReduce64(bufs [][]float64) error { return chanReduce(c, bufs) }

func chanReduce[T float32 | float64](c *chanRank, bufs [][]T) error {
	var rows [][]T
	for _, v := range c.j.exchange(c.rank, cloneAll(bufs)) {
		rows = append(rows, v.([][]T)...)
	}
	inv := 1 / T(len(rows))
	for i := range bufs[0] {
		s := rows[0][i]
		for _, r := range rows[1:] {
			s += r[i]
		}
		s *= inv
		for _, b := range bufs {
			b[i] = s
		}
	}
	return nil
}

func cloneAll[T any](bufs [][]T) [][]T {
	out := make([][]T, len(bufs))
	for i, b := range bufs {
		out[i] = slices.Clone(b)
	}
	return out
}

// epochRecord is what a run shows of an epoch: its figures and the model's
// hash after it.
type epochRecord struct {
	Hash              string
	Loss, Accuracy    float64
	Images, Steps     int
	TestLoss, TestAcc float64
}

// runJob trains cfg for cfg.Epochs epochs as ranks ranks (0: one process
// without a Group) with replicas replicas each, on feed's data, evaluating
// after every epoch, and returns rank 0's record. Each rank's feeds and
// context come from the functions given (nil: the defaults).
func runJob(t *testing.T, cfg Config, feed fakeFeed, ranks, replicas int, evalBatches int,
	feedOf func(rank int) Feed, ctxOf func(rank int) context.Context) ([]epochRecord, []*Trainer, []error) {
	t.Helper()
	n := max(ranks, 1)
	var group []*chanRank
	if ranks > 0 {
		group = newChanJob(ranks)
	}
	recs := make([][]epochRecord, n)
	trs := make([]*Trainer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c := cfg
			f := feed
			f.replicas, f.rank, f.ranks = replicas, r, ranks
			c.GlobalBatch, c.BatchesPerEpoch, c.Input, c.Classes, c.Replicas = f.global, f.batches, f.shape, f.classes, replicas
			var tf Feed = &f
			if feedOf != nil {
				tf = feedOf(r)
			}
			ctx := context.Background()
			if ctxOf != nil {
				ctx = ctxOf(r)
			}
			ef := &stridedFeed{fakeFeed: fakeFeed{shape: f.shape, global: 50, replicas: 1, batches: evalBatches, classes: f.classes},
				offset: r, stride: n}
			if group != nil {
				c.Group = group[r]
			}
			tr, err := New(c)
			if err != nil {
				errs[r] = err
				return
			}
			trs[r] = tr
			for tr.Epoch < c.Epochs {
				st, err := tr.RunEpoch(ctx, tf, nil)
				if err != nil {
					errs[r] = err
					return
				}
				ev, err := tr.Evaluate(ctx, ef)
				if err != nil {
					errs[r] = err
					return
				}
				recs[r] = append(recs[r], epochRecord{Hash: tr.Model().Hash(), Loss: st.TrainLoss, Accuracy: st.TrainAccuracy,
					Images: st.Images, Steps: st.Steps, TestLoss: ev.Loss, TestAcc: ev.Accuracy})
			}
		})
	}
	wg.Wait()
	for r := 1; r < n; r++ {
		if errs[r] == nil && !slices.Equal(recs[r], recs[0]) {
			t.Errorf("rank %d's record differs from rank 0's:\n%+v\n%+v", r, recs[r], recs[0])
		}
	}
	return recs[0], trs, errs
}

// stridedFeed serves one replica batches offset, offset+stride, … of its
// fakeFeed: a rank's share of an evaluation.
type stridedFeed struct {
	fakeFeed
	offset, stride int
}

func (f *stridedFeed) Epoch(ctx context.Context, e int) (EpochFeed, error) {
	x, _ := f.fakeFeed.Epoch(ctx, e)
	fe := x.(*fakeEpoch)
	fe.next[0] = f.offset
	return &stridedEpoch{fe, f.stride}, nil
}

type stridedEpoch struct {
	*fakeEpoch
	stride int
}

func (x *stridedEpoch) Next(r int) (Batch, error) {
	b, err := x.fakeEpoch.Next(r)
	x.next[r] += x.stride - 1
	return b, err
}

// TestJobEqualsOneProcess: ranks × replicas train, bit for bit, the model
// one process trains with all the replicas (resnet, with batch norm, whose
// statistics are averaged too), with the same figures every epoch,
// evaluation included.
func TestJobEqualsOneProcess(t *testing.T) {
	cfg := Config{Model: nn.ModelSpec{Name: "resnet", Depth: 8, Width: 4}, Epochs: 2, Optim: nn.OptimConfig{Momentum: 0.9}, LR: 0.05,
		BaseBatch: 32, Seed: 4, Schedule: "cosine", Threads: 1}
	for _, c := range []struct{ ranks, replicas int }{{2, 1}, {2, 2}, {4, 1}} {
		t.Run(fmt.Sprintf("%dx%d", c.ranks, c.replicas), func(t *testing.T) {
			all := c.ranks * c.replicas
			feed := fakeFeed{shape: []int{3, 8, 8}, global: 16 * all, batches: 6, classes: 10}
			one := cfg
			one.Threads = all // one thread a replica, as in the job
			want, _, errs := runJob(t, one, feed, 0, all, 7, nil, nil)
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			job := cfg
			job.Threads = c.replicas
			got, _, errs := runJob(t, job, feed, c.ranks, c.replicas, 7, nil, nil)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%d ranks × %d replicas:\n%+v\none process × %d replicas:\n%+v", c.ranks, c.replicas, got, all, want)
			}
			if want[0].Hash == want[1].Hash || want[1].Images != feed.global*feed.batches {
				t.Errorf("the epochs changed nothing or lost images: %+v", want)
			}
		})
	}
}

// failFeed fails replica 0's batch at step failAt.
type failFeed struct {
	fakeFeed
	failAt int
}

type failEpoch struct {
	*fakeEpoch
	failAt int
}

func (f *failFeed) Epoch(ctx context.Context, e int) (EpochFeed, error) {
	x, _ := f.fakeFeed.Epoch(ctx, e)
	return failEpoch{x.(*fakeEpoch), f.failAt}, nil
}

func (x failEpoch) Next(r int) (Batch, error) {
	if x.next[r] == x.failAt {
		return Batch{}, errors.New("disk on fire")
	}
	return x.fakeEpoch.Next(r)
}

// cancelFeed cancels a context when replica 0 asks for batch cancelAt,
// and goes on: a stop that arrives in the middle of an epoch, at a known
// step whatever the machine's load.
type cancelFeed struct {
	fakeFeed
	cancelAt int
	cancel   context.CancelFunc
}

type cancelEpoch struct {
	*fakeEpoch
	cancelAt int
	cancel   context.CancelFunc
}

func (f *cancelFeed) Epoch(ctx context.Context, e int) (EpochFeed, error) {
	x, _ := f.fakeFeed.Epoch(ctx, e)
	return cancelEpoch{x.(*fakeEpoch), f.cancelAt, f.cancel}, nil
}

func (x cancelEpoch) Next(r int) (Batch, error) {
	if r == 0 && x.next[r] == x.cancelAt {
		x.cancel()
	}
	return x.fakeEpoch.Next(r)
}

// TestJobStopsTogether: a rank whose data fails stops with its error and
// the others with a RankError naming it, at the same step; a rank whose
// context is cancelled stops every rank after the same step, and each saves
// the position its checkpoint needs.
func TestJobStopsTogether(t *testing.T) {
	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 16}, Epochs: 1, LR: 0.1, Threads: 1}
	feed := fakeFeed{shape: []int{1, 4, 4}, global: 24, batches: 8, classes: 4}
	_, _, errs := runJob(t, cfg, feed, 3, 1, 3, func(r int) Feed {
		f := feed
		f.replicas, f.rank, f.ranks = 1, r, 3
		if r == 1 {
			return &failFeed{f, 3}
		}
		return &f
	}, nil)
	var re *RankError
	if errs[1] == nil || errs[1].Error() != "disk on fire" {
		t.Errorf("rank 1: %v", errs[1])
	}
	for _, r := range []int{0, 2} {
		if !errors.As(errs[r], &re) || re.Rank != 1 {
			t.Errorf("rank %d: %v, want a RankError for rank 1", r, errs[r])
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, trs, errs := runJob(t, cfg, feed, 2, 1, 3, func(r int) Feed {
		f := feed
		f.replicas, f.rank, f.ranks = 1, r, 2
		if r == 1 {
			return &cancelFeed{f, 3, cancel}
		}
		return &f
	}, func(r int) context.Context {
		if r == 1 {
			return ctx
		}
		return context.Background()
	})
	if !errors.Is(errs[0], context.Canceled) || !errors.Is(errs[1], context.Canceled) {
		t.Fatalf("stopped job: %v", errs)
	}
	if trs[0].InEpoch != trs[1].InEpoch || trs[0].Step != trs[1].Step || trs[0].InEpoch == feed.batches {
		t.Errorf("ranks stopped at steps %d and %d of the epoch (%d and %d in all)", trs[0].InEpoch, trs[1].InEpoch, trs[0].Step, trs[1].Step)
	}
}

// TestJobChecksAndResumes: ranks with different configurations are refused
// before the first step, and a checkpoint saved by rank 0 is loaded by
// every rank from rank 0's file (Broadcast).
func TestJobChecksAndResumes(t *testing.T) {
	group := newChanJob(2)
	feed := fakeFeed{shape: []int{1, 4, 4}, global: 16, batches: 4, classes: 4}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 16 * (1 + r)}, LR: 0.1, Input: feed.shape, Classes: 4,
				GlobalBatch: 16, BatchesPerEpoch: 4, Replicas: 1, Group: group[r]}
			_, errs[r] = New(cfg)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, ErrJob) {
			t.Errorf("rank %d of two different models: %v", r, err)
		}
	}

	cfg := Config{Model: nn.ModelSpec{Name: "mlp", Width: 16}, Epochs: 2, LR: 0.1, Threads: 1}
	_, trs, errs := runJob(t, cfg, feed, 2, 1, 2, nil, nil)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ckpt.gob")
	if err := saveFile(trs[0], path, "id", []byte("history")); err != nil {
		t.Fatal(err)
	}
	group = newChanJob(2)
	for r := range 2 {
		wg.Go(func() {
			c := cfg
			c.Input, c.Classes, c.GlobalBatch, c.BatchesPerEpoch, c.Replicas, c.Group = feed.shape, 4, 16, 4, 1, group[r]
			tr, err := New(c)
			if err == nil {
				// Only rank 0 needs to see the file.
				p := path
				if r == 1 {
					p = filepath.Join(t.TempDir(), "nowhere.gob")
				}
				var h []byte
				h, err = loadFile(tr, p, "id")
				if err == nil && (string(h) != "history" || tr.Step != 8 || tr.Model().Hash() != trs[0].Model().Hash()) {
					err = fmt.Errorf("loaded step %d, history %q, another model", tr.Step, h)
				}
			}
			errs[r] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}
