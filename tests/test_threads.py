"""The helper threads shared by the loops that release the GIL: how many, and the pool."""

from __future__ import annotations

import threading

import pytest

from deniable import _threads


def test_thread_count_from_setting_environment_and_cores(monkeypatch):
    monkeypatch.setattr(_threads, "_THREADS", [None])
    monkeypatch.setenv("DENIABLE_THREADS", "3")
    assert _threads.threads() == 3
    _threads.set_threads(2)
    assert _threads.threads() == 2
    _threads.set_threads(None)
    monkeypatch.setenv("DENIABLE_THREADS", "two")
    with pytest.raises(ValueError, match="DENIABLE_THREADS must be a whole number"):
        _threads.threads()
    monkeypatch.delenv("DENIABLE_THREADS")
    assert 1 <= _threads.threads() <= 4
    with pytest.raises(ValueError, match="at least 1"):
        _threads.set_threads(0)


def test_thread_limit_lowers_the_count_for_a_block_and_restores_it(monkeypatch):
    monkeypatch.setattr(_threads, "_THREADS", [None])
    monkeypatch.setenv("DENIABLE_THREADS", "3")
    with _threads.thread_limit(2):
        assert _threads.threads() == 2
        with _threads.thread_limit(5):  # a limit never raises the count
            assert _threads.threads() == 2
    assert _threads.threads() == 3 and _threads._THREADS == [None]  # the environment's value again
    with pytest.raises(RuntimeError), _threads.thread_limit(1):
        raise RuntimeError
    assert _threads._THREADS == [None]


def test_even_cuts(monkeypatch):
    monkeypatch.setattr(_threads, "_THREADS", [3])
    assert _threads.even_cuts(10, 100) == [0, 10]
    assert _threads.even_cuts(250, 100) == [0, 125, 250]
    assert _threads.even_cuts(3000, 100) == [0, 1000, 2000, 3000]
    assert _threads.even_cuts(0, 100) == [0, 0]


def test_run_parallel_runs_every_task_and_raises_a_helpers_error():
    done = []
    _threads.run_parallel([lambda i=i: done.append(i) for i in range(3)])
    assert sorted(done) == [0, 1, 2]
    _threads.run_parallel([])

    def fail() -> None:
        raise RuntimeError("in a helper thread")

    with pytest.raises(RuntimeError, match="in a helper thread"):
        _threads.run_parallel([lambda: None, fail])
    assert any(t.name.startswith(_threads.THREAD_PREFIX) for t in threading.enumerate())
    _threads.stop_threads()
    assert not any(t.name.startswith(_threads.THREAD_PREFIX) for t in threading.enumerate())
