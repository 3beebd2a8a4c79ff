"""k-nearest TEM: the exponential mechanism truncated at each word's k-th nearest distance.

Our own construction, not a published mechanism: TEM (Carvalho, Vasiloudis, Feyisetan, Wang,
"TEM: High Utility Metric Differential Privacy on Text", 2021) with a per-word truncation radius
γ_x, the distance from x to its k-th nearest word, instead of one global γ. It is sampled as TEM
is: Gumbel-max over the k nearest words and one element ⊥ standing for all the others (the
truncated Gumbel-max selection of Durfee & Rogers, NeurIPS 2019, in the form of TEM's Algorithm 2
and Appendix A.1). Its guarantee is proved below for this implementation.

It was published in this package under the name ``truncated_gumbel``, which is the name of a
different mechanism (Carvalho, Vasiloudis, Feyisetan, FLAIRS 2021, whose text we could not read;
re-implemented in ``mldp-text`` as noise added to distances): that name remains as a deprecated
alias (:mod:`deniable.mechanisms.truncated_gumbel`). See docs/mechanisms/knn_tem.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_int
from ..metrics import metric_name, pairwise_distances
from ..neighbors.neighborhoods import Neighborhoods, embedding_neighborhoods
from ._em_base import ExponentialEmbeddingMechanism
from ._exclude import restrict_neighborhoods
from ._exponential import ExponentialSampler

__all__ = ["KnnTEM"]


class KnnTEM(ExponentialEmbeddingMechanism):
    """k-nearest TEM: the exponential mechanism with scores truncated at the k-th nearest distance.

    For an input x let L_x be its k nearest vocabulary words (x itself first) and γ_x = d_k(x)
    the distance to the k-th of them. Then

        P[M(x) = y] = exp(−(ε/2)·min(d(x, y), γ_x)) / Σ_z exp(−(ε/2)·min(d(x, z), γ_x)),

    which :meth:`probabilities` evaluates in closed form. Equivalently (as for TEM, Appendix A.1
    of the TEM paper): every y ∈ L_x gets the score −d(x, y), ⊥ gets −γ_x + (2/ε)·ln|W ∖ L_x|,
    Gumbel(0, 2/ε) noise is added to each score and the highest wins; when ⊥ wins, a uniform
    word of W ∖ L_x is returned (never the input by fallback). Unlike TEM, the truncation radius
    adapts to the density around x (it is the k-th neighbour distance, not a global γ). Sampling
    is a table lookup per token (k weights + one uniform branch), exact.

    This is **not** the FLAIRS 2021 "truncated Gumbel" mechanism of Carvalho, Vasiloudis and
    Feyisetan (see the module note); it is a TEM variant.

    **Guarantee** (proved for this implementation): ε·d-privacy, P[M(x)=y] ≤
    exp(ε·d(x, x'))·P[M(x')=y] for all x, x' in the vocabulary ∪ {UNK}, d the chosen metric.
    Proof: the score s(x, y) = −min(d(x, y), d_k(x)) is 1-Lipschitz in x for every y, because
    d(·, y) is (triangle inequality) and so is d_k(·), the k-th smallest of the 1-Lipschitz
    functions d(·, z); a minimum of 1-Lipschitz functions is 1-Lipschitz. The exponential
    mechanism exp((ε/2)·s) with a score of sensitivity d(x, x') is ε·d-private. UNK (every
    out-of-vocabulary word) is the vocabulary mean vector, with its own k nearest words.

    Parameters
    ----------
    embedding, epsilon, metric
        As for :class:`~deniable.mechanisms.santext.SanText`: a
        :class:`~deniable.embeddings.Embedding`, ε > 0 per unit of distance, and the metric
        (``"euclidean"`` by default).
    k
        Candidate-list size, which defines the distribution (k ≥ |W| gives the untruncated
        exponential mechanism, i.e. SanText). Not a speed setting: the nearest-words table it
        reads is TEM's cached one, with at least 128 words per row (TEM's and SanText's
        ``precomputed_neighbors`` default).
    cache_dir
        Cache folder of the k-nearest tables, shared with TEM (``False``: memory only).
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): W
        becomes the remaining words W', L_x the k nearest words of W' and γ_x the distance to the
        k-th of them (still 1-Lipschitz: the k-th smallest of d(·, z) over the fixed set W'), so
        the guarantee holds with the same proof. Every word remains a valid input.

    References
    ----------
    Carvalho et al. 2021, TEM (Algorithm 2, Theorem 2, Appendix A.1); Durfee & Rogers 2019
    (truncated Gumbel-max top-k̄ selection). docs/mechanisms/knn_tem.md.
    """

    name = "knn_tem"

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        k: int = 20,
        metric: str | Callable[[np.ndarray, np.ndarray], np.ndarray] = "euclidean",
        cache_dir: str | os.PathLike[str] | bool | None = None,
        exclude_outputs: Any = None,
    ) -> None:
        super().__init__(embedding, epsilon=epsilon, metric=metric, cache_dir=cache_dir, exclude_outputs=exclude_outputs)
        self.k = check_int("k", k, minimum=1)  # the candidate-list size: it defines the distribution

    @property
    def _kk(self) -> int:
        return min(self.k, self._n_out)

    @property
    def _n_out(self) -> int:
        """Number of possible outputs (the vocabulary less ``exclude_outputs``)."""
        return int(self.allowed_output_ids.size)

    # -- pre-processing ------------------------------------------------------------------------
    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Neighborhoods:
        """The k-nearest lists with exact truncation radii γ_x (rows: words, then UNK); built from
        the cached k-nearest table (at least TEM's default ``precomputed_neighbors`` stored, shared
        with TEM)."""
        if self._nb is None or rebuild:
            kk, n_out = self._kk, self._n_out
            big, self.cache_file = embedding_neighborhoods(
                self.embedding, kind="knn", k=max(self.precomputed_neighbors, kk + 1) if kk < n_out else self.n_words, metric=self.metric,
                cache_dir=self.cache_dir, progress=progress, rebuild=rebuild,
            )
            if self._exclusion is not None:  # targets: positions among the allowed words (rows too short are recomputed below)
                big = restrict_neighborhoods(big, self._exclusion)
            R = big.n_rows
            sizes = np.diff(big.indptr)
            pos = np.minimum(big.indptr[:-1, None] + np.arange(kk)[None, :], max(big.nnz - 1, 0))
            ids = big.indices[pos].astype(np.int32)
            dist = big.distances[pos]
            gam = dist[:, -1].copy()
            # the first k entries are the k nearest when the k-th distance is within the bound
            # (the float32 pre-processing may lower the bound a little); otherwise recompute
            bad = np.flatnonzero((gam > big.bound) | (sizes < kk))
            targets = self.embedding.vectors if self._exclusion is None or bad.size == 0 else self.embedding.vectors[self._exclusion.allowed]
            for r in bad:
                row = pairwise_distances(self._pts[np.array([r])], targets, self.metric)[0]
                o = np.lexsort((np.arange(row.size), row))[:kk]
                ids[r], dist[r] = o, row[o]
            gam = dist[:, -1].copy()
            if kk >= n_out:
                gam[:] = np.inf
            self._nb = Neighborhoods(
                indptr=np.arange(R + 1, dtype=np.int64) * kk,
                indices=ids.reshape(-1),
                distances=dist.reshape(-1),
                bound=gam if kk < n_out else np.full(R, np.inf),
                kind="knn",
                param=float(kk),
                metric=metric_name(self.metric),
                n_vocab=n_out,
                fingerprint=self.embedding.fingerprint,
            )
            self._sampler = None
        return self._nb

    def truncation_radius(self, word_or_id: str | int) -> float:
        """γ_x = d_k(x), the distance from x to its k-th nearest word."""
        return float(self._radii()[self._row(word_or_id)])

    def _radii(self) -> np.ndarray:
        """γ of every row (words, then UNK); ∞ when k covers the vocabulary."""
        nb = self.precompute()
        return nb.distances[nb.indptr[1:] - 1] if self._kk < self._n_out else np.full(nb.n_rows, np.inf)

    def _get_sampler(self) -> ExponentialSampler:
        if self._sampler is None:
            nb = self.precompute()
            self._sampler = ExponentialSampler(self._pts, self._output_vectors(), nb, self.epsilon / 2.0, nb.bound, self.metric)
        return self._sampler

    # -- the distribution ----------------------------------------------------------------------
    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """:meth:`log_probabilities` for each id in ``ids`` (UNK_ID allowed), ``(len(ids), V)``,
        with one distance computation per ``block`` rows."""
        return self._over_vocabulary(self._log_rows(ids, block, radii=self._radii())[1])

    def self_probabilities(self, ids: Any, epsilons: Any, *, block: int = 64) -> np.ndarray:
        """``P[M(w) = w]`` for vocabulary ids ``w`` at each ε of ``epsilons`` (same k and
        metric; γ_w does not depend on ε), ``(len(ids), len(epsilons))`` float64, closed form
        with each word's distances computed once for the whole grid (for N_w calibration)."""
        return self._self_rows(ids, epsilons, block, radii=self._radii())[1]

    def _params(self) -> dict[str, Any]:
        return {"k": self.k, "metric": metric_name(self.metric)}
