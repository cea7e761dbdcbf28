"""Pillow and torchvision references for pipe's ImageNet figures, over the
real ImageNet sample in ../shared/data/imagenet-sample (100 JPEGs at their
original sizes).

    /usr/bin/python3 bench/torch/imagenet.py decode              # Pillow decode, one core
    /usr/bin/python3 bench/torch/imagenet.py loader --workers 2  # the training recipe, DataLoader

Prints one JSON line with images_per_sec. For side-by-side benchmarks only;
never a dependency of pipe.
"""
import argparse
import csv
import json
import os
import time

from PIL import Image

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "imagenet-sample")


def samples():
    with open(os.path.join(ROOT, "labels.csv")) as f:
        rows = list(csv.reader(f))[1:]
    return [(os.path.join(ROOT, name), int(label)) for name, label in rows]


def decode(args):
    files = [p for p, _ in samples()]
    n = 0
    t0 = time.perf_counter()
    for _ in range(args.rounds):
        for p in files:
            with Image.open(p) as im:
                im.convert("RGB").load()
            n += 1
    dt = time.perf_counter() - t0
    print(json.dumps({"what": "pillow decode " + Image.__version__, "images": n, "images_per_sec": n / dt}))


def loader(args):
    import torch
    import torchvision.transforms as T
    from torch.utils.data import DataLoader, Dataset

    items = samples()
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    class Sample(Dataset):
        def __len__(self):
            return len(items) * args.rounds

        def __getitem__(self, i):
            p, label = items[i % len(items)]
            with Image.open(p) as im:
                return tf(im.convert("RGB")), label

    torch.set_num_threads(1)
    dl = DataLoader(Sample(), batch_size=64, shuffle=True, num_workers=args.workers, drop_last=False)
    n = 0
    first = True
    for x, y in dl:
        if first:  # worker start-up is not throughput
            t0, first = time.perf_counter(), False
            continue
        n += x.shape[0]
    dt = time.perf_counter() - t0
    print(json.dumps({"what": "torchvision DataLoader, %d workers" % args.workers, "images": n, "images_per_sec": n / dt}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["decode", "loader"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    decode(args) if args.mode == "decode" else loader(args)


if __name__ == "__main__":
    main()
