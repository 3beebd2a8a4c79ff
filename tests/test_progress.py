"""The one progress convention (deniable._progress): None / True / False / a callable."""

from __future__ import annotations

import io

import pytest

from deniable._progress import check_progress, progress_bar


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_no_terminal_gives_a_line_every_interval_with_an_eta():
    out, clock = io.StringIO(), _Clock()
    bar = progress_bar(100, "calibrate madlib", None, stream=out, interval=30.0, clock=clock)
    for _ in range(10):
        clock.t += 10.0
        bar.update(5)
    bar.close()
    lines = out.getvalue().splitlines()
    # updates at t = 10..100 s: lines at 30, 60, 90 s, then one on close
    assert len(lines) == 4 and lines[-1].endswith("- done")
    assert lines[0] == "calibrate madlib: 15 words of 100 words (15%), 0.5 words/s, elapsed 0:30, ETA 2:50"


def test_silent_when_short_and_callable_and_false():
    out = io.StringIO()
    bar = progress_bar(10, "x", None, stream=out, interval=30.0, clock=_Clock())
    bar.update(10)
    bar.close()
    assert out.getvalue() == ""  # work shorter than the interval prints nothing
    seen = []
    cb = progress_bar(3, "x", lambda done, total: seen.append((done, total)))
    cb.update(1)
    cb.update(2)
    assert seen == [(1, 3), (3, 3)]
    progress_bar(3, "x", False, stream=out).update(3)
    assert out.getvalue() == ""


def test_forced_bar_and_bytes():
    out = io.StringIO()
    with progress_bar(4, "read", True, stream=out) as bar:
        bar.update(4)
    assert "read" in out.getvalue()
    lines = io.StringIO()
    clock = _Clock()
    b = progress_bar(None, "reading emb.txt", None, unit="B", stream=lines, interval=1.0, clock=clock)
    clock.t = 2.0
    b.set_postfix_str("12 records")
    b.update(3 * 2**20)
    assert lines.getvalue().startswith("reading emb.txt: 3.0 MiB, 12 records, 1.5 MiB/s")
    progress_bar(1, "x", False).set_postfix_str("ignored")  # every reporter takes a postfix


def test_check_progress():
    for ok in (None, True, False, print):
        assert check_progress(ok) is ok
    with pytest.raises(TypeError, match="progress must be"):
        check_progress("yes")


def test_neighbourhood_tables_follow_the_convention():
    """The table builders (TEM, CusText, 1-Diffractor, ...) report through the one convention: a
    callable gets (done, total) and ends at the number of words."""
    import numpy as np

    from deniable.neighbors.builders import knn_neighborhoods

    vecs = np.random.default_rng(0).standard_normal((50, 4))
    calls: list[tuple[int, int | None]] = []
    knn_neighborhoods(vecs, vecs, 3, memory_bytes=1 << 16, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (50, 50)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
