"""What the routes of the HTTP service compute, without a web framework: the privatize
response, the mechanism listing, the N_w curves and the BRR bundle.

:class:`ServiceState` holds what one server shares between requests (the configuration, the
:class:`~deniable.service.pool.MechanismPool`, the curve cache, the slots that bound concurrent
privatizations); the functions here take it and a parsed request and return plain dicts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .config import ServiceConfig
from .curves import DEFAULT_GRID, EPSILON_GRIDS, CurveCache
from .errors import PoolError, ServiceError
from .pool import MechanismPool, privatize_detailed, supports_targets

__all__ = ["ON_DEVICE", "ServiceState", "privatize_response", "mechanisms_response", "curve_response", "bundle_bytes"]

#: The mechanism the in-browser runtime (``static/brr.js``) implements, from the bundle served at
#: ``GET /v1/bundles/brr``.
ON_DEVICE = "brr"


@dataclass
class ServiceState:
    """What one server shares across requests."""

    cfg: ServiceConfig
    pool: MechanismPool
    curves: CurveCache
    work_slots: threading.BoundedSemaphore
    default: str
    bundle_lock: threading.Lock = field(default_factory=threading.Lock)
    bundle: bytes | None = None
    book: Any = None  # the release ledger (deniable.Ledger), when configured

    @classmethod
    def create(cls, cfg: ServiceConfig, pool: MechanismPool) -> ServiceState:
        if not pool.names:
            reasons = "; ".join(pool.unavailable.values())
            raise ValueError(f"no mechanism is available to serve{f' ({reasons})' if reasons else ''}")
        default = cfg.default_mechanism if cfg.default_mechanism in pool.names else pool.names[0]
        book = None
        if cfg.ledger is not None:
            from ..ledger import Ledger

            book = Ledger(cfg.ledger, max_total=cfg.max_total, hash_key=cfg.ledger_key)
        return cls(cfg, pool, CurveCache(pool), threading.BoundedSemaphore(cfg.max_concurrent), default, book=book)

    @property
    def served_specs(self) -> dict[str, Any]:
        return {n: self.pool.specs[n] for n in self.pool.names}


def privatize_response(state: ServiceState, req: Any) -> dict[str, Any]:
    """The response to a parsed privatize request: the texts and the guarantee, plus the
    input-dependent fields the request's ``include`` asked for."""
    pool, cfg = state.pool, state.cfg
    params = pool.check(req.mechanism, req.params)
    mech = pool.get(req.mechanism, params, epsilon=req.epsilon, max_n_w=req.max_n_w)
    rng: Any = req.seed if req.seed is not None else ("secure" if cfg.secure else None)
    segments = req.wants("segments")
    users = _request_users(state, req)
    if state.book is not None:
        _ledger_call(state.book.check, mech, dataset=cfg.ledger_dataset, users=users or ())  # refused before any work
    # the counts come from this call's own result (privatize_detailed), never from state kept
    # on the mechanism object, which concurrent requests share
    with state.work_slots:
        res = privatize_detailed(mech, req.texts, rng=rng, oov=req.oov, case=req.case, segments=segments)
    release = None
    if state.book is not None:  # budget checked and row appended in one transaction, before the texts leave
        release = _ledger_call(state.book.record, mech, dataset=cfg.ledger_dataset, words=res["privatized"], users=users, output="HTTP response")
    g = mech.guarantee
    out: dict[str, Any] = {
        "texts": res["texts"],
        "mechanism": req.mechanism,
        "epsilon": float(mech.epsilon),
        "params": params,
        "max_n_w": req.max_n_w,
        "guarantee": {"epsilon": float(g.epsilon), "metric": g.metric, "domain": g.domain, "statement": str(g)},
    }
    if req.wants("summary"):
        words = res["words"]
        out["summary"] = {"words": words, "unknown": res["unknown"], "changed": res["changed"], "changed_fraction": (res["changed"] / words) if words else 0.0}
        out["per_text"] = res["per_text"]
    if segments:
        out["segments"] = res["segments"]
    if release is not None:
        out["release_id"] = release.release_id
    return out


def _request_users(state: ServiceState, req: Any) -> list[Any] | None:
    """The request's user keys (one per text), checked against the texts and the server."""
    users = getattr(req, "users", None)
    if users is None:
        return None
    if state.book is None:
        raise PoolError("users: this server keeps no ledger (deniable serve --ledger PATH); leave users out", code="invalid_request")
    if len(users) != len(req.texts):
        raise PoolError(f"users: {len(users)} user key(s) for {len(req.texts)} text(s); give one per text", code="invalid_request")
    return list(users)


def _ledger_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A ledger call; a budget refusal is a 403, a ledger that cannot be written a 503."""
    from ..errors import DataError
    from ..ledger import BudgetExceeded

    try:
        return fn(*args, **kwargs)
    except BudgetExceeded as exc:  # the message names no server path
        raise ServiceError(
            403, "budget_exceeded",
            f"release refused by the ledger's budget: {exc.scope} {exc.key!r} has epsilon_sum {exc.total:g}; this request's epsilon "
            f"{exc.epsilon:g} would make it {exc.total + exc.epsilon:g} > max_total {exc.max_total:g}. Nothing was recorded and no text was returned",
        ) from None
    except DataError:
        raise ServiceError(503, "ledger_unavailable", "the release ledger could not record this request (busy or not writable); nothing was returned: try again") from None


def _mechanism_info(state: ServiceState, name: str) -> dict[str, Any]:
    spec = state.pool.specs[name]
    served = name in state.pool.names
    return {
        "name": name,
        "description": spec.description,
        "served": served,
        "reason": state.pool.unavailable.get(name),
        "notes": spec.notes,
        "params": [p.info() for p in spec.params],
        "epsilon_range": [state.cfg.min_epsilon, state.cfg.max_epsilon],
        "suggested_epsilons": list(EPSILON_GRIDS.get(name, DEFAULT_GRID)),
        "on_device": served and name == ON_DEVICE,
        "targets": served and state.pool.targets_ready(name),
    }


def mechanisms_response(state: ServiceState) -> dict[str, Any]:
    """``GET /v1/mechanisms``: every mechanism this server was asked to offer (served or, with
    the reason, not), its parameters, suggested ε values and whether targets work; the limits."""
    cfg = state.cfg
    limits = {"max_body_bytes": cfg.max_body_bytes, "max_texts": cfg.max_texts, "max_text_chars": cfg.max_text_chars, "max_total_chars": cfg.max_total_chars}
    return {
        "mechanisms": [_mechanism_info(state, n) for n in state.pool.specs],
        "default_mechanism": state.default,
        "privacy_targets": supports_targets(),
        "limits": limits,
    }


def curve_response(state: ServiceState, name: str) -> dict[str, Any]:
    """``GET /v1/curves/{name}``: N_w against ε at the default parameters (median and worst word)."""
    data = state.curves.get(name, {})
    return {k: data[k] for k in ("mechanism", "params", "epsilons", "median", "worst", "worst_word", "source") if k in data}


def bundle_bytes(state: ServiceState) -> bytes:
    """The BRR bundle of the pool's binary codes (``BinaryEmbedding.save``), built once."""
    if ON_DEVICE not in state.pool.names:
        raise PoolError(f"{ON_DEVICE} is not offered by this server", code="unavailable")
    with state.bundle_lock:
        if state.bundle is None:
            state.bundle = _saved_bytes(state.pool.binary_embedding())
        return state.bundle


def _saved_bytes(binary_embedding: Any) -> bytes:
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".brr")
    os.close(fd)
    try:
        binary_embedding.save(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)
