package pipe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/pipefile"
	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/trainer"
)

// TestStreamOrderCheckedAhead: 16 WebDataset shards in S3 streamed through
// a cache of 4 of them, shuffled by seed=40 buffer=15, whose epoch 0 reads
// 18% of its samples from shards let go (it passes) and epoch 1 27% (it
// does not): Run, Fit and CheckOrders refuse the run before its first batch
// or step, naming epoch 1, the buffer, and a cache_size and a shorter
// buffer that pass, each of which does pass.
func TestStreamOrderCheckedAhead(t *testing.T) {
	srv := dataBucket(t)
	var largest int64
	for _, p := range wdsShards(t, t.TempDir(), 16) {
		srv.PutFile(t, "data", "wds/"+filepath.Base(p), p)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, st.Size())
	}
	cacheDir := t.TempDir()
	text := func(cacheSize int64, buffer int, train string) string {
		return fmt.Sprintf(`source webdataset path="s3://data/wds/shard-*.tar" endpoint=%s path_style=true cache_dir=%s cache_size=%d concurrency=2
decode
shuffle seed=40 buffer=%d
resize 24
center_crop 24
batch 8
to_tensor layout=nchw dtype=float32
%s`, srv.Endpoint, cacheDir, cacheSize, buffer, train)
	}
	open := func(text string) *Pipeline {
		t.Helper()
		f, err := pipefile.Parse("order.pipe", text, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		p, err := loadFile(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	refused := func(what string, err error) *source.OrderError {
		t.Helper()
		var oe *source.OrderError
		if !errors.As(err, &oe) || !errors.Is(err, source.ErrOrder) {
			t.Fatalf("%s: %v; want a *source.OrderError", what, err)
		}
		if oe.Epoch != 1 || oe.Buffer != 15 || oe.Failing < 1 {
			t.Errorf("%s: epoch %d, buffer %d, %d failing; want epoch 1 of buffer 15 to fail", what, oe.Epoch, oe.Buffer, oe.Failing)
		}
		msg := err.Error()
		for _, want := range []string{"epoch 1: ", "shuffle buffer=15", fmt.Sprintf("cache_size=%d (%d shards) passes", oe.PassSize, oe.PassHold),
			fmt.Sprintf("or buffer=%d with cache_size=%d", oe.PassBuffer, 4*largest)} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", what, msg, want)
			}
		}
		if strings.Contains(msg, "full shuffle") {
			t.Errorf("%s: %q speaks of a full shuffle under buffer=15", what, msg)
		}
		return oe
	}

	p := open(text(4*largest, 15, ""))
	if n, err := p.CheckOrders(0, 1); n != 1 || err != nil {
		t.Fatalf("epoch 0 alone: %d checked, %v; want 1 passing", n, err)
	}
	_, err := p.CheckOrders(0, 3)
	oe := refused("CheckOrders", err)
	t.Log(err)
	batches := 0
	_, err = p.Run(context.Background(), RunOptions{Epochs: 2, OnBatch: func(*Batch) error { batches++; return nil }})
	refused("Run", err)
	if batches > 0 {
		t.Errorf("Run delivered %d batches of epoch 0 before refusing epoch 1", batches)
	}

	out := t.TempDir()
	tp := open(text(4*largest, 15, "train mlp width=8 epochs=2 threads=1 out="+out+"\n"))
	steps := 0
	_, err = tp.Fit(context.Background(), TrainOptions{OnStep: func(trainer.StepStats) { steps++ }})
	refused("Fit", err)
	if steps > 0 {
		t.Errorf("Fit trained %d steps of epoch 0 before refusing epoch 1", steps)
	}

	// What the refusal names passes: its cache_size with buffer=15, and
	// its buffer with the cache of 4 shards.
	if oe.PassHold <= 4 || oe.PassBuffer < 1 || oe.PassBuffer >= 15 {
		t.Fatalf("the refusal names cache_size=%d (%d shards) and buffer=%d", oe.PassSize, oe.PassHold, oe.PassBuffer)
	}
	for _, c := range []struct {
		size   int64
		buffer int
	}{{oe.PassSize, 15}, {4 * largest, oe.PassBuffer}} {
		if n, err := open(text(c.size, c.buffer, "")).CheckOrders(0, 3); n != 3 || err != nil {
			t.Errorf("cache_size=%d buffer=%d: %d checked, %v; want 3 passing", c.size, c.buffer, n, err)
		}
	}
}
