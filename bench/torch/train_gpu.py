"""PyTorch eager reference for the training throughput of pipe's built-in
GPU trainer: the CNN of Keras' cifar10_cnn.py example, or the CIFAR ResNet of
He et al. 2016 (sec. 4.2), trained on one random CIFAR-shaped batch that is
already in device memory.

    /usr/bin/python3 bench/torch/train_gpu.py --model resnet20 --batch 256 --steps 50
    /usr/bin/python3 bench/torch/train_gpu.py --device cpu --threads 2 --model keras_cnn --batch 32 --steps 2

Prints one JSON line: images_per_sec and ms_per_step over the timed steps
(after warm-up). Used only for side-by-side benchmarks; never a dependency
of pipe.
"""
import argparse
import json
import time

import torch
import torch.nn as nn

from keras_cnn import keras_cnn  # the same CNN as the CPU comparison (this directory)


class BasicBlock(nn.Module):
    """conv3x3(s)-BN-ReLU-conv3x3-BN plus shortcut, then ReLU. The shortcut is
    the identity, or conv1x1(s)+BN when the stride or width changes
    (projection, "option B"). Convs have no bias: BN follows each."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                nn.BatchNorm2d(cout),
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """CIFAR ResNet of depth 6n+2: stem conv3x3(3->16)-BN-ReLU, three stages
    of n blocks (widths 16, 32, 64; the first block of stages 2 and 3 has
    stride 2), global average pool, Linear(64, 10)."""

    def __init__(self, depth=20, classes=10):
        super().__init__()
        if depth < 8 or (depth - 2) % 6 != 0:
            raise ValueError("resnet depth must be 6n+2 with n >= 1, got %d" % depth)
        n = (depth - 2) // 6
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
        )
        blocks = []
        cin = 16
        for stage, width in enumerate((16, 32, 64)):
            for i in range(n):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(BasicBlock(cin, width, stride))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def init_weights(model):
    # Kaiming normal (fan_in, relu) on conv and linear weights, zero biases;
    # BN keeps PyTorch's defaults (gamma 1, beta 0, eps 1e-5, momentum 0.1).
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def make_optimizer(name, model, weight_decay):
    # As pipe's trainer, weight decay applies to weights (conv, linear), not
    # to biases or batch-norm parameters.
    decay = [p for p in model.parameters() if p.dim() > 1]
    rest = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    if name == "sgd":
        return torch.optim.SGD(groups, lr=0.1, momentum=0.9, nesterov=True)
    if name == "adam":
        return torch.optim.Adam(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    if name == "rmsprop":
        # pipe's defaults: decay (alpha) 0.9 and eps 1e-7, as Keras; no momentum.
        return torch.optim.RMSprop(groups, lr=1e-3, alpha=0.9, eps=1e-7)
    raise ValueError("unknown optimizer %r" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet20",
                    help="keras_cnn, resnet20, resnetN (N = 6n+2), or resnet with --depth")
    ap.add_argument("--depth", type=int, default=20, help="resnet depth, 6n+2")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (cpu); 0 keeps the default")
    ap.add_argument("--optimizer", choices=("sgd", "adam", "rmsprop"), default="sgd")
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    args = ap.parse_args()

    if args.model == "keras_cnn":
        name, model = "keras_cnn", keras_cnn()
    elif args.model.startswith("resnet"):
        depth = int(args.model[len("resnet"):]) if args.model != "resnet" else args.depth
        name, model = "resnet%d" % depth, ResNet(depth)
    else:
        ap.error("--model: want keras_cnn, resnet20 or resnet (with --depth), got %r" % args.model)

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    # pipe's trainer computes in plain float32: no TF32 in convs or matmuls.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    init_weights(model)
    model = model.to(device)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = make_optimizer(args.optimizer, model, args.weight_decay)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    # One batch, already on the device, reused every step: we time the
    # training step alone, as pipe's trainer is measured with its batches
    # already in device memory.
    x = torch.randn(args.batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    model.train()
    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0

    out = {
        "framework": "pytorch " + torch.__version__,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "model": name,
        "optimizer": args.optimizer,
        "params": params,
        "batch": args.batch,
        "steps": args.steps,
        "images_per_sec": args.batch * args.steps / dt,
        "ms_per_step": 1000.0 * dt / args.steps,
        "tf32": False,
    }
    if not cuda:
        out["threads"] = torch.get_num_threads()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
