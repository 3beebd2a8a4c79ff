"""The JavaScript BRR runtime (``deniable/web/static/brr.js``) agrees with the Python one.

Run in Node (skipped where ``node`` is absent): same tokenizer and case rules; given numpy's
uniform stream for a seed, the same output as ``brr_runtime.Bundle.privatize(..., rng=seed)``
(the Python side uses its existing API; the JS side gets the stream through its ``random``
option); the same bundle validation; and, with its own ``crypto.getRandomValues`` source, output
frequencies that match BRR's exact output distribution (chi-square, with a control that must fail).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import unicodedata
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from deniable import BRR
from deniable.binary import BinaryEmbedding
from deniable.brr_runtime import CHUNK, load_bundle
from deniable.text.tokenize import apply_case, case_pattern, lookup_key, split_words
from deniable.web import static_dir
from deniable.web._tables import BEGIN, END, separator_ranges

NODE = shutil.which("node")
BRR_JS = static_dir() / "brr.js"
DRIVER = Path(__file__).with_name("node_driver.mjs")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def node(job: dict, tmp_path: Path, timeout: float = 120.0):
    path = tmp_path / f"job-{job['op']}.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    proc = subprocess.run([NODE, str(DRIVER), str(BRR_JS), str(path)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def numpy_stream(seed: int, n_words: int, n_bits: int) -> np.ndarray:
    """The uniforms brr_runtime consumes for ``n_words`` words with ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(0, n_words, CHUNK):
        m = min(CHUNK, n_words - s)
        parts += [rng.random(m * n_bits), rng.random(m)]
    return np.concatenate(parts).astype("<f8")


def default_bundle() -> Path:
    from deniable.binary import DEFAULT_BINARY_FILE

    return Path(str(resources.files("deniable.binary") / "data" / DEFAULT_BINARY_FILE))


def small_bundle(tmp_path: Path, *, n_bits: int = 70, cased: bool = False, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)] + ["paris", "nasa", "café", "straße", "ǆungla", "éa"]
    if cased:
        words += ["Paris", "NASA", "iPhone"]
    bits = rng.random((len(words), n_bits)) < 0.5
    bits[1] = bits[0]  # an exact tie between two codes
    path = tmp_path / f"small-{n_bits}-{cased}.brr"
    BinaryEmbedding.from_bits(words, bits).save(path)
    return path


TRICKY = [
    "Hello, world! It's 9:30 — café\u0301 (x-17) NASA's iPhone…",
    "tab\there\nnew line\r\nCRLF \u00a0nbsp \u2003em \u3000ideographic \u200bzwsp \ufeffbom \x1cfs \x85nel",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flags 🇫🇷 ⓙ $100 +1 50% #tag @user a_b «quoted» ¿qué? ¡sí!",
    "日本語の文章、句読点。 中文，标点！ العربية، نص؟ עברית־מקף हिन्दी। ไทย๏",
    "ΟΔΟΣ Σίσυφος İstanbul ǅemal ǈ DŽ ß ẞ ﬁ Ⅻ ⅻ ℌ",
    "",
    "   ",
    "...",
]


def random_texts(n: int, seed: int) -> list[str]:
    """Random strings over code points from every block that matters for the tokenizer."""
    rng = np.random.default_rng(seed)
    pools = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x300, 0x370), range(0x2000, 0x2070), range(0x3000, 0x3040), range(0x1F300, 0x1F650), range(0xFE00, 0xFE70)]
    cps = np.concatenate([np.fromiter(p, dtype=np.int64) for p in pools] + [np.array([9, 10, 13, 0x1C, 0x85, 0xFEFF, 0x200D])])
    out = []
    for _ in range(n):
        k = int(rng.integers(0, 60))
        s = "".join(chr(c) for c in rng.choice(cps, size=k))
        out.append("".join(ch for ch in s if not 0xD800 <= ord(ch) <= 0xDFFF))
    return out


def test_embedded_separator_table_is_pythons():
    text = BRR_JS.read_text(encoding="utf-8")
    block = text[text.index(BEGIN) : text.index(END)]
    body = "".join(re.findall(r'"([^"]*)"', block))
    got = []
    for m in re.finditer(r"\\\\u\{([0-9a-f]+)\}(?:-\\\\u\{([0-9a-f]+)\})?", body):
        a = int(m.group(1), 16)
        got.append((a, int(m.group(2), 16) if m.group(2) else a))
    assert got == separator_ranges(), "regenerate: python -m deniable.web._tables src/deniable/web/static/brr.js"
    # the Python tokenizer's separators are exactly these (whitespace + punctuation)
    assert split_words("a\x1cb\x85c\ufeffd") == ["", "a", "\x1c", "b", "\x85", "c\ufeffd", ""]


@needs_node
def test_tokenizer_agrees_with_python(tmp_path):
    texts = TRICKY + random_texts(300, seed=1)
    assert node({"op": "split", "texts": texts}, tmp_path) == [split_words(t) for t in texts]


def _case_drift(tmp_path: Path) -> set[int]:
    """Code points whose case mapping differs between Python's Unicode version and Node's."""
    js = {cp: (lo, up) for cp, lo, up in node({"op": "casemap"}, tmp_path)}
    py = {}
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if c.lower() != c or c.upper() != c:
            py[cp] = (c.lower(), c.upper())
    return {cp for cp in js.keys() | py.keys() if js.get(cp) != py.get(cp)}


@pytest.fixture(scope="module")
def drift(tmp_path_factory) -> set[int]:
    return _case_drift(tmp_path_factory.mktemp("casemap"))


@needs_node
def test_case_mappings_differ_only_by_unicode_version_drift(drift):
    # Node's ICU may follow a newer Unicode than this Python (new case pairs such as U+019B);
    # a broken implementation would differ on thousands of code points (about 2,900 have a mapping)
    assert len(drift) < 400, sorted(drift)[:50]  # 110 between Unicode 14 (Python 3.11) and Node 20's ICU
    assert not drift & set(range(0x80)), "ASCII case mapping must agree"


@needs_node
def test_case_rules_agree_with_python(tmp_path, drift):
    words = ["NASA", "Paris", "I", "iPhone", "a", "ÉCOLE", "école", "Ǆemal", "ǅemal", "ß", "straße", "İstanbul", "ΟΔΟΣ", "Σ", "ﬁx", "Ⅻ", "x1", "1X", "Café\u0301", "ǈ", "ABC123"]
    words += [w for t in random_texts(100, seed=2) for w in split_words(t)[1::2]]
    words = [w for w in words if not any(ord(c) in drift for c in w)]
    assert len(words) > 300
    got = node({"op": "case", "words": words}, tmp_path)
    want = [[lookup_key(w, lower=True), lookup_key(w, lower=False), case_pattern(w), apply_case(w.lower(), "upper"), apply_case(w.lower(), "title")] for w in words]
    assert got == want


def _corpus(words: list[str], n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    oov = ["zzqx", "Jürgen", "x-17", "😀", "O'Neil"]
    texts = []
    for _ in range(n):
        k = int(rng.integers(1, 30))
        toks = []
        for _ in range(k):
            r = rng.random()
            w = str(rng.choice(words)) if r < 0.8 else str(rng.choice(oov))
            toks.append(w.upper() if r < 0.1 else w.title() if r < 0.25 else w)
        texts.append(" ".join(toks) + str(rng.choice([".", "!", "", " ,"])))
    return texts


def _same_output(bundle_path: Path, texts: list[str], epsilon: float, seed: int, tmp_path: Path) -> dict:
    b = load_bundle(bundle_path)
    n_words = sum(len(split_words(t)) // 2 for t in texts)
    stream = tmp_path / "stream.f64"
    numpy_stream(seed, n_words, b.n_bits).tofile(stream)
    got = node({"op": "privatize", "bundle": str(bundle_path), "texts": texts, "epsilon": epsilon, "stream": str(stream)}, tmp_path)
    assert got["texts"] == b.privatize(texts, epsilon, rng=seed)
    assert got["words"] == n_words
    return got


@needs_node
def test_same_output_as_python_on_the_shipped_bundle(tmp_path):
    path = default_bundle()
    words = load_bundle(path).words[:3000]
    texts = _corpus(words, 12, seed=3) + TRICKY
    for eps, seed in [(0.3, 0), (1.0, 5)]:
        got = _same_output(path, texts, eps, seed, tmp_path)
        assert 0 < got["changed"] < got["words"]


@needs_node
@pytest.mark.parametrize("n_bits,cased", [(70, False), (64, True), (130, False)])
def test_same_output_as_python_on_small_bundles_across_chunks(tmp_path, n_bits, cased):
    path = small_bundle(tmp_path, n_bits=n_bits, cased=cased)
    words = load_bundle(path).words
    texts = _corpus(words, 400, seed=4)  # > CHUNK words: several chunks
    got = _same_output(path, texts, 0.4, 11, tmp_path)
    assert got["words"] > CHUNK
    for text, seg in zip(got["texts"], got["segments"]):
        assert "".join(s["text"] for s in seg) == text


@needs_node
def test_bundle_validation_matches(tmp_path):
    good_path = small_bundle(tmp_path)
    good = good_path.read_bytes()
    cases = {
        "checksum": good[:-40] + bytes([good[-40] ^ 1]) + good[-39:],
        "truncated": good[:10],
        "magic": b"X" + good[1:],
        "version": good[:8] + (2).to_bytes(4, "little") + good[12:],
        "size": good[:-33] + good[-32:],
    }
    paths = [str(good_path)]
    for what, data in cases.items():
        p = tmp_path / f"bad-{what}.brr"
        p.write_bytes(data)
        paths.append(str(p))
    res = node({"op": "parse", "bundles": paths}, tmp_path)
    assert res[0] == {"ok": True, "words": 66, "nBits": 70, "uncased": True}
    for what, r in zip(cases, res[1:]):
        assert r["ok"] is False and r["name"] == "BundleError", (what, r)
        assert what[:5] in r["message"].lower() or what == "size", (what, r)
        with pytest.raises(ValueError):  # the Python runtime rejects the same files
            load_bundle(tmp_path / f"bad-{what}.brr")


@needs_node
def test_crypto_uniforms_are_uniform(tmp_path):
    u = np.asarray(node({"op": "uniforms", "n": 200_000}, tmp_path))
    assert u.min() >= 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-6
    assert len(np.unique(u)) == u.size  # 53-bit values: no repeats expected


def _gof(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square p-value of counts against probs, pooling outputs with expected count < 5."""
    n = counts.sum()
    exp = probs * n
    big = exp >= 5
    obs = np.append(counts[big], counts[~big].sum())
    e = np.append(exp[big], exp[~big].sum())
    keep = e > 0
    return float(stats.chisquare(obs[keep], e[keep]).pvalue)


@needs_node
@pytest.mark.parametrize("source", ["crypto", "numpy-stream"])
def test_output_distribution_matches_brr_exact_probabilities(tmp_path, source):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(24)]
    bits = rng.random((24, 10)) < 0.5
    path = tmp_path / "dist.brr"
    be = BinaryEmbedding.from_bits(words, bits)
    be.save(path)
    eps, n, wid = 0.6, 40_000, 3
    job = {"op": "draw", "bundle": str(path), "id": wid, "epsilon": eps, "n": n}
    if source == "numpy-stream":
        stream = tmp_path / "draw.f64"
        numpy_stream(7, n, 10).tofile(stream)
        job["stream"] = str(stream)
    counts = np.asarray(node(job, tmp_path), dtype=np.float64)
    exact = BRR(be, epsilon=eps).probabilities(wid)
    assert _gof(counts, exact) > 1e-6
    # control: the distribution at another epsilon must be rejected by the same test
    assert _gof(counts, BRR(be, epsilon=eps * 1.5).probabilities(wid)) < 1e-6


def test_python_unicode_version_is_recorded():
    assert f"Unicode {unicodedata.unidata_version}" in BRR_JS.read_text(encoding="utf-8"), (
        f"brr.js was generated for another Unicode version than this Python's ({sys.version.split()[0]}); "
        "regenerate: python -m deniable.web._tables src/deniable/web/static/brr.js"
    )
