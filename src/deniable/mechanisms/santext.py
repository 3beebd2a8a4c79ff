"""SanText and SanText+: exponential-mechanism word sanitization.

Yue, Du, Wang, Li, Sun, Chow. "Differential Privacy for Text Analytics via Natural Text
Sanitization", Findings of ACL-IJCNLP 2021, pp. 3853–3866 (arXiv:2106.01221) — the SanText
and SanText+ mechanisms, with the utility-optimized notion UMLDP.

Source note (checked again for issue 13; details in docs/mechanisms/santext.md): the paper's full
text could not be found — abstract pages only — so no section, algorithm or equation number can be
cited. The authors' README (github.com/xiangyue9607/SanText) confirms the two mechanisms and the
SanText+ parameters ``p`` (0.3 in its example) and the sensitive-word percentage (0.9), which are
our defaults for ``p`` and ``w``. The ε/2 in the exponent, SanText+'s replacement set V_S and
the wording of the paper's UMLDP theorem are unchecked. Every guarantee stated here is proved for
*this* implementation, in the docstrings, independently of the paper's theorems.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_int, check_unit_interval
from ..embeddings.embedding import UNK_ID
from ..metrics import MetricLike, MetricSpace, metric_name, paired_distances, pairwise_distances
from ..neighbors.neighborhoods import Neighborhoods, embedding_neighborhoods
from ._exponential import ExponentialSampler, PointsWithUnk, log_probability_rows_by_block, self_probabilities_by_block, subset_knn
from .base import EmbeddingMechanism, Guarantee
from .tem import _METRIC_TEXT, TEM_METRICS

__all__ = ["SanText", "SanTextPlus"]


def _check_metric(metric: Any) -> None:
    if isinstance(metric, str):
        if metric not in TEM_METRICS:
            raise ValueError(f"metric must be one of {', '.join(TEM_METRICS)} or a callable f(A, B), got {metric!r}")
    elif not callable(metric):
        raise TypeError(f"metric must be a metric name or a callable f(A, B), got {type(metric).__name__}")


def _check_cache_dir(cache_dir: Any) -> None:
    if not (cache_dir is None or cache_dir is False or isinstance(cache_dir, (str, os.PathLike))):
        raise TypeError(f"cache_dir must be a path, None or False, got {type(cache_dir).__name__}")


def _metric_text(metric: Any) -> str:
    text = _METRIC_TEXT.get(metric) if isinstance(metric, str) else None
    return text or f"user metric {metric_name(metric)} between embedding vectors (must be a true metric)"


class SanText(EmbeddingMechanism):
    """SanText: every word is replaced by a vocabulary word drawn by the exponential mechanism.

    For an input word x the output y ∈ W (the whole vocabulary, x included) has probability

        P[M(x) = y] = exp(−(ε/2)·d(x, y)) / Σ_z exp(−(ε/2)·d(x, z)),

    d the Euclidean distance between embedding vectors (Yue et al.; ``metric=`` allows the
    other true metrics TEM accepts). This is TEM without truncation (γ = ∞), and it is sampled
    exactly by TEM's sampler (k-nearest envelope + rejection, see
    :mod:`deniable.mechanisms._exponential`), fast at every ε.

    **Guarantee**: ε·d-privacy, P[M(x)=y] ≤ exp(ε·d(x, x'))·P[M(x')=y] for all x, x' in the
    vocabulary ∪ {UNK} and every output y (the exponential mechanism with score −d(x, y), whose
    sensitivity in x is d(x, x') by the triangle inequality; the ½ in the exponent pays for the
    normalizer). UNK, every out-of-vocabulary word, is the vocabulary mean vector.

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`.
    epsilon
        Privacy parameter ε > 0 (per unit of distance).
    metric
        ``"euclidean"`` (the paper's), ``"manhattan"``, ``"chebyshev"``, ``"angular"`` or a
        vectorized metric callable ``f(A, B)``.
    k
        Neighbours stored per word for the sampler (ε-independent, cached on disk, shared with
        TEM's cache).
    cache_dir
        Cache folder (default ``$DENIABLE_CACHE_DIR`` or ``~/.cache/deniable``); ``False``: memory only.

    References
    ----------
    Yue et al. 2021, "SanText" (sampling probability ∝ exp(−½·ε·d_euc) as we know it; full text
    not available to us, see the module note).
    """

    name = "santext"
    metric: MetricLike  # the guarantee's metric (see EmbeddingMechanism.metric_space)

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        metric: str | Callable[[np.ndarray, np.ndarray], np.ndarray] = "euclidean",
        k: int = 128,
        cache_dir: str | os.PathLike[str] | bool | None = None,
    ) -> None:
        super().__init__(embedding, epsilon=epsilon)
        _check_metric(metric)
        _check_cache_dir(cache_dir)
        self.metric = metric
        self.k = check_int("k", k, minimum=1)
        self.cache_dir = cache_dir
        self.cache_file: Path | None = None
        self._pts = PointsWithUnk(self.embedding.vectors, self.embedding.mean)
        self._nb: Neighborhoods | None = None
        self._sampler: ExponentialSampler | None = None

    # -- targets: the words an input can become ----------------------------------------------
    @property
    def target_ids(self) -> np.ndarray:
        """Vocabulary ids of the possible replacements (all words for SanText)."""
        return np.arange(self.n_words)

    def _row(self, word_or_id: str | int) -> int:
        i = self.id_of(word_or_id, oov="unk")
        return self.n_words if i == UNK_ID else i

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """log P[M(x) = y] for every vocabulary word y (closed form, log-sum-exp; the one-row
        case of :meth:`log_probability_rows`)."""
        return self.log_probability_rows(np.array([self.id_of(word_or_id, oov="unk")]))[0]

    def _em_log_probability_rows(self, ids: Any, block: int) -> tuple[np.ndarray, np.ndarray]:
        """(validated ids, log of the exponential mechanism over the targets for each of them:
        ``(len(ids), len(target_ids))``), ``block`` rows per distance computation."""
        targets = self.embedding.vectors[self.target_ids]
        return log_probability_rows_by_block(self, ids, targets.shape[0], lambda r: pairwise_distances(self._pts[r], targets, self.metric), block)

    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """``log P[M(x) = y]`` for each id in ``ids`` (UNK_ID allowed) and every word y,
        ``(len(ids), V)``: :meth:`log_probabilities` row by row, with one distance computation
        per ``block`` rows."""
        return self._em_log_probability_rows(ids, block)[1]

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        """P[M(x) = y] over the vocabulary (float64, sums to 1)."""
        p = np.exp(self.log_probabilities(word_or_id))
        return p / p.sum()

    def self_probabilities(self, ids: Any, epsilons: Any, *, block: int = 64) -> np.ndarray:
        """``P[M(w) = w]`` for vocabulary ids ``w`` at each ε of ``epsilons`` (this instance's
        other parameters), ``(len(ids), len(epsilons))`` float64, in closed form: the
        distances of a word are computed once for the whole ε grid (what N_w calibration
        needs; :meth:`probabilities` per word and ε recomputes them each time)."""
        t = self.target_ids
        pos = np.full(self.n_words, -1, dtype=np.int64)
        pos[t] = np.arange(t.size)
        targets = self.embedding.vectors[t]

        def scores_of(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            d = pairwise_distances(self._pts[b], targets, self.metric)
            p = pos[b]
            return d, np.where(p >= 0, d[np.arange(b.size), np.maximum(p, 0)], np.nan)

        ids, em = self_probabilities_by_block(self, ids, epsilons, scores_of, block)
        return self._self_from_em(ids, em)

    def _self_from_em(self, ids: np.ndarray, em: np.ndarray) -> np.ndarray:
        """P[M(w) = w] from the exponential mechanism's own-word probabilities (SanText: equal)."""
        return em

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        return paired_distances(self.points(ids_a), self.points(ids_b), self.metric)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, _metric_text(self.metric), self._domain)

    def _params(self) -> dict[str, Any]:
        return {"metric": metric_name(self.metric)}

    # -- pre-processing ----------------------------------------------------------------------
    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Neighborhoods:
        """Load or build (and cache) the k-nearest table; sampling calls this on first use."""
        if self._nb is None or rebuild:
            self._nb, self.cache_file = embedding_neighborhoods(
                self.embedding, kind="knn", k=self.k, metric=self.metric, cache_dir=self.cache_dir, progress=progress, rebuild=rebuild
            )
            self._sampler = None
        return self._nb

    def _get_sampler(self) -> ExponentialSampler:
        if self._sampler is None:
            self._sampler = ExponentialSampler(self._pts, self.embedding.vectors, self.precompute(), self.epsilon / 2.0, math.inf, self.metric)
        return self._sampler

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows = np.where(ids == UNK_ID, self.n_words, ids)
        return self._get_sampler().sample(rows, rng)


class SanTextPlus(SanText):
    """SanText+: only sensitive words are always replaced, replacements are sensitive words.

    The vocabulary is split by frequency: the fraction ``w`` of least frequent words is the
    sensitive set V_S, the rest V_N (``sensitive=`` gives V_S explicitly). For an input x:

    * x ∈ V_S or UNK: replaced by y ∈ V_S with probability ∝ exp(−(ε/2)·d(x, y));
    * x ∈ V_N: with probability p replaced the same way (by a word of V_S), otherwise (1 − p)
      kept unchanged.

    So P[M(x)=y] = [x∈V_S∪UNK]·E_x(y) + [x∈V_N]·(p·E_x(y) + (1−p)·[y=x]), E_x the exponential
    mechanism over V_S. Frequency order: the embedding's order (GloVe and word2vec files list
    words most frequent first), unless ``sensitive`` is given.

    Why replacements come from V_S: the paper's utility-optimized notion (UMLDP) lets an output
    in the unprotected set V_N have a single preimage (the kept word itself); a sensitive word
    mapped into V_N would break that. This is our reading of the paper's SanText+ definition.

    **Guarantee** (proved for this implementation): for all x, x' ∈ V_S ∪ {UNK} and every y,
    P[M(x)=y] ≤ exp(ε·d(x, x'))·P[M(x')=y] — ε·d-privacy over the sensitive words and UNK.
    Non-sensitive words get **no** metric-DP guarantee when p < 1: they are released verbatim with
    probability 1 − p (an output in V_N reveals its input), and for x ∈ V_S, x' ∈ V_N the ratio
    on sensitive outputs is bounded only by exp(ε·d(x, x'))/p (tested; it exceeds exp(ε·d) on a
    small space). :meth:`distance` is therefore
    ∞ between a non-sensitive word and any other word. With ``p = 1`` every word is replaced
    and the ε·d guarantee covers the whole vocabulary ∪ {UNK}.

    Parameters
    ----------
    embedding, epsilon, metric, k, cache_dir
        As for :class:`SanText`.
    w
        Fraction of the vocabulary, least frequent first, that is sensitive (paper default 0.9).
    p
        Probability that a non-sensitive word is replaced (paper default 0.3).
    sensitive
        Explicit sensitive words (overrides ``w``); unknown words raise ``KeyError``.

    References
    ----------
    Yue et al. 2021, "SanText+" (w, p; UMLDP, the utility-optimized MLDP notion; full text not
    available to us, see the module note).
    """

    name = "santext_plus"
    @property
    def finite_metric(self) -> bool:
        """False when some words are non-sensitive and p < 1: d is ∞ between them and any other."""
        return self.p >= 1 or bool(np.all(self.is_sensitive))

    def metric_space(self) -> MetricSpace | None:
        """The base metric space when d is finite (p = 1), else None (∞ for non-sensitive words)."""
        return super().metric_space() if self.finite_metric else None

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        w: float = 0.9,
        p: float = 0.3,
        sensitive: Sequence[str] | None = None,
        metric: str | Callable[[np.ndarray, np.ndarray], np.ndarray] = "euclidean",
        k: int = 128,
        cache_dir: str | os.PathLike[str] | bool | None = None,
    ) -> None:
        super().__init__(embedding, epsilon=epsilon, metric=metric, k=k, cache_dir=cache_dir)
        self.w = check_unit_interval("w", w)
        self.p = check_unit_interval("p", p)
        V = self.n_words
        if sensitive is None:
            n_s = int(round(self.w * V))
            if n_s < 1:
                raise ValueError(f"w={w!r} makes no word of the {V}-word vocabulary sensitive; use a larger w (SanText+ needs at least one replacement word)")
            ids = np.arange(V - n_s, V)
            self._sensitive_given = False
        else:
            if isinstance(sensitive, str) or not isinstance(sensitive, Sequence):
                raise TypeError(f"sensitive must be a list of words, got {type(sensitive).__name__}")
            ids = np.unique(np.array([self.vocabulary.id_of(s) for s in sensitive], dtype=np.int64))
            if ids.size == 0:
                raise ValueError("sensitive is empty; SanText+ needs at least one sensitive (replacement) word")
            self._sensitive_given = True
        self._targets = ids
        self.is_sensitive = np.zeros(V, dtype=bool)
        self.is_sensitive[ids] = True

    @property
    def target_ids(self) -> np.ndarray:
        """Vocabulary ids of the sensitive words V_S (the possible replacements)."""
        return self._targets

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """log P[M(x) = y] for every vocabulary word y (−inf where impossible): the one-row case
        of :meth:`log_probability_rows`."""
        return self.log_probability_rows(np.array([self.id_of(word_or_id, oov="unk")]))[0]

    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """:meth:`log_probabilities` for each id in ``ids`` (UNK_ID allowed), ``(len(ids), V)``,
        with one distance computation per ``block`` rows."""
        ids, em = self._em_log_probability_rows(ids, block)
        out = np.full((ids.size, self.n_words), -np.inf)
        sensitive = (ids == UNK_ID) | self.is_sensitive[np.maximum(ids, 0)]
        shift = np.where(sensitive, 0.0, math.log(self.p) if self.p > 0 else -np.inf)
        out[:, self._targets] = em + shift[:, None]
        if self.p < 1:
            r = np.flatnonzero(~sensitive)
            out[r, ids[r]] = np.logaddexp(out[r, ids[r]], math.log1p(-self.p))
        return out

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        p = np.exp(self.log_probabilities(word_or_id))
        return p / p.sum()

    def _self_from_em(self, ids: np.ndarray, em: np.ndarray) -> np.ndarray:
        # a sensitive word is always replaced (by the mechanism over V_S, itself included); a
        # non-sensitive one is kept with probability 1 − p and is never a replacement
        keep = np.where(self.is_sensitive[ids], 0.0, 1.0 - self.p)[:, None]
        return np.where(self.is_sensitive[ids][:, None], em, keep)

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """Euclidean (or ``metric``) distance between sensitive words / UNK; ∞ when one of two
        different words is non-sensitive and p < 1 (no metric-DP for them, see the class doc)."""
        a = np.asarray(ids_a, dtype=np.int64)
        b = np.asarray(ids_b, dtype=np.int64)
        d = super().distance(a, b)
        if self.p < 1:
            open_a = (a != UNK_ID) & ~self.is_sensitive[np.maximum(a, 0)]
            open_b = (b != UNK_ID) & ~self.is_sensitive[np.maximum(b, 0)]
            d = np.where((open_a | open_b) & (a != b), np.inf, d)
        return d

    @property
    def guarantee(self) -> Guarantee:
        n_s = int(self._targets.size)
        if self.p >= 1:
            domain = f"the {self.n_words} vocabulary words and UNK (the vocabulary mean vector); outputs are the {n_s} sensitive words"
        else:
            rule = "given list" if self._sensitive_given else f"the {self.w:g} least frequent fraction"
            domain = (
                f"the {n_s} sensitive words ({rule}) and UNK (the vocabulary mean vector); the other "
                f"{self.n_words - n_s} words are kept verbatim with probability {1 - self.p:g} and have no metric-DP guarantee"
            )
        return Guarantee(self.epsilon, _metric_text(self.metric), domain)

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"w": self.w} if not self._sensitive_given else {"sensitive": f"{self._targets.size} words"}
        p["p"] = self.p
        p["metric"] = metric_name(self.metric)
        return p

    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Neighborhoods:
        if self._nb is None or rebuild:
            if self._targets.size == self.n_words:
                return super().precompute(progress=progress, rebuild=rebuild)
            if rebuild and self.cache_file is not None and self.cache_file.exists():
                self.cache_file.unlink()
            self._nb, self.cache_file = subset_knn(
                self.embedding, self._targets, self.k, self.metric, cache_dir=self.cache_dir, progress=progress, tag="santext-plus"
            )
            self._sampler = None
        return self._nb

    def _get_sampler(self) -> ExponentialSampler:
        if self._sampler is None:
            targets = np.ascontiguousarray(self.embedding.vectors[self._targets])
            self._sampler = ExponentialSampler(self._pts, targets, self.precompute(), self.epsilon / 2.0, math.inf, self.metric)
        return self._sampler

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        V = self.n_words
        rows = np.where(ids == UNK_ID, V, ids)
        out = ids.copy()
        if self.p >= 1:
            replace = np.ones(ids.shape[0], dtype=bool)
        else:
            sens = (ids == UNK_ID) | self.is_sensitive[np.maximum(ids, 0)]
            replace = sens | (rng.random(ids.shape[0]) < self.p)
        idx = np.flatnonzero(replace)
        if idx.size:
            out[idx] = self._targets[self._get_sampler().sample(rows[idx], rng)]
        return out
