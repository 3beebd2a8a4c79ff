"""PyTorch backend: Madlib, Mahalanobis, Vickrey, BRR and TEM sampled on a GPU (or on the CPU through torch).

Each class here subclasses the numpy mechanism and replaces only its sampler, so the guarantee,
the metric, ``distance``, ``probabilities``, ``privatize`` and every other method are the numpy
mechanism's own. Build them with ``deniable.get_mechanism(name, ..., backend="torch",
device="cuda")``.

**Same distributions.** The samplers draw from the same closed forms as the numpy ones (Madlib
§2.6: uniform direction × Gamma(d, 1/ε) radius; Mahalanobis Algorithm 1: that noise times
Σ_λ^{1/2}; BRR Algorithm 2: each bit flips with probability 1/(1+e^ε), nearest code, ties uniform;
TEM: the same exact rejection sampler over the same neighbour tables). The tests check each
against its closed form on CPU torch.

**Exact nearest neighbour.** Madlib, Mahalanobis and Vickrey search with the torch engine of
:mod:`deniable.neighbors` (:class:`~deniable.neighbors.torch_index.TorchEuclideanIndex`): a
matrix product per block (fp32 by default, ``precision="tf32"`` or ``"bf16"`` opt-in), certified
by the error bound that every exact engine shares, so the output is the float64 nearest word (or
two nearest, for Vickrey) in every precision; ``exact=False`` returns the raw low-precision
ranking (approximate). BRR's Hamming search uses ±1 codes: H(q, c) = (n − q·c)/2, an integer
that fp16 (on CUDA, n ≤ 2048 bits) or fp32 represents exactly, so it is exact by construction.

**TEM.** The device sampler takes its envelope (the sampling tables of
:class:`~deniable.mechanisms._exponential.SamplingTables`, built once by the numpy mechanism) to
the device and runs the rejection rounds of
:meth:`~deniable.mechanisms._exponential.ExponentialSampler.sample` in tensor arithmetic: the
one torch implementation of that sampler.

**Randomness.** Each ``sample_ids`` call draws one 63-bit seed from the caller's ``rng`` (numpy
Generator, int seed, ...) and seeds a ``torch.Generator`` on the device with it. A seed gives the
same output on the same device type, torch version and batch layout; outputs are **not**
bit-identical to the numpy backend, nor between CPU and CUDA (different generators and kernels),
nor across torch versions. The torch generators (Philox on CUDA, MT19937 on CPU) are statistical,
not cryptographic, whatever ``rng`` is (``rng="secure"`` only makes the seed unpredictable).

The privacy guarantee is the numpy mechanism's: the nearest-neighbour step is post-processing,
and the noise has the same distribution.

The classes live in :mod:`~deniable.backends.torch_euclidean` (Madlib, Mahalanobis, Vickrey),
:mod:`~deniable.backends.torch_hamming` (BRR and its Hamming search) and
:mod:`~deniable.backends.torch_tem` (TEM); this module gathers them under the names above.
"""

from __future__ import annotations

from typing import Any

from ..neighbors.torch_index import PRECISIONS, TorchEuclideanIndex, resolve_device
from ._torch_base import torch_generator
from ._torch_base import torch_where_unk as torch_where_unk
from .torch_euclidean import TorchMadlib, TorchMahalanobis, TorchVickrey
from .torch_euclidean import _first_probability_tensor as _first_probability_tensor
from .torch_hamming import TorchBRR, TorchHammingIndex
from .torch_hamming import _rebuild_brr as _rebuild_brr  # pickles of TorchBRR name it here
from .torch_tem import TorchTEM

__all__ = [
    "PRECISIONS",
    "TorchEuclideanIndex",
    "TorchHammingIndex",
    "TorchMadlib",
    "TorchMahalanobis",
    "TorchVickrey",
    "TorchBRR",
    "TorchTEM",
    "build",
    "torch_mechanisms",
    "torch_mechanism_class",
    "resolve_device",
    "torch_generator",
]

_CLASSES: dict[str, type] = {"madlib": TorchMadlib, "mahalanobis": TorchMahalanobis, "vickrey": TorchVickrey, "brr": TorchBRR, "tem": TorchTEM}


def torch_mechanisms() -> list[str]:
    """Names of the mechanisms with a torch backend."""
    return sorted(_CLASSES)


def torch_mechanism_class(name: str) -> type:
    """The torch class of mechanism ``name``; ``ValueError`` naming the torch backends when it has none."""
    if name not in _CLASSES:
        raise ValueError(f"mechanism {name!r} has no torch backend (torch backends: {', '.join(torch_mechanisms())}); use backend='numpy'")
    return _CLASSES[name]


def build(name: str, embedding: Any = None, *, epsilon: float, device: Any = "cuda", **params: Any) -> Any:
    """Build mechanism ``name`` with the torch backend on ``device``."""
    cls = torch_mechanism_class(name)
    if embedding is None:
        from ..embeddings import load_embedding

        embedding = load_embedding()
    return cls(embedding, epsilon=epsilon, device=device, **params)
