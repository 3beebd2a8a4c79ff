"""deniable.text.io: records in, records out; pieces cut only after separators; batch ends that
depend only on the text."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deniable.errors import DataError
from deniable.text import split_words
from deniable.text.io import RecordWriter, batch_records, first_cut, last_cut, read_records

pieces = st.lists(st.sampled_from(["cat", "dog", "Éé", "x̂", "😀", "42", " ", "  ", ",", ". ", "\n", "、", "—", "\t", "a-b"]), max_size=200).map("".join)


def _copy(path, **kw) -> str:
    reader = read_records(path, **kw)
    out = io.StringIO()
    writer = RecordWriter(out, reader)
    for rec in reader:
        writer.write(rec, rec.text)
    writer.close()
    return out.getvalue()


@pytest.mark.parametrize("max_chars", [None, 1, 7, 1000])
def test_identity_round_trip_every_format(tmp_path, max_chars):
    txt = tmp_path / "a.txt.gz"
    content = "one two, three\n\nfour — five、six\r\nlast line without newline"
    with gzip.open(txt, "wt", encoding="utf-8", newline="") as f:
        f.write(content)
    assert _copy(txt, max_chars=max_chars) == content
    jl = tmp_path / "a.jsonl"
    jl.write_text('{"a": 1e400, "text": "x, y z", "b": "\\udfff"}\n\n{"text": "\\u00e9t\\u00e9"}\n', encoding="utf-8")
    assert [json.loads(x) for x in _copy(jl, max_chars=max_chars).splitlines() if x] == [
        json.loads(x) for x in jl.read_text().splitlines() if x
    ]
    cs = tmp_path / "a.csv"
    cs.write_text('id,text\n1,"a, b ""c"""\n2,plain\n', encoding="utf-8")
    got = _copy(cs, max_chars=max_chars)
    import csv

    assert list(csv.reader(io.StringIO(got))) == list(csv.reader(io.StringIO(cs.read_text())))


@settings(max_examples=150, deadline=None)
@given(text=pieces, size=st.integers(1, 50))
def test_cuts_never_split_a_word(text, size):
    """Pieces end after a separator, so tokenizing the pieces gives the words of the whole."""
    cut = last_cut(text)
    assert cut == 0 or not split_words(text[cut - 1])[1::2]
    words = split_words(text)[1::2]
    p = first_cut(text, size)
    assert split_words(text[:p])[1::2] + split_words(text[p:])[1::2] == words


@settings(max_examples=200, deadline=None)
@given(text=pieces, long_word=st.integers(0, 200), size=st.integers(1, 300))
def test_first_cut_is_the_first_separator(text, long_word, size):
    """The character scan of first_cut finds what the separator pattern finds, also past its
    first 64 characters (a long word)."""
    from deniable.text.io import _separator

    text = text[: size // 2] + "w" * long_word + text[size // 2 :]
    m = _separator().search(text, max(size - 1, 0)) if size < len(text) else None
    assert first_cut(text, size) == (len(text) if m is None else m.end())


@settings(max_examples=100, deadline=None)
@given(text=pieces, max_chars=st.integers(1, 64), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4))
def test_batches_do_not_depend_on_how_the_text_was_read(tmp_path_factory, text, max_chars, sizes):
    path = tmp_path_factory.mktemp("io") / "t.txt"
    path.write_bytes(text.encode("utf-8"))
    if not text:
        return

    def batches(mc):  # the text of each batch (a batch without text has no words: no mechanism call)
        out = []
        for batch in batch_records(iter(read_records(path, max_chars=mc)), tuple(sizes)):
            joined = "".join(r.text for r in batch)
            if joined:
                out.append(joined)
        return out

    whole = batches(None)
    assert "".join(whole) == text
    assert batches(max_chars) == whole


@settings(max_examples=150, deadline=None)
@given(text=pieces, block=st.integers(1, 40), max_chars=st.one_of(st.none(), st.integers(1, 30)), sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4))
def test_joined_lines_give_the_same_batches_and_counts(tmp_path_factory, text, block, max_chars, sizes):
    """joined=True (the lines of a block as one record): the same batches of the same text as a
    record per line, the same number of records counted, whatever the blocks and pieces."""
    import deniable.text.io as text_io

    path = tmp_path_factory.mktemp("joined") / "t.txt"
    path.write_bytes(text.encode("utf-8"))
    old = text_io._BLOCK
    text_io._BLOCK = block
    try:
        got = {}
        for joined in (False, True):
            reader = read_records(path, max_chars=max_chars, joined=joined)
            got[joined] = (["".join(r.text for r in b) for b in batch_records(iter(reader), tuple(sizes))], reader.records)
    finally:
        text_io._BLOCK = old
    assert got[True] == got[False]
    assert got[True][1] == text.count("\n") + (not text.endswith("\n") and text != "")


def test_joined_lines_errors_and_formats(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\n" + "é".encode() * 3000 + b"\xff rest\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(byte 0xff at column 6001\)"):
        list(read_records(p, max_chars=1000, joined=True))
    p.write_bytes(b"ok\nfine\nab\0c\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: binary data"):
        list(read_records(p, joined=True))
    with pytest.raises(ValueError, match="plain text only"):
        read_records(tmp_path / "a.jsonl", joined=True)


def test_reader_errors_name_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\n" + "é".encode() * 3000 + b"\xff rest\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(byte 0xff at column 6001\)"):
        list(read_records(p, max_chars=1000))
    p.write_bytes(b"ok\nab\xc3")  # ends inside a character
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(the file ends inside"):
        list(read_records(p))
    with pytest.raises(ValueError, match="format must be one of"):
        read_records(p, format="xml")


@settings(max_examples=150, deadline=None)
@given(text=pieces, block=st.integers(1, 40), max_chars=st.one_of(st.none(), st.integers(1, 30)), bom=st.booleans())
def test_plain_text_records_are_the_lines_whatever_the_blocks(tmp_path_factory, text, block, max_chars, bom):
    """Read a block at a time (tiny blocks here: lines across blocks, long lines read on as a
    stream), the records of a plain-text file are its lines with their line breaks, in order,
    numbered from 1, each whole or in consecutive pieces (first ... last) of about max_chars."""
    import deniable.text.io as text_io

    path = tmp_path_factory.mktemp("blocks") / "t.txt"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    old = text_io._BLOCK
    text_io._BLOCK = block
    try:
        records = list(read_records(path, max_chars=max_chars))
    finally:
        text_io._BLOCK = old
    lines: list[tuple[int, str]] = []
    for r in records:
        if r.first:
            lines.append((r.line, r.text))
        else:
            assert lines and lines[-1][0] == r.line
            lines[-1] = (r.line, lines[-1][1] + r.text)
        assert r.last or split_words(r.text[-1:])[1::2] == []  # a piece ends after a separator
    expected = [ln + "\n" for ln in text.split("\n")[:-1]] + ([text.split("\n")[-1]] if text.split("\n")[-1] else [])
    assert [t for _, t in lines] == expected
    assert [k for k, _ in lines] == list(range(1, len(expected) + 1))


def test_plain_text_errors_across_blocks(tmp_path, monkeypatch):
    import deniable.text.io as text_io

    monkeypatch.setattr(text_io, "_BLOCK", 5)
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nfine line\nab\0c\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: binary data"):
        list(read_records(p))
    p.write_bytes(b"ok\n" + b"word " * 500 + b"\xff\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(byte 0xff at column 2501\)"):
        list(read_records(p, max_chars=100))
    p.write_bytes(b"ok\n\xc3")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(the file ends inside"):
        list(read_records(p))


def test_write_batch_is_write_per_record(tmp_path):
    for name, body in (("a.txt", "one two\nthree\n"), ("a.jsonl", '{"text": "one two"}\n{"text": "three"}\n'), ("a.csv", "id,text\n1,one two\n2,three\n")):
        path = tmp_path / name
        path.write_text(body, encoding="utf-8")
        outs = []
        for batch_write in (False, True):
            reader = read_records(path)
            out = io.StringIO()
            writer = RecordWriter(out, reader)
            for batch in batch_records(iter(reader)):
                texts = [r.text.upper() for r in batch]
                if batch_write:
                    writer.write_batch(batch, texts)
                else:
                    for r, t in zip(batch, texts):
                        writer.write(r, t)
            writer.close()
            outs.append(out.getvalue())
        assert outs[0] == outs[1] and "ONE TWO" in outs[0]
    reader = read_records(tmp_path / "a.txt")
    with pytest.raises(TypeError, match="must be a string, got int"):
        RecordWriter(io.StringIO(), reader).write_batch([], ["a", 3])


def test_plain_text_lines_from_a_pipe_are_not_held_back(tmp_path):
    """A pipe's lines are read as they come (a block is what the pipe has), so a slow producer's
    records are not held until a full block or the end of the input."""
    import os
    import threading

    from deniable.text.io import RecordReader

    r, w = os.pipe()
    got: list = []
    reader = RecordReader(tmp_path / "unused.txt", format="txt")
    with os.fdopen(r, "rb") as f, os.fdopen(w, "wb") as out:
        out.write(b"first line\nsecond")
        out.flush()
        records = reader._txt(f)
        t = threading.Thread(target=lambda: got.append(next(records)), daemon=True)
        t.start()
        t.join(timeout=10)
        assert got and got[0].text == "first line\n" and got[0].line == 1  # the writer is still open
        out.write(b" half\n")
        out.close()
        assert [(x.line, x.text) for x in records] == [(2, "second half\n")]
