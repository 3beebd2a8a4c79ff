"""Madlib, Mahalanobis and Vickrey sampled with torch: the noisy vector and the exact nearest
word (or two, for Vickrey) on the device (see :mod:`deniable.backends.torch_backend`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..mechanisms.madlib import Madlib
from ..mechanisms.mahalanobis import Mahalanobis
from ..mechanisms.vickrey import Vickrey
from ..neighbors.torch_index import TorchEuclideanIndex, matmul_precision, resolve_device
from ._torch_base import _DEFAULT_MEMORY, _only_exact, _Pending, _torch, _TorchMixin, torch_where_unk

__all__ = ["TorchMadlib", "TorchMahalanobis", "TorchVickrey"]


class _TorchEuclidean(_TorchMixin):
    """Madlib-style sampling: point + noise, exact search, on the device."""

    epsilon: float
    embedding: Any
    index: Any

    def _setup(self, device: Any, precision: str, exact: bool, memory_bytes: int) -> None:
        torch = _torch()
        self.device = resolve_device(device)
        self.index = TorchEuclideanIndex(self.embedding.vectors, device=self.device, precision=precision, exact=exact, memory_bytes=memory_bytes)
        self._index_spec = f"torch-exact/{precision}" if exact else f"torch-approx/{precision}"
        self._mean_t = torch.from_numpy(np.array(self.embedding.mean, dtype=np.float32)).to(self.device)

    def points_tensor(self, ids: Any) -> Any:
        """Vectors of ``ids`` (float32 device tensor), the vocabulary mean for UNK_ID."""
        pts = self.index.vectors[ids.clamp(min=0)]
        return torch_where_unk(ids, pts, self._mean_t)

    def sample_noise_tensor(self, n: int, generator: Any) -> Any:
        """``n`` draws from p(z) ∝ exp(−ε‖z‖₂) (Madlib §2.6) as a float32 device tensor."""
        torch = _torch()
        d = self.embedding.dim
        z = torch.randn(n, d, generator=generator, device=self.device, dtype=torch.float32)
        z /= torch.linalg.vector_norm(z, dim=1, keepdim=True)
        shape = torch.full((n,), float(d), device=self.device, dtype=torch.float64)
        r = torch._standard_gamma(shape, generator=generator) / self.epsilon
        return z * r.to(torch.float32)[:, None]

    def _sample_tensor(self, ids: Any, g: Any) -> Any:
        return self._in_chunks(ids, lambda chunk: self.index.search_tensor(self.points_tensor(chunk) + self.sample_noise_tensor(int(chunk.shape[0]), g)))


class TorchMadlib(_TorchEuclidean, Madlib):
    """:class:`~deniable.mechanisms.madlib.Madlib` sampled with torch (same guarantee: ε·d-privacy,
    d = Euclidean distance between embedding vectors, over the vocabulary ∪ {UNK}; Madlib paper
    Theorem 1; noise §2.6).

    Parameters
    ----------
    embedding, epsilon
        As for Madlib.
    device
        ``"cuda"`` (default), ``"cuda:N"`` or ``"cpu"``.
    precision, exact, memory_bytes
        Of the device search (:class:`TorchEuclideanIndex`).
    index
        Only ``"exact"`` (the device search); other indexes are numpy-backend options.
    batch_size
        Accepted for compatibility; the device sampler batches by ``memory_bytes``.
    """

    def __init__(
        self, embedding: Any, *, epsilon: float, device: Any = "cuda", precision: str = "fp32", exact: bool = True, memory_bytes: int = _DEFAULT_MEMORY,
        index: str = "exact", batch_size: int = 8192,
    ) -> None:
        _only_exact(index)
        super().__init__(embedding, epsilon=epsilon, index=_Pending(), batch_size=batch_size)
        self._setup(device, precision, exact, memory_bytes)


class _TorchEllipticalNoise(_TorchEuclidean):
    """Mahalanobis noise on the device (Algorithm 1): Madlib's noise times Σ_λ^{1/2}."""

    lam: float
    _sqrt: np.ndarray

    def _setup_noise(self) -> None:
        """Put Σ_λ^{1/2} on the device (after ``_setup``)."""
        torch = _torch()
        self._sqrt_t = torch.from_numpy(np.array(self._sqrt, dtype=np.float32)).to(self.device)

    def sample_noise_tensor(self, n: int, generator: Any) -> Any:
        """``n`` draws of Y·Σ_λ^{1/2}·X (Algorithm 1) as a float32 device tensor."""
        z = super().sample_noise_tensor(n, generator)
        if self.lam == 0:
            return z
        with matmul_precision("highest"):
            return z @ self._sqrt_t


class TorchMahalanobis(_TorchEllipticalNoise, Mahalanobis):
    """:class:`~deniable.mechanisms.mahalanobis.Mahalanobis` sampled with torch (same guarantee:
    ε·d-privacy, d = regularized Mahalanobis distance; Mahalanobis paper Theorem 1, Algorithm 2).
    Parameters as :class:`TorchMadlib` plus ``lam``."""

    def __init__(
        self, embedding: Any, *, epsilon: float, lam: float = 0.5, device: Any = "cuda", precision: str = "fp32", exact: bool = True, memory_bytes: int = _DEFAULT_MEMORY,
        index: str = "exact", batch_size: int = 8192,
    ) -> None:
        _only_exact(index)
        super().__init__(embedding, epsilon=epsilon, lam=lam, index=_Pending(), batch_size=batch_size)
        self._setup(device, precision, exact, memory_bytes)
        self._setup_noise()


class TorchVickrey(_TorchEllipticalNoise, Vickrey):
    """:class:`~deniable.mechanisms.vickrey.Vickrey` sampled with torch. Same guarantee as the
    numpy class (its noise mechanism's: ε·d-privacy with d the Euclidean distance for
    ``noise="euclidean"``, Madlib Theorem 1, or the regularized Mahalanobis distance for
    ``noise="mahalanobis"``, Xu et al. 2020 Theorem 1; the choice between the two nearest words
    is post-processing). On the device: the noisy vector, the exact two nearest words
    (:meth:`TorchEuclideanIndex.two_nearest_tensor`) and a float64 uniform from the device
    generator against :func:`~deniable.mechanisms.vickrey.vickrey_first_probability`.
    Parameters as :class:`~deniable.mechanisms.vickrey.Vickrey` (``metric`` its deprecated alias
    of ``noise``) plus ``device``, ``precision``, ``exact`` and ``memory_bytes`` as
    :class:`TorchMadlib`."""

    def __init__(
        self, embedding: Any, *, epsilon: float, noise: str = "euclidean", t: float = 0.75, lam: float | None = None,
        device: Any = "cuda", precision: str = "fp32", exact: bool = True, memory_bytes: int = _DEFAULT_MEMORY, index: str = "exact", batch_size: int = 8192,
        metric: str | None = None,
    ) -> None:
        _only_exact(index)
        super().__init__(embedding, epsilon=epsilon, t=t, noise=noise, lam=lam, batch_size=batch_size, metric=metric)
        self._setup(device, precision, exact, memory_bytes)
        self._setup_noise()

    def _sample_tensor(self, ids: Any, g: Any) -> Any:
        torch = _torch()
        if self.n_words == 1:
            return torch.zeros(int(ids.shape[0]), dtype=torch.int64, device=self.device)

        def first_or_second(chunk: Any) -> Any:
            m = int(chunk.shape[0])
            nn, d = self.index.two_nearest_tensor(self.points_tensor(chunk) + self.sample_noise_tensor(m, g))
            p_first = _first_probability_tensor(d[:, 0], d[:, 1], self.t)
            u = torch.rand(m, generator=g, device=self.device, dtype=torch.float64)
            return torch.where(u < p_first, nn[:, 0], nn[:, 1])

        return self._in_chunks(ids, first_or_second)

    def _backend_params(self) -> dict[str, Any]:
        return {"index": self._index_spec, **super()._backend_params()}


def _first_probability_tensor(d1: Any, d2: Any, t: float) -> Any:
    """:func:`~deniable.mechanisms.vickrey.vickrey_first_probability` on device tensors (float64),
    so the sampler never copies to the host."""
    torch = _torch()
    num = (1.0 - t) * d2
    den = t * d1 + num
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.full_like(den, 1.0 - t))
