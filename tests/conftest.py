"""Shared fixtures.

Tests that read ``../shared/data`` use the ``shared_data`` fixture: it skips with a clear reason
where the folder is absent (a user's fresh clone) and fails instead when
``DENIABLE_REQUIRE_SHARED_DATA=1`` (set by ``.ci/run``), so CI never skips them silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from deniable import Embedding

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        msg = f"shared data not found at {SHARED_DATA} (it sits beside the repository in the project workspace)"
        if os.environ.get("DENIABLE_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(msg + "; DENIABLE_REQUIRE_SHARED_DATA=1 makes this an error")
        pytest.skip(msg)
    return SHARED_DATA


def random_embedding(n: int = 40, dim: int = 5, seed: int = 0, *, words: list[str] | None = None) -> Embedding:
    """A small random embedding with lower-case words ``w0, w1, ...``."""
    rng = np.random.default_rng(seed)
    words = words or [f"w{i}" for i in range(n)]
    return Embedding(words, rng.standard_normal((len(words), dim)).astype(np.float32))


@pytest.fixture
def small_embedding() -> Embedding:
    return random_embedding()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """No test writes to the user's ~/.cache/deniable."""
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "deniable-cache"))
