# Writes the torchvision 0.14 reference that TestHueMatchesTorchvision
# compares with:
#   cd transform/testdata && python3 gen_hue.py
# hue.bin: for each factor of FACTORS, adjust_hue of a 3x1x4096 uint8 image
# of colours (a formula both sides compute, hueColours in the Go test:
# greys and saturated colours included), 3*4096 bytes each.
import torch
import torchvision.transforms.functional as F

FACTORS = [-0.5, -0.31, -0.1, 0.03, 0.25, 0.4999, 0.5]


def colours():
    t = torch.empty((3, 1, 4096), dtype=torch.uint8)
    for i in range(4096):
        r, g, b = (i * 37) % 256, (i * 101 + 7) % 256, (i * 11 + i // 16) % 256
        if i % 64 == 0:  # greys
            g = b = r
        if i % 64 == 1:  # two channels equal
            b = g
        t[0, 0, i], t[1, 0, i], t[2, 0, i] = r, g, b
    return t


img = colours()
with open("hue.bin", "wb") as f:
    for h in FACTORS:
        f.write(F.adjust_hue(img, h).numpy().tobytes())
