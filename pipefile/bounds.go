package pipefile

import (
	"fmt"

	"github.com/pipefeed/pipe/source"
	"github.com/pipefeed/pipe/transform"
)

// The bounds of the size parameters. Each lies far above any real use and
// low enough that the figures pipe derives from it (bytes per batch, plan
// positions, counts of steps) cannot overflow, so that a typing mistake or
// a hostile file is refused at its parameter, saying why, rather than
// printing a negative size or running the machine out of memory. Memory
// itself is checked where it is known: slabs against the machine's RAM when
// an epoch starts, a model's parameters when training starts.
const (
	// MaxBatch bounds a batch: 2^24 samples, 256 times the largest batch
	// trained on ImageNet (65,536), and 200 GB of CIFAR float32.
	MaxBatch = 1 << 24
	// MaxSamples bounds a synthetic source and a shuffle buffer: an
	// epoch's stored order (shuffle buffer) holds positions in 32 bits.
	MaxSamples = 1<<32 - 1
	// MaxWorkers bounds the transform goroutines: each holds scratch
	// images and a slab, and 4,096 is far past any machine's cores.
	MaxWorkers = 1 << 12
	// MaxDepth bounds a prefetch queue: every batch queued holds a device
	// buffer, and a consumer never needs more than a few ahead.
	MaxDepth = 64
	// MaxEpochs bounds the epochs to train, cache or evaluate between:
	// 2^20, so that epochs × steps stays within a step counter.
	MaxEpochs = 1 << 20
	// MaxSteps bounds per-epoch step counts and step intervals.
	MaxSteps = 1 << 31
	// MaxRanks bounds the world size: 2^20 ranks, past the largest MPI
	// jobs run.
	MaxRanks = 1 << 20
	// MaxThreads bounds the trainer's threads, as MaxWorkers does the
	// transform pool.
	MaxThreads = MaxWorkers
	// MaxWidth bounds a model's width (channels or hidden units): the
	// model's size is checked against memory when training starts; this
	// keeps the arithmetic of that check exact.
	MaxWidth = 1 << 16
	// MaxResNetDepth is the deepest CIFAR ResNet of He et al. (2016).
	MaxResNetDepth = 1202
	// MaxCacheMemory bounds the cache's memory, in MiB: 16 TiB.
	MaxCacheMemory = 1 << 24
	// MaxCacheShard bounds the samples of a cache entry, which is
	// decompressed whole: 65,536 CIFAR images are 200 MB.
	MaxCacheShard = 1 << 16
)

// upTo makes Param.Max v, with why: the reason it is the bound.
type upTo struct {
	max float64
	why string
}

// The bounds as the registry declares them, each with its reason.
var (
	batchBound   = upTo{MaxBatch, "256 times the largest batch trained on ImageNet"}
	samplesBound = upTo{MaxSamples, "stored epoch orders hold positions in 32 bits"}
	sideBound    = upTo{transform.MaxSide, "the longest image side pipe decodes"}
	pixelsBound  = upTo{transform.MaxSide * transform.MaxSide, "the square of the longest side pipe decodes"}
	workersBound = upTo{MaxWorkers, "each worker holds scratch images and a slab; far past any machine's cores"}
	depthBound   = upTo{MaxDepth, "each queued batch holds a device buffer"}
	epochsBound  = upTo{MaxEpochs, "so that epochs × steps fits a step counter"}
	stepsBound   = upTo{MaxSteps, "a step counter's range"}
	ranksBound   = upTo{MaxRanks, "past the largest MPI jobs"}
	threadsBound = upTo{MaxThreads, "far past any machine's cores"}
	widthBound   = upTo{MaxWidth, "a model's size is checked against memory when it is built; this keeps the check's arithmetic exact"}
	resnetBound  = upTo{MaxResNetDepth, "the deepest CIFAR ResNet of He et al."}
	memoryBound  = upTo{MaxCacheMemory, "16 TiB, more than any machine"}
	shardBound   = upTo{MaxCacheShard, "an entry is decompressed whole"}
	labelBound   = upTo{source.MaxClasses, "labels are below source.MaxClasses"}
	kernelBound  = upTo{transform.MaxBlurKernel, "far wider than any blur in use; the blur keeps its weights on the stack"}
)

// checkMax is the Go constructors' form of a registry bound: an error
// naming the parameter, the value, the bound and why, for v over b.
func checkMax(name string, v int, b upTo) error {
	if float64(v) > b.max {
		return fmt.Errorf("%s=%d: must be at most %d (%s)", name, v, int64(b.max), b.why)
	}
	return nil
}
