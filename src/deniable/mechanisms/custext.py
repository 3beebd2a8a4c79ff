"""CusText and CusText+: customized output sets and the exponential mechanism on normalized similarity.

Chen, Mo, Wang, Chen, Nie, Wang, Cui. "A Customized Text Sanitization Mechanism with
Differential Privacy", Findings of ACL 2023 (arXiv:2207.01193): the mapping of every input
token to a customized output set of K tokens, then the exponential mechanism with a normalized
similarity score (sensitivity 1) inside that set; CusText+ releases stop words unchanged.

Source note (details in docs/mechanisms/custext.md): the paper's full text could not be read, so
no section, algorithm or equation number is cited. The construction follows the authors'
reference code (github.com/sai4july/CusText, the conservative mapping) as restated in our
specification: output sets formed greedily, each head with its K most similar still-available
words; similarities min-max normalized to [0, 1] within the set; ε/2 in the exponent; a set
with fewer than K available candidates completed with already-assigned words scored as the
authors' overwritten placeholder vectors. The guarantee below is derived for this implementation.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_binary
from .._progress import progress_bar
from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..errors import DeniableWarning
from ..metrics import pairwise_distances
from ..neighbors.neighborhoods import cache_directory, embedding_neighborhoods, row_distances
from ._exclude import allowed_embedding, nearest_allowed
from ._exponential import PointsWithUnk
from ._params import check_cache_dir, check_flag, kept_stop_words
from ._scan import FreeScanner
from .base import EmbeddingMechanism, Guarantee

__all__ = ["CusText", "build_output_sets", "placeholder_distances"]

CUSTEXT_METRICS = ("euclidean", "angular", "cosine")
_FORMAT = 2
#: The authors' placeholder for a used word's vector in the Euclidean (GloVe) variant: 10⁹ in
#: every coordinate; in the cosine variant the zero vector (similarity 0, an angle of π/2).
PLACEHOLDER_COORDINATE = 1e9


def _cosine_distance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """1 − cos(a, b) for every row pair, in float64 (cosine similarity as a distance: min-max
    normalizing it gives the same score as normalizing the similarity)."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    A = A / np.linalg.norm(A, axis=1, keepdims=True)
    B = B / np.linalg.norm(B, axis=1, keepdims=True)
    return np.asarray(1.0 - A @ B.T)


def _set_metric(metric: str) -> str:
    """The metric the output sets are built with: cosine similarity ranks words as the angle does."""
    return "angular" if metric == "cosine" else metric


def placeholder_distances(points: np.ndarray, metric: str) -> np.ndarray:
    """Distance from each point to the authors' placeholder vector of a used word: to 10⁹·𝟙 for
    the Euclidean metric; π/2 (angle) or 1 (cosine distance) to the zero vector."""
    pts = np.asarray(points, dtype=np.float64)
    if metric == "euclidean":
        return np.asarray(np.sqrt(((pts - PLACEHOLDER_COORDINATE) ** 2).sum(axis=1)))
    return np.full(pts.shape[0], np.pi / 2 if metric == "angular" else 1.0)


def build_output_sets(
    embedding: Any, K: int, metric: str = "euclidean", *, complete: bool = True, k_lists: int = 128, cache_dir: Any = None, progress: bool | None = False
) -> np.ndarray:
    """The output sets of K words, built greedily as the authors' conservative mapping does.

    In vocabulary order (most frequent first, for GloVe/word2vec files), each word not yet
    assigned (a head) takes the K words most similar to it among the words still available
    (itself first; ties by id); the available ones among them are assigned to this set and stop
    being available. Returns ``members`` of shape ``(n_sets, K)``: row g lists set g's words.
    A word's own output set is the first row holding it.

    ``complete=True`` (the authors' construction): a used word stays a candidate at the similarity
    of the authors' placeholder vector (10⁹ in every coordinate for the Euclidean metric, which
    ranks it after every available word; the zero vector for the angle / cosine, which ranks it
    after the available words with positive cosine similarity and before the others). So a head
    with fewer than K available candidates above the placeholder (the last head, with fewer than
    K words left; with the angle also a head with few positively similar words left) completes
    its set with used words — we take the used words nearest to the head, ties by id (the
    authors' pick among their tied placeholders is arbitrary). Those words belong to an earlier
    set; they are outputs of this set's words, not members of it. ``complete=False``: no
    placeholders, the last set keeps only the words left (rows padded with −1), possibly one.

    Uses the cached k-nearest lists (``k_lists``) and falls back to an exact scan of the
    available words when a list runs out, so the result is exact. ``metric="cosine"`` builds the
    same sets as ``"angular"``.
    """
    metric = _set_metric(metric)
    V = len(embedding)
    K = min(K, V)
    nb, _ = embedding_neighborhoods(embedding, kind="knn", k=max(k_lists, K), metric=metric, cache_dir=cache_dir, progress=progress)
    scanner = FreeScanner(embedding.vectors, metric)
    free = np.ones(V, dtype=bool)
    sets: list[np.ndarray] = []
    n_free = V
    bar = progress_bar(V, f"CusText output sets (K={K})", progress)
    for head in range(V):
        if not free[head]:
            continue
        need = min(K, n_free)
        ids, d = nb.row(head)
        ok = free[ids]
        cand, cd = ids[ok], d[ok]
        if cand.size >= need and cd[need - 1] <= nb.bound[head] and head in cand[:need]:
            members = cand[:need].astype(np.int64)
        else:  # scan over the available words
            members = scanner.nearest(head, free, need)
            if head not in members:  # an available duplicate of the head with a lower distance tie
                members = np.r_[head, members[: need - 1]]
        row = members
        if complete:
            if metric == "angular":  # the placeholder (zero vector) outranks words at an angle above π/2
                far = pairwise_distances(embedding.vectors[head : head + 1], embedding.vectors[members], metric)[0] > np.pi / 2
                far[members == head] = False
            else:
                far = np.zeros(members.size, dtype=bool)
            near = members[~far]
            n_ph = min(K - near.size, V - n_free)
            if n_ph > 0:
                used = np.flatnonzero(~free)
                du = pairwise_distances(embedding.vectors[head : head + 1], embedding.vectors[used], metric)[0]
                ph = used[np.lexsort((used, du))[:n_ph]]
                members = np.r_[near, members[far][: K - near.size - n_ph]]
                row = np.r_[near, ph, members[near.size :]]
        free[members] = False
        n_free -= members.size
        sets.append(row)
        bar.update(members.size)
    bar.close()
    out = np.full((len(sets), K), -1, dtype=np.int64)
    for g, m in enumerate(sets):
        out[g, : m.size] = m
    return out


class CusText(EmbeddingMechanism):
    """CusText: each word is replaced by a word of its own output set, by the exponential mechanism.

    Pre-processing (public, ε-independent, cached): :func:`build_output_sets` groups the
    vocabulary into output sets of ``K`` words (every word has a set). For an input x with output
    set Y_x (x ∈ Y_x), the score of y ∈ Y_x is the normalized similarity

        u(x, y) = (s(x, y) − min_{z∈Y_x} s(x, z)) / (max_{z∈Y_x} s(x, z) − min_{z∈Y_x} s(x, z)) ∈ [0, 1]

    (1 for every y when all similarities are equal), s = −d for the Euclidean distance or the
    angle, s = cosine similarity for ``metric="cosine"``; a used word completing a set (see
    :func:`build_output_sets`) is scored as the authors' placeholder vector. Then

        P[M(x) = y] = exp(ε·u(x, y)/2) / Σ_{z∈Y_x} exp(ε·u(x, z)/2),   0 outside Y_x.

    UNK (every out-of-vocabulary word; the vocabulary mean vector) uses the output set of its
    nearest vocabulary word, with its own scores. **CusText+** (``keep_stop_words=True``)
    releases stop words unchanged (the shipped English list, or ``stop_words``).

    The authors' default is cosine similarity on counter-fitted word vectors (not bundled: pass
    them as the embedding, with ``metric="cosine"``); with GloVe they use the Euclidean distance,
    our default, which matches the bundled GloVe embedding.

    **Guarantee**: ε-DP between any two inputs that share an output set: P[M(x)=y] ≤
    e^ε·P[M(x')=y] (u has sensitivity 1 because it lies in [0, 1] for every input, so the
    exponential mechanism with ε/2 gives e^{ε/2}·e^{ε/2}). As metric DP: ε·d-privacy for the
    discrete metric d(x, x') = 0 if x = x', 1 if they share an output set, ∞ otherwise — words of
    different output sets have (apart from the used words completing a set) disjoint outputs, so
    **an output reveals which set its input came from** (the paper's design: indistinguishability
    only within a set of K). Stop words kept by CusText+ have no guarantee (d = ∞ to every other
    word): they are released verbatim.

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`.
    epsilon
        Privacy parameter ε > 0 (per pair of words in one output set).
    K
        Output-set size (the authors' default ``top_k`` = 20).
    metric
        ``"euclidean"`` (default), ``"cosine"`` (the authors' default similarity) or
        ``"angular"`` (the angle; sets as for cosine, scores linear in the angle).
    complete_sets
        True (default, the authors' construction): a set with fewer than K available
        candidates is completed with used words scored as placeholders. False: such a set
        stays smaller (the last set may hold a single word, which is then never replaced).
    keep_stop_words
        True: CusText+, stop words are released unchanged (outside the guarantee).
    stop_words
        The stop words for ``keep_stop_words`` (default: the shipped English list,
        :func:`deniable.text.stopwords.english_stop_words`).
    cache_dir
        Cache folder for the output sets and k-nearest lists (``False``: memory only).
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): the
        output sets are built over the remaining words only, and an excluded word, as an input,
        uses the output set of its nearest remaining word with its own scores (as UNK does); an
        excluded stop word is not kept. The guarantee is the same, with these sets.

    References
    ----------
    Chen et al. 2023 (customized output sets, exponential mechanism with normalized score,
    CusText+), as built by the authors' reference code. Specification: docs/mechanisms/custext.md.
    """

    name = "custext"

    @property
    def finite_metric(self) -> bool:
        """False unless one output set holds every word and no stop word is kept: d is ∞ across sets."""
        self.precompute()
        return int(np.unique(self._set_of).size) <= 1 and not self._is_stop.any()  # type: ignore[arg-type]

    def metric_space(self) -> None:
        """None: the guarantee's distance (0 / 1 within a set, ∞ across) has no point form."""
        return None

    metric: str  # the similarity of the output sets (see EmbeddingMechanism.metric_space)

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        K: int = 20,
        metric: str = "euclidean",
        complete_sets: bool = True,
        keep_stop_words: bool = False,
        stop_words: Sequence[str] | None = None,
        cache_dir: str | os.PathLike[str] | bool | None = None,
        exclude_outputs: Any = None,
    ) -> None:
        super().__init__(embedding, epsilon=epsilon, exclude_outputs=exclude_outputs)
        self.K = check_int("K", K, minimum=1)
        if metric not in CUSTEXT_METRICS:
            raise ValueError(f"metric must be one of {', '.join(CUSTEXT_METRICS)}, got {metric!r}")
        self.metric = metric
        self.complete_sets = check_flag("complete_sets", complete_sets)
        self.keep_stop_words = check_flag("keep_stop_words", keep_stop_words)
        self._stop_words_given = stop_words is not None
        self._is_stop = kept_stop_words(self, self.keep_stop_words, stop_words, variant=" (CusText+)")
        self.cache_dir = check_cache_dir(cache_dir)
        self._sets_embedding = self.embedding if self._exclusion is None else allowed_embedding(self.embedding, self._exclusion)
        self.cache_file: Path | None = None
        self._pts = PointsWithUnk(self.embedding.vectors, self.embedding.mean)
        self._members: np.ndarray | None = None
        self._set_of: np.ndarray | None = None  # (V + 1,) set index of each row (row V = UNK)
        self._cum: np.ndarray | None = None

    @property
    def stop_word_ids(self) -> np.ndarray:
        """Ids of the vocabulary words released unchanged (empty unless ``keep_stop_words``)."""
        return np.flatnonzero(self._is_stop)

    # -- pre-processing ----------------------------------------------------------------------
    def _cache_path(self) -> Path | None:
        if self.cache_dir is False:
            return None
        folder = cache_directory(None if self.cache_dir in (None, True) else self.cache_dir)
        kind = "" if self.complete_sets else "-partial"
        return folder / f"custext-sets-{self._sets_embedding.fingerprint}-{_set_metric(self.metric)}-K{self.K}{kind}-v{_FORMAT}.npz"

    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> np.ndarray:
        """Load or build (and cache) the output sets; returns ``members`` ``(n_sets, K)``."""
        if self._members is not None and not rebuild:
            return self._members
        path = self._cache_path()
        V = self.n_words
        sets_emb = self._sets_embedding  # the embedding, or its allowed words (exclude_outputs)
        members = None
        if path is not None and path.exists() and not rebuild:
            try:
                with np.load(path, allow_pickle=False) as z:
                    members = z["members"]
                if members.ndim != 2 or members.max() >= len(sets_emb) or np.unique(members[members >= 0]).size != len(sets_emb):
                    raise ValueError("inconsistent output sets")
            except (OSError, ValueError, KeyError) as exc:
                warnings.warn(f"{path}: unreadable cache file ({exc}); rebuilding it", DeniableWarning, stacklevel=2)
                members = None
        if members is None:
            members = build_output_sets(sets_emb, self.K, self.metric, complete=self.complete_sets, cache_dir=self.cache_dir, progress=progress)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with atomic_binary(path) as f:
                        np.savez(f, members=members)
                except OSError as exc:
                    warnings.warn(f"could not write the output-set cache {path} ({exc}); continuing without it", DeniableWarning, stacklevel=2)
                    path = None
        self.cache_file = path
        ex = self._exclusion
        if ex is not None:  # ids of the allowed words' embedding -> vocabulary ids
            members = np.where(members >= 0, ex.allowed[np.maximum(members, 0)], -1)
        set_of = np.full(V + 1, members.shape[0], dtype=np.int64)
        g, j = np.nonzero(members >= 0)
        np.minimum.at(set_of, members[g, j], g)  # the first row holding a word is its own set
        metric = _set_metric(self.metric)
        if ex is None:
            nearest = int(np.argmin(pairwise_distances(self.embedding.mean[None, :], self.embedding.vectors, metric)[0]))
        else:  # UNK and every excluded word: the output set of the nearest allowed word
            nearest = int(nearest_allowed(self.embedding.vectors, self.embedding.mean, ex, metric)[0])
            set_of[ex.excluded] = set_of[nearest_allowed(self.embedding.vectors, self.embedding.vectors[ex.excluded], ex, metric)]
        set_of[V] = set_of[nearest]
        self._members, self._set_of, self._cum = members, set_of, None
        return members

    def _row_members(self, rows: np.ndarray) -> np.ndarray:
        self.precompute()
        return self._members[self._set_of[rows]]  # type: ignore[index]

    def _scores(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), K) ε-free scores u in [0, 1] of each row's output set (NaN on padding):
        the logits are ε·u/2."""
        mem = self._row_members(rows)
        valid = mem >= 0
        own = self._set_of[np.where(valid, mem, 0)] == self._set_of[rows][:, None]  # type: ignore[index]
        real = valid & own
        src = np.repeat(rows, mem.shape[1])[real.ravel()]
        metric: Any = _cosine_distance if self.metric == "cosine" else self.metric
        d = np.full(mem.shape, np.nan)
        d[real] = row_distances(self._pts, self.embedding.vectors, src, mem[real], metric)
        ph = valid & ~own  # used words completing the set: the authors' placeholder vector
        if ph.any():
            d = np.where(ph, placeholder_distances(self._pts[rows], self.metric)[:, None], d)
        dmax = np.nanmax(d, axis=1, keepdims=True)
        dmin = np.nanmin(d, axis=1, keepdims=True)
        span = dmax - dmin
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.where(span > 0, (dmax - d) / np.where(span > 0, span, 1.0), 1.0)
        return np.where(valid, u, np.nan)

    def _logits(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), K) logits ε·u/2, −inf on padding."""
        return self._logits_of(self._scores(rows))

    def _logits_of(self, u: np.ndarray) -> np.ndarray:
        """The logits ε·u/2 of scores ``u`` (:meth:`_scores`), −inf on padding (NaN)."""
        return np.where(np.isnan(u), -np.inf, (self.epsilon / 2.0) * u)

    def _scores_path(self) -> Path | None:
        if self.cache_dir is False or self._exclusion is not None:
            return None
        folder = cache_directory(None if self.cache_dir in (None, True) else self.cache_dir)
        kind = "" if self.complete_sets else "-partial"
        return folder / f"custext-scores-{self.embedding.fingerprint}-{_set_metric(self.metric)}-K{self.K}{kind}-v{_FORMAT}.npz"

    def _all_scores(self) -> np.ndarray:
        """:meth:`_scores` of every row (the vocabulary's, then UNK's), ε-free: loaded from the
        cache folder, where they are stored next to the output sets they were computed from
        (and checked against them), or computed and stored there."""
        members = self.precompute()
        R = self.n_words + 1
        digest = hashlib.sha256(np.ascontiguousarray(members).tobytes()).hexdigest()
        path = self._scores_path()
        if path is not None and path.exists():
            try:
                with np.load(path, allow_pickle=False) as z:
                    scores, stored = z["scores"], str(z["members_sha256"])
                if scores.shape == (R, members.shape[1]) and scores.dtype == np.float64 and stored == digest:
                    return scores
            except (OSError, ValueError, KeyError) as exc:
                warnings.warn(f"{path}: unreadable cache file ({exc}); computing the scores again", DeniableWarning, stacklevel=3)
        scores = np.empty((R, members.shape[1]))
        for s in range(0, R, 4096):
            rows = np.arange(s, min(R, s + 4096))
            scores[rows] = self._scores(rows)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_binary(path) as f:
                    np.savez(f, scores=scores, members_sha256=np.array(digest))
            except OSError as exc:
                warnings.warn(f"could not write the score cache {path} ({exc}); continuing without it", DeniableWarning, stacklevel=3)
        return scores

    def _get_cum(self) -> np.ndarray:
        if self._cum is None:
            scores = self._all_scores()
            cum = np.empty(scores.shape)
            for s in range(0, scores.shape[0], 4096):
                rows = np.arange(s, min(scores.shape[0], s + 4096))
                lg = self._logits_of(scores[rows])
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

    def _kept(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ``ids`` (UNK_ID allowed) released unchanged (CusText+ stop words)."""
        return (ids != UNK_ID) & self._is_stop[np.maximum(ids, 0)]

    def output_set(self, word_or_id: str | int) -> list[str]:
        """The words an input can become (its output set; a kept stop word: itself)."""
        i = self.id_of(word_or_id, oov="unk")
        if self._kept(np.array([i]))[0]:
            return [self.embedding.words[i]]
        mem = self._row_members(np.array([self._row(word_or_id)]))[0]
        return [self.embedding.words[i] for i in mem[mem >= 0]]

    @property
    def has_exact_probabilities(self) -> bool:
        """Always True: :meth:`log_probabilities` is the closed form."""
        return True

    def log_probability_rows(self, ids: Any, *, block: int = 4096) -> np.ndarray:
        """``log P[M(x) = y]`` for each id x in ``ids`` (UNK_ID allowed) and every word y,
        ``(len(ids), V)`` float64: the log-softmax of the scores ε·u/2 inside x's output set,
        ``-inf`` outside it (a kept stop word: 0 at itself). ``block`` rows are computed at a time."""
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
        kept = np.flatnonzero(self._kept(ids))
        if kept.size:
            out[kept] = -np.inf
            out[kept, ids[kept]] = 0.0
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
        """0 for equal ids, 1 within an output set, ∞ across sets and between a kept stop word
        and any other word (see the class docstring)."""
        self.precompute()
        a = np.asarray(ids_a, dtype=np.int64)
        b = np.asarray(ids_b, dtype=np.int64)
        V = self.n_words
        sa = self._set_of[np.where(a == UNK_ID, V, a)]  # type: ignore[index]
        sb = self._set_of[np.where(b == UNK_ID, V, b)]  # type: ignore[index]
        same = (sa == sb) & ~self._kept(a) & ~self._kept(b)
        return np.where(a == b, 0.0, np.where(same, 1.0, np.inf))

    def derive_guarantee(self) -> Guarantee:
        what = {"euclidean": "Euclidean distance", "angular": "angle", "cosine": "cosine similarity"}[self.metric]
        domain = f"the {self.n_words} vocabulary words and UNK (the vocabulary mean vector, in the output set of its nearest word)"
        if self.keep_stop_words:
            n = int(self._is_stop.sum())
            domain = f"the {self.n_words - n} vocabulary words that are not stop words and UNK (the vocabulary mean vector, in the output set of its nearest word); the {n} stop words are released verbatim (CusText+) with no guarantee"
        return Guarantee(
            self.epsilon,
            f"discrete: 0 for the same word, 1 between words of the same output set (K={self.K} words grouped by {what}), "
            "infinite across output sets (an output reveals its input's set)",
            domain,
        )

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        return frozenset()  # every parameter is the user's choice

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"K": self.K, "metric": self.metric}
        if not self.complete_sets:
            p["complete_sets"] = False
        if self.keep_stop_words:
            p["keep_stop_words"] = True
            if self._stop_words_given:
                p["stop_words"] = f"{int(self._is_stop.sum())} given words [{hashlib.sha256(np.packbits(self._is_stop).tobytes()).hexdigest()[:12]}]"
        return p

    # -- sampling --------------------------------------------------------------------------------
    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cum = self._get_cum()
        rows = np.where(ids == UNK_ID, self.n_words, ids)
        u = rng.random(rows.size)
        j = (cum[rows] <= u[:, None]).sum(axis=1)
        out = self._members[self._set_of[rows], j]  # type: ignore[index]
        if self.keep_stop_words:
            out = np.where(self._kept(ids), ids, out)
        return out
