"""Word inversion: what an adversary who knows the mechanism recovers from privatized words.

The adversary sees an output word y and knows the mechanism's conditional distribution
P(y | x) and a prior P(x) over input words (their frequencies). Its best guess of the input —
the one that maximizes the probability of being right — is the maximum a posteriori word
argmax_x P(y | x)·P(x) (Bayes decision rule); its top-k list is the k words of largest
P(y | x)·P(x). :func:`inversion_attack` measures how often that guess is the true input word,
token by token on real text, for all words and for the rare words separately.

Two ways to know P(y | x):

* ``method="exact"`` — closed-form probabilities (any mechanism with ``log_probabilities``/
  ``probabilities``; rows batched by ``log_probability_rows`` for TEM, SanText, SanText+,
  KnnTEM, CusText and Diffractor, one distance computation per block of input words).
  The posterior is ranked in log space, log P(y | x) + log P(x), from the mechanism's
  log-probabilities, so an output too unlikely for a float64 probability (Diffractor's far
  positions) still ranks its inputs. This is the Bayes-optimal adversary, and the expected success
  rate under the prior is also computed exactly (no sampling error):
  Σ_y Σ_{x ∈ top-k(y)} q(x)·P(y | x).
* ``method="sample"`` — for mechanisms without closed-form probabilities (Madlib, Mahalanobis,
  BRR): the adversary simulates the mechanism on words drawn from the prior (``n_simulations``
  draws; or the caller passes simulated pairs, e.g. a privatization of a public training set) and
  ranks the inputs of each output by their simulated joint counts. Unobserved outputs fall back
  to the output word itself, then the most probable words. This is a plug-in estimate of the
  Bayes rule: its measured success is a valid **lower bound** on the Bayes-optimal adversary's
  (any decision rule does at most as well) that tightens as simulations grow.

The rates are measured on fresh draws of the mechanism independent of the attacker's
simulations, with Wilson score intervals (they cover the mechanism's randomness for the given
tokens; tokens are independent given the text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.stats

from .._rng import RNGLike, as_generator
from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..text.tokenize import lookup_key, words_of

__all__ = ["InversionResult", "inversion_attack", "loo_smoothing", "token_ids", "wilson_interval", "has_exact_probabilities"]

METHODS = ("auto", "exact", "sample")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (``(nan, nan)`` when n = 0)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = float(scipy.stats.norm.ppf(0.5 + confidence / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def token_ids(mechanism: Any, texts: Sequence[str]) -> np.ndarray:
    """Vocabulary ids of every word of ``texts`` (in order; −1 = out of vocabulary), looked up
    exactly as :meth:`Mechanism.privatize` does (NFC, lower-cased for uncased vocabularies)."""
    if isinstance(texts, str):
        texts = [texts]
    vocab = mechanism.vocabulary
    keys = [lookup_key(w, lower=vocab.uncased) for t in texts for w in words_of(t)]
    if not keys:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(vocab.ids_of(keys), dtype=np.int64)


def has_exact_probabilities(mechanism: Any) -> bool:
    """Whether ``mechanism`` gives closed-form output probabilities for its real vocabulary: its
    own :attr:`~deniable.Mechanism.has_exact_probabilities` (TEM: always)."""
    return _is_tem(mechanism) or bool(mechanism.has_exact_probabilities)


def _is_tem(mechanism: Any) -> bool:
    from ..mechanisms.tem import TEM

    return isinstance(mechanism, TEM) and type(mechanism).log_probabilities is TEM.log_probabilities


def _batched_rows_match(mechanism: Any) -> bool:
    """Whether ``mechanism.log_probability_rows`` comes from the same class as, or a class that
    takes precedence over, its ``log_probabilities`` / ``probabilities`` in the method
    resolution order (a subclass or mixin that changes the distribution but inherits a batched
    method would otherwise get the parent's rows)."""
    from ..mechanisms.base import _batched_rows_match as match

    return match(mechanism)


def _log_likelihood_rows(mechanism: Any, xs: np.ndarray) -> np.ndarray:
    """log P[M(x) = y] for each x in ``xs`` (rows) and every vocabulary word y (columns), in log
    space (no underflow where the mechanism computes its closed form in logs): batched where the
    mechanism's own ``log_probability_rows`` applies, else row by row from its own
    ``log_probabilities`` / ``probabilities``."""
    from ..mechanisms.base import log_probability_rows_of

    return log_probability_rows_of(mechanism, xs)


@dataclass(frozen=True)
class InversionResult:
    """Outcome of :func:`inversion_attack` (rates are fractions of in-vocabulary tokens).

    Attributes
    ----------
    top1, topk
        Fraction of tokens whose input word is the adversary's first guess / among its k guesses.
    top1_ci, topk_ci
        Wilson intervals at ``confidence``.
    rare_top1, rare_topk, rare_top1_ci, rare_topk_ci, n_rare
        The same over the tokens of rare words (at most ``rare_max_count`` occurrences among the
        attacked tokens).
    unchanged
        Fraction of tokens the mechanism left unchanged (what reading the output as is recovers).
    prior_top1, prior_topk
        Fraction of tokens among the prior's 1 / k most probable words: what guessing without
        looking at the output recovers.
    expected_top1, expected_topk, expected_rare_top1, expected_rare_topk
        Exact expected rates of the Bayes-optimal adversary over the mechanism's randomness
        (``method="exact"`` only, else None).
    n_tokens, n_oov
        In-vocabulary tokens attacked; out-of-vocabulary tokens skipped (privatized as UNK, their
        words are never released, and the adversary cannot name them).
    method, n_simulations, k, rare_max_count, confidence, mechanism, epsilon
        How it was measured.
    smoothing
        The pseudo-count added to every word's prior weight (see ``inversion_attack``).
    """

    top1: float
    top1_ci: tuple[float, float]
    topk: float
    topk_ci: tuple[float, float]
    rare_top1: float
    rare_top1_ci: tuple[float, float]
    rare_topk: float
    rare_topk_ci: tuple[float, float]
    unchanged: float
    prior_top1: float
    prior_topk: float
    n_tokens: int
    n_rare: int
    n_oov: int
    k: int
    rare_max_count: int
    method: str
    n_simulations: int | None
    confidence: float
    mechanism: str
    epsilon: float | None
    expected_top1: float | None = None
    expected_topk: float | None = None
    expected_rare_top1: float | None = None
    expected_rare_topk: float | None = None
    extra: dict = field(default_factory=dict)
    smoothing: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Grid of pseudo-counts ``smoothing="auto"`` chooses from (log-spaced, 1e-6 to 100).
SMOOTHING_GRID = np.geomspace(1e-6, 100.0, 161)


def loo_smoothing(counts: np.ndarray, grid: np.ndarray = SMOOTHING_GRID) -> float:
    """The additive pseudo-count α that maximizes the leave-one-out log-likelihood of ``counts``
    under the smoothed estimate P(w) = (c_w + α) / (N + V·α).

    Leaving one token of word w out gives it probability (c_w − 1 + α) / (N − 1 + V·α): words
    seen once are then unseen, so α is set by how often a held-out token is new (Good–Turing's
    idea), from the prior sample alone. Returns 0 when the counts have fewer than two tokens or
    no word seen once (nothing says unseen words occur)."""
    c = np.asarray(counts, dtype=np.float64)
    n, v = float(c.sum()), c.size
    if n < 2 or not np.any(c == 1):
        return 0.0
    values, mult = np.unique(c[c > 0], return_counts=True)
    weight = values * mult  # tokens of words with that count
    a = np.asarray(grid, dtype=np.float64)[:, None]
    ll = (weight[None, :] * np.log(values[None, :] - 1.0 + a)).sum(axis=1) - n * np.log(n - 1.0 + v * a[:, 0])
    return float(a[int(np.argmax(ll)), 0])


def _prior_weights(mechanism: Any, prior: Any, x: np.ndarray, V: int, smoothing: float | str) -> tuple[np.ndarray, float]:
    """The adversary's prior (normalized) and the pseudo-count it was smoothed with."""
    if prior is None:
        w = np.bincount(x, minlength=V).astype(np.float64)
    elif isinstance(prior, (list, tuple)) and prior and all(isinstance(t, str) for t in prior):
        ids = token_ids(mechanism, list(prior))
        w = np.bincount(ids[ids >= 0], minlength=V).astype(np.float64)
    else:
        w = np.asarray(prior, dtype=np.float64)
        if w.shape != (V,):
            raise ValueError(f"prior must be None, a list of texts, or one weight per vocabulary word (shape ({V},)), got shape {w.shape}")
        if not np.all(np.isfinite(w)) or (w < 0).any():
            raise ValueError("prior weights must be finite and >= 0")
    if smoothing == "auto":
        if np.all(w == np.round(w)):
            alpha = loo_smoothing(w)
        else:  # weights that are not counts: unseen words get half the smallest weight
            positive = w[w > 0]
            alpha = float(positive.min()) / 2.0 if positive.size else 0.0
    else:
        alpha = float(smoothing)
    w = w + alpha
    total = w.sum()
    if not total > 0:
        raise ValueError("prior has no mass: give texts or weights with at least one positive entry (or smoothing > 0)")
    return w / total, alpha


def _exact_guesses(mechanism: Any, log_prior: np.ndarray, q: np.ndarray, rare: np.ndarray, k: int, block: int):
    """Top-k inputs of every output y under the exact joint, and the exact expected rates."""
    V = log_prior.shape[0]
    support = np.flatnonzero(np.isfinite(log_prior))
    vals = np.full((k, V), -np.inf)
    idx = np.full((k, V), -1, dtype=np.int64)
    for s in range(0, support.size, block):
        xs = support[s : s + block]
        J = _log_likelihood_rows(mechanism, xs) + log_prior[xs][:, None]
        cv = np.concatenate([vals, J])
        ci = np.concatenate([idx, np.broadcast_to(xs[:, None], J.shape)])
        if cv.shape[0] > k:
            sel = np.argpartition(-cv, k - 1, axis=0)[:k]
            vals, idx = np.take_along_axis(cv, sel, 0), np.take_along_axis(ci, sel, 0)
        else:
            vals, idx = cv, ci
    order = np.argsort(-vals, axis=0, kind="stable")
    vals, idx = np.take_along_axis(vals, order, 0), np.take_along_axis(idx, order, 0)
    # E[hit] = Σ_y Σ_{x in top(y)} q(x)·P(y|x), with log P(y|x) = vals − log prior(x)
    valid = idx >= 0
    safe = np.where(valid, idx, 0)
    with np.errstate(invalid="ignore", over="ignore"):
        like = np.where(valid & np.isfinite(vals), np.exp(vals - log_prior[safe]), 0.0)
    contrib = like * q[safe]
    exp1, expk = float(contrib[0].sum()), float(contrib.sum())
    q_rare = float(q[rare].sum())
    rc = contrib * rare[safe]
    exp_r1 = float(rc[0].sum()) / q_rare if q_rare > 0 else math.nan
    exp_rk = float(rc.sum()) / q_rare if q_rare > 0 else math.nan
    return idx.T, (exp1, expk, exp_r1, exp_rk)  # (V, k)


def _sampled_guesses(xs: np.ndarray, ys: np.ndarray, prior: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per simulated output y (sorted unique), its k inputs of largest simulated joint count
    (ties by prior); −1 where fewer than k inputs were seen."""
    V = prior.shape[0]
    key = ys.astype(np.int64) * V + xs.astype(np.int64)
    uk, counts = np.unique(key, return_counts=True)
    py, px = uk // V, uk % V
    order = np.lexsort((-prior[px], -counts, py))
    py, px = py[order], px[order]
    uy, start = np.unique(py, return_index=True)
    rank = np.arange(py.size) - np.repeat(start, np.diff(np.append(start, py.size)))
    keep = rank < k
    table = np.full((uy.size, k), -1, dtype=np.int64)
    table[np.searchsorted(uy, py[keep]), rank[keep]] = px[keep]
    return uy, table


def _fill_guesses(G: np.ndarray, y: np.ndarray, top_prior: np.ndarray, k: int) -> np.ndarray:
    """Complete each row of guesses (−1 = empty) with y itself, then the most probable words,
    skipping repeats; keeps the first k distinct guesses in order."""
    C = np.concatenate([G, y[:, None], np.broadcast_to(top_prior[None, :k], (G.shape[0], k))], axis=1)
    dup = np.zeros(C.shape, dtype=bool)
    for j in range(1, C.shape[1]):
        dup[:, j] = (C[:, :j] == C[:, j : j + 1]).any(axis=1)
    ok = (C >= 0) & ~dup
    order = np.argsort(~ok, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(C, order, 1)


def inversion_attack(
    mechanism: Any,
    texts_or_ids: Sequence[str] | np.ndarray,
    *,
    prior: Any = None,
    rng: RNGLike = None,
    outputs: Any = None,
    k: int = 5,
    method: str = "auto",
    n_simulations: int | None = None,
    simulations: tuple[Any, Any] | None = None,
    rare_max_count: int = 5,
    smoothing: float | str = "auto",
    confidence: float = 0.95,
    block_size: int = 256,
) -> InversionResult:
    """Recovery rate of the Bayes adversary who inverts privatized words (top-1 and top-k).

    Threat model: the adversary knows the mechanism (its output distribution P(y | x)) and the
    word frequencies P(x) (``prior``); it sees each privatized word y on its own and guesses the
    input by argmax_x P(y | x)·P(x). Context is not used, so this is a floor for attackers with
    a language model. A privatization with no privacy (identity) gives top-1 = 1; one whose
    output ignores the input gives the prior-only rate ``prior_top1``.

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`.
    texts_or_ids
        Texts (the words are looked up as ``privatize`` does) or an int array of word ids (−1 =
        out of vocabulary). Out-of-vocabulary tokens are skipped (counted in ``n_oov``).
    prior
        The adversary's word frequencies: ``None`` (the empirical frequencies of the attacked
        tokens: the strongest adversary), a list of texts (their word frequencies), or one
        non-negative weight per vocabulary word.
    rng
        Generator, int seed or None: draws the outputs (unless ``outputs`` is given) and the
        simulations, from independent streams.
    outputs
        The privatized ids of the tokens, same shape as the ids, if already drawn (e.g. by
        ``sample_ids``); they must come from ``mechanism`` and be independent of ``simulations``.
    k
        Size of the guess list (top-k).
    method
        ``"exact"`` (closed-form probabilities), ``"sample"`` (simulated), or ``"auto"`` (exact
        where the mechanism has closed-form probabilities).
    n_simulations
        Simulated draws for ``"sample"`` (default max(100,000, 10 × attacked tokens)).
    simulations
        ``(input_ids, output_ids)`` pairs from the mechanism to use instead of fresh simulations
        (e.g. a privatized public corpus); their inputs should follow the prior.
    rare_max_count
        A word is rare when it occurs at most this many times among the attacked tokens.
    smoothing
        Pseudo-count added to every vocabulary word's prior weight, so that the adversary can
        guess words absent from the prior sample. ``"auto"`` (default) chooses it from the prior
        counts by leave-one-out likelihood (:func:`loo_smoothing`): a prior estimated from a
        sample disjoint from the attacked text puts mass on every vocabulary word, as the true
        word distribution does. Without it, a word missing from the prior sample can never be
        guessed, and the "Bayes" rule can do worse than guessing the output word itself. The
        value used is in ``InversionResult.smoothing``.
    confidence
        Level of the Wilson intervals.
    block_size
        Input words per block of the exact computation (memory ≈ block_size·|V|·24 bytes).

    Returns
    -------
    InversionResult

    References
    ----------
    Bayes decision rule (maximum a posteriori) under 0-1 loss. TEM paper §5 and Madlib paper §3.2
    report the related plausible-deniability statistics N_w and S_w; this attack measures what
    an adversary actually recovers.
    """
    k, rare_max_count, block_size = _check_attack(method, k, rare_max_count, block_size, smoothing, confidence)
    V = mechanism.n_words
    ids = _attacked_ids(mechanism, texts_or_ids)
    gen_out, gen_sim = as_generator(rng).spawn(2)
    if outputs is not None:
        y_all = mechanism._as_ids(np.asarray(outputs).ravel())
        if y_all.shape != ids.shape:
            raise ValueError(f"outputs has {y_all.size} ids but there are {ids.size} tokens")
    keep = ids != UNK_ID
    x = ids[keep]
    if x.size == 0:
        raise ValueError("no in-vocabulary tokens to attack")
    y = y_all[keep] if outputs is not None else mechanism.sample_ids(x, rng=gen_out)
    p, alpha = _prior_weights(mechanism, prior, x, V, smoothing)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    counts = np.bincount(x, minlength=V)
    rare_word = (counts > 0) & (counts <= rare_max_count)
    top_prior = np.argsort(-p, kind="stable")[:k]

    out_words, which = np.unique(y, return_inverse=True)
    if method == "auto":
        method = "exact" if has_exact_probabilities(mechanism) else "sample"
    expected: tuple[Any, ...] = (None, None, None, None)
    n_sim = None
    if method == "exact":
        if not has_exact_probabilities(mechanism):
            raise ValueError(f"{type(mechanism).__name__} has no closed-form probabilities for this vocabulary; use method='sample'")
        table, expected = _exact_guesses(mechanism, log_p, counts / counts.sum(), rare_word, k, block_size)
        G = _fill_guesses(table[out_words], out_words, top_prior, k)
    else:
        xs, ys = _simulations(mechanism, simulations, n_simulations, p, x.size, gen_sim)
        n_sim = int(xs.size)
        G = _fill_guesses(_looked_up_guesses(xs, ys, p, k, out_words), out_words, top_prior, k)
    # G: the guesses for each distinct output word (they depend on the output word only)
    G = G[which.ravel()]
    eps = getattr(mechanism, "epsilon", None)
    return InversionResult(
        **_rates(x, y, G, rare_word[x], top_prior, V, confidence),
        n_oov=int((~keep).sum()), k=k, rare_max_count=rare_max_count, method=method, n_simulations=n_sim, confidence=confidence,
        mechanism=repr(mechanism), epsilon=None if eps is None else float(eps), smoothing=alpha,
        expected_top1=expected[0], expected_topk=expected[1], expected_rare_top1=expected[2], expected_rare_topk=expected[3],
    )


def _check_attack(method: str, k: Any, rare_max_count: Any, block_size: Any, smoothing: Any, confidence: float) -> tuple[int, int, int]:
    """Validate the settings of :func:`inversion_attack`; returns (k, rare_max_count, block_size)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    k = check_int("k", k, minimum=1)
    rare_max_count = check_int("rare_max_count", rare_max_count, minimum=0)
    block_size = check_int("block_size", block_size, minimum=1)
    if smoothing != "auto" and not (isinstance(smoothing, (int, float)) and not isinstance(smoothing, bool) and smoothing >= 0 and math.isfinite(smoothing)):
        raise ValueError(f"smoothing must be 'auto' or a finite number >= 0, got {smoothing!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return k, rare_max_count, block_size


def _attacked_ids(mechanism: Any, texts_or_ids: Any) -> np.ndarray:
    """Word ids of the attacked tokens (−1 = out of vocabulary), from texts or an id array."""
    if isinstance(texts_or_ids, np.ndarray) and np.issubdtype(texts_or_ids.dtype, np.integer):
        return mechanism._as_ids(texts_or_ids.ravel())
    if isinstance(texts_or_ids, str) or (isinstance(texts_or_ids, Sequence) and all(isinstance(t, str) for t in texts_or_ids)):
        return token_ids(mechanism, texts_or_ids)
    raise TypeError(f"texts_or_ids must be a list of texts or an integer array of word ids, got {type(texts_or_ids).__name__}")


def _simulations(mechanism: Any, given: Any, n_simulations: int | None, p: np.ndarray, n_tokens: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(input, output) id pairs of the mechanism for the simulated adversary: the ``given`` ones
    (out-of-vocabulary inputs dropped), else fresh draws with inputs from the prior ``p``."""
    if given is not None:
        xs = mechanism._as_ids(np.asarray(given[0]).ravel())
        ys = mechanism._as_ids(np.asarray(given[1]).ravel())
        if xs.shape != ys.shape:
            raise ValueError(f"simulations: {xs.size} inputs but {ys.size} outputs")
        ok = xs != UNK_ID
        return xs[ok], ys[ok]
    n = n_simulations if n_simulations is not None else max(100_000, 10 * n_tokens)
    n = check_int("n_simulations", n, minimum=1)
    xs = gen.choice(mechanism.n_words, size=n, p=p)
    return xs, mechanism.sample_ids(xs, rng=gen)


def _looked_up_guesses(xs: np.ndarray, ys: np.ndarray, p: np.ndarray, k: int, out_words: np.ndarray) -> np.ndarray:
    """The simulated adversary's guesses for each of ``out_words`` (−1 where the simulations
    never produced that output word)."""
    uy, table = _sampled_guesses(xs, ys, p, k)
    pos = np.minimum(np.searchsorted(uy, out_words), max(uy.size - 1, 0))
    G = np.full((out_words.size, k), -1, dtype=np.int64)
    if uy.size:
        found = uy[pos] == out_words
        G[found] = table[pos[found]]
    return G


def _rates(x: np.ndarray, y: np.ndarray, guesses: np.ndarray, r: np.ndarray, top_prior: np.ndarray, V: int, confidence: float) -> dict[str, Any]:
    """The recovery rates of :class:`InversionResult` for true inputs ``x``, outputs ``y`` and the
    guess list of each token (``r``: which tokens are rare words)."""
    hit1 = guesses[:, 0] == x
    hitk = (x[:, None] == guesses).any(axis=1)
    n, nr = int(x.size), int(r.sum())

    def rate(h: np.ndarray, m: int) -> float:
        return float(h.sum()) / m if m else math.nan

    in_top = np.zeros(V, dtype=bool)
    in_top[top_prior[:1]] = True
    prior_top1 = float(in_top[x].mean())
    in_top[top_prior] = True
    return {
        "top1": rate(hit1, n), "top1_ci": wilson_interval(int(hit1.sum()), n, confidence),
        "topk": rate(hitk, n), "topk_ci": wilson_interval(int(hitk.sum()), n, confidence),
        "rare_top1": rate(hit1[r], nr), "rare_top1_ci": wilson_interval(int(hit1[r].sum()), nr, confidence),
        "rare_topk": rate(hitk[r], nr), "rare_topk_ci": wilson_interval(int(hitk[r].sum()), nr, confidence),
        "unchanged": float((y == x).mean()), "prior_top1": prior_top1, "prior_topk": float(in_top[x].mean()), "n_tokens": n, "n_rare": nr,
    }
