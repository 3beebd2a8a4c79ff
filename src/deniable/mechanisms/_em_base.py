"""The base of the exponential mechanisms over an embedding's vectors: TEM, SanText, SanText+
and kNN-TEM.

Each samples P[M(x) = y] ∝ exp(−(ε/2)·s(x, y)) with its own score s over the possible outputs
(the vocabulary less ``exclude_outputs``), by the exact sampler of
:mod:`deniable.mechanisms._exponential`. What they share lives here: the parameters ``metric``,
``precomputed_neighbors`` and ``cache_dir``; the sampler's rows (the words, then UNK as row V);
outputs numbered among the allowed words; the closed-form probabilities of one word as a row of
the subclass's ``log_probability_rows``; and the guarantee's wording of the metric.

``precomputed_neighbors`` (formerly ``k``, still accepted as a deprecated alias by TEM, SanText,
SanText+ and 1-Diffractor: :func:`precomputed_neighbors_param`) is how many nearest words are
stored per word for the exact sampler: a speed and memory setting; the output distribution does
not depend on it. kNN-TEM's ``k`` is different: the size of its candidate lists, which defines its
distribution.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..metrics import MetricLike, pairwise_distances
from ._exclude import TargetSubset
from ._exponential import PointsWithUnk, log_probability_rows_by_block, self_probabilities_by_block
from ._params import check_cache_dir, check_metric, metric_text
from .base import EmbeddingMechanism, Guarantee

__all__ = ["ExponentialEmbeddingMechanism", "PRECOMPUTED_NEIGHBORS", "precomputed_neighbors_param"]

#: The default of ``precomputed_neighbors``: nearest words stored per word.
PRECOMPUTED_NEIGHBORS = 128


def precomputed_neighbors_param(owner: str, precomputed_neighbors: Any, k: Any = None) -> int:
    """``precomputed_neighbors`` (an int ≥ 1) of ``owner`` (a class or function name), given
    directly or through its deprecated alias ``k`` (not None: a ``DeprecationWarning`` naming
    ``precomputed_neighbors``, at the line that called the function that calls this one, so call
    it from the constructor or function the user calls). Both given with different values is a
    ``ValueError``."""
    if k is not None:
        warnings.warn(
            f"{owner}(k=...) is deprecated: pass precomputed_neighbors=... (how many nearest words are stored per word "
            "for the sampler; same values, same outputs)", DeprecationWarning, stacklevel=3,
        )
        if precomputed_neighbors != PRECOMPUTED_NEIGHBORS and precomputed_neighbors != k:
            raise ValueError(
                f"precomputed_neighbors={precomputed_neighbors!r} and its deprecated alias k={k!r} disagree; pass precomputed_neighbors= only"
            )
        precomputed_neighbors = k
    return check_int("precomputed_neighbors", precomputed_neighbors, minimum=1)


class ExponentialEmbeddingMechanism(EmbeddingMechanism):
    """An exponential mechanism over ``embedding``'s vectors with a ``metric`` (a name of
    :data:`~deniable.mechanisms._params.TEM_METRICS` or a callable), ``precomputed_neighbors``
    nearest words per word in its cached table (``cache_dir``; ``k`` is its deprecated alias),
    and ``exclude_outputs``.

    Subclasses define ``log_probability_rows`` (the closed form; :meth:`log_probabilities` and
    :meth:`probabilities` read one row of it) and either ``_get_sampler`` (an
    :class:`~deniable.mechanisms._exponential.ExponentialSampler` over the rows of
    :meth:`_sampler_rows`, used by :meth:`_sample_ids`) or their own ``_sample_ids``.
    """

    metric: MetricLike  # the guarantee's metric (see EmbeddingMechanism.metric_space)
    _nb: Any = None  # the neighbourhood table, built on first use (precompute)
    _sampler: Any = None  # the exact sampler of the subclasses that define _get_sampler, built on first use

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        metric: str | Callable[[np.ndarray, np.ndarray], np.ndarray] = "euclidean",
        precomputed_neighbors: int = PRECOMPUTED_NEIGHBORS,
        cache_dir: str | os.PathLike[str] | bool | None = None,
        exclude_outputs: Any = None,
        k: int | None = None,
    ) -> None:
        """Check and keep the shared parameters (SanText's constructor: it adds none). ``k`` is
        the deprecated alias of ``precomputed_neighbors`` (a subclass that resolves the alias in
        its own constructor passes the resolved value and no ``k``)."""
        super().__init__(embedding, epsilon=epsilon)
        self._set_exclusion(exclude_outputs, stacklevel=6)  # the warning names the caller of the subclass
        check_metric(metric, hamming_hint=type(self).__name__)
        self.metric = metric
        self.precomputed_neighbors = precomputed_neighbors_param(type(self).__name__, precomputed_neighbors, k)
        self.cache_dir = check_cache_dir(cache_dir)
        self.cache_file: Path | None = None
        self._pts = PointsWithUnk(self.embedding.vectors, self.embedding.mean)

    # -- rows and outputs ------------------------------------------------------------------
    def _row(self, word_or_id: str | int, oov: str = "unk") -> int:
        """The sampler row of a word (``oov`` as in :meth:`id_of`): its id, or V for UNK."""
        i = self.id_of(word_or_id, oov=oov)
        return self.n_words if i == UNK_ID else i

    def _sampler_rows(self, ids: np.ndarray) -> np.ndarray:
        """The sampler rows of validated ids (UNK_ID becomes row V)."""
        return np.where(ids == UNK_ID, self.n_words, ids)

    def _output_vectors(self) -> Any:
        """The output words' vectors: the embedding's, or a view of the allowed words'."""
        ex = self._exclusion
        return self.embedding.vectors if ex is None else TargetSubset(self.embedding.vectors, ex.allowed)

    def _output_matrix(self) -> np.ndarray:
        """The output words' vectors as one array (the allowed words' rows with ``exclude_outputs``)."""
        ex = self._exclusion
        return self.embedding.vectors if ex is None else self.embedding.vectors[ex.allowed]

    def _output_ids(self, out: np.ndarray) -> np.ndarray:
        """Vocabulary ids of sampled outputs numbered among the allowed words."""
        return out if self._exclusion is None else self._exclusion.allowed[out]

    def _over_vocabulary(self, part: np.ndarray) -> np.ndarray:
        """Log-probability rows over the allowed words ``(n, |W'|)`` as rows over the whole
        vocabulary ``(n, V)``: the excluded outputs have probability 0."""
        if self._exclusion is None:
            return part
        out = np.full((part.shape[0], self.n_words), -np.inf)
        out[:, self._exclusion.allowed] = part
        return out

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._output_ids(self._get_sampler().sample(self._sampler_rows(ids), rng))

    def _get_sampler(self) -> Any:  # pragma: no cover - every sampling subclass defines it
        raise NotImplementedError(f"{type(self).__name__} defines _get_sampler or _sample_ids")

    # -- the distribution ------------------------------------------------------------------
    def log_probabilities(self, word_or_id: str | int, *, oov: str = "unk") -> np.ndarray:
        """log P[M(x) = y] for every vocabulary word y (closed form, log-sum-exp; −inf for the
        excluded outputs): the one-row case of ``log_probability_rows``. With ``oov="unk"``
        (default, as :meth:`privatize`) an out-of-vocabulary word is UNK, the vocabulary mean;
        ``"drop"``/``"keep"`` do not privatize unknown words and raise ``KeyError`` for them."""
        return self.log_probability_rows(np.array([self.id_of(word_or_id, oov=oov)]))[0]

    def probabilities(self, word_or_id: str | int, *, oov: str = "unk") -> np.ndarray:
        """P[M(x) = y] over the vocabulary (float64, sums to 1); ``oov`` as in
        :meth:`log_probabilities`."""
        p = np.exp(self.log_probabilities(word_or_id, oov=oov))
        return p / p.sum()

    def _scores(self, rows: np.ndarray, targets: np.ndarray, radii: Any) -> np.ndarray:
        """d(row, target) for sampler ``rows`` and the ``targets`` vectors, truncated at
        ``radii`` (None: not truncated; a number: one γ; an array: γ of each row)."""
        d = pairwise_distances(self._pts[rows], targets, self.metric)
        if radii is None:
            return d
        return np.minimum(d, radii[rows][:, None] if isinstance(radii, np.ndarray) else radii)

    def _targets_of(self, target_ids: np.ndarray | None) -> np.ndarray:
        """The vectors of ``target_ids`` (None: :meth:`_output_matrix`)."""
        return self._output_matrix() if target_ids is None else self.embedding.vectors[target_ids]

    def _log_rows(self, ids: Any, block: int, *, radii: Any = None, target_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(validated ids, log P)`` of the exponential mechanism with scores :meth:`_scores`
        over the words ``target_ids`` (None: the allowed outputs), ``(len(ids), len(targets))``,
        one distance computation per ``block`` rows."""
        targets = self._targets_of(target_ids)
        return log_probability_rows_by_block(self, ids, targets.shape[0], lambda r: self._scores(r, targets, radii), block)

    def _self_rows(
        self, ids: Any, epsilons: Any, block: int, *, radii: Any = None, target_ids: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(validated ids, P[M(w) = w])`` of the same mechanism for vocabulary ids ``w`` at
        each ε of ``epsilons``, ``(len(ids), len(epsilons))``: each word's distances computed
        once for the whole grid (0 where w is not a target)."""
        t = self.allowed_output_ids if target_ids is None else target_ids
        targets = self._targets_of(target_ids)
        pos = np.full(self.n_words, -1, dtype=np.int64)
        pos[t] = np.arange(t.size)

        def scores_of(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            d = self._scores(b, targets, radii)
            p = pos[b]  # a word that is not a target is never its own output (nan: probability 0)
            return d, np.where(p >= 0, d[np.arange(b.size), np.maximum(p, 0)], np.nan)

        return self_probabilities_by_block(self, ids, epsilons, scores_of, block)

    def derive_guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, metric_text(self.metric), self._domain)

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        return frozenset()  # every parameter is the user's choice
