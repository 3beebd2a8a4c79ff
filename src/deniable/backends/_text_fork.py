"""Per-batch random streams and whole-pipeline worker processes for
:meth:`deniable.backends.text.ParallelPrivatizer.privatize_batches`.

With :class:`BatchStreams` every batch draws from its own generator, so a batch's output depends
only on the seed, its index and its texts, not on which process samples it nor in which order.
Each worker process then privatizes whole batches (tokenize, look up, ``sample_ids``, rebuild)
instead of sending their word ids to the main process. The workers are forked from the main
process after the mechanism is built, so they share its tables (copy-on-write) instead of
building them again; this is done only where forking is safe (see :func:`fork_refusal`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection as mp_connection
import queue
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator, secure_generator
from .._threads import stop_threads, thread_limit
from ..errors import PrivacyWarning
from ..text.privatize import ObservedSampler, privatize_texts

__all__ = ["BatchStreams", "fork_refusal", "take_group", "warm_up", "whole_worker", "run_whole", "WHOLE_GROUP_CHARS"]

#: A whole-pipeline worker gets consecutive batches until they hold this many characters: one
#: batch at a time for the command line's (4 Ki to 128 Ki characters), so that a small input's
#: few batches still spread over the workers; small batches are grouped to save messages.
WHOLE_GROUP_CHARS = 1 << 14


def take_group(it: Iterator[Any], texts_of: Callable[[Any], Sequence[str]], group_chars: int) -> tuple[list[Any], list[list[str]], int]:
    """The next consecutive batches of ``it`` holding at least ``group_chars`` characters in all
    (fewer at the end; none when ``it`` is exhausted), each batch's texts, and their characters:
    one worker's group."""
    batches: list[Any] = []
    texts: list[list[str]] = []
    chars = 0
    for batch in it:
        batches.append(batch)
        texts.append(list(texts_of(batch)))
        chars += sum(map(len, texts[-1]))
        if chars >= group_chars:
            break
    return batches, texts, chars


class BatchStreams:
    """One independent random stream per batch: batch ``i`` draws from the ``i``-th child of one
    :class:`numpy.random.SeedSequence` (numpy's ``spawn``: for an int seed ``s``, batch ``i``'s
    generator is ``numpy.random.default_rng(s).spawn(i + 1)[i]``).

    Guarantee: distinct batches (and distinct :meth:`child` families) get distinct spawn keys,
    hence independent streams; the same seed and index give the same stream in any process.

    ``rng``: an int seed or a SeedSequence (reproducible); None (a root of fresh OS entropy); a
    Generator (its next spawned child is the root, so two uses give independent streams; it must
    have a SeedSequence); ``"secure"``: every batch gets a fresh ChaCha20 generator with its own
    256-bit key (:func:`deniable._rng.secure_generator`), nothing reproducible.
    """

    __slots__ = ("root",)

    def __init__(self, rng: RNGLike = None) -> None:
        self.root: np.random.SeedSequence | None
        if isinstance(rng, str) and rng == "secure":
            secure_generator()  # randomgen missing: fails here, with the install hint
            self.root = None
        elif isinstance(rng, np.random.SeedSequence):
            self.root = rng
        elif isinstance(rng, np.random.Generator):
            seq = rng.bit_generator.seed_seq
            if not isinstance(seq, np.random.SeedSequence):
                raise TypeError("per-batch streams are spawned from a SeedSequence; this Generator has none: pass an int seed, a SeedSequence or 'secure'")
            self.root = seq.spawn(1)[0]
        else:
            seq = as_generator(rng).bit_generator.seed_seq  # validates the seed
            assert isinstance(seq, np.random.SeedSequence)
            self.root = seq

    def _spawned(self, i: int) -> np.random.SeedSequence:
        root = self.root
        assert root is not None
        return np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, int(i)), pool_size=root.pool_size)

    def child(self, j: int) -> BatchStreams:
        """The streams of the ``j``-th sub-family (e.g. the ``j``-th input file of a run)."""
        if self.root is None:
            return self
        return BatchStreams(self._spawned(j))

    def __call__(self, i: int) -> np.random.Generator:
        """Batch ``i``'s generator."""
        if self.root is None:
            return secure_generator()
        return np.random.default_rng(self._spawned(i))

    def __repr__(self) -> str:
        return "BatchStreams('secure')" if self.root is None else f"BatchStreams(spawn_key={self.root.spawn_key})"


def fork_refusal(mechanism: Any) -> str | None:
    """Why worker processes may not be forked to sample with ``mechanism`` here (None: they may).

    Forking copies the built mechanism without rebuilding its tables, but it is safe only on
    Linux, with no other thread running in this process (the text path's own helper threads,
    idle between batches, are stopped first), no CUDA or OpenMP runtime (FAISS) in use, and a
    numpy mechanism (a torch mechanism's device is owned by one process)."""
    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return "forking is not safe on this platform"
    if getattr(mechanism, "backend", "numpy") != "numpy":
        return f"the {getattr(mechanism, 'backend', '?')} backend samples in one process"
    stop_threads()
    if threading.active_count() > 1:
        return "other threads are running"
    if "faiss" in sys.modules:
        return "FAISS (OpenMP) is loaded"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialized"
    return None


def warm_up(mechanism: Any) -> None:
    """Build here, once, what ``mechanism`` and the text path build at their first use (tables,
    caches), so that forked workers share it instead of each building it again: ``precompute``
    and one throwaway privatization of a constant text with its own generator (no input word,
    no caller's stream)."""
    if callable(getattr(mechanism, "precompute", None)):
        mechanism.precompute()  # cached: a no-op once built
    with contextlib.suppress(Exception), warnings.catch_warnings():  # only a speed-up: a real batch raises what it raises
        warnings.simplefilter("ignore")
        privatize_texts(mechanism, ["the" + " " * 4096], rng=np.random.default_rng(0))  # one word; long enough for the bulk path


def unwrap(mechanism: Any) -> tuple[Any, tuple[Callable[[np.ndarray, np.ndarray], None], ...]]:
    """(the mechanism that samples, the observers to call in the main process)."""
    if isinstance(mechanism, ObservedSampler):
        return mechanism.mechanism, tuple(mechanism.observers)
    return mechanism, ()


def _group(mechanism: Any, record: bool, streams: BatchStreams, first: int, batches: list[list[str]], oov: str, case: str, counts: bool) -> tuple[str, Any]:
    """Privatize batches ``first``, ``first + 1``, ... end to end; the reply to send back."""
    results = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k, texts in enumerate(batches):
            # the (ids, outputs) of every call, for the main process's observers
            calls: list[tuple[np.ndarray, np.ndarray]] = []
            sampler = ObservedSampler(mechanism, lambda ids, out: calls.append((ids, out))) if record else mechanism  # noqa: B023 - used within this iteration
            st: dict[str, int] = {}
            per: list[int] | None = [] if counts else None
            out = privatize_texts(sampler, texts, rng=streams(first + k), oov=oov, case=case, stats=st, privatized_per_text=per)
            results.append((out, st, per, calls if record else None))
    other = [(str(w.message), w.category) for w in caught if not issubclass(w.category, PrivacyWarning)]
    return ("done", (results, other))


def whole_worker(conn: Any, others: list[Any], mechanism: Any, record: bool, blas_threads: int) -> None:
    """A forked worker's loop: ``(streams, first, batches, oov, case, counts)`` is answered with
    ``("done", (results, warnings))`` or ``("error", exception)``; None stops it. BLAS and the
    text loops run on ``blas_threads`` threads (the processes share the cores). One thread reads
    the messages as they come, so the main process can queue the next group while this one is
    privatized, and another sends the replies (neither side then waits on the other, and neither
    can block the other's send)."""
    for c in others:  # the other workers' pipes, inherited: closed so that their ends see EOF
        c.close()
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_receive, args=(conn, inbox), name="deniable-inbox", daemon=True).start()
    sender = threading.Thread(target=_send, args=(conn, outbox), name="deniable-outbox", daemon=True)
    sender.start()
    try:
        with _blas_limit(blas_threads), thread_limit(blas_threads):  # this process's share of the cores, as the main process's
            msg = inbox.get()
            while msg is not None:
                try:
                    reply = _group(mechanism, record, *msg)
                except Exception as exc:  # sent back and re-raised in the main process
                    reply = ("error", exc)
                outbox.put(reply)
                msg = inbox.get()
    except KeyboardInterrupt:
        return
    outbox.put(None)
    sender.join()


def _send(conn: Any, outbox: queue.SimpleQueue[Any]) -> None:
    """Send the replies put into ``outbox``, in order, until None. The worker goes on with its next
    group meanwhile: a reply larger than the socket's buffer would otherwise hold it until the
    main process, busy with a group of its own, reads it."""
    reply = outbox.get()
    while reply is not None:
        try:
            conn.send(reply)
        except (EOFError, OSError):  # the main process is gone
            return
        except Exception:  # an exception that does not pickle (pickled whole before a byte is sent): its text instead
            reply = ("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}"))
            continue
        reply = outbox.get()


def _receive(conn: Any, inbox: queue.SimpleQueue[Any]) -> None:
    """Put the main process's messages into ``inbox`` as they arrive; None after the last (the
    stop message, the pipe's end, or one that does not arrive whole)."""
    try:
        msg = conn.recv()
        while msg is not None:
            inbox.put(msg)
            msg = conn.recv()
    except Exception:  # EOF, a closed pipe: the main process is gone; the worker stops
        pass
    inbox.put(None)


def _blas_limit(threads: int) -> Any:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


class _Group:
    __slots__ = ("batches", "chars", "first", "result")

    def __init__(self, first: int, batches: list[Any], chars: int = 0) -> None:
        self.first, self.batches, self.chars = first, batches, chars
        self.result: Any = None


#: Groups sent to one whole-pipeline worker and not answered yet: it works on one while the next
#: waits in its inbox, so it never waits for the main process between groups ...
QUEUED_PER_WORKER = 2
#: ... and this many once a group of this process's own took less than
#: :data:`SHORT_GROUP_SECONDS`: when groups are that quick, what this process does between two
#: visits to its workers (its own group, reading, writing, passing messages) lasts about as long
#: as the groups waiting at a worker, which would then run dry (measured on two cores with a
#: mechanism that samples in nanoseconds per word: a worker idle 0.42 s of a 2 s run with two,
#: 0.12 s with four). Slower groups keep two: at the end of the input a worker's queue is the
#: work left to it alone.
QUEUED_SHORT = 4
SHORT_GROUP_SECONDS = 0.02


def run_whole(
    pp: Any, it: Iterator[Any], texts_of: Callable[[Any], Sequence[str]], streams: BatchStreams, first: int, oov: str, case: str,
    stats: dict[str, int] | None, counts: bool, merge: Callable[..., None],
) -> Iterator[tuple[Any, list[str], list[int] | None]]:
    """The main process's side of :meth:`ParallelPrivatizer.privatize_batches` with whole-pipeline
    workers (``pp`` started them): groups of consecutive batches to the workers, at most
    :data:`QUEUED_PER_WORKER` unanswered per worker (:data:`QUEUED_SHORT` while this process's
    own groups are quick). When each worker has that many, and at least as many characters
    waiting as the next group holds (so none runs dry before this process is back), this process
    privatizes the next group itself (the same :func:`_group`, so a batch's output does not
    depend on where it ran, nor on this schedule). At most three times that many groups per
    process are in flight or waiting to be yielded (bounded memory); the batches are yielded
    in order with their counts merged into ``stats`` and their (ids, outputs) given to the
    observers, in order. Meanwhile this process's BLAS and text loops run on ``pp.blas_threads``
    threads (its share of the cores). An error stops the workers and is raised."""
    base, observers = unwrap(pp.mechanism)
    conns = pp._conns
    queued: list[deque[_Group]] = [deque() for _ in conns]  # each worker's unanswered groups, in order sent
    flight: deque[_Group] = deque()
    depth = QUEUED_PER_WORKER  # unanswered groups per worker
    group_chars = min(pp.group_chars, WHOLE_GROUP_CHARS)
    index = first
    pending: list[tuple[_Group, list[list[str]]]] = []  # the next group, read but not placed yet

    def peek() -> tuple[_Group, list[list[str]]] | None:
        if not pending:
            batches, texts, chars = take_group(it, texts_of, group_chars)
            if not batches:
                return None
            pending.append((_Group(index, batches, chars), texts))
        return pending[0]

    def place() -> tuple[_Group, list[list[str]]]:
        nonlocal index
        group, texts = pending.pop()
        index += len(group.batches)
        flight.append(group)
        return group, texts

    def window() -> int:
        return 3 * depth * (len(conns) + 1)

    def fill() -> None:
        while len(flight) < window():
            w = min(range(len(conns)), key=lambda i: len(queued[i]))
            if len(queued[w]) >= depth or peek() is None:
                return
            group, texts = place()
            pp._send(w, (streams, group.first, texts, oov, case, counts))
            queued[w].append(group)

    def receive(timeout: float | None) -> None:
        for conn in mp_connection.wait([conns[w] for w in range(len(conns)) if queued[w]], timeout):
            w = conns.index(conn)
            reply = _checked(pp._recv(w))[1]
            queued[w].popleft().result = reply

    def worth_here(chars: int) -> bool:  # every worker is kept busy meanwhile
        return all(len(q) >= depth and sum(g.chars for g in q) >= chars for q in queued)

    pp._in_flight = True
    try:
        with _blas_limit(pp.blas_threads), thread_limit(pp.blas_threads):  # this process shares the cores with the workers
            while True:
                receive(0)
                fill()
                if flight and flight[0].result is not None:
                    group = flight.popleft()
                    results, other = group.result
                    merge(None, {}, other, oov)
                    for batch, (out, st, per, calls) in zip(group.batches, results):
                        for ids, chosen in calls or ():
                            for observe in observers:
                                observe(ids, chosen)
                        merge(stats, st, [], oov)
                        yield batch, out, per
                    continue
                nxt = peek() if len(flight) < window() else None
                if nxt is not None and worth_here(nxt[0].chars):
                    group, texts = place()
                    started = time.perf_counter()
                    group.result = _checked(_group(base, bool(observers), streams, group.first, texts, oov, case, counts))[1]
                    depth = QUEUED_SHORT if time.perf_counter() - started < SHORT_GROUP_SECONDS else QUEUED_PER_WORKER
                    continue
                if not flight:
                    break
                receive(None)
        pp._in_flight = False
    except BaseException:
        pp._abort()
        raise


def _checked(msg: tuple[str, Any]) -> tuple[str, Any]:
    if msg[0] == "error":
        raise msg[1]
    return msg
