"""Writes erase.txt: torchvision's F.erase on fixed inputs and rectangles.

Run from transform/testdata with Debian's python3-torchvision (0.14):
    /usr/bin/python3 gen_erase.py > erase.txt
Each case is a line "case C H W i j h w v..." (v on the [0,1] scale, one or
C values), then the erased image, a float32 tensor in [0,1], as C*H*W values
in CHW order on one line. The input pixel (c, y, x) is
(c*131 + y*17 + x*7 + y*x) % 256, divided by 255, as ToTensor gives it;
erase_test.go builds the same uint8 input.
"""
import torch
import torchvision.transforms.functional as F

CASES = [
    # C, H, W, i, j, h, w, value
    (3, 6, 7, 1, 2, 3, 4, [0.0]),
    (3, 8, 5, 0, 0, 7, 4, [0.485, 0.456, 0.406]),
    (3, 5, 9, 2, 5, 3, 4, [1.0]),
    (1, 6, 6, 3, 1, 2, 5, [0.5]),
]

for c, h, w, i, j, eh, ew, v in CASES:
    pix = torch.tensor([[[(ch * 131 + y * 17 + x * 7 + y * x) % 256 for x in range(w)]
                         for y in range(h)] for ch in range(c)], dtype=torch.float32) / 255
    val = torch.tensor(v, dtype=torch.float32).view(-1, 1, 1)
    out = F.erase(pix, i, j, eh, ew, val)
    print("case", c, h, w, i, j, eh, ew, *v)
    print(" ".join("%.6f" % x for x in out.flatten().tolist()))
