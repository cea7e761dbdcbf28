// Package pipefile is the .pipe file and the stage registry: the one place
// a stage's name, parameters, defaults and constructor are declared.
//
// A Stage is a value with a canonical line, the .pipe line that writes out
// every parameter, so a pipeline's stages print as a file that builds the
// same pipeline. The constructors here (Shuffle, Map, Batching, Cache,
// Train, …; package pipe forwards them) are the Go API; each registry StageSpec
// declares a stage's parameters with type, default and doc, and its Build
// calls the same constructor with the parsed values. The defaults of the
// stages configured by a struct come from one function or constant each
// (DefaultTrain over trainer.Config.WithDefaults, cache.Config.WithDefaults,
// the prefetch and eval constants), which both the constructor and the
// registry read, so a file and Go code cannot disagree; a test builds every
// registered stage both ways and compares. Each spec sits beside its
// constructor, a file per kind of stage: sources.go, ops.go (the shuffle
// and the image operations), batches.go (batch, to_tensor, cache,
// prefetch), train.go (train, eval) and settings.go (pipeline); registry.go
// holds the machinery (Param, StageSpec, Args, the lookup) and stage.go the
// Stage, the Compiled config stages make, and their errors.
//
// Loading a file goes in three steps, so that mistakes are found before any
// data is touched: Parse checks names, types and ranges (errors carry
// file:line:col and a suggestion); Compile checks the order of the stages;
// File.Open opens the sources under a context, so Ctrl-C stops a download
// or an index build.
package pipefile
