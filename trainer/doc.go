// Package trainer trains image classifiers data-parallel over model
// replicas, on the CPU or on accelerators (package trainer/gpu), from the
// batches the pipeline makes. With it a pipeline
// runs end to end, from files to a trained model's accuracy, in Go alone,
// and shows whether it keeps a training loop fed.
//
// The network itself — tensors, layers with their backward passes, the
// packed GEMM, the models, the loss, the optimisers and the schedules — is
// package trainer/nn; this package is the training loop over it: the
// replicas, their all-reduce, ranks, evaluation, stall figures and
// checkpoints.
//
// Data parallelism works as it would across devices, in one process. The
// trainer holds one model replica per device, all initialised from the same
// seed; each step, every replica runs its slice of the global batch, and an
// AllReducer averages what the mode calls for: the gradients every step
// (sync), the parameters every few steps (local SGD), or once an epoch
// (mixture). Gradients are summed in float64 from terms of fixed 16-sample
// chunks, so splitting a batch among replicas (in multiples of 16) does not
// change a bit of them, and dropout masks are keyed by the global sample,
// not the replica: four replicas of 32 train the same model as one of 128.
// The loop only calls the AllReducer, so an implementation across
// processes replaces the in-process one without touching it.
//
// Across processes, the replicas belong to the ranks of a Group (package
// trainer/mpi makes one of an MPI job): rank r's local replica d is the
// job's replica r·D+d, and every sum across the job is taken in that
// order, rank-major, exactly as one process takes it over all the
// replicas. The gradient average is AllReduce64 over the job (trainer/mpi
// sends each rank every replica's copy of its segment and adds them in
// order, rather than adding partial sums in a tree whose order MPI
// chooses); each step's loss, accuracy and sample counts are gathered from
// every replica and added in the same order; the evaluation's batches are
// dealt out to the ranks and their figures added in the set's order; the
// batch-norm statistics are averaged at each epoch's end as between local
// replicas. So ranks × replicas train the model one process with every
// replica trains, bit for bit, and Model.Hash shows it. The step's gather
// also carries each rank's state (failed, stopped, out of data), so that
// every rank stops at the same step, with its own error or a RankError
// naming the rank that failed; New checks that the ranks agree on the
// model, the batches and the schedule, and a checkpoint is read by rank 0
// and broadcast. The design keeps two parts apart: the Group (rank, size,
// gathers, broadcast, barrier), which carries the bookkeeping and works on
// host memory, and the AllReducer, which moves the gradients.
//
// A replica runs on the CPU, or on an Accelerator (package trainer/gpu
// makes one per GPU): the accelerator holds the model in its device's
// memory and runs the forward and backward passes and the optimiser's
// update there, while the replica's host Model and Optimizer stay the model
// of record, loaded into the accelerator at the start and after a resume or
// an average, and stored back from it before a checkpoint, a hash or an
// average. Its float64 gradient sums are averaged by a DeviceReducer where
// they are (trainer/gpu's peer copies) when the job is one process, and
// through the host and the AllReducer across processes; a batch already in
// the device's memory arrives as a DeviceTensor.
//
// A run reads its batches through the Feed interface, one queue per
// replica, and knows nothing of files, decoding or augmentation; the
// pipeline fills the queues, and the trainer reports, per epoch, how long
// each replica stalled waiting for them: the figure that says whether the
// pipeline keeps up. Evaluation runs the model in inference mode over a
// held-out feed. A checkpoint holds one copy of the model, the optimiser's
// state and the position within the epoch; it is written atomically with a
// SHA-256 of its contents, refused when damaged or by a run with another
// model or data, and a stopped run resumes
// from it at the step it would have taken next.
package trainer
