"""Madlib: calibrated multivariate perturbation of word embeddings.

Feyisetan, Balle, Drake, Diethe. "Privacy- and Utility-Preserving Textual Analysis via
Calibrated Multivariate Perturbations", WSDM 2020 — Algorithm 1 (§2.4), Theorem 1 (§2.5), noise
sampling §2.6 (paper file ``madlib_calibrated_multivariate_perturbations.txt``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_int
from ..neighbors import SearchIndex, make_index
from .base import EmbeddingMechanism, Guarantee

__all__ = ["Madlib", "sample_laplace_directions"]


def sample_laplace_directions(n: int, dim: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from the density p(z) ∝ exp(−ε‖z‖₂) on R^dim (Madlib §2.6): a uniform
    direction (normalized standard normal) times a magnitude ~ Gamma(shape=dim, scale=1/ε).
    Returns float64 ``(n, dim)``."""
    z = rng.standard_normal((n, dim))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    z *= rng.gamma(shape=dim, scale=1.0 / epsilon, size=(n, 1))
    return z


class Madlib(EmbeddingMechanism):
    """Madlib, the multivariate Laplace mechanism on a word embedding.

    Each word w becomes the vocabulary word nearest (Euclidean) to φ(w) + Z, with Z drawn from
    p(z) ∝ exp(−ε‖z‖₂) (Algorithm 1; sampling as §2.6).

    **Guarantee** (Theorem 1): ε·d-privacy with d(w, w') = ‖φ(w) − φ(w')‖₂, the Euclidean
    distance between embedding vectors, for all w, w' in the vocabulary ∪ {UNK}, where UNK (every
    out-of-vocabulary word) is the vocabulary mean vector. The nearest-neighbour step is
    post-processing, so an approximate ``index`` keeps the guarantee.

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`.
    epsilon
        Privacy parameter ε > 0 (per unit of Euclidean distance).
    index
        ``"exact"`` (default; blocked exact search), ``"exact-bf16"`` (the same nearest
        neighbour through a certified bfloat16 product, float64-exact; needs torch, ~3× faster on
        CPUs with AMX/AVX512-BF16, see :mod:`deniable.neighbors.bf16`), ``"faiss-flat"``
        (exact), ``"faiss-hnsw"`` / ``"faiss-ivf"`` (approximate), or an object with ``search``.
    batch_size
        Tokens per noise/search batch (bounds memory).
    exclude_outputs
        Words never output (e.g. ``"profanity"``, a file, or a list; see
        :mod:`deniable.mechanisms._exclude`): the nearest word is searched among the others only,
        which is post-processing of the noisy vector, so the guarantee is unchanged. Needs an
        index name (the index is built over the remaining words).
    """

    name = "madlib"

    def __init__(
        self, embedding: Any, *, epsilon: float, index: str | SearchIndex = "exact", batch_size: int = 8192, exclude_outputs: Any = None
    ) -> None:
        super().__init__(embedding, epsilon=epsilon, exclude_outputs=exclude_outputs)
        if self.embedding.dim / self.epsilon > 1e30:
            # the noise magnitude (mean d/ε) would overflow float32 and every output would be arbitrary
            raise ValueError(f"epsilon={epsilon!r} is too small for this {self.embedding.dim}-dimensional embedding (noise would overflow float32); use epsilon >= {self.embedding.dim / 1e30:.3g}")
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self._index_spec = index if isinstance(index, str) else type(index).__name__
        ex = self._exclusion
        if ex is not None and not isinstance(index, str):
            raise ValueError("exclude_outputs needs an index name (the index is built over the words that remain); pass index='exact' or another name")
        # with excluded outputs the index holds the allowed words only; its ids are mapped back
        self.index = make_index(index, self.embedding.vectors if ex is None else self.embedding.vectors[ex.allowed])

    def sample_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` noise vectors of this mechanism (float64 ``(n, dim)``)."""
        return sample_laplace_directions(n, self.embedding.dim, self.epsilon, rng)

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(ids.shape[0], dtype=np.int64)
        for s in range(0, ids.shape[0], self.batch_size):
            chunk = ids[s : s + self.batch_size]
            noisy = self.points(chunk) + self.sample_noise(chunk.shape[0], rng)
            out[s : s + chunk.shape[0]] = self.index.search(noisy.astype(np.float32))
        return out if self._exclusion is None else self._exclusion.allowed[out]

    def derive_guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, "Euclidean distance between embedding vectors", self._domain)

    def _params(self) -> dict[str, Any]:
        return {"index": self._index_spec}

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        return frozenset()  # every parameter is the user's choice

    def calibration_estimator(self) -> str:
        """``"radial"`` with an exact nearest-neighbour search (the noise is R·u, R ~ Gamma(d, 1/ε),
        so one set of directions measures every ε); an approximate search changes which word is
        returned, so it is measured like any other mechanism."""
        exact = self._index_spec in ("exact", "faiss-flat") and self._exclusion is None  # the radial estimator searches every word
        return "radial" if exact else super().calibration_estimator()
