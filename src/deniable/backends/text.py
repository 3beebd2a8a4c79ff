"""Text in, text out at accelerator speed: tokenization, lookup and detokenization in worker
processes, one ``mechanism.sample_ids`` call per batch in this process.

At a million words per second on a GPU, the Python text work of
:func:`deniable.text.privatize_texts` (splitting, lookups, case patterns, joining: a few
microseconds per word) is the bottleneck. :class:`ParallelPrivatizer` splits each batch of texts
into contiguous shards, one per worker process; every worker runs the unchanged
:func:`~deniable.text.privatize_texts` on its shard with a stand-in mechanism whose
``sample_ids`` sends the shard's word ids to this process and waits. This process concatenates
the ids of all shards **in text order**, which is exactly the id array a serial
``privatize_texts`` call on the whole batch would sample, makes that one ``sample_ids`` call
with the caller's ``rng`` and sends each shard its part back. So for the same ``rng`` the output is
byte-identical to the serial call, and so are the privacy properties (same tokenizer, same OOV
and case rules: the workers run the same code).
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from ..embeddings.embedding import Vocabulary
from ..errors import PrivacyWarning
from ..text.privatize import check_case, check_oov, privatize_texts

__all__ = ["ParallelPrivatizer", "privatize_parallel", "shared_privatizer", "default_workers"]


def default_workers() -> int:
    """One worker per CPU core but one (the main process samples), at least 1, at most 32."""
    return max(1, min(32, (os.cpu_count() or 2) - 1))


class _WordList(Vocabulary):
    """The vocabulary's word <-> id lookup only (what the text path needs)."""

    def __init__(self, words: list[str]) -> None:
        self._words = words
        index: dict[str, int] = {}
        for i, w in enumerate(words):
            index.setdefault(w, i)
        self._index = index


class _Remote:
    """Stand-in mechanism inside a worker: ``sample_ids`` is answered by the main process."""

    def __init__(self, vocabulary: Vocabulary, conn: Any) -> None:
        self.vocabulary = vocabulary
        self._conn = conn

    def sample_ids(self, ids: Any, rng: Any = None) -> np.ndarray:
        self._conn.send(("ids", np.asarray(ids, dtype=np.int64)))
        kind, chosen = self._conn.recv()
        if kind != "chosen":  # pragma: no cover - protocol error
            raise RuntimeError(f"unexpected message {kind!r} from the main process")
        return chosen


def _worker(conn: Any, words: list[str]) -> None:
    remote = _Remote(_WordList(words), conn)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        texts, oov, case, want_counts = msg
        st: dict[str, int] = {}
        counts: list[int] | None = [] if want_counts else None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = privatize_texts(remote, texts, rng=0, oov=oov, case=case, stats=st, privatized_per_text=counts)
            other = [(str(w.message), w.category) for w in caught if not issubclass(w.category, PrivacyWarning)]
            conn.send(("done", (out, st, counts, other)))
        except Exception as exc:  # sent back and re-raised in the main process
            conn.send(("error", exc))


class ParallelPrivatizer:
    """Privatize batches of texts with the text work spread over worker processes.

    Drop-in for :func:`deniable.text.privatize_texts`: :meth:`privatize_texts` takes the same
    arguments and, for the same ``rng``, returns the same strings. Use it as a context manager
    (or call :meth:`close`) to stop the workers.

    Guarantee: that of ``mechanism`` (the workers run the library's own tokenizer and text rules;
    only ``mechanism.sample_ids`` chooses output words).

    Parameters
    ----------
    mechanism
        Any :class:`~deniable.mechanisms.base.Mechanism` (typically ``backend="torch"`` on a GPU).
    workers
        Worker processes (default :func:`default_workers`); 0 or 1 runs serially in this process.
    min_words_per_worker
        A batch is split into at most ``ceil(characters / (6 * min_words_per_worker))`` shards,
        so small batches are not scattered (default 2,000 words).
    start_method
        ``multiprocessing`` start method (default ``"forkserver"`` where available, else
        ``"spawn"``; ``"fork"`` is unsafe after CUDA or threads start).
    """

    def __init__(
        self,
        mechanism: Any,
        workers: int | None = None,
        *,
        min_words_per_worker: int = 2000,
        start_method: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self.workers = default_workers() if workers is None else check_int("workers", workers, minimum=0)
        self.min_words_per_worker = check_int("min_words_per_worker", min_words_per_worker, minimum=1)
        if start_method is None:
            start_method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        self._ctx: Any = multiprocessing.get_context(start_method)
        self._conns: list[Any] = []
        self._procs: list[Any] = []

    # -- worker pool ---------------------------------------------------------------------------
    def _start(self) -> None:
        if self._procs:
            return
        words = list(self.mechanism.vocabulary.words)
        for _ in range(self.workers):
            parent, child = self._ctx.Pipe()
            p = self._ctx.Process(target=_worker, args=(child, words), daemon=True)
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        for c in self._conns:
            try:
                c.send(None)
                c.close()
            except (OSError, ValueError):
                pass
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self._conns, self._procs = [], []

    def __enter__(self) -> ParallelPrivatizer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # -- privatization -------------------------------------------------------------------------
    def _shards(self, texts: list[str]) -> list[tuple[int, int]]:
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
        total = int(lengths.sum())
        k = int(min(self.workers, len(texts), max(1, -(-total // (6 * self.min_words_per_worker)))))
        if k <= 1:
            return [(0, len(texts))]
        cum = np.cumsum(lengths)
        cuts = np.searchsorted(cum, total * np.arange(1, k) / k, side="left") + 1
        bounds = np.unique(np.r_[0, np.minimum(cuts, len(texts)), len(texts)])
        return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]

    def privatize_texts(
        self,
        texts: Sequence[str],
        *,
        rng: RNGLike = None,
        oov: str = "unk",
        case: str = "preserve",
        stats: dict[str, int] | None = None,
        privatized_per_text: list[int] | None = None,
    ) -> list[str]:
        """Same contract and result as :func:`deniable.text.privatize_texts` (same ``rng``: same output)."""
        check_oov(oov)
        check_case(case)
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be strings, got {type(t).__name__}")
        shards = self._shards(texts) if self.workers > 1 else [(0, len(texts))]
        if len(shards) <= 1:
            return privatize_texts(self.mechanism, texts, rng=rng, oov=oov, case=case, stats=stats, privatized_per_text=privatized_per_text)
        self._start()
        try:
            return self._run(texts, shards, rng, oov, case, stats, privatized_per_text)
        except BaseException:
            self.close()  # workers may be mid-protocol: start afresh next time
            raise

    def _run(self, texts, shards, rng, oov, case, stats, privatized_per_text) -> list[str]:
        want_counts = privatized_per_text is not None
        conns = self._conns[: len(shards)]
        for c, (a, b) in zip(conns, shards):
            c.send((texts[a:b], oov, case, want_counts))
        asked, parts, results = [], [], {}
        error: BaseException | None = None
        for i, c in enumerate(conns):
            kind, payload = c.recv()
            if kind == "ids":
                asked.append(i)
                parts.append(payload)
            elif kind == "done":
                results[i] = payload
            else:
                error = error or payload
        if error is None and asked:
            ids = np.concatenate(parts)
            try:
                chosen = np.asarray(self.mechanism.sample_ids(ids, rng=as_generator(rng)), dtype=np.int64)
            except BaseException as exc:
                error = exc
                chosen = np.zeros(ids.shape[0], dtype=np.int64)  # lets the workers finish; discarded
            off = 0
            for i, part in zip(asked, parts):
                conns[i].send(("chosen", chosen[off : off + part.shape[0]]))
                off += part.shape[0]
        elif asked:  # an error elsewhere: release the waiting workers
            for i, part in zip(asked, parts):
                conns[i].send(("chosen", np.zeros(part.shape[0], dtype=np.int64)))
        for i in asked:
            kind, payload = conns[i].recv()
            if kind == "done":
                results[i] = payload
            else:
                error = error or payload
        if error is not None:
            raise error
        out: list[str] = []
        unknown = 0
        for i in range(len(shards)):
            texts_i, st, counts, other = results[i]
            out.extend(texts_i)
            unknown += st.get("unknown", 0)
            if stats is not None:
                for k, v in st.items():
                    stats[k] = stats.get(k, 0) + v
            if want_counts:
                privatized_per_text.extend(counts)
            for msg, cat in other:
                warnings.warn(msg, cat, stacklevel=3)
        if oov == "keep" and unknown:
            warnings.warn(
                f"oov='keep': {unknown} out-of-vocabulary word(s) were emitted verbatim, without privacy",
                PrivacyWarning,
                stacklevel=3,
            )
        return out


def privatize_parallel(
    mechanism: Any,
    texts: Sequence[str],
    *,
    workers: int | None = None,
    rng: RNGLike = None,
    oov: str = "unk",
    case: str = "preserve",
    stats: dict[str, int] | None = None,
    privatized_per_text: list[int] | None = None,
) -> list[str]:
    """One-shot :class:`ParallelPrivatizer`: privatize ``texts`` with ``workers`` processes
    (same result as :func:`deniable.text.privatize_texts` for the same ``rng``)."""
    with ParallelPrivatizer(mechanism, workers) as pp:
        return pp.privatize_texts(texts, rng=rng, oov=oov, case=case, stats=stats, privatized_per_text=privatized_per_text)


_SHARED: dict[int, ParallelPrivatizer] = {}


def shared_privatizer(mechanism: Any, workers: int | None = None) -> ParallelPrivatizer:
    """A :class:`ParallelPrivatizer` for ``mechanism`` kept for the life of the process (its
    workers start once and stop at exit): for callers that privatize batch after batch, like the
    command line."""
    pp = _SHARED.get(id(mechanism))
    if pp is None or pp.mechanism is not mechanism or (workers is not None and pp.workers != workers):
        if pp is not None:
            pp.close()
        pp = ParallelPrivatizer(mechanism, workers)
        _SHARED[id(mechanism)] = pp
    return pp


@atexit.register
def _close_shared() -> None:
    for pp in _SHARED.values():
        pp.close()
    _SHARED.clear()
