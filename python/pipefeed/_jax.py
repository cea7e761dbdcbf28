"""jax.Array batches, for Loader(framework="jax"): each batch placed on a
device or a sharding straight from its slab, and the rank and world of a
multi-process JAX job."""

import numpy as np


def process_rank(jax):
    """(rank, world) of a multi-process JAX job (jax.process_index() and
    jax.process_count()), or (None, None) in a single process: then the
    launcher's environment or the file decides, as for the other
    frameworks."""
    if jax.process_count() > 1:
        return jax.process_index(), jax.process_count()
    return None, None


def check_placement(jax, device, sharding):
    """Raise if device= and sharding= cannot place jax batches (before pipe
    starts): device= must be a jax.Device, sharding= a NamedSharding or a
    SingleDeviceSharding (the labels follow its split of the batch axis),
    and not both."""
    if device is not None and sharding is not None:
        raise ValueError("device= and sharding= together: a device is sharding=jax.sharding.SingleDeviceSharding(device)")
    if device is not None and not isinstance(device, jax.Device):
        raise ValueError(f"device={device!r} with framework='jax': want a jax.Device, such as jax.local_devices()[0] "
                         "(or sharding= to split batches across devices)")
    named = jax.sharding.NamedSharding, jax.sharding.SingleDeviceSharding
    if sharding is not None and not isinstance(sharding, named):
        raise ValueError(f"sharding={sharding!r}: want a jax.sharding.NamedSharding (or a SingleDeviceSharding)")


class Placer:
    """Places host batches as jax.Arrays on one device (device=, by default
    the first local one) or across a sharding (sharding=), the loader's
    copier for framework="jax".

    A batch is read straight from its slab: on a GPU or TPU the transfer to
    the device is the only copy. XLA's CPU client instead aliases aligned
    host memory, so a batch placed on CPU devices would be the slab itself,
    which pipe reuses; there the placed shards that alias the ring are
    copied once, on their devices, into memory of their own. Either way
    the arrays are the caller's and ready when yielded, and the slab goes
    back to pipe when the next batch is asked for (nothing reads it then).

    In a multi-process job (a sharding over devices of several processes)
    each process's batch is its share of the global array
    (jax.make_array_from_process_local_data): the loader's rank and world
    default to jax.process_index() and jax.process_count() for that."""

    def __init__(self, jax, device, sharding, mm, h):
        self._jax = jax
        if sharding is None:
            sharding = jax.sharding.SingleDeviceSharding(device or jax.local_devices()[0])
        self.sharding = sharding
        # The labels' and the other fields' sharding: split along the
        # image's batch axis, whole along their others.
        self._labels = sharding
        if isinstance(sharding, jax.sharding.NamedSharding):
            batch_axis = sharding.spec[:1]
            self._labels = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*batch_axis),
                                                      memory_kind=sharding.memory_kind)
        base = np.frombuffer(mm, dtype=np.uint8)
        self._ring = (base.ctypes.data, base.ctypes.data + len(mm))
        # Only memory on the host can alias the ring; asking a GPU array
        # for its address could wait for its transfer.
        self._host = any(d.platform == "cpu" for d in sharding.device_set) or str(sharding.memory_kind).endswith("host")
        if sharding.is_fully_addressable:
            self._check(h)
        tensor = [r for r in (h.get("fields") or {}).get("regions", ()) if r["kind"] == "tensor"]
        if tensor and tensor[0]["dtype"] == "int64" and not jax.config.jax_enable_x64:
            raise ValueError("the pipeline's int64 tensor field would be cut to JAX's int32: set jax_enable_x64 "
                             "(jax.config.update('jax_enable_x64', True)), or tensor_dtype=int32 on the fields stage")

    def _check(self, h):
        """Raise if the sharding cannot split a full batch, or the epoch's
        last one, of hello h: better now than an epoch later."""
        c, hh, w = h["shape"]
        per = (c, hh, w) if h["layout"] == "nchw" else (hh, w, c)
        rows = h["batch"]
        last = h["samples"] - (h["batches"] - 1) * rows if h["batches"] else rows
        for n in sorted({rows, last}):
            try:
                self.sharding.shard_shape((n,) + per)
                self._labels.shard_shape((n,))
            except ValueError as e:
                which = "a batch" if n == rows else "the last batch of each epoch"
                fix = "a batch size it divides" if n == rows else "drop_last=true on the batch stage"
                raise ValueError(f"sharding= cannot split {which}, of {n} samples: {e}; choose {fix}") from None

    def copy(self, batch):
        """Place the arrays of batch (a dict of views of a slab: the image
        across the sharding, the label and the other fields split along its
        batch axis) and wait until they are ready: the slab may be reused
        once copy returns. Waiting later would be a wait on the caller's
        arrays, which a loop may delete or donate to a step before it asks
        for the next batch (and is_ready() of a deleted array crashed the
        process). The arrays, in a dict of the same keys, and the loader's
        event for the placement, done."""
        place = self._jax.make_array_from_process_local_data
        out = {k: place(self.sharding if k == "image" else self._labels, a) for k, a in batch.items()}
        if self._host:
            out = {k: self._own(a) for k, a in out.items()}
        for a in out.values():
            a.block_until_ready()
        return out, _PLACED

    def _own(self, a):
        """a, with every shard that aliases the ring copied on its device."""
        lo, hi = self._ring
        shards = [s.data for s in a.addressable_shards]
        aliased = [lo <= s.unsafe_buffer_pointer() < hi for s in shards]
        if not any(aliased):
            return a
        own = [s.copy() if al else s for s, al in zip(shards, aliased)]
        return self._jax.make_array_from_single_device_arrays(a.shape, a.sharding, own)

    def close(self):
        """Nothing to free: the arrays are the caller's."""


class _Placed:
    """A placement that completed in Placer.copy, as the loader's
    bookkeeping asks of a copy in flight (torch.cuda.Event's query and
    synchronize)."""

    def query(self):
        return True

    def synchronize(self):
        """Done already."""


_PLACED = _Placed()
