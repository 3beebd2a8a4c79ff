"""Two reference mechanisms that bracket every attack: no privacy and perfect privacy.

They exist to calibrate the attacks of :mod:`deniable.evaluation` (an attack on
:class:`IdentityMechanism` must recover every word; on :class:`UniformMechanism` it must do no
better than guessing from word frequencies). They are not meant for privatizing data: the identity
releases its input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..embeddings.embedding import UNK_ID
from ..mechanisms.base import Guarantee, Mechanism

__all__ = ["IdentityMechanism", "UniformMechanism"]


class IdentityMechanism(Mechanism):
    """Outputs every vocabulary word unchanged: **no privacy** (ε = ∞).

    UNK (an out-of-vocabulary word) is mapped to vocabulary id 0, so no input word outside the
    vocabulary is ever emitted. Exact probabilities: P[M(x) = x] = 1.
    """

    name = "identity"

    def __init__(self, vocabulary: Any, *, epsilon: float = math.inf) -> None:
        if len(vocabulary) < 1:
            raise ValueError("vocabulary must hold at least one word")
        self.epsilon = math.inf
        self.vocabulary = vocabulary

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.where(ids == UNK_ID, 0, ids)

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        return (np.asarray(ids_a) != np.asarray(ids_b)).astype(np.float64)

    def derive_guarantee(self) -> Guarantee:
        return Guarantee(math.inf, "discrete metric (0 for equal words, 1 otherwise); no privacy", "the vocabulary")

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """log P[M(x) = y]: 0 at y = x, −∞ elsewhere."""
        x = self.id_of(word_or_id)
        out = np.full(self.n_words, -np.inf)
        out[max(x, 0)] = 0.0
        return out

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        return np.exp(self.log_probabilities(word_or_id))


class UniformMechanism(Mechanism):
    """Outputs a vocabulary word drawn uniformly at random, whatever the input: **perfect
    privacy** (0·d-privacy for every metric d: all inputs have the same output distribution).

    Exact probabilities: P[M(x) = y] = 1/|V|.
    """

    name = "uniform"

    def __init__(self, vocabulary: Any, *, epsilon: float = 0.0) -> None:
        if len(vocabulary) < 1:
            raise ValueError("vocabulary must hold at least one word")
        self.epsilon = 0.0
        self.vocabulary = vocabulary

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, self.n_words, size=int(ids.shape[0]))

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        return (np.asarray(ids_a) != np.asarray(ids_b)).astype(np.float64)

    def derive_guarantee(self) -> Guarantee:
        return Guarantee(0.0, "any metric (the output does not depend on the input)", "the vocabulary and UNK")

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """log P[M(x) = y] = −log |V| for every y."""
        self.id_of(word_or_id)
        return np.full(self.n_words, -math.log(self.n_words))

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        return np.exp(self.log_probabilities(word_or_id))
