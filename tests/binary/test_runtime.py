"""The numpy-only runtime: same output as the library for the same seed; clear errors on bad bundles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deniable import brr_runtime
from deniable.binary import BinaryEmbedding
from deniable.mechanisms.brr import BRR

RUNTIME = Path(brr_runtime.__file__)


def _bundle(tmp_path, n=300, n_bits=24, seed=0, words=None):
    rng = np.random.default_rng(seed)
    words = words or [f"w{i}" for i in range(n)]
    be = BinaryEmbedding.from_bits(words, rng.random((len(words), n_bits)) < 0.5)
    path = be.save(tmp_path / "b.brr")
    return be, path


def test_runtime_imports_only_numpy_and_stdlib():
    tree = ast.parse(RUNTIME.read_text())
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in the runtime"
            mods.add(node.module.split(".")[0])
    allowed = {"numpy", "__future__"} | set(sys.stdlib_module_names)
    assert mods <= allowed, mods - allowed
    assert "deniable" not in mods


@pytest.mark.parametrize("index", ["exact", "auto"])
def test_runtime_output_equals_library_for_same_seed(tmp_path, index):
    be, path = _bundle(tmp_path)
    bundle = brr_runtime.load_bundle(path)
    mech = BRR(BinaryEmbedding.load(path), epsilon=0.7, index=index)
    rng = np.random.default_rng(1)
    # more than one 4096-word chunk, with unknown words and case patterns
    vocab = be.words + ["unknownword", "W3", "W10"]
    texts = [" ".join(rng.choice(vocab, size=int(k))) + "." for k in rng.integers(1, 40, size=400)]
    assert sum(len(t.split()) for t in texts) > 4096
    lib = mech.privatize(texts, rng=42)
    run = bundle.privatize(texts, 0.7, rng=42)
    assert lib == run
    assert mech.privatize(texts[0], rng=5) == bundle.privatize(texts[0], 0.7, rng=5)
    ids = rng.integers(-1, 300, size=5000)
    assert np.array_equal(mech.sample_ids(ids, rng=9), bundle.sample_ids(ids, 0.7, rng=9))


def test_runtime_never_passes_oov_through(tmp_path):
    _, path = _bundle(tmp_path, words=["alpha", "beta", "gamma", "delta", "omega"])
    bundle = brr_runtime.load_bundle(path)
    out = bundle.privatize("secretname, Another-Secret beta", 1.0, rng=0)
    assert "secret" not in out.lower() and "another" not in out.lower()
    assert out.count(",") == 1 and out.count("-") == 1
    words = out.replace(",", " ").replace("-", " ").split()
    assert all(w.lower() in bundle.words for w in words)
    assert words[1][0].isupper() and words[2][:1].isupper() and words[2][1:].islower()


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d[:-1], "checksum|size"),
        (lambda d: d[:12], "truncated"),
        (lambda d: b"\x00" * 8 + d[8:], "magic"),
        (lambda d: d[:8] + b"\x09\x00\x00\x00" + d[12:], "version"),
        (lambda d: d[:200] + bytes([d[200] ^ 0x10]) + d[201:], "checksum"),
    ],
)
def test_runtime_rejects_corrupted_bundles(tmp_path, mutate, match):
    _, path = _bundle(tmp_path)
    bad = tmp_path / "bad.brr"
    bad.write_bytes(mutate(path.read_bytes()))
    with pytest.raises(brr_runtime.BundleError, match=match):
        brr_runtime.load_bundle(bad)


def test_runtime_rejects_inconsistent_header_with_valid_checksum(tmp_path):
    import hashlib
    import json
    import struct

    _, path = _bundle(tmp_path)
    data = path.read_bytes()
    hlen = struct.unpack_from("<I", data, 12)[0]
    header = json.loads(data[16 : 16 + hlen])
    header["n_words"] += 1
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    body = data[:8] + struct.pack("<II", 1, len(hb)) + hb + data[16 + hlen : -32]
    bad = tmp_path / "bad.brr"
    bad.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(brr_runtime.BundleError, match="size mismatch"):
        brr_runtime.load_bundle(bad)


def test_runtime_bad_epsilon(tmp_path):
    _, path = _bundle(tmp_path, n=5)
    with pytest.raises(ValueError, match="epsilon"):
        brr_runtime.load_bundle(path).privatize("w1", 0.0)


def _runtime_command(how: str, tmp_path: Path) -> list[str]:
    if how == "copied file":  # as deployed: the single file copied next to an app
        app = tmp_path / "app"
        app.mkdir()
        (app / "brr_runtime.py").write_text(RUNTIME.read_text())
        return [sys.executable, "-W", "error", str(app / "brr_runtime.py")]
    if how == "checkout":  # run in place: its folder is first on sys.path (a module there named
        # like a standard-library one, as _random.py was, would shadow it)
        return [sys.executable, "-W", "error", str(RUNTIME)]
    return [sys.executable, "-W", "error", "-m", "deniable.brr_runtime"]  # the installed package


@pytest.mark.parametrize("how", ["copied file", "checkout", "installed package"])
def test_runtime_entry_points(tmp_path, how):
    """The three documented ways to run the runtime (README, docs/mechanisms/brr.md): same output
    as the library, no warning (-W error turns runpy's RuntimeWarning into a failure), one-line
    errors with the documented exit codes."""
    _, path = _bundle(tmp_path, n=50)
    cmd = _runtime_command(how, tmp_path)
    r = subprocess.run([*cmd, str(path), "--epsilon", "2", "--seed", "3"], input="w1 w2, w3!\n", capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout == brr_runtime.load_bundle(path).privatize("w1 w2, w3!\n", 2.0, rng=3)
    bad = tmp_path / "bad.brr"
    bad.write_bytes(b"nonsense")
    r = subprocess.run([*cmd, str(bad), "--epsilon", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "truncated" in r.stderr and r.stderr.count("\n") == 1
    r = subprocess.run([*cmd, str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "--epsilon" in r.stderr and r.stderr.count("\n") == 1
    r = subprocess.run([*cmd, "--where"], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert Path(r.stdout.strip()).read_text() == RUNTIME.read_text()


def test_import_deniable_does_not_load_the_runtime():
    # `python -m deniable.brr_runtime` warns when importing the package already loaded the module
    code = "import sys, deniable; assert 'deniable.brr_runtime' not in sys.modules; deniable.BRR; assert 'deniable.brr_runtime' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("extra", "code", "needle"),
    [
        (["--epsilon", "0"], 2, "epsilon"),
        (["--epsilon", "nan"], 2, "epsilon"),
        (["--epsilon", "1", "--seed", "-1"], 2, "--seed"),
        (["--epsilon", "x"], 2, "invalid float"),  # argparse's own usage error
    ],
)
def test_runtime_main_bad_arguments_exit_2_one_line(tmp_path, capsys, extra, code, needle):
    _, path = _bundle(tmp_path, n=5)
    if extra[1] == "x":
        with pytest.raises(SystemExit) as info:
            brr_runtime._main([str(path), *extra])
        rc = info.value.code
    else:
        rc = brr_runtime._main([str(path), *extra])
    err = capsys.readouterr().err
    assert rc == code and needle in err and "Traceback" not in err
    if extra[1] != "x":
        assert err.startswith("error: ") and err.count("\n") == 1


def test_runtime_main_missing_bundle_exit_1(tmp_path, capsys):
    rc = brr_runtime._main([str(tmp_path / "none.brr"), "--epsilon", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("error: ") and "none.brr" in err and err.count("\n") == 1


def test_runtime_handles_clitics_like_the_library(tmp_path):
    """English clitics (mother's -> mother + 's, don't -> do + n't) are tokenized, looked up and
    written back exactly as the library does: same output for the same seed."""
    words = ["mother", "s", "do", "nt", "house", "ca", "d", "they", "re"] + [f"w{i}" for i in range(40)]
    be, path = _bundle(tmp_path, n_bits=8, words=words)
    bundle = brr_runtime.load_bundle(path)
    mech = BRR(BinaryEmbedding.load(path), epsilon=2.0)
    texts = ["My mother's house; I DON'T know, they\u2019re here", "can't x's's she'd've O'Brien"] * 50
    assert mech.privatize(texts, rng=3) == bundle.privatize(texts, 2.0, rng=3)
    out = " ".join(bundle.privatize(texts, 2.0, rng=3))
    assert "'w" not in out and "\u2019w" not in out  # a sampled word is never glued after an apostrophe
