# Writes geom.json, the reference that TestMaskMatchesTorchvision and
# TestBoxesMatchTorchvisionV2 compare with:
#   cd transform/testdata && python3 gen_geom.py
#
# Masks: torchvision 0.14's functional ops on a 1xHxW uint8 tensor with
# InterpolationMode.NEAREST, the mask being a formula both sides compute
# (formulaMask in the Go test). A random crop is F.pad then F.crop, as
# RandomCrop does; an affine map is F.affine.
#
# Boxes: torchvision 0.14 has no boxes in its functional ops, so the boxes
# are moved here by the formulas of torchvision.transforms.v2.functional
# (_geometry.py), written out below for XYXY boxes in pixels:
#   pad_bounding_boxes:             + (left, top, left, top)
#   crop_bounding_boxes:            - (left, top, left, top), clamped to the crop
#   horizontal_flip_bounding_boxes: x0, x1 = W - x1, W - x0
#   vertical_flip_bounding_boxes:   y0, y1 = H - y1, H - y0
#   resize_bounding_boxes:          * (new_w / old_w, new_h / old_h, ...)
#   resized_crop_bounding_boxes:    crop_bounding_boxes, then resize_bounding_boxes
#   center_crop_bounding_boxes:     crop_bounding_boxes at
#                                   (int(round((H - h) / 2)), int(round((W - w) / 2)))
#   affine_bounding_boxes:          the 4 corners through the forward matrix
#                                   _get_inverse_affine_matrix(center=(W/2, H/2), ...,
#                                   inverted=False), their min and max, clamped
#   clamp_bounding_boxes:           x to [0, W], y to [0, H]
# pipe clips boxes to the image after every operation, as a ClampBoundingBoxes
# after each would, so the flips and resizes, which v2 leaves unclamped, are
# clamped here too (the boxes given reach outside the image).
# Each case also carries the inverse matrix (output to input, the image's), which
# is the GeomAffine M pipe is given.
#
# center_crop of a mask smaller than the crop by 3 (mod 4) pixels is left out:
# torchvision pads (S-W)//2 on the left where pipe's center_crop (of images, and
# so of masks) starts at round((W-S)/2), one pixel further left.
import json
import math
import random

import torch
import torchvision.transforms.functional as F

NEAREST = F.InterpolationMode.NEAREST


def mask(h, w):
    t = torch.empty((1, h, w), dtype=torch.uint8)
    for y in range(h):
        for x in range(w):
            t[0, y, x] = (x * 7 + y * 13 + x * y * 3) % 251
    return t


cases = []


def add(op, h, w, out, **args):
    cases.append(dict(op=op, h=h, w=w, args=args, out_h=out.shape[-2], out_w=out.shape[-1],
                      mask=out.reshape(-1).tolist()))


for h, w in [(13, 17), (16, 9), (1, 5)]:
    m = mask(h, w)
    add("hflip", h, w, F.hflip(m))
    add("vflip", h, w, F.vflip(m))
for h, w, pad, fill, top, left, ch, cw in [
    (13, 17, 4, "constant", 0, 0, 11, 9),
    (13, 17, 4, "constant", 6, 12, 10, 13),
    (13, 17, 5, "reflect", 0, 1, 12, 15),
    (13, 17, 5, "reflect", 10, 14, 13, 12),
    (13, 17, 6, "edge", 0, 0, 8, 8),
    (13, 17, 6, "edge", 17, 20, 8, 9),
    (16, 9, 0, "constant", 3, 2, 7, 5),
]:
    m = F.pad(mask(h, w), [pad, pad, pad, pad], fill=0, padding_mode=fill)
    add("crop", h, w, F.crop(m, top, left, ch, cw), pad=pad, fill=fill, top=top, left=left, ch=ch, cw=cw)
for h, w, oh, ow in [(13, 17, 7, 9), (13, 17, 26, 34), (13, 17, 40, 11), (16, 9, 5, 3),
                     (16, 9, 16, 9), (16, 9, 47, 29), (7, 7, 63, 58), (224, 160, 13, 19), (2, 3, 82, 7)]:
    add("resize", h, w, F.resize(mask(h, w), [oh, ow], NEAREST), oh=oh, ow=ow)
for h, w, top, left, ch, cw, oh, ow in [
    (13, 17, 2, 3, 9, 11, 8, 8),
    (13, 17, 0, 0, 13, 17, 24, 24),
    (13, 17, 5, 1, 6, 14, 32, 20),
    (40, 30, 7, 11, 29, 17, 9, 9),
    (40, 30, 1, 2, 3, 3, 10, 10),
]:
    add("resized_crop", h, w, F.resized_crop(mask(h, w), top, left, ch, cw, [oh, ow], NEAREST),
        top=top, left=left, ch=ch, cw=cw, oh=oh, ow=ow)
for h, w, s in [(13, 17, 8), (13, 17, 12), (16, 9, 9), (13, 17, 14), (13, 17, 18), (16, 9, 18), (8, 8, 13)]:
    add("center_crop", h, w, F.center_crop(mask(h, w), [s, s]), size=s)

# Boxes: random boxes, some reaching outside what the op keeps.
rng = random.Random(7)


def boxes(h, w, n=12):
    out = []
    for _ in range(n):
        x0, y0 = rng.uniform(-2, w), rng.uniform(-2, h)
        out.append([x0, y0, x0 + rng.uniform(0, w / 2), y0 + rng.uniform(0, h / 2)])
    return out


def clamp(bs, h, w):
    return [[min(max(b[0], 0), w), min(max(b[1], 0), h), min(max(b[2], 0), w), min(max(b[3], 0), h)] for b in bs]


def crop(bs, top, left, h, w):
    return clamp([[b[0] - left, b[1] - top, b[2] - left, b[3] - top] for b in bs], h, w)


def scale(bs, sx, sy):
    return [[b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy] for b in bs]


def forward(h, w, angle, translate, sc, shear):
    # _get_inverse_affine_matrix(center=[w/2, h/2], ..., inverted=False) and its
    # inverse (inverted=True), as v2's affine_bounding_boxes and the image take them.
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = w * 0.5, h * 0.5
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -(a * math.tan(sx) + math.sin(rot))
    c = math.sin(rot - sy) / math.cos(sy)
    d = math.cos(rot) - c * math.tan(sx)
    fwd = [a * sc, b * sc, 0.0, c * sc, d * sc, 0.0]
    fwd[2] += cx + tx - fwd[0] * cx - fwd[1] * cy
    fwd[5] += cy + ty - fwd[3] * cx - fwd[4] * cy
    inv = [d / sc, -b / sc, 0.0, -c / sc, a / sc, 0.0]
    inv[2] += cx - inv[0] * (cx + tx) - inv[1] * (cy + ty)
    inv[5] += cy - inv[3] * (cx + tx) - inv[4] * (cy + ty)
    return fwd, inv


def affine(bs, fwd, h, w):
    out = []
    for b in bs:
        pts = [(b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])]
        xs = [fwd[0] * x + fwd[1] * y + fwd[2] for x, y in pts]
        ys = [fwd[3] * x + fwd[4] * y + fwd[5] for x, y in pts]
        out.append([min(xs), min(ys), max(xs), max(ys)])
    return clamp(out, h, w)


# F.affine with NEAREST on a mask: grid_sample at the output pixels' centres,
# zero outside; the case carries the inverse matrix (output to input), as below.
# Angles such as 30 degrees put sample points exactly on pixel edges, where
# torchvision's float32 grid and pipe's float64 map may round to either
# neighbour; these cases have no such ties.
for h, w, angle, translate, sc, shear in [
    (13, 17, -77.3, [0.4, 1.7], 0.8, [12.0, -5.0]),
    (16, 9, 145.0, [-3.0, 0.0], 1.25, [0.0, 20.0]),
    (20, 20, 90.0, [0.0, 0.0], 1.0, [0.0, 0.0]),
]:
    _, inv = forward(h, w, angle, translate, sc, shear)
    add("affine", h, w, F.affine(mask(h, w), angle, translate, sc, shear, NEAREST), m=inv)

box_cases = []
h, w = 30, 40
for _ in range(3):
    bs = boxes(h, w)
    box_cases.append(dict(op="hflip", h=h, w=w, args={}, boxes=bs,
                          want=clamp([[w - b[2], b[1], w - b[0], b[3]] for b in bs], h, w)))
    bs = boxes(h, w)
    box_cases.append(dict(op="vflip", h=h, w=w, args={}, boxes=bs,
                          want=clamp([[b[0], h - b[3], b[2], h - b[1]] for b in bs], h, w)))
    pad, top, left, ch, cw = 4, rng.randrange(0, 9), rng.randrange(0, 9), 25, 33
    bs = boxes(h, w)
    padded = [[b[0] + pad, b[1] + pad, b[2] + pad, b[3] + pad] for b in bs]
    box_cases.append(dict(op="crop", h=h, w=w, args=dict(pad=pad, fill="constant", top=top, left=left, ch=ch, cw=cw),
                          boxes=bs, want=crop(padded, top, left, ch, cw)))
    oh, ow = rng.randrange(5, 80), rng.randrange(5, 80)
    bs = boxes(h, w)
    box_cases.append(dict(op="resize", h=h, w=w, args=dict(oh=oh, ow=ow), boxes=bs,
                          want=clamp(scale(bs, ow / w, oh / h), oh, ow)))
    top, left = rng.randrange(0, 10), rng.randrange(0, 10)
    ch, cw, oh, ow = rng.randrange(5, h - top), rng.randrange(5, w - left), rng.randrange(5, 50), rng.randrange(5, 50)
    bs = boxes(h, w)
    box_cases.append(dict(op="resized_crop", h=h, w=w, args=dict(top=top, left=left, ch=ch, cw=cw, oh=oh, ow=ow),
                          boxes=bs, want=scale(crop(bs, top, left, ch, cw), ow / cw, oh / ch)))
    s = rng.randrange(10, 30)
    bs = boxes(h, w)
    box_cases.append(dict(op="center_crop", h=h, w=w, args=dict(size=s), boxes=bs,
                          want=crop(bs, int(round((h - s) / 2.0)), int(round((w - s) / 2.0)), s, s)))
    angle, translate = rng.uniform(-180, 180), [rng.uniform(-5, 5), rng.uniform(-5, 5)]
    sc, shear = rng.uniform(0.7, 1.3), [rng.uniform(-20, 20), rng.uniform(-20, 20)]
    fwd, inv = forward(h, w, angle, translate, sc, shear)
    bs = boxes(h, w)
    box_cases.append(dict(op="affine", h=h, w=w, args=dict(m=inv, angle=angle, translate=translate, scale=sc, shear=shear),
                          boxes=bs, want=affine(bs, fwd, h, w)))

with open("geom.json", "w") as f:
    json.dump(dict(masks=cases, boxes=box_cases), f, separators=(",", ":"))
    f.write("\n")
