"""Per-document privacy guarantee of a word-by-word mechanism.

A mechanism with ε·d-privacy on words, applied independently to each word of a document
x = (w₁, …, w_ℓ), satisfies for every other document x′ = (w₁′, …, w_ℓ′) of the same length and
every output y (Madlib paper §2.4 and Theorem 1):

    Pr[M(x) = y] ≤ exp(ε · Σᵢ d(wᵢ, wᵢ′)) · Pr[M(x′) = y].

So ``ε·Σᵢ d(wᵢ, wᵢ′)`` (:func:`document_bound`) bounds the log-likelihood ratio an observer can
get between two given documents. Against *any* alternative document of length ℓ the bound is
``ε·ℓ·P_d^max`` (``worst_case``), with P_d^max the largest distance between two vocabulary
words; ``ε·ℓ·P_d^avg`` (``typical``) uses the mean distance over all ordered pairs instead — not
a bound, but the typical size of the loss for a random alternative (BRR paper §5, Definition
5.1 and Appendix A, Eq. 6–8).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..embeddings.embedding import UNK_ID

__all__ = ["DocumentGuarantee", "document_guarantee", "document_bound"]


@dataclass(frozen=True)
class DocumentGuarantee:
    """Privacy guarantee of one privatized document (see the module docstring).

    Attributes
    ----------
    epsilon
        The mechanism's per-word ε.
    n_words
        ℓ, the number of privatized words (unknown words count: they are privatized as UNK).
    n_unknown
        How many of them were out of vocabulary (privatized as the UNK point).
    p_max, p_avg
        P_d^max and P_d^avg of the mechanism's metric over its vocabulary (``p_max`` also covers
        UNK when the document has unknown words).
    worst_case
        ε·ℓ·P_d^max: bound on the log-likelihood ratio against any document of the same length.
    typical
        ε·ℓ·P_d^avg: the typical loss against a random alternative (not a bound).
    metric
        The metric d of the guarantee.
    """

    epsilon: float
    n_words: int
    n_unknown: int
    p_max: float
    p_avg: float
    worst_case: float
    typical: float
    metric: str
    mechanism: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.n_words} words at epsilon={self.epsilon:g} ({self.mechanism}; d = {self.metric}): "
            f"worst case epsilon*l*P_max = {self.worst_case:.4g} (any other document of the same length), "
            f"typical epsilon*l*P_avg = {self.typical:.4g}"
        )


def _ids(mechanism: Any, ids: Any) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    return mechanism._as_ids(arr).ravel()


def document_guarantee(mechanism: Any, ids: Any) -> DocumentGuarantee:
    """The guarantee of privatizing one document with ``mechanism``.

    Parameters
    ----------
    mechanism
        A :class:`~deniable.mechanisms.base.Mechanism`.
    ids
        The document's word ids (int array, ``-1`` = out of vocabulary, privatized as UNK).
        Words the caller drops (``oov="drop"``) or passes through must not be included.

    Returns
    -------
    DocumentGuarantee
        With ``worst_case = ε·ℓ·P_d^max`` and ``typical = ε·ℓ·P_d^avg``. P_d^max and P_d^avg
        come from :func:`deniable.calibration.privacy_ratio.mechanism_metric_stats` (exact over
        all ordered vocabulary pairs, cached). When the document contains UNK, ``p_max`` is
        raised to the largest distance from UNK to a vocabulary word if that is larger.
    """
    from .privacy_ratio import mechanism_metric_stats  # lazy: computed once per mechanism

    arr = _ids(mechanism, ids)
    stats = mechanism_metric_stats(mechanism)
    p_max, p_avg = float(stats.max), float(stats.avg)
    n_unknown = int(np.count_nonzero(arr == UNK_ID))
    if n_unknown:
        V = mechanism.n_words
        p_max = max(p_max, float(np.max(mechanism.distance(np.full(V, UNK_ID, dtype=np.int64), np.arange(V, dtype=np.int64)))))
    eps = float(mechanism.epsilon)
    n = int(arr.size)
    g = mechanism.guarantee
    return DocumentGuarantee(
        epsilon=eps,
        n_words=n,
        n_unknown=n_unknown,
        p_max=p_max,
        p_avg=p_avg,
        worst_case=eps * n * p_max,
        typical=eps * n * p_avg,
        metric=str(g.metric),
        mechanism=str(getattr(mechanism, "name", type(mechanism).__name__)),
    )


def document_bound(mechanism: Any, ids_a: Any, ids_b: Any) -> float:
    """ε·Σᵢ d(aᵢ, bᵢ): the bound on the log-likelihood ratio between two documents of equal
    length (word ids, ``-1`` = UNK) privatized word by word (Madlib paper Theorem 1)."""
    a, b = _ids(mechanism, ids_a), _ids(mechanism, ids_b)
    if a.shape != b.shape:
        raise ValueError(f"documents must have the same number of words, got {a.size} and {b.size}")
    if a.size == 0:
        return 0.0
    return float(mechanism.epsilon) * float(np.sum(mechanism.distance(a, b)))
