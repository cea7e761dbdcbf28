"""Copies of batches to a CUDA device, for Loader(device=...)."""

import numpy as np


def check_device(torch, device):
    """Raise if device= cannot be used: not a CUDA device, or none there."""
    if torch.device(device).type != "cuda":
        raise ValueError(f"device={device!r}: want a CUDA device (for the CPU, leave device= out)")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r}, but torch sees no CUDA device")


class CudaCopier:
    """Copies host batches to one GPU on a side stream of its own, from the
    ring registered with CUDA (page-locked, in place) when pin_memory. Its
    CUDA calls run with that GPU current, whichever is current otherwise:
    registering the ring from another would make a context there (on GPU 0
    for every rank)."""

    def __init__(self, torch, device, mm, pin_memory):
        self._torch = torch
        self.device = torch.device(device)
        self._pinned = None
        with torch.cuda.device(self.device):
            self._stream = torch.cuda.Stream(self.device)
            if pin_memory:
                base = np.frombuffer(mm, dtype=np.uint8)
                err = torch.cuda.cudart().cudaHostRegister(base.ctypes.data, len(mm), 0)
                if int(err) != 0:
                    raise RuntimeError(f"cudaHostRegister of the {len(mm)}-byte ring on {self.device} failed: {err}")
                self._pinned = base.ctypes.data

    def copy(self, batch):
        """Start copying the host tensors of batch (a dict: the image, the
        label, the other fields) to the device: the device tensors, in a
        dict of the same keys, which the current stream waits for, and an
        event that completes with the copies, after which the host's may be
        reused."""
        torch = self._torch
        out = {}
        with torch.cuda.stream(self._stream):
            for k, t in batch.items():
                out[k] = torch.empty(t.shape, dtype=t.dtype, device=self.device)
                out[k].copy_(t, non_blocking=self._pinned is not None)
            ev = torch.cuda.Event()
            ev.record(self._stream)
        current = torch.cuda.current_stream(self.device)
        current.wait_event(ev)
        for t in out.values():
            t.record_stream(current)
        return out, ev

    def close(self):
        if self._pinned is not None:
            with self._torch.cuda.device(self.device):
                self._torch.cuda.cudart().cudaHostUnregister(self._pinned)
            self._pinned = None
