"""pipefeed against torchvision's DataLoader, feeding the same minimal loop
(each batch is read whole, as a training step would: x.sum()).

    /usr/bin/python3 bench/torch/feed.py cifar-dataloader --workers 2
    /usr/bin/python3 bench/torch/feed.py cifar-pipefeed
    /usr/bin/python3 bench/torch/feed.py imagenet-dataloader --workers 2
    /usr/bin/python3 bench/torch/feed.py imagenet-pipefeed
    /usr/bin/python3 bench/torch/feed.py handover       # Python CPU time per batch
    /usr/bin/python3 bench/torch/feed.py memory         # RSS of both processes over epochs

The CIFAR recipe: real CIFAR-10 (../shared/data/cifar10), pad-4 reflect
crop, flip, normalise, float32 NCHW, batch 256. The ImageNet recipe: the
100-image sample (../shared/data/imagenet-sample), decode,
random_resized_crop 224, flip, normalise, batch 64. pipefeed needs the pipe
command (PIPE_BIN or PATH) and the package (python/ on sys.path here).
Prints one JSON line. For benchmarks only; never a dependency of pipe.
"""
import argparse
import io
import json
import os
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(REPO, "..", "shared", "data")
CIFAR = os.path.join(SHARED, "cifar10", "cifar-10-binary.tar.gz")
IMAGENET = os.path.join(SHARED, "imagenet-sample")
sys.path.insert(0, os.path.join(REPO, "python"))

CIFAR_PIPE = f"""source      cifar10 path={CIFAR} split=train
shuffle     seed=42
random_crop size=32 pad=4 fill=reflect
flip        horizontal p=0.5
normalize   mean=0.4914,0.4822,0.4465 std=0.2470,0.2435,0.2616
batch       256
to_tensor   layout=nchw dtype=float32
"""

IMAGENET_PIPE = f"""source      image_folder path={IMAGENET} labels={IMAGENET}/labels.csv
decode
shuffle     seed=42
random_resized_crop 224 scale=0.08,1 ratio=0.75,1.3333333333333333 interpolation=bilinear
flip        horizontal p=0.5
normalize   mean=0.485,0.456,0.406 std=0.229,0.224,0.225
batch       64
to_tensor   layout=nchw dtype=float32
"""


def pipe_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".pipe", delete=False)
    f.write(text)
    f.close()
    return f.name


def consume(batches, epochs, touch=True):
    """The minimal loop: read every batch whole (or, with touch False, take
    it and nothing more). Returns images and seconds."""
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for x, y in batches():
            if touch:
                x.sum()
            n += len(y)
    return n, time.perf_counter() - t0


def cifar_arrays():
    xs, ys = [], []
    with tarfile.open(CIFAR) as tar:
        for m in tar.getmembers():
            if "data_batch" in m.name:
                raw = np.frombuffer(tar.extractfile(m).read(), dtype=np.uint8).reshape(-1, 3073)
                ys.append(raw[:, 0].astype(np.int64))
                xs.append(raw[:, 1:].reshape(-1, 3, 32, 32))
    return np.concatenate(xs), np.concatenate(ys)


def cifar_dataloader(args):
    import torch
    import torchvision.transforms as T
    from torch.utils.data import DataLoader, Dataset

    x, y = cifar_arrays()
    x = torch.from_numpy(x)
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).view(3, 1, 1)
    tf = T.Compose([T.RandomCrop(32, padding=4, padding_mode="reflect"), T.RandomHorizontalFlip()])

    class Sample(Dataset):
        def __len__(self):
            return len(y)

        def __getitem__(self, i):
            return (tf(x[i]).float().div_(255) - mean) / std, int(y[i])

    torch.set_num_threads(1)
    dl = DataLoader(Sample(), batch_size=256, shuffle=True, num_workers=args.workers, pin_memory=args.pin,
                    persistent_workers=args.workers > 0)
    n, dt = consume(lambda: dl, args.epochs)
    return {"what": f"torchvision DataLoader, {args.workers} workers", "images": n, "seconds": dt}


def imagenet_dataloader(args):
    import csv

    import torch
    import torchvision.transforms as T
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    with open(os.path.join(IMAGENET, "labels.csv")) as f:
        items = [(os.path.join(IMAGENET, name), int(label)) for name, label in list(csv.reader(f))[1:]]
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    class Sample(Dataset):
        def __len__(self):
            return len(items)

        def __getitem__(self, i):
            p, label = items[i]
            with Image.open(p) as im:
                return tf(im.convert("RGB")), label

    torch.set_num_threads(1)
    dl = DataLoader(Sample(), batch_size=64, shuffle=True, num_workers=args.workers, pin_memory=args.pin,
                    persistent_workers=args.workers > 0)
    n, dt = consume(lambda: dl, args.epochs)
    return {"what": f"torchvision DataLoader, {args.workers} workers", "images": n, "seconds": dt}


def pipefeed_run(args, text):
    import pipefeed

    with pipefeed.Loader(pipe_file(text), workers=args.workers or None) as loader:
        n, dt = consume(lambda: loader, args.epochs, touch=not args.empty)
        s = loader.stats()
    return {"what": "pipefeed", "images": n, "seconds": dt, "stall_pct": s["stall_pct"],
            "pipe_slab_wait_seconds": s["slab_wait_seconds"]}


def handover(args):
    """Python CPU time per batch with an empty loop body: what the hand-over
    costs the training process (pipe runs in its own)."""
    import pipefeed

    with pipefeed.Loader(pipe_file(CIFAR_PIPE), framework="torch") as loader:
        for _ in loader:  # warm
            pass
        batches = 0
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(args.epochs):
            for _ in loader:
                batches += 1
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"what": "hand-over", "batches": batches, "python_cpu_us_per_batch": 1e6 * cpu / batches,
            "wall_us_per_batch": 1e6 * wall / batches}


def rss(pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def memory(args):
    import pipefeed

    out = []
    with pipefeed.Loader(pipe_file(CIFAR_PIPE)) as loader:
        ring = loader.info["ring"]["size"]
        for e in range(args.epochs):
            for x, y in loader:
                x.sum()
            out.append({"epoch": e, "python_rss_mb": rss() / 1e6, "pipe_rss_mb": rss(loader._proc.pid) / 1e6})
    return {"what": "memory", "ring_mb": ring / 1e6, "epochs": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["cifar-dataloader", "cifar-pipefeed", "imagenet-dataloader", "imagenet-pipefeed",
                                     "handover", "memory"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--pin", action="store_true", help="pin_memory=True for the DataLoader (with a GPU)")
    ap.add_argument("--empty", action="store_true", help="pipefeed: an empty loop body (the hand-over's own throughput)")
    args = ap.parse_args()
    # One thread for the loop's own torch work, in both modes: the data
    # side's workers have the cores (the DataLoader's workers, or pipe's).
    import torch

    torch.set_num_threads(1)
    run = {"cifar-dataloader": cifar_dataloader, "imagenet-dataloader": imagenet_dataloader,
           "cifar-pipefeed": lambda a: pipefeed_run(a, CIFAR_PIPE),
           "imagenet-pipefeed": lambda a: pipefeed_run(a, IMAGENET_PIPE),
           "handover": handover, "memory": memory}[args.mode]
    r = run(args)
    if "seconds" in r:
        r["images_per_sec"] = r["images"] / r["seconds"]
    print(json.dumps(r))


if __name__ == "__main__":
    main()
