"""pipefeed: batches from the pipe data pipeline in a PyTorch or JAX loop.

    import pipefeed
    with pipefeed.Loader("cifar.pipe") as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for x, y in loader:
                ...  # x: torch.Tensor [B, 3, 32, 32]; y: int64 labels

The loader starts the ``pipe`` command, which writes batches into a ring of
slabs in shared memory; each batch is handed over without a copy. See
``Loader`` for the details and docs/python.md for the
protocol.

``Pipeline`` builds the pipeline in Python instead of a file, with the
same stages and parameters, and ``Loader(pipeline)`` takes it as it takes a
file: ``_pipeline``, with its stage methods in ``_stages``, generated from
pipe's registry by ``_gen``.

The modules: ``_loader`` (Loader: starting pipe, epochs, state, figures),
``_protocol`` (the messages, as Go's package feed has them), ``_ring`` (the
shared memory and its slabs' arrays), ``_cuda`` (copies to a GPU for
``device=``), ``_jax`` (jax.Array batches for ``framework="jax"``),
``_launch`` (the pipe command, a launcher's rank) and ``_errors``.
"""

from ._errors import PipeDied, PipeError
from ._loader import Loader
from ._pipeline import Pipeline
from ._protocol import PROTOCOL

__version__ = "0.1.0"
"""The package's version: the one place it is written (the build backend,
_build.py, reads it from here)."""

__all__ = ["Loader", "Pipeline", "PipeError", "PipeDied", "PROTOCOL", "__version__"]
