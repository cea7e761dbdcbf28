"""Writes mix.txt: torchvision's MixUp and CutMix (transforms.v2, _augment.py)
on fixed batches with a fixed lambda and CutMix centre.

Run from engine/testdata with Debian's python3-torch (torchvision 0.14 has no
v2, so the v2 formulas are written out here, as _augment.py has them):
    /usr/bin/python3 gen_mix.py > mix.txt
Each case is a line "case OP DTYPE LAYOUT N C H W LAM CX CY K LABELS...",
then for cutmix "box X1 Y1 X2 Y2 LAM_ADJUSTED", then "pixels" and the mixed
batch in the layout as the bits of each value in hex (float32 and float16
bits, uint8 values), then "targets" and the [N, K] float32 targets' bits.
Pixel (n, c, y, x) is (n*53 + c*131 + y*17 + x*7 + y*x) % 256, divided by 255
in float32 (then rounded to float16) for the float dtypes, as mix_test.go
builds it. uint8 has no torchvision counterpart (MixUp needs floats): pipe
blends in float32 and rounds to nearest, halves up, written out here too.
"""
import math

import torch
from torch.nn.functional import one_hot

CASES = [
    # op, dtype, layout, N, C, H, W, lam, cx, cy, K, labels
    ("mixup", "float32", "nchw", 4, 3, 5, 6, 0.3, 0, 0, 3, [1, 0, 2, 1]),
    ("mixup", "float16", "nchw", 4, 3, 5, 6, 0.3, 0, 0, 3, [1, 0, 2, 1]),
    ("mixup", "uint8", "nchw", 3, 3, 4, 5, 0.37, 0, 0, 4, [3, 3, 0]),
    ("cutmix", "float32", "nchw", 4, 3, 5, 6, 0.45, 4, 1, 3, [2, 0, 2, 1]),
    ("cutmix", "float32", "nhwc", 3, 3, 7, 6, 0.2, 0, 6, 5, [4, 1, 1]),
    ("cutmix", "float16", "nchw", 2, 1, 8, 8, 0.6, 3, 3, 2, [0, 1]),
]


def batch(n, c, h, w, dtype):
    v = torch.tensor([[[[(i * 53 + ch * 131 + y * 17 + x * 7 + y * x) % 256 for x in range(w)]
                        for y in range(h)] for ch in range(c)] for i in range(n)], dtype=torch.float32)
    if dtype == "uint8":
        return v.to(torch.uint8)
    v = v / 255
    return v.half() if dtype == "float16" else v


def mixup_label(label, k, lam):
    # _BaseMixUpCutMix._mixup_label
    label = one_hot(label, num_classes=k).float()
    return label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam))


def cutmix_params(lam, cx, cy, h, w):
    # CutMix._get_params with r_x = cx, r_y = cy
    r = 0.5 * math.sqrt(1.0 - lam)
    r_w_half = int(r * w)
    r_h_half = int(r * h)
    x1 = int(torch.clamp(torch.tensor([cx]) - r_w_half, min=0))
    y1 = int(torch.clamp(torch.tensor([cy]) - r_h_half, min=0))
    x2 = int(torch.clamp(torch.tensor([cx]) + r_w_half, max=w))
    y2 = int(torch.clamp(torch.tensor([cy]) + r_h_half, max=h))
    lam_adjusted = float(1.0 - (x2 - x1) * (y2 - y1) / (w * h))
    return (x1, y1, x2, y2), lam_adjusted


def bits(t, dtype):
    t = t.flatten()
    if dtype == "float32":
        return " ".join("%08x" % (v & 0xffffffff) for v in t.view(torch.int32).tolist())
    if dtype == "float16":
        return " ".join("%04x" % (v & 0xffff) for v in t.view(torch.int16).tolist())
    return " ".join("%02x" % v for v in t.tolist())


for op, dtype, layout, n, c, h, w, lam, cx, cy, k, labels in CASES:
    x = batch(n, c, h, w, dtype)
    y = torch.tensor(labels)
    print("case", op, dtype, layout, n, c, h, w, lam, cx, cy, k, *labels)
    if op == "mixup":
        if dtype == "uint8":
            f = x.float()
            out = torch.floor(f.roll(1, 0).mul_(1.0 - lam).add_(f.mul(lam)) + 0.5).to(torch.uint8)
        else:
            # MixUp._transform
            out = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
        targets = mixup_label(y, k, lam)
    else:
        (x1, y1, x2, y2), lam_adjusted = cutmix_params(lam, cx, cy, h, w)
        print("box", x1, y1, x2, y2, repr(lam_adjusted))
        # CutMix._transform
        rolled = x.roll(1, 0)
        out = x.clone()
        out[..., y1:y2, x1:x2] = rolled[..., y1:y2, x1:x2]
        targets = mixup_label(y, k, lam_adjusted)
    if layout == "nhwc":
        out = out.permute(0, 2, 3, 1).contiguous()
    print("pixels", bits(out, dtype))
    print("targets", bits(targets, "float32"))
