"""The ring: the shared memory pipe writes batches into, a slab each."""

import mmap

import numpy as np

from . import _protocol as proto
from ._errors import PipeError

DTYPES = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8}

# The dtypes of the fields (package fields' names), and the key of the
# counts of the fields that have them (classes share the boxes').
FIELD_DTYPES = {"uint8": np.uint8, "uint16": np.uint16, "int32": np.int32, "int64": np.int64, "float32": np.float32}
COUNTS = {"boxes": "num_boxes", "tokens": "num_tokens"}


class Ring:
    """The ring of hello h, mapped from fd: its header checked against the
    hello, and each slab's batch and labels as arrays (torch tensors when
    torch is given) that view the shared memory without a copy (x, y); with
    a fields stage, also each slab's fields as a dict of such views keyed
    by field name, the image's and the label's among them (fields; None
    without one), which batch() slices to a batch's samples."""

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
        self.fields = None
        if h.get("fields") is not None:
            self._torch, self._widen = torch, False
            self.fields = [self._field_views(h["fields"], offset + i * stride, rows, labels, i, torch)
                           for i in range(slabs)]

    def _field_views(self, f, at, rows, labels, slab, torch):
        """The fields of the slab at byte at, as views keyed by name in the
        schema's order, each region's counts after it: "image" and
        "label" are the slab's x and y, the others from their regions,
        which must end before the labels (at labels)."""
        regions = {r["kind"]: r for r in f["regions"]}
        views = {}
        for name in f["names"]:
            if name == "image":
                views[name] = self.x[slab]
                continue
            if name == "label":
                views[name] = self.y[slab]
                continue
            r = regions.get(name)
            if r is None or r["dtype"] not in FIELD_DTYPES:
                raise PipeError(f"pipe's hello has the field {name!r} without a region pipefeed can read: "
                                "install the pipe and pipefeed of one release")
            dtype = np.dtype(FIELD_DTYPES[r["dtype"]])
            shape = tuple(r["shape"])
            views[name] = self._view(f"the {name} field", dtype, rows, shape, f["offset"] + r["offset"], labels, at, torch)
            if r["counts"] >= 0 and name in COUNTS:
                views[COUNTS[name]] = self._view(f"the {name} counts", np.dtype(np.int32), rows, (),
                                                 f["offset"] + r["counts"], labels, at, torch)
        return views

    def _view(self, what, dtype, rows, shape, start, labels, at, torch):
        """rows values of shape and dtype from byte start of the slab at
        byte at, which must end by its labels: a view of the ring, a torch
        tensor where torch is given and has the dtype (uint16 needs torch
        2.3; before it the field is widened to int32 per batch, in batch)."""
        count = rows * int(np.prod(shape, dtype=np.int64))
        if start < 0 or start + count * dtype.itemsize > labels:
            raise PipeError(f"pipe's hello puts {what} at bytes {start}..{start + count * dtype.itemsize} of a slab "
                            f"whose labels start at {labels}")
        a = np.frombuffer(self.mm, dtype=dtype, count=count, offset=at + start).reshape((rows,) + shape)
        if torch is None:
            return a
        try:
            return torch.from_numpy(a)
        except TypeError:
            self._widen = True
            return a

    def batch(self, slab, n):
        """The fields of slab's batch of n samples, in a dict of the
        caller's own (changing it leaves the slab's views be): each view cut
        to n rows, a uint16 one widened to an int32 tensor where torch
        lacks uint16."""
        views = self.fields[slab]
        views = dict(views) if n == len(views["image"]) else {k: v[:n] for k, v in views.items()}
        if self._widen:
            views = {k: self._torch.from_numpy(v.astype(np.int32)) if isinstance(v, np.ndarray) else v
                     for k, v in views.items()}
        return views

    def close(self):
        """Unmap the ring; a view the caller still holds keeps it mapped."""
        self.x = self.y = self.fields = None
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # the caller still holds a view: the mapping goes with it
            self.mm = None
