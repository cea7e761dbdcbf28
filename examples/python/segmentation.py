"""Semantic segmentation with pipefeed: a batch of a pipeline with a fields
stage is a dict, and the masks move with their images through every crop
and flip.

    PIPE_BIN=/path/to/pipe python3 examples/python/segmentation.py

It draws a small dataset first (an image folder of 48x48 PNGs, one class
folder per shape colour, each image a noisy background with one disk or
square, and beside it a folder of masks holding the shape's class id on its
pixels, 0 elsewhere), then trains a per-pixel classifier on random resized
crops and flips of it, the masks cropped and flipped by pipe with their
images (nearest-neighbour). It prints each epoch's loss and the share of
shape pixels classified right, and fails unless that share ends above 0.8
and the loss went down.
"""

import os
import sys
import tempfile

import numpy as np
import torch
from PIL import Image

import pipefeed

CLASSES = 3  # shape colours; class 0 of a mask is the background
COLOURS = np.array([[220, 40, 40], [40, 200, 60], [50, 80, 230]], dtype=np.int16)


def draw(root, n=300, size=48, seed=0):
    """n images with their masks under root/train and root/masks."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    for i in range(n):
        c = i % CLASSES
        img = rng.integers(60, 180, (size, size, 3)).astype(np.int16)
        r = rng.integers(6, 14)
        cy, cx = rng.integers(r, size - r, 2)
        if rng.random() < 0.5:
            shape = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        else:
            shape = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
        img[shape] = COLOURS[c] + rng.integers(-20, 20, 3)
        mask = np.where(shape, c + 1, 0).astype(np.uint8)
        for sub, a in (("train", img.clip(0, 255).astype(np.uint8)), ("masks", mask)):
            os.makedirs(os.path.join(root, sub, f"c{c}"), exist_ok=True)
            Image.fromarray(a).save(os.path.join(root, sub, f"c{c}", f"{i:04d}.png"))
    return os.path.join(root, "train")


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        p = (pipefeed.Pipeline()
             .source("image_folder", path=draw(root))
             .fields("image", "mask", "label")  # the masks: the sibling folder "masks"
             .decode()
             .shuffle(1)
             .random_resized_crop(32, scale=(0.3, 1))
             .flip("horizontal")
             .normalize(mean=0.5, std=0.25)
             .batch(50)
             .to_tensor(dtype="float32"))
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.Conv2d(16, CLASSES + 1, 1))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        losses = []
        with pipefeed.Loader(p) as loader:
            for epoch in range(8):
                total, right, shape = 0.0, 0, 0
                for b in loader:  # {"image": [50, 3, 32, 32], "mask": uint8 [50, 32, 32], "label": [50]}
                    target = b["mask"].long()
                    logits = model(b["image"])
                    loss = torch.nn.functional.cross_entropy(logits, target)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += float(loss) * len(target)
                    on = target > 0
                    right += int((logits.argmax(1)[on] == target[on]).sum())
                    shape += int(on.sum())
                losses.append(total / loader.info["samples"])
                print(f"epoch {epoch}: loss {losses[-1]:.3f}, shape pixels right {right / shape:.3f}")
    if not (right / shape > 0.8 and losses[-1] < losses[0]):
        sys.exit(f"did not learn: shape pixels right {right / shape:.3f}, loss {losses[0]:.3f} → {losses[-1]:.3f}")


if __name__ == "__main__":
    main()
