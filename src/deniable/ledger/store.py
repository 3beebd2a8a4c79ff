"""The SQLite side of the ledger: the tables, one connection per process, transactions retried
while other writers hold the file, and the one way a file stores user keys."""

from __future__ import annotations

import hashlib
import hmac
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import DataError
from .records import _now

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SCHEMA_VERSION", "APPLICATION_ID", "RELATIVE_TOLERANCE", "Store"]

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


def _is_busy(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Store:
    """One ledger file: its connection (one per process, shared by threads under a lock), its
    transactions (retried while busy), its creation and its key mode. :class:`~deniable.Ledger`
    adds the releases and totals."""

    path: Path
    max_total: float | None
    timeout: float
    _key: bytes | None
    _lock: threading.RLock
    _conn: sqlite3.Connection | None
    _pid: int

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
            conn.execute("PRAGMA synchronous=FULL")  # a committed release survives a crash (WAL's NORMAL may lose the last ones)
        except sqlite3.Error as exc:
            if "not a database" in str(exc):
                raise DataError("not a deniable ledger (not an SQLite file)", path=self.path) from None
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
