"""The :class:`Release` record returned by every n-gram release mechanism."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Release"]


@dataclass(frozen=True)
class Release:
    """A released n-gram distribution and everything needed to state its guarantee.

    Attributes
    ----------
    keys : n-grams, all taken from the PUBLIC vocabulary (never a private-only n-gram).
    probabilities : float64 array summing to 1, aligned with ``keys``.
    mechanism : "bayesian", "bayesian-tuned", "laplace", "laplace-public", "k-anonymity",
        "public" or "private" (the last one is NOT private: a baseline for evaluation only).
    epsilon, delta : the total privacy parameters (``None`` where no DP guarantee holds).
    sigma : standard deviation of the Gaussian noise (Bayesian mechanisms), else ``None``.
    laplace_scale : scale b of the Laplace noise (Laplace baselines, tuning), else ``None``.
    calibration : "analytic" or "classic" Gaussian calibration, else ``None``.
    sensitivity : the sensitivity the noise was calibrated to (L2 for Gaussian, L1 for Laplace).
    sensitivity_method : how it was obtained: "exact" (brute-force maximum over removing each
        user of the data, done exactly), "claim1" (the worst-case bound of Claim 1), "given"
        (a number supplied by the caller), "cap" (a per-user cap W, data independent).
    guarantee : one sentence stating the guarantee and its adjacency.
    params : every other parameter used (S, ρ, C, W, K, grid, split sizes, ...).
    """

    keys: tuple[str, ...]
    probabilities: np.ndarray
    mechanism: str
    epsilon: float | None
    delta: float | None
    guarantee: str
    sigma: float | None = None
    laplace_scale: float | None = None
    calibration: str | None = None
    sensitivity: float | None = None
    sensitivity_method: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        p = np.asarray(self.probabilities, dtype=np.float64)
        if p.shape != (len(self.keys),):
            raise ValueError(f"probabilities must have shape ({len(self.keys)},), got {p.shape}")
        p.setflags(write=False)
        object.__setattr__(self, "probabilities", p)

    def __len__(self) -> int:
        return len(self.keys)

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
        """JSON-serializable description of the release (no probabilities)."""

        def clean(v: Any) -> Any:
            if isinstance(v, (np.floating, float)):
                return float(v) if math.isfinite(float(v)) else str(float(v))
            if isinstance(v, np.integer):
                return int(v)
            if isinstance(v, np.ndarray):
                return [clean(x) for x in v.tolist()]
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            if isinstance(v, dict):
                return {str(k): clean(x) for k, x in v.items()}
            return v

        return clean(
            {
                "mechanism": self.mechanism,
                "epsilon": self.epsilon,
                "delta": self.delta,
                "guarantee": self.guarantee,
                "sigma": self.sigma,
                "laplace_scale": self.laplace_scale,
                "calibration": self.calibration,
                "sensitivity": self.sensitivity,
                "sensitivity_method": self.sensitivity_method,
                "vocabulary_size": len(self.keys),
                "params": self.params,
            }
        )
