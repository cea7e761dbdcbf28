"""pipefeed's GPU path in a loop that never synchronises the GPU, as a
training loop that only queues work does: batches go to the device on the
loader's side stream (pinned, asynchronous), the loop queues a little work
on each and asks for the next. The loader must hand slabs back to pipe as
their copies complete without the loop waiting on the GPU; a loader that
releases a slab only when it happens to see its copy done stalls for good
once pipe stops sending. A watchdog fails the run when no batch arrives for
20 s; at the end the loop synchronises once, checks the sums it queued
against the host's, and prints images/s.

    PIPE_BIN=./pipe python3 feed_loop.py --device cuda:0 --batches 2000
"""
import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np
import torch

import pipefeed

RECIPE = """source synthetic n=20000 split=train
shuffle seed=1
random_crop size=32 pad=4 fill=reflect
flip horizontal
batch 256
to_tensor layout=nchw dtype=uint8
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--batches", type=int, default=2000)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("feed_loop: no CUDA device")
        return 1
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "loop.pipe")
        with open(path, "w") as f:
            f.write(RECIPE)
        # The reference sums, from the host path (numpy), epoch by epoch.
        want = []
        with pipefeed.Loader(path, framework="numpy") as host:
            for x, _ in host:
                want.append(int(x.astype(np.int64).sum()))
        last = [time.monotonic()]
        stuck = threading.Event()

        def watchdog():
            while not stuck.wait(1):
                if time.monotonic() - last[0] > 20:
                    print("feed_loop: FAIL: no batch for 20 s: the loader is stuck", flush=True)
                    os._exit(1)

        threading.Thread(target=watchdog, daemon=True).start()
        sums = []
        n = images = 0
        start = time.monotonic()
        with pipefeed.Loader(path, device=a.device, pin_memory=True) as loader:
            while n < a.batches:
                for x, _ in loader:
                    # Work queued on the GPU, never waited for.
                    sums.append(x.to(torch.int64).sum())
                    n += 1
                    images += x.shape[0]
                    last[0] = time.monotonic()
                    if n == a.batches:
                        break
        torch.cuda.synchronize(a.device)
        took = time.monotonic() - start
        stuck.set()
    got = [int(s) for s in sums[: len(want)]]
    bad = [i for i, s in enumerate(got) if s != want[i]]
    if bad:
        print(f"feed_loop: FAIL: batch {bad[0]} of epoch 0 sums to {got[bad[0]]} on the GPU, {want[bad[0]]} on the host")
        return 1
    print(f"feed_loop: {n} batches ({images} images) in {took:.1f} s = {images / took:.0f} images/s, never synchronising; epoch 0 matches the host path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
