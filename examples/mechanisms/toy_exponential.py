"""A toy mechanism: the exponential mechanism over the words of an embedding.

For an input word x (the vocabulary mean vector for an unknown word), the output is the word y
with probability

    Pr[M(x) = y] = exp(-(ε/2)·d(x, y)) / Σ_z exp(-(ε/2)·d(x, z)),

d the Euclidean distance between embedding vectors.

Guarantee: ε·d-privacy. For inputs x, x' and any output y, the triangle inequality gives
d(x', y) - d(x, y) ≤ d(x, x'), so the numerators differ by at most a factor exp((ε/2)·d(x, x'))
and, term by term, so do the normalizers Σ_z: the ratio Pr[M(x) = y] / Pr[M(x') = y] is at most
exp(ε·d(x, x')).

Reference: McSherry and Talwar, "Mechanism Design via Differential Privacy" (FOCS 2007).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deniable.mechanisms.base import EmbeddingMechanism, Guarantee
from deniable.mechanisms.registry import register


@register("toy_exponential")
class ToyExponential(EmbeddingMechanism):
    """The exponential mechanism over every vocabulary word: Pr[M(x) = y] ∝ exp(-(ε/2)·d(x, y)),
    d the Euclidean distance between embedding vectors (O(V) work per word: a toy).

    Parameters
    ----------
    embedding
        A :class:`deniable.Embedding`.
    epsilon
        Privacy parameter ε > 0.
    """

    name = "toy_exponential"

    def __init__(self, embedding: Any, *, epsilon: float) -> None:
        super().__init__(embedding, epsilon=epsilon)  # validates both

    def derive_guarantee(self) -> Guarantee:
        return Guarantee(self.epsilon, "Euclidean distance between embedding vectors", self._domain)

    def epsilon_dependent_params(self) -> frozenset[str]:
        return frozenset()  # no parameter besides ε

    def log_probability_rows(self, ids: Any) -> np.ndarray:
        """``log Pr[M(x) = y]`` for each x of ``ids`` (UNK_ID allowed) and every word y, from the
        guarantee's own distance, normalized by log-sum-exp (nothing underflows)."""
        x = self._as_ids(np.asarray(ids)).ravel()
        y = np.arange(self.n_words)
        d = self.distance(np.repeat(x, y.size), np.tile(y, x.size)).reshape(x.size, y.size)
        scores = -0.5 * self.epsilon * d
        top = scores.max(axis=1, keepdims=True)
        return scores - (top + np.log(np.exp(scores - top).sum(axis=1, keepdims=True)))

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        return self.log_probability_rows([self.id_of(word_or_id, oov="unk")])[0]

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # Gumbel-max: argmax of log-probability + Gumbel noise is a draw from each row
        logp = self.log_probability_rows(ids)
        return np.argmax(logp + rng.gumbel(size=logp.shape), axis=1)
