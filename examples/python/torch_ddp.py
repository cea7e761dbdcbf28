"""A PyTorch DistributedDataParallel loop fed by pipe: a small CNN on
generated CIFAR-shaped images, each rank of a torchrun job reading its own
share of every epoch from a pipefeed.Loader (which takes the rank and the
number of ranks from torchrun's RANK and WORLD_SIZE).

    PIPE_BIN=/path/to/pipe torchrun --standalone --nproc_per_node=2 examples/python/torch_ddp.py [EPOCHS]

Start it with the Python that has pipefeed: from a venv, its python -m
torch.distributed.run, torchrun by another name. Debian 12's torch 1.13
on Python 3.11 fails to parse torchrun's default --redirects
(AttributeError: 'NoneType' object has no attribute 'get'): add
--redirects 1 --tee 1 there.

CIFAR10=/path/to/cifar-10-binary.tar.gz trains on real CIFAR-10 instead,
through examples/cifar.pipe (its train stage is left out). The ranks
all-reduce their gradients over gloo on CPUs, or over NCCL with each
rank's batches copied to its GPU (device=) where CUDA is there (not yet
run on one).

Rank 0 prints each epoch's loss and accuracy over all ranks, and checks
that the ranks' samples of the epoch are those of one process reading the
whole epoch, each once (the shares are disjoint and lose nothing), and at
the end that the loss went down; either failing exits non-zero.
"""

import collections
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import pipefeed

HERE = os.path.dirname(os.path.abspath(__file__))
PIPE = os.path.join(HERE, "..", "cifar.pipe") if os.environ.get("CIFAR10") else os.path.join(HERE, "torch_ddp.pipe")


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def keys(x, y):
    """A key per sample of a batch: its label and a hash of its pixels."""
    x = x.cpu().numpy()
    return [f"{c}:{hashlib.blake2b(x[i].tobytes(), digest_size=8).hexdigest()}" for i, c in enumerate(y.tolist())]


def check_shares(shares, epoch):
    """Fails unless the ranks' samples of the epoch (shares, a list of keys
    each) are those of one process reading it whole, each once: all of them
    where the ranks divide the epoch, else all but the remainder."""
    with pipefeed.Loader(PIPE, epoch=epoch, rank=0, world=1) as one:
        whole = collections.Counter(k for x, y in one for k in keys(x, y))
    got = collections.Counter(k for share in shares for k in share)
    want = whole.total() - whole.total() % len(shares)
    if not got <= whole or got.total() != want:
        sys.exit(f"epoch {epoch}: the {len(shares)} ranks read {got.total()} samples, {(got - whole).total()} of them "
                 f"not in one process's epoch or read twice; want {want} of its {whole.total()}, each once")
    print(f"epoch {epoch}: the {len(shares)} ranks' {got.total()} samples are one process's epoch, each once")


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(1)
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # DDP starts every rank from rank 0's weights; this makes them the same run to run
    model = DistributedDataParallel(cnn().to(device), device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    # The Loader's rank and world are torchrun's; its pipe shares the cores with the machine's other ranks.
    workers = max(1, os.cpu_count() // int(os.environ["LOCAL_WORLD_SIZE"]))
    with pipefeed.Loader(PIPE, device=device if cuda else None, workers=workers) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            seen, loss_sum, right = [], 0.0, 0
            for x, y in loader:  # x: float32 [64, 3, 32, 32] (128 with CIFAR10), from this rank's share
                seen += keys(x, y)
                logits = model(x)
                loss = F.cross_entropy(logits, y)
                opt.zero_grad()
                loss.backward()  # DDP all-reduces the gradients across the ranks
                opt.step()
                loss_sum += loss.item() * len(y)
                right += (logits.argmax(1) == y).sum().item()
            totals = torch.tensor([loss_sum, right, len(seen)], dtype=torch.float64, device=device)
            dist.all_reduce(totals)  # over all ranks: loss × samples, right, samples
            shares = [None] * world
            dist.all_gather_object(shares, seen)
            losses.append(totals[0].item() / totals[2].item())
            if rank == 0:
                print(f"epoch {epoch}: loss {losses[-1]:.3f}, accuracy {totals[1].item() / totals[2].item():.3f} "
                      f"over {world} ranks, {loader.stats()['images_per_sec']:.0f} images/s on rank 0")
                check_shares(shares, epoch)
    dist.destroy_process_group()
    if epochs > 1 and losses[-1] >= losses[0]:
        sys.exit(f"the loss did not go down: {losses[0]:.3f} in epoch 0, {losses[-1]:.3f} in epoch {epochs - 1}")


if __name__ == "__main__":
    main()
