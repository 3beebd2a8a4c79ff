"""The text loader fills one growing buffer (no list of chunks + concatenation)."""

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


def _write_w2v_bin(path, words, vecs):
    with open(path, "wb") as f:
        f.write(f"{len(words)} {vecs.shape[1]}\n".encode())
        for w, v in zip(words, vecs):
            f.write(w.encode("utf-8") + b" " + v.astype("<f4").tobytes() + b"\n")


def test_word2vec_binary_is_read_in_chunks(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    words = [f"wörd{i}" for i in range(400)]
    vecs = rng.standard_normal((400, 9)).astype(np.float32)
    p = tmp_path / "e.bin"
    _write_w2v_bin(p, words, vecs)
    monkeypatch.setattr(loaders, "_CHUNK_BYTES", 1)  # smallest refills (~4 KB): records straddle chunk ends
    emb = load_embedding(p)
    assert emb.words == words
    np.testing.assert_array_equal(emb.vectors, vecs)
    emb = load_embedding(p, limit=17)
    assert emb.words == words[:17]


def test_word2vec_binary_truncated_still_fails_clearly(tmp_path, monkeypatch):
    from deniable.errors import DataError

    rng = np.random.default_rng(6)
    words = [f"w{i}" for i in range(50)]
    p = tmp_path / "e.bin"
    _write_w2v_bin(p, words, rng.standard_normal((50, 4)).astype(np.float32))
    p.write_bytes(p.read_bytes()[:-20])
    monkeypatch.setattr(loaders, "_CHUNK_BYTES", 64)
    with pytest.raises(DataError, match="record 50 of 50"):
        load_embedding(p)


@pytest.mark.parametrize("suffix", ["txt", "bin"])
def test_progress_bar_counts_the_bytes(tmp_path, capsys, suffix):
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(60)]
    vecs = rng.standard_normal((60, 5)).astype(np.float32)
    p = tmp_path / f"e.{suffix}"
    (_write if suffix == "txt" else _write_w2v_bin)(p, words, vecs)
    emb = load_embedding(p, progress=True)
    assert emb.words == words
    err = capsys.readouterr().err
    assert "reading e." in err and "100%" in err
    load_embedding(p)
    assert capsys.readouterr().err == ""
