"""PyTorch reference for pipe's trainer throughput: the CNN of Keras'
cifar10_cnn.py example, trained on random CIFAR-shaped batches on the CPU.

    /usr/bin/python3 bench/torch/keras_cnn.py --threads 2 --batch 128 --steps 30

Prints one JSON line: images_per_sec over the timed steps (after warm-up).
Used only for side-by-side benchmarks; never a dependency of pipe.
"""
import argparse
import json
import time

import torch
import torch.nn as nn


def keras_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 32, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(64 * 6 * 6, 512), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(512, 10),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = keras_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 3, 32, 32)
    y = torch.randint(0, 10, (args.batch,))
    model.train()
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__, "model": "keras_cnn", "threads": args.threads,
                      "batch": args.batch, "steps": args.steps, "images_per_sec": args.batch * args.steps / dt}))


if __name__ == "__main__":
    main()
