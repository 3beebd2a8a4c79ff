"""Per-user contribution bounding, enforced by the release itself, and the sensitivities it implies.

Every formal n-gram release starts here, whatever matrix the caller passes: each user (row) keeps
at most ``max_ngrams_per_user`` = k distinct n-grams — a uniformly random subset of its non-zero
columns when it has more, drawn from the release's own generator — and every kept count is
clamped to C. Adding or removing one user then changes the column sums c = Σₙ Δcⁿ in at most k
coordinates, each by at most C, for ANY data:

    ‖Δc‖₁ ≤ C·k,        ‖Δc‖₂ ≤ C·√k.

These are the global sensitivities the formal releases calibrate to (:func:`l1_sensitivity`,
:func:`l2_sensitivity`); they follow from bounds this module enforced, never from the data.

Randomness. The subset of a user with more than k n-grams depends only on that user's row and on
uniform keys drawn for that row's non-zeros, in row order. So the draws of the users of D are the
same whether or not a user is appended to D: the coupling the add/remove proof uses (for a user
inserted elsewhere the keys are exchangeable, so the distribution is the same).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse as sp

from .._rng import RNGLike, as_generator
from .._validation import check_positive
from .counting import _as_csr, clamp_counts

__all__ = ["DEFAULT_MAX_NGRAMS_PER_USER", "check_max_ngrams", "bound_contributions", "l1_sensitivity", "l2_sensitivity"]

#: Default k: at most this many distinct n-grams per user reach a formal release.
DEFAULT_MAX_NGRAMS_PER_USER = 50


def check_max_ngrams(k: object) -> int:
    """Validate ``max_ngrams_per_user`` (an int >= 1)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"max_ngrams_per_user must be an int >= 1, got {k!r}")
    if int(k) < 1:
        raise ValueError(f"max_ngrams_per_user must be >= 1, got {k}")
    return int(k)


def bound_contributions(matrix: object, max_ngrams_per_user: int, C: float, rng: RNGLike = None) -> sp.csr_matrix:
    """Keep at most ``max_ngrams_per_user`` distinct n-grams per user (uniformly random subset) and
    clamp every count to ``C``. O(nnz log nnz) only over the users that exceed k; O(nnz) otherwise.

    Returns a new CSR matrix (integer counts stay integer when C is an integer).
    """
    k = check_max_ngrams(max_ngrams_per_user)
    C = check_positive("C", C)
    m = _as_csr(matrix)
    counts = np.diff(m.indptr)
    over = np.flatnonzero(counts > k)
    if over.size:
        gen = as_generator(rng)
        lens = counts[over]
        starts = m.indptr[over].astype(np.int64)
        block = np.concatenate(([0], np.cumsum(lens)[:-1]))  # start of each over-user's block in `sel`
        sel = np.repeat(starts - block, lens) + np.arange(int(lens.sum()))  # their non-zeros, row order
        owner = np.repeat(np.arange(over.size), lens)
        keys = gen.random(sel.size)  # one uniform key per non-zero of these users, in row order
        order = np.lexsort((keys, owner))  # by user, then by key: a uniformly random order per user
        rank = np.arange(sel.size) - np.repeat(block, lens)  # position within the user's block
        keep = np.ones(m.nnz, dtype=bool)
        keep[sel[order[rank >= k]]] = False
        new_counts = counts.copy()
        new_counts[over] = k
        indptr = np.concatenate(([0], np.cumsum(new_counts))).astype(m.indptr.dtype, copy=False)
        m = sp.csr_matrix((m.data[keep], m.indices[keep], indptr), shape=m.shape)
    return clamp_counts(m, C)


def l1_sensitivity(max_ngrams_per_user: int, C: float) -> float:
    """Global L1 sensitivity C·k of the bounded column sums (add/remove one user)."""
    return float(C) * check_max_ngrams(max_ngrams_per_user)


def l2_sensitivity(max_ngrams_per_user: int, C: float) -> float:
    """Global L2 sensitivity C·√k of the bounded column sums (add/remove one user)."""
    return float(C) * math.sqrt(check_max_ngrams(max_ngrams_per_user))
