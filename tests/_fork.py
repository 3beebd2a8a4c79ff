"""Helpers for tests of forked worker processes."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np


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


#: The words of the small embeddings of the command-line worker tests.
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "north", "south", "film", "good", "bad", "plot", "it", "was"]


def write_corpus(tmp: Any, *, seed: int, extra_words: int, pool: list[str], lines: int, max_words: int) -> tuple[Any, Any, list[str]]:
    """A text embedding file (:data:`WORDS` and ``w0..``, 8 dimensions) and a text file of
    ``lines`` random lines of up to ``max_words`` words of ``pool`` in ``tmp``: (embedding path,
    text path, the lines)."""
    rng = np.random.default_rng(seed)
    emb = tmp / "emb.txt"
    with open(emb, "w", encoding="utf-8") as f:
        for w in [*WORDS, *(f"w{i}" for i in range(extra_words))]:
            f.write(w + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(8)) + "\n")
    text = [" ".join(rng.choice(pool, int(rng.integers(0, max_words)))) + rng.choice([".", "!", ""]) for _ in range(lines)]
    src = tmp / "in.txt"
    src.write_text("\n".join(text) + "\n", encoding="utf-8")
    return emb, src, text
