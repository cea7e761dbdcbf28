package pipefile

// The pipeline stage: how a pipeline runs.

import (
	"fmt"
	"strconv"

	"github.com/pipefeed/pipe/engine"
)

// The special values of Settings.Workers.
const (
	// AutoWorkers sizes the pool as the first epoch runs (workers=auto,
	// the default): see engine.Auto.
	AutoWorkers = 0
	// PerCore is one worker per core (workers=0 in a .pipe file).
	PerCore = -1
)

// Settings says how the pipeline runs (the .pipe stage "pipeline"); none
// of it changes the output of a rank. The zero value is the default.
type Settings struct {
	// Workers is the transform pool's size: AutoWorkers (0, the default),
	// PerCore (-1), or a number.
	Workers int
	// Memory is the budget in bytes of workers=auto and depth=auto: the
	// host slabs and device buffers they may hold. 0 is the default,
	// engine.DefaultMemory (a quarter of the memory this process may
	// use). Fixed workers and depth are checked against the machine
	// only.
	Memory int64
	// OnError is what a corrupt record does: engine.Fail (the default)
	// or engine.Skip.
	OnError engine.Policy
	// Seed, if not nil, is the pipeline's seed where there is no shuffle
	// stage to set it.
	Seed *uint64
	// Rank and World place the process in a data-parallel job: it reads
	// rank's share of every epoch, of World equal and disjoint shares.
	// World 0 is 1.
	Rank, World int
	// Elastic makes the global batch (the file's batch in a training job,
	// batch × world when streaming) the unit of an epoch: each rank reads
	// its slice of every whole global batch of one global order, so any
	// world size that divides it sees the same global stream and a run
	// resumes on another number of ranks (sharding.WithElastic). The
	// samples of a last, partial global batch sit out. Default false: the
	// order of ranks' shares and an epoch's last samples depend on World.
	Elastic bool
}

// Pipeline makes a stage of settings.
func Pipeline(s Settings) Stage {
	if s.World == 0 {
		s.World = 1
	}
	workers := "auto"
	switch {
	case s.Workers == PerCore:
		workers = "0"
	case s.Workers > 0:
		workers = strconv.Itoa(s.Workers)
	}
	memory := "auto"
	if s.Memory > 0 {
		memory = strconv.FormatInt((s.Memory+(1<<20)-1)>>20, 10)
	}
	kv := []any{"workers", workers, "memory", memory, "on_error", s.OnError, "rank", s.Rank, "world", s.World, "elastic", s.Elastic}
	if s.Seed != nil {
		kv = append(kv, "seed", *s.Seed)
	}
	line := canonical("pipeline", kv...)
	return Stage{name: "pipeline", line: line, apply: func(c *Compiled) error {
		if s.Workers < PerCore {
			return fmt.Errorf("workers=%d: must be AutoWorkers (0), PerCore (-1) or a number of workers", s.Workers)
		}
		if s.Memory < 0 {
			return fmt.Errorf("memory=%d: must be 0 (the default) or a number of bytes", s.Memory)
		}
		if err := checkMax("memory", int(min(s.Memory>>20, 1<<40)), memoryBound); err != nil {
			return err
		}
		if err := checkMax("workers", s.Workers, workersBound); err != nil {
			return err
		}
		if s.World < 1 || s.Rank < 0 || s.Rank >= s.World {
			return fmt.Errorf("rank=%d world=%d: want 0 ≤ rank < world", s.Rank, s.World)
		}
		if err := checkMax("world", s.World, ranksBound); err != nil {
			return err
		}
		if s.Seed != nil {
			if err := c.setSeed(*s.Seed); err != nil {
				return err
			}
		}
		c.AutoWorkers = s.Workers == AutoWorkers
		c.Workers = max(s.Workers, 0)
		c.Memory = s.Memory
		c.OnError, c.Rank, c.World, c.Elastic = s.OnError, s.Rank, s.World, s.Elastic
		return nil
	}}
}

// settingsSpecs are the pipeline stage.
var settingsSpecs = []*StageSpec{
	{Name: "pipeline", Kind: "stage", Summary: "how the pipeline runs; none of these change a rank's output",
		Params: []Param{
			Param{Name: "workers", Type: Int, Default: "auto", Auto: true, Min: bound(0), Doc: "transform goroutines: auto (sized as the first epoch runs, within the cores and memory=), 0 (one per core) or a number"}.with(workersBound),
			Param{Name: "memory", Type: Int, Default: "auto", Auto: true, Min: bound(1), Doc: "MiB that workers=auto and depth=auto may hold in batches (host slabs and device buffers); auto: a quarter of the memory this process may use"}.with(memoryBound),
			{Name: "on_error", Type: Enum, Enum: []string{"fail", "skip"}, Default: "fail", Doc: "a corrupt record stops the run (fail) or is skipped, counted and listed (skip)"},
			{Name: "seed", Type: Int, Min: bound(0), Doc: "the pipeline's seed when there is no shuffle stage"},
			Param{Name: "rank", Type: Int, Default: "0", Min: bound(0), Doc: "this process's rank in a data-parallel job, e.g. ${RANK:-0}"}.with(ranksBound),
			Param{Name: "world", Type: Int, Default: "1", Min: bound(1), Doc: "the number of ranks, e.g. ${WORLD_SIZE:-1}; each reads an equal, disjoint share"}.with(ranksBound),
			{Name: "elastic", Type: Bool, Default: "false", Doc: "ranks read slices of whole global batches of one order, so the stream and a resume do not depend on the number of ranks (a last, partial global batch sits out)"},
		},
		Build: func(a Args) (Stage, error) {
			s := Settings{Workers: a.Int("workers"), Rank: a.Int("rank"), World: a.Int("world"), Elastic: a.Bool("elastic")}
			switch {
			case a.Auto("workers"):
				s.Workers = AutoWorkers
			case s.Workers == 0:
				s.Workers = PerCore
			}
			if !a.Auto("memory") {
				s.Memory = int64(a.Int("memory")) << 20
			}
			if a.String("on_error") == "skip" {
				s.OnError = engine.Skip
			}
			if a.Has("seed") {
				seed := uint64(a.Int("seed"))
				s.Seed = &seed
			}
			return Pipeline(s), nil
		}},
}
