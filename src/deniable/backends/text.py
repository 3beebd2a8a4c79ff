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

For a stream of batches (the command line's ``--workers``), :meth:`ParallelPrivatizer.privatize_batches`
gives each worker a group of consecutive batches instead, several groups in flight. With
:class:`BatchStreams` (one random stream per batch, spawned from the seed) each worker runs the
whole pipeline, sampling included, on its batches, forked from this process so that the built
mechanism is shared; the torch backend, and platforms where forking is unsafe, keep the mode
where this process samples every batch in order. Either way the output is that of one
``privatize_texts`` call per batch, in order, whatever the number of workers.
"""

from __future__ import annotations

import atexit
import inspect
import itertools
import multiprocessing
import multiprocessing.connection as mp_connection
import os
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from ..errors import PrivacyWarning
from ..text.privatize import check_case, check_oov, privatize_texts
from ._text_fork import BatchStreams, fork_refusal, run_whole, take_group, unwrap, warm_up, whole_worker
from ._text_worker import worker_main

__all__ = ["ParallelPrivatizer", "BatchStreams", "fork_refusal", "privatize_parallel", "shared_privatizer", "default_workers", "auto_workers",
           "AUTO_MIN_CHARS", "AUTO_MIN_CHARS_WHOLE", "AUTO_MIN_CORES", "GROUP_CHARS"]

B = TypeVar("B")

#: ``workers="auto"`` starts text-only worker processes (this process samples) for inputs of at
#: least this many characters (about 5.5 million words of English): the text work of a smaller
#: input (about 0.05 µs of CPU per character) saves less than starting the workers costs (about
#: half a second; both measured in docs/results/text_speed.md).
AUTO_MIN_CHARS = 32_000_000
#: ... and workers that sample too (forked: they start in milliseconds, and sampling is most of
#: the work) for inputs of at least this many characters (about 700,000 words).
AUTO_MIN_CHARS_WHOLE = 4_000_000
#: ... and only on machines with at least this many CPU cores: with fewer, the workers compete
#: with the main process (which reads and writes) and with other jobs for the same cores
#: (docs/results/text_speed.md: on two cores, one of them busy, ``--workers 2`` was slower).
AUTO_MIN_CORES = 4
#: Characters of text a worker gets at once from :meth:`ParallelPrivatizer.privatize_batches`.
GROUP_CHARS = 1 << 19
#: The options of :func:`~deniable.text.privatize_texts`, which the parallel entry points take too.
_OPTIONS = inspect.signature(privatize_texts)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_workers() -> int:
    """One worker per CPU core but one (the main process reads and writes, and samples unless the
    workers do), at least 1, at most 32."""
    return max(1, min(32, _cores() - 1))


def auto_workers(chars: int | None, *, whole: bool = False) -> tuple[int, int]:
    """``(workers, serial_chars)`` for ``workers="auto"`` on an input of ``chars`` characters
    (None: unknown, e.g. a stream): :func:`default_workers` when the machine has
    :data:`AUTO_MIN_CORES` CPU cores or more and the input has at least :data:`AUTO_MIN_CHARS`
    (``whole``: workers that sample too, see :func:`fork_refusal`: one process per core, this
    one included, from :data:`AUTO_MIN_CHARS_WHOLE`), else 1 (everything in this process).
    ``serial_chars``: for an input of unknown size, the characters to privatize in this process
    before text-only workers start (see :meth:`ParallelPrivatizer.privatize_batches`); workers
    that sample start at once."""
    cores = _cores()
    least = AUTO_MIN_CHARS_WHOLE if whole else AUTO_MIN_CHARS
    if cores < AUTO_MIN_CORES or (chars is not None and chars < least):
        return 1, 0
    if whole:  # this process privatizes too: one process per core
        return min(32, cores), 0
    return default_workers(), (AUTO_MIN_CHARS if chars is None else 0)


class ParallelPrivatizer:
    """Privatize batches of texts with the text work spread over worker processes.

    Drop-in for :func:`deniable.text.privatize_texts`: :meth:`privatize_texts` takes the same
    arguments and, for the same ``rng``, returns the same strings (one batch split over the
    workers). :meth:`privatize_batches` privatizes a stream of batches, groups of consecutive
    batches in the workers and several in flight, so that reading and writing in this process
    overlap the workers' work (with :class:`BatchStreams`, forked workers that sample too; else the
    text work, this process sampling); its output is that of one ``privatize_texts`` call per
    batch. Use it as a context manager (or call :meth:`close`) to stop the workers.

    Guarantee: that of ``mechanism`` (the workers run the library's own tokenizer and text rules;
    only ``mechanism.sample_ids`` chooses output words).

    Parameters
    ----------
    mechanism
        Any :class:`~deniable.mechanisms.base.Mechanism` (typically ``backend="torch"`` on a GPU).
    workers
        Processes (default :func:`default_workers`); 0 or 1 runs serially in this process. For
        :meth:`privatize_batches` with :class:`BatchStreams` where forking is safe, this process
        is one of them: ``workers - 1`` are forked, and this one privatizes a group of batches
        whenever each of them has :data:`~deniable.backends._text_fork.QUEUED_PER_WORKER` groups
        waiting (:data:`~deniable.backends._text_fork.QUEUED_SHORT` when groups are quick; one
        process per core then keeps every core busy, with no process waiting on another);
        otherwise ``workers`` worker processes do the text work and this process samples.
    min_words_per_worker
        A batch is split into at most ``ceil(characters / (6 * min_words_per_worker))`` shards,
        so small batches are not scattered (default 2,000 words).
    start_method
        ``multiprocessing`` start method (default ``"forkserver"`` where available, else
        ``"spawn"``; ``"fork"`` is unsafe after CUDA or threads start).
    group_chars
        :meth:`privatize_batches` gives each worker consecutive batches of about this many
        characters in all (default :data:`GROUP_CHARS`) and exchanges their ids in one message: fewer
        round trips between the processes, whose latency dominates on a busy machine.
    """

    def __init__(
        self,
        mechanism: Any,
        workers: int | None = None,
        *,
        min_words_per_worker: int = 2000,
        start_method: str | None = None,
        group_chars: int | None = None,
    ) -> None:
        self.mechanism = mechanism
        self.workers = default_workers() if workers is None else check_int("workers", workers, minimum=0)
        self.min_words_per_worker = check_int("min_words_per_worker", min_words_per_worker, minimum=1)
        self.group_chars = check_int("group_chars", GROUP_CHARS if group_chars is None else group_chars, minimum=1)
        if start_method is None:
            start_method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        self._ctx: Any = multiprocessing.get_context(start_method)
        if start_method == "forkserver":  # workers fork from a server that imported this library once
            self._ctx.set_forkserver_preload(["__main__", __name__])
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        self._in_flight = False  # a privatize_batches stream has batches in the workers
        self._mode = "text"  # what the next workers started do: "text" (text work only) or "whole" (forked, everything)
        self.blas_threads = 1  # BLAS threads of each process privatizing whole batches
        self._started = ""  # the mode of the running workers

    # -- worker pool ---------------------------------------------------------------------------
    def _start(self) -> None:
        if self._procs and self._started == self._mode:
            return
        self.close()
        self.blas_threads = max(1, _cores() // self.workers)
        if self._mode == "whole":  # forked from this process: the built mechanism is shared, not rebuilt
            ctx: Any = multiprocessing.get_context("fork")
            base, observers = unwrap(self.mechanism)
            warm_up(base)
        else:
            ctx, words = self._ctx, list(self.mechanism.vocabulary.words)
        for _ in range(self.workers - 1 if self._mode == "whole" else self.workers):  # whole: this process is one of them
            parent, child = ctx.Pipe()
            args = (child, list(self._conns), base, bool(observers), self.blas_threads) if self._mode == "whole" else (child, words)
            p = ctx.Process(target=whole_worker if self._mode == "whole" else worker_main, args=args, daemon=True)
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        self._started = self._mode

    def start(self, *, whole: bool = True) -> str:
        """Start the worker processes now instead of at the first batch, e.g. before threads start
        in this process (which rule out forking); returns what they do: ``"whole"`` (the whole
        pipeline, for :meth:`privatize_batches` with :class:`BatchStreams`; only where
        :func:`fork_refusal` allows it and ``whole`` is true) or ``"text"`` (the text work)."""
        if self.workers > 1:
            self._mode = "whole" if whole and fork_refusal(self.mechanism) is None else "text"
            self._start()
        return self._started

    def close(self) -> None:
        """Stop the worker processes (idempotent); at once when a :meth:`privatize_batches`
        stream was left unfinished."""
        if self._in_flight:
            for p in self._procs:
                p.terminate()
            self._in_flight = False
        for c in self._conns:
            try:
                c.send(None)
            except (OSError, ValueError):
                pass
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        for c in self._conns:
            c.close()
        self._conns, self._procs, self._started = [], [], ""

    def _abort(self) -> None:
        """Stop the workers at once (they may be mid-batch); the next batch starts new ones."""
        self._in_flight = bool(self._procs)
        self.close()

    def _recv(self, w: int) -> Any:
        try:
            return self._conns[w].recv()
        except (EOFError, OSError):
            raise self._stopped(w) from None

    def _send(self, w: int, msg: Any) -> None:
        try:
            self._conns[w].send(msg)
        except OSError:  # a broken pipe: the worker is gone
            raise self._stopped(w) from None

    def _stopped(self, w: int) -> RuntimeError:
        p = self._procs[w]
        p.join(timeout=1)
        return RuntimeError(f"text worker process {p.pid} stopped unexpectedly (exit code {p.exitcode})")

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

    def privatize_texts(self, texts: Sequence[str], **options: Any) -> list[str]:
        """Same contract, options (``rng``, ``oov``, ``case``, ``stats``, ...) and result as
        :func:`deniable.text.privatize_texts` (same ``rng``: same output)."""
        bound = _OPTIONS.bind(self.mechanism, texts, **options)
        bound.apply_defaults()
        a = bound.arguments
        check_oov(a["oov"])
        check_case(a["case"])
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be strings, got {type(t).__name__}")
        shards = self._shards(texts) if self.workers > 1 and a["token_outputs"] is None else [(0, len(texts))]
        if len(shards) <= 1:
            return privatize_texts(self.mechanism, texts, **options)
        self._mode = "text"
        self._start()
        try:
            return self._run(texts, shards, a["rng"], a["oov"], a["case"], a["stats"], a["privatized_per_text"])
        except BaseException:
            self._abort()  # workers may be mid-protocol: start afresh next time
            raise

    def privatize_batches(
        self, batches: Iterable[B], *, texts_of: Callable[[B], Sequence[str]] | None = None, rng: RNGLike | BatchStreams = None, counts: bool = False,
        serial_chars: int = 0, **options: Any,
    ) -> Iterator[tuple[B, list[str], list[int] | None]]:
        """Privatize a stream of batches; yields ``(batch, output texts, counts)`` in order.

        With ``rng`` a :class:`BatchStreams`, batch ``i`` (counted from 0) is
        ``privatize_texts(mechanism, texts_of(batch), rng=rng(i), **options)``: its output
        depends only on the seed, ``i`` and its texts, so it is the same whatever the number of
        workers, and each worker runs the whole pipeline (tokenize, look up, sample, rebuild) on
        its batches where :func:`fork_refusal` allows (workers forked from this process, sharing
        the built mechanism), else the workers do the text work and this process samples.
        Otherwise (an int seed, a Generator, ...) the batches draw in turn from one generator
        ``gen = as_generator(rng)``: the workers tokenize and rebuild, this process samples
        every batch in order with one ``mechanism.sample_ids`` call. Either way the output does not
        depend on the number of workers; a few groups of batches are in flight at once (bounded
        memory) while the caller reads the next batches and writes the previous ones.

        ``texts_of``: a batch's texts (default: the batch is a sequence of texts).
        ``counts=True``: the third item is the batch's ``privatized_per_text`` list (else None).
        ``serial_chars``: privatize batches in this process until this many characters have
        passed, then start the workers (for a stream of unknown size). ``options``: ``oov``,
        ``case`` and ``stats`` (updated in place with every batch's counts), as for
        :func:`~deniable.text.privatize_texts`. The observers of an
        :class:`~deniable.text.privatize.ObservedSampler` see every batch's ids, in order. An error
        stops the workers and is raised here.
        """
        a = _OPTIONS.bind(self.mechanism, (), rng=None, **options)
        a.apply_defaults()
        oov, case, stats = check_oov(a.arguments["oov"]), check_case(a.arguments["case"]), a.arguments["stats"]
        if a.arguments["privatized_per_text"] is not None or a.arguments["token_outputs"] is not None:
            raise TypeError("privatize_batches gives each batch's privatized_per_text with counts=True; token_outputs is not supported")
        streams = rng if isinstance(rng, BatchStreams) else None
        if isinstance(rng, BatchStreams):
            gen_of: Callable[[int], np.random.Generator] = rng
        else:
            gen = as_generator(rng)
            gen_of = lambda i: gen  # noqa: E731 - one generator for every batch
        it = iter(batches)
        texts_of = texts_of or _as_texts
        index, seen = 0, 0
        while self.workers <= 1 or seen < serial_chars:
            batch = next(it, _END)
            if batch is _END:
                return
            texts = list(texts_of(batch))
            seen += sum(map(len, texts))
            per: list[int] | None = [] if counts else None
            yield batch, privatize_texts(self.mechanism, texts, rng=gen_of(index), oov=oov, case=case, stats=stats, privatized_per_text=per), per
            index += 1
        self._mode = "whole" if streams is not None and (self._started == "whole" or fork_refusal(self.mechanism) is None) else "text"
        if self._mode == "whole":
            self._start()
            assert streams is not None
            yield from run_whole(self, it, texts_of, streams, index, oov, case, stats, counts, _merge)
        else:
            yield from self._pipeline(it, texts_of, gen_of, index, oov, case, stats, counts)

    def _pipeline(self, it: Iterator[B], texts_of: Callable[[B], Sequence[str]], gen_of: Callable[[int], np.random.Generator], first: int, oov: str, case: str,
                  stats: dict[str, int] | None, counts: bool) -> Iterator[tuple[B, list[str], list[int] | None]]:
        """:meth:`privatize_batches` with the text work in the workers: one group of batches per
        worker, messages handled as they come, every batch sampled in order with ``gen_of`` of its
        index (a group is sampled once its ids and those of all groups before it have come),
        batches yielded in order."""
        self._mode = "text"
        self._start()
        idle = deque(range(len(self._conns)))
        flight: deque[_Slot] = deque()  # the batches given to workers, in order
        index = first

        def fill() -> None:  # every idle worker gets the next group of batches
            nonlocal index
            while idle:
                batches, texts, _ = take_group(it, texts_of, self.group_chars)
                if not batches:
                    return
                w = idle.popleft()
                self._send(w, (texts, oov, case, counts))
                flight.append(_Slot(w, batches, index))
                index += len(batches)

        self._in_flight = True
        try:
            fill()
            while flight:
                if flight[0].result is not None:  # the oldest group is done: its worker takes the next
                    slot = flight.popleft()
                    idle.append(slot.w)
                    fill()
                    results, other = slot.result
                    _merge(None, {}, other, oov)
                    for batch, (out, st, per) in zip(slot.batches, results):
                        _merge(stats, st, [], oov)
                        yield batch, out, per
                    continue
                for slot in flight:  # sample, in order, every group whose ids (and all before it) came
                    if slot.ids is not None:
                        chosen = [None if ids is None else np.asarray(self.mechanism.sample_ids(ids, rng=gen_of(slot.first + k)), dtype=np.int64)
                                  for k, ids in enumerate(slot.ids)]
                        self._send(slot.w, ("chosen", chosen))
                        slot.sampled, slot.ids = True, None
                    elif not slot.sampled and slot.result is None:
                        break  # still tokenizing: the batches after it wait
                waiting = {slot.w: slot for slot in flight if slot.result is None and slot.ids is None}
                for conn in mp_connection.wait([self._conns[w] for w in waiting]):
                    w = self._conns.index(conn)
                    kind, payload = _checked(self._recv(w))
                    if kind == "ids":
                        waiting[w].ids = payload
                    else:
                        waiting[w].result = payload
            self._in_flight = False
        except BaseException:
            self._abort()
            raise

    def _run(self, texts, shards, rng, oov, case, stats, privatized_per_text) -> list[str]:
        """One batch over the shards' workers; an error is raised (the caller stops the workers)."""
        want_counts = privatized_per_text is not None
        for i, (a, b) in enumerate(shards):
            self._send(i, ([texts[a:b]], oov, case, want_counts))
        asked, parts, results = [], [], {}
        for i in range(len(shards)):
            kind, payload = _checked(self._recv(i))
            if kind == "ids":
                asked.append(i)
                parts.append(payload[0])
            else:
                results[i] = payload
        if asked:
            ids = np.concatenate(parts)
            chosen = np.asarray(self.mechanism.sample_ids(ids, rng=as_generator(rng)), dtype=np.int64)
            off = 0
            for i, part in zip(asked, parts):
                self._send(i, ("chosen", [chosen[off : off + part.shape[0]]]))
                off += part.shape[0]
            for i in asked:
                results[i] = _checked(self._recv(i))[1]
        out: list[str] = []
        merged: dict[str, int] = {}
        for i in range(len(shards)):
            ((texts_i, st, counts),), other = results[i]
            out.extend(texts_i)
            _merge(merged, st, other, "unk")
            if want_counts:
                privatized_per_text.extend(counts)
        _merge(stats, merged, [], oov)
        return out


class _Slot:
    """A group of batches given to worker ``w``: their ids once sent (until sampled), then the
    results."""

    __slots__ = ("batches", "first", "ids", "result", "sampled", "w")

    def __init__(self, w: int, batches: list[Any], first: int) -> None:
        self.w, self.batches, self.first = w, batches, first
        self.ids: list[np.ndarray | None] | None = None
        self.sampled = False
        self.result: Any = None


def _as_texts(batch: Any) -> Sequence[str]:
    return batch


def _checked(msg: tuple[str, Any]) -> tuple[str, Any]:
    """A worker's message; its error raised here."""
    if msg[0] == "error":
        raise msg[1]
    return msg


_END: Any = object()


def _merge(stats: dict[str, int] | None, st: dict[str, int], other: list[tuple[str, type[Warning]]], oov: str) -> None:
    """Add a worker's counts ``st`` to ``stats`` and issue its warnings (``other``), and the one
    :class:`PrivacyWarning` that :func:`~deniable.text.privatize_texts` issues for kept OOV words."""
    if stats is not None:
        for k, v in st.items():
            stats[k] = stats.get(k, 0) + v
    for msg, cat in other:
        warnings.warn(msg, cat, stacklevel=4)
    if oov == "keep" and st.get("unknown"):
        warnings.warn(
            f"oov='keep': {st['unknown']} out-of-vocabulary word(s) were emitted verbatim, without privacy",
            PrivacyWarning,
            stacklevel=4,
        )


def privatize_parallel(mechanism: Any, texts: Sequence[str], *, workers: int | str | None = None, **options: Any) -> list[str]:
    """One-shot :class:`ParallelPrivatizer`: privatize ``texts`` with ``workers`` processes
    (same result as :func:`deniable.text.privatize_texts` for the same ``rng``).

    ``workers``: a number (0 or 1: in this process), None (:func:`default_workers`) or
    ``"auto"`` (:func:`auto_workers` of the texts' total length). ``options``: those of
    :func:`~deniable.text.privatize_texts` (``rng``, ``oov``, ``case``, ``stats``, ...)."""
    if workers == "auto":
        workers = auto_workers(sum(len(t) for t in texts if isinstance(t, str)))[0]
    elif isinstance(workers, str):
        raise ValueError(f"workers must be a number or 'auto', got {workers!r}")
    with ParallelPrivatizer(mechanism, workers) as pp:
        return pp.privatize_texts(texts, **options)


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
