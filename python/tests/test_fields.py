"""pipefeed's batches of a pipeline with a fields stage: dicts keyed by
field name, each a view of the shared memory where the hello says it lies,
holding what pipe bench --checksum hashes (every region and count). The
synthetic source makes fields of every kind; an image folder's masks come
from PNG files. The ring's views are also checked on a ring written here,
field by field."""

import mmap
import os
import struct

import numpy as np
import pytest

import pipefeed
from pipefeed import _protocol
from pipefeed._ring import Ring
from test_loader import bench_sums
from xxh64 import xxh64

KEYS = ["image", "mask", "boxes", "num_boxes", "classes", "label", "labels", "tokens", "num_tokens", "tensor"]


def every(tensor_dtype="int64", n=300):
    """A pipeline of the synthetic source with a field of every kind."""
    return (pipefeed.Pipeline()
            .source("synthetic", n=n, seed=3)
            .fields("image", "mask", "boxes", "classes", "label", "labels", "tokens", "tensor", max_boxes=4,
                    min_area=4, num_labels=10, max_tokens=6, tensor_dtype=tensor_dtype, tensor_shape=(2, 3))
            .shuffle(42)
            .random_crop(32, pad=4, fill="zero")
            .flip("horizontal")
            .batch(32)
            .to_tensor(dtype="uint8"))


def copies(loader):
    """One epoch's batches, copied out of the ring as numpy arrays."""
    return [{k: np.array(v) for k, v in b.items()} for b in loader]


def fields_checksum(info, batches):
    """pipe's Checksum of a stream of field dicts (numpy): the images, the
    labels as int32, and each sample's fields, every region's values then
    its count."""
    counts = {"boxes": "num_boxes", "classes": "num_boxes", "tokens": "num_tokens"}
    data, labels, fields = [], [], []
    for b in batches:
        data.append(b["image"].tobytes())
        if "label" in b:
            labels.append(b["label"].astype(np.int32).tobytes())
        for k in range(len(b["image"])):
            for r in info["fields"]["regions"]:
                fields.append(b[r["kind"]][k].tobytes())
                if r["counts"] >= 0:
                    fields.append(b[counts[r["kind"]]][k].tobytes())
    combined = struct.pack(">QQQ", xxh64(b"".join(data)), xxh64(b"".join(labels)), xxh64(b"".join(fields)))
    return "%016x" % xxh64(combined)


def check_padding(batches):
    """What the counts leave out is zeros; boxes lie in the 32x32 image."""
    for b in batches:
        for k, n in enumerate(b["num_boxes"]):
            assert (b["boxes"][k, n:] == 0).all() and (b["classes"][k, n:] == 0).all()
            assert ((b["boxes"][k, :n] >= 0) & (b["boxes"][k, :n] <= 32)).all() and (b["classes"][k, :n] > 0).all()
        for k, n in enumerate(b["num_tokens"]):
            assert (b["tokens"][k, n:] == 0).all()


def test_every_field_of_the_synthetic_source(pipe_bin, write_pipe):
    """The synthetic source's fields of every kind (its rectangles as a
    mask and as boxes with their classes, moved by the crop and the flip,
    and the rest) come out of the loader as pipe's own stream, for two
    epochs and three workers: pipe bench --checksum hashes every region
    and count."""
    sums = bench_sums(pipe_bin, write_pipe(str(every())), 2)
    with pipefeed.Loader(every(), framework="numpy", workers=3, pipe_bin=pipe_bin) as ld:
        assert ld.info["fields"]["names"] == ["image", "mask", "boxes", "classes", "label", "labels", "tokens", "tensor"]
        for epoch in range(2):
            batches = copies(ld)
            assert len(batches) == len(ld) == 10
            assert fields_checksum(ld.info, batches) == sums[epoch], f"epoch {epoch}"
    assert all(list(b) == KEYS for b in batches)
    shapes = {"image": (3, 32, 32), "mask": (32, 32), "boxes": (4, 4), "num_boxes": (), "classes": (4,), "label": (),
              "labels": (10,), "tokens": (6,), "num_tokens": (), "tensor": (2, 3)}
    dtypes = {"image": "uint8", "mask": "uint8", "boxes": "float32", "num_boxes": "int32", "classes": "int64",
              "label": "int64", "labels": "float32", "tokens": "int32", "num_tokens": "int32", "tensor": "int64"}
    for b in batches:
        n = len(b["image"])
        assert {k: v.shape for k, v in b.items()} == {k: (n,) + s for k, s in shapes.items()}
        assert {k: str(v.dtype) for k, v in b.items()} == dtypes
    assert [len(b["image"]) for b in batches] == [32] * 9 + [12]
    check_padding(batches)
    assert sum(int(b["num_boxes"].sum()) for b in batches) > 300, "hardly a box"


def test_without_a_label(pipe_bin):
    """A schema without the int label yields no "label"; the dict follows
    the schema's order, the kinds' (a fields line in another order is the
    same schema)."""
    p = (pipefeed.Pipeline().source("synthetic", n=100, seed=3)
         .fields("image", "tokens", "tensor", "labels", num_labels=10, max_tokens=6, tensor_shape=4).batch(32))
    with pipefeed.Loader(p, framework="numpy", pipe_bin=pipe_bin) as ld:
        keys = [list(b) for b in ld]
    assert keys == [["image", "labels", "tokens", "num_tokens", "tensor"]] * 4


def test_torch_fields_are_views_until_the_next(pipe_bin):
    torch = pytest.importorskip("torch")
    with pipefeed.Loader(every(), framework="numpy", pipe_bin=pipe_bin) as ld:
        want = copies(ld)
    with pipefeed.Loader(every(), pipe_bin=pipe_bin) as ld:
        ring = np.frombuffer(ld._ring.mm, dtype=np.uint8)
        for b, w in zip(ld, want):
            assert list(b) == KEYS
            for k, v in b.items():
                assert isinstance(v, torch.Tensor) and np.shares_memory(v.numpy(), ring), f"{k} is not a view of the ring"
                assert np.array_equal(v.numpy(), w[k]), k
    with pipefeed.Loader(every(), pipe_bin=pipe_bin, copy=True) as ld:
        first = next(iter(ld))
        for k, v in first.items():
            assert not np.shares_memory(v.numpy(), np.frombuffer(ld._ring.mm, dtype=np.uint8)), k
            assert np.array_equal(v.numpy(), want[0][k]), k


def test_a_changed_batch_leaves_the_next_be(pipe_bin):
    """A loop may change the dict it gets (replace a field, delete one):
    the batches after it, in the same slabs, are whole."""
    with pipefeed.Loader(every(), framework="numpy", pipe_bin=pipe_bin) as ld:
        want = copies(ld)
    with pipefeed.Loader(every(), framework="numpy", pipe_bin=pipe_bin) as ld:
        assert ld.info["ring"]["slabs"] < len(ld)
        for b, w in zip(ld, want):
            assert list(b) == KEYS and all(np.array_equal(b[k], w[k]) for k in KEYS)
            b["image"] = b["image"].astype(np.float32)
            del b["tokens"]


def test_resume_mid_epoch_with_fields(pipe_bin):
    def batches(ld, limit=None):
        out = []
        for b in ld:
            out.append({k: v.tobytes() for k, v in b.items()})
            if len(out) == limit:
                break
        return out

    with pipefeed.Loader(every(), framework="numpy", epoch=1, pipe_bin=pipe_bin) as ld:
        whole = batches(ld)
    with pipefeed.Loader(every(), framework="numpy", epoch=1, pipe_bin=pipe_bin) as ld:
        head = batches(ld, 4)
        state = ld.state_dict()
    with pipefeed.Loader(every(), framework="numpy", workers=2, pipe_bin=pipe_bin) as ld:
        ld.load_state_dict(state)
        tail = batches(ld)
    assert len(whole) == 10 and head + tail == whole


def test_copies_of_fields_complete_before_their_slab_returns(pipe_bin):
    """device='s path with simulated copies of 0.05 s (test_device's): every
    field is copied, and no slab goes back to pipe before its copies have
    read it, so each batch's fields are whole."""
    from test_device import _SlowCopier

    with pipefeed.Loader(every(), framework="numpy", pipe_bin=pipe_bin) as ld:
        want = [{k: v.tobytes() for k, v in b.items()} for b in ld]
    with pipefeed.Loader(every(), framework="numpy", pipe_bin=pipe_bin) as ld:
        ld._copier = _SlowCopier(0.05)
        got = list(ld)  # read only after the loop, as a device's stream would
    assert [{k: v.tobytes() for k, v in b.items()} for b in got] == want


def test_cuda_device_fields(pipe_bin):
    """device= copies every field to the GPU, as the numpy framework's
    values (where there is a GPU)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the device= path is tested where a GPU is present")
    with pipefeed.Loader(every(), framework="numpy", pipe_bin=pipe_bin) as ld:
        want = copies(ld)
    for pin in (False, True):
        with pipefeed.Loader(every(), pipe_bin=pipe_bin, device="cuda:0", pin_memory=pin) as ld:
            got = []
            for b in ld:
                assert all(v.device.type == "cuda" for v in b.values())
                got.append({k: v.cpu().numpy() for k, v in b.items()})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert list(g) == KEYS and all(np.array_equal(g[k], w[k]) for k in KEYS), f"pin_memory={pin}"


def image_folder(root, mask_dtype):
    """An image folder of two classes of five PNGs of several sizes, and its
    masks (random class ids of mask_dtype) in the sibling folder masks."""
    from PIL import Image

    rng = np.random.default_rng(0)
    top = 20 if mask_dtype == "uint8" else 1000
    for c in range(2):
        for i in range(5):
            (root / "train" / f"c{c}").mkdir(parents=True, exist_ok=True)
            (root / "masks" / f"c{c}").mkdir(parents=True, exist_ok=True)
            h, w = 30 + i, 40 - i
            Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(root / "train" / f"c{c}" / f"i{i}.png")
            mask = rng.integers(0, top, (h, w)).astype(mask_dtype)
            Image.fromarray(mask).save(root / "masks" / f"c{c}" / f"i{i}.png")
    return root / "train"


@pytest.mark.parametrize("mask_dtype", ["uint8", "uint16"])
def test_masks_from_an_image_folder(pipe_bin, write_pipe, tmp_path, mask_dtype):
    """Masks moved with their images by pipe come out as pipe's own stream
    (pipe bench --checksum hashes them), in numpy and in torch (a uint16
    mask widened to int32 where torch has no uint16)."""
    pytest.importorskip("PIL")
    path = write_pipe(f"source image_folder path={image_folder(tmp_path, mask_dtype)}\n"
                      f"fields image mask label mask_dtype={mask_dtype}\n"
                      "decode\nrandom_resized_crop 24\nflip horizontal\nbatch 4\nto_tensor dtype=uint8\n")
    sums = bench_sums(pipe_bin, path, 2)
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as ld:
        assert ld.info["fields"]["names"] == ["image", "mask", "label"]
        for epoch in range(2):
            batches = [{k: v.copy() for k, v in b.items()} for b in ld]
            assert [list(b) for b in batches] == [["image", "mask", "label"]] * 3
            assert [b["mask"].shape for b in batches] == [(4, 24, 24), (4, 24, 24), (2, 24, 24)]
            assert all(b["mask"].dtype == np.dtype(mask_dtype) for b in batches)
            assert fields_checksum(ld.info, batches) == sums[epoch], f"epoch {epoch}"
    torch = pytest.importorskip("torch")
    with pipefeed.Loader(path, pipe_bin=pipe_bin) as ld:
        got = [b["mask"].clone() for b in ld]
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as ld:
        want_ = [b["mask"].copy() for b in ld]
    assert [m.numpy().astype(np.int64).tolist() for m in got] == [m.astype(np.int64).tolist() for m in want_]
    wide = mask_dtype == "uint16" and not hasattr(torch, "uint16")
    assert got[0].dtype == (torch.int32 if wide else getattr(torch, mask_dtype))


# A ring written here: every kind of field, of a batch of 3 (rows) in two
# slabs; the regions are laid out as pipe lays them out (64-byte aligned,
# each counts array after its values), from byte 4096 of a slab.
ROWS, H, W = 3, 4, 5
REGIONS = [
    ("mask", "uint16", [H, W], False),
    ("boxes", "float32", [2, 4], True),
    ("classes", "int64", [2], True),
    ("labels", "float32", [6], False),
    ("tokens", "int32", [7], True),
    ("tensor", "uint16", [2, 3], False),
]


def _align(n):
    return (n + 63) // 64 * 64


def written_ring(torch=None, names=None, bad=False):
    """A hello and a ring of two slabs of every kind of field whose values
    are their position in the ring (each sample's and slab's differ), with
    Ring's views over it; where bad, the tensor's region runs into the
    labels."""
    itemsize = {"uint16": 2, "float32": 4, "int64": 8, "int32": 4}
    regions, off, box_counts = [], 0, -1
    for kind, dtype, shape, counts in REGIONS:
        r = {"kind": kind, "dtype": dtype, "shape": shape, "offset": off, "counts": -1}
        off = _align(off + ROWS * itemsize[dtype] * int(np.prod(shape)))
        if counts and kind != "classes":
            r["counts"] = off
            off = _align(off + 4 * ROWS)
        if kind == "boxes":
            box_counts = r["counts"]
        if kind == "classes":
            r["counts"] = box_counts
        regions.append(r)
    fields_at, sample_bytes = 4096, 3 * 2 * 2
    labels = fields_at + _align(off)
    if bad:
        regions[-1]["offset"] = off
    stride = _align(labels + 8 * ROWS + 4095)
    h = {"shape": [3, 2, 2], "layout": "nchw", "dtype": "uint8", "batch": ROWS, "ahead": 3,
         "ring": {"slabs": 2, "stride": stride, "offset": 4096, "rows": ROWS, "sample_bytes": sample_bytes,
                  "labels": labels, "size": 4096 + 2 * stride},
         "fields": {"schema": "test", "names": names or ["image", "mask", "boxes", "classes", "label", "labels",
                                                         "tokens", "tensor"],
                    "offset": fields_at, "regions": regions}}
    fd = os.memfd_create("test-ring")
    os.ftruncate(fd, h["ring"]["size"])
    mm = mmap.mmap(fd, h["ring"]["size"])
    mm[:56] = _protocol.HEADER.pack(_protocol.MAGIC, _protocol.PROTOCOL, 2, stride, 4096, ROWS, sample_bytes, labels)
    for slab in range(2):
        at = 4096 + slab * stride
        for r in regions:
            dtype = {"uint16": np.uint16, "float32": np.float32, "int64": np.int64, "int32": np.int32}[r["dtype"]]
            n = ROWS * int(np.prod(r["shape"]))
            start = at + fields_at + r["offset"]
            if start + n * np.dtype(dtype).itemsize <= at + labels:
                np.frombuffer(mm, dtype=dtype, count=n, offset=start)[:] = np.arange(n) + 1000 * slab + 100 * r["offset"] % 997
            if r["counts"] >= 0:
                np.frombuffer(mm, dtype=np.int32, count=ROWS, offset=at + fields_at + r["counts"])[:] = [slab + 1, 2, 0]
        np.frombuffer(mm, dtype=np.int64, count=ROWS, offset=at + labels)[:] = [7, 8, 9 + slab]
    mm.close()
    try:
        return h, Ring(fd, h, torch)
    finally:
        os.close(fd)


def test_ring_views_every_kind():
    h, ring = written_ring()
    try:
        b = ring.batch(1, ROWS)
        assert list(b) == ["image", "mask", "boxes", "num_boxes", "classes", "label", "labels", "tokens",
                           "num_tokens", "tensor"]
        shapes = {"image": (3, 3, 2, 2), "mask": (3, H, W), "boxes": (3, 2, 4), "num_boxes": (3,),
                  "classes": (3, 2), "label": (3,), "labels": (3, 6), "tokens": (3, 7), "num_tokens": (3,),
                  "tensor": (3, 2, 3)}
        dtypes = {"image": np.uint8, "mask": np.uint16, "boxes": np.float32, "num_boxes": np.int32,
                  "classes": np.int64, "label": np.int64, "labels": np.float32, "tokens": np.int32,
                  "num_tokens": np.int32, "tensor": np.uint16}
        assert {k: v.shape for k, v in b.items()} == shapes
        assert {k: v.dtype for k, v in b.items()} == {k: np.dtype(d) for k, d in dtypes.items()}
        regions = {r["kind"]: r for r in h["fields"]["regions"]}
        for kind, r in regions.items():
            n = ROWS * int(np.prod(r["shape"]))
            assert b[kind].ravel().tolist() == (np.arange(n) + 1000 + 100 * r["offset"] % 997).astype(b[kind].dtype).tolist(), kind
        assert b["num_boxes"].tolist() == b["num_tokens"].tolist() == [2, 2, 0]
        assert b["label"].tolist() == [7, 8, 10]
        short = ring.batch(0, 2)
        assert all(len(v) == 2 for v in short.values())
        assert short["num_boxes"].tolist() == [1, 2] and short["label"].tolist() == [7, 8]
        assert np.shares_memory(short["mask"], np.frombuffer(ring.mm, dtype=np.uint8))
    finally:
        ring.close()


def test_ring_fields_in_torch():
    """torch tensors view the ring; a uint16 field, which torch before 2.3
    cannot view, comes as an int32 tensor of the same values."""
    torch = pytest.importorskip("torch")
    _, ring = written_ring(torch)
    _, plain = written_ring()
    try:
        b, want_ = ring.batch(1, ROWS), plain.batch(1, ROWS)
        for k, v in b.items():
            assert isinstance(v, torch.Tensor), k
            assert v.numpy().tolist() == want_[k].tolist(), k
        assert b["classes"].dtype == torch.int64 and b["boxes"].dtype == torch.float32
        ring_bytes = np.frombuffer(ring.mm, dtype=np.uint8)
        assert np.shares_memory(b["boxes"].numpy(), ring_bytes)
        if hasattr(torch, "uint16"):
            assert b["mask"].dtype == torch.uint16
        else:
            assert b["mask"].dtype == b["tensor"].dtype == torch.int32
    finally:
        ring.close()
        plain.close()


def test_region_past_the_labels_is_refused():
    with pytest.raises(pipefeed.PipeError, match="the tensor field at bytes .* whose labels start at"):
        written_ring(bad=True)


def test_mixup_gives_soft_targets(pipe_bin):
    """With mixup and no fields stage a batch is (x, targets): each row of
    the targets is λ·onehot(y_i) + (1 − λ)·onehot(y_i−1), one λ a batch,
    and the rows sum to 1; with a fields stage "targets" is a key beside
    "label"."""
    p = pipefeed.Pipeline().source("synthetic", n=96).batch(32).to_tensor(dtype="float32").mixup(alpha=0.4)
    with pipefeed.Loader(p, framework="numpy", pipe_bin=pipe_bin) as loader:
        lambdas = set()
        for x, t in loader:
            assert x.shape == (32, 3, 32, 32) and t.shape == (32, 10) and t.dtype == np.float32
            assert np.allclose(t.sum(axis=1), 1, atol=1e-6)
            top = np.sort(t, axis=1)[:, ::-1]
            lam = top[:, 0][top[:, 1] > 0]
            assert len(lam) > 0 and np.allclose(lam, lam[0]), "one λ a batch"
            lambdas.add(round(float(max(lam[0], 1 - lam[0])), 6))
        assert len(lambdas) == 3, "each batch draws its own λ"
    p = pipefeed.Pipeline().source("synthetic", n=64).fields("image", "label").batch(32).mixup(alpha=0.4)
    with pipefeed.Loader(p, framework="numpy", pipe_bin=pipe_bin) as loader:
        b = next(iter(loader))
        assert list(b) == ["image", "label", "targets"] and b["targets"].shape == (32, 10)
        assert (np.argmax(b["targets"], axis=1) == b["label"]).mean() > 0.4
