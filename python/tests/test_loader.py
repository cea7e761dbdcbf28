"""pipefeed against the pipe command: the stream is pipe's, resumes are
exact, a model learns through it, and either side's death is noticed."""

import itertools
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pipefeed
from xxh64 import pipe_checksum

RECIPE = """source synthetic n={n} seed=3{extra}
shuffle seed=11
random_crop size=32 pad=4 fill=reflect
flip horizontal
normalize mean=0.5 std=0.25
batch {batch}
to_tensor layout=nchw dtype={dtype}
"""


def recipe(n=1000, batch=64, dtype="float32", extra=""):
    return RECIPE.format(n=n, batch=batch, dtype=dtype, extra=extra)


def bench_sums(pipe_bin, path, epochs):
    out = subprocess.run([pipe_bin, "bench", path, "--epochs", str(epochs), "--checksum", "--json", "-q"],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line)["checksum"] for line in out.splitlines()]


def stream(loader, limit=None):
    """The data bytes and int32 labels of one iteration (or its first
    limit batches), copied out of the views."""
    data, labels = [], []
    it = iter(loader)
    for x, y in itertools.islice(it, limit):
        data.append(np.asarray(x).tobytes())
        labels.append(np.asarray(y).astype(np.int32).tobytes())
    it.close()  # a partial iteration ends here, not at garbage collection
    return b"".join(data), b"".join(labels)


@pytest.mark.parametrize("workers", [1, 3])
def test_stream_is_pipes_stream(pipe_bin, write_pipe, workers):
    path = write_pipe(recipe())
    want = bench_sums(pipe_bin, path, 2)
    with pipefeed.Loader(path, workers=workers, framework="numpy", pipe_bin=pipe_bin) as loader:
        assert len(loader) == 16
        for epoch in range(2):
            loader.set_epoch(epoch)
            data, labels = stream(loader)
            assert len(labels) == 4 * 1000
            assert pipe_checksum(data, labels) == want[epoch], f"epoch {epoch}, {workers} workers"


def test_epochs_advance_by_themselves(pipe_bin, write_pipe):
    path = write_pipe(recipe(dtype="float16"))
    want = bench_sums(pipe_bin, path, 2)
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as loader:
        got = [pipe_checksum(*stream(loader)) for _ in range(2)]
    assert got == want


def test_two_ranks_together_are_one(pipe_bin, write_pipe, monkeypatch):
    path = write_pipe(recipe(n=1000, batch=50))

    def samples(loader):
        rows = []
        for x, y in loader:
            x = np.asarray(x)
            rows += [(x[i].tobytes(), int(y[i])) for i in range(len(y))]
        return rows

    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as one:
        whole = samples(one)
    parts = []
    for rank in range(2):
        # The rank comes from the launcher's environment, as under torchrun.
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as loader:
            assert loader.info["rank"] == rank and loader.info["world"] == 2 and len(loader) == 10
            parts.append(samples(loader))
    assert len(parts[0]) == len(parts[1]) == 500
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == sorted(whole)


def test_resume_mid_epoch_is_exact(pipe_bin, write_pipe):
    path = write_pipe(recipe())
    with pipefeed.Loader(path, pipe_bin=pipe_bin) as loader:
        loader.set_epoch(1)
        whole = stream(loader)
    with pipefeed.Loader(path, pipe_bin=pipe_bin) as loader:
        loader.set_epoch(1)
        head = stream(loader, limit=5)
        state = loader.state_dict()
    assert state["epoch"] == 1 and state["batch"] == 5
    with pipefeed.Loader(path, pipe_bin=pipe_bin, workers=3) as loader:
        loader.load_state_dict(state)
        tail = stream(loader)
        assert loader.state_dict()["epoch"] == 2
    assert head[0] + tail[0] == whole[0] and head[1] + tail[1] == whole[1]


def test_state_dict_of_another_pipeline_is_refused(pipe_bin, write_pipe):
    with pipefeed.Loader(write_pipe(recipe()), pipe_bin=pipe_bin) as loader:
        state = loader.state_dict()
    with pipefeed.Loader(write_pipe(recipe(n=500), "other.pipe"), pipe_bin=pipe_bin) as loader:
        with pytest.raises(ValueError, match="another pipeline"):
            loader.load_state_dict(state)


def test_batches_are_views_until_the_next(pipe_bin, write_pipe):
    torch = pytest.importorskip("torch")
    path = write_pipe(recipe(n=200, batch=50))
    with pipefeed.Loader(path, pipe_bin=pipe_bin) as loader:
        it = iter(loader)
        x, y = next(it)
        assert isinstance(x, torch.Tensor) and x.shape == (50, 3, 32, 32) and x.dtype == torch.float32
        assert y.dtype == torch.int64 and y.shape == (50,)
        ring = np.frombuffer(loader._ring.mm, dtype=np.uint8)
        assert np.shares_memory(x.numpy(), ring), "a host batch is a view of the ring"
        it.close()
    with pipefeed.Loader(path, pipe_bin=pipe_bin, copy=True) as loader:
        x, _ = next(iter(loader))
        assert not np.shares_memory(x.numpy(), np.frombuffer(loader._ring.mm, dtype=np.uint8))


def test_a_model_learns_through_the_loader(pipe_bin, write_pipe):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    body = "source synthetic n=4000 seed=1{extra}\nshuffle seed=2\nnormalize mean=0.5 std=0.25\nbatch 100\n"
    test_body = "source synthetic n=1000 split=test seed=1\nnormalize mean=0.5 std=0.25\nbatch 250\n"

    def accuracy(extra):
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        with pipefeed.Loader(write_pipe(body.format(extra=extra), "train.pipe"), pipe_bin=pipe_bin) as loader:
            for _ in range(3):
                for x, y in loader:
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
        right = 0
        with pipefeed.Loader(write_pipe(test_body, "test.pipe"), pipe_bin=pipe_bin) as loader, torch.no_grad():
            for x, y in loader:
                right += int((model(x).argmax(1) == y).sum())
        return right / 1000

    learnt, control = accuracy(""), accuracy(" shuffle_labels=true")
    assert learnt > 0.5, f"true labels: {learnt:.3f} test accuracy (chance 0.1)"
    assert control < 0.2, f"shuffled labels: {control:.3f} test accuracy, want chance"


def test_malformed_file_raises_before_the_first_batch(pipe_bin, write_pipe):
    path = write_pipe("source synthetic\nrandom_crop size=32 padd=4\nbatch 8\n")
    with pytest.raises(pipefeed.PipeError, match=r"t\.pipe:2:21: random_crop: unknown parameter \"padd\""):
        pipefeed.Loader(path, pipe_bin=pipe_bin)


def test_corrupt_record_as_on_error_says(pipe_bin, write_pipe, tmp_path):
    rec = bytearray(3073 * 4)
    rec[3073] = 42  # sample 1's label: out of range
    (tmp_path / "b.bin").write_bytes(bytes(rec))
    src = f"source cifar10 path={tmp_path / 'b.bin'}\n"
    with pipefeed.Loader(write_pipe(src + "batch 2\n"), pipe_bin=pipe_bin) as loader:
        with pytest.raises(pipefeed.PipeError, match="b.bin: offset 3073: sample 1: label out of range"):
            list(loader)
    with pipefeed.Loader(write_pipe(src + "pipeline on_error=skip\nbatch 2\n", "skip.pipe"), pipe_bin=pipe_bin,
                         framework="numpy") as loader:
        assert sum(len(y) for _, y in loader) == 3


def test_protocol_mismatch_is_named(pipe_bin, write_pipe, monkeypatch):
    monkeypatch.setattr(pipefeed._loader, "PROTOCOL", 99)
    with pytest.raises(pipefeed.PipeError, match=f"feed protocol 99 and this pipe speaks {pipefeed.PROTOCOL}"):
        pipefeed.Loader(write_pipe(recipe()), pipe_bin=pipe_bin)


def test_pipe_killed_is_reported(pipe_bin, write_pipe):
    with pipefeed.Loader(write_pipe(recipe(n=20000)), pipe_bin=pipe_bin) as loader:
        it = iter(loader)
        next(it)
        os.kill(loader._proc.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(pipefeed.PipeDied, match="signal 9"):
            for _ in it:
                pass
        assert time.monotonic() - start < 2


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_python_killed_ends_pipe(pipe_bin, write_pipe):
    shm_before = set(os.listdir("/dev/shm"))
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(pipefeed.__file__)))!r})
        import pipefeed
        loader = pipefeed.Loader({write_pipe(recipe(n=20000))!r}, pipe_bin={pipe_bin!r}, framework="numpy")
        it = iter(loader)
        next(it)
        print(loader._proc.pid, flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(child.stdout.readline())
    assert _alive(pid)
    child.kill()
    child.wait()
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid), "pipe outlived its loader by 2 s"
    assert set(os.listdir("/dev/shm")) <= shm_before, "shared memory left behind"


def test_stats(pipe_bin, write_pipe):
    with pipefeed.Loader(write_pipe(recipe()), pipe_bin=pipe_bin, framework="numpy") as loader:
        for _ in loader:
            time.sleep(0.001)
        s = loader.stats()
    assert s["images"] == 1000 and s["batches"] == 16
    assert s["images_per_sec"] > 0 and 0 <= s["stall_pct"] <= 100
    assert s["slab_wait_seconds"] > 0, "pipe waited for the slow loop's slabs"
    assert s["epoch"]["images"] == 1000


def test_cuda_device(pipe_bin, write_pipe):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the device= path is tested where a GPU is present")
    path = write_pipe(recipe())
    with pipefeed.Loader(path, pipe_bin=pipe_bin, framework="numpy") as loader:
        want = stream(loader)
    for pin in (False, True):
        with pipefeed.Loader(path, pipe_bin=pipe_bin, device="cuda:0", pin_memory=pin) as loader:
            data, labels = [], []
            for x, y in loader:
                assert x.device.type == "cuda"
                data.append(x.cpu().numpy().tobytes())
                labels.append(y.cpu().numpy().astype(np.int32).tobytes())
        assert (b"".join(data), b"".join(labels)) == want, f"pin_memory={pin}"


def test_stale_release_is_a_protocol_error(pipe_bin, write_pipe):
    """A release that names another batch than its slab holds (a late
    duplicate) is refused: pipe says so and exits 1, rather than refill a
    slab the loader still holds."""
    with pipefeed.Loader(write_pipe(recipe(n=2000, batch=32)), pipe_bin=pipe_bin, framework="numpy") as loader:
        it = iter(loader)
        for _ in range(5):
            next(it)
        slab, seq = it._gen.gi_frame.f_locals["held"]
        loader._sock.send(pipefeed._protocol.release(slab, seq - 3))
        # pipe is gone before the loader reads its error: the loader's
        # release then fails, and it must still raise pipe's words.
        assert loader._proc.wait(timeout=5) == 1
        with pytest.raises(pipefeed.PipeError, match=f"stale release of slab {slab}, naming batch {seq - 3}"):
            for _ in it:
                pass


def _feed(pipe_bin, path, before=None):
    """pipe feed on path, started by hand: our end of its socket and the
    process. A packet before is in the socket before pipe starts, so it
    comes before the hello however fast pipe loads the file."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if before is not None:
        ours.send(before)
    proc = subprocess.Popen([pipe_bin, "feed", path, "--fd", str(theirs.fileno()), "--protocol", str(pipefeed.PROTOCOL)],
                            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    theirs.close()
    ours.settimeout(5)
    return ours, proc


@pytest.mark.parametrize("early", [b"start", b"garbage", b"empty"])
def test_messages_before_the_hello_are_refused(pipe_bin, write_pipe, early):
    """A message before the hello (pipe had read and dropped it) or an empty
    packet (pipe had taken it for the loader's going away) is answered with
    an error, and pipe exits 1."""
    msg = {b"start": pipefeed._protocol.start(1, 0, 0), b"garbage": b"\x01\x02\x03",
           b"empty": b""}[early]
    ours, proc = _feed(pipe_bin, write_pipe(recipe()), before=msg)
    with ours:
        data = ours.recv(1 << 16)
        typ = struct.unpack_from("<I", data)[0] if data else None
        assert typ == pipefeed._protocol.ERROR, f"pipe answered {early!r} before the hello with {data[:64]!r}"
        assert b"before the hello" in data
    assert proc.wait(timeout=5) == 1


def test_closing_before_the_hello_ends_pipe_quietly(pipe_bin, write_pipe):
    ours, proc = _feed(pipe_bin, write_pipe(recipe()))
    ours.close()
    assert proc.wait(timeout=5) == 0
    assert proc.stderr.read() == b""


def test_empty_packet_mid_epoch_is_a_protocol_error(pipe_bin, write_pipe):
    """An empty packet reads as 0 bytes, as the loader's going away does;
    pipe tells them apart: an error and exit 1, where a close ends it with
    exit 0."""
    with pipefeed.Loader(write_pipe(recipe(n=2000, batch=32)), pipe_bin=pipe_bin, framework="numpy") as loader:
        it = iter(loader)
        next(it)
        loader._sock.send(b"")
        assert loader._proc.wait(timeout=5) == 1
        with pytest.raises(pipefeed.PipeError, match="the loader sent an empty packet"):
            for _ in it:
                pass


def test_each_iteration_starts_its_epoch_over(pipe_bin, write_pipe):
    """As with a DataLoader, a loop after a break and a second
    next(iter(loader)) start the selected epoch from its first batch (they
    went on from where the last iteration stopped); a loaded state resumes
    the one iteration after it."""
    path = write_pipe(recipe(n=500, batch=50))
    size = 50 * 3 * 32 * 32 * 4
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as loader:
        loader.set_epoch(2)
        whole = stream(loader)
        batch = [whole[0][i * size:(i + 1) * size] for i in range(10)]
        assert loader.state_dict()["epoch"] == 3, "a complete iteration moves on to the next epoch"
        loader.set_epoch(2)
        for _ in range(2):
            assert np.asarray(next(iter(loader))[0]).tobytes() == batch[0], "next(iter(loader)) went on mid-epoch"
        for i, (x, _) in enumerate(loader):
            if i == 3:
                break
        assert loader.state_dict()["epoch"] == 2 and loader.state_dict()["batch"] == 4
        state = loader.state_dict()
        assert stream(loader) == whole, "a loop after a break went on mid-epoch"

        loader.load_state_dict(state)
        for x, _ in loader:
            assert np.asarray(x).tobytes() == batch[4], "a loaded state is where the next iteration starts"
            break
        assert np.asarray(next(iter(loader))[0]).tobytes() == batch[0], "a loaded state resumes one iteration only"
        loader.load_state_dict(state)
        loader.set_epoch(2)
        assert np.asarray(next(iter(loader))[0]).tobytes() == batch[0], "set_epoch drops a loaded state"


def test_prefetch_stage_is_refused_by_its_line(pipe_bin, write_pipe):
    """pipe feed serves host batches: a prefetch stage is a PipeError naming
    its line, before anything loads (pipe exited without a word, which
    raised PipeDied)."""
    path = write_pipe(recipe() + "prefetch depth=2 devices=cpu:1\n")
    with pytest.raises(pipefeed.PipeError) as e:
        pipefeed.Loader(path, pipe_bin=pipe_bin)
    assert not isinstance(e.value, pipefeed.PipeDied)
    assert re.search(r"t\.pipe:8:1: prefetch: .*remove the prefetch stage", str(e.value)), str(e.value)


def test_errors_are_said_once(pipe_bin, write_pipe, tmp_path, capfd):
    """pipe's error reaches Python once, as the exception: pipe used to print
    it on its stderr too, which the loader passes through."""
    with pytest.raises(pipefeed.PipeError, match="padd"):
        pipefeed.Loader(write_pipe("source synthetic\nrandom_crop size=32 padd=4\nbatch 8\n"), pipe_bin=pipe_bin)
    rec = bytearray(3073 * 4)
    rec[3073] = 42
    (tmp_path / "b.bin").write_bytes(bytes(rec))
    with pipefeed.Loader(write_pipe(f"source cifar10 path={tmp_path / 'b.bin'}\nbatch 2\n", "b.pipe"),
                         pipe_bin=pipe_bin) as loader:
        with pytest.raises(pipefeed.PipeError, match="label out of range"):
            list(loader)
        assert loader._proc.wait(timeout=5) == 1
        loader._stderr.join(timeout=5)
    err = capfd.readouterr().err
    assert "padd" not in err and "label out of range" not in err, err


def _spy_popen(monkeypatch):
    """The processes the loader starts, as it starts them."""
    procs = []
    real = subprocess.Popen

    def spy(*args, **kwargs):
        procs.append(real(*args, **kwargs))
        return procs[-1]

    monkeypatch.setattr(pipefeed._loader.subprocess, "Popen", spy)
    return procs


def test_a_stopped_pipe_times_out(pipe_bin, write_pipe, tmp_path, monkeypatch):
    """A pipe stopped by SIGSTOP (which blocked Python for ever) raises a
    PipeError after timeout seconds, mid-epoch or before its hello, and
    close() ends it at once."""
    with pipefeed.Loader(write_pipe(recipe(n=20000)), pipe_bin=pipe_bin, framework="numpy", timeout=1) as loader:
        it = iter(loader)
        next(it)
        pid = loader._proc.pid
        os.kill(pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(pipefeed.PipeError, match=rf"pipe \(pid {pid}\) sent nothing for 1 s: it is stopped"):
            for _ in it:
                pass
        assert time.monotonic() - start < 5
        start = time.monotonic()
        loader.close()
        assert time.monotonic() - start < 2 and loader._proc.poll() is not None

    # Stopped before its hello: pipe_bin is a script that stops itself, then
    # becomes pipe.
    wrapper = tmp_path / "stopped-pipe"
    wrapper.write_text(f'#!/bin/sh\nkill -STOP $$\nexec {pipe_bin} "$@"\n')
    wrapper.chmod(0o755)
    procs = _spy_popen(monkeypatch)
    start = time.monotonic()
    with pytest.raises(pipefeed.PipeError, match=r"sent nothing for 1 s: it is stopped"):
        pipefeed.Loader(write_pipe(recipe()), pipe_bin=str(wrapper), timeout=1)
    assert time.monotonic() - start < 5
    assert procs[0].poll() is not None, "the stopped pipe was left behind"


def test_state_dict_of_another_augmentation_is_refused(pipe_bin, write_pipe):
    """A state carries pipe's fingerprint of the pipeline: one with another
    augmentation (same sizes and seed, so nothing else told) refuses it;
    the same pipeline from another file, or with other workers, takes it."""
    body = recipe()
    with pipefeed.Loader(write_pipe(body), pipe_bin=pipe_bin, framework="numpy") as loader:
        stream(loader, limit=2)
        state = loader.state_dict()
    assert len(state["fingerprint"]) == 32
    for name, other in [("flip", body.replace("flip horizontal", "flip horizontal p=0.25")),
                        ("crop", body.replace("pad=4", "pad=2"))]:
        with pipefeed.Loader(write_pipe(other, f"{name}.pipe"), pipe_bin=pipe_bin, framework="numpy") as loader:
            with pytest.raises(ValueError, match="another pipeline: its fingerprint"):
                loader.load_state_dict(state)
    with pipefeed.Loader(write_pipe("# the same, in another file\n" + body, "same.pipe"), pipe_bin=pipe_bin,
                         framework="numpy", workers=3) as loader:
        loader.load_state_dict(state)
        with pytest.raises(ValueError, match="no pipeline fingerprint"):
            loader.load_state_dict({k: v for k, v in state.items() if k != "fingerprint"})


def test_many_short_epochs_and_breaks_do_not_hang(pipe_bin, write_pipe):
    """set_epoch and a whole loop, repeated, hung within a few thousand
    epochs (an epoch pipe had started ahead, closed before its producer ran,
    deadlocked in Close: issue 24, item 1), and so could a loop broken off
    after a batch; every wait here is bounded by timeout=, and close() is
    prompt and pipe ends with exit 0 (no 10 s wait and SIGKILL)."""
    # One batch an epoch: as many epoch starts and stops a second as can be.
    loader = pipefeed.Loader(write_pipe(recipe(n=50, batch=50)), framework="numpy", pipe_bin=pipe_bin, timeout=10)
    broken = pipefeed.Loader(write_pipe(recipe(n=200, batch=50), "broken.pipe"), framework="numpy",
                             pipe_bin=pipe_bin, timeout=10)
    try:
        for _ in range(2000):
            loader.set_epoch(0)
            assert sum(1 for _ in loader) == 1
        for _ in range(500):
            for _ in broken:
                break
    finally:
        for lo in (loader, broken):
            start = time.monotonic()
            lo.close()
            assert time.monotonic() - start < 2, "close() waited for pipe"
            assert lo._proc.returncode == 0


def test_dead_loader_with_its_socket_still_open_ends_pipe(pipe_bin, write_pipe):
    """When the loader's process dies, pipe ends even if its socket stays
    open (a process the loader started inherited it), so that pipe cannot be
    left orphaned holding its ring; it used to wait for the socket's EOF."""
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(pipefeed.__file__)))!r})
        import pipefeed
        loader = pipefeed.Loader({write_pipe(recipe(n=20000))!r}, pipe_bin={pipe_bin!r}, framework="numpy")
        it = iter(loader)
        next(it)
        holder = subprocess.Popen(["sleep", "60"], pass_fds=(loader._sock.fileno(),))
        print(loader._proc.pid, holder.pid, flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid, holder = map(int, child.stdout.readline().split())
    try:
        child.kill()
        child.wait()
        deadline = time.monotonic() + 3
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pid), "pipe outlived its loader's process by 3 s"
    finally:
        os.kill(holder, signal.SIGKILL)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


ELASTIC = """source synthetic n=1000 seed=3
shuffle seed=11
random_crop size=32 pad=4 fill=reflect
flip horizontal
batch {batch}
pipeline elastic={elastic}
to_tensor layout=nchw dtype=uint8
"""


def test_elastic_state_carries_over_ranks(pipe_bin, write_pipe):
    """With pipeline elastic=true a position saved by 2 ranks (batch 32 each:
    a global batch of 64) resumes on 1 rank (batch 64) at the exact next
    global batch: the 2 ranks' first 5 batches, slice by slice, then the
    resumed rank's, are one rank's whole epoch. Without it the state of
    another number of ranks is refused, saying why."""
    one = write_pipe(ELASTIC.format(batch=64, elastic="true"), "one.pipe")
    two = write_pipe(ELASTIC.format(batch=32, elastic="true"), "two.pipe")
    with pipefeed.Loader(one, framework="numpy", pipe_bin=pipe_bin) as loader:
        loader.set_epoch(1)
        whole = stream(loader)
    heads, states = [], []
    for rank in range(2):
        with pipefeed.Loader(two, rank=rank, world=2, framework="numpy", pipe_bin=pipe_bin) as loader:
            assert loader.info["elastic"] and loader.info["global_batch"] == 64 and len(loader) == 1000 // 64
            loader.set_epoch(1)
            heads.append(stream(loader, limit=5))
            states.append(loader.state_dict())
    assert states[0]["batch"] == states[1]["batch"] == 5
    with pipefeed.Loader(one, framework="numpy", pipe_bin=pipe_bin) as loader:
        loader.load_state_dict(states[1])
        tail = stream(loader)
    rows = 32 * 3 * 32 * 32
    data = b"".join(heads[r][0][b * rows:(b + 1) * rows] for b in range(5) for r in range(2)) + tail[0]
    labels = b"".join(heads[r][1][b * 128:(b + 1) * 128] for b in range(5) for r in range(2)) + tail[1]
    assert data == whole[0] and labels == whole[1]

    plain = write_pipe(ELASTIC.format(batch=32, elastic="false"), "plain.pipe")
    with pipefeed.Loader(plain, rank=0, world=2, framework="numpy", pipe_bin=pipe_bin) as loader:
        state = loader.state_dict()
    with pipefeed.Loader(write_pipe(ELASTIC.format(batch=64, elastic="false"), "plain1.pipe"), framework="numpy",
                         pipe_bin=pipe_bin) as loader:
        with pytest.raises(ValueError, match="only with pipeline elastic=true"):
            loader.load_state_dict(state)


def test_one_iteration_at_a_time(pipe_bin, write_pipe):
    """iter(loader) claims the loader before its first batch: another iter()
    while that iterator lives raises (before, both got through, the claim
    being taken at the first next(), and each took the other's batches), and
    leaves it streaming; the claim ends when the iterator is exhausted,
    closed, or dropped, started or not."""
    path = write_pipe(recipe(n=200, batch=50))
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin, timeout=60) as loader:
        whole = stream(loader)[0]
        loader.set_epoch(0)
        first = iter(loader)
        with pytest.raises(RuntimeError, match="already being iterated"):
            iter(loader)
        assert b"".join(np.asarray(x).tobytes() for x, _ in first) == whole, "the refused iter() disturbed the first"
        loader.set_epoch(0)
        second = iter(loader)
        next(second)
        with pytest.raises(RuntimeError, match="already being iterated"):
            iter(loader)
        second.close()
        unstarted = iter(loader)
        del unstarted
        started = iter(loader)
        next(started)
        del started
        for _ in range(2):
            assert np.asarray(next(iter(loader))[0]).tobytes() == whole[:len(whole) // 4]
        assert stream(loader)[0] == whole


def test_state_version_is_checked(pipe_bin, write_pipe):
    """A state carries its own format, state_version, which load_state_dict
    checks: a state without one (an older pipefeed's, which wrote the
    protocol number as "version") or with another is refused with a
    PipeError saying so, and the loader is as it was."""
    path = write_pipe(recipe(n=200, batch=50))
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin, timeout=60) as loader:
        whole = stream(loader)[0]
        loader.set_epoch(0)
        stream(loader, limit=2)
        state = loader.state_dict()
        assert state["state_version"] == 1 and "version" not in state
        older = {k: v for k, v in state.items() if k != "state_version"}
        for bad, said in [(older, "has no state_version"),
                          ({**older, "version": pipefeed.PROTOCOL}, "has no state_version"),
                          ({**state, "state_version": 2}, "of state version 2 and this pipefeed reads 1"),
                          ({**state, "state_version": "1"}, "of state version '1'"),
                          ({**state, "state_version": True}, "of state version True"),
                          ([("epoch", 0)], "has no state_version")]:
            with pytest.raises(pipefeed.PipeError, match=said):
                loader.load_state_dict(bad)
        loader.load_state_dict(state)
        assert stream(loader)[0] == whole[len(whole) // 2:], "the state, loaded after the refusals, resumes at batch 2"
