"""Deprecated: ``truncated_gumbel`` / :class:`TruncatedGumbel` is :class:`~deniable.mechanisms.knn_tem.KnnTEM`.

The mechanism published here under this name is our own TEM variant (the exponential mechanism
truncated at each word's k-th nearest distance), not the FLAIRS 2021 "truncated Gumbel" mechanism
of Carvalho, Vasiloudis and Feyisetan. It is now ``knn_tem`` / :class:`KnnTEM`; the old name
builds the same mechanism (same distribution, same samples for a seed) and warns. See
docs/mechanisms/knn_tem.md.
"""

from __future__ import annotations

import warnings
from typing import Any

from .knn_tem import KnnTEM

__all__ = ["TruncatedGumbel"]

DEPRECATION = (
    "'truncated_gumbel' / TruncatedGumbel is deprecated: it is our own k-nearest TEM variant, not the FLAIRS 2021 "
    "truncated Gumbel mechanism; use 'knn_tem' / KnnTEM (same mechanism; see docs/mechanisms/knn_tem.md)"
)


class TruncatedGumbel(KnnTEM):
    """Deprecated alias of :class:`~deniable.mechanisms.knn_tem.KnnTEM` (warns with
    ``DeprecationWarning``); same parameters, distribution and samples."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)
        super().__init__(*args, **kwargs)
