"""The text loader fills one growing buffer (no list of chunks + concatenation); issue 18."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.embeddings import loaders
from deniable.embeddings.loaders import load_embedding


def _write(path, words, vecs, header=False):
    with open(path, "w", encoding="utf-8") as f:
        if header:
            f.write(f"{len(words)} {vecs.shape[1]}\n")
        for w, v in zip(words, vecs):
            f.write(w + " " + " ".join(f"{x:.6g}" for x in v) + "\n")


@pytest.mark.parametrize("header", [False, True])
def test_many_small_chunks_and_growth_match_the_file(tmp_path, monkeypatch, header):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(500)]
    vecs = rng.standard_normal((500, 7)).astype(np.float32)
    p = tmp_path / ("e.vec" if header else "e.txt")
    _write(p, words, vecs, header)
    monkeypatch.setattr(loaders, "_CHUNK_BYTES", 400)  # ~5 lines per chunk
    monkeypatch.setattr(loaders, "_estimated_rows", lambda path, consumed, rows: 3)  # force many grows
    emb = load_embedding(p)
    assert emb.words == words
    np.testing.assert_allclose(emb.vectors, vecs, rtol=1e-5)
    assert emb.vectors.flags.c_contiguous and emb.vectors.dtype == np.float32


def test_limit_stops_and_trims(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(300)]
    vecs = rng.standard_normal((300, 5)).astype(np.float32)
    p = tmp_path / "e.txt"
    _write(p, words, vecs)
    monkeypatch.setattr(loaders, "_CHUNK_BYTES", 1000)
    emb = load_embedding(p, limit=37)
    assert emb.words == words[:37]
    np.testing.assert_allclose(emb.vectors, vecs[:37], rtol=1e-5)


def test_growing_rows_resizes_in_place():
    g = loaders._GrowingRows(3, 2)
    for k in range(10):
        g.append(np.full((k + 1, 3), k, dtype=np.float32))
    out = g.finish(g.n)
    assert out.shape == (55, 3)
    np.testing.assert_array_equal(out[:, 0], np.repeat(np.arange(10), np.arange(1, 11)))


def test_first_nonfinite_row_in_blocks():
    x = np.zeros((100, 4), dtype=np.float32)
    assert loaders._first_nonfinite_row(x, block_rows=7) is None
    x[53, 2] = np.nan
    x[80, 0] = np.inf
    assert loaders._first_nonfinite_row(x, block_rows=7) == 53
