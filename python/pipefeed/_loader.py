"""The loader: the Python end of `pipe feed` (see package feed in Go)."""

import collections
import collections.abc
import os
import socket
import subprocess
import sys
import threading
import time

from . import _protocol as proto
from ._cuda import CudaCopier, check_device
from ._errors import PipeDied, PipeError
from ._jax import Placer, check_placement, process_rank
from ._launch import find_pipe, launcher_rank, stopped
from ._pipeline import Pipeline
from ._protocol import PROTOCOL
from ._ring import Ring

# STATE_VERSION is the format of a state_dict(): its keys and what they
# mean. load_state_dict refuses a state of another format, or of none: the
# pipefeed before it wrote the feed protocol's number as "version", which
# says nothing of the state.
STATE_VERSION = 1


class Loader:
    """Iterates over the batches of a .pipe pipeline, served by ``pipe feed``.

    ``Loader(pipe_file, epoch=0, rank=None, world=None, workers=None,
    framework="torch", device=None, sharding=None, pin_memory=False,
    copy=False, env=None, pipe_bin=None, timeout=300.0)``

    ``pipe_file`` is a .pipe file's path or a ``Pipeline``, whose text goes
    to pipe in a temporary file, removed once pipe has read it.

    Iterating yields ``(x, y)``: ``x`` the batch in the pipeline's shape,
    layout and dtype (a ``torch.Tensor``, a ``numpy.ndarray`` with
    ``framework="numpy"``, or a ``jax.Array`` with ``framework="jax"``),
    ``y`` its labels (int64; JAX's int32 unless ``jax_enable_x64``).
    ``len(loader)`` is the number of batches per epoch of this rank.

    **With a fields stage** each batch is a dict keyed by field name, in
    this order, of those the stage names, each value an array of the
    batch's N samples: "image" (as ``x``), "mask" (uint8 or uint16 [N, H,
    W]), "boxes" (float32 [N, max_boxes, 4]) with "num_boxes" (int32 [N]:
    the rest are zeros), "classes" (int64 [N, max_boxes], counted by
    "num_boxes"), "label" (as ``y``), "labels" (multi-hot float32 [N,
    num_labels]), "tokens" (int32 [N, max_tokens], zero-padded) with
    "num_tokens" (int32 [N]), and "tensor" (its dtype, [N, *shape]). The
    counts are int32 as pipe writes them, so that they too view the ring:
    ``num_boxes.long()`` where an op wants int64. Every value is a view of
    the slab, as ``x`` is, except a uint16 field with torch before 2.3,
    which has no uint16: that comes as an int32 copy. JAX holds the int64
    ones as int32 unless ``jax_enable_x64``, as it does ``y``, and refuses
    an int64 tensor without it (``ValueError`` before the first batch: its
    values would be cut). ``info["fields"]`` is how pipe laid them out.
    With ``mixup`` or ``cutmix``, "targets" holds the soft targets
    (float32 [N, classes]); without a fields stage a batch is then
    ``(x, targets)``, as torchvision's MixUp gives images and soft labels.

    **JAX batches are the caller's**, valid for as long as they are held
    (``copy=`` changes nothing): each is placed on ``device=`` (a
    ``jax.Device``; by default the first local device) or across
    ``sharding=`` (a ``NamedSharding``, say over a ``Mesh`` of the local
    devices splitting the batch axis; the labels are split along it too)
    straight from its slab, so on a GPU or TPU the transfer is the only
    copy. XLA's CPU client would alias the slab, which pipe reuses: on CPU
    devices each batch is copied once, on its devices. The arrays are
    ready when yielded (the loader waits for the placement: a loop may
    delete its batch, or donate it to a step), and the slab goes back to
    pipe when the next batch is asked for. A sharding that cannot split a
    batch, or the epoch's last, raises ``ValueError`` before the first
    batch.

    **A host batch is a view of a slab of shared memory, valid until the
    next batch is requested** (or the iteration ends): pipe writes a later
    batch into it after that. Keep it longer with ``copy=True`` (owned
    arrays), or ``.clone()`` / ``.copy()`` it. With ``device="cuda:N"`` each
    batch is copied to that GPU on a side stream (asynchronously with
    ``pin_memory=True``, which registers the ring with CUDA once, in place,
    on that GPU) and the yielded tensors are the caller's; the slab goes
    back to pipe once its copy has completed. pipe sends no more while the
    loader holds ``info["ahead"]`` slabs (3), so with that many copies in
    flight the loader waits for the oldest before it waits for a batch: a
    loop that never synchronises with the GPU does not stall.

    Epochs: an iteration streams one epoch from its first batch;
    ``set_epoch(e)`` selects it (as with a ``DistributedSampler``), and a
    completed iteration moves on to the next epoch by itself. As with a
    ``DataLoader``, every ``iter()`` starts over: a ``for`` loop after a
    ``break``, or a second ``next(iter(loader))``, streams the selected
    epoch from its beginning again. ``state_dict()`` says where the loader
    stands (the batch after the last one yielded), and
    ``load_state_dict(d)`` makes the next iteration, and only it, resume
    there, at the exact next batch, with the augmentations an uninterrupted
    run would have had: augmentations depend on the seed, the epoch and the
    sample, not on workers or timing. A state carries the pipeline's
    fingerprint (``info["fingerprint"]``, from pipe: a hash of the data's
    identity, every stage that shapes the batches with its parameters, and
    the seed), and a loader of another pipeline refuses it. A state also
    carries its format (``state_version``); one of another format, or
    without one, is refused with ``PipeError``.

    One iteration at a time: ``iter(loader)`` claims the loader until its
    iterator is exhausted, closed (``close()``) or dropped, and another
    ``iter()`` meanwhile raises ``RuntimeError`` (the two would take each
    other's batches).

    ``rank`` and ``world`` default to the launcher's environment
    (``RANK``/``WORLD_SIZE`` of torchrun, ``OMPI_COMM_WORLD_RANK``/``SIZE``,
    ``PMI_RANK``/``SIZE``, ``SLURM_PROCID``/``NTASKS``), else to the file's
    ``pipeline`` stage; each rank gets an exact, equal, disjoint share.
    With ``framework="jax"`` in a multi-process JAX job they default to
    ``jax.process_index()`` and ``jax.process_count()`` first (make the
    loader after ``jax.distributed.initialize()``), and a ``sharding=``
    over the devices of every process makes each batch the global array
    of the processes' shares.
    ``workers`` overrides the file's worker count (the batches do not
    depend on it). ``env`` adds variables for the file's ``${VAR}``s.
    ``pipe_bin`` (else ``PIPE_BIN``, else the pipe the package's wheel
    carries, else ``PATH``) names the pipe command.

    ``timeout`` (seconds; default 300) bounds every single wait on pipe:
    for its hello, which comes once it has loaded the file (downloads and
    index builds included), and for each batch. A pipe that sends nothing
    for that long, stopped (SIGSTOP) or hung, raises ``PipeError`` naming
    its pid and whether it is stopped; ``0`` or ``None`` waits for ever.
    The default is far beyond a batch of any recipe here; raise it for a
    first run that downloads or indexes a large dataset.

    ``stats()`` gives images/s, how long Python waited for batches (the
    stall: "is the GPU starved?") and how long pipe waited for a free slab.
    Errors are ``PipeError`` with pipe's own text (pipe sends it rather
    than print it, so it is said once; pipe's other stderr lines pass
    through); a malformed file, or one with a ``prefetch`` stage, raises
    here, before the first batch. ``close()`` (or a ``with`` block) stops
    pipe; if Python dies, pipe notices and exits, and the shared memory,
    which has no name, is freed with the last process that maps it.
    """

    def __init__(self, pipe_file, *, epoch=0, rank=None, world=None, workers=None, framework="torch",
                 device=None, sharding=None, pin_memory=False, copy=False, env=None, pipe_bin=None, timeout=300.0):
        if framework not in ("torch", "numpy", "jax"):
            raise ValueError(f"framework={framework!r}: want 'torch', 'numpy' or 'jax'")
        if device is not None and framework == "numpy":
            raise ValueError("device= needs framework='torch' or 'jax'")
        if sharding is not None and framework != "jax":
            raise ValueError("sharding= needs framework='jax'")
        if pin_memory and framework == "jax":
            raise ValueError("pin_memory= is for framework='torch' with device='cuda:N'")
        if (rank is None) != (world is None):
            raise ValueError("rank= and world= go together")
        self._torch = self._jax = None
        if framework == "torch":
            import torch

            self._torch = torch
        elif framework == "jax":
            import jax

            self._jax = jax
            check_placement(jax, device, sharding)  # before pipe starts
        if rank is None and self._jax is not None:
            rank, world = process_rank(self._jax)
        if rank is None:
            rank, world = launcher_rank()
        if world is not None and not 0 <= rank < world:
            raise ValueError(f"rank {rank} of {world}: want 0 <= rank < world")
        if workers is not None and workers < 0:
            raise ValueError(f"workers={workers}: must be 0 or more")
        if epoch < 0:
            raise ValueError(f"epoch={epoch}: must be 0 or more")
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout={timeout}: must be 0 or more (0 or None: wait for ever)")
        self._timeout = timeout or None
        self._closed = True
        self._copy = copy
        if device is not None and self._torch is not None:
            check_device(self._torch, device)  # before pipe starts
        self._copier = None
        self._pending = collections.deque()  # (event, slab, seq): copies to the device in flight
        self._epoch = epoch  # the epoch the next iteration streams
        self._resume = None  # its first batch, from load_state_dict: for that iteration only
        self._pos = (epoch, 0)  # the epoch and batch after the last one yielded: state_dict
        self._token = 0
        self._claim = None  # the token of the iteration that holds the loader (__iter__)
        self._stall = 0.0
        self._images = 0
        self._batches = 0
        self._busy = 0.0  # seconds inside iterations
        self._slab_wait_done = 0.0  # pipe's slab wait in finished epochs
        self._slab_wait = 0.0  # … and in the running one
        self._last_end = None
        self._tail = collections.deque(maxlen=20)

        bin_ = find_pipe(pipe_bin)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        written = pipe_file._write() if isinstance(pipe_file, Pipeline) else None
        self._written = written
        args = [bin_, "feed", written or os.fspath(pipe_file), "--fd", str(theirs.fileno()), "--protocol", str(PROTOCOL)]
        if world is not None:
            args += ["--rank", str(rank), "--world", str(world)]
        if workers:
            args += ["--workers", str(workers)]
        child_env = dict(os.environ)
        child_env.update(env or {})
        try:
            self._proc = subprocess.Popen(args, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env)
        except OSError as e:
            if written:
                os.unlink(written)
            ours.close()
            theirs.close()
            raise FileNotFoundError(f"cannot start {bin_}: {e}") from e
        theirs.close()
        ours.settimeout(self._timeout)
        self._sock = ours
        self._stderr = threading.Thread(target=self._read_stderr, name="pipefeed-stderr", daemon=True)
        self._stderr.start()
        self._closed = False
        try:
            self._hello()
            if self._jax is not None:
                self._copier = Placer(self._jax, device, sharding, self._ring.mm, self.info)
            elif device is not None:
                self._copier = CudaCopier(self._torch, device, self._ring.mm, pin_memory)
        except BaseException:
            self.close()  # pipe with it, whatever failed
            raise
        finally:
            if written:
                os.unlink(written)  # pipe has loaded it before its hello, or gone

    # -- start-up ------------------------------------------------------------

    def _named(self, text):
        """text with the temporary file a Pipeline was written to called
        "pipeline" (its lines are those of str(pipeline))."""
        return text.replace(self._written, "pipeline") if self._written else text

    def _read_stderr(self):
        for raw in self._proc.stderr:
            line = self._named(raw.decode(errors="replace").rstrip("\n"))
            self._tail.append(line)
            print(line, file=sys.stderr, flush=True)

    def _hello(self):
        try:
            data, fds, _, _ = socket.recv_fds(self._sock, 1 << 16, 1)
        except ConnectionResetError:
            data, fds = b"", []
        except socket.timeout:
            raise self._unresponsive() from None
        if not data:
            raise self._died("before it could serve")
        try:
            try:
                h = proto.read_hello(data, fds, self._proc.args[0])
            except PipeError as e:  # pipe's error in place of the hello
                raise PipeError(self._named(str(e))) from None
            self._ring = Ring(fds[0], h, self._torch)
        finally:
            for fd in fds:
                os.close(fd)  # the mapping keeps the memory
        self.info = h

    # -- the iteration -------------------------------------------------------

    def __len__(self):
        return self.info["batches"]

    def set_epoch(self, epoch):
        """Select the epoch the next iteration streams, from its first batch
        (dropping a state loaded and not yet iterated from)."""
        if epoch < 0:
            raise ValueError(f"epoch={epoch}: must be 0 or more")
        self._epoch, self._resume, self._pos = epoch, None, (epoch, 0)

    def state_dict(self):
        """Where the loader stands: the batch after the last one yielded (or
        the next epoch's first after a complete one, or what set_epoch or
        load_state_dict said since). load_state_dict of it, in this or a new
        loader over the same pipeline, rank and world, makes the next
        iteration resume exactly there; with ``pipeline elastic=true``, on
        any number of ranks that divides the same global batch."""
        h = self.info
        epoch, batch = self._pos
        return {"state_version": STATE_VERSION, "epoch": epoch, "batch": batch, "batches": h["batches"],
                "samples": h["samples"], "rank": h["rank"], "world": h["world"], "seed": h["seed"],
                "elastic": h.get("elastic", False), "global_batch": h.get("global_batch"),
                "fingerprint": h["fingerprint"]}

    def load_state_dict(self, state):
        """Resume at state (from state_dict): the next iteration streams its
        epoch from its batch; the iterations after it start their epoch
        from the beginning, as ever. A state of another pipeline (another
        fingerprint: data, stages with their parameters, seed; or another
        rank, world or epoch size) is refused with ValueError; one of
        another format (its state_version), or without one (an older
        pipefeed's, or not a state_dict), with PipeError. With
        ``pipeline elastic=true`` a state saved by any number of ranks
        carries over to another, at the same global batch: batch k of every
        rank is its slice of global batch k, whatever the number of ranks."""
        version = state.get("state_version") if isinstance(state, collections.abc.Mapping) else None
        if version is None:
            raise PipeError("state_dict has no state_version: it is not a Loader's state_dict(), or an older "
                            "pipefeed saved it (its \"version\" is the feed protocol's, not the state's); this "
                            f"pipefeed reads state version {STATE_VERSION}: start the epoch over with set_epoch")
        if type(version) is not int or version != STATE_VERSION:
            raise PipeError(f"state_dict is of state version {version!r} and this pipefeed reads {STATE_VERSION}: "
                            "load it with the pipefeed that saved it")
        h = self.info
        elastic = bool(state.get("elastic")) and h.get("elastic", False)
        if elastic:
            keys = ("batches", "global_batch", "seed")
        else:
            keys = ("batches", "samples", "rank", "world", "seed")
            if state.get("world") != h["world"]:
                raise ValueError(f"state_dict is of {state.get('world')!r} ranks and this loader is one of {h['world']}: "
                                 "a position carries over to another number of ranks only with pipeline elastic=true "
                                 "(the ranks slice whole global batches of one order), at the same global batch")
        for k in keys:
            if state.get(k) != h.get(k):
                raise ValueError(f"state_dict is of another pipeline: its {k} is {state.get(k)!r}, this loader's {h.get(k)!r}")
        if "fingerprint" not in state:
            raise ValueError("state_dict has no pipeline fingerprint (an older pipefeed saved it): "
                             "whether it is of this pipeline cannot be checked")
        if state["fingerprint"] != h["fingerprint"]:
            raise ValueError(f"state_dict is of another pipeline: its fingerprint is {state['fingerprint']}, "
                             f"this loader's {h['fingerprint']} (the data, a stage's parameters or the seed differ: "
                             "the batches after its position would not be the ones it expects)")
        if not 0 <= state["batch"] <= h["batches"] or state["epoch"] < 0:
            raise ValueError(f"state_dict: batch {state['batch']} of epoch {state['epoch']} is outside the epochs")
        self._epoch, self._resume = state["epoch"], state["batch"]
        self._pos = (self._epoch, self._resume)

    def __iter__(self):
        """An iteration over the selected epoch, from its first batch (or
        from a loaded state's batch, once), as a DataLoader's: a loop after
        a break, or another next(iter(loader)), starts the epoch over. The
        iterator holds the loader from here, before its first batch, until
        it is exhausted, closed or dropped; another iter() meanwhile raises
        RuntimeError."""
        if self._closed:
            raise ValueError("the loader is closed")
        if self._claim is not None:
            raise RuntimeError("the loader is already being iterated: finish that loop, break out of it, "
                               "or close() its iterator first")
        first, self._resume = self._resume or 0, None
        # A token, not the iteration: the loader must not keep a dropped
        # iteration alive, or it would never let go.
        self._claim = object()
        return _Iteration(self, self._claim, self._epoch, first)

    def _release(self, claim):
        """End claim's hold on the loader, if it still has it."""
        if self._claim is claim:
            self._claim = None

    def _send(self, *msg):
        try:
            self._sock.send(b"".join(msg))
        except (BrokenPipeError, ConnectionResetError):
            raise self._died("while it was serving") from None
        except socket.timeout:
            raise self._unresponsive() from None

    def _recv(self):
        try:
            data = self._sock.recv(1 << 16)
        except ConnectionResetError:
            data = b""
        except socket.timeout:
            raise self._unresponsive() from None
        if not data:
            raise self._died("while it was serving")
        return data

    def _died(self, when):
        text = self._last_error()
        if text is not None:
            return PipeError(text)
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr.join(timeout=1)
        tail = "\n".join(self._tail) or "(nothing on stderr)"
        how = f"exit status {code}" if code is not None and code >= 0 else f"signal {-code}" if code else "still running"
        return PipeDied(f"pipe stopped {when} ({how}); its last words:\n{tail}")

    def _last_error(self):
        """The text of the error message pipe sent before it went, if it
        is still waiting in the socket: a send to the gone pipe, or a reset
        (pipe left messages of ours unread), can come before it is read."""
        reset = False
        while True:
            try:
                data = self._sock.recv(1 << 16, socket.MSG_DONTWAIT)
            except ConnectionResetError:
                if reset:
                    return None
                reset = True  # said once; the messages queued before it follow
                continue
            except OSError:
                return None  # nothing waits
            if len(data) < proto.HEAD.size:
                return None
            if proto.kind(data) == proto.ERROR:
                return self._named(proto.error_text(data))

    def _unresponsive(self):
        pid = self._proc.pid
        if stopped(pid):
            why = f"it is stopped (SIGSTOP, or a debugger; kill -CONT {pid} resumes it)"
        else:
            why = "it is running but does not answer"
        return PipeError(f"pipe (pid {pid}) sent nothing for {self._timeout:g} s: {why}; "
                         "Loader(timeout=...) sets how long to wait, None for ever")

    def _iterate(self, epoch, first):
        self._token = (self._token + 1) & 0xFFFFFFFF
        token = self._token
        self._send(proto.start(token, epoch, first))
        self._slab_wait = 0.0
        held = None  # the slab of the batch last yielded, and its seq
        done = False
        started = time.perf_counter()
        try:
            while True:
                if held is not None and self._copier is None:
                    self._send(proto.release(*held))
                    held = None
                if self._copier is not None:
                    # pipe sends nothing more while the loader holds
                    # "ahead" slabs: with that many copies in flight, wait
                    # for the oldest before waiting for a batch.
                    self._reap(wait=len(self._pending) + 1 - self.info["ahead"])
                t = time.perf_counter()
                data = self._recv()
                self._stall += time.perf_counter() - t
                typ = proto.kind(data)
                if typ == proto.BATCH:
                    slab, tok, seq, ep, index, n, wait = proto.read_batch(data)
                    if tok != token:
                        continue  # of an epoch stopped earlier; pipe took its slab back
                    self._slab_wait = wait
                    self._pos = (epoch, index + 1)
                    self._images += n
                    self._batches += 1
                    if self._ring.fields is not None:
                        b = self._ring.batch(slab, n)
                        if self._copier is not None:
                            b, ev = self._copier.copy(b)
                            self._pending.append((ev, slab, seq))
                        else:
                            held = slab, seq
                            if self._copy:
                                b = {k: v.clone() if self._torch else v.copy() for k, v in b.items()}
                        if not self.info["fields"]["schema"]:
                            b = b["image"], b["targets"]  # mixed, without a fields stage
                        yield b
                        continue
                    x, y = self._ring.x[slab], self._ring.y[slab]
                    if n != len(y):  # a short batch (slicing a tensor costs µs: not for full ones)
                        x, y = x[:n], y[:n]
                    if self._copier is not None:
                        b, ev = self._copier.copy({"image": x, "label": y})
                        x, y = b["image"], b["label"]
                        self._pending.append((ev, slab, seq))
                    else:
                        held = slab, seq
                        if self._copy:
                            x, y = (x.clone(), y.clone()) if self._torch else (x.copy(), y.copy())
                    yield x, y
                elif typ == proto.END:
                    tok, ep, figures = proto.read_end(data)
                    if tok != token:
                        continue
                    self._last_end = figures
                    self._epoch, self._pos = epoch + 1, (epoch + 1, 0)
                    done = True
                    return
                elif typ == proto.ERROR:
                    done = True  # pipe stops; nothing to stop
                    raise PipeError(self._named(proto.error_text(data)))
                else:
                    raise PipeError(f"pipe feed sent message type {typ} during an epoch")
        finally:
            self._busy += time.perf_counter() - started
            self._slab_wait_done += self._slab_wait
            self._slab_wait = 0.0
            if not self._closed and self._proc.poll() is None:
                try:
                    if self._copier is not None:
                        self._reap(wait=len(self._pending))
                    if not done:
                        self._send(proto.stop())  # pipe takes back every slab
                    elif held is not None:
                        self._send(proto.release(*held))
                except PipeError:
                    pass  # pipe died, or does not answer: close() ends it
            # Copies not handed back (pipe failed meanwhile) still finish
            # before a later start lets pipe reuse their slabs.
            while self._pending:
                self._pending.popleft()[0].synchronize()

    def _reap(self, wait=0):
        """Hand back to pipe the slabs whose copies to the device have
        completed, having waited for the oldest wait copies to complete."""
        while self._pending and (wait > 0 or self._pending[0][0].query()):
            ev, slab, seq = self._pending.popleft()
            ev.synchronize()
            wait -= 1
            self._send(proto.release(slab, seq))

    # -- figures and the end -------------------------------------------------

    def stats(self):
        """The figures so far: images and batches yielded, images/s over the
        time spent iterating, seconds Python waited for pipe (stall_seconds,
        and its share of the iterating time, stall_pct), seconds pipe waited
        for a free slab (slab_wait_seconds: Python held it back), and pipe's
        own figures for the last complete epoch (epoch)."""
        busy = self._busy
        return {
            "images": self._images,
            "batches": self._batches,
            "seconds": busy,
            "images_per_sec": self._images / busy if busy > 0 else 0.0,
            "stall_seconds": self._stall,
            "stall_pct": 100 * self._stall / busy if busy > 0 else 0.0,
            "slab_wait_seconds": self._slab_wait_done + self._slab_wait,
            "epoch": self._last_end,
        }

    def close(self):
        """Stop pipe and unmap the ring. Batches yielded as views must not be
        used afterwards."""
        if self._closed:
            return
        self._closed = True
        self._sock.close()  # pipe reads EOF and exits
        if stopped(self._proc.pid):
            self._proc.kill()  # a stopped pipe reads nothing
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.join(timeout=1)
        if getattr(self, "_copier", None) is not None:
            self._copier.close()
        if getattr(self, "_ring", None) is not None:
            self._ring.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _Iteration:
    """An iteration of a Loader over one epoch (what iter(loader) returns):
    it holds the loader from its creation until it is exhausted, fails,
    is closed or is garbage-collected, whichever comes first, and only then
    lets another iteration start. Its batches come from the loader's
    generator, which it closes (so that pipe takes back its slabs) before
    it lets go."""

    def __init__(self, loader, claim, epoch, first):
        self._loader, self._claim = loader, claim
        self._gen = loader._iterate(epoch, first)

    def __iter__(self):
        return self

    def __next__(self):
        if self._gen is None:
            raise StopIteration
        try:
            return next(self._gen)
        except BaseException:
            self.close()  # the generator has finished: exhausted, or failed
            raise

    def close(self):
        """End the iteration: pipe stops the epoch and takes back its slabs,
        and the loader is free for another."""
        gen, self._gen = self._gen, None
        if gen is None:
            return
        try:
            gen.close()
        finally:
            self._loader._release(self._claim)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
