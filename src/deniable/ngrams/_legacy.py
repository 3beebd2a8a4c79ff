"""Deprecated entry points of :mod:`deniable.ngrams`, kept so existing code runs unchanged.

:func:`release` takes the old all-in-one arguments and dispatches to
:func:`~deniable.ngrams.release_bayesian`, :func:`~deniable.ngrams.release_laplace` or the
:mod:`deniable.ngrams.paper` functions, with the same outputs for the same seed; the other names
are aliases of their replacements. Each call emits a :class:`DeprecationWarning` naming the
replacement.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike
from . import paper
from .baselines import PAPER_RULE, laplace_public_release, laplace_release
from .bounding import DEFAULT_MAX_NGRAMS_PER_USER
from .counting import NgramVocabulary
from .formal import DEFAULT_TUNE_RHO_GRID, DEFAULT_TUNE_S_GRID, release_bayesian, release_laplace
from .release import Release, _caller_stacklevel
from .tuning import DEFAULT_RHO_GRID, DEFAULT_S_GRID

__all__ = ["MECHANISMS", "release", "formal_bayesian", "formal_laplace", "formal_laplace_public", "bayesian_dp", "end_to_end_dp"]

#: The ``mechanism`` values of the deprecated :func:`release`.
MECHANISMS = ("bayesian", "laplace", "laplace-public", "k-anonymity")


def _warn(old: str, new: str) -> None:
    warnings.warn(f"deniable.ngrams.{old} is deprecated; use {new}", DeprecationWarning, stacklevel=_caller_stacklevel())


def _alias(func: Callable[..., Release], old: str, new: str) -> Callable[..., Release]:
    @functools.wraps(func)
    def deprecated(*args: Any, **kwargs: Any) -> Release:
        _warn(old, new)
        return func(*args, **kwargs)

    deprecated.__name__ = deprecated.__qualname__ = old
    deprecated.__doc__ = f"Deprecated alias of :func:`{new}` (same arguments and outputs)."
    return deprecated


formal_laplace = _alias(release_laplace, "formal_laplace", "deniable.ngrams.release_laplace")
formal_laplace_public = _alias(release_laplace, "formal_laplace_public", "deniable.ngrams.release_laplace")
bayesian_dp = _alias(paper.bayesian_not_dp, "bayesian_dp", "deniable.ngrams.paper.bayesian_not_dp")
end_to_end_dp = _alias(paper.bayesian_tuned_not_dp, "end_to_end_dp", "deniable.ngrams.paper.bayesian_tuned_not_dp")


def formal_bayesian(user_counts: object, public_counts: object, *, S: float = 1.0, rho: float = 0.5, tune: bool = False, **options: Any) -> Release:
    """Deprecated: :func:`deniable.ngrams.release_bayesian` (which tunes when S and ρ are both None)."""
    _warn("formal_bayesian", "deniable.ngrams.release_bayesian")
    return release_bayesian(user_counts, public_counts, S=None if tune else S, rho=None if tune else rho, **options)


def release(
    user_counts: object,
    public_counts: object,
    *,
    epsilon: float,
    delta: float,
    mechanism: str = "bayesian",
    S: float | None = None,
    rho: float | None = None,
    C: float = 1,
    max_ngrams_per_user: int = DEFAULT_MAX_NGRAMS_PER_USER,
    sensitivity: str | float | None = None,
    local_sensitivity: bool = False,
    calibration: str = "analytic",
    tune: bool | None = None,
    S_grid: Sequence[float] | None = None,
    rho_grid: Sequence[float] | None = None,
    tune_fraction: float = 1.0 / 3.0,
    validation_fraction: float = 0.1,
    score: str = "mean",
    W: float | str | None = None,
    K: int = 50,
    sampler: str = "auto",
    keys: Sequence[str] | None = None,
    rng: RNGLike = None,
) -> Release:
    """Deprecated all-in-one n-gram release: use the function for the mechanism instead.

    Replacements. Formal DP: :func:`deniable.ngrams.release_bayesian` (``mechanism="bayesian"``)
    and :func:`deniable.ngrams.release_laplace` (``"laplace"``; ``"laplace-public"`` with the
    public counts). The paper's modes, NOT DP (``local_sensitivity=True``, ``W="paper-rule"``,
    ``"k-anonymity"``): :mod:`deniable.ngrams.paper`.

    Dispatches to those functions with the same arguments, so the output for a seed is the same
    as theirs (and as before); a :class:`~deniable.ngrams.NgramVocabulary` given as ``public_counts``
    also records its ``n`` in ``params``. Guarantee: that of the function called (``formal_dp``
    and ``guarantee`` say which). ``tune`` (default: True when the Bayesian release gets neither
    S nor ρ) maps to S = ρ = None of :func:`~deniable.ngrams.release_bayesian`; with
    ``local_sensitivity=True`` to :func:`~deniable.ngrams.paper.bayesian_tuned_not_dp`.
    """
    if not isinstance(local_sensitivity, (bool, np.bool_)):
        raise TypeError(f"local_sensitivity must be True or False, got {local_sensitivity!r}")
    if tune is None:
        tune = not local_sensitivity and mechanism == "bayesian" and S is None and rho is None
    if tune and mechanism != "bayesian" and not local_sensitivity:
        raise ValueError("tune applies to the bayesian mechanism only")
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if mechanism == "laplace-public" and public_counts is None:
        raise ValueError("mechanism 'laplace-public' needs the public counts")
    common: dict[str, Any] = {"keys": keys, "rng": rng}
    budget: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "C": C}
    fixed: dict[str, Any] = {"S": 1.0 if S is None else S, "rho": 0.5 if rho is None else rho}
    if mechanism == "k-anonymity":
        new, rel = "paper.k_anonymity_not_dp (NOT DP)", paper.k_anonymity_not_dp(user_counts, K=K, keys=keys)
    elif mechanism == "bayesian" and local_sensitivity:
        local = {**budget, "sensitivity": "exact" if sensitivity is None else sensitivity, "calibration": calibration, **common}
        if tune:
            new, rel = "paper.bayesian_tuned_not_dp (NOT DP)", paper.bayesian_tuned_not_dp(
                user_counts, public_counts, S_grid=S_grid or DEFAULT_S_GRID, rho_grid=rho_grid or DEFAULT_RHO_GRID, tune_fraction=tune_fraction,
                validation_fraction=validation_fraction, score=score, **local,
            )
        else:
            new, rel = "paper.bayesian_not_dp (NOT DP)", paper.bayesian_not_dp(user_counts, public_counts, **fixed, **local)
    elif mechanism == "bayesian":
        if W is not None:
            raise ValueError("W applies to the Laplace mechanisms only")
        new, rel = "release_bayesian", release_bayesian(
            user_counts, public_counts, **budget, **({"S": None, "rho": None} if tune else fixed), max_ngrams_per_user=max_ngrams_per_user,
            S_grid=S_grid or DEFAULT_TUNE_S_GRID, rho_grid=rho_grid or DEFAULT_TUNE_RHO_GRID, validation_fraction=validation_fraction,
            sensitivity=sensitivity, sampler=sampler, **common,  # type: ignore[arg-type]  # a string is refused there, naming the paper's modes
        )
    else:
        prior = public_counts if mechanism == "laplace-public" else None
        formal = {"C": C, "max_ngrams_per_user": max_ngrams_per_user, "sampler": sampler, **common}
        new, rel = _laplace(user_counts, prior, local_sensitivity, epsilon, W, sensitivity, formal)
    _warn("release", f"deniable.ngrams.{new}")
    if isinstance(public_counts, NgramVocabulary) and "n" not in rel.params:
        rel = rel.with_params(n=int(public_counts.n))
    return rel


def _laplace(users: object, prior: object, local: bool, epsilon: float, W: Any, sensitivity: Any, formal: dict[str, Any]) -> tuple[str, Release]:
    """(replacement, release) of the deprecated :func:`release` for the Laplace mechanisms."""
    keys, rng = formal["keys"], formal["rng"]
    if local and W is None:
        mechanism = "laplace" if prior is None else "laplace-public"
        raise ValueError(
            f"W is required for mechanism {mechanism!r} with local_sensitivity=True: a per-user cap, "
            f"or W={PAPER_RULE!r} for the paper's max(1, |U|/1000) (data dependent: not formal DP)"
        )
    sens = ("exact" if local else 2.0) if sensitivity is None else sensitivity
    if prior is None and W == PAPER_RULE:
        return "paper.laplace_not_dp (NOT DP)", paper.laplace_not_dp(users, epsilon=epsilon, keys=keys, rng=rng)
    if prior is None and local:  # a public cap: the paper's numpy baseline (formal)
        return "laplace_release (or release_laplace with W)", laplace_release(users, epsilon=epsilon, W=W, keys=keys, rng=rng)
    if prior is not None and (W == PAPER_RULE or (local and isinstance(sens, str))):
        return "paper.laplace_public_not_dp (NOT DP)", paper.laplace_public_not_dp(users, prior, epsilon=epsilon, W=W, sensitivity=sens, keys=keys, rng=rng)
    if prior is not None and local:  # a public cap and a global bound: the paper's numpy baseline (formal)
        return "laplace_public_release (or release_laplace with the public counts)", laplace_public_release(
            users, prior, epsilon=epsilon, W=W, sensitivity=sens, keys=keys, rng=rng
        )
    return "release_laplace", release_laplace(users, prior, epsilon=epsilon, W=W, sensitivity=sensitivity, **formal)
