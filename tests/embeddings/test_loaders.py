import gzip

import numpy as np
import pytest

from deniable import DataError, DeniableWarning, load_embedding
from deniable.embeddings import detect_format

WORDS = ["the", "cat", "sat", "on", "mat"]
VECS = np.array([[0.1, -0.2, 0.3], [1.5, 2.25, -3.0], [0.0, 0.0, 1e-3], [4.0, 5.0, 6.0], [-1.0, 1.0, -1.0]], dtype=np.float32)


def _text_lines(words=WORDS, vecs=VECS):
    return "".join(w + " " + " ".join(repr(float(x)) for x in v) + "\n" for w, v in zip(words, vecs))


def write_glove(path, words=WORDS, vecs=VECS):
    path.write_text(_text_lines(words, vecs), encoding="utf-8")
    return path


def write_w2v_text(path, words=WORDS, vecs=VECS, trailing_space=False):
    body = _text_lines(words, vecs)
    if trailing_space:
        body = body.replace("\n", " \n")
    path.write_text(f"{len(words)} {vecs.shape[1]}\n" + body, encoding="utf-8")
    return path


def write_w2v_binary(path, words=WORDS, vecs=VECS):
    with open(path, "wb") as f:
        f.write(f"{len(words)} {vecs.shape[1]}\n".encode())
        for w, v in zip(words, vecs):
            f.write(w.encode() + b" " + v.astype("<f4").tobytes() + b"\n")
    return path


def check(emb, words=WORDS, vecs=VECS):
    assert emb.words == words
    np.testing.assert_allclose(emb.vectors, vecs, rtol=1e-6)


def test_glove_text(tmp_path):
    p = write_glove(tmp_path / "g.txt")
    assert detect_format(p) == "glove-text"
    check(load_embedding(p))


@pytest.mark.parametrize("name", ["w.txt", "w.vec"])
def test_word2vec_and_fasttext_text(tmp_path, name):
    p = write_w2v_text(tmp_path / name, trailing_space=True)
    assert detect_format(p) == "word2vec-text"
    check(load_embedding(p))


@pytest.mark.parametrize("name", ["w.bin", "w.w2v"])
def test_word2vec_binary(tmp_path, name):
    p = write_w2v_binary(tmp_path / name)
    assert detect_format(p) == "word2vec-binary"
    check(load_embedding(p))


def test_npz_and_gzip(tmp_path):
    p = tmp_path / "e.npz"
    np.savez(p, words=np.array(WORDS), vectors=VECS)
    check(load_embedding(p))
    g = tmp_path / "g.txt.gz"
    with gzip.open(g, "wt", encoding="utf-8") as f:
        f.write(_text_lines())
    check(load_embedding(g))


def test_limit(tmp_path):
    for p in (write_glove(tmp_path / "g.txt"), write_w2v_binary(tmp_path / "b.bin")):
        emb = load_embedding(p, limit=2)
        check(emb, WORDS[:2], VECS[:2])


def test_glove_words_with_spaces(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("a 1 2\n. . . 3 4\nb 5 6\n", encoding="utf-8")
    emb = load_embedding(p)
    assert emb.words == ["a", ". . .", "b"]
    np.testing.assert_array_equal(emb.vectors[1], [3, 4])


def test_large_file_in_chunks(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    vecs = rng.standard_normal((3000, 50)).astype(np.float32)
    p = write_glove(tmp_path / "big.txt", words, vecs)
    import deniable.embeddings.loaders as L

    old = L._CHUNK_BYTES
    L._CHUNK_BYTES = 4096  # force many chunks
    try:
        emb = load_embedding(p)
    finally:
        L._CHUNK_BYTES = old
    check(emb, words, vecs)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_embedding(tmp_path / "nope.txt")


def test_empty_file(tmp_path):
    p = tmp_path / "e.txt"
    p.write_bytes(b"")
    with pytest.raises(DataError, match="empty"):
        load_embedding(p)


def test_ragged_row_names_line(tmp_path):
    p = tmp_path / "r.txt"
    p.write_text("a 1 2 3\nb 1 2\nc 1 2 3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.txt:2: ragged"):
        load_embedding(p)


def test_non_finite_names_line(tmp_path):
    p = tmp_path / "n.txt"
    p.write_text("3 2\na 1 2\nb nan 2\nc 1 2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"n\.txt:3: non-finite.*'b'"):
        load_embedding(p)


def test_non_numeric_names_line(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("a 1 2\nb 1 zz\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"x\.txt:2"):
        load_embedding(p)


def test_invalid_utf8_names_line(tmp_path):
    p = tmp_path / "u.txt"
    p.write_bytes(b"a 1 2\n\xff\xfe 1 2\n")
    with pytest.raises(DataError, match=r"u\.txt:2: invalid UTF-8"):
        load_embedding(p)


def test_unknown_binary_garbage(tmp_path):
    p = tmp_path / "garbage.dat"
    p.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(DataError):
        load_embedding(p)


def test_truncated_binary(tmp_path):
    p = write_w2v_binary(tmp_path / "t.bin")
    p.write_bytes(p.read_bytes()[:-20])
    with pytest.raises(DataError, match="truncated"):
        load_embedding(p)


def test_npz_missing_arrays(tmp_path):
    p = tmp_path / "e.npz"
    np.savez(p, words=np.array(WORDS))
    with pytest.raises(DataError, match="vectors"):
        load_embedding(p)


def test_duplicate_words_warn(tmp_path):
    p = write_glove(tmp_path / "d.txt", ["a", "b", "a"], VECS[:3])
    with pytest.warns(DeniableWarning, match="duplicate"):
        emb = load_embedding(p)
    assert emb.words == ["a", "b"]
    np.testing.assert_allclose(emb.vectors[0], VECS[0])


def test_bad_parameters(tmp_path):
    p = write_glove(tmp_path / "g.txt")
    with pytest.raises(ValueError, match="limit"):
        load_embedding(p, limit=0)
    with pytest.raises(ValueError, match="format"):
        load_embedding(p, format="xml")


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_word2vec_text_names_file_and_counts(tmp_path, gz):
    """A word2vec / fastText text file shorter than its header's word count (an interrupted
    download) is an error naming the file, not a silently smaller vocabulary."""
    p = write_w2v_text(tmp_path / "w.vec")
    lines = p.read_text().splitlines(keepends=True)
    body = "".join(lines[:4])  # header + 3 of the 5 declared words
    if gz:
        p = tmp_path / "w.vec.gz"
        with gzip.open(p, "wt", encoding="utf-8") as f:
            f.write(body)
    else:
        p.write_text(body)
    with pytest.raises(DataError, match=r"w\.vec(\.gz)?: the header declares 5 words but the file ends after 3 .*truncated"):
        load_embedding(p)
    assert load_embedding(p, limit=3).words == WORDS[:3]  # what is asked for is there
    with pytest.raises(DataError, match="declares 5 words but the file ends after 3"):
        load_embedding(p, limit=4)


def test_word2vec_text_with_more_rows_than_declared(tmp_path):
    p = write_w2v_text(tmp_path / "w.vec")
    p.write_text(p.read_text().replace("5 3\n", "4 3\n", 1))
    with pytest.raises(DataError, match=r"w\.vec:1: the header declares 4 words but the file has 5"):
        load_embedding(p)


# -- the binary cache of parsed text / word2vec-binary files --------------------------------------


@pytest.mark.parametrize("writer", [write_glove, write_w2v_text, write_w2v_binary])
def test_binary_cache_is_memory_mapped_and_keyed_by_the_file(tmp_path, monkeypatch, writer):
    import deniable.embeddings.loaders as loaders

    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "cache"))
    p = writer(tmp_path / ("e.bin" if writer is write_w2v_binary else "e.txt"))
    first = load_embedding(p, cache=True)
    (folder,) = (tmp_path / "cache" / "embeddings").iterdir()
    assert {f.name for f in folder.iterdir()} == {"vectors.npy", "words.txt", "meta.json"}
    monkeypatch.setattr(loaders, "_load_text", lambda *a, **k: pytest.fail("parsed again"))
    monkeypatch.setattr(loaders, "_load_word2vec_binary", lambda *a, **k: pytest.fail("parsed again"))
    second = load_embedding(p, cache=True)
    check(second)
    assert isinstance(second.vectors.base, np.memmap) or isinstance(second.vectors, np.memmap)
    assert second.fingerprint == first.fingerprint and second.source == str(p)
    # limit is part of the key; cache=False never reads the cache
    monkeypatch.undo()
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "cache"))
    check(load_embedding(p, cache=True, limit=2), WORDS[:2], VECS[:2])
    assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 2
    assert not isinstance(load_embedding(p, cache=False).vectors.base, np.memmap)


def test_binary_cache_follows_file_changes_and_survives_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "cache"))
    p = write_glove(tmp_path / "e.txt")
    load_embedding(p, cache=True)
    vecs2 = VECS * 2
    write_glove(p, WORDS, vecs2)  # new size / mtime: a new key, the new vectors
    import os

    os.utime(p, ns=(1, 1))
    check(load_embedding(p, cache=True), WORDS, vecs2)
    folder = max((tmp_path / "cache" / "embeddings").iterdir(), key=lambda f: f.stat().st_mtime_ns)
    (folder / "words.txt").write_text("the\ncat", encoding="utf-8")  # damaged: 2 words for 5 vectors
    with pytest.warns(DeniableWarning, match="unusable embedding cache"):
        check(load_embedding(p, cache=True), WORDS, vecs2)
    check(load_embedding(p, cache=True), WORDS, vecs2)  # rewritten


def test_binary_cache_default_only_for_large_files(tmp_path, monkeypatch):
    import deniable.embeddings.loaders as loaders

    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "cache"))
    p = write_glove(tmp_path / "e.txt")
    load_embedding(p)
    assert not (tmp_path / "cache" / "embeddings").exists()
    monkeypatch.setattr(loaders, "CACHE_MIN_BYTES", 10)
    load_embedding(p)
    assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 1
