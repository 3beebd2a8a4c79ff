"""Helper threads for the hot loops that release the GIL (the text path's compiled loops,
FAISS's searches): how many a large batch is cut into, and one shared pool that runs the parts.

``DENIABLE_THREADS`` in the environment sets the count (default: the cores this process may
run on, at most 4); a process that shares the cores with others takes its share with
:func:`thread_limit` (or :func:`set_threads` with 1). Outputs never depend on the count: callers
cut a batch so that each part is computed as it would be alone.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["threads", "set_threads", "thread_limit", "run_parallel", "stop_threads", "even_cuts"]

_THREADS: list[int | None] = [None]
_POOL: list[Any] = [None, 0]  # the pool, its threads
_POOL_LOCK = threading.Lock()
THREAD_PREFIX = "deniable-worker"


def threads() -> int:
    """Threads one large batch uses: :func:`set_threads`'s value, else ``DENIABLE_THREADS``,
    else the cores this process may run on (at most 4)."""
    if _THREADS[0] is not None:
        return _THREADS[0]
    env = os.environ.get("DENIABLE_THREADS", "")
    if env.strip():
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"DENIABLE_THREADS must be a whole number of threads, got {env!r}") from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def set_threads(n: int | None) -> None:
    """Use ``n`` threads per large batch in this process (None: the default of :func:`threads`);
    a text worker that shares the cores with others sets 1."""
    if n is not None and n < 1:
        raise ValueError(f"threads must be at least 1, got {n}")
    _THREADS[0] = n


@contextlib.contextmanager
def thread_limit(n: int) -> Iterator[None]:
    """At most ``n`` threads per large batch in this process while the block runs (a process
    that shares the cores with worker processes), then what it was before."""
    before = _THREADS[0]
    _THREADS[0] = max(1, min(threads(), n))
    try:
        yield
    finally:
        _THREADS[0] = before


def even_cuts(n: int, minimum: int) -> list[int]:
    """Cut points ``0 = c_0 < ... < c_k = n`` of ``n`` items into at most :func:`threads` even
    parts of at least ``minimum`` items each (one part when ``n < 2 * minimum``)."""
    parts = max(1, min(threads(), n // max(1, minimum)))
    return [n * i // parts for i in range(parts + 1)]


def run_parallel(tasks: Sequence[Callable[[], None]]) -> None:
    """Run ``tasks``: the first in this thread, the others at once on helper threads; returns
    when all are done, raising the first error."""
    if len(tasks) <= 1:
        for task in tasks:
            task()
        return
    with _POOL_LOCK:
        pool = _POOL[0]
        if pool is None or _POOL[1] < len(tasks) - 1:
            from concurrent.futures import ThreadPoolExecutor

            pool = _POOL[0] = ThreadPoolExecutor(max_workers=len(tasks) - 1, thread_name_prefix=THREAD_PREFIX)
            _POOL[1] = len(tasks) - 1
    futures = [pool.submit(t) for t in tasks[1:]]
    try:
        tasks[0]()
    finally:
        for f in futures:
            f.result()


def stop_threads() -> None:
    """Stop the helper threads (idle between batches), e.g. before this process forks; the next
    large batch starts them again."""
    with _POOL_LOCK:
        pool = _POOL[0]
        _POOL[0], _POOL[1] = None, 0
    if pool is not None:
        pool.shutdown(wait=True)


def _forget_pool() -> None:  # a forked child has none of its parent's threads
    _POOL[0], _POOL[1] = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)
