"""The :class:`Release` record returned by every n-gram release mechanism."""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any

import numpy as np

from ..errors import PrivacyWarning

__all__ = ["Release", "LOCAL_SENSITIVITY_NOTE", "warn_if_not_formal"]

#: The plain statement carried by every release whose noise is calibrated to the data at hand.
LOCAL_SENSITIVITY_NOTE = (
    "reproduces Ramadan et al.; noise calibrated to the local sensitivity of this dataset "
    "\u2014 NOT a formal differential-privacy guarantee"
)

# Values that are functions of the private data: they belong in ``Release.diagnostics`` and must
# never be in ``Release.params`` (which is published by :meth:`Release.metadata`).
_DATA_DEPENDENT_KEYS = frozenset(
    {
        "n_users",
        "gamma",
        "sigma",
        "sensitivity",
        "laplace_scale",
        "kept",
        "tuning_sensitivity",
        "tuning_sensitivity_validation",
        "tuning_sensitivity_train",
        "n_train_users",
        "n_validation_users",
        "scores",
    }
)


def _library_version() -> str:
    try:
        from importlib.metadata import version

        return version("deniable")
    except Exception:  # pragma: no cover - not installed (source checkout)
        return "0.0.0+unknown"


@dataclass(frozen=True)
class Release:
    """A released n-gram distribution, its guarantee, and (kept apart) private diagnostics.

    What is published and what is not. :meth:`metadata` — what
    :func:`deniable.ngrams.io.write_release` writes next to the probabilities — holds only values
    that do not depend on the private data: ε, δ, the mechanism, the public parameters in
    ``params`` (S, ρ, C, W when the caller gave them, n, grids, ...), the public vocabulary size,
    the calibration and sensitivity method, ``formal_dp`` and ``guarantee``; plus σ, the Laplace
    scale and the sensitivity when, and only when, they are data independent (``formal_dp``).
    Everything computed from the private data (user counts, local sensitivities and the noise
    scales derived from them, γ, tuning scores and the tuned (S, ρ), ...) is in ``diagnostics``,
    which no writer ever outputs: publishing it would leak information the guarantee does not
    cover (e.g. the exact number of users distinguishes D from D plus one user with certainty).

    Attributes
    ----------
    keys : n-grams, all taken from the PUBLIC vocabulary (never a private-only n-gram).
    probabilities : float64 array summing to 1, aligned with ``keys``.
    mechanism : "bayesian", "bayesian-tuned", "laplace", "laplace-public", "k-anonymity",
        "public" or "private" (the last one is NOT private: a baseline for evaluation only).
    epsilon, delta : the (nominal) privacy parameters (``None`` where no DP parameter applies).
    guarantee : one line stating the guarantee and its adjacency, or plainly that there is none.
    formal_dp : True only when the release is (ε, δ)-DP under user-level add/remove adjacency for
        any data: the release enforced the contribution bounds itself and calibrated its noise to
        the global sensitivity derived from them (:func:`~deniable.ngrams.release_bayesian`,
        :func:`~deniable.ngrams.release_laplace`; the public prior). False for the paper's
        local-sensitivity calibrations and the W = |U|/1000 rule (:mod:`deniable.ngrams.paper`),
        k-anonymity and the raw private distribution.
    sigma : standard deviation of the Gaussian noise (Bayesian mechanisms), else ``None``.
        Data dependent unless ``formal_dp``; not published then.
    laplace_scale : scale b of the Laplace noise (Laplace baselines, tuning), else ``None``.
    calibration : "analytic" or "classic" Gaussian calibration, else ``None``.
    sensitivity : the sensitivity the noise was calibrated to (L2 for Gaussian, L1 for Laplace).
    sensitivity_method : "derived" (the global bound implied by the contribution bounds the
        release enforced), "given" (a caller's number, accepted only when >= the derived bound in
        the formal releases), "cap" (the per-user cap W), "exact" (local: maximum over removing each
        user of this data), "claim1" (Claim 1's bound, also computed on this data).
    sampler : the noise sampler used: "opendp" or "numpy" (``None`` when no noise was drawn).
    params : the PUBLIC parameters only (published).
    diagnostics : data-dependent values (NOT privatized; never written by :mod:`.io`).
    """

    keys: tuple[str, ...]
    probabilities: np.ndarray
    mechanism: str
    epsilon: float | None
    delta: float | None
    guarantee: str
    formal_dp: bool = False
    sigma: float | None = None
    laplace_scale: float | None = None
    calibration: str | None = None
    sensitivity: float | None = None
    sensitivity_method: str | None = None
    sampler: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        p = np.asarray(self.probabilities, dtype=np.float64)
        if p.shape != (len(self.keys),):
            raise ValueError(f"probabilities must have shape ({len(self.keys)},), got {p.shape}")
        p.setflags(write=False)
        object.__setattr__(self, "probabilities", p)
        object.__setattr__(self, "formal_dp", bool(self.formal_dp))
        leaked = sorted(_DATA_DEPENDENT_KEYS.intersection(self.params))
        if leaked:
            raise ValueError(f"params are published and must not hold data-dependent values {leaked}; put them in diagnostics")

    def __len__(self) -> int:
        return len(self.keys)

    def with_params(self, **public: Any) -> Release:
        """A copy with ``public`` added to ``params``: values that do not depend on the private
        data (e.g. ``n``, the n-gram order of the public vocabulary). Data-dependent keys are
        rejected as at construction."""
        return replace(self, params={**self.params, **public})

    def __repr__(self) -> str:
        # short on purpose: the generated dataclass repr printed every key and probability (MBs)
        top = ", ".join(f"{k!r}: {p:.4g}" for k, p in self.top(3))
        more = ", ..." if len(self.keys) > 3 else ""
        return (
            f"Release(mechanism={self.mechanism!r}, epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"formal_dp={self.formal_dp}, size={len(self.keys)}, top={{{top}{more}}})"
        )

    @property
    def log_probabilities(self) -> np.ndarray:
        """Natural log of the probabilities (−inf where a probability is 0)."""
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities)

    def as_dict(self) -> dict[str, float]:
        """``{ngram: probability}``."""
        return dict(zip(self.keys, self.probabilities.tolist()))

    def top(self, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` most probable n-grams."""
        order = np.argsort(-self.probabilities, kind="stable")[:k]
        return [(self.keys[i], float(self.probabilities[i])) for i in order]

    def metadata(self) -> dict[str, Any]:
        """The publishable, data-independent description of the release (JSON-serializable).

        Never includes ``diagnostics``; includes σ, the Laplace scale and the sensitivity only
        when ``formal_dp`` (they are then functions of public parameters).
        """
        meta: dict[str, Any] = {
            "library": "deniable",
            "version": _library_version(),
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "formal_dp": self.formal_dp,
            "guarantee": self.guarantee,
            "calibration": self.calibration,
            "sensitivity_method": self.sensitivity_method,
            "sampler": self.sampler,
            "vocabulary_size": len(self.keys),
            "params": self.params,
        }
        if self.formal_dp:
            public = {"sigma": self.sigma, "laplace_scale": self.laplace_scale, "sensitivity": self.sensitivity}
            meta.update({k: v for k, v in public.items() if v is not None})
        return _clean(meta)

    def diagnostics_json(self) -> dict[str, Any]:
        """``diagnostics`` (plus σ, Laplace scale and sensitivity) as JSON-able values.

        NOT privatized: for the data owner's own inspection, never to be published.
        """
        d = {"sigma": self.sigma, "laplace_scale": self.laplace_scale, "sensitivity": self.sensitivity}
        d.update(self.diagnostics)
        return _clean(d)


def _clean(v: Any) -> Any:
    if isinstance(v, (np.floating, float)):
        return float(v) if math.isfinite(float(v)) else str(float(v))
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.ndarray):
        return [_clean(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    return v


def _caller_stacklevel() -> int:
    """stacklevel pointing at the first frame outside ``deniable.ngrams`` (the caller's code)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == pkg:
        frame = frame.f_back
        level += 1
    return level


def warn_if_not_formal(release: Release) -> Release:
    """Emit a :class:`PrivacyWarning` when ``release`` carries no formal DP guarantee; return it."""
    if not release.formal_dp:
        warnings.warn(f"n-gram release ({release.mechanism}): {release.guarantee}", PrivacyWarning, stacklevel=_caller_stacklevel())
    return release
