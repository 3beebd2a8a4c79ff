"""`deniable privatize` end to end: formats, exit codes, one-line errors, atomic output."""

import csv
import gzip
import json
import re

import pytest
from click.testing import CliRunner

from deniable import load_embedding
from deniable.cli.main import cli
from deniable.text import words_of
from deniable.text.tokenize import vocabulary_keys

VOCAB = set(load_embedding().words)


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def all_in_vocab(text: str) -> bool:
    return all(w.lower() in VOCAB for w in words_of(text))


def test_version_and_help():
    r = run("--version")
    assert r.exit_code == 0 and r.output.startswith("deniable ")
    r = run("privatize", "--help")
    assert r.exit_code == 0 and "--epsilon" in r.output and "--oov" in r.output


def test_txt_roundtrip_reproducible(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("Hello world, this is a test.\n\nSecond line: NASA in Paris!\n", encoding="utf-8")
    out1, out2 = tmp_path / "a.txt", tmp_path / "b.txt"
    for out in (out1, out2):
        r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "5", "--seed", "3")
        assert r.exit_code == 0, r.output
    assert out1.read_text() == out2.read_text()
    lines = out1.read_text().split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0].endswith(".") and lines[2].endswith("!")
    assert all_in_vocab(out1.read_text())


def test_stdin_to_stdout():
    r = run("privatize", "-", "-m", "mahalanobis", "-e", "10", "--param", "lam=0.5", "--seed", "0", input="the cat sat\n")
    assert r.exit_code == 0
    assert len(r.stdout.split()) == 3 and all_in_vocab(r.stdout)


def test_jsonl_column(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "body": "my phone number is secret"}) + "\n\n" + json.dumps({"id": 2, "body": "hi"}) + "\n")
    out = tmp_path / "out.jsonl"
    r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "5", "--column", "body", "--seed", "1")
    assert r.exit_code == 0, r.output
    lines = out.read_text().split("\n")
    recs = [json.loads(x) for x in lines if x.strip()]
    assert [x["id"] for x in recs] == [1, 2] and lines[1] == ""
    assert len(recs[0]["body"].split()) == 5 and all_in_vocab(recs[0]["body"])


def test_jsonl_missing_field_is_data_error(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "ok"}\n{"body": "x"}\n')
    r = run("privatize", str(src), "-m", "madlib", "-e", "5")
    assert r.exit_code == 1
    assert re.search(r"in\.jsonl:2: field 'text' is missing", r.output)


def test_real_csv_gz_end_to_end(tmp_path, shared_data):
    """The SMS Spam Collection (real messages): every text privatized, labels and rows kept."""
    src = shared_data / "classification" / "sms_spam_collection.csv.gz"
    out = tmp_path / "sms.private.csv.gz"
    r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "10", "--embedding-limit", "3000", "--seed", "0", "--report")
    assert r.exit_code == 0, r.output
    with gzip.open(src, "rt", encoding="utf-8", newline="") as f:
        before = list(csv.DictReader(f))
    with gzip.open(out, "rt", encoding="utf-8", newline="") as f:
        after = list(csv.DictReader(f))
    assert len(after) == len(before) == 5574
    assert [r["label"] for r in after] == [r["label"] for r in before]
    vocab = set(load_embedding(limit=3000).words)
    for a, b in zip(before, after):
        assert len(words_of(a["text"])) == len(words_of(b["text"]))
        # a clitic is written back as such ("'s") from its vocabulary letters ("s")
        assert all(any(k in vocab for k in keys) for keys in vocabulary_keys(words_of(b["text"]), lower=True))
    err = " ".join(r.stderr.split())  # long lines continue on indented lines
    assert "out of the vocabulary" in err
    assert "other fields copied unchanged: label" in err


def test_several_inputs_into_folder(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one two\n")
    b.write_text("three\n")
    outdir = tmp_path / "out"
    outdir.mkdir()
    r = run("privatize", str(a), str(b), "-o", str(outdir), "-m", "madlib", "-e", "5")
    assert r.exit_code == 0
    assert len((outdir / "a.txt").read_text().split()) == 2 and len((outdir / "b.txt").read_text().split()) == 1
    r = run("privatize", str(a), str(b), "-o", str(tmp_path / "nofolder"), "-m", "madlib", "-e", "5")
    assert r.exit_code == 2


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", r"in\.txt: input is empty"),
        (b"fine\nbad \x00\x01\x02 bytes\n", r"in\.txt:2: binary data"),
        (b"ok\nok\ncaf\xe9\n", r"in\.txt:3: invalid UTF-8"),
    ],
)
def test_bad_input_is_exit_1_with_one_line(tmp_path, content, message):
    src = tmp_path / "in.txt"
    src.write_bytes(content)
    r = run("privatize", str(src), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0])


@pytest.mark.parametrize(
    "args,message",
    [
        (["-m", "madlib", "-e", "0"], "epsilon must be a finite number > 0"),
        (["-m", "madlib", "-e", "-2"], "epsilon must be a finite number > 0"),
        (["-m", "madlib", "-e", "nan"], "epsilon must be a finite number > 0"),
        (["-m", "laplace", "-e", "1"], "unknown mechanism 'laplace'"),
        (["-m", "mahalanobis", "-e", "1", "--param", "lam=2"], "lam must be in"),
        (["-m", "madlib", "-e", "1", "--param", "nonsense"], "expected KEY=VALUE"),
        (["-m", "madlib", "-e", "1", "--param", "lamda=0.5"], "unknown parameter(s) lamda for madlib; known: index, batch_size"),
        (["-m", "madlib", "-e", "1e-300"], "too small"),
        (["-m", "madlib"], "give -e/--epsilon EPS (privacy parameter > 0) or --max-nw P"),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    r = run("privatize", str(src), *args)
    assert r.exit_code == 2
    assert message in r.output


def test_nan_embedding_is_data_error(tmp_path):
    emb = tmp_path / "emb.txt"
    emb.write_text("a 1 2\nb nan 3\n")
    src = tmp_path / "in.txt"
    src.write_text("a b\n")
    r = run("privatize", str(src), "-m", "madlib", "-e", "1", "--embedding", str(emb))
    assert r.exit_code == 1 and re.search(r"emb\.txt:2: non-finite", r.output)


def test_failure_leaves_no_partial_output_and_keeps_existing(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"good line\n" * 10 + b"bad \xff\n")
    out = tmp_path / "out.txt"
    r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1 and not out.exists()
    out.write_text("previous result\n")
    r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1 and out.read_text() == "previous result\n"
    assert not list(tmp_path.glob(".out.txt.*"))  # temporary file removed


def test_in_place_output_never_loses_input(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"alpha beta\n\xff\n")
    r = run("privatize", str(src), "-o", str(src), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1 and src.read_bytes() == b"alpha beta\n\xff\n"
    src.write_text("alpha beta\n")
    r = run("privatize", str(src), "-o", str(src), "-m", "madlib", "-e", "1")
    assert r.exit_code == 0 and len(src.read_text().split()) == 2


def test_oov_keep_warns(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("the qzxqzxq\n")
    r = run("privatize", str(src), "-m", "madlib", "-e", "1e6", "--oov", "keep")
    assert r.exit_code == 0 and "qzxqzxq" in r.stdout
    assert "without privacy" in r.stderr
    r = run("privatize", str(src), "-m", "madlib", "-e", "1e6")
    assert "qzxqzxq" not in r.stdout


def test_csv_without_column(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("a,b\n1,2\n")
    r = run("privatize", str(src), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1 and "no column 'text'" in r.output


def test_bom_is_not_part_of_the_first_word(tmp_path):
    src = tmp_path / "in.csv"
    src.write_bytes(b"\xef\xbb\xbftext,id\nthe cat,1\n")
    r = run("privatize", str(src), "-m", "madlib", "-e", "1e6", "--seed", "0")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["text,id", "the cat,1"]
    assert "copied unchanged: id" in r.stderr


def test_case_option(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("The CAT\n")
    r = run("privatize", str(src), "-m", "madlib", "-e", "1e6", "--case", "lower")
    assert r.stdout == "the cat\n"


def test_unterminated_csv_quote_is_data_error(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text('id,text\n1,"unterminated\n')
    r = run("privatize", str(src), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1 and "invalid CSV" in r.output


def test_brr_bundle_as_embedding(tmp_path):
    bundle = tmp_path / "v.brr"
    assert run("export", "brr", "-o", str(bundle)).exit_code == 0
    src = tmp_path / "in.txt"
    src.write_text("the cat sat\n")
    r = run("privatize", str(src), "-m", "brr", "-e", "2", "--embedding", str(bundle), "--seed", "0")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.split()) == 3 and all_in_vocab(r.stdout)
    r = run("privatize", str(src), "-m", "madlib", "-e", "2", "--embedding", str(bundle))
    assert r.exit_code == 2 and "works only with -m brr" in r.output


def test_stray_errors_and_warnings_are_one_line(tmp_path, capfd):
    """Through the real entry point: a warning is one 'warning:' line, an error one 'Error:' line."""
    import subprocess
    import sys

    emb = tmp_path / "e.txt"
    emb.write_text("a 1 2\nb 3 4\na 5 6\n")  # duplicate word -> DeniableWarning
    src = tmp_path / "in.txt"
    src.write_text("a b\n")
    exe = [sys.executable, "-c", "from deniable.cli.main import main; main()"]
    p = subprocess.run(exe + ["privatize", str(src), "-m", "madlib", "-e", "1", "--embedding", str(emb)], capture_output=True, text=True)
    assert p.returncode == 0
    assert p.stderr.startswith("warning: ") and "duplicate" in p.stderr and "Traceback" not in p.stderr
    # one warning line, then the run summary
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("madlib epsilon=1: 2 words"), lines


@pytest.mark.skipif(__import__("importlib").util.find_spec("numba") is None, reason="needs numba (the compiled loops)")
@pytest.mark.parametrize("to_file", [True, False])
def test_the_entry_point_skips_the_teardown_after_the_compiled_loops(tmp_path, to_file):
    """After the compiled loops ran, the console entry point ends the process without the
    interpreter's tear-down (``os._exit``, here wrapped to say so), once the command is done:
    exit handlers have run, the output (a file, or standard output) is complete and the exit
    status is the command's; an error while the loops load in the background still exits 1
    with its one line."""
    import subprocess
    import sys

    src = tmp_path / "in.txt"
    src.write_text("The cat sat on the mat.\n" * 400, encoding="utf-8")
    out = tmp_path / "out.txt"
    entry = (
        "import atexit, os, sys\n"
        "real = os._exit\n"
        "os._exit = lambda code: (print(f'_exit {code}', file=sys.stderr, flush=True), real(code))\n"
        "atexit.register(lambda: print('exit handler', file=sys.stderr, flush=True))\n"
        "from deniable.cli.main import main\n"
        "main()\n"
    )
    args = ["privatize", str(src), "-m", "custext", "-e", "3", "--seed", "1", "--embedding-limit", "2000", *(["-o", str(out)] if to_file else [])]
    env = {**__import__("os").environ, "DENIABLE_COMPILED": "1"}
    p = subprocess.run([sys.executable, "-c", entry, *args], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert lines[-2:] == ["exit handler", "_exit 0"], lines
    text = out.read_text(encoding="utf-8") if to_file else p.stdout
    assert text.count("\n") == 400 and len(text.split()) == 6 * 400
    # an error while the loops load in the background (any input counts as large here): one line, exit 1
    bad = tmp_path / "bad_embedding.txt"
    bad.write_text("cat 1 2\ndog 3\n", encoding="utf-8")
    large = entry.replace("from deniable.cli.main import main", "from deniable.text import _kernels\n_kernels.COMPILED_MIN_INPUT = 1\nfrom deniable.cli.main import main")
    p = subprocess.run([sys.executable, "-c", large, "privatize", str(src), "-m", "custext", "-e", "3", "--embedding", str(bad)], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and p.stderr.startswith("Error:") and "Traceback" not in p.stderr, p.stderr


# -- long records, exact JSONL copies, progress ------------------------------------


def _long_text(n_words: int, seed: int = 0) -> str:
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = load_embedding().words[:2000]  # the tests run with --limit 2000
    seps = [" ", " ", " ", ", ", ". ", " — ", "、", "\t", " (", ") ", "!"]
    words = rng.choice(vocab, n_words)
    cuts = rng.choice(seps, n_words)
    return "".join(f"{w}{s}" for w, s in zip(words.tolist(), cuts.tolist())) + "end"


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "csv"])
def test_long_record_in_pieces_gives_identical_output(tmp_path, monkeypatch, fmt):
    """A record far longer than a piece: reading and privatizing it in pieces writes the same
    output, for the same seed, as processing it whole; and no word is cut (at epsilon=1e6 Madlib
    returns each vocabulary word itself, so the output equals the input)."""
    import deniable.cli.privatize as cli_privatize

    text = _long_text(12_000)
    src = tmp_path / f"in.{fmt}"
    if fmt == "txt":
        src.write_text("short line\n" + text + "\nlast\n", encoding="utf-8")
    elif fmt == "jsonl":
        src.write_text(json.dumps({"id": 1, "text": "short"}) + "\n" + json.dumps({"text": text, "n": 2}, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        src.write_text("id,text\n1,short\n2," + '"' + text.replace('"', '""') + '"\n', encoding="utf-8")
    outputs = {}
    for piece in (4096, 10**9):
        monkeypatch.setattr(cli_privatize, "_PIECE_CHARS", piece)
        for eps in ("3", "1e6"):
            out = tmp_path / f"out-{piece}-{eps}.{fmt}"
            r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", eps, "--seed", "7", "--case", "lower", "--embedding-limit", "2000")
            assert r.exit_code == 0, r.output
            outputs[piece, eps] = out.read_text(encoding="utf-8")
    assert outputs[4096, "3"] == outputs[10**9, "3"]
    assert outputs[4096, "1e6"] == outputs[10**9, "1e6"]
    if fmt == "txt":
        assert outputs[4096, "1e6"] == src.read_text(encoding="utf-8")
    elif fmt == "jsonl":
        assert json.loads(outputs[4096, "1e6"].splitlines()[1])["text"] == text
    else:
        rows = list(csv.reader(outputs[4096, "1e6"].splitlines(keepends=True)))
        assert rows[0] == ["id", "text"] and rows[2][1] == text


@pytest.mark.slow
def test_fifty_megabyte_line_runs_in_bounded_memory(tmp_path):
    """Peak RSS (measured by the kernel, via getrusage in a wrapper process) of privatizing one
    50 MB line stays within 150 MB of the same command on a one-line input (it once took 3.36 GB)."""
    import subprocess
    import sys

    import numpy as np

    rng = np.random.default_rng(0)
    words = [f"wordnumber{i:04d}" for i in range(50)]
    emb = tmp_path / "emb.txt"
    emb.write_text("".join(w + " " + " ".join(f"{x:.3f}" for x in rng.random(4)) + "\n" for w in words))
    unit = " ".join(words) + ", "
    big = tmp_path / "big.txt"
    big.write_text(unit * (50_000_000 // len(unit)) + "\n")
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("wordnumber0001 x\n")
    wrapper = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    peak = {}
    for name in ("tiny", "big"):
        cmd = [sys.executable, "-c", "from deniable.cli.main import main; main()", "privatize", str(tmp_path / f"{name}.txt"), "-m", "madlib"]
        cmd += ["-e", "10", "--embedding", str(emb), "-o", str(tmp_path / f"{name}.out"), "--seed", "0"]
        r = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, check=True)
        peak[name] = int(r.stdout) / 1024  # MiB (Linux reports KiB)
    assert (tmp_path / "big.out").stat().st_size > 45_000_000
    assert peak["big"] - peak["tiny"] < 150, peak


def test_jsonl_other_fields_keep_their_exact_text(tmp_path):
    """Fields other than the column come out byte for byte: huge and precise numbers, escapes
    (a lone surrogate included), nesting, order and spacing (1e400 once became Infinity and
    \\udfff aborted)."""
    line = '{"id": 1e400,  "big":123456789012345678901234567890123, "f": 0.1000000000000000055511151231257827, "s": "\\udfff \\u00e9", "text": "the cat", "z": [1.50, {"a": -0.0}, null, true]}'
    src = tmp_path / "in.jsonl"
    src.write_text(line + "\n" + '{"text": "dog"}' + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "1e6", "--seed", "0")
    assert r.exit_code == 0, r.output
    got = out.read_text(encoding="utf-8").splitlines()
    assert got[0] == line and got[1] == '{"text": "dog"}'
    from decimal import Decimal

    parsed = json.loads(got[0], parse_float=Decimal)  # valid JSON, exact values
    assert parsed["id"] == Decimal("1e400") and parsed["s"] == "\udfff \u00e9"


@pytest.mark.parametrize(
    "line,message",
    [
        ('{"text": "a", "n": NaN}', r"in\.jsonl:2: invalid JSON: NaN is not valid JSON"),
        ('{"text": "a", "n": -Infinity}', r"in\.jsonl:2: invalid JSON: -Infinity is not valid JSON"),
        ('{"text": "a", "text": "b"}', r"in\.jsonl:2: field 'text' appears twice"),
        ('{"text": "a" "b"}', r"in\.jsonl:2: invalid JSON \(expecting ',' or '}' at column 14\)"),
        ('{"text": "a"} x', r"in\.jsonl:2: invalid JSON \(extra data"),
        ('{"text": 5}', r"in\.jsonl:2: field 'text' is a number, expected a string"),
        ('["text"]', r"in\.jsonl:2: expected a JSON object per line, got an array"),
        ('{"text": "\\ud800 x", "n": [' + "[" * 100000 + "]", r"in\.jsonl:2: invalid JSON"),
    ],
)
def test_jsonl_unrepresentable_input_is_one_line_with_file_and_line(tmp_path, line, message):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "ok"}\n' + line + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    r = run("privatize", str(src), "-o", str(out), "-m", "madlib", "-e", "1")
    assert r.exit_code == 1 and not out.exists()
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err


def test_jsonl_kept_lone_surrogate_is_escaped(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "the \\udfffx cat"}\n', encoding="utf-8")
    r = run("privatize", str(src), "-m", "madlib", "-e", "1e6", "--oov", "keep", "--seed", "0")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["text"] == "the \udfffx cat" and "\\udfff" in r.stdout


def test_progress_counts_records_from_the_first_batch(tmp_path):
    """The bar moves while a small file is processed (a 152 kB file once sat at 0 %): it is
    refreshed after every batch, the first ones a few KiB, and shows records and elapsed time."""
    src = tmp_path / "in.txt"
    src.write_text("the cat sat on the mat with a hat\n" * 4000)  # 136 kB
    r = run("privatize", str(src), "-o", str(tmp_path / "out.txt"), "-m", "madlib", "-e", "10", "--seed", "0", "--progress", "--embedding-limit", "500")
    assert r.exit_code == 0, r.output
    counts = [int(m) for m in re.findall(r"(\d+) records", r.stderr)]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[0] < 500 and counts[-1] == 4000, counts
    assert re.search(r"\d\d:\d\d", r.stderr)  # elapsed time


@pytest.mark.parametrize(
    "args,needle",
    [
        (["privatize", "in.txt", "-m", "madlib"], "give -e/--epsilon EPS (privacy parameter > 0) or --max-nw P"),
        (["privatize", "in.txt", "-m", "madlib", "-e", "0"], "epsilon must be a finite number > 0"),
        (["privatize", "-m", "madlib", "-e", "1"], "Missing argument 'INPUTS...'"),
        (["privatise"], "No such command 'privatise'"),
    ],
)
def test_usage_errors_are_one_line_through_the_real_entry_point(tmp_path, args, needle):
    """Exit 2 and a single 'Error: ... (see '... --help')' line, not click's usage banner."""
    import subprocess
    import sys

    (tmp_path / "in.txt").write_text("hello\n")
    p = subprocess.run([sys.executable, "-c", "from deniable.cli.main import main; main()", *args], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0] and "--help')" in lines[0], p.stderr


def test_one_time_cache_is_announced_with_its_path(tmp_path, monkeypatch):
    """A cold TEM run says it builds a one-time table and where it caches it; a warm one is quiet
    (42 s were once spent silently building a 52 MB cache)."""
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "in.txt"
    src.write_text("the cat sat\n")
    args = ["privatize", str(src), "-m", "tem", "-e", "5", "--embedding-limit", "300", "--seed", "0"]
    r = run(*args)
    assert r.exit_code == 0, r.output
    notes = [x for x in r.stderr.splitlines() if x.startswith("note: building")]
    assert len(notes) == 1 and "once" in notes[0] and str(tmp_path / "cache") in notes[0], r.stderr
    cached = notes[0].split("cached at ")[1].split(";")[0]
    from pathlib import Path

    assert Path(cached).is_file()
    r = run(*args)
    assert r.exit_code == 0 and "building" not in r.stderr


def test_a_renamed_mechanism_name_still_works_and_says_so(tmp_path):
    """-m truncated_gumbel (renamed knn_tem) runs knn_tem with one warning line on stderr."""
    from click.testing import CliRunner

    from deniable.cli.main import cli

    src = tmp_path / "in.txt"
    src.write_text("the cat sat on the mat\n")
    res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(tmp_path / "out.txt"), "-m", "truncated_gumbel", "-e", "5", "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert "renamed 'knn_tem'" in res.stderr and "knn_tem epsilon=5" in res.stderr
    res = CliRunner().invoke(cli, ["privatize", str(src), "-m", "no_such_mechanism", "-e", "5"])
    assert res.exit_code == 2 and "unknown mechanism 'no_such_mechanism'" in res.output
