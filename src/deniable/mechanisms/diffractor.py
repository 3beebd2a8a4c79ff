"""1-Diffractor: word-level metric DP on one-dimensional word lists.

Meisenbacher, Chevli, Matthes. "1-Diffractor: Efficient and Utility-Preserving Text
Obfuscation Leveraging Word-Level Metric Differential Privacy", IWSPA @ CODASPY 2024
(arXiv:2405.01678): each embedding is turned into a 1-D list of words, a word becomes a position,
geometric (or TEM) noise moves the position, and the word at the new position is the output.

Source note (details in docs/mechanisms/diffractor.md): the paper's full text could not be read,
so no section, algorithm or equation number is cited. The construction follows the authors'
code (the ``dp-diffractor`` package and the earlier research script) as restated in our
specification: one list per embedding model, built greedily from a start word by appending the
nearest unlisted word; several lists, with the output chosen uniformly among the lists'
candidates; the truncated geometric mechanism (clamping at the ends; Ghosh, Roughgarden &
Sundararajan, STOC 2009) or TEM on positions; stop words optionally kept. Restricting the
geometric noise to the list and renormalizing instead would not be ε·d-private (measured in the
docs and in tests/mechanisms/test_diffractor.py). The guarantee stated here is derived for this
implementation.
"""

from __future__ import annotations

import hashlib
import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_binary
from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..errors import DeniableWarning
from ..metrics import pairwise_distances
from ..neighbors.neighborhoods import cache_directory
from ._em_base import PRECOMPUTED_NEIGHBORS, precomputed_neighbors_param
from ._exclude import allowed_embedding, nearest_allowed
from ._params import TEM_METRICS, check_cache_dir, check_flag, kept_stop_words
from ._word_lists import greedy_word_list
from .base import EmbeddingMechanism, Guarantee
from .tem import truncation_gamma

__all__ = ["Diffractor", "greedy_word_list"]

_FORMAT = 1
NOISES = ("geometric", "tem")


class Diffractor(EmbeddingMechanism):
    """1-Diffractor: noise on a word's position in 1-D word lists.

    Pre-processing (public, ε-independent, cached on disk): one list per combination of a list
    embedding (``lists``, default the mechanism's own embedding), a metric (``metrics``) and a
    start word (``starts``), each ordering the whole vocabulary by :func:`greedy_word_list` (a
    nearest-neighbour chain, so neighbouring positions hold similar words). For an input w, each
    list l gives a candidate c_l = L_l[j_l] with j_l the noisy position of i_l = pos_l(w), and the
    output is one candidate chosen uniformly (sampled as: a uniform list, then its noise — the
    same distribution):

    * ``noise="geometric"``: j = clamp(i + K, 0, |W| − 1), K two-sided geometric,
      P[K = k] = (1 − α)/(1 + α)·α^|k| with α = e^(−ε) (the discrete Laplace mechanism; with the
      clamping, the truncated geometric mechanism of Ghosh, Roughgarden & Sundararajan 2009);
    * ``noise="tem"``: P[j] ∝ exp(−(ε/2)·min(|j − i|, γ)) over all positions (TEM on the line;
      γ from TEM's Theorem 3 with ``beta`` unless given; the authors' default is γ = 5).

    With geometric noise the first and last word of each list keep themselves with probability
    1/(1 + e^(−ε)) ≥ ½ at every ε (clamping; see docs/mechanisms/diffractor.md): a worst-case
    N_w target below ½ needs ``noise="tem"`` (or several lists with other ends).

    Both are sampled exactly and vectorized (:meth:`log_probabilities` is the closed form, in
    log space, and :meth:`probabilities` its exp).

    **Guarantee**: ε·d-privacy with d(w, w') = max_l |pos_l(w) − pos_l(w')|, the largest
    distance between the two words' positions over the lists, for all w, w' in the
    vocabulary ∪ {UNK} (stop words excepted when kept). Per list, the geometric mechanism gives
    ratio ≤ α^(−|i−i'|) (clamping is post-processing) and TEM gives exp(ε·|i − i'|) (TEM
    Theorem 2, positions form a metric); the output is a uniform mixture over the lists (every
    word is in every list), whose ratio is at most the largest per-list ratio. UNK (every
    out-of-vocabulary word) takes, in each list, the position of the word nearest that list
    embedding's mean vector (so it shares that word's outputs). With ``keep_stop_words`` stop
    words are released verbatim with no guarantee (d = ∞ to every other word), as the authors'
    package does by default. Note the unit: one position, not an embedding distance — ε here is
    not comparable with Madlib's ε.

    Parameters
    ----------
    embedding
        A :class:`~deniable.embeddings.Embedding`: the vocabulary (inputs and outputs).
    epsilon
        Privacy parameter ε > 0 (per list position).
    noise
        ``"geometric"`` (default) or ``"tem"``.
    metrics
        One list per metric (names TEM accepts), default ``("euclidean",)``; e.g.
        ``("euclidean", "angular")`` for two lists.
    lists
        Embeddings to build lists from, one list each (per metric and start word), default
        ``(embedding,)``. Each must hold every vocabulary word (restrict them to one shared
        vocabulary first, as the authors do); only those words' vectors are used.
    starts
        Start word(s) of the lists (words or ids), one list each; default word 0.
    keep_stop_words
        True: stop words are released unchanged (the authors' package default), outside the
        guarantee. Default False: every word is perturbed.
    stop_words
        The stop words for ``keep_stop_words`` (default: the shipped English list).
    beta, gamma
        TEM truncation (``noise="tem"``): γ = (2/ε)·ln((1−β)(|W|−1)/β) unless ``gamma`` is given.
    precomputed_neighbors
        Nearest words stored per word (default 128), used to build the word lists quickly: a
        speed and memory setting, the lists (exact either way) and so the output distribution do
        not depend on it.
    cache_dir
        Cache folder (``False``: memory only).
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): the
        lists order the remaining words only (|W'| positions; γ from Theorem 3 with |W'|), and an
        excluded word, as an input, takes in each list the position of its nearest remaining word
        (as UNK does); an excluded stop word is not kept. A start word must not be excluded (the
        default start, word 0, moves to the first remaining word). Same guarantee, with these lists.
    k
        Deprecated alias of ``precomputed_neighbors`` (warns with a ``DeprecationWarning``);
        giving both with different values is an error.

    References
    ----------
    Meisenbacher, Chevli, Matthes 2024 (1-Diffractor; the lists, the uniform choice among them
    and the stop-word option as in the authors' code); Ghosh, Roughgarden, Sundararajan 2009
    (truncated geometric mechanism); TEM paper, Algorithm 2, Theorems 2–3. Specification:
    docs/mechanisms/diffractor.md.
    """

    name = "diffractor"
    deprecated_params = frozenset({"k"})

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        noise: str = "geometric",
        metrics: Sequence[str] | str = ("euclidean",),
        lists: Sequence[Any] | None = None,
        starts: Sequence[str | int] | str | int = 0,
        keep_stop_words: bool = False,
        stop_words: Sequence[str] | None = None,
        beta: float = 0.001,
        gamma: float | None = None,
        precomputed_neighbors: int = PRECOMPUTED_NEIGHBORS,
        cache_dir: str | os.PathLike[str] | bool | None = None,
        exclude_outputs: Any = None,
        k: int | None = None,
    ) -> None:
        n_precomputed = precomputed_neighbors_param(type(self).__name__, precomputed_neighbors, k)
        super().__init__(embedding, epsilon=epsilon, exclude_outputs=exclude_outputs)
        if noise not in NOISES:
            raise ValueError(f"noise must be one of {', '.join(NOISES)}, got {noise!r}")
        self.noise = noise
        if isinstance(metrics, str):
            metrics = (metrics,)
        if not isinstance(metrics, Sequence) or len(metrics) == 0:
            raise TypeError(f"metrics must be a non-empty list of metric names, got {metrics!r}")
        for m in metrics:
            if m not in TEM_METRICS:
                raise ValueError(f"each metric must be one of {', '.join(TEM_METRICS)}, got {m!r}")
        if len(set(metrics)) != len(metrics):
            raise ValueError(f"metrics has duplicates: {list(metrics)!r}")
        self.metrics = tuple(metrics)
        self._lists_given = lists is not None
        self.list_embeddings = self._check_lists(lists)
        self.starts = self._check_starts(starts)
        #: (list embedding, metric, start id) of each list, in list order
        self.list_specs: list[tuple[Any, str, int]] = [(e, m, s0) for e in self.list_embeddings for m in self.metrics for s0 in self.starts]
        self.keep_stop_words = check_flag("keep_stop_words", keep_stop_words)
        self._stop_words_given = stop_words is not None
        self._is_stop = kept_stop_words(self, self.keep_stop_words, stop_words)
        # |W| of Theorem 3: the list length (the possible outputs)
        self.beta, self.gamma, self._gamma_given = truncation_gamma(self.epsilon, int(self.allowed_output_ids.size), beta, gamma)
        self.precomputed_neighbors = n_precomputed
        self.cache_dir = check_cache_dir(cache_dir)
        self.cache_files: list[Path] = []
        self._order: np.ndarray | None = None  # (L, V) word id at each position
        self._pos: np.ndarray | None = None  # (L, V + 1) position of each row (row V = UNK)
        self._built_specs = self._exclusion_specs(starts)

    def _check_lists(self, lists: Sequence[Any] | None) -> list[Any]:
        """The list embeddings, each restricted to the vocabulary's words in its order."""
        from ..embeddings.embedding import Embedding

        if lists is None:
            return [self.embedding]
        if isinstance(lists, (str, Embedding)) or not isinstance(lists, Sequence) or len(lists) == 0:
            raise TypeError(f"lists must be a non-empty list of deniable.Embedding (one list each), got {type(lists).__name__}")
        words = self.embedding.words
        out = []
        for n, e in enumerate(lists):
            if not isinstance(e, Embedding):
                raise TypeError(f"lists[{n}] must be a deniable.Embedding, got {type(e).__name__}")
            if e is self.embedding or e.words == words:
                out.append(e)
                continue
            missing = [w for w in words if w not in e]
            if missing:
                raise ValueError(
                    f"lists[{n}] lacks {len(missing)} of the vocabulary's {len(words)} words (first: {missing[0]!r}); every list must order "
                    "the whole vocabulary: restrict the embeddings to their shared words first (Embedding.restrict(words=...))"
                )
            out.append(e.restrict(words=words))
        return out

    def _exclusion_specs(self, starts: Any) -> list[tuple[Any, str, int]]:
        """(embedding, metric, start) each list is built from: :attr:`list_specs`, or with
        ``exclude_outputs`` the list embeddings restricted to the allowed words and the starts
        as their ids there."""
        ex = self._exclusion
        if ex is None:
            return list(self.list_specs)
        where = np.full(self.n_words, -1, dtype=np.int64)
        where[ex.allowed] = np.arange(ex.allowed.size)
        subs = {id(e): allowed_embedding(e, ex) for e in self.list_embeddings}
        out = []
        for e, m, s0 in self.list_specs:
            if where[s0] < 0:
                if starts != 0:
                    raise ValueError(f"start word {self.embedding.words[s0]!r} is excluded by exclude_outputs; pass starts= a word that is not excluded")
                s0 = int(ex.allowed[0])  # the default start moves to the first allowed word
            out.append((subs[id(e)], m, int(where[s0])))
        return out

    def _check_starts(self, starts: Sequence[str | int] | str | int) -> tuple[int, ...]:
        items = [starts] if isinstance(starts, (str, int, np.integer)) else starts
        if not isinstance(items, Sequence) or len(items) == 0:
            raise TypeError(f"starts must be a word, an id or a non-empty list of them, got {starts!r}")
        ids = []
        for s0 in items:
            if isinstance(s0, str):
                ids.append(self.vocabulary.id_of(s0))
            elif isinstance(s0, (int, np.integer)) and not isinstance(s0, bool):
                if not 0 <= int(s0) < self.n_words:
                    raise ValueError(f"start id {s0} is outside the vocabulary [0, {self.n_words - 1}]")
                ids.append(int(s0))
            else:
                raise TypeError(f"a start must be a word or an id, got {type(s0).__name__}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"starts has duplicates: {list(items)!r}")
        return tuple(ids)

    # -- pre-processing ----------------------------------------------------------------------
    def _cache_path(self, emb: Any, metric: str, start: int = 0) -> Path | None:
        if self.cache_dir is False:
            return None
        folder = cache_directory(None if self.cache_dir in (None, True) else self.cache_dir)
        tag = "" if start == 0 else f"-s{start}"
        return folder / f"diffractor-list-{emb.fingerprint}-{metric}{tag}-v{_FORMAT}.npz"

    def _load_or_build(self, emb: Any, metric: str, start: int, progress: bool | None = False) -> np.ndarray:
        path = self._cache_path(emb, metric, start)
        V = len(emb)
        if path is not None and path.exists():
            try:
                with np.load(path, allow_pickle=False) as z:
                    order = z["order"]
                if order.shape != (V,) or not np.array_equal(np.sort(order), np.arange(V)) or order[0] != start:
                    raise ValueError("not a permutation of the vocabulary from the start word")
                self.cache_files.append(path)
                return order.astype(np.int64)
            except (OSError, ValueError, KeyError) as exc:
                warnings.warn(f"{path}: unreadable cache file ({exc}); rebuilding it", DeniableWarning, stacklevel=3)
        order = greedy_word_list(emb, metric, start=start, precomputed_neighbors=self.precomputed_neighbors, cache_dir=self.cache_dir, progress=progress)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_binary(path) as f:
                    np.savez(f, order=order)
                self.cache_files.append(path)
            except OSError as exc:
                warnings.warn(f"could not write the word-list cache {path} ({exc}); continuing without it", DeniableWarning, stacklevel=3)
        return order

    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> np.ndarray:
        """Load or build (and cache) the word lists; returns ``order`` of shape ``(L, |W|)``."""
        if self._order is None or rebuild:
            if rebuild:
                for e, m, s0 in self._built_specs:
                    p = self._cache_path(e, m, s0)
                    if p is not None and p.exists():
                        p.unlink()
            self.cache_files = []
            V = self.n_words
            order = np.stack([self._load_or_build(e, m, s0, progress) for e, m, s0 in self._built_specs])
            ex = self._exclusion
            if ex is not None:  # ids of the allowed words' embedding -> vocabulary ids
                order = ex.allowed[order]
            pos = np.empty((len(self.list_specs), V + 1), dtype=np.int64)
            for l, (e, m, _) in enumerate(self.list_specs):
                pos[l, order[l]] = np.arange(order.shape[1])
                if ex is None:
                    nearest = int(np.argmin(pairwise_distances(e.mean[None, :], e.vectors, m)[0]))
                else:  # UNK and every excluded word: the position of the nearest allowed word
                    nearest = int(nearest_allowed(e.vectors, e.mean, ex, m)[0])
                    pos[l, ex.excluded] = pos[l, nearest_allowed(e.vectors, e.vectors[ex.excluded], ex, m)]
                pos[l, V] = pos[l, nearest]
            self._order, self._pos = order, pos
        return self._order

    # -- the distribution ----------------------------------------------------------------------
    def _rows(self, ids: np.ndarray) -> np.ndarray:
        return np.where(ids == UNK_ID, self.n_words, ids)

    def positions(self, word_or_id: str | int) -> np.ndarray:
        """Position of a word (or UNK) in each list."""
        self.precompute()
        i = self.id_of(word_or_id, oov="unk")
        return self._pos[:, self.n_words if i == UNK_ID else i].copy()  # type: ignore[index]

    def _position_log_probabilities(self, i: np.ndarray) -> np.ndarray:
        """log P[output position = j | input position i] for one list, in closed form:
        ``(len(i), V)`` for input positions ``i`` and j = 0..V−1.

        Geometric: log((1 − α)/(1 + α)) − ε·|j − i| inside the list, and at the ends the clamped
        tails, P[j = 0] = α^i/(1 + α) and P[j = V−1] = α^(V−1−i)/(1 + α) (all mass at or beyond
        an end lands on it). TEM: −(ε/2)·min(|j − i|, γ) minus its log-sum-exp."""
        V = int(self.allowed_output_ids.size)  # the list length
        i = np.asarray(i, dtype=np.int64)
        if V == 1:
            return np.zeros((i.size, 1))
        eps = self.epsilon
        dist = np.abs(np.arange(V)[None, :] - i[:, None]).astype(np.float64)
        if self.noise == "geometric":
            log1p_a = math.log1p(math.exp(-eps))
            out = (math.log(-math.expm1(-eps)) - log1p_a) - eps * dist
            out[:, 0] = -eps * i - log1p_a
            out[:, V - 1] = -eps * (V - 1 - i) - log1p_a
            return out
        logits = -(eps / 2.0) * np.minimum(dist, self.gamma)  # its largest entry is 0 (j = i)
        return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))

    @property
    def has_exact_probabilities(self) -> bool:
        """Always True: :meth:`log_probabilities` is the closed form."""
        return True

    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """``log P[M(x) = y]`` for each id x in ``ids`` (UNK_ID allowed) and every word y,
        ``(len(ids), V)`` float64, in closed form and in log space (the log of the average over
        the lists by log-sum-exp), so no output underflows: with geometric noise at ε = 1 on the
        bundled embedding every output of "the" is finite, down to about −33,849. ``block`` rows
        are computed at a time."""
        block = check_int("block", block, minimum=1)
        order = self.precompute()
        L = order.shape[0]
        ids = self._as_ids(np.asarray(ids)).ravel()
        rows = self._rows(ids)
        out = np.empty((ids.size, self.n_words))
        for s in range(0, rows.size, block):
            r = rows[s : s + block]
            acc = np.full((r.size, self.n_words), -np.inf)
            for l in range(L):
                part = np.full((r.size, self.n_words), -np.inf)  # excluded outputs (not in the lists): probability 0
                part[:, order[l]] = self._position_log_probabilities(self._pos[l, r])  # type: ignore[index]
                acc = np.logaddexp(acc, part) if L > 1 else part
            out[s : s + r.size] = acc - math.log(L) if L > 1 else acc
        kept = np.flatnonzero(self._kept(ids))
        if kept.size:
            out[kept] = -np.inf
            out[kept, ids[kept]] = 0.0
        return out

    def _kept(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ``ids`` (UNK_ID allowed) released unchanged (stop words with ``keep_stop_words``)."""
        return (ids != UNK_ID) & self._is_stop[np.maximum(ids, 0)]

    @property
    def stop_word_ids(self) -> np.ndarray:
        """Ids of the vocabulary words released unchanged (empty unless ``keep_stop_words``)."""
        return np.flatnonzero(self._is_stop)

    @property
    def finite_metric(self) -> bool:
        """False when stop words are kept (d = ∞ between a kept stop word and any other word)."""
        return not bool(self._is_stop.any())

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """log P[M(w) = y] over the vocabulary (closed form, no underflow; the one-row case of
        :meth:`log_probability_rows`)."""
        return self.log_probability_rows(np.array([self.id_of(word_or_id, oov="unk")]))[0]

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        """P[M(w) = y] over the vocabulary (closed form; the average over the lists): the exp of
        :meth:`log_probabilities`, so outputs less likely than about 1e-308 are 0 here — exact
        computations read :meth:`log_probabilities`."""
        return np.exp(self.log_probabilities(word_or_id))

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """max over lists of |pos_l(a) − pos_l(b)| (UNK: the position of the word nearest the mean);
        ∞ between a kept stop word and any other word."""
        self.precompute()
        a = np.asarray(ids_a, dtype=np.int64)
        b = np.asarray(ids_b, dtype=np.int64)
        pa = self._pos[:, self._rows(a)]  # type: ignore[index]
        pb = self._pos[:, self._rows(b)]  # type: ignore[index]
        d = np.abs(pa - pb).max(axis=0).astype(np.float64)
        if self.keep_stop_words:
            d = np.where((self._kept(a) | self._kept(b)) & (a != b), np.inf, d)
        return d

    def derive_guarantee(self) -> Guarantee:
        lists = ", ".join(self.metrics)
        if self._lists_given:
            lists += f" on {len(self.list_embeddings)} embedding(s)"
        if len(self.starts) > 1:
            lists += f" from {len(self.starts)} start words"
        domain = f"the {self.n_words} vocabulary words and UNK (at the position of the word nearest the vocabulary mean vector)"
        if self.keep_stop_words:
            n = int(self._is_stop.sum())
            domain = (
                f"the {self.n_words - n} vocabulary words that are not stop words and UNK (at the position of the word nearest the vocabulary "
                f"mean vector); the {n} stop words are released verbatim with no guarantee"
            )
        return Guarantee(
            self.epsilon,
            f"max over {len(self.list_specs)} word list(s) of |position(w) - position(w')| (greedy nearest-neighbour chains by {lists})",
            domain,
        )

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        """``{"gamma"}`` for TEM noise with γ derived from β and ε, else none."""
        return frozenset({"gamma"}) if self.noise == "tem" and not self._gamma_given else frozenset()

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"noise": self.noise, "metrics": list(self.metrics)}
        if self._lists_given:
            p["lists"] = [e.fingerprint for e in self.list_embeddings]
        if self.starts != (0,):
            p["starts"] = [self.embedding.words[i] for i in self.starts]
        if self.keep_stop_words:
            p["keep_stop_words"] = True
            if self._stop_words_given:
                p["stop_words"] = f"{int(self._is_stop.sum())} given words [{hashlib.sha256(np.packbits(self._is_stop).tobytes()).hexdigest()[:12]}]"
        if self.noise == "tem":
            p["gamma"] = round(self.gamma, 6)
            if not self._gamma_given:
                p["beta"] = self.beta
        return p

    # -- sampling --------------------------------------------------------------------------------
    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        order = self.precompute()
        L, V = order.shape
        n = ids.shape[0]
        lst = rng.integers(0, L, size=n) if L > 1 else np.zeros(n, dtype=np.int64)
        i = self._pos[lst, self._rows(ids)]  # type: ignore[index]
        if V == 1:
            return order[lst, np.zeros(n, dtype=np.int64)]
        if self.noise == "geometric":
            q = -math.expm1(-self.epsilon)  # success probability 1 − α
            k = rng.geometric(q, size=n) - rng.geometric(q, size=n)
            j = np.clip(i + k, 0, V - 1)
        else:
            j = self._sample_tem_positions(i, V, rng)
        out = order[lst, j]
        if self.keep_stop_words:  # drawn for every token, so the other tokens' draws do not depend on the option
            out = np.where(self._kept(ids), ids, out)
        return out

    def _sample_tem_positions(self, i: np.ndarray, V: int, rng: np.random.Generator) -> np.ndarray:
        """Exact draws of j ∈ [0, V) with P ∝ r^min(|j−i|, γ), r = e^(−ε/2), vectorized."""
        a = self.epsilon / 2.0
        G = int(min(math.floor(self.gamma), V)) if math.isfinite(self.gamma) else V
        left = np.minimum(i, G)
        right = np.minimum(V - 1 - i, G)
        out_left = i - left  # positions 0 .. i-G-1
        out_right = (V - 1 - i) - right
        g = math.exp(-a * self.gamma) if math.isfinite(self.gamma) else 0.0
        def geo(m: Any) -> Any:
            return np.exp(-a) * -np.expm1(-a * m) / -math.expm1(-a)  # Σ_{k=1..m} r^k
        m_l, m_r = geo(left), geo(right)
        m_o = (out_left + out_right) * g
        total = 1.0 + m_l + m_r + m_o
        x = rng.random(i.size) * total
        u = rng.random(i.size)
        j = i.copy()
        in_l = (x >= 1.0) & (x < 1.0 + m_l)
        in_r = (x >= 1.0 + m_l) & (x < 1.0 + m_l + m_r)
        in_o = x >= 1.0 + m_l + m_r
        for mask, span, sign in ((in_l, left, -1), (in_r, right, 1)):
            if mask.any():
                s = span[mask]
                # inverse CDF of P(k) ∝ r^k on 1..s: k = ceil(log(1 − u(1 − r^s)) / log r)
                kk = np.ceil(np.log1p(-u[mask] * -np.expm1(-a * s)) / -a)
                kk = np.clip(kk, 1, s).astype(np.int64)
                j[mask] = i[mask] + sign * kk
        if in_o.any():
            ol, orr = out_left[in_o], out_right[in_o]
            m = np.minimum((u[in_o] * (ol + orr)).astype(np.int64), ol + orr - 1)
            j[in_o] = np.where(m < ol, m, i[in_o] + G + 1 + (m - ol))
        return j
