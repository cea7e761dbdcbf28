# Writes the torchvision 0.14 reference outputs that TestGrayscaleMatchesTorchvision
# and TestGaussianBlurMatchesTorchvision compare with:
#   cd transform/testdata && python3 gen_gray_blur.py
# The input images are a formula both sides compute (formulaImage in the Go test).
# gray.bin: rgb_to_grayscale of a 3x32x32 image, H*W bytes.
# gray_edges.bin: 4-byte records r, g, b, grey where rgb_to_grayscale differs from
#   the same sum in float64, or with 0.299 for 0.2989, or rounded: the
#   values that tell an imitation from the real thing (170 of each, spread).
# blur.bin: gaussian_blur of a 3xHxW image for each case of BLUR, C*H*W bytes each.
import torch
import torchvision.transforms.functional as F

BLUR = [  # kernel, sigma, h, w
    (23, 0.1, 24, 21),
    (23, 2.0, 24, 21),
    (23, 1.37, 24, 21),
    (5, 0.8, 24, 21),
    (3, 5.0, 24, 21),
]


def image(c, h, w):
    t = torch.empty((c, h, w), dtype=torch.uint8)
    for ch in range(c):
        for y in range(h):
            for x in range(w):
                t[ch, y, x] = (x * x * 37 + y * y * 11 + x * y * 5 + ch * 89 + x * 13 + y * 7) % 256
    return t


with open("gray.bin", "wb") as f:
    f.write(F.rgb_to_grayscale(image(3, 32, 32)).numpy().tobytes())
v = torch.arange(1 << 24, dtype=torch.int64)
rgb = torch.stack([(v >> 16) & 255, (v >> 8) & 255, v & 255]).to(torch.uint8).reshape(3, 1, 1 << 24)
got = F.rgb_to_grayscale(rgb).reshape(-1)
r, g, b = (rgb[i].reshape(-1).double() for i in range(3))
others = [
    0.2989 * r + 0.587 * g + 0.114 * b,
    0.299 * r.float() + 0.587 * g.float() + 0.114 * b.float(),
    (0.2989 * r + 0.587 * g + 0.114 * b).round(),
]
picked = []
for other in others:
    idx = (other.to(torch.uint8) != got).nonzero().reshape(-1)
    picked.append(idx[torch.linspace(0, len(idx) - 1, 170).long()])
idx = torch.cat(picked).unique()
with open("gray_edges.bin", "wb") as f:
    f.write(torch.stack([rgb[0, 0, idx], rgb[1, 0, idx], rgb[2, 0, idx], got[idx]], dim=1).numpy().tobytes())
with open("blur.bin", "wb") as f:
    for k, s, h, w in BLUR:
        f.write(F.gaussian_blur(image(3, h, w), [k, k], [s, s]).numpy().tobytes())
