"""CusText: customized output sets and the exponential mechanism on normalized similarity.

Chen, Mo, Wang, Chen, Nie, Wang, Cui. "A Customized Text Sanitization Mechanism with
Differential Privacy", Findings of ACL 2023 (arXiv:2207.01193): the mapping of every input
token to a customized output set of K tokens, then the exponential mechanism with a normalized
similarity score (sensitivity 1) inside that set.

Source note (checked again for issue 13; details in docs/mechanisms/custext.md): the paper's full
text could not be found — abstract pages only — so no section, algorithm or equation number can be
cited. The abstract confirms a customized output set per input token and the original ε-DP
definition (not metric DP); the authors' README (github.com/sai4july/CusText) confirms ``top_k``
= 20 (our ``K``), counter-fitted word vectors, and a CusText+ variant that keeps stop words
(``--save_stop_words True``), which we do not offer. The construction below is the published one
as we know it, unchecked (output sets formed greedily in frequency order from each unassigned word
and its K − 1 nearest unassigned words; scores min-max normalized to [0, 1]; ε/2 in the exponent).
The guarantee below is proved for this implementation, independently of the paper's theorem.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_binary
from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..errors import DeniableWarning
from ..metrics import pairwise_distances
from ..neighbors.neighborhoods import _progress, cache_directory, embedding_neighborhoods, row_distances
from ._exponential import PointsWithUnk
from ._scan import FreeScanner
from .base import EmbeddingMechanism, Guarantee

__all__ = ["CusText", "build_output_sets"]

CUSTEXT_METRICS = ("euclidean", "angular")
_FORMAT = 1


def build_output_sets(
    embedding: Any, K: int, metric: str = "euclidean", *, k_lists: int = 128, cache_dir: Any = None, progress: bool | None = False
) -> np.ndarray:
    """Partition the vocabulary into output sets of K words (the last may be smaller).

    In vocabulary order (most frequent first, for GloVe/word2vec files), each word not yet
    assigned opens a set with itself and its K − 1 nearest unassigned words (ties by id). Every
    word belongs to exactly one set. Returns ``members`` of shape ``(n_sets, K)``, padded with −1.
    Uses the cached k-nearest lists (``k_lists``) and falls back to an exact scan of the
    unassigned words when a list runs out, so the result is exact.
    """
    V = len(embedding)
    K = min(K, V)
    nb, _ = embedding_neighborhoods(embedding, kind="knn", k=max(k_lists, K), metric=metric, cache_dir=cache_dir, progress=progress)
    scanner = FreeScanner(embedding.vectors, metric)
    free = np.ones(V, dtype=bool)
    sets: list[np.ndarray] = []
    n_free = V
    bar = _progress(V, progress, f"CusText output sets (K={K})")
    for head in range(V):
        if not free[head]:
            continue
        need = min(K, n_free)
        ids, d = nb.row(head)
        ok = free[ids]
        cand, cd = ids[ok], d[ok]
        if cand.size >= need and cd[need - 1] <= nb.bound[head] and head in cand[:need]:
            members = cand[:need].astype(np.int64)
        else:  # scan over the unassigned words
            members = scanner.nearest(head, free, need)
            if head not in members:  # an unassigned duplicate of the head with a lower distance tie
                members = np.r_[head, members[: need - 1]]
        free[members] = False
        n_free -= members.size
        sets.append(members)
        if bar is not None:
            bar.update(members.size)
    if bar is not None:
        bar.close()
    out = np.full((len(sets), K), -1, dtype=np.int64)
    for g, m in enumerate(sets):
        out[g, : m.size] = m
    return out


class CusText(EmbeddingMechanism):
    """CusText: each word is replaced by a word of its own output set, by the exponential mechanism.

    Pre-processing (public, ε-independent, cached): the vocabulary is partitioned into output
    sets of ``K`` words (:func:`build_output_sets`; every word has a set, the last set may be
    smaller). For an input x with output set Y_x (x ∈ Y_x), the score of y ∈ Y_x is the
    normalized similarity

        u(x, y) = (max_{z∈Y_x} d(x, z) − d(x, y)) / (max_{z∈Y_x} d(x, z) − min_{z∈Y_x} d(x, z)) ∈ [0, 1]

    (1 for every y when all distances are equal), d the Euclidean distance (or the angle), and

        P[M(x) = y] = exp(ε·u(x, y)/2) / Σ_{z∈Y_x} exp(ε·u(x, z)/2),   0 outside Y_x.

    UNK (every out-of-vocabulary word; the vocabulary mean vector) uses the output set of its
    nearest vocabulary word, with its own scores.

    **Guarantee**: ε-DP between any two inputs that share an output set: P[M(x)=y] ≤
    e^ε·P[M(x')=y] (u has sensitivity 1 because it lies in [0, 1] for every input, so the
    exponential mechanism with ε/2 gives e^{ε/2}·e^{ε/2}). As metric DP: ε·d-privacy for the
    discrete metric d(x, x') = 0 if x = x', 1 if they share an output set, ∞ otherwise —
    words of different output sets have disjoint outputs, so **an output reveals which set its
    input came from** (this is the paper's design: indistinguishability only within a set of K).

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`.
    epsilon
        Privacy parameter ε > 0 (per pair of words in one output set).
    K
        Output-set size (paper: 20 by default).
    metric
        ``"euclidean"`` or ``"angular"`` (the angle: cosine similarity's ranking).
    cache_dir
        Cache folder for the output sets and k-nearest lists (``False``: memory only).

    References
    ----------
    Chen et al. 2023 (customized output sets, exponential mechanism with normalized score; full
    text not available to us, see the module note).
    """

    name = "custext"
    @property
    def finite_metric(self) -> bool:
        """False unless one output set holds every word: d is ∞ across sets."""
        self.precompute()
        return int(np.unique(self._set_of).size) <= 1  # type: ignore[arg-type]

    def metric_space(self) -> None:
        """None: the guarantee's distance (0 / 1 within a set, ∞ across) has no point form."""
        return None
    metric: str  # the metric of the output sets (see EmbeddingMechanism.metric_space)

    def __init__(self, embedding: Any, *, epsilon: float, K: int = 20, metric: str = "euclidean", cache_dir: str | os.PathLike[str] | bool | None = None) -> None:
        super().__init__(embedding, epsilon=epsilon)
        self.K = check_int("K", K, minimum=1)
        if metric not in CUSTEXT_METRICS:
            raise ValueError(f"metric must be one of {', '.join(CUSTEXT_METRICS)}, got {metric!r}")
        if not (cache_dir is None or cache_dir is False or isinstance(cache_dir, (str, os.PathLike))):
            raise TypeError(f"cache_dir must be a path, None or False, got {type(cache_dir).__name__}")
        self.metric = metric
        self.cache_dir = cache_dir
        self.cache_file: Path | None = None
        self._pts = PointsWithUnk(self.embedding.vectors, self.embedding.mean)
        self._members: np.ndarray | None = None
        self._set_of: np.ndarray | None = None  # (V + 1,) set index of each row (row V = UNK)
        self._cum: np.ndarray | None = None

    # -- pre-processing ----------------------------------------------------------------------
    def _cache_path(self) -> Path | None:
        if self.cache_dir is False:
            return None
        folder = cache_directory(None if self.cache_dir in (None, True) else self.cache_dir)
        return folder / f"custext-sets-{self.embedding.fingerprint}-{self.metric}-K{self.K}-v{_FORMAT}.npz"

    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> np.ndarray:
        """Load or build (and cache) the output sets; returns ``members`` ``(n_sets, K)``."""
        if self._members is not None and not rebuild:
            return self._members
        path = self._cache_path()
        members = None
        if path is not None and path.exists() and not rebuild:
            try:
                with np.load(path, allow_pickle=False) as z:
                    members = z["members"]
                if members.ndim != 2 or members.max() >= self.n_words or np.count_nonzero(members >= 0) != self.n_words:
                    raise ValueError("inconsistent output sets")
            except (OSError, ValueError, KeyError) as exc:
                warnings.warn(f"{path}: unreadable cache file ({exc}); rebuilding it", DeniableWarning, stacklevel=2)
                members = None
        if members is None:
            members = build_output_sets(self.embedding, self.K, self.metric, cache_dir=self.cache_dir, progress=progress)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with atomic_binary(path) as f:
                        np.savez(f, members=members)
                except OSError as exc:
                    warnings.warn(f"could not write the output-set cache {path} ({exc}); continuing without it", DeniableWarning, stacklevel=2)
                    path = None
        self.cache_file = path
        V = self.n_words
        set_of = np.empty(V + 1, dtype=np.int64)
        g, j = np.nonzero(members >= 0)
        set_of[members[g, j]] = g
        nearest = int(np.argmin(pairwise_distances(self.embedding.mean[None, :], self.embedding.vectors, self.metric)[0]))
        set_of[V] = set_of[nearest]
        self._members, self._set_of, self._cum = members, set_of, None
        return members

    def _row_members(self, rows: np.ndarray) -> np.ndarray:
        self.precompute()
        return self._members[self._set_of[rows]]  # type: ignore[index]

    def _logits(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), K) logits ε·u/2, −inf on padding."""
        mem = self._row_members(rows)
        valid = mem >= 0
        src = np.repeat(rows, mem.shape[1])[valid.ravel()]
        d = np.full(mem.shape, np.nan)
        d[valid] = row_distances(self._pts, self.embedding.vectors, src, mem[valid], self.metric)
        dmax = np.nanmax(d, axis=1, keepdims=True)
        dmin = np.nanmin(d, axis=1, keepdims=True)
        span = dmax - dmin
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.where(span > 0, (dmax - d) / np.where(span > 0, span, 1.0), 1.0)
        return np.where(valid, (self.epsilon / 2.0) * u, -np.inf)

    def _get_cum(self) -> np.ndarray:
        if self._cum is None:
            R = self.n_words + 1
            cum = np.empty((R, min(self.K, self.n_words)))
            for s in range(0, R, 4096):
                rows = np.arange(s, min(R, s + 4096))
                lg = self._logits(rows)
                p = np.exp(lg - lg.max(axis=1, keepdims=True))
                c = np.cumsum(p, axis=1)
                c /= c[:, -1:]
                c[~np.isfinite(lg)] = 1.0
                last = np.isfinite(lg).sum(axis=1) - 1
                c[np.arange(rows.size), last] = 1.0
                cum[rows] = c
            self._cum = cum
        return self._cum

    # -- the distribution ----------------------------------------------------------------------
    def _row(self, word_or_id: str | int) -> int:
        i = self.id_of(word_or_id, oov="unk")
        return self.n_words if i == UNK_ID else i

    def output_set(self, word_or_id: str | int) -> list[str]:
        """The words an input can become (its output set)."""
        mem = self._row_members(np.array([self._row(word_or_id)]))[0]
        return [self.embedding.words[i] for i in mem[mem >= 0]]

    @property
    def has_exact_probabilities(self) -> bool:
        """Always True: :meth:`log_probabilities` is the closed form."""
        return True

    def log_probability_rows(self, ids: Any, *, block: int = 4096) -> np.ndarray:
        """``log P[M(x) = y]`` for each id x in ``ids`` (UNK_ID allowed) and every word y,
        ``(len(ids), V)`` float64: the log-softmax of the scores ε·u/2 inside x's output set,
        ``-inf`` outside it. ``block`` rows are computed at a time."""
        block = check_int("block", block, minimum=1)
        ids = self._as_ids(np.asarray(ids)).ravel()
        rows = np.where(ids == UNK_ID, self.n_words, ids)
        out = np.full((ids.size, self.n_words), -np.inf)
        for s in range(0, rows.size, block):
            r = rows[s : s + block]
            lg = self._logits(r)
            mem = self._row_members(r)
            m = lg.max(axis=1, keepdims=True)  # finite: every output set holds its own word
            logp = lg - (m + np.log(np.exp(lg - m).sum(axis=1, keepdims=True)))
            ok = mem >= 0
            out[np.repeat(np.arange(s, s + r.size), mem.shape[1])[ok.ravel()], mem[ok]] = logp[ok]
        return out

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """log P[M(x) = y] over the vocabulary (float64, ``-inf`` outside x's output set): the
        one-row case of :meth:`log_probability_rows`."""
        return self.log_probability_rows(np.array([self.id_of(word_or_id, oov="unk")]))[0]

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        """P[M(x) = y] over the vocabulary (float64, zero outside x's output set): the exp of
        :meth:`log_probabilities`."""
        return np.exp(self.log_probabilities(word_or_id))

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """0 for equal ids, 1 within an output set, ∞ across sets (see the class docstring)."""
        self.precompute()
        a = np.asarray(ids_a, dtype=np.int64)
        b = np.asarray(ids_b, dtype=np.int64)
        V = self.n_words
        sa = self._set_of[np.where(a == UNK_ID, V, a)]  # type: ignore[index]
        sb = self._set_of[np.where(b == UNK_ID, V, b)]  # type: ignore[index]
        return np.where(a == b, 0.0, np.where(sa == sb, 1.0, np.inf))

    @property
    def guarantee(self) -> Guarantee:
        what = "Euclidean distance" if self.metric == "euclidean" else "angle"
        return Guarantee(
            self.epsilon,
            f"discrete: 0 for the same word, 1 between words of the same output set (K={self.K} words grouped by {what}), "
            "infinite across output sets (an output reveals its input's set)",
            f"the {self.n_words} vocabulary words and UNK (the vocabulary mean vector, in the output set of its nearest word)",
        )

    def _params(self) -> dict[str, Any]:
        return {"K": self.K, "metric": self.metric}

    # -- sampling --------------------------------------------------------------------------------
    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cum = self._get_cum()
        rows = np.where(ids == UNK_ID, self.n_words, ids)
        u = rng.random(rows.size)
        j = (cum[rows] <= u[:, None]).sum(axis=1)
        return self._members[self._set_of[rows], j]  # type: ignore[index]
