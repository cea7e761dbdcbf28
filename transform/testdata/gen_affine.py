# Writes the torchvision 0.14 reference outputs that the rotate, affine,
# rand_augment and trivial_augment tests compare with:
#   cd transform/testdata && /usr/bin/python3 gen_affine.py
# The input images are formulas both sides compute (formulaImage and
# narrowImage in the Go tests).
# affine.bin: for each case of ROTATE, F.rotate, then of AFFINE, F.affine, of
#   a 3xHxW image with fill=[fill]*3 (as RandomRotation and RandomAffine
#   pass it), C*OH*OW bytes each (OH, OW: the output's size).
# augment.bin: for each case of AUG, autoaugment._apply_op (the function
#   RandAugment and TrivialAugmentWide call) on the 3x37x41 image, C*H*W bytes.
# magnitudes.txt: the magnitude tables of RandAugment (for a 37x41 image) and
#   TrivialAugmentWide: one line per space, bin count and operation, the
#   values as Python writes floats.
import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode, RandAugment, TrivialAugmentWide
from torchvision.transforms.autoaugment import _apply_op

N, B = InterpolationMode.NEAREST, InterpolationMode.BILINEAR

ROTATE = [  # angle, interpolation, expand, fill, h, w
    (30.0, N, False, 0, 37, 41),
    (30.0, B, False, 0, 37, 41),
    (-17.5, N, False, 128, 32, 48),
    (-17.5, B, False, 128, 32, 48),
    (90.0, N, False, 0, 32, 48),
    (180.0, B, False, 0, 37, 41),
    (45.0, B, True, 0, 37, 41),
    (-63.0, N, True, 200, 32, 48),
]
AFFINE = [  # angle, tx, ty, scale, shear x, shear y, interpolation, fill, h, w
    (12.0, 3, -5, 1.3, 10.0, -7.0, N, 0, 37, 41),
    (12.0, 3, -5, 1.3, 10.0, -7.0, B, 0, 37, 41),
    (-40.0, 0, 0, 0.7, 0.0, 20.0, B, 50, 32, 48),
    (-40.0, 0, 0, 0.7, 0.0, 20.0, N, 50, 32, 48),
    (0.0, -7, 2, 1.0, 35.0, 0.0, B, 0, 37, 41),
]
AUG = [  # operation, signed magnitude, interpolation, fill, image (0: formula, 1: narrow)
    ("Identity", 0.0, N, 0, 0),
    ("ShearX", 0.3, N, 0, 0),
    ("ShearX", -0.2, B, 0, 0),
    ("ShearY", -0.99, B, 77, 0),
    ("ShearY", 0.5, N, 0, 0),
    ("TranslateX", 13.9, N, 0, 0),
    ("TranslateX", -20.5, B, 9, 0),
    ("TranslateY", -7.3, N, 0, 0),
    ("Rotate", 30.0, N, 0, 0),
    ("Rotate", -135.0, B, 0, 0),
    ("Brightness", 0.9, N, 0, 0),
    ("Brightness", -0.6, N, 0, 0),
    ("Brightness", 0.33, N, 0, 1),
    ("Color", 0.5, N, 0, 0),
    ("Color", -0.99, N, 0, 0),
    ("Contrast", 0.7, N, 0, 1),
    ("Contrast", -0.9, N, 0, 0),
    ("Sharpness", 0.9, N, 0, 0),
    ("Sharpness", -0.99, N, 0, 1),
    ("Posterize", 4.0, N, 0, 0),
    ("Posterize", 2.0, N, 0, 0),
    ("Posterize", 7.0, N, 0, 0),
    ("Solarize", 128.0, N, 0, 0),
    ("Solarize", 93.5, N, 0, 0),
    ("Solarize", 0.0, N, 0, 0),
    ("Solarize", 255.0, N, 0, 0),
    ("AutoContrast", 0.0, N, 0, 0),
    ("AutoContrast", 0.0, N, 0, 1),
    ("Equalize", 0.0, N, 0, 0),
    ("Equalize", 0.0, N, 0, 1),
]
BINS = [31, 10, 2, 64, 100]


def image(c, h, w):
    t = torch.empty((c, h, w), dtype=torch.uint8)
    for ch in range(c):
        for y in range(h):
            for x in range(w):
                t[ch, y, x] = (x * x * 37 + y * y * 11 + x * y * 5 + ch * 89 + x * 13 + y * 7) % 256
    return t


def narrow(c, h, w):
    # A low-contrast image whose channels span different ranges.
    return (image(c, h, w).int() % (40 + 30 * torch.arange(c).view(c, 1, 1)) + 60).to(torch.uint8)


with open("affine.bin", "wb") as f:
    for angle, mode, expand, fill, h, w in ROTATE:
        f.write(F.rotate(image(3, h, w), angle, mode, expand, fill=[float(fill)] * 3).numpy().tobytes())
    for angle, tx, ty, scale, shx, shy, mode, fill, h, w in AFFINE:
        out = F.affine(image(3, h, w), angle, [tx, ty], scale, [shx, shy], mode, fill=[float(fill)] * 3)
        f.write(out.numpy().tobytes())
with open("augment.bin", "wb") as f:
    imgs = [image(3, 37, 41), narrow(3, 37, 41)]
    for name, mag, mode, fill, img in AUG:
        f.write(_apply_op(imgs[img], name, mag, mode, [float(fill)] * 3).numpy().tobytes())
with open("magnitudes.txt", "w") as f:
    for kind, space in [("rand", lambda n: RandAugment()._augmentation_space(n, (37, 41))),
                        ("trivial", lambda n: TrivialAugmentWide()._augmentation_space(n))]:
        for n in BINS:
            for name, (mags, signed) in space(n).items():
                vals = [float(v) for v in mags.reshape(-1).tolist()] if mags.ndim > 0 else []
                f.write(" ".join([kind, str(n), name, "signed" if signed else "unsigned"] + [repr(v) for v in vals]) + "\n")
