"""A ledger of text releases: one SQLite row per privatization, and the totals they add up to.

A privacy team that signs off on specific jobs needs a record of what was released over time.
:class:`Ledger` keeps it in a small SQLite file (standard library :mod:`sqlite3` only), appends
one row per release, answers totals per dataset and per user key, and can refuse a release that
would exceed a budget *before anything is written*. See docs/ledger.md.

**What a row records.** The time (UTC, ISO 8601); a unique release id; the dataset identity (a
name the caller gives, or :func:`file_identity`, a hash of the input file's bytes); the mechanism's
name, parameters (JSON), metric d and embedding fingerprint; ε and how it was chosen (the privacy
target, e.g. ``max_n_w``, when ε came from one); the number of records and of words privatized
(in all and in the largest record); per user key (optional) the same counts, the key stored as
given or as a keyed hash (HMAC-SHA256); the output location; the deniable version.

**What it never records.** Text: no input word, no output word, no input file name.

**What the totals bound.** Word-level metric differential privacy (d_χ-privacy; Feyisetan et al.
2020, "Privacy- and Utility-Preserving Textual Analysis via Calibrated Multivariate
Perturbations", WSDM, Sec. 2.3, eq. (1)): a mechanism M is ε·d-private when
``Pr[M(x) = y] <= exp(ε·d(x, x'))·Pr[M(x') = y]`` for all inputs x, x' and outputs y. Each word is
privatized independently, so a record of ℓ words gets ``ε·Σ_j d(x_j, x'_j)`` against any record
x' of the same ℓ words and layout (the string metric ``d(x, x') = Σ_j d(w_j, w'_j)`` of Sec. 2.4
and Theorem 1, Sec. 2.5):
*ε·d per word, summed*. Releases compose additively (basic sequential composition, which d_χ-
privacy shares with DP: Sec. 2.3, after Chatzikokolakis et al. 2013): releases drawn with
independent randomness multiply their likelihood ratios, so a word released k times with
ε_1, ..., ε_k has log-likelihood ratio at most ``(ε_1 + ... + ε_k)·d(w, w')``. For a dataset or user key, :meth:`Ledger.totals`
reports, over the releases that touched it:

* ``epsilon_sum`` = Σ_i ε_i, **per word**: one word released in every one of these releases is
  protected by ``epsilon_sum · d(w, w')``;
* ``record_bound`` = Σ_i ε_i·m_i, with m_i the number of words privatized in the largest record
  (of that dataset or user key) of release i: changing every word of one record by distance at
  most D changes the log-likelihood ratio by at most ``record_bound · D``. The ledger cannot tell
  whether two releases held the same record, so it assumes they did: an upper bound on the
  largest record's total, exact when that record was in every release;
* ``epsilon_words`` = Σ_i ε_i·n_i, with n_i the number of words of the key privatized in release
  i: changing every word of every record of the key by at most D costs at most
  ``epsilon_words · D`` (a user-level bound for records of unchanged length and layout).

They do **not** bound: what the number of records, their lengths and layout (whitespace,
punctuation) and copied fields reveal (those are released as they are, so whether a record or a
user is present at all is not protected); words that were not privatized (``oov="keep"`` copies
them verbatim); pairs of words at distance ∞ (CusText across output sets, SanText+'s non-sensitive
words); releases that were not recorded, or that shared their randomness (one seed reused).
ε adds up only within one metric: releases with
different metrics d_i (other mechanisms or embeddings) are bound by Σ_i ε_i·d_i(x, x'), which one
number does not summarize; each total lists its metrics so that a reader sees when they differ.

**Budget.** ``Ledger(path, max_total=X)`` refuses (:class:`BudgetExceeded`, before anything is
written) a release after which the ``epsilon_sum`` of its dataset or of one of its user keys would
exceed X. Check and append run in one ``BEGIN IMMEDIATE`` transaction, so concurrent writers never
pass the budget together.

**Concurrency.** Threads may share a :class:`Ledger`; processes open their own. The file is in WAL
mode; every write is one ``BEGIN IMMEDIATE`` transaction with a busy timeout, retried with backoff
when SQLite reports the file busy, and keyed by a random release id, so a retried write is never
appended twice. Keep the file on a local file system (WAL needs shared memory; network file
systems do not provide it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import numbers
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._validation import check_positive
from ._version import __version__
from .errors import DataError

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Ledger", "Release", "Total", "Tally", "BudgetExceeded", "file_identity"]

#: Layout of the tables; a file written by a newer layout is refused with "upgrade deniable".
SCHEMA_VERSION = 1
#: ``PRAGMA application_id`` of a ledger file ("dnlg"): any other SQLite file is refused.
APPLICATION_ID = 0x646E6C67
#: A total may exceed ``max_total`` by this relative amount (floating-point rounding of sums such
#: as 0.1 + 0.1 + 0.1) and still be accepted.
RELATIVE_TOLERANCE = 1e-9
_CHUNK = 500  # user keys per SQL query (below every SQLite's limit on parameters)
_KEY_CHECK = b"deniable ledger: hash key check"
_T = TypeVar("_T")
# Connections inherited through fork() must never be used or closed in the child (SQLite's rule);
# they are kept here so that garbage collection does not close them either.
_ABANDONED: list[Any] = []
_JITTER = random.Random()  # back-off jitter only; no privacy randomness comes from here

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS releases (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL UNIQUE,
    time TEXT NOT NULL,
    dataset TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    params TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon > 0),
    epsilon_choice TEXT,
    metric TEXT NOT NULL,
    embedding TEXT,
    records INTEGER NOT NULL CHECK (records >= 0),
    words INTEGER NOT NULL CHECK (words >= 0),
    max_words INTEGER NOT NULL CHECK (max_words >= 0),
    users INTEGER NOT NULL CHECK (users >= 0),
    output TEXT,
    version TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS releases_dataset ON releases (dataset);
CREATE TABLE IF NOT EXISTS release_users (
    release INTEGER NOT NULL REFERENCES releases (seq),
    user_key TEXT NOT NULL,
    records INTEGER NOT NULL CHECK (records >= 0),
    words INTEGER NOT NULL CHECK (words >= 0),
    max_words INTEGER NOT NULL CHECK (max_words >= 0),
    PRIMARY KEY (release, user_key)
);
CREATE INDEX IF NOT EXISTS release_users_key ON release_users (user_key);
"""


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


def _is_busy(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Ledger:
    """A ledger of releases in the SQLite file ``path`` (created when missing).

    **Guarantee**: the totals (:meth:`totals`) bound the releases *recorded here* by basic
    sequential composition of metric DP, ε·d per word, summed: see the module docs for exactly
    what ``epsilon_sum``, ``record_bound`` and ``epsilon_words`` bound and what they do not. The
    file never holds text.

    Parameters
    ----------
    path
        The ledger file. Keep it on a local file system, beside (not inside) the released data.
    max_total
        Optional budget: :meth:`record` refuses (:class:`BudgetExceeded`, nothing written) a
        release after which the ``epsilon_sum`` (Σ ε per word, module docs) of its dataset or of
        one of its user keys would exceed ``max_total`` (by more than one part in 10⁹, for
        floating-point rounding). None: no budget.
    hash_key
        When given (str or bytes, a secret), user keys are stored as HMAC-SHA256 hex digests
        under this key instead of as given. A ledger keeps one choice: a file written with a key
        refuses writes with another key or without one, and the reverse.
    timeout
        Seconds a write waits for other writers (busy timeout and retries) before failing.
    create
        False: refuse a missing or empty file instead of creating a ledger there.

    References
    ----------
    Feyisetan, Balle, Drake, Diethe. Privacy- and Utility-Preserving Textual Analysis via
    Calibrated Multivariate Perturbations. WSDM 2020 (Sec. 2.3, eq. (1): d_χ-privacy; Sec. 2.4: the string metric; Sec. 2.5, Theorem 1).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_total: float | None = None,
        hash_key: bytes | str | None = None,
        timeout: float = 30.0,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.max_total = None if max_total is None else check_positive("max_total", max_total)
        self.timeout = check_positive("timeout", timeout)
        self._key = _hash_key(hash_key)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        if self.path.is_dir():
            raise DataError("is a folder; give the ledger's file name", path=self.path)
        if not self.path.parent.is_dir():
            raise DataError("the ledger's folder does not exist", path=self.path.parent)
        if not create and (not self.path.is_file() or self.path.stat().st_size == 0):
            raise DataError("no ledger here (missing or empty file)", path=self.path)
        with self._lock:
            self._retry(self._initialize)
            self._retry(lambda c: self._check_key_mode(c, writing=False, reading=True))

    # -- connection ---------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        import sqlite3

        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:  # inherited through fork(): never touch it here
            _ABANDONED.append(self._conn)
            self._conn = None
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise DataError(f"cannot open the ledger ({exc})", path=self.path) from None
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _retry(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` (one transaction) until it does not find the file busy, with jittered
        exponential back-off, for at most ``timeout`` seconds; SQLite errors become DataError."""
        import sqlite3

        deadline = time.monotonic() + self.timeout
        delay = 0.002
        while True:
            conn = self._connection()
            try:
                return work(conn)
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(delay * (0.5 + _JITTER.random()))
                    delay = min(delay * 2, 0.25)
                    continue
                if _is_busy(exc):
                    raise DataError(f"the ledger stayed busy for {self.timeout:g} s (other writers hold it); try again", path=self.path) from None
                if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
                    raise DataError("not a deniable ledger (not an SQLite file)", path=self.path) from None
                raise DataError(f"ledger error: {exc}", path=self.path) from None
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _initialize(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")  # one snapshot: another process may be creating the ledger right now
        app, empty = conn.execute("PRAGMA application_id").fetchone()[0], not self._has_tables(conn)
        conn.execute("COMMIT")
        if app == 0 and empty:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]  # persistent; outside a transaction
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute("PRAGMA application_id").fetchone()[0] == 0 and not self._has_tables(conn):
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('created', ?)", (_now(),))
            conn.execute("COMMIT")
            if str(mode).lower() != "wal":
                raise DataError(f"SQLite could not switch the ledger to WAL mode (journal mode {mode!r}); keep it on a local file system", path=self.path)
            app = conn.execute("PRAGMA application_id").fetchone()[0]
        if app != APPLICATION_ID:
            raise DataError("not a deniable ledger (an SQLite file with other contents); choose another file", path=self.path)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise DataError(f"written by a newer deniable (ledger layout {version}, this one reads {SCHEMA_VERSION}); upgrade deniable", path=self.path)

    @staticmethod
    def _has_tables(conn: sqlite3.Connection) -> bool:
        return bool(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0)

    def _check_key_mode(self, conn: sqlite3.Connection, *, writing: bool, reading: bool = False) -> None:
        """One ledger, one way of storing user keys (as given, or keyed hashes under one key);
        ``reading``: a ledger opened without a key may read hashed keys."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'user_keys'").fetchone()
        mine = "as given" if self._key is None else "hmac-sha256:" + hmac.new(self._key, _KEY_CHECK, hashlib.sha256).hexdigest()[:16]
        if row is None:
            if writing:
                conn.execute("INSERT INTO meta VALUES ('user_keys', ?)", (mine,))
            return
        if row[0] == mine or (reading and self._key is None):
            return
        if row[0] == "as given":
            raise ValueError(f"{self.path}: this ledger stores user keys as given; open it without hash_key (DENIABLE_LEDGER_KEY for the command line), or start a new ledger")
        if self._key is None:
            raise ValueError(f"{self.path}: this ledger stores keyed hashes of user keys; give the same hash_key (DENIABLE_LEDGER_KEY for the command line)")
        raise ValueError(f"{self.path}: this ledger's user keys were hashed under a different hash_key (DENIABLE_LEDGER_KEY for the command line); give the same key")

    def check_user_keys(self) -> None:
        """Raise ``ValueError`` if this instance cannot record user keys in this file: the file
        stores them another way (as given, or hashed under another ``hash_key``). Writes nothing;
        :meth:`record` checks the same inside its transaction."""
        with self._lock:
            self._retry(lambda c: self._check_key_mode(c, writing=False))

    def close(self) -> None:
        """Close this process's connection (the ledger reopens on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickles as its settings (``hash_key`` included); the copy opens its own connection."""
        return {"path": self.path, "max_total": self.max_total, "timeout": self.timeout, "key": self._key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.max_total, self.timeout, self._key = state["path"], state["max_total"], state["timeout"], state["key"]
        self._lock = threading.RLock()
        self._conn, self._pid = None, -1

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        budget = "" if self.max_total is None else f", max_total={self.max_total:g}"
        return f"Ledger({str(self.path)!r}{budget})"

    # -- keys ---------------------------------------------------------------------------------
    def user_key(self, user: str | int) -> str:
        """``user`` as this ledger stores it: as given, or its HMAC-SHA256 under ``hash_key``."""
        key = _user_key(user)
        if self._key is None:
            return key
        return hmac.new(self._key, key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def file_identity(self, path: str | os.PathLike[str]) -> str:
        """:func:`file_identity` of ``path``, keyed with this ledger's ``hash_key`` when it has one."""
        return file_identity(path, key=self._key)

    # -- writing ------------------------------------------------------------------------------
    def check(self, epsilon: float | Any, *, dataset: str, users: Iterable[str | int] = (), max_total: float | None = None) -> None:
        """Raise :class:`BudgetExceeded` if a release with ``epsilon`` (or a mechanism's ε) of
        ``dataset`` and ``users`` would take an ``epsilon_sum`` past ``max_total`` (default: the
        ledger's; None for both: nothing to check). Writes nothing; :meth:`record` checks again
        inside its transaction, so a release allowed here can still be refused there when other
        writers came first."""
        eps = check_positive("epsilon", getattr(epsilon, "epsilon", epsilon))
        cap = self.max_total if max_total is None else check_positive("max_total", max_total)
        if cap is None:
            return
        keys = sorted({self.user_key(u) for u in users})
        name = _dataset(dataset)
        with self._lock:
            self._retry(lambda c: self._check_budget(c, name, keys, eps, cap))

    def _check_budget(self, conn: sqlite3.Connection, dataset: str, keys: list[str], eps: float, cap: float) -> None:
        limit = cap * (1 + RELATIVE_TOLERANCE)
        total = conn.execute("SELECT COALESCE(SUM(epsilon), 0.0) FROM releases WHERE dataset = ?", (dataset,)).fetchone()[0]
        if total + eps > limit:
            raise BudgetExceeded("dataset", dataset, total, eps, cap, str(self.path))
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            row = conn.execute(
                "SELECT u.user_key, SUM(r.epsilon) AS s FROM release_users u JOIN releases r ON r.seq = u.release "
                f"WHERE u.user_key IN ({','.join('?' * len(chunk))}) GROUP BY u.user_key ORDER BY s DESC LIMIT 1",
                chunk,
            ).fetchone()
            if row is not None and row[1] + eps > limit:
                raise BudgetExceeded("user", row[0], row[1], eps, cap, str(self.path))

    def record(
        self,
        mechanism: Any,
        *,
        dataset: str,
        words: Tally | int | Sequence[int],
        users: Sequence[str | int] | None = None,
        output: str | os.PathLike[str] | None = None,
        epsilon: float | None = None,
        params: dict[str, Any] | None = None,
    ) -> Release:
        """Append one release (after the budget check, in one transaction) and return its row.

        Parameters
        ----------
        mechanism
            The mechanism that privatized the records (its name, ε, parameters, metric,
            embedding fingerprint and ε choice are read from it), or a mechanism name with
            ``epsilon=`` (and ``params=``).
        dataset
            The dataset / record-set identity: a name, or :meth:`file_identity` of the input.
            Never the text.
        words
            The number of words the mechanism privatized in each record (a sequence, one per
            record; an int for one record; or a :class:`Tally`, which may carry user keys).
        users
            Optional: one user key per record (str or int), stored as given or hashed (see
            ``hash_key``). Totals per user key add up across datasets.
        output
            Where the output went (a path, a table name, a URL); stored as given.

        Raises
        ------
        BudgetExceeded
            The release would take the dataset or a user key past ``max_total``: nothing is
            recorded.
        """
        name, eps, params_json, choice, metric, embedding = _describe(mechanism, epsilon, params)
        ds = _dataset(dataset)
        tally = _as_tally(words, users)
        per_user: dict[str, list[int]] = {}
        for raw, (n_rec, n_words, n_max) in tally.users.items():
            key = self.user_key(raw)
            entry = per_user.setdefault(key, [0, 0, 0])  # distinct raw keys may never share a stored key, but sum if so
            entry[0] += n_rec
            entry[1] += n_words
            entry[2] = max(entry[2], n_max)
        out = None if output is None else os.fspath(output)
        release_id = uuid.uuid4().hex
        stamp = _now()
        row = (release_id, stamp, ds, name, params_json, eps, choice, metric, embedding, tally.records, tally.words, tally.max_words, len(per_user), out, __version__)
        keys = sorted(per_user)

        def append(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute("SELECT 1 FROM releases WHERE release_id = ?", (release_id,)).fetchone() is not None:
                conn.execute("COMMIT")  # a retried write that had committed: never twice
                return
            if keys:
                self._check_key_mode(conn, writing=True)
            if self.max_total is not None:
                self._check_budget(conn, ds, keys, eps, self.max_total)
            cur = conn.execute(
                "INSERT INTO releases (release_id, time, dataset, mechanism, params, epsilon, epsilon_choice, metric, embedding, "
                "records, words, max_words, users, output, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            seq = cur.lastrowid
            conn.executemany("INSERT INTO release_users VALUES (?, ?, ?, ?, ?)", ((seq, k, *per_user[k]) for k in keys))
            conn.execute("COMMIT")

        with self._lock:
            self._retry(append)
        return Release(
            release_id, stamp, ds, name, json.loads(params_json), eps, None if choice is None else json.loads(choice), metric, embedding,
            tally.records, tally.words, tally.max_words, len(per_user), out, __version__,
        )

    # -- reading ------------------------------------------------------------------------------
    def releases(self, *, dataset: str | None = None, user: str | int | None = None) -> list[Release]:
        """The recorded releases, oldest first; only those of ``dataset`` and/or of user key
        ``user`` (as given; hashed here when the ledger hashes keys) when given."""
        where: list[str] = []
        args: list[str] = []
        if dataset is not None:
            where.append("dataset = ?")
            args.append(_dataset(dataset))
        if user is not None:
            where.append("seq IN (SELECT release FROM release_users WHERE user_key = ?)")
            args.append(self.user_key(user))
        sql = (
            "SELECT release_id, time, dataset, mechanism, params, epsilon, epsilon_choice, metric, embedding, records, words, max_words, "
            "users, output, version FROM releases" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq"
        )
        with self._lock:
            rows = self._retry(lambda c: c.execute(sql, args).fetchall())
        return [Release(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], None if r[6] is None else json.loads(r[6]), *r[7:]) for r in rows]

    def totals(self, by: str = "dataset") -> list[Total]:
        """Totals per dataset (``by="dataset"``) or per user key (``by="user"``), sorted by key:
        releases, records, words, ``epsilon_sum``, ``record_bound``, ``epsilon_words`` and the
        metrics (see :class:`Total` and the module docs for what each bounds)."""
        if by == "dataset":
            source = "releases r"
            group = "r.dataset"
            cols = "r.records, r.words, r.max_words"
        elif by == "user":
            source = "release_users u JOIN releases r ON r.seq = u.release"
            group = "u.user_key"
            cols = "u.records, u.words, u.max_words"
        else:
            raise ValueError(f"by must be 'dataset' or 'user', got {by!r}")
        rec, words, mx = cols.split(", ")
        sql = (
            f"SELECT {group}, COUNT(*), SUM({rec}), SUM({words}), SUM(r.epsilon), SUM(r.epsilon * {mx}), SUM(r.epsilon * {words}), "
            f"MIN(r.time), MAX(r.time) FROM {source} GROUP BY {group} ORDER BY {group}"
        )
        metrics_sql = f"SELECT DISTINCT {group}, r.metric, r.embedding FROM {source} ORDER BY 1, 2, 3"

        def read(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            conn.execute("BEGIN")  # one snapshot for both queries
            try:
                return conn.execute(sql).fetchall(), conn.execute(metrics_sql).fetchall()
            finally:
                conn.execute("COMMIT")

        with self._lock:
            rows, metric_rows = self._retry(read)
        metrics: dict[str, list[str]] = {}
        for key, metric, embedding in metric_rows:
            metrics.setdefault(key, []).append(metric + (f" (embedding {embedding})" if embedding else ""))
        return [Total(by, r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(metrics.get(r[0], ())), r[7], r[8]) for r in rows]

    def __len__(self) -> int:
        with self._lock:
            return int(self._retry(lambda c: c.execute("SELECT COUNT(*) FROM releases").fetchone()[0]))


def _dataset(dataset: object) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise ValueError(f"dataset must be a non-empty name (or Ledger.file_identity(path)), got {dataset!r}")
    return dataset


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")

