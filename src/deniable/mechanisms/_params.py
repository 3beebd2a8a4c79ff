"""Constructor checks shared by the embedding mechanisms: the metric names and their guarantee
text, the cache folder, flags, and the stop words kept verbatim (CusText+, 1-Diffractor).

Each check raises ``TypeError`` or ``ValueError`` naming the parameter and what it accepts.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..metrics import metric_name
from ..text.stopwords import stop_word_ids

__all__ = ["TEM_METRICS", "METRIC_TEXT", "check_metric", "metric_text", "check_cache_dir", "check_flag", "kept_stop_words"]

#: Metrics the exponential mechanisms (TEM, SanText, kNN-TEM, 1-Diffractor's lists) accept by
#: name (besides a callable): all true metrics on real vectors.
TEM_METRICS = ("euclidean", "manhattan", "chebyshev", "angular")
#: The guarantee's wording of each named metric.
METRIC_TEXT = {
    "euclidean": "Euclidean distance between embedding vectors",
    "manhattan": "Manhattan (L1) distance between embedding vectors",
    "chebyshev": "Chebyshev (L-infinity) distance between embedding vectors",
    "angular": "angular distance (arccos of cosine similarity, radians) between embedding vectors",
}


def check_metric(metric: Any, *, hamming_hint: str | None = None) -> None:
    """A name of :data:`TEM_METRICS` or a callable ``f(A, B)``; ``hamming_hint``, a mechanism's
    name, adds why ``"hamming"`` is refused (binary codes, not real vectors)."""
    if isinstance(metric, str):
        if metric not in TEM_METRICS:
            hint = f" (hamming needs binary codes; {hamming_hint} works on real-valued embedding vectors)" if hamming_hint and metric == "hamming" else ""
            raise ValueError(f"metric must be one of {', '.join(TEM_METRICS)} or a callable f(A, B), got {metric!r}{hint}")
    elif not callable(metric):
        raise TypeError(f"metric must be a metric name or a callable f(A, B), got {type(metric).__name__}")


def metric_text(metric: Any) -> str:
    """The guarantee's wording of ``metric`` (a named metric, or a user's callable)."""
    text = METRIC_TEXT.get(metric) if isinstance(metric, str) else None
    return text or f"user metric {metric_name(metric)} between embedding vectors (must be a true metric)"


def check_cache_dir(cache_dir: Any) -> Any:
    """``cache_dir`` when it is a path, None (the default folder) or False (memory only)."""
    if not (cache_dir is None or cache_dir is False or isinstance(cache_dir, (str, os.PathLike))):
        raise TypeError(f"cache_dir must be a path, None or False, got {type(cache_dir).__name__}")
    return cache_dir


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a bool when it is True or False (numpy's too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def kept_stop_words(mechanism: Any, keep_stop_words: bool, stop_words: Any, *, variant: str = "") -> np.ndarray:
    """Mask ``(V,)`` of the vocabulary words ``mechanism`` releases unchanged: none unless
    ``keep_stop_words``, then the stop words (``stop_words``, default the English list of
    :func:`deniable.text.stopwords.english_stop_words`) less the excluded outputs (an excluded
    word is never released verbatim). ``stop_words`` without ``keep_stop_words`` raises
    ``ValueError`` (``variant`` names the mechanism variant that keeps them, e.g. ``" (CusText+)"``)."""
    if stop_words is not None and not keep_stop_words:
        raise ValueError(f"stop_words is used only with keep_stop_words=True{variant}; pass both")
    is_stop = np.zeros(mechanism.n_words, dtype=bool)
    if keep_stop_words:
        is_stop[stop_word_ids(mechanism.vocabulary, stop_words)] = True
        if mechanism._exclusion is not None:
            is_stop &= mechanism._exclusion.mask
    return is_stop
