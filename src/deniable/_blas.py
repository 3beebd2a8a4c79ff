"""BLAS thread control for small dense problems.

A multi-threaded OpenBLAS spin-waits for its threads; on a busy machine a 300 × 300
eigendecomposition then takes seconds instead of milliseconds (measured: 0.03 s on one thread,
0.3–3 s on two busy cores). Small problems gain nothing from threads, so they run on one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit BLAS/LAPACK to one thread inside the block (no-op without ``threadpoolctl``)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
