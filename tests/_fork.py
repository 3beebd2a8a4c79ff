"""Helpers for tests of forked worker processes."""

from __future__ import annotations

import threading


def stop_tqdm_monitor() -> None:
    """A progress bar shown by an earlier test of the session leaves tqdm's monitor thread
    running, which rules out forking (as any other thread): stop it."""
    from tqdm import tqdm
    from tqdm._monitor import TMonitor
    from tqdm.auto import tqdm as auto_tqdm

    for t in threading.enumerate():
        if isinstance(t, TMonitor):
            t.exit()
    for cls in {tqdm, auto_tqdm}:
        cls.monitor = None
