"""The Vickrey mechanism: noisy embedding, then a randomized choice between the two nearest words.

Xu, Aggarwal, Feyisetan, Teissier. "On a Utilitarian Approach to Privacy Preserving Text
Generation", PrivateNLP @ NAACL 2021 (arXiv:2104.11838) — the Vickrey mechanism, with
the multivariate Laplace noise of Madlib (Feyisetan et al. 2020) or the regularized Mahalanobis
noise of Xu et al. 2020.

Source note (details in docs/mechanisms/vickrey.md): the paper's
full text could not be read. The search index holds its ar5iv HTML page but returns only the
opening (abstract, start of §1), so no section, algorithm or equation number can be cited. The
abstract confirms the structure implemented here — the noise of the existing mechanisms, then a
choice between the first and second nearest neighbours of the noisy vector balanced by a tuning
parameter, "motivated by Vickrey auction" — and says the parameter is chosen by solving a
constrained optimization empirically. The exact selection probability below is the rule as we
know it, unchecked against the paper. The guarantee does not depend on that rule: any choice made
from the noisy vector alone (with fresh randomness) is post-processing.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._validation import check_int, check_unit_interval
from ..neighbors import NearestNeighbors
from .base import Guarantee, Mechanism
from .mahalanobis import Mahalanobis

__all__ = ["Vickrey", "vickrey_first_probability"]

VICKREY_NOISES = ("euclidean", "mahalanobis")


def vickrey_first_probability(d1: np.ndarray, d2: np.ndarray, t: float) -> np.ndarray:
    """P[output = nearest word] = (1 − t)·d₂ / (t·d₁ + (1 − t)·d₂), d₁ ≤ d₂ the distances from the
    noisy vector to its nearest and second-nearest words (1 − t where both terms vanish)."""
    d1 = np.asarray(d1, dtype=np.float64)
    d2 = np.asarray(d2, dtype=np.float64)
    num = (1.0 - t) * d2
    den = t * d1 + num
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 - t)


def _noise_family(noise: str, metric: str | None) -> str:
    """The noise family of a Vickrey mechanism from ``noise`` and its deprecated alias ``metric``
    (a ``DeprecationWarning`` when ``metric`` is given; a ``ValueError`` when ``noise`` was set
    to another family than ``metric``, or the value is not one of :data:`VICKREY_NOISES`)."""
    if metric is not None:
        warnings.warn("Vickrey(metric=...) is deprecated: it selects the noise family; pass noise=... "
                      "(same values, same outputs)", DeprecationWarning, stacklevel=3)
        if noise != "euclidean" and noise != metric:
            raise ValueError(f"noise={noise!r} and its deprecated alias metric={metric!r} disagree; pass noise= only")
        noise = metric
    if noise not in VICKREY_NOISES:
        raise ValueError(f"noise must be one of {', '.join(VICKREY_NOISES)}, got {noise!r}")
    return noise


class Vickrey(Mahalanobis):
    """The Vickrey mechanism: Madlib's (or Mahalanobis') noisy vector, then the nearest or the
    second-nearest word.

    For an input w: v = φ(w) + Z, with Z the noise of :class:`~deniable.Madlib`
    (``noise="euclidean"``: density ∝ exp(−ε‖z‖₂)) or of :class:`~deniable.Mahalanobis`
    (``noise="mahalanobis"``: density ∝ exp(−ε‖z‖_RM), regularization ``lam``). Let w₁, w₂ be
    the nearest and second-nearest vocabulary words to v (Euclidean, exact), at distances
    d₁ ≤ d₂. The output is w₁ with probability p = (1 − t)·d₂ / (t·d₁ + (1 − t)·d₂), else w₂.
    t = 0 is Madlib/Mahalanobis (always w₁); t = 0.5 gives p = d₂/(d₁ + d₂); larger t moves
    more outputs to the runner-up (the "second price" of a Vickrey auction).

    **Guarantee**: the same as the noise mechanism's, because the choice uses only v and fresh
    randomness (post-processing): ε·d-privacy with d the Euclidean distance between embedding
    vectors (``noise="euclidean"``, Madlib Theorem 1) or the regularized Mahalanobis distance
    ‖φ(w) − φ(w')‖_RM with Σ_λ = λΣ + (1 − λ)I (``noise="mahalanobis"``, Xu et al. 2020
    Theorem 1), for all w, w' in the vocabulary ∪ {UNK} (UNK = the vocabulary mean vector).

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`.
    epsilon
        Privacy parameter ε > 0.
    t
        Threshold t ∈ [0, 1] (default 0.75).
    noise
        The noise family: ``"euclidean"`` (the default when unset: Madlib's multivariate Laplace
        noise, pypantera's VickreyCMP) or ``"mahalanobis"`` (the regularized Mahalanobis noise,
        VickreyMhl). It also sets the distance of the guarantee (above).
    lam
        λ ∈ [0, 1] for ``noise="mahalanobis"`` (default 0.75); must be left unset (or 0) for
        ``"euclidean"``.
    index
        ``"exact"`` (default: certified float32 products) or ``"exact-bf16"`` (a certified
        bfloat16 product; needs torch, faster on CPUs with AMX/AVX512-BF16, see
        :mod:`deniable.neighbors.bf16`): either engine's ``knn(q, 2)`` gives the float64-exact two
        nearest words, ties to the lowest id (:mod:`deniable.neighbors.base`).
    batch_size
        Tokens per noise/search batch.
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): w₁,
        w₂ are the two nearest *remaining* words (post-processing of v, guarantee unchanged).
    metric
        Deprecated alias of ``noise`` (warns with a ``DeprecationWarning``); giving both with
        different values is an error.

    References
    ----------
    Xu, Aggarwal, Feyisetan, Teissier 2021 (Vickrey mechanism; full text not available to us, see
    the module note); Feyisetan et al. 2020, Algorithm 1 and Theorem 1; Xu et al. 2020, Algorithm 2
    and Theorem 1.
    """

    name = "vickrey"
    deprecated_params = frozenset({"metric"})

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        noise: str = "euclidean",
        t: float = 0.75,
        lam: float | None = None,
        index: str = "exact",
        batch_size: int = 8192,
        exclude_outputs: Any = None,
        metric: str | None = None,
    ) -> None:
        if index not in ("exact", "exact-bf16"):
            raise ValueError(f"index must be 'exact' or 'exact-bf16' (Vickrey needs the two nearest words), got {index!r}")
        noise = _noise_family(noise, metric)
        if noise == "euclidean":
            if lam not in (None, 0, 0.0):
                raise ValueError(f"lam={lam!r} applies only to noise='mahalanobis'; drop it or pass --param noise=mahalanobis")
            lam = 0.0
        elif lam is None:
            lam = 0.75
        self.t = check_unit_interval("t", t)
        self.noise = noise
        super().__init__(
            embedding, epsilon=epsilon, lam=lam, index=index, batch_size=check_int("batch_size", batch_size, minimum=1), exclude_outputs=exclude_outputs
        )

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(ids.shape[0], dtype=np.int64)
        for s in range(0, ids.shape[0], self.batch_size):
            chunk = ids[s : s + self.batch_size]
            noisy = (self.points(chunk) + self.sample_noise(chunk.shape[0], rng)).astype(np.float32)
            if self.allowed_output_ids.size == 1:
                out[s : s + chunk.shape[0]] = self.allowed_output_ids[0]
                continue
            nn, dist = self._two_nearest(noisy)
            first = rng.random(chunk.shape[0]) < vickrey_first_probability(dist[:, 0], dist[:, 1], self.t)
            out[s : s + chunk.shape[0]] = np.where(first, nn[:, 0], nn[:, 1])
        return out

    def _two_nearest(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids and float64 Euclidean distances of the two nearest words of each row of ``q``
        (nearest first, ties to the lowest id): the index's certified ``knn(q, 2)``
        (:mod:`deniable.neighbors.base`), for ``"exact"`` and ``"exact-bf16"`` alike."""
        index = self.index  # an exact k-NN engine: "exact" or "exact-bf16" (checked in __init__)
        assert isinstance(index, NearestNeighbors)
        nn, dist = index.knn(q, 2)
        # with excluded outputs the index holds the allowed words only (ids mapped back)
        return (nn, dist) if self._exclusion is None else (self._exclusion.allowed[nn], dist)

    def derive_guarantee(self) -> Guarantee:
        if self.noise == "euclidean":
            return Guarantee(self.epsilon, "Euclidean distance between embedding vectors", self._domain)
        return Guarantee(self.epsilon, f"regularized Mahalanobis distance (lam={self.lam:g}) between embedding vectors", self._domain)

    def calibration_estimator(self) -> str:
        """``"radial-vickrey"`` (exact in the noise radius R, as Madlib's ``"radial"``, with the
        choice between the two nearest words along each direction; :mod:`deniable.calibration.
        two_nearest`) with an exact two-nearest search over every word; else as the base class."""
        if self._index_spec in ("exact", "exact-bf16") and self._exclusion is None:
            return "radial-vickrey"
        return Mechanism.calibration_estimator(self)

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"t": self.t, "noise": self.noise}
        if self.noise == "mahalanobis":
            p["lam"] = self.lam
        if self._index_spec != "exact":
            p["index"] = self._index_spec
        return p
