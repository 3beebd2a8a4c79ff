"""Minimal on-device runtime for BRR bundles (numpy and the Python standard library only).

This file is self-contained: copy it next to an app, load a bundle written by
``deniable export brr -o FILE`` and privatize text on the user's device, so the raw text never
leaves it (BRR paper §1, the zero-trust model). It imports nothing from ``deniable``.

Mechanism (BRR paper Algorithm 3): each word's binary code gets every bit flipped independently
with probability p = 1/(1 + e^ε) (randomized response, Algorithm 2), and the output is the
vocabulary word whose code is nearest in Hamming distance, ties broken uniformly at random.
Guarantee (Theorem 3): ε·d-privacy with d the Hamming distance between codes, over the
bundle's vocabulary ∪ {UNK}; every out-of-vocabulary word is privatized as the UNK code stored
in the bundle (never passed through).

Text handling (same rules as ``deniable.text.tokenize``): separators are whitespace and Unicode
punctuation (category P*) and pass through unchanged; words are maximal runs of every other
character (letters with their combining marks, digits, symbols), so no part of a word is copied
to the output, except that English clitics after a stem are words of their own (``mother's`` ->
``mother`` + ``'s``, ``don't`` -> ``do`` + ``n't``), looked up as ``'s`` (else ``s``) and written
back as a clitic when the sampled word is one, else after a space. Lookup keys are NFC-normalized, lower-cased for an uncased vocabulary, and the
output word takes the input's case pattern (lower / Title / UPPER).

Randomness, in the order it is consumed (identical to ``deniable.mechanisms.brr.BRR``, so the
same seed gives the same output): the words of one call are taken in order in chunks of
:data:`CHUNK` = 4096; per chunk of m words, first ``U = rng.random((m, n_bits))`` (bit j of word
i flips iff ``U[i, j] < p``), then ``T = rng.random(m)``; word i outputs the tied nearest code of
rank ``floor(T[i] * C_i)`` (C_i = number of codes at the minimal distance) in ascending id order.

Usage as a script, reading stdin and writing stdout (exit status 0; 2 for bad arguments, 1 for
an unreadable bundle or input, each with one ``error: ...`` line on stderr):

* a copy of this single file next to an app: ``python brr_runtime.py BUNDLE --epsilon 1.0 [--seed 0] < in.txt > out.txt``;
* with deniable installed (``pip install deniable``): ``python -m deniable.brr_runtime BUNDLE --epsilon 1.0 < in.txt``;
* from a checkout of the repository: ``python src/deniable/brr_runtime.py BUNDLE --epsilon 1.0 < in.txt``.

``python -m deniable.brr_runtime --where`` prints the path of this file, to copy it to a device.
The byte layout is documented in ``docs/bundle_format.md`` of the deniable project.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import struct
import sys
import unicodedata

import numpy as np

__all__ = ["MAGIC", "VERSION", "CHUNK", "BundleError", "Bundle", "load_bundle", "parse_bundle", "flip_probability"]

MAGIC = b"\x89DNBRR\r\n"
VERSION = 1
CHUNK = 4096
MAX_BITS = 65535  # distances are accumulated in uint16
_FIXED = struct.Struct("<8sII")  # magic, version, header length
_DIGEST = 32
_WORD_RE: re.Pattern[str] | None = None
_MEMORY_CELLS = 1 << 22  # distance cells per search block (bounds memory to ~40 MiB)


_APOSTROPHES = "'\u2019"
_ENCLITIC = "[" + _APOSTROPHES + "](?:[sS]|[mM]|[dD]|[rR][eE]|[lL][lL]|[vV][eE])"
_NEGATION = "[nN][" + _APOSTROPHES + "][tT]"
_CLITIC_RE = re.compile(f"(?:{_ENCLITIC}|{_NEGATION})")
_CLITIC_LETTERS = {"s": "'s", "m": "'m", "d": "'d", "re": "'re", "ll": "'ll", "ve": "'ve", "nt": "n't"}


def word_pattern() -> re.Pattern[str]:
    """Words: a clitic after a stem ('s 'm 'd 're 'll 've n't, with ' or ’), the stem before
    n't, or a run of characters that are neither whitespace nor Unicode punctuation (built once)."""
    global _WORD_RE
    if _WORD_RE is None:
        ranges: list = []
        for cp in range(sys.maxunicode + 1):
            if unicodedata.category(chr(cp))[0] == "P":
                if ranges and ranges[-1][1] == cp - 1:
                    ranges[-1][1] = cp
                else:
                    ranges.append([cp, cp])
        punct = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)
        w = f"[^\\s{punct}]"
        end = f"(?!{w})"
        _WORD_RE = re.compile(f"({w}+?(?={_NEGATION}{end})|(?<={w}){_NEGATION}{end}|(?<={w}){_ENCLITIC}{end}|{w}+)")
    return _WORD_RE


def _clitic_form(word: str, apostrophe: str):
    """``word`` as a clitic written with ``apostrophe`` (``s`` -> ``'s``, ``nt`` -> ``n't``), or None."""
    if _CLITIC_RE.fullmatch(word) is not None:
        return word.replace("'", apostrophe).replace("\u2019", apostrophe)
    form = _CLITIC_LETTERS.get(word.lower())
    if form is None:
        return None
    letters = iter(word)
    return "".join(apostrophe if ch == "'" else next(letters) for ch in form)


def _lookup(index: dict, word: str, lower: bool) -> int:
    """Vocabulary id of a word (-1: unknown); a clitic by its form ('s), else by its letters (s)."""
    if _CLITIC_RE.fullmatch(word) is not None:
        k = word.lower().replace("\u2019", "'")
        return index.get(k, index.get(k.replace("'", ""), -1))
    return index.get(_key(word, lower), -1)


def _render(word: str, token: str, uncased: bool) -> str:
    """The output for sampled ``word`` in the place of input ``token``: its case pattern; in a
    clitic's place the word as a clitic, else after a space (never glued to the stem)."""
    pattern = _case(token) if uncased else "lower"
    if _CLITIC_RE.fullmatch(token) is not None:
        form = _clitic_form(word, "\u2019" if "\u2019" in token else "'")
        return _apply_case(form, pattern) if form is not None else " " + _apply_case(word, pattern)
    return _apply_case(word, pattern)


def _key(word: str, lower: bool) -> str:
    if not word.isascii():
        word = unicodedata.normalize("NFC", word)
    return word.lower() if lower else word


class BundleError(ValueError):
    """The file is not a valid BRR bundle (wrong magic, unsupported version, truncated, corrupted)."""


def flip_probability(epsilon: float) -> float:
    """Randomized-response flip probability 1/(1+e^ε) (BRR Algorithm 2), computed stably."""
    eps = float(epsilon)
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    t = math.exp(-eps)
    return t / (1.0 + t)


def parse_bundle(data: bytes, *, name: str = "bundle") -> dict:
    """Validate and decode the bytes of a bundle.

    Returns a dict with ``header`` (dict), ``codes`` (uint64 ``(n_words, words_per_code)``),
    ``unk_code`` (uint64 ``(words_per_code,)``) and ``words`` (list of str). Raises
    :class:`BundleError` naming what is wrong.
    """
    size = len(data)
    if size < _FIXED.size:
        raise BundleError(f"{name}: truncated: {size} bytes, shorter than the {_FIXED.size}-byte preamble")
    magic, version, hlen = _FIXED.unpack_from(data, 0)
    if magic != MAGIC:
        raise BundleError(f"{name}: not a BRR bundle (bad magic bytes {magic!r})")
    if version != VERSION:
        raise BundleError(f"{name}: unsupported bundle version {version} (this runtime reads version {VERSION})")
    if size < _FIXED.size + hlen + _DIGEST:
        raise BundleError(f"{name}: truncated: {size} bytes, the header alone needs {_FIXED.size + hlen + _DIGEST}")
    digest = hashlib.sha256(memoryview(data)[: size - _DIGEST]).digest()
    if digest != bytes(data[size - _DIGEST :]):
        raise BundleError(f"{name}: checksum mismatch: the file is corrupted or truncated")
    try:
        header = json.loads(bytes(data[_FIXED.size : _FIXED.size + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{name}: the JSON header is unreadable ({exc})") from None
    if not isinstance(header, dict):
        raise BundleError(f"{name}: the JSON header is not an object")
    try:
        n_words = int(header["n_words"])
        n_bits = int(header["n_bits"])
        wpc = int(header["words_per_code"])
        vocab_bytes = int(header["vocab_bytes"])
        bool(header["uncased"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{name}: the header lacks or has a bad field: {exc}") from None
    if n_words < 1 or not 1 <= n_bits <= MAX_BITS or wpc != (n_bits + 63) // 64 or vocab_bytes < 0:
        raise BundleError(f"{name}: inconsistent header: n_words={n_words}, n_bits={n_bits}, words_per_code={wpc}")
    off = _FIXED.size + hlen
    need = off + 8 * wpc * (n_words + 1) + vocab_bytes + _DIGEST
    if need != size:
        raise BundleError(f"{name}: size mismatch: the header describes {need} bytes but the file has {size}")
    codes = np.frombuffer(data, dtype="<u8", count=n_words * wpc, offset=off).reshape(n_words, wpc).astype(np.uint64)
    off += 8 * wpc * n_words
    unk = np.frombuffer(data, dtype="<u8", count=wpc, offset=off).astype(np.uint64)
    off += 8 * wpc
    try:
        text = bytes(data[off : off + vocab_bytes]).decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(f"{name}: the vocabulary is not valid UTF-8") from None
    words = text.split("\n")
    if len(words) != n_words:
        raise BundleError(f"{name}: the vocabulary has {len(words)} words, the header says {n_words}")
    if n_bits % 64:
        pad = np.uint64(~((1 << (n_bits % 64)) - 1) & 0xFFFFFFFFFFFFFFFF)
        if (codes[:, -1] & pad).any() or (unk[-1] & pad):
            raise BundleError(f"{name}: padding bits beyond n_bits={n_bits} are set")
    return {"header": header, "codes": codes, "unk_code": unk, "words": words}


def _as_rng(rng):
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def _case(token: str) -> str:
    if token[:1].isupper():
        return "upper" if len(token) > 1 and token.isupper() else "title"
    return "lower"


def _apply_case(word: str, pattern: str) -> str:
    if pattern == "upper":
        return word.upper()
    if pattern == "title":
        return word[:1].upper() + word[1:]
    return word


def nearest_codes(codes: np.ndarray, queries: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """Exact Hamming 1-NN of each packed query among ``codes``, ties broken by the uniforms
    ``ties`` (rank ``floor(u*C)`` among the C tied ids, in ascending id order)."""
    n, wpc = queries.shape
    V = codes.shape[0]
    cols = np.ascontiguousarray(codes.T)
    step = max(1, min(n, _MEMORY_CELLS // V))
    out = np.empty(n, dtype=np.int64)
    xor = np.empty(step * V, dtype=np.uint64)
    cnt = np.empty(step * V, dtype=np.uint8)
    acc = np.empty(step * V, dtype=np.uint16)
    for s in range(0, n, step):
        q = queries[s : s + step]
        m = q.shape[0]
        x, c, d = xor[: m * V].reshape(m, V), cnt[: m * V].reshape(m, V), acc[: m * V].reshape(m, V)
        for k in range(wpc):
            np.bitwise_xor(q[:, k : k + 1], cols[k][None, :], out=x)
            np.bitwise_count(x, out=c)
            if k == 0:
                np.copyto(d, c)
            else:
                np.add(d, c, out=d)
        best = d.min(axis=1)
        rows, ids = np.nonzero(d == best[:, None])
        count = np.bincount(rows, minlength=m)
        start = np.concatenate(([0], np.cumsum(count)[:-1]))
        rank = np.minimum((ties[s : s + m] * count).astype(np.int64), count - 1)
        out[s : s + m] = ids[start + rank]
    return out


class Bundle:
    """A loaded BRR bundle: vocabulary, packed codes, UNK code; privatizes text."""

    def __init__(self, parsed: dict) -> None:
        self.header = parsed["header"]
        self.codes = parsed["codes"]
        self.unk_code = parsed["unk_code"]
        self.words = parsed["words"]
        self.n_bits = int(self.header["n_bits"])
        self.uncased = bool(self.header["uncased"])
        self._index = {w: i for i, w in enumerate(self.words)}

    def sample_ids(self, ids, epsilon: float, rng=None) -> np.ndarray:
        """Privatize word ids (-1 = out of vocabulary, privatized as the UNK code)."""
        p = flip_probability(epsilon)
        gen = _as_rng(rng)
        ids = np.asarray(ids, dtype=np.int64).ravel()
        out = np.empty(ids.shape[0], dtype=np.int64)
        wpc = self.codes.shape[1]
        for s in range(0, ids.shape[0], CHUNK):
            chunk = ids[s : s + CHUNK]
            m = chunk.shape[0]
            base = self.codes[np.maximum(chunk, 0)]
            base[chunk < 0] = self.unk_code
            flips = gen.random((m, self.n_bits)) < p
            packed = np.zeros((m, 8 * wpc), dtype=np.uint8)
            packed[:, : (self.n_bits + 7) // 8] = np.packbits(flips, axis=1, bitorder="little")
            noisy = base ^ packed.view("<u8").astype(np.uint64)
            ties = gen.random(m)
            out[s : s + m] = nearest_codes(self.codes, noisy, ties)
        return out

    def privatize(self, texts, epsilon: float, rng=None):
        """Privatize a text (str) or a list of texts word by word; separators pass through."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        split = word_pattern().split
        parts_list = [split(t) for t in texts]
        words = [w for parts in parts_list for w in parts[1::2]]
        if words:
            index, lower = self._index, self.uncased
            ids = np.fromiter((_lookup(index, w, lower) for w in words), dtype=np.int64, count=len(words))
            chosen = self.sample_ids(ids, epsilon, rng).tolist()
            new = [_render(self.words[j], w, lower) for j, w in zip(chosen, words)]
            k = 0
            for parts in parts_list:
                n = len(parts) // 2
                parts[1::2] = new[k : k + n]
                k += n
        result = ["".join(parts) for parts in parts_list]
        return result[0] if single else result


def load_bundle(path) -> Bundle:
    """Read and validate a bundle file; raises :class:`BundleError` if it is not a valid bundle."""
    with open(path, "rb") as f:
        data = f.read()
    return Bundle(parse_bundle(data, name=str(path)))


class _ArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors as one ``error: ...`` line (exit status 2)."""

    def error(self, message: str):  # type: ignore[no-untyped-def,unused-ignore]
        print(f"error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def _main(argv=None) -> int:
    """Script entry: 0 on success, 2 for bad arguments, 1 for a bad bundle or input; errors are
    one ``error: ...`` line on stderr."""
    ap = _ArgumentParser(
        prog="brr_runtime.py" if __name__ == "__main__" and not __package__ else "python -m deniable.brr_runtime",
        description="Privatize stdin with a BRR bundle (metric DP, Hamming distance); writes stdout.",
    )
    ap.add_argument("bundle", nargs="?", help="bundle file written by `deniable export brr`")
    ap.add_argument("--epsilon", type=float, help="privacy parameter epsilon > 0 (per bit of Hamming distance)")
    ap.add_argument("--seed", type=int, default=None, help="seed for reproducible experiments (default: OS entropy)")
    ap.add_argument("--where", action="store_true", help="print the path of this file (to copy it to a device) and exit")
    args = ap.parse_args(argv)  # exits 2 on usage errors
    if args.where:
        print(__file__)
        return 0
    if args.bundle is None or args.epsilon is None:
        ap.error("the following arguments are required: " + ", ".join(n for n, v in (("bundle", args.bundle), ("--epsilon", args.epsilon)) if v is None))
    try:
        flip_probability(args.epsilon)
    except ValueError as exc:
        print(f"error: --epsilon: {exc}", file=sys.stderr)
        return 2
    if args.seed is not None and args.seed < 0:
        print(f"error: --seed must be an integer >= 0, got {args.seed}", file=sys.stderr)
        return 2
    try:
        bundle = load_bundle(args.bundle)
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {args.bundle}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        text = sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        print(f"error: stdin is not valid UTF-8 (byte offset {exc.start})", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(bundle.privatize(text, args.epsilon, rng=args.seed).encode("utf-8"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
