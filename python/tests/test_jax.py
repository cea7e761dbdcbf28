"""pipefeed's framework="jax" on JAX's CPU backend with four CPU devices
(XLA_FLAGS, set here before JAX starts): the batches are the numpy
framework's, byte for byte, they keep their values however long they are
held, they split across a sharding, the rank and world of a multi-process
JAX job come from jax.process_index and process_count (in a job of two
processes on the loopback), and bad combinations are refused before pipe
starts."""

import os
import socket
import subprocess
import sys
import textwrap

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax = pytest.importorskip("jax", reason="JAX is not installed (scripts/python-deps installs its CPU build from PyPI)")

import pipefeed  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from test_fields import every  # noqa: E402
from test_loader import recipe  # noqa: E402


def numpy_batches(pipe_bin, path, epoch=0, **kw):
    """The batches of one epoch from the numpy framework, copied."""
    with pipefeed.Loader(path, framework="numpy", epoch=epoch, pipe_bin=pipe_bin, **kw) as loader:
        return [(x.copy(), y.copy()) for x, y in loader]


def four_devices():
    if jax.device_count() < 4:
        pytest.skip(f"JAX started before this module set XLA_FLAGS: {jax.device_count()} CPU device(s), want 4")
    return NamedSharding(Mesh(np.array(jax.devices()[:4]), ("batch",)), PartitionSpec("batch"))


def in_ring(loader, a):
    """Whether any shard of a lies in the loader's ring."""
    base = np.frombuffer(loader._ring.mm, dtype=np.uint8).ctypes.data
    return any(base <= s.data.unsafe_buffer_pointer() < base + len(loader._ring.mm) for s in a.addressable_shards)


@pytest.mark.parametrize("body", [
    recipe(n=1000, batch=64),  # the last batch holds 40
    recipe(n=1000, batch=64, dtype="float16"),
    "source synthetic n=1000 seed=3\nbatch 64\nto_tensor layout=nhwc dtype=uint8\n",
], ids=["float32", "float16", "uint8-nhwc"])
def test_batches_are_numpys(pipe_bin, write_pipe, body):
    path = write_pipe(body)
    want = numpy_batches(pipe_bin, path)
    with pipefeed.Loader(path, framework="jax", pipe_bin=pipe_bin) as loader:
        got = [(x, y) for x, y in loader]
    assert len(got) == len(want) == 16
    for i, ((x, y), (wx, wy)) in enumerate(zip(got, want)):
        assert isinstance(x, jax.Array) and x.devices() == {jax.local_devices()[0]}
        assert x.shape == wx.shape and x.dtype == wx.dtype, f"batch {i}"
        assert np.asarray(x).tobytes() == wx.tobytes(), f"batch {i}"
        assert y.dtype == jax.numpy.int32 and np.array_equal(np.asarray(y), wy), f"batch {i}"


def test_kept_batches_keep_their_values(pipe_bin, write_pipe):
    """XLA's CPU client aliases aligned host memory, and every slab is: a
    batch placed from its slab as it is was that slab, and changed when
    pipe wrote a later batch into it (batch 0 read as another). Here two
    epochs are kept whole, past the ring's seven slabs and an epoch's end,
    and read afterwards."""
    path = write_pipe(recipe(n=1000, batch=64))
    want = numpy_batches(pipe_bin, path) + numpy_batches(pipe_bin, path, epoch=1)
    with pipefeed.Loader(path, framework="jax", pipe_bin=pipe_bin) as loader:
        assert loader.info["ring"]["slabs"] < len(loader)
        kept = [b for _ in range(2) for b in loader]
        assert not any(in_ring(loader, x) or in_ring(loader, y) for x, y in kept)
    for i, ((x, y), (wx, wy)) in enumerate(zip(kept, want)):
        assert np.asarray(x).tobytes() == wx.tobytes(), f"batch {i}"
        assert np.array_equal(np.asarray(y), wy), f"batch {i}"


def test_device_places_batches(pipe_bin, write_pipe):
    four_devices()
    path = write_pipe(recipe(n=200, batch=50))
    want = numpy_batches(pipe_bin, path)
    dev = jax.devices()[2]
    with pipefeed.Loader(path, framework="jax", device=dev, pipe_bin=pipe_bin) as loader:
        got = list(loader)
    assert [x.devices() for x, _ in got] == [{dev}] * 4 and [y.devices() for _, y in got] == [{dev}] * 4
    assert [np.asarray(x).tobytes() for x, _ in got] == [x.tobytes() for x, _ in want]


def test_sharding_splits_the_batch_axis(pipe_bin, write_pipe):
    sharding = four_devices()
    path = write_pipe(recipe(n=1000, batch="64 drop_last=true"))
    want = numpy_batches(pipe_bin, path)
    with pipefeed.Loader(path, framework="jax", sharding=sharding, pipe_bin=pipe_bin) as loader:
        got = list(loader)
    assert len(got) == len(want) == 15
    for i, ((x, y), (wx, wy)) in enumerate(zip(got, want)):
        assert x.sharding == sharding and x.shape == wx.shape
        shards = sorted(x.addressable_shards, key=lambda s: s.index[0].start)
        assert [s.device for s in shards] == jax.devices()[:4]
        for k, s in enumerate(shards):
            assert np.asarray(s.data).tobytes() == wx[16 * k:16 * (k + 1)].tobytes(), f"batch {i}, shard {k}"
        assert y.sharding.spec == PartitionSpec("batch") and np.array_equal(np.asarray(y), wy), f"batch {i}"
        assert {s.data.shape for s in y.addressable_shards} == {(16,)}


def test_sharding_that_cannot_split_is_refused(pipe_bin, write_pipe):
    sharding = four_devices()
    with pytest.raises(ValueError, match=r"cannot split a batch, of 50 samples: .*a batch size it divides"):
        pipefeed.Loader(write_pipe(recipe(n=1000, batch=50)), framework="jax", sharding=sharding, pipe_bin=pipe_bin)
    with pytest.raises(ValueError, match=r"the last batch of each epoch, of 42 samples: .*drop_last=true"):
        pipefeed.Loader(write_pipe(recipe(n=1002, batch=64)), framework="jax", sharding=sharding, pipe_bin=pipe_bin)
    path = write_pipe(recipe(n=1002, batch="64 drop_last=true"))
    with pipefeed.Loader(path, framework="jax", sharding=sharding, pipe_bin=pipe_bin) as loader:
        assert len(loader) == 15


def test_every_field_is_numpys(pipe_bin):
    """Fields of every kind, placed across four devices, hold the numpy
    framework's values (the int64 label and classes as JAX's int32 unless
    jax_enable_x64). An int64 tensor, whose values int32 would cut, is
    refused without jax_enable_x64 before the first batch."""
    sharding = four_devices()
    if not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match="int64 tensor field .* jax_enable_x64"):
            pipefeed.Loader(every(), framework="jax", sharding=sharding, pipe_bin=pipe_bin)
    with pipefeed.Loader(every("int32"), framework="numpy", pipe_bin=pipe_bin) as ld:
        want = [{k: v.copy() for k, v in b.items()} for b in ld]
    with pipefeed.Loader(every("int32"), framework="jax", sharding=sharding, pipe_bin=pipe_bin) as ld:
        got = list(ld)
    assert len(got) == len(want) == 10
    for i, (b, w) in enumerate(zip(got, want)):
        assert list(b) == list(w)
        for k, a in b.items():
            assert len({s.device for s in a.addressable_shards}) == 4, k
            assert np.array_equal(np.asarray(a), w[k]), f"batch {i}: {k}"


def test_rank_and_world_from_jax_processes(pipe_bin, write_pipe, monkeypatch):
    path = write_pipe(recipe(n=1000, batch=50))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pipefeed.Loader(path, framework="jax", pipe_bin=pipe_bin) as loader:
        # One process: the launcher's environment decides, as for torch.
        assert (loader.info["rank"], loader.info["world"]) == (0, 4)
    monkeypatch.setattr(jax, "process_index", lambda: 1)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    want = numpy_batches(pipe_bin, path, rank=1, world=2)
    with pipefeed.Loader(path, framework="jax", pipe_bin=pipe_bin) as loader:
        assert (loader.info["rank"], loader.info["world"]) == (1, 2)
        got = [np.asarray(x).tobytes() for x, _ in loader]
    assert got == [x.tobytes() for x, _ in want]
    with pipefeed.Loader(path, framework="jax", rank=0, world=1, pipe_bin=pipe_bin) as loader:
        assert (loader.info["rank"], loader.info["world"]) == (0, 1)


PROCESS = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, numpy as np, pipefeed
from jax.sharding import Mesh, NamedSharding, PartitionSpec
port, process, path, pipe_bin, out = sys.argv[1:]
jax.distributed.initialize(coordinator_address="127.0.0.1:" + port, num_processes=2, process_id=int(process),
                           initialization_timeout=60)
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("batch",)), PartitionSpec("batch"))
with pipefeed.Loader(path, framework="jax", sharding=sharding, pipe_bin=pipe_bin, timeout=60) as loader:
    assert (loader.info["rank"], loader.info["world"]) == (int(process), 2), loader.info
    with open(out, "wb") as f:
        for x, y in loader:
            assert x.shape[0] == 2 * loader.info["batch"] and not x.is_fully_addressable
            for s in sorted(x.addressable_shards, key=lambda s: s.index[0].start):
                f.write(np.asarray(s.data).tobytes())
"""


def test_two_processes_make_global_batches(pipe_bin, write_pipe, tmp_path):
    """A JAX job of two processes (jax.distributed on the loopback), two CPU
    devices each, a sharding over all four: each process's loader is rank
    process_index of world 2, and its addressable shards of each global
    batch hold its rank's batch."""
    path = write_pipe(recipe(n=800, batch=40))
    script = tmp_path / "process.py"
    script.write_text(textwrap.dedent(PROCESS))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = [subprocess.Popen([sys.executable, str(script), port, str(p), path, pipe_bin, str(tmp_path / f"out{p}")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for p in range(2)]
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    for rank in range(2):
        want = b"".join(x.tobytes() for x, _ in numpy_batches(pipe_bin, path, rank=rank, world=2))
        assert (tmp_path / f"out{rank}").read_bytes() == want, f"rank {rank}"


@pytest.mark.parametrize("kw, match", [
    (dict(framework="numpy", sharding="x"), "sharding= needs framework='jax'"),
    (dict(framework="torch", sharding="x"), "sharding= needs framework='jax'"),
    (dict(framework="jax", device="cuda:0"), "want a jax.Device"),
    (dict(framework="jax", sharding="batch"), "want a jax.sharding.NamedSharding"),
    (dict(framework="jax", pin_memory=True), "pin_memory= is for framework='torch'"),
    (dict(framework="numpy", device="cuda:0"), "device= needs framework='torch' or 'jax'"),
    (dict(framework="tensorflow"), "want 'torch', 'numpy' or 'jax'"),
])
def test_bad_combinations_are_refused(write_pipe, kw, match):
    """Refused before pipe starts: no pipe command is named."""
    with pytest.raises(ValueError, match=match):
        pipefeed.Loader(write_pipe(recipe()), pipe_bin="/nonexistent/pipe", **kw)


def test_device_and_sharding_together_are_refused(write_pipe):
    dev = jax.local_devices()[0]
    with pytest.raises(ValueError, match="device= and sharding= together"):
        pipefeed.Loader(write_pipe(recipe()), framework="jax", device=dev,
                        sharding=jax.sharding.SingleDeviceSharding(dev), pipe_bin="/nonexistent/pipe")


def test_deleted_and_donated_batches(pipe_bin, write_pipe):
    """A loop may delete its batches, or donate them to a step (jit's
    donate_argnums), before it asks for the next: the loader goes on, and
    the batches after them are whole."""
    path = write_pipe(recipe(n=600, batch=50))
    want = numpy_batches(pipe_bin, path)
    consume = jax.jit(lambda x: x * 1, donate_argnums=0)
    got = []
    with pipefeed.Loader(path, framework="jax", pipe_bin=pipe_bin) as loader:
        for i, (x, y) in enumerate(loader):
            got.append(np.asarray(x).tobytes())
            if i % 2:
                consume(x)
            else:
                x.delete()
            y.delete()
            assert x.is_deleted()
    assert got == [x.tobytes() for x, _ in want]
