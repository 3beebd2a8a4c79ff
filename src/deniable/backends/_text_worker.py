"""The worker side of :class:`deniable.backends.text.ParallelPrivatizer`: a worker process
receives groups of batches of texts, runs :func:`deniable.text.privatize_texts` on each with a
stand-in mechanism, sends the ids to sample to the main process and rebuilds the texts with the
ids it gets back. Worker processes only ever hold the vocabulary's words."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np

from .._threads import set_threads
from ..embeddings.embedding import Vocabulary
from ..errors import PrivacyWarning
from ..text.privatize import privatize_texts

__all__ = ["worker_main"]


class _WordList(Vocabulary):
    """The vocabulary's word <-> id lookup only (what the text path needs)."""

    def __init__(self, words: list[str]) -> None:
        self._words = words
        index: dict[str, int] = {}
        for i, w in enumerate(words):
            index.setdefault(w, i)
        self._index = index


class _Stop(BaseException):
    """The main process asked a worker to stop (or is gone)."""


class _Job:
    """Stand-in mechanism inside a worker: one batch's :func:`~deniable.text.privatize_texts`
    in a thread that pauses in ``sample_ids`` until the main process has sampled the ids."""

    def __init__(self, vocabulary: Vocabulary, texts: list[str], oov: str, case: str, want_counts: bool) -> None:
        self.vocabulary = vocabulary
        self.ids: np.ndarray | None = None
        self.chosen: np.ndarray | None = None
        self.result: Any = None
        self.error: Exception | None = None
        self._paused, self._answered = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, args=(texts, oov, case, want_counts), daemon=True)
        self._thread.start()
        self._paused.wait()  # asking for ids, or finished

    def sample_ids(self, ids: Any, rng: Any = None) -> np.ndarray:
        self.ids = np.asarray(ids, dtype=np.int64)
        self._paused.set()
        self._answered.wait()
        if self.chosen is None:
            raise _Stop
        return self.chosen

    def _run(self, texts: list[str], oov: str, case: str, want_counts: bool) -> None:
        st: dict[str, int] = {}
        counts: list[int] | None = [] if want_counts else None
        try:
            out = privatize_texts(self, texts, rng=0, oov=oov, case=case, stats=st, privatized_per_text=counts)
            self.result = (out, st, counts)
        except _Stop:
            pass
        except Exception as exc:  # sent back and re-raised in the main process
            self.error = exc
        finally:
            self._paused.set()

    def finish(self, chosen: np.ndarray | None) -> None:
        """Answer ``sample_ids`` (None: stop) and wait for the end of the batch."""
        if self._thread.is_alive():
            self.chosen = chosen
            self._answered.set()
            self._thread.join()


def _exchange(conn: Any, message: Any) -> Any:
    """Send ``message`` and return the reply; :class:`_Stop` when the main process is gone."""
    try:
        conn.send(message)
        return conn.recv()
    except (EOFError, OSError):
        raise _Stop from None


def _group(conn: Any, vocabulary: Vocabulary, batches: list[list[str]], oov: str, case: str, want_counts: bool) -> tuple[str, Any]:
    """Privatize a group of batches with one exchange: every batch's ids in one message, every
    batch's sampled ids in one reply; the reply to send back (``done`` or ``error``)."""
    jobs: list[_Job] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for texts in batches:  # one thread at a time runs: each pauses before the next starts
                jobs.append(_Job(vocabulary, texts, oov, case, want_counts))
                if jobs[-1].error is not None:
                    return ("error", jobs[-1].error)
            if any(j.ids is not None for j in jobs):
                msg = _exchange(conn, ("ids", [j.ids for j in jobs]))
                if msg is None or msg[0] != "chosen":
                    raise _Stop
                for j, chosen in zip(jobs, msg[1]):
                    j.finish(chosen)
                    if j.error is not None:
                        return ("error", j.error)
        other = [(str(w.message), w.category) for w in caught if not issubclass(w.category, PrivacyWarning)]
        return ("done", ([j.result for j in jobs], other))
    finally:
        for j in jobs:
            j.finish(None)


def worker_main(conn: Any, words: list[str]) -> None:
    """A worker process's loop: a message ``(batches, oov, case, want_counts)`` is answered
    with ``("ids", ...)`` then ``("done", ...)`` (or ``("error", exception)``); None stops it."""
    set_threads(1)  # the workers share the cores: one thread each for the text path's compiled loops
    vocabulary = _WordList(words)
    try:
        msg = conn.recv()
        while msg is not None:
            reply = _group(conn, vocabulary, *msg)
            try:
                msg = _exchange(conn, reply)
            except _Stop:
                raise
            except Exception:  # an exception that does not pickle: its text
                msg = _exchange(conn, ("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))
    except (_Stop, EOFError, OSError, KeyboardInterrupt):
        return
