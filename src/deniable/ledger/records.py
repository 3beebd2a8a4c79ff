"""The values of the ledger: a release row (:class:`Release`), the totals of a key
(:class:`Total`), the per-record word counts of one release (:class:`Tally`), the budget refusal
(:class:`BudgetExceeded`), dataset identities (:func:`file_identity`), and how a mechanism is
described in a row (never any text)."""

from __future__ import annotations

import hashlib
import hmac
import json
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

from .._validation import check_positive

__all__ = ["BudgetExceeded", "Release", "Total", "Tally", "file_identity"]


class BudgetExceeded(ValueError):
    """A release refused because it would take a dataset's or a user key's ``epsilon_sum`` past
    ``max_total``; nothing was recorded.

    Attributes: ``scope`` (``"dataset"`` or ``"user"``), ``key`` (as stored), ``total`` (its
    ``epsilon_sum`` before the release), ``epsilon`` (the release's), ``max_total``.
    """

    def __init__(self, scope: str, key: str, total: float, epsilon: float, max_total: float, ledger: str) -> None:
        self.scope, self.key, self.total, self.epsilon, self.max_total = scope, key, total, epsilon, max_total
        super().__init__(
            f"release refused by the ledger {ledger}: {scope} {key!r} has epsilon_sum {total:g}; this release's epsilon {epsilon:g} "
            f"would make it {total + epsilon:g} > max_total {max_total:g}. Nothing was recorded"
        )


@dataclass(frozen=True)
class Release:
    """One row of the ledger (what :meth:`Ledger.record` appended; never any text).

    ``params`` and ``epsilon_choice`` are decoded from JSON; ``max_words`` is the number of words
    privatized in the largest record; ``users`` the number of distinct user keys (0: none given).
    The release's per-record bound is ``epsilon · Σ_j d(x_j, x'_j)`` over a record's words, at most
    ``epsilon · max_words · D`` when every word moves by at most D.
    """

    release_id: str
    time: str
    dataset: str
    mechanism: str
    params: dict[str, Any]
    epsilon: float
    epsilon_choice: dict[str, Any] | None
    metric: str
    embedding: str | None
    records: int
    words: int
    max_words: int
    users: int
    output: str | None
    version: str


@dataclass(frozen=True)
class Total:
    """The totals of one dataset or user key over the releases that touched it (module docs).

    ``epsilon_sum`` (Σ ε_i) bounds one word released in all of them: ``epsilon_sum · d(w, w')``;
    ``record_bound`` (Σ ε_i·m_i, m_i the largest record's words in release i) bounds one record:
    ``record_bound · D`` when each of its words moves by at most D; ``epsilon_words`` (Σ ε_i·n_i,
    n_i the key's words in release i) bounds all of the key's records the same way. ``metrics``
    lists the metrics d (with the embedding fingerprint) of these releases: the sums are
    guarantees in one metric only when there is one.
    """

    scope: str
    key: str
    releases: int
    records: int
    words: int
    epsilon_sum: float
    record_bound: float
    epsilon_words: float
    metrics: tuple[str, ...]
    first: str
    last: str

    def to_dict(self) -> dict[str, Any]:
        """The total as JSON-ready values."""
        return {**self.__dict__, "metrics": list(self.metrics)}


class Tally:
    """Per-record word counts of one release, summed as records stream in (memory grows with the
    number of user keys, not of records). Pass it to :meth:`Ledger.record` as ``words``.

    Example::

        tally = Tally()
        for user, n_words in records:
            tally.add(n_words, user=user)
    """

    def __init__(self) -> None:
        self.records = 0
        self.words = 0
        self.max_words = 0
        #: user key -> [records, words, max_words]
        self.users: dict[str, list[int]] = {}
        #: records with privatized words but no user key
        self.unattributed = 0

    def add(self, words: int, user: str | int | None = None) -> None:
        """Count one record with ``words`` privatized words, of user ``user`` (None: no key)."""
        if isinstance(words, bool) or not isinstance(words, numbers.Integral) or words < 0:
            raise ValueError(f"words must be an integer >= 0 (the words privatized in one record), got {words!r}")
        n = int(words)
        self.records += 1
        self.words += n
        self.max_words = max(self.max_words, n)
        if user is None:
            if n:
                self.unattributed += 1
            return
        key = _user_key(user)
        entry = self.users.get(key)
        if entry is None:
            self.users[key] = [1, n, n]
        else:
            entry[0] += 1
            entry[1] += n
            entry[2] = max(entry[2], n)

    def add_totals(self, records: int, words: int, max_words: int, user: str | int | None = None) -> None:
        """Count ``records`` records with ``words`` privatized words in all, at most
        ``max_words`` in one, of user ``user`` (None: no key) — aggregates computed elsewhere
        (e.g. per user key on a Spark cluster). Equal to adding the records one by one."""
        for name, v in (("records", records), ("words", words), ("max_words", max_words)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if max_words > words or (records == 0 and words > 0) or (words > 0 and max_words == 0):
            raise ValueError(f"inconsistent totals: {records} records, {words} words, at most {max_words} in one")
        if records == 0:
            return
        n, m = int(words), int(max_words)
        self.records += int(records)
        self.words += n
        self.max_words = max(self.max_words, m)
        if user is None:
            if n:
                self.unattributed += int(records)  # at least one record has words; all counted as without key
            return
        entry = self.users.setdefault(_user_key(user), [0, 0, 0])
        entry[0] += int(records)
        entry[1] += n
        entry[2] = max(entry[2], m)

    def __repr__(self) -> str:
        return f"Tally(records={self.records}, words={self.words}, max_words={self.max_words}, users={len(self.users)})"


def _user_key(user: object) -> str:
    if isinstance(user, bool) or not isinstance(user, (str, numbers.Integral)):
        raise TypeError(f"a user key must be a string or an integer, got {user!r} ({type(user).__name__})")
    key = str(int(user)) if isinstance(user, numbers.Integral) else user
    if not key:
        raise ValueError("a user key must not be empty")
    return key


def _hash_key(key: bytes | str | None) -> bytes | None:
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else key
    if not isinstance(raw, bytes) or not raw:
        raise ValueError("hash_key must be a non-empty str or bytes (the secret of the keyed hash of user keys), or None")
    return raw


def file_identity(path: str | os.PathLike[str], *, key: bytes | str | None = None) -> str:
    """A dataset identity for an input file: ``"sha256:<hex>"`` of the file's bytes as stored
    (``"hmac-sha256:<hex>"`` keyed with ``key``). The same bytes under another name get the same
    identity, so their releases add up; changed bytes get a new one (user keys still add up).

    An unkeyed hash lets anyone holding a candidate file check whether it was released: give a
    ``key`` (or a dataset name) where that matters.
    """
    raw = _hash_key(key)
    h = hmac.new(raw, digestmod=hashlib.sha256) if raw is not None else hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return ("hmac-sha256:" if raw is not None else "sha256:") + h.hexdigest()


def _jsonable(value: Any) -> Any:
    for attr in ("item", "tolist"):  # numpy scalars and arrays
        f = getattr(value, attr, None)
        if callable(f):
            try:
                return f()
            except (TypeError, ValueError):
                pass
    return str(value)


def _describe(mechanism: Any, epsilon: float | None, params: dict[str, Any] | None) -> tuple[str, float, str, str | None, str, str | None]:
    """(name, ε, params JSON, ε choice JSON, metric, embedding fingerprint) of a mechanism object
    or of a name with ``epsilon`` (and ``params``)."""
    if isinstance(mechanism, str):
        if epsilon is None:
            raise TypeError("record(name, ...) needs epsilon=...; or pass the mechanism object itself")
        name, eps, p, choice, metric, embedding = mechanism, check_positive("epsilon", epsilon), dict(params or {}), None, "not given", None
    else:
        if epsilon is not None or params is not None:
            raise TypeError("epsilon= and params= are read from the mechanism object; give them only with a mechanism name")
        if not hasattr(mechanism, "epsilon"):
            raise TypeError(f"mechanism must be a Mechanism (with .epsilon) or a name, got {type(mechanism).__name__}")
        name = str(getattr(mechanism, "name", type(mechanism).__name__))
        eps = check_positive("epsilon", mechanism.epsilon)
        p = dict(getattr(mechanism, "params", {}) or {})
        g = getattr(mechanism, "guarantee", None)
        metric = str(getattr(g, "metric", "not given"))
        embedding = getattr(getattr(mechanism, "vocabulary", None), "fingerprint", None)
        embedding = None if embedding is None else str(embedding)
        c = getattr(mechanism, "epsilon_choice", None)
        choice = None
        if c is not None:
            d = c.to_dict() if callable(getattr(c, "to_dict", None)) else dict(getattr(c, "__dict__", {}))
            # the target and how it was met; no word (the calibration's worst word) is stored
            keep = ("max_n_w", "confidence", "coverage", "estimator", "source")
            choice = json.dumps({"target": "max_n_w", **{k: d[k] for k in keep if k in d}}, sort_keys=True, default=_jsonable)
    if not name:
        raise ValueError("the mechanism name must not be empty")
    return name, eps, json.dumps(p, sort_keys=True, default=_jsonable), choice, metric, embedding


def _as_tally(words: Tally | int | Sequence[int], users: Sequence[str | int] | None) -> Tally:
    if isinstance(words, Tally):
        if users is not None:
            raise TypeError("a Tally carries its own user keys; pass users=None with it")
        tally = words
    elif isinstance(words, numbers.Integral) and not isinstance(words, bool):
        tally = Tally()
        if users is not None and len(users) != 1:
            raise ValueError(f"words={words} is one record, but {len(users)} user keys were given")
        tally.add(int(words), None if users is None else users[0])
    else:
        counts = list(cast(Sequence[int], words))
        if users is not None and len(users) != len(counts):
            raise ValueError(f"users has {len(users)} keys for {len(counts)} records: give one user key per record")
        tally = Tally()
        for i, n in enumerate(counts):
            if users is not None and users[i] is None:
                raise ValueError(f"users[{i}] is None: every record needs a user key (or pass users=None)")
            tally.add(n, None if users is None else users[i])
    if tally.users and tally.unattributed:
        raise ValueError(f"{tally.unattributed} record(s) with privatized words have no user key: give every record one, or none")
    return tally



def _dataset(dataset: object) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError(f"dataset must be a non-empty name (or Ledger.file_identity(path)), got {dataset!r}")
    return dataset


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")

