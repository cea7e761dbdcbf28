"""The ring: the shared memory pipe writes batches into, a slab each."""

import mmap

import numpy as np

from . import _protocol as proto
from ._errors import PipeError

DTYPES = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8}


class Ring:
    """The ring of hello h, mapped from fd: its header checked against the
    hello, and each slab's batch and labels as arrays (torch tensors when
    torch is given) that view the shared memory without a copy."""

    def __init__(self, fd, h, torch=None):
        ring = h["ring"]
        self.mm = mmap.mmap(fd, ring["size"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            self._views(h, torch)
        except BaseException:
            self.close()
            raise

    def _views(self, h, torch):
        ring = h["ring"]
        magic, ver, slabs, stride, offset, rows, sample_bytes, labels = proto.HEADER.unpack_from(self.mm)
        if magic != proto.MAGIC or ver != proto.PROTOCOL or slabs != ring["slabs"] or stride != ring["stride"]:
            raise PipeError(f"the shared ring's header ({magic!r}, version {ver}) does not match pipe's hello")
        c, hh, w = h["shape"]
        per = (c, hh, w) if h["layout"] == "nchw" else (hh, w, c)
        dtype = DTYPES[h["dtype"]]
        itemsize = np.dtype(dtype).itemsize
        if sample_bytes != c * hh * w * itemsize:
            raise PipeError(f"pipe's samples are {sample_bytes} bytes, {h['dtype']} {per} is {c * hh * w * itemsize}")
        self.x, self.y = [], []
        for i in range(slabs):
            at = offset + i * stride
            x = np.frombuffer(self.mm, dtype=dtype, count=rows * c * hh * w, offset=at).reshape((rows,) + per)
            y = np.frombuffer(self.mm, dtype=np.int64, count=rows, offset=at + labels)
            if torch is not None:
                x, y = torch.from_numpy(x), torch.from_numpy(y)
            self.x.append(x)
            self.y.append(y)

    def close(self):
        """Unmap the ring; a view the caller still holds keeps it mapped."""
        self.x = self.y = None
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # the caller still holds a view: the mapping goes with it
            self.mm = None
