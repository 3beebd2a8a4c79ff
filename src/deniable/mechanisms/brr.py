"""BRR: binary embeddings over randomized response.

Carvalho, Vasiloudis, Feyisetan. "BRR: Preserving Privacy of Text Data Efficiently on Device"
— Algorithm 2 (randomized response), Algorithm 3 (BRR), Theorems 2–3 (paper file
``brr_binary_randomized_response.txt``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from ..brr_runtime import CHUNK, flip_probability
from ..errors import DeniableWarning
from ..metrics import MetricSpace, paired_distances
from .base import Guarantee, Mechanism

__all__ = ["BRR"]

# Largest 2^n_bits x V table that probabilities() builds.
_MAX_ENUM_CELLS = 1 << 24


class BRR(Mechanism):
    """BRR, randomized response on binary word codes (Algorithm 3).

    Each word w has an ``n_bits``-bit code φ(w). The mechanism flips every bit of φ(w)
    independently with probability p = 1/(1+e^ε) (randomized response, Algorithm 2) and outputs
    the vocabulary word whose code is nearest to the noisy code in Hamming distance. Ties (common:
    distances are integers) are broken uniformly at random among the equidistant codes (the tied
    id of rank ⌊u·C⌋ in ascending id order, u uniform, C tied codes). The output is always a
    vocabulary word.

    **Guarantee** (Theorem 3): ε·d-privacy with d(w, w') = Hamming distance between φ(w) and
    φ(w'), for all w, w' in the vocabulary ∪ {UNK}; every out-of-vocabulary word is privatized as
    the single UNK code stored with the codes (the binarizer's code of the embedding's mean vector
    for :func:`deniable.binary.binarize`, the bitwise majority code by default for
    :meth:`BinaryEmbedding.from_bits`). The codes are fitted on the public embedding only, so the
    search is post-processing and neither the index nor the tie rule affects the guarantee. Words
    with identical codes are at distance 0 and get identical output distributions.

    Parameters
    ----------
    binary_embedding
        A :class:`~deniable.binary.BinaryEmbedding`; or an :class:`~deniable.embeddings.Embedding`
        (the bundled default embedding uses the prebuilt codes; any other is binarized with the
        default binarizer, which trains a model and warns); or ``None`` (the default codes).
    epsilon
        Privacy parameter ε > 0, per bit of Hamming distance.
    index
        Hamming search: ``"auto"`` (FAISS flat if installed, else numpy; both exact and giving
        identical outputs), ``"exact"`` (numpy), ``"faiss-flat"``, ``"faiss-mih"`` (approximate),
        or an object with ``search(queries, ties=None, rng=None)``.
    n_bits, method
        Code length and binarizer used when an :class:`Embedding` must be binarized.
    exclude_outputs
        Words never output (e.g. ``"profanity"``; see :mod:`deniable.mechanisms._exclude`): the
        nearest code is searched among the remaining words only (ties uniform among them), which
        is post-processing of the noisy code, so the guarantee is unchanged. Needs an index name.

    Notes
    -----
    Randomness: tokens are processed in chunks of 4096; per chunk of m tokens,
    ``rng.random((m, n_bits))`` decides the flips (``< p``) and then ``rng.random(m)`` the
    ties — the order the numpy-only runtime :mod:`deniable.brr_runtime` follows, so a bundle
    gives the same output for the same seed on a device.
    """

    name = "brr"

    def __init__(
        self,
        binary_embedding: Any = None,
        *,
        epsilon: float,
        index: Any = "auto",
        n_bits: int = 256,
        method: str | None = None,
        exclude_outputs: Any = None,
    ) -> None:
        be = _as_binary_embedding(binary_embedding, n_bits=n_bits, method=method)
        super().__init__(be, epsilon=epsilon)
        self._set_exclusion(exclude_outputs)
        ex = self._exclusion
        if ex is not None and not isinstance(index, str):
            raise ValueError("exclude_outputs needs an index name (the index is built over the words that remain); pass index='auto' or another name")
        from ..binary.hamming import make_hamming_index

        self.binary_embedding = be
        self.flip_probability = flip_probability(self.epsilon)
        self._index_spec = index if isinstance(index, str) else type(index).__name__
        # with excluded outputs the index holds the allowed words' codes only; its ids are mapped back
        self.index = make_hamming_index(index, be.codes if ex is None else np.ascontiguousarray(be.codes[ex.allowed]))

    @property
    def n_bits(self) -> int:
        return self.binary_embedding.n_bits

    # -- sampling ------------------------------------------------------------------------------
    def randomize_codes(self, codes: np.ndarray, rng: RNGLike = None) -> np.ndarray:
        """Randomized response on packed codes: each of the ``n_bits`` bits flips independently
        with probability 1/(1+e^ε) (Algorithm 2). Draws ``rng.random((n, n_bits))``."""
        codes = np.asarray(codes, dtype=np.uint64)
        gen = as_generator(rng)
        from ..binary.codes import pack_bits

        flips = gen.random((codes.shape[0], self.n_bits)) < self.flip_probability
        return codes ^ pack_bits(flips)

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(ids.shape[0], dtype=np.int64)
        be = self.binary_embedding
        for s in range(0, ids.shape[0], CHUNK):
            chunk = ids[s : s + CHUNK]
            noisy = self.randomize_codes(be.code_of(chunk), rng)
            ties = rng.random(int(chunk.shape[0]))
            out[s : s + chunk.shape[0]] = self.index.search(noisy, ties=ties)
        return out if self._exclusion is None else self._exclusion.allowed[out]

    # -- the guarantee -------------------------------------------------------------------------
    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """Hamming distance between the codes of ``ids_a[i]`` and ``ids_b[i]`` (UNK: the UNK code)."""
        be = self.binary_embedding
        return paired_distances(be.code_of(np.asarray(ids_a, dtype=np.int64)), be.code_of(np.asarray(ids_b, dtype=np.int64)), "hamming")

    def derive_guarantee(self) -> Guarantee:
        be = self.binary_embedding
        return Guarantee(
            self.epsilon,
            f"Hamming distance between the words' {be.n_bits}-bit binary codes",
            f"the {len(be)} vocabulary words and UNK (the {be.unk_method} code)",
        )

    def _params(self) -> dict[str, Any]:
        return {"n_bits": self.n_bits, "index": self._index_spec}

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        return frozenset()  # every parameter is the user's choice

    def calibration_estimator(self) -> str:
        """``"flips"`` (one uniform per bit couples every ε) with an exact FAISS index and no exact
        probabilities; else ``"exact"`` or ``"sampled"`` (with the numpy scan, sampling each ε is
        about as fast)."""
        from ..binary.hamming import FaissBinaryIndex

        flips = isinstance(self.index, FaissBinaryIndex) and self.index.exact and self._exclusion is None  # it searches every word
        if flips and not self.has_exact_probabilities:
            return "flips"
        return super().calibration_estimator()

    def metric_space(self) -> MetricSpace:
        """Hamming distance on the packed codes."""
        be = self.binary_embedding
        return MetricSpace(be.codes, "hamming", key=("hamming", be.fingerprint))

    # -- exact output distribution ---------------------------------------------------------------
    @property
    def has_exact_probabilities(self) -> bool:
        """True only for tiny codes: see :meth:`log_probabilities`."""
        n = self.n_bits
        return n <= 16 and (self.n_words << n) <= _MAX_ENUM_CELLS

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        """Exact output distribution ``P[M(w) = y]`` over the vocabulary ``(V,)`` float64: the
        exp of :meth:`log_probabilities` (same limits)."""
        return np.exp(self.log_probabilities(word_or_id))

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """Exact ``log P[M(w) = y]`` over the vocabulary ``(V,)`` float64, in log space.

        Enumerates all 2^n_bits noisy codes with their randomized-response probabilities
        p^H (1−p)^(n−H) and splits each one's mass uniformly among its nearest codes (the tie rule):
        P[M(w) = y] = Σ_H p^H (1−p)^(n−H)·S_H(y), S_H(y) the shares of y summed over the noisy codes
        at Hamming distance H from φ(w), added by log-sum-exp over H (log p = −ε − log(1 + e^(−ε)),
        so no output underflows at any ε).
        Tractable only for tiny codes: raises ``NotImplementedError`` unless n_bits ≤ 16 **and**
        2^n_bits · V ≤ 2^24 (the enumeration table), e.g. V ≤ 256 words at 16 bits, V ≤ 65,536 at
        8 bits.
        """
        w = self.id_of(word_or_id, oov="unk")
        n, V = self.n_bits, self.n_words
        if n > 16 or (V << n) > _MAX_ENUM_CELLS:
            limit = _MAX_ENUM_CELLS >> n if n <= 16 else 0
            raise NotImplementedError(
                f"exact probabilities enumerate all 2^n_bits noisy codes for each of the V words: they need "
                f"n_bits <= 16 and 2^n_bits * V <= 2^24 (at most {limit} words at n_bits={n}), got n_bits={n}, V={V}; "
                "estimate by sampling instead"
            )
        be = self.binary_embedding
        y = np.arange(1 << n, dtype=np.uint64)  # every noisy code (n <= 16 fits one word)
        allowed = self.allowed_output_ids  # the search runs over these words only
        codes = be.codes[allowed, 0]
        d = np.bitwise_count(y[:, None] ^ codes[None, :]).astype(np.int64)  # (2^n, V')
        nearest = d == d.min(axis=1, keepdims=True)
        share = np.zeros((y.size, V))
        share[:, allowed] = nearest / nearest.sum(axis=1, keepdims=True)
        x = be.code_of(np.array([w]))[0, 0]
        h = np.bitwise_count(y ^ x).astype(np.int64)
        by_h = (h[None, :] == np.arange(n + 1)[:, None]).astype(np.float64) @ share  # S_H(y), (n + 1, V)
        log_keep = -math.log1p(math.exp(-self.epsilon))  # log(1 − p)
        hh = np.arange(n + 1, dtype=np.float64)
        logw = hh * (log_keep - self.epsilon) + (n - hh) * log_keep  # log p = log(1 − p) − ε
        with np.errstate(divide="ignore"):
            terms = logw[:, None] + np.log(by_h)
        top = terms.max(axis=0)  # finite for an allowed word: its own code is nearest to itself
        with np.errstate(invalid="ignore"):
            out = top + np.log(np.exp(terms - top).sum(axis=0))
        return np.where(np.isfinite(top), out, -np.inf)  # an excluded word: probability 0

    def __reduce__(self) -> Any:  # pickling rebuilds the search index
        index = self._index_spec if self._index_spec in ("auto", "exact", "faiss-flat", "faiss-mih") else "auto"
        ex = self._exclusion
        return (_rebuild, (self.binary_embedding, self.epsilon, index, None if ex is None else ex.spec))


def _rebuild(be: Any, epsilon: float, index: str, exclude_outputs: Any = None) -> BRR:
    return BRR(be, epsilon=epsilon, index=index, exclude_outputs=exclude_outputs)


def _as_binary_embedding(x: Any, *, n_bits: int, method: str | None) -> Any:
    from ..binary import DEFAULT_METHOD, BinaryEmbedding, binarize, load_default_binary_embedding
    from ..embeddings.embedding import Embedding

    if isinstance(x, BinaryEmbedding):
        return x
    if x is None:
        return load_default_binary_embedding()
    if isinstance(x, Embedding):
        default = load_default_binary_embedding()
        if (
            x.fingerprint == default.metadata.get("source_fingerprint")
            and n_bits == default.n_bits
            and method in (None, DEFAULT_METHOD)
        ):
            return default
        warnings.warn(
            f"BRR: binarizing the embedding {x.fingerprint} ({len(x)} words) with the "
            f"{method or DEFAULT_METHOD!r} binarizer ({n_bits} bits); this trains a model and can take a while. "
            "Export the codes once with `deniable export brr` and pass the BinaryEmbedding to skip it.",
            DeniableWarning,
            stacklevel=4,
        )
        return binarize(x, n_bits=n_bits, method=method, rng=0)
    raise TypeError(
        f"BRR needs a deniable.binary.BinaryEmbedding, a deniable.Embedding or None, got {type(x).__name__}"
    )

