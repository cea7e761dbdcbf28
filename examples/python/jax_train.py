"""A JAX training loop fed by pipe: a linear classifier on generated
CIFAR-shaped images, data-parallel over the local devices. Each batch
arrives as a jax.Array already split along its batch axis across them
(sharding=); the parameters are replicated, and jit's step runs on every
device at once.

    PIPE_BIN=/path/to/pipe python examples/python/jax_train.py [EPOCHS]

On a machine without accelerators, XLA_FLAGS=--xla_force_host_platform_device_count=4
gives JAX four CPU devices to split batches across.
"""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import pipefeed

PIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_train.pipe")
CLASSES = 10


def loss(params, x, y):
    logits = x.reshape(x.shape[0], -1) @ params["w"] + params["b"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), value


@jax.jit
def correct(params, x, y):
    logits = x.reshape(x.shape[0], -1) @ params["w"] + params["b"]
    return jnp.sum(jnp.argmax(logits, axis=1) == y)


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    mesh = Mesh(np.array(jax.local_devices()), ("batch",))
    batches, replicated = NamedSharding(mesh, PartitionSpec("batch")), NamedSharding(mesh, PartitionSpec())
    params = jax.device_put({"w": jnp.zeros((32 * 32 * 3, CLASSES)), "b": jnp.zeros(CLASSES)}, replicated)
    print(f"{len(mesh.devices)} device(s): {jax.local_devices()}")
    with pipefeed.Loader(PIPE, framework="jax", sharding=batches) as loader:
        for epoch in range(epochs):
            total = 0.0
            for x, y in loader:  # x: float32 [128, 32, 32, 3], split across the devices
                params, value = step(params, x, y)
                total += float(value)
            s = loader.stats()
            print(f"epoch {epoch}: loss {total / len(loader):.3f}, {s['images_per_sec']:.0f} images/s, "
                  f"stall {s['stall_pct']:.0f}%")
    right = seen = 0
    with pipefeed.Loader(PIPE, framework="jax", sharding=batches, env={"SPLIT": "test"}) as loader:
        for x, y in loader:
            right += int(correct(params, x, y))
            seen += x.shape[0]
    print(f"test accuracy {right / seen:.3f} (chance {1 / CLASSES:.1f})")


if __name__ == "__main__":
    main()
