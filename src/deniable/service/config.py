"""Settings of the HTTP service (no web framework imported here)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

__all__ = ["ServiceConfig", "API_KEY_ENV", "INCLUDE_VALUES"]

#: Environment variable read for the API key when ``--api-key`` is not given.
API_KEY_ENV = "DENIABLE_API_KEY"

#: What a privatize request may ask to add to its response with ``include``. All of it is
#: input-dependent (counts of unknown and changed words, per-word changed flags) and not covered
#: by the privacy guarantee: it must stay with the texts' owner (docs/service.md).
INCLUDE_VALUES = ("summary", "segments")


@dataclass
class ServiceConfig:
    """What ``deniable serve`` exposes and the limits it enforces on every request.

    Parameters
    ----------
    api_key
        When set, every route except ``/healthz`` and the static explorer page requires it in the
        ``X-API-Key`` header (or ``Authorization: Bearer KEY``).
    mechanisms
        Mechanisms offered: names of :func:`deniable.available_mechanisms` (default ``None``: every
        registered mechanism). The parameters a request may set come from the registry
        (:mod:`deniable.service.catalog`).
    default_mechanism
        The mechanism of a request that names none (when it is not offered: the first offered).
    max_body_bytes
        Largest request body accepted; a larger one gets 413 before it is parsed.
    max_texts
        Most texts in one ``/v1/privatize`` call.
    max_text_chars
        Longest text accepted (characters).
    max_total_chars
        Most characters over all texts of one call.
    min_epsilon, max_epsilon
        Range of ε a request may ask for (mechanisms add their own checks).
    max_cached
        Mechanism instances kept (least recently used dropped); each distinct
        (mechanism, parameters, ε) is built once and shared across requests. Instances of one
        mechanism share its search index; a TEM instance holds its own neighbour table (about
        60 MB on the bundled embedding), which bounds the memory at about max_cached × 60 MB.
    secure
        Draw noise from ChaCha20 keyed from :mod:`secrets` (``rng="secure"``, needs the
        ``secure`` extra) when a request gives no seed.
    allow_seed
        Accept the ``seed`` field (reproducible, therefore predictable output).
    page
        Serve the ε explorer page at ``/`` and its static files under ``/static``.
    max_concurrent
        Privatizations running at once (default: the number of CPUs, at least 2); further
        requests wait their turn. Bounds memory (each search holds up to 64 MiB of scores) and
        keeps the cores from thrashing.
    compute_targets
        Resolve privacy targets (``max_n_w``) also where no calibration is shipped, computing it
        on first use (minutes on a large vocabulary; then cached on disk).
    ledger
        A release ledger file (:class:`deniable.Ledger`, created when missing): every privatize
        request appends one row (dataset ``ledger_dataset``, the request's user keys, mechanism,
        ε, words privatized per text; never the text) before its response is sent.
    ledger_dataset
        The dataset name of the requests' releases in the ledger.
    max_total
        With ``ledger``: refuse (403 ``budget_exceeded``, no texts returned) a request after which
        the dataset's or one of its user keys' sum of ε would exceed this.
    ledger_key
        With ``ledger``: store user keys as HMAC-SHA256 under this secret (``hash_key`` of
        :class:`deniable.Ledger`); None: as given.
    """

    api_key: str | None = None
    mechanisms: tuple[str, ...] | None = None
    default_mechanism: str = "madlib"
    max_body_bytes: int = 1 << 20
    max_texts: int = 256
    max_text_chars: int = 20_000
    max_total_chars: int = 200_000
    min_epsilon: float = 1e-3
    max_epsilon: float = 1e4
    max_cached: int = 16
    secure: bool = False
    allow_seed: bool = True
    page: bool = True
    compute_targets: bool = False
    max_concurrent: int = field(default_factory=lambda: max(2, os.cpu_count() or 2))
    extra: dict = field(default_factory=dict)
    ledger: str | os.PathLike[str] | None = None
    ledger_dataset: str = "deniable-serve"
    max_total: float | None = None
    ledger_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_texts", "max_text_chars", "max_total_chars", "max_cached", "max_concurrent"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        lo, hi = float(self.min_epsilon), float(self.max_epsilon)
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
            raise ValueError(f"need 0 < min_epsilon <= max_epsilon (finite), got {self.min_epsilon!r} and {self.max_epsilon!r}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or len(self.api_key) < 8):
            raise ValueError("api_key must be a string of at least 8 characters")
        self._check_ledger()
        from ..mechanisms.registry import available_mechanisms

        known = available_mechanisms()
        self.mechanisms = tuple(known if self.mechanisms is None else self.mechanisms)
        if not self.mechanisms:
            raise ValueError(f"mechanisms must name at least one mechanism (or be None for all of them: {', '.join(known)})")
        unknown = [m for m in self.mechanisms if m not in known]
        if unknown:
            raise ValueError(f"unknown mechanism(s) {', '.join(map(repr, unknown))}; registered mechanisms: {', '.join(known)}")
        if self.default_mechanism not in known:
            raise ValueError(f"default_mechanism {self.default_mechanism!r} is not a registered mechanism; use one of {', '.join(known)}")

    def _check_ledger(self) -> None:
        if not isinstance(self.ledger_dataset, str) or not self.ledger_dataset.strip():
            raise ValueError(f"ledger_dataset must be a non-empty name, got {self.ledger_dataset!r}")
        if self.ledger is None and (self.max_total is not None or self.ledger_key is not None):
            raise ValueError("max_total and ledger_key apply to a ledger: give ledger='releases.db' too")
        if self.max_total is not None and (isinstance(self.max_total, bool) or not math.isfinite(float(self.max_total)) or float(self.max_total) <= 0):
            raise ValueError(f"max_total must be a finite number > 0 (the budget of sums of epsilon), got {self.max_total!r}")
