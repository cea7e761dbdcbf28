"""Pillow and torchvision references for pipe's ImageNet figures, over the
real ImageNet sample in ../shared/data/imagenet-sample (100 JPEGs at their
original sizes).

    /usr/bin/python3 bench/torch/imagenet.py decode              # Pillow decode, one core
    /usr/bin/python3 bench/torch/imagenet.py loader --workers 2  # the training recipe, DataLoader
    /usr/bin/python3 bench/torch/imagenet.py loader --randaugment  # the recipe with RandAugment(2, 9)
    /usr/bin/python3 bench/torch/imagenet.py seg --workers 2     # image + mask, a joint transform
    python3 bench/torch/imagenet.py seg --v2                     # the same with transforms.v2 (torchvision >= 0.16)

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
    aug = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
    if args.randaugment:
        aug.append(T.RandAugment(num_ops=2, magnitude=9))
    tf = T.Compose(aug + [T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

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
    what = "torchvision DataLoader, %d workers" % args.workers
    if args.randaugment:
        what += ", RandAugment(2, 9)"
    print(json.dumps({"what": what, "images": n, "images_per_sec": n / dt}))


def mask_of(w, h, i):
    """The synthetic mask the segmentation benchmarks give image i of w×h:
    class 0, with two rectangles of classes 1 + i % 20 and 21 + i % 20, as
    BenchmarkSegmentation writes them."""
    import numpy as np

    m = np.zeros((h, w), dtype=np.uint8)
    m[h // 4: h // 2, w // 4: w // 2] = 1 + i % 20
    m[h // 2: 3 * h // 4, w // 3: 5 * w // 6] = 21 + i % 20
    return Image.fromarray(m, mode="L")


def seg(args):
    """The segmentation recipe as torchvision 0.14 users write it (its
    transforms.v2 came later): one RandomResizedCrop draw and one flip
    applied to the image (bilinear) and its mask (nearest), the image
    normalized, the mask as int64."""
    import random
    import tempfile

    import numpy as np
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from torch.utils.data import DataLoader, Dataset

    items = samples()
    tmp = tempfile.mkdtemp()
    masks = []
    for i, (p, _) in enumerate(items):
        with Image.open(p) as im:
            w, h = im.size
        q = os.path.join(tmp, "%d.png" % i)
        mask_of(w, h, i).save(q)
        masks.append(q)
    rrc = T.RandomResizedCrop(224)
    norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])

    class Sample(Dataset):
        def __len__(self):
            return len(items) * args.rounds

        def __getitem__(self, i):
            k = i % len(items)
            with Image.open(items[k][0]) as im, Image.open(masks[k]) as mk:
                img, mask = im.convert("RGB"), mk.copy()
            top, left, h, w = rrc.get_params(img, rrc.scale, rrc.ratio)
            img = F.resized_crop(img, top, left, h, w, [224, 224], T.InterpolationMode.BILINEAR)
            mask = F.resized_crop(mask, top, left, h, w, [224, 224], T.InterpolationMode.NEAREST)
            if random.random() < 0.5:
                img, mask = F.hflip(img), F.hflip(mask)
            return norm(F.to_tensor(img)), torch.as_tensor(np.array(mask), dtype=torch.int64)

    what = "torchvision %s joint image+mask transform" % __import__("torchvision").__version__
    if args.v2:
        # torchvision ≥ 0.16: the transforms move a Mask with its image.
        from torchvision import tv_tensors
        from torchvision.transforms import v2

        tf = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                         v2.ToImage(), v2.ToDtype({tv_tensors.Image: torch.float32, "others": None}, scale=True),
                         v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        what = "torchvision %s transforms.v2 (image, Mask)" % __import__("torchvision").__version__

        class Sample(Dataset):  # noqa: F811 - the v2 form of the same samples
            def __len__(self):
                return len(items) * args.rounds

            def __getitem__(self, i):
                k = i % len(items)
                with Image.open(items[k][0]) as im, Image.open(masks[k]) as mk:
                    img, mask = im.convert("RGB"), tv_tensors.Mask(torch.as_tensor(np.array(mk), dtype=torch.int64))
                return tf(img, mask)

    torch.set_num_threads(1)
    dl = DataLoader(Sample(), batch_size=64, shuffle=True, num_workers=args.workers, drop_last=False)
    n = 0
    first = True
    for x, m in dl:
        if first:
            t0, first = time.perf_counter(), False
            continue
        n += x.shape[0]
    dt = time.perf_counter() - t0
    print(json.dumps({"what": "%s, DataLoader, %d workers" % (what, args.workers), "images": n, "images_per_sec": n / dt}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["decode", "loader", "seg"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--randaugment", action="store_true")
    ap.add_argument("--v2", action="store_true", help="seg with torchvision.transforms.v2 (torchvision >= 0.16)")
    args = ap.parse_args()
    {"decode": decode, "loader": loader, "seg": seg}[args.mode](args)


if __name__ == "__main__":
    main()
