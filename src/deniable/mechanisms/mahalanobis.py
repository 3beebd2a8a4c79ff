"""The Mahalanobis mechanism: elliptical noise shaped by the embedding's covariance.

Xu, Aggarwal, Feyisetan, Teissier. "A Differentially Private Text Perturbation Method Using a
Regularized Mahalanobis Metric", PrivateNLP 2020 — Definitions 1–3, Algorithms 1–2, Lemma 1,
Theorem 1 (paper file ``mahalanobis_mechanism.txt``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from .._blas import single_threaded_blas
from .._validation import check_unit_interval
from ..metrics import MetricSpace
from ..neighbors import SearchIndex
from .base import Guarantee
from .madlib import Madlib

__all__ = ["Mahalanobis", "scaled_covariance"]


def scaled_covariance(vectors: np.ndarray) -> np.ndarray:
    """Sample covariance of the embedding, scaled so that its trace equals the dimension (§3)."""
    x = np.asarray(vectors)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"the Mahalanobis mechanism needs at least 2 embedding vectors, got shape {x.shape}")
    mean = x.mean(axis=0, dtype=np.float64)
    cov = np.zeros((x.shape[1], x.shape[1]))
    step = max(1, (32 << 20) // (8 * max(1, x.shape[1])))  # centred float64 blocks of 32 MiB: no full float64 copy
    for s in range(0, x.shape[0], step):
        b = x[s : s + step].astype(np.float64)
        b -= mean
        cov += b.T @ b
    cov /= x.shape[0] - 1
    tr = float(np.trace(cov))
    if not tr > 0:
        raise ValueError("the embedding's covariance has zero trace (all vectors equal); the Mahalanobis mechanism needs spread")
    return cov * (cov.shape[0] / tr)


# Σ_λ and its square roots per (embedding fingerprint, λ): building the mechanism at several ε
# (calibration, privacy targets, sweeps) must not redo the covariance and the eigendecomposition.
_FACTORS: OrderedDict[tuple[str, float], tuple[np.ndarray, np.ndarray, np.ndarray]] = OrderedDict()
_FACTORS_MAX = 4


def _regularized_factors(embedding: Any, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Σ, Σ_λ^{1/2}, Σ_λ^{-1/2}) for an embedding, cached by its fingerprint (read-only arrays)."""
    key = (str(embedding.fingerprint), float(lam))
    hit = _FACTORS.get(key)
    if hit is not None:
        _FACTORS.move_to_end(key)
        return hit
    d = embedding.dim
    sigma = scaled_covariance(embedding.vectors) if lam > 0 else np.zeros((d, d))
    reg = lam * sigma + (1.0 - lam) * np.eye(d)
    with single_threaded_blas():  # d × d: threads only spin-wait (seconds on a busy machine)
        evals, evecs = np.linalg.eigh(reg)
    if evals.min() <= 1e-12 * max(1.0, evals.max()):
        raise ValueError(
            f"lam={lam:g} gives a singular matrix lam*Sigma + (1-lam)*I (the embedding's covariance is "
            "rank-deficient, e.g. fewer words than dimensions); use lam < 1"
        )
    out = (sigma, (evecs * np.sqrt(evals)) @ evecs.T, (evecs / np.sqrt(evals)) @ evecs.T)
    for a in out:
        a.flags.writeable = False
    _FACTORS[key] = out
    while len(_FACTORS) > _FACTORS_MAX:
        _FACTORS.popitem(last=False)
    return out


class Mahalanobis(Madlib):
    """The regularized Mahalanobis mechanism (Algorithm 2).

    Each word w becomes the vocabulary word nearest (Euclidean) to φ(w) + Z, with
    Z = Y·Σ_λ^{1/2}·X, X uniform on the unit sphere, Y ~ Gamma(d, 1/ε), Σ_λ = λΣ + (1−λ)I and
    Σ the sample covariance scaled to trace d (Algorithm 1; Lemma 1: f(z) ∝ exp(−ε‖z‖_RM)).
    Σ_λ^{1/2} is computed once per (embedding, λ), by a symmetric eigendecomposition, and cached. λ = 0 is exactly Madlib.

    **Guarantee** (Theorem 1): ε·d-privacy with the regularized Mahalanobis distance
    d(w, w') = ‖φ(w) − φ(w')‖_RM = sqrt((φ(w)−φ(w'))ᵀ Σ_λ⁻¹ (φ(w)−φ(w'))), for all w, w' in the
    vocabulary ∪ {UNK} (UNK = the vocabulary mean vector).

    Parameters
    ----------
    embedding, epsilon, index, batch_size, exclude_outputs
        As for :class:`~deniable.mechanisms.madlib.Madlib`.
    lam
        Regularization λ ∈ [0, 1]; 0 gives Madlib, 1 the plain Mahalanobis norm.
    """

    name = "mahalanobis"

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        lam: float = 0.5,
        index: str | SearchIndex = "exact",
        batch_size: int = 8192,
        exclude_outputs: Any = None,
    ) -> None:
        self.lam = check_unit_interval("lam", lam)
        super().__init__(embedding, epsilon=epsilon, index=index, batch_size=batch_size, exclude_outputs=exclude_outputs)
        self.sigma, self._sqrt, self._inv_sqrt = _regularized_factors(self.embedding, self.lam)

    def sample_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        z = super().sample_noise(n, rng)
        if self.lam == 0:
            return z
        return z @ self._sqrt  # Σ_λ^{1/2} is symmetric: (Σ^{1/2} x)ᵀ = xᵀ Σ^{1/2}

    def rm_norm(self, z: np.ndarray) -> np.ndarray:
        """Regularized Mahalanobis norm ‖z‖_RM of each row of ``z`` (Definition 3)."""
        w = np.atleast_2d(np.asarray(z, dtype=np.float64)) @ self._inv_sqrt
        return np.sqrt(np.einsum("ij,ij->i", w, w))

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        return self.rm_norm(self.points(ids_a).astype(np.float64) - self.points(ids_b).astype(np.float64))

    def metric_space(self) -> MetricSpace | None:
        """‖z‖_RM = ‖Σ_λ^{-1/2} z‖₂: Euclidean distance between the whitened vectors (None for a
        subclass that changes :meth:`distance`)."""
        if type(self).distance is not Mahalanobis.distance:
            return None
        pts = self.embedding.vectors.astype(np.float64) @ self._inv_sqrt
        return MetricSpace(pts, "euclidean", key=("mahalanobis", self.embedding.fingerprint, self.lam))

    def derive_guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, f"regularized Mahalanobis distance (lam={self.lam:g}) between embedding vectors", self._domain)

    def _params(self) -> dict[str, Any]:
        return {"lam": self.lam, **super()._params()}
