"""Accelerated backends for the mechanisms' hot paths.

``backend="torch"`` (``pip install "deniable[torch]"``) runs noise, exact nearest-neighbour search
and sampling with PyTorch on ``device="cuda"`` (or ``"cpu"``): see :mod:`deniable.backends.torch_backend`
and ``docs/gpu.md``. Nothing here is imported by ``import deniable``; torch is imported on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BACKENDS", "torch_mechanism", "privatize_parallel"]

#: Backend names accepted by :func:`deniable.get_mechanism`.
BACKENDS = ("numpy", "torch")


def torch_mechanism(name: str, embedding: Any = None, *, epsilon: float, device: str = "cuda", **params: Any) -> Any:
    """Build mechanism ``name`` with the torch backend (see :func:`deniable.get_mechanism`)."""
    from .torch_backend import build

    return build(name, embedding, epsilon=epsilon, device=device, **params)


def privatize_parallel(*args: Any, **kwargs: Any) -> Any:
    """Text in, text out with tokenization in worker processes; see :func:`deniable.backends.text.privatize_parallel`."""
    from .text import privatize_parallel as impl

    return impl(*args, **kwargs)
