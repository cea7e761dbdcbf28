"""pipefeed: batches from the pipe data pipeline in a PyTorch or JAX loop.

    import pipefeed
    with pipefeed.Loader("cifar.pipe") as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for x, y in loader:
                ...  # x: torch.Tensor [B, 3, 32, 32]; y: int64 labels

The loader starts the ``pipe`` command, which writes batches into a ring of
slabs in shared memory; each batch is handed over without a copy. See
``Loader`` for the details and the README's "Python" section for the
protocol.
"""

from ._loader import PROTOCOL, Loader, PipeDied, PipeError

__all__ = ["Loader", "PipeError", "PipeDied", "PROTOCOL"]
