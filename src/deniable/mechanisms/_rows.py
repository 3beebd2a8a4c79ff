"""Which definition of a mechanism's output distribution exact computations read: its own
``log_probabilities`` or ``probabilities`` (whichever a class redefines closer to the instance's
class), and its batched ``log_probability_rows`` only where that is defined at least as close
(a subclass that changes the distribution but inherits a batched method would otherwise get the
parent's rows)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["log_probability_rows_of", "stacked_log_probability_rows"]


def _defined_by(cls: type, name: str) -> type | None:
    """The class of ``cls``'s method resolution order that defines ``name`` (None: none)."""
    return next((c for c in cls.__mro__ if name in c.__dict__), None)


def _rank(cls: type, name: str) -> int:
    """Index in ``cls``'s method resolution order of the class that defines ``name`` (its
    length when none does): a smaller rank takes precedence."""
    return next((i for i, c in enumerate(cls.__mro__) if name in c.__dict__), len(cls.__mro__))


def _log_probability_row(mechanism: Any) -> Any:
    """``word -> log P[M(word) = ·]`` from the mechanism's own definition of its distribution:
    ``log_probabilities``, or the log of ``probabilities`` where a class redefines
    ``probabilities`` closer to the instance's class than its ``log_probabilities``."""
    cls = type(mechanism)
    if _rank(cls, "probabilities") < _rank(cls, "log_probabilities"):

        def from_probabilities(word_or_id: Any) -> np.ndarray:
            with np.errstate(divide="ignore"):
                return np.log(np.asarray(mechanism.probabilities(word_or_id), dtype=np.float64))

        return from_probabilities
    return mechanism.log_probabilities


def _batched_rows_match(mechanism: Any) -> bool:
    """Whether ``mechanism.log_probability_rows`` is defined at least as close to the instance's
    class (in the method resolution order) as its ``log_probabilities`` and ``probabilities``."""
    if not callable(getattr(mechanism, "log_probability_rows", None)):
        return False
    cls = type(mechanism)
    rows = _rank(cls, "log_probability_rows")
    return rows < len(cls.__mro__) and rows <= min(_rank(cls, "log_probabilities"), _rank(cls, "probabilities"))


def log_probability_rows_of(mechanism: Any, ids: Any) -> np.ndarray:
    """``log P[M(x) = y]`` for each id of ``ids`` (UNK_ID allowed) and every vocabulary word y,
    ``(len(ids), V)`` float64, from the mechanism's own distribution: its batched
    ``log_probability_rows`` where that is defined at least as close to the instance's class as
    its ``log_probabilities`` / ``probabilities`` (a subclass or mixin that changes the
    distribution but inherits a batched method would otherwise get the parent's rows), else row
    by row. What exact statistics and the exact inversion adversary read."""
    if _batched_rows_match(mechanism):
        return np.asarray(mechanism.log_probability_rows(ids), dtype=np.float64)
    return stacked_log_probability_rows(mechanism, ids)


def stacked_log_probability_rows(mechanism: Any, ids: Any) -> np.ndarray:
    """``log P[M(x) = ·]`` for each id of ``ids``, one row at a time (the default
    :meth:`~deniable.mechanisms.base.Mechanism.log_probability_rows`), ``(len(ids), V)``."""
    arr = mechanism._as_ids(np.asarray(ids)).ravel()
    row = _log_probability_row(mechanism)
    rows = [np.asarray(row(int(x)), dtype=np.float64) for x in arr]
    return np.stack(rows) if rows else np.empty((0, mechanism.n_words))
