"""The :class:`Ledger`: record releases (budget checked in the same transaction), read them
back, and their totals per dataset and per user key."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._validation import check_positive
from ..errors import DataError
from .records import BudgetExceeded, Release, Tally, Total, _as_tally, _dataset, _describe, _hash_key, _now, _user_key, file_identity
from .store import _CHUNK, RELATIVE_TOLERANCE, Store

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Ledger"]


class Ledger(Store):
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
        from .._version import __version__  # (importlib.metadata: loaded when a release is recorded, not at import)

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

