"""Reading COCO-style detection shards through pipefeed.

Each sample of a WebDataset shard is an image (x.jpg) and its annotations
(x.json), as COCO holds them: boxes as [x, y, width, height] in pixels and
a category id per box. The fields stage names them; pipe decodes each image,
crops and flips it, moves its boxes with it (clipped to the crop, dropped
when less than min_area pixels remain), and each batch arrives as a dict:

    b["image"]      uint8 [N, 3, 128, 128]
    b["boxes"]      float32 [N, 8, 4]   (COCO's xywh, in pixels of the crop)
    b["num_boxes"]  int32 [N]           (the boxes of each sample; the rest are zeros)
    b["classes"]    int64 [N, 8]

    PIPE_BIN=/path/to/pipe python examples/python/detection.py [SHARDS_DIR]

Without a directory it first writes four shards of generated images (shapes
of a colour per class on noise) to a temporary one, and checks that every
box pipe hands back covers the pixels of its shape's colour.
"""

import io
import json
import os
import sys
import tarfile
import tempfile
import time

import numpy as np
from PIL import Image, ImageDraw

import pipefeed

COLOURS = {1: (250, 40, 40), 2: (40, 250, 40), 3: (40, 40, 250), 4: (250, 250, 40), 5: (250, 40, 250)}

PIPE = """\
source      webdataset path={dir}/shard-*.tar
fields      image boxes classes box_format=xywh max_boxes=8 min_area=16
decode
shuffle     seed=1
random_resized_crop 128 scale=0.5,1
flip        horizontal
batch       16
to_tensor   layout=nchw dtype=uint8
"""


def write_shards(dir, shards=4, per_shard=40):
    rng = np.random.default_rng(0)
    for s in range(shards):
        with tarfile.open(os.path.join(dir, f"shard-{s}.tar"), "w") as tar:
            for i in range(per_shard):
                w, h = int(rng.integers(140, 220)), int(rng.integers(110, 180))
                img = Image.fromarray(rng.integers(90, 150, (h, w, 3), dtype=np.uint8))
                draw = ImageDraw.Draw(img)
                boxes, classes = [], []
                for _ in range(int(rng.integers(1, 5))):
                    c = int(rng.integers(1, 6))
                    bw, bh = int(rng.integers(20, 60)), int(rng.integers(20, 60))
                    x, y = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
                    draw.rectangle([x, y, x + bw - 1, y + bh - 1], fill=COLOURS[c])
                    boxes.append([x, y, bw, bh])
                    classes.append(c)
                jpg = io.BytesIO()
                img.save(jpg, "JPEG", quality=95)
                ann = json.dumps({"boxes": boxes, "classes": classes}).encode()
                for name, data in ((f"{s:02d}{i:04d}.jpg", jpg.getvalue()), (f"{s:02d}{i:04d}.json", ann)):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def covered(image, box, cls):
    """The share of the pixels inside box (xywh) of cls's colour. Shapes
    drawn later may cover part of an earlier one, so this is a lower bound
    of what a right box shows, not an equality."""
    x, y, w, h = (int(round(v)) for v in box)
    if w <= 0 or h <= 0:
        return 0.0
    patch = image[:, y:y + h, x:x + w].astype(np.int32)
    want = np.array(COLOURS[cls], dtype=np.int32)[:, None, None]
    return float(np.mean(np.all(np.abs(patch - want) < 60, axis=0)))


def main():
    generated = len(sys.argv) < 2
    tmp = tempfile.TemporaryDirectory()
    dir = tmp.name if generated else sys.argv[1]
    if generated:
        write_shards(dir)
    pipe = os.path.join(tmp.name, "detection.pipe")
    with open(pipe, "w") as f:
        f.write(PIPE.format(dir=dir))
    boxes = samples = 0
    shares = []
    t0 = time.perf_counter()
    with pipefeed.Loader(pipe, framework="numpy") as loader:
        for b in loader:
            n = b["num_boxes"]
            samples += len(n)
            for k in range(len(n)):
                for j in range(int(n[k])):
                    box, cls = b["boxes"][k, j], int(b["classes"][k, j])
                    x, y, w, h = box
                    assert 0 <= x and 0 <= y and x + w <= 128.001 and y + h <= 128.001, box
                    assert w * h >= 16 and cls in COLOURS, (box, cls)
                    shares.append(covered(b["image"][k], box, cls))
                    boxes += 1
    dt = time.perf_counter() - t0
    print(f"{samples} images, {boxes} boxes in {dt:.2f} s ({samples / dt:.0f} images/s)")
    if generated:
        good = np.mean(np.array(shares) > 0.5)
        print(f"{100 * good:.1f}% of the boxes are mostly their shape's colour")
        if good < 0.9:
            sys.exit("the boxes do not follow the images")


if __name__ == "__main__":
    main()
