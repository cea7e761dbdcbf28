// Package fit trains a pipeline's model: the run around the trainer that
// the train stage asks for. It builds the trainer (with its replicas on
// the GPUs, where the prefetch stage puts the batches), resumes it from a
// checkpoint, runs its epochs with the evaluation every few, and keeps the
// run's files: the checkpoint, written atomically after every epoch and
// when a run is stopped mid-epoch; metrics.jsonl, an epoch a line; and
// steps.jsonl, the mean of every few steps. In a job of several ranks every
// rank runs it and rank 0 alone writes.
//
// It knows the trainer and the files, not how batches are made: the
// pipeline (package pipe) hands it feeds of training and held-out batches,
// the trainer's configuration and the checkpoint's identity (Identity),
// and Pipeline.Fit is Run over them.
package fit
