"""pipefeed's device= path without a GPU: its bookkeeping of copies in
flight (when each slab goes back to pipe) driven by simulated copies, and
its CUDA calls checked against a stand-in for torch.cuda. Nothing here runs
on a GPU: test_loader.test_cuda_device does, where there is one."""

import mmap
import subprocess
import threading
import time

import numpy as np
import pytest

import pipefeed
from test_loader import _spy_popen, recipe, stream


class _Copy:
    """A simulated asynchronous copy to a device, standing in for a CUDA
    event: it reads its source (a view of a slab) only when it completes,
    delay seconds after it starts, as a DMA engine would; query() is False
    until then, and synchronize() waits for it. A slab handed back to pipe
    before its copy completed would be overwritten first, and the copy
    would read another batch."""

    def __init__(self, src, dst, delay):
        self._src, self._dst = src, dst
        self._ready = time.monotonic() + delay
        self._done = False

    def _complete(self):
        if not self._done:
            for s, d in zip(self._src, self._dst):
                d[...] = s
            self._done = True

    def query(self):
        if time.monotonic() >= self._ready:
            self._complete()
        return self._done

    def synchronize(self):
        time.sleep(max(0.0, self._ready - time.monotonic()))
        self._complete()


class _SlowCopier:
    """The loader's copier (_CudaCopier's interface) with simulated copies
    that take delay seconds each."""

    def __init__(self, delay):
        self.delay = delay

    def copy(self, batch):
        out = {k: np.empty_like(a) for k, a in batch.items()}
        return out, _Copy(list(batch.values()), list(out.values()), self.delay)

    def close(self):
        pass


def test_copies_never_synchronised_do_not_stall(pipe_bin, write_pipe):
    """A loop that never synchronises with the device (nothing in it waits
    for a copy) got 3 batches and then waited for ever: the loader released
    a slab only when, about to wait for the next batch, it saw that slab's
    copy complete, and pipe sends nothing while the loader holds 3. Copies
    of 0.1 s here, far longer than the loop's turn. The batches must also be
    whole: no slab goes back to pipe before its copy has read it."""
    path = write_pipe(recipe(n=1200, batch=50))
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as loader:
        want = stream(loader)
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as loader:
        loader._copier = _SlowCopier(0.1)
        got = []

        def loop():
            for x, y in loader:
                got.append((x, y))  # read only after the loop: the device's stream would wait for the copy

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        t.join(30)
        if t.is_alive():
            loader._proc.kill()
            t.join(10)
            pytest.fail(f"the loop stalled after {len(got)} of {len(loader)} batches")
    assert len(got) == len(loader) == 24
    data = b"".join(x.tobytes() for x, _ in got)
    labels = b"".join(y.astype(np.int32).tobytes() for _, y in got)
    assert (data, labels) == want, "a slab went back to pipe before its copy had read it"


class _FakeCuda:
    """What _CudaCopier calls of torch.cuda, recording which device is
    current at each CUDA runtime call."""

    def __init__(self):
        self.current = 0
        self.calls = []

    def is_available(self):
        return True

    def device(self, d):
        cuda = self

        class _Device:
            def __enter__(self):
                self.prev, cuda.current = cuda.current, d.index
                return self

            def __exit__(self, *exc):
                cuda.current = self.prev

        return _Device()

    def Stream(self, d):
        self.calls.append(("Stream", d.index, self.current))
        return object()

    def cudart(self):
        return self

    def cudaHostRegister(self, ptr, size, flags):
        self.calls.append(("cudaHostRegister", size, self.current))
        return 0

    def cudaHostUnregister(self, ptr):
        self.calls.append(("cudaHostUnregister", self.current))
        return 0


class _FakeTorch:
    def __init__(self):
        import torch

        self.device = torch.device  # constructs "cuda:1" without a GPU
        self.cuda = _FakeCuda()


def test_ring_is_registered_on_the_devices_gpu():
    """cudaHostRegister runs with device='s GPU current (it ran on the
    current one: every rank would make a context on GPU 0), and so does the
    unregister; the current device is left as it was."""
    pytest.importorskip("torch")
    torch = _FakeTorch()
    mm = mmap.mmap(-1, 1 << 16)
    copier = pipefeed._cuda.CudaCopier(torch, "cuda:1", mm, pin_memory=True)
    assert ("cudaHostRegister", 1 << 16, 1) in torch.cuda.calls, torch.cuda.calls
    assert torch.cuda.current == 0
    copier.close()
    assert torch.cuda.calls[-1] == ("cudaHostUnregister", 1), torch.cuda.calls
    assert torch.cuda.current == 0


def test_device_refused_before_pipe_starts(pipe_bin, write_pipe, monkeypatch):
    """A device= that cannot be used (not CUDA, or no GPU) is refused before
    pipe starts."""
    pytest.importorskip("torch")
    procs = _spy_popen(monkeypatch)
    with pytest.raises(ValueError, match="want a CUDA device"):
        pipefeed.Loader(write_pipe(recipe()), pipe_bin=pipe_bin, device="cpu")
    assert procs == []


def test_no_pipe_left_when_the_device_fails(pipe_bin, write_pipe, monkeypatch):
    """A failure setting up the device once pipe runs (cudaHostRegister
    failing, say) stops pipe: it was left running."""
    pytest.importorskip("torch")

    class _Failing:
        def __init__(self, *args):
            raise RuntimeError("cudaHostRegister of the ring failed: 2")

    monkeypatch.setattr(pipefeed._loader, "CudaCopier", _Failing)
    monkeypatch.setattr(pipefeed._loader, "check_device", lambda torch, device: None)
    procs = _spy_popen(monkeypatch)
    with pytest.raises(RuntimeError, match="cudaHostRegister"):
        pipefeed.Loader(write_pipe(recipe()), pipe_bin=pipe_bin, device="cuda:0")
    assert len(procs) == 1
    try:
        procs[0].wait(timeout=2)
    except subprocess.TimeoutExpired:
        procs[0].kill()
        pytest.fail("pipe feed was left running")
