// Package feed serves a pipeline's batches to a loader in another process
// (the Python package pipefeed) through a ring of slabs in shared memory,
// without copying them: the pipeline's workers write each batch straight
// into a slab the loader has mapped, and the loader wraps it as a NumPy
// array or a PyTorch tensor.
//
// The two processes share one anonymous memory file (memfd_create: it has
// no name, so nothing is left behind however either side ends) and talk
// over a Unix SOCK_SEQPACKET socket the loader creates and hands to `pipe
// feed` as a file descriptor. Both are Linux's: elsewhere the package builds
// (feed_other.go) and everything returns ErrUnsupported. Every message is one packet that starts with
// a little-endian uint32 type (testdata/messages.txt gives each one's
// layout, with an example byte for byte, and both sides' tests read it):
//
//	hello   pipe → loader  version uint32, then JSON describing the batches
//	                       and the ring (feed.Hello); the memory file
//	                       rides along (SCM_RIGHTS)
//	start   loader → pipe  token uint32, epoch int64, first batch int64:
//	                       stream that epoch from that batch (stopping any
//	                       other); its batch and end messages carry token
//	batch   pipe → loader  slab, token, 0 uint32; seq uint64; epoch, index,
//	                       n int64; the seconds the pipeline has waited for
//	                       a free slab in this epoch float64. seq numbers
//	                       the connection's batch messages from 1
//	release loader → pipe  slab uint32, seq uint64: the loader is done with
//	                       the slab of batch seq
//	end     pipe → loader  token uint32, epoch int64, then the epoch's
//	                       figures as JSON
//	stop    loader → pipe  stop the running epoch; every slab is released,
//	                       and the loader ignores the batch messages of
//	                       the stopped epoch's token that still arrive
//	error   pipe → loader  the pipeline's error text, or what the loader
//	                       did against the protocol; pipe then exits 1
//
// A release names the batch it releases because a slab is reused: a late
// duplicate release of slab k, sent after slab k came back with a newer
// batch, would otherwise have pipe overwrite that batch under the loader.
// A release of a slab the loader does not hold, or naming another batch
// than the one its slab holds, is a protocol error, as is a message of an
// unknown type or of the wrong size, an empty packet, and any packet before
// the hello (the loader waits for it; Watch looks out while pipe loads the
// file). pipe answers a protocol error with an error message and exits 1.
//
// The ring (Ring) starts with a header page — magic "PIPEFEED", the
// protocol version, the slab count, stride and sizes — followed by the
// slabs, each holding up to rows samples of the pipeline's host tensor,
// then, in a pipeline with a fields stage, the batch's other fields laid out
// as the engine lays them out (pipe.Pipeline.FieldLayout; the hello
// describes them: Hello.Fields), and after them rows int64 labels. A slab
// is the loader's from its batch message until its release message; the
// pipeline never writes it then.
// Either side refuses a peer of another protocol version by name.
//
// When an epoch ends, Serve starts the next one into the free slabs before
// the loader asks for it, and adopts it when the loader's start names that
// epoch from its first batch (a loop moving on, the common case); any
// other start drops it.
//
// When the loader's process ends, however it ends, the socket reads EOF:
// Serve stops the epoch and returns, and the command exits 0 (pipe feed
// also watches its parent process, for a socket a child of the loader keeps
// open). On a
// SOCK_SEQPACKET socket an empty packet reads as 0 bytes too; pipe tells
// them apart by the credentials the kernel attaches, under SO_PASSCRED, to
// every packet it delivers and not to the end. When pipe
// ends, the loader's next read sees EOF and raises with pipe's last error
// lines.
package feed
