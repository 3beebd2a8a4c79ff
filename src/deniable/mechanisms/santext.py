"""SanText and SanText+: exponential-mechanism word sanitization.

Yue, Du, Wang, Li, Sun, Chow. "Differential Privacy for Text Analytics via Natural Text
Sanitization", Findings of ACL-IJCNLP 2021, pp. 3853–3866 (arXiv:2106.01221).

Source note (details in docs/mechanisms/santext.md): the paper's full text could not be read, so
no section, algorithm or equation number is cited. The sampling rule, the sensitive set (the
least frequent words of the task corpus, ⌊w·n⌋ + 1 of them) and the parameters follow the authors'
reference code (github.com/xiangyue9607/SanText) as restated in our specification; the
wording of the paper's theorem is unknown. Every guarantee stated here is derived for *this*
implementation, in the docstrings.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .._validation import check_unit_interval
from ..embeddings.embedding import UNK_ID
from ..metrics import MetricSpace, metric_name
from ..neighbors.neighborhoods import Neighborhoods, embedding_neighborhoods
from ._em_base import PRECOMPUTED_NEIGHBORS, ExponentialEmbeddingMechanism, precomputed_neighbors_param
from ._exclude import restrict_neighborhoods
from ._exponential import ExponentialSampler, subset_knn
from ._params import metric_text
from .base import Guarantee

__all__ = ["SanText", "SanTextPlus"]


class SanText(ExponentialEmbeddingMechanism):
    """SanText: every word is replaced by a vocabulary word drawn by the exponential mechanism.

    For an input word x the output y ∈ W (the whole vocabulary, x included) has probability

        P[M(x) = y] = exp(−(ε/2)·d(x, y)) / Σ_z exp(−(ε/2)·d(x, z)),

    d the Euclidean distance between embedding vectors (Yue et al.; ``metric=`` allows the
    other true metrics TEM accepts). This is TEM without truncation (γ = ∞), and it is sampled
    exactly by TEM's sampler (nearest-words envelope + rejection, see
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
    precomputed_neighbors
        Nearest words stored per word for the sampler (default 128; ε-independent, cached on
        disk, shared with TEM's cache): a speed and memory setting, the output distribution does
        not depend on it.
    cache_dir
        Cache folder (default ``$DENIABLE_CACHE_DIR`` or ``~/.cache/deniable``); ``False``: memory only.
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): the
        output set W becomes the remaining words (the normalizer runs over them only; the
        exponential mechanism is ε·d-private for any fixed output set). Every word remains a
        valid input.
    k
        Deprecated alias of ``precomputed_neighbors`` (warns with a ``DeprecationWarning``);
        giving both with different values is an error.

    References
    ----------
    Yue et al. 2021, "SanText" (sampling probability ∝ exp(−½·ε·d_euc), as in the authors'
    reference code; the authors replace an out-of-vocabulary token by a uniform corpus word, we by
    the exponential mechanism from UNK). Specification: docs/mechanisms/santext.md.
    """

    name = "santext"
    deprecated_params = frozenset({"k"})

    # -- targets: the words an input can become ----------------------------------------------
    @property
    def target_ids(self) -> np.ndarray:
        """Vocabulary ids of the possible replacements (all words for SanText, less ``exclude_outputs``)."""
        return self.allowed_output_ids

    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """``log P[M(x) = y]`` for each id in ``ids`` (UNK_ID allowed) and every word y,
        ``(len(ids), V)``: :meth:`log_probabilities` row by row, with one distance computation
        per ``block`` rows."""
        return self._over_vocabulary(self._log_rows(ids, block, target_ids=self.target_ids)[1])

    def self_probabilities(self, ids: Any, epsilons: Any, *, block: int = 64) -> np.ndarray:
        """``P[M(w) = w]`` for vocabulary ids ``w`` at each ε of ``epsilons`` (this instance's
        other parameters), ``(len(ids), len(epsilons))`` float64, in closed form: the
        distances of a word are computed once for the whole ε grid (what N_w calibration
        needs; :meth:`probabilities` per word and ε recomputes them each time)."""
        return self._self_from_em(*self._self_rows(ids, epsilons, block, target_ids=self.target_ids))

    def _self_from_em(self, ids: np.ndarray, em: np.ndarray) -> np.ndarray:
        """P[M(w) = w] from the exponential mechanism's own-word probabilities (SanText: equal)."""
        return em

    def _params(self) -> dict[str, Any]:
        return {"metric": metric_name(self.metric)}

    # -- pre-processing ----------------------------------------------------------------------
    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Neighborhoods:
        """Load or build (and cache) the nearest-words table (``precomputed_neighbors`` per word);
        sampling calls this on first use."""
        if self._nb is None or rebuild:
            nb, self.cache_file = embedding_neighborhoods(
                self.embedding, kind="knn", k=self.precomputed_neighbors, metric=self.metric, cache_dir=self.cache_dir, progress=progress, rebuild=rebuild
            )
            # with excluded outputs: the same table without them, targets numbered by position among the allowed words
            self._nb = nb if self._exclusion is None else restrict_neighborhoods(nb, self._exclusion)
            self._sampler = None
        return self._nb

    def _get_sampler(self) -> ExponentialSampler:
        if self._sampler is None:
            self._sampler = ExponentialSampler(self._pts, self._output_vectors(), self.precompute(), self.epsilon / 2.0, math.inf, self.metric)
        return self._sampler


class SanTextPlus(SanText):
    """SanText+: the rarest words of your corpus are always replaced, replacements are rare words.

    **The sensitive set comes from a corpus** (Yue et al.; the authors' code ranks the words of
    the task corpus by frequency): :meth:`fit` counts the words of ``texts`` with the library's
    tokenizer and vocabulary lookup, ranks the distinct words (also those not in the vocabulary)
    most frequent first (ties: first occurrence first), and the last ⌊w·n⌋ + 1 of the n distinct
    words — the fraction ``w`` least frequent, one more as in the authors' code — are sensitive;
    those in the vocabulary form V_S. The other corpus words of the vocabulary are non-sensitive
    (V_N). Vocabulary words absent from the corpus (rarer than any corpus word) and UNK are
    always replaced, like sensitive words, but are not replacements. For an input x:

    * x ∈ V_N: kept unchanged with probability 1 − p, otherwise replaced;
    * any other x (V_S, absent from the corpus, UNK): always replaced;
    * a replacement is y ∈ V_S with probability E_x(y) = exp(−(ε/2)·d(x, y)) / Σ_{z∈V_S} exp(−(ε/2)·d(x, z)).

    So P[M(x)=y] = E_x(y)·(p if x ∈ V_N else 1) for y ∈ V_S, and P[M(x)=x] = 1 − p for x ∈ V_N.
    ``sensitive=[...]`` gives V_S explicitly instead (every other word is then non-sensitive).

    **Before fit** (and without ``sensitive``) every word is sensitive: the mechanism then equals
    :class:`SanText` (same distribution, same samples for a seed), so
    ``get_mechanism("santext_plus", epsilon=...)`` is usable and protects every word. The
    embedding's word order is never used as a frequency order.

    **Guarantee** (Yue et al.'s utility-optimized notion, as derived in docs/mechanisms/santext.md;
    proved for this implementation). Outputs in V_S are protected, outputs in V_N are not:

    * for x, x' both always replaced (V_S, absent words, UNK), every output y:
      P[M(x)=y] ≤ exp(ε·d(x, x'))·P[M(x')=y] (the exponential mechanism over V_S);
    * for x, x' ∈ V_N and y ∈ V_S: the same bound (the factor p cancels);
    * for x always replaced and x' ∈ V_N, y ∈ V_S: the ratio is bounded only by
      exp(ε·d(x, x'))/p, i.e. a budget of ε·d(x, x') + ln(1/p) (the cross term);
    * a non-sensitive word gets **no** indistinguishability: with probability 1 − p its output is
      itself, an output in V_N has that single preimage. :meth:`distance` is ∞ between a
      non-sensitive word and any other word (so ``privacy_loss_bound`` says so).

    With ``p = 1`` (or every word sensitive) every word is replaced and the ε·d guarantee covers
    the whole vocabulary ∪ {UNK}.

    Parameters
    ----------
    embedding, epsilon, metric, precomputed_neighbors, cache_dir, k
        As for :class:`SanText` (``k``: the deprecated alias of ``precomputed_neighbors``).
    w
        Fraction of the corpus's distinct words, least frequent first, that is sensitive (default
        0.9, the authors' README example; their command-line default is 0.5). Used by :meth:`fit`.
    p
        Probability that a non-sensitive word is replaced (default 0.3, the README example; the
        command-line default is 0.2).
    sensitive
        Explicit sensitive words V_S (then :meth:`fit` is refused); unknown words raise ``KeyError``.
    exclude_outputs
        Words never output (see :class:`SanText`): they leave V_S (replacements are drawn from the
        other sensitive words), and a non-sensitive word that is excluded is always replaced
        instead of kept (it joins the always-replaced inputs, which only strengthens its
        protection). ``ValueError`` when no sensitive word remains.

    References
    ----------
    Yue, Du, Wang, Li, Sun, Chow 2021, SanText+ (w, p; the sensitive set from corpus frequency
    as in the authors' reference code). Specification: docs/mechanisms/santext.md.
    """

    name = "santext_plus"
    fittable = True

    @property
    def finite_metric(self) -> bool:
        """False when some words are non-sensitive and p < 1: d is ∞ between them and any other."""
        return self.p >= 1 or not bool(self.is_non_sensitive.any())

    def metric_space(self) -> MetricSpace | None:
        """The base metric space when d is finite, else None (∞ for non-sensitive words)."""
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
        precomputed_neighbors: int = PRECOMPUTED_NEIGHBORS,
        cache_dir: str | os.PathLike[str] | bool | None = None,
        exclude_outputs: Any = None,
        k: int | None = None,
    ) -> None:
        n = precomputed_neighbors_param(type(self).__name__, precomputed_neighbors, k)
        super().__init__(embedding, epsilon=epsilon, metric=metric, precomputed_neighbors=n, cache_dir=cache_dir, exclude_outputs=exclude_outputs)
        self.w = check_unit_interval("w", w)
        self.p = check_unit_interval("p", p)
        V = self.n_words
        self.fit_summary: dict[str, int] | None = None
        if sensitive is None:
            self._sensitive_given = False
            self._set_sets(np.arange(V, dtype=np.int64), np.zeros(V, dtype=bool))
        else:
            if isinstance(sensitive, str) or not isinstance(sensitive, Sequence):
                raise TypeError(f"sensitive must be a list of words, got {type(sensitive).__name__}")
            ids = np.unique(np.array([self.vocabulary.id_of(s) for s in sensitive], dtype=np.int64))
            if ids.size == 0:
                raise ValueError("sensitive is empty; SanText+ needs at least one sensitive (replacement) word")
            self._sensitive_given = True
            open_ = np.ones(V, dtype=bool)
            open_[ids] = False
            self._set_sets(ids, open_)

    def _set_sets(self, targets: np.ndarray, non_sensitive: np.ndarray) -> None:
        """Install V_S (``targets``, sorted ids) and the mask of V_N, less the excluded outputs
        (an excluded word is neither a replacement nor kept verbatim); drops derived tables."""
        targets = np.asarray(targets, dtype=np.int64)
        if self._exclusion is not None:
            targets = targets[self._exclusion.mask[targets]]
            non_sensitive = np.asarray(non_sensitive, dtype=bool) & self._exclusion.mask
            if targets.size == 0:
                raise ValueError(
                    "every sensitive word is excluded by exclude_outputs, so SanText+ has no replacement word; "
                    "exclude fewer words or make more words sensitive (a larger w, or more words in sensitive=)"
                )
        self._targets = np.ascontiguousarray(targets, dtype=np.int64)
        self.is_sensitive = np.zeros(self.n_words, dtype=bool)
        self.is_sensitive[self._targets] = True
        self.is_non_sensitive = np.asarray(non_sensitive, dtype=bool)
        self._nb = None
        self._sampler = None
        self.cache_file = None

    # -- the sensitive set from a corpus -------------------------------------------------------
    @property
    def fitted(self) -> bool:
        """Whether the sensitive set comes from :meth:`fit`."""
        return self.fit_summary is not None

    def fit(self, texts: Iterable[str]) -> SanTextPlus:
        """Choose the sensitive set from the word frequencies of ``texts``; returns ``self``.

        ``texts``: an iterable of strings (e.g. the lines of a file), read once. Words are found
        and looked up as :meth:`privatize` does (NFC, lower-cased for an uncased vocabulary). The
        distinct words (in the vocabulary or not) are ranked by count, most frequent first, ties
        by first occurrence; the last ⌊w·n⌋ + 1 of the n distinct words are sensitive, and those
        of the vocabulary form V_S; the vocabulary's other corpus words are non-sensitive;
        vocabulary words absent from the corpus are always replaced. Fitting again replaces the
        sets. The sets derive from the corpus: they travel with the mechanism (pickling) and say
        which words are rare in it, so treat a fitted mechanism like the corpus's word counts.

        Raises ``ValueError`` when ``sensitive=`` was given, the corpus has no word, or no
        sensitive corpus word is in the vocabulary (then no replacement exists; raise ``w``)."""
        from ..text.tokenize import lookup_key, words_of

        if self._sensitive_given:
            raise ValueError("this SanTextPlus was built with sensitive=[...]; fit() would replace that set. Build it without sensitive= to fit a corpus")
        if isinstance(texts, (str, bytes, bytearray)):
            raise TypeError("texts must be an iterable of strings (e.g. a list or a file's lines), not a single string; wrap one text as [text]")
        uncased = self.vocabulary.uncased
        counts: dict[str, int] = {}
        n_texts = n_tokens = 0
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be strings, got {type(t).__name__}")
            n_texts += 1
            for word in words_of(t):
                key = lookup_key(word, lower=uncased)
                counts[key] = counts.get(key, 0) + 1
                n_tokens += 1
        if not counts:
            raise ValueError(f"the corpus has no word ({n_texts} texts); SanText+ ranks the corpus's words by frequency")
        ranked = sorted(counts, key=counts.__getitem__, reverse=True)  # stable: ties keep first occurrence
        n = len(ranked)
        n_s = min(n, math.floor(self.w * n) + 1)
        ids = self.vocabulary.ids_of(ranked)
        sens = ids[n - n_s :]
        sens = np.unique(sens[sens >= 0])
        if sens.size == 0:
            raise ValueError(
                f"none of the {n_s} least frequent of the corpus's {n} distinct words is in the vocabulary, so SanText+ has no replacement word; use a larger w"
            )
        rest = ids[: n - n_s]
        non_sensitive = np.zeros(self.n_words, dtype=bool)
        non_sensitive[rest[rest >= 0]] = True
        self._set_sets(sens, non_sensitive)
        in_vocab = int(np.count_nonzero(ids >= 0))
        self.fit_summary = {
            "texts": n_texts, "tokens": n_tokens, "distinct_words": n, "ranked_sensitive": n_s,
            "sensitive": int(sens.size), "non_sensitive": int(non_sensitive.sum()), "absent": self.n_words - in_vocab,
        }
        return self

    def _sets_digest(self) -> str:
        h = hashlib.sha256(self._targets.tobytes())
        h.update(np.packbits(self.is_non_sensitive).tobytes())
        return h.hexdigest()[:12]

    def __reduce__(self) -> Any:
        fn, args, state = super().__reduce__()
        if self.fitted:
            state = dict(state or {})
            state["_fitted_sets"] = (self._targets, np.flatnonzero(self.is_non_sensitive), dict(self.fit_summary or {}))
        return fn, args, state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        sets = state.pop("_fitted_sets", None)
        self.__dict__.update(state)
        if sets is not None:
            targets, open_ids, summary = sets
            mask = np.zeros(self.n_words, dtype=bool)
            mask[np.asarray(open_ids, dtype=np.int64)] = True
            self._set_sets(np.asarray(targets, dtype=np.int64), mask)
            self.fit_summary = dict(summary)

    # -- the distribution ------------------------------------------------------------------------
    @property
    def target_ids(self) -> np.ndarray:
        """Vocabulary ids of the sensitive words V_S (the possible replacements)."""
        return self._targets

    def _always_replaced(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ``ids`` (UNK_ID allowed) that are replaced with probability 1."""
        return (ids == UNK_ID) | ~self.is_non_sensitive[np.maximum(ids, 0)]

    def log_probability_rows(self, ids: Any, *, block: int = 64) -> np.ndarray:
        """:meth:`log_probabilities` for each id in ``ids`` (UNK_ID allowed), ``(len(ids), V)``
        (−inf where impossible), with one distance computation per ``block`` rows."""
        ids, em = self._log_rows(ids, block, target_ids=self._targets)
        out = np.full((ids.size, self.n_words), -np.inf)
        replaced = self._always_replaced(ids)
        shift = np.where(replaced, 0.0, math.log(self.p) if self.p > 0 else -np.inf)
        out[:, self._targets] = em + shift[:, None]
        if self.p < 1:
            r = np.flatnonzero(~replaced)
            out[r, ids[r]] = np.logaddexp(out[r, ids[r]], math.log1p(-self.p))
        return out

    def _self_from_em(self, ids: np.ndarray, em: np.ndarray) -> np.ndarray:
        # a word that is always replaced comes back only as its own replacement (0 unless it is
        # in V_S); a non-sensitive one is kept with probability 1 − p and is never a replacement
        open_ = self.is_non_sensitive[ids][:, None]
        return np.where(open_, 1.0 - self.p, em)

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """The metric between words that are always replaced (and UNK); ∞ when one of two
        different words is non-sensitive and p < 1 (no metric-DP for them, see the class doc)."""
        a = np.asarray(ids_a, dtype=np.int64)
        b = np.asarray(ids_b, dtype=np.int64)
        d = super().distance(a, b)
        if self.p < 1:
            open_ = ~self._always_replaced(a) | ~self._always_replaced(b)
            d = np.where(open_ & (a != b), np.inf, d)
        return d

    def derive_guarantee(self) -> Guarantee:
        n_s = int(self._targets.size)
        n_open = int(self.is_non_sensitive.sum())
        if self.fitted:
            rule = f"the {self.w:g} least frequent fraction of the fitted corpus's words"
        elif self._sensitive_given:
            rule = "given list"
        else:
            rule = "every word: not fitted to a corpus, so SanText+ equals SanText"
        if self.p >= 1 or n_open == 0:
            domain = f"the {self.n_words} vocabulary words and UNK (the vocabulary mean vector); outputs are the {n_s} sensitive words ({rule})"
        else:
            domain = (
                f"the {self.n_words - n_open} always-replaced words ({n_s} sensitive: {rule}; the others absent from the corpus) and UNK "
                f"(the vocabulary mean vector); the other {n_open} words are non-sensitive: kept verbatim with probability {1 - self.p:g}, "
                f"no metric-DP guarantee, and on sensitive outputs the ratio against an always-replaced word is bounded only by exp(epsilon*d)/p"
            )
        return Guarantee(self.epsilon, metric_text(self.metric), domain)

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {}
        if self._sensitive_given:
            p["sensitive"] = f"{self._targets.size} given words [{self._sets_digest()}]"
        else:
            p["w"] = self.w
            if self.fitted:
                p["sensitive"] = f"fitted: {self._targets.size} of {int(self.is_non_sensitive.sum()) + self._targets.size} corpus words [{self._sets_digest()}]"
            else:
                p["sensitive"] = "every word (not fitted)"
        p["p"] = self.p
        p["metric"] = metric_name(self.metric)
        return p

    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Neighborhoods:
        if self._nb is None or rebuild:
            if np.array_equal(self._targets, self.allowed_output_ids):  # every allowed word is sensitive: SanText's table
                return super().precompute(progress=progress, rebuild=rebuild)
            if rebuild and self.cache_file is not None and self.cache_file.exists():
                self.cache_file.unlink()
            self._nb, self.cache_file = subset_knn(
                self.embedding, self._targets, self.precomputed_neighbors, self.metric, cache_dir=self.cache_dir, progress=progress, tag="santext-plus"
            )
            self._sampler = None
        return self._nb

    def _get_sampler(self) -> ExponentialSampler:
        if self._sampler is None:
            targets = np.ascontiguousarray(self.embedding.vectors[self._targets])
            self._sampler = ExponentialSampler(self._pts, targets, self.precompute(), self.epsilon / 2.0, math.inf, self.metric)
        return self._sampler

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows = self._sampler_rows(ids)
        out = ids.copy()
        if self.p >= 1 or not self.is_non_sensitive.any():
            replace = np.ones(ids.shape[0], dtype=bool)  # no draw: the same samples as SanText
        else:
            replace = self._always_replaced(ids) | (rng.random(ids.shape[0]) < self.p)
        idx = np.flatnonzero(replace)
        if idx.size:
            out[idx] = self._targets[self._get_sampler().sample(rows[idx], rng)]
        return out
