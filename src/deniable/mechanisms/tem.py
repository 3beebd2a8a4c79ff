"""TEM: the metric truncated exponential mechanism.

Carvalho, Vasiliadis, Alves, Feyisetan, Schulze, Yerli. "TEM: High Utility Metric Differential
Privacy on Text" — Algorithm 2 (§4), Theorems 2–3, Algorithm 3 / Lemma B.1 (Appendix B)
(paper file ``tem_truncated_exponential_mechanism.txt``).
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_int, check_unit_interval
from ..metrics import metric_name, pairwise_distances
from ..neighbors.neighborhoods import KnnIds, Neighborhoods, embedding_neighborhoods, row_distances
from ._em_base import PRECOMPUTED_NEIGHBORS, ExponentialEmbeddingMechanism, precomputed_neighbors_param
from ._exclude import restrict_neighborhoods, restrict_rows
from ._exponential import ExponentialSampler, RowSubset, SamplingTables
from ._params import TEM_METRICS

__all__ = ["TEM", "theorem3_gamma", "truncation_gamma", "TEM_METRICS"]

#: ``storage="auto"`` keeps distances and per-ε sampling tables in memory up to this many table
#: entries ((|W|+1)·precomputed_neighbors; ~40 bytes each while building), and uses the compact ids-only table above.
_COMPACT_ENTRIES = 8_000_000
_COMPACT_ROWS = 256  # rows whose distances are recomputed at once by the compact sampler


def theorem3_gamma(epsilon: float, n_words: int, beta: float) -> float:
    """γ = (2/ε)·ln((1−β)(|W|−1)/β) (Theorem 3): the output lies within distance γ of the input
    with probability ≥ 1 − β. Clamped at 0 (then (|W|−1)/|W| ≤ β already holds)."""
    x = (1.0 - beta) * (n_words - 1) / beta
    if x <= 1.0:
        return 0.0
    return 2.0 / epsilon * math.log(x)


def truncation_gamma(epsilon: float, n_outputs: int, beta: float, gamma: Any) -> tuple[float, float, bool]:
    """``(beta, gamma, gamma_given)`` of a TEM-style truncation: β checked in (0, 1), and γ as
    given (a number ≥ 0) or, when ``gamma`` is None, :func:`theorem3_gamma` over ``n_outputs``
    possible outputs (|W| of Theorem 3)."""
    beta = check_unit_interval("beta", beta, open_low=True, open_high=True)
    if gamma is None:
        return beta, theorem3_gamma(epsilon, n_outputs, beta), False
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma must be a real number >= 0 or None, got {gamma!r} ({type(gamma).__name__})")
    if math.isnan(float(gamma)) or float(gamma) < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma!r}")
    return beta, float(gamma), True


class TEM(ExponentialEmbeddingMechanism):
    """TEM, the metric truncated exponential mechanism (Algorithm 2), sampled exactly and fast.

    For an input word w, every vocabulary word y gets the score −min(d(w, y), γ); TEM outputs y
    with probability

        P[M(w) = y] = exp(−(ε/2)·min(d(w, y), γ)) / Σ_z exp(−(ε/2)·min(d(w, z), γ)).

    This is exactly Algorithm 2: Gumbel(0, 2/ε)-max over L_w = {y : d(w, y) ≤ γ} with scores
    −d(w, y), plus ⊥ with score −γ + 2·ln|W∖L_w|/ε (no ⊥ when W∖L_w is empty), then a uniform
    draw from W∖L_w when ⊥ wins. Gumbel-max selects i with probability ∝ exp((ε/2)·score_i), so
    ⊥ carries |W∖L_w|·exp(−εγ/2), split evenly over its |W∖L_w| words (Appendix A.1). The output
    is always a vocabulary word; the input word is never returned as a fallback.

    **Guarantee** (Theorem 2): ε·d-privacy, Pr[M(w)=y] ≤ exp(ε·d(w, w'))·Pr[M(w')=y], for the
    chosen metric d (any true metric), for all w, w' in the vocabulary ∪ {UNK}. UNK (every
    out-of-vocabulary word) is the vocabulary mean vector; its output distribution is the same
    closed form with distances from the mean. The proof of Theorem 2 only uses the triangle
    inequality in the ambient space, so it covers the mean point as well.

    **γ** (Theorem 3): γ = (2/ε)·ln((1−β)(|W|−1)/β) unless ``gamma`` is given; then the output is
    within distance γ of the input with probability ≥ 1 − β. Note ε·γ/2 does not depend on ε.

    **How it samples (exact at every ε).** Pre-processing (ε-independent, cached on disk; see
    :mod:`deniable.neighbors.neighborhoods`) stores for each word and for UNK its k nearest
    words (k = ``precomputed_neighbors``) with exact distances, and a bound b_w: every word
    outside the list is at distance ≥ b_w. Write u_y = exp(−(ε/2)·min(d(w, y), γ)), P_w = the
    listed words with d ≤ γ, and g = exp(−(ε/2)·min(b_w, γ)). Off the list u_y ≤ g, so for
    every y ∈ W

        u_y = (u_y − g)⁺·[y ∈ P_w]  +  g·min(1, u_y/g).

    One round draws from the envelope (u_y − g)⁺·[y ∈ P_w] + g (total S_w + |W|·g, S_w the
    listed excess): with probability S_w/(S_w + |W|g) a listed word ∝ (u_y − g)⁺ (inverse CDF,
    accepted); otherwise y uniform on W, accepted with probability min(1, u_y/g), which is 1
    when b_w ≥ γ (then u_y = g off P_w and no distance is computed), else needs the one
    distance d(w, y). A rejected round restarts from scratch. So a round returns y with
    probability ∝ (u_y − g)⁺[y ∈ P_w] + g·min(1, u_y/g) = u_y, and by standard rejection
    sampling the output is exactly P[y] ∝ u_y. Rounds per token are geometric with mean
    (S_w + |W|g)/Σu ≤ 1 + |W|·g/Σu: at large ε b_w ≥ γ for almost every word and a draw is a
    table lookup; at small ε (γ beyond most distances) g is the k-th neighbour's weight and the
    mean stays a few rounds on GloVe with k = 128. The batch is sampled with array operations;
    only the rejection rounds loop, over the tokens still pending. This is the library's one
    exact exponential sampler, :class:`~deniable.mechanisms._exponential.ExponentialSampler`
    (SanText, SanText+ and KnnTEM use it too).

    ``neighbors="radius"`` uses Algorithm 3's pre-computed L_w (b_w = γ, so no rejection ever);
    it is cached per γ and only practical where the neighbourhoods are small (large ε).

    **Large vocabularies** (``storage="compact"``, automatic above 8 million table entries, e.g.
    more than 62,000 words at ``precomputed_neighbors=128``): the cache keeps only the neighbour ids (int32, memory-mapped) and
    b_w, 4 bytes an entry instead of the 12 of ids plus distances and the 16 more of in-memory
    sampling tables; the build is resumable (see
    :func:`deniable.neighbors.neighborhoods.build_knn_ids`). For each batch the sampler
    recomputes the exact distances of the rows its tokens use and then runs the same rejection
    rounds, so the output distribution is the same P[y] ∝ u_y; only the order in which random
    numbers are drawn differs, so a seed gives other (equally distributed) outputs than the
    table sampler.

    Parameters
    ----------
    embedding, epsilon
        The :class:`~deniable.embeddings.Embedding`, and the privacy parameter ε > 0 (per unit
        of the metric).
    beta
        β in (0, 1) of Theorem 3, used for γ when ``gamma`` is None.
    gamma
        Truncation threshold γ ≥ 0 (``inf``: no truncation, the plain exponential mechanism).
    metric
        ``"euclidean"`` (default), ``"manhattan"``, ``"chebyshev"``, ``"angular"``, or a
        vectorized callable ``f(A, B) -> (len(A), len(B))`` distances, which must be a metric.
    precomputed_neighbors
        Nearest words stored per word for ``neighbors="knn"`` (default 128): a speed and memory
        setting, the output distribution does not depend on it (more: fewer rejection rounds at
        small ε, larger cache: (|W|+1)·precomputed_neighbors·12 bytes).
    neighbors
        ``"knn"`` (default) or ``"radius"``.
    cache_dir
        Folder of the neighbourhood cache (default ``$DENIABLE_CACHE_DIR`` or
        ``~/.cache/deniable``); ``False`` keeps it in memory only.
    memory_bytes
        Working-set bound of the pre-processing.
    storage
        ``"auto"`` (default), ``"table"`` (distances and sampling tables in memory: fastest
        sampling, (|W|+1)·precomputed_neighbors·~28 bytes) or ``"compact"`` (ids only, memory-mapped; ``knn`` only).
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): the
        output set W becomes the remaining words W' (the normalizer runs over W' only; Theorem 2's
        proof holds for any fixed output set), and the derived γ uses |W'| for |W|. Every word
        remains a valid input.
    k
        Deprecated alias of ``precomputed_neighbors`` (warns with a ``DeprecationWarning``);
        giving both with different values is an error.

    References
    ----------
    TEM paper, Algorithm 2 and Theorem 2 (§4; proof Appendix A.1), Theorem 3 (Appendix A.2),
    Algorithm 3 and Lemma B.1 (Appendix B).
    """

    name = "tem"
    deprecated_params = frozenset({"k"})

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        beta: float = 0.001,
        gamma: float | None = None,
        metric: str | Callable[[np.ndarray, np.ndarray], np.ndarray] = "euclidean",
        precomputed_neighbors: int = PRECOMPUTED_NEIGHBORS,
        neighbors: str = "knn",
        cache_dir: str | os.PathLike[str] | bool | None = None,
        memory_bytes: int = 64 << 20,
        storage: str = "auto",
        exclude_outputs: Any = None,
        k: int | None = None,
    ) -> None:
        n = precomputed_neighbors_param(type(self).__name__, precomputed_neighbors, k)
        super().__init__(embedding, epsilon=epsilon, metric=metric, precomputed_neighbors=n, cache_dir=cache_dir, exclude_outputs=exclude_outputs)
        # |W| of Theorem 3 is the number of possible outputs
        self.beta, self.gamma, self._gamma_given = truncation_gamma(self.epsilon, int(self.allowed_output_ids.size), beta, gamma)
        if neighbors not in ("knn", "radius"):
            raise ValueError(f"neighbors must be 'knn' or 'radius', got {neighbors!r}")
        self.neighbors = neighbors
        self.memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
        if storage not in ("auto", "table", "compact"):
            raise ValueError(f"storage must be 'auto', 'table' or 'compact', got {storage!r}")
        if storage == "compact" and neighbors != "knn":
            raise ValueError("storage='compact' needs neighbors='knn' (radius tables are stored in full)")
        self._storage_given = storage != "auto"
        if storage == "auto":
            storage = "compact" if neighbors == "knn" and (self.n_words + 1) * self.precomputed_neighbors > _COMPACT_ENTRIES else "table"
        self.storage = storage
        self._nb: Neighborhoods | KnnIds | None = None
        self._tables: SamplingTables | None = None

    # -- the distribution ------------------------------------------------------------------
    def distances_from(self, word_or_id: str | int, *, oov: str = "unk") -> np.ndarray:
        """d(w, y) for every vocabulary word y (float64, shape ``(|W|,)``). With ``oov="unk"``
        (default, as :meth:`privatize`) an out-of-vocabulary word is UNK, the vocabulary mean;
        ``"drop"``/``"keep"`` do not privatize unknown words and raise ``KeyError`` for them."""
        return self._row_distances(np.array([self._row(word_or_id, oov)]))[0]

    def _row_distances(self, rows: np.ndarray) -> np.ndarray:
        """d(q_r, y) for query rows ``rows`` (words, then UNK = row V) and every word y."""
        return pairwise_distances(self._pts[rows], self.embedding.vectors, self.metric)

    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """:meth:`log_probabilities` (P[M(w) = y] ∝ exp(−(ε/2)·min(d(w, y), γ))) for each id in
        ``ids`` (UNK_ID allowed), ``(len(ids), V)``, with one distance computation per ``block`` rows."""
        return self._over_vocabulary(self._log_rows(ids, block, radii=self.gamma)[1])

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        """``{"gamma"}`` when γ is derived from β and ε, else none."""
        return frozenset() if self._gamma_given else frozenset({"gamma"})

    def calibration_estimator(self) -> str:
        """``"kernel"`` (exact distance histograms) for the Euclidean metric, else as the base class."""
        return "kernel" if self.metric == "euclidean" and self._exclusion is None else super().calibration_estimator()

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"gamma": round(self.gamma, 6)}
        if not self._gamma_given:
            p["beta"] = self.beta
        p["metric"] = metric_name(self.metric)
        if self.neighbors == "knn":
            p["precomputed_neighbors"] = self.precomputed_neighbors
        else:
            p["neighbors"] = "radius"
        if self._storage_given:
            p["storage"] = self.storage
        return p

    # -- pre-processing --------------------------------------------------------------------
    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Neighborhoods | KnnIds:
        """Load or build (and cache) the neighbourhood table; sampling calls this on first use.
        A :class:`~deniable.neighbors.neighborhoods.KnnIds` with ``storage="compact"``."""
        if self._nb is None or rebuild:
            kw: dict[str, Any] = {"k": self.precomputed_neighbors} if self.neighbors == "knn" else {"gamma": self.gamma}
            self._nb, self.cache_file = embedding_neighborhoods(
                self.embedding,
                kind=self.neighbors,
                metric=self.metric,
                cache_dir=self.cache_dir,
                memory_bytes=self.memory_bytes,
                progress=progress,
                rebuild=rebuild,
                compact=self.storage == "compact",
                **kw,
            )
            self._tables = None
        return self._nb

    def sampler_summary(self) -> dict[str, float]:
        """How this ε samples on this vocabulary (builds the tables if needed):
        ``lookup_fraction``, the share of words whose draws never compute a distance (b_w ≥ γ);
        ``mean_listed``, the mean number of stored neighbours within γ; ``table_entries``."""
        if self.storage == "compact":
            return self._compact_summary()
        T = self._get_tables()
        n = self.n_words
        return {
            "lookup_fraction": float(T.complete[:n].mean()),
            "mean_listed": float(T.count[:n].mean()),
            "table_entries": float(T.ids.size),
        }

    def _get_tables(self) -> SamplingTables:
        if self._tables is None:
            nb = self.precompute()
            if not isinstance(nb, Neighborhoods):
                raise RuntimeError("in-memory sampling tables need storage='table'")
            if self._exclusion is not None:  # the table over the allowed outputs only
                nb = restrict_neighborhoods(nb, self._exclusion)
            self._tables = SamplingTables.from_neighborhoods(nb, self.epsilon / 2.0, self.gamma, int(self.allowed_output_ids.size))
        return self._tables

    # -- sampling --------------------------------------------------------------------------
    def _exact_sampler(self, tables: SamplingTables, points: Any) -> ExponentialSampler:
        """The exact sampler (:class:`~deniable.mechanisms._exponential.ExponentialSampler`, see
        "How it samples") over ``tables``, whose row r has the input point ``points[r]``."""
        return ExponentialSampler.from_tables(points, self._output_vectors(), tables, self.epsilon / 2.0, self.gamma, self.metric)

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows = self._sampler_rows(ids)
        if self.storage == "compact":  # tables for the distinct rows of this batch only
            uniq, inv = np.unique(rows, return_inverse=True)
            out = self._exact_sampler(self._compact_tables(uniq), RowSubset(self._pts, uniq)).sample(inv, rng)
        else:
            out = self._exact_sampler(self._get_tables(), self._pts).sample(rows, rng)
        return self._output_ids(out)  # positions among the allowed words

    # -- compact storage: exact distances of the rows in use, recomputed per batch ------------
    def _compact_tables(self, rows: np.ndarray) -> SamplingTables:
        """:class:`~deniable.mechanisms._exponential.SamplingTables` for the given table rows only
        (row i of the result is ``rows[i]``), from the compact table with each row's exact
        distances recomputed, ``_COMPACT_ROWS`` rows at a time."""
        nb = self.precompute()
        assert isinstance(nb, KnnIds)
        nid = np.asarray(nb.ids[rows])  # (U, k) from the memory map
        U, K = nid.shape
        d = np.empty((U, K))
        for c0 in range(0, U, _COMPACT_ROWS):
            r = rows[c0 : c0 + _COMPACT_ROWS]
            d[c0 : c0 + r.size] = row_distances(self._pts, self.embedding.vectors, np.repeat(r, K), nid[c0 : c0 + r.size].reshape(-1), self.metric).reshape(r.size, K)
        if self._exclusion is not None:  # excluded neighbours get zero weight; ids become positions among the allowed words
            nid, d = restrict_rows(nid, d, self._exclusion)
        return SamplingTables.from_rows(nid, d, nb.bound[rows], self.epsilon / 2.0, self.gamma, int(self.allowed_output_ids.size))

    def _compact_summary(self, n_rows: int = 4096) -> dict[str, float]:
        nb = self.precompute()
        assert isinstance(nb, KnnIds)
        n = self.n_words
        rows = np.arange(n) if n <= n_rows else np.sort(np.random.default_rng(0).choice(n, n_rows, replace=False))
        listed = 0.0
        for c0 in range(0, rows.size, _COMPACT_ROWS):
            r = rows[c0 : c0 + _COMPACT_ROWS]
            nid = np.asarray(nb.ids[r])
            d = row_distances(self._pts, self.embedding.vectors, np.repeat(r, nid.shape[1]), nid.reshape(-1), self.metric)
            listed += float((d <= self.gamma).sum())
        return {
            "lookup_fraction": float((nb.bound[:n] >= self.gamma).mean()),
            "mean_listed": listed / rows.size,  # over all words, or a fixed sample of 4,096
            "table_entries": float(nb.nnz),
        }
