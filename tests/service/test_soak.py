"""A short soak of a real ``deniable serve`` process on 127.0.0.1 (benchmarks/bench_service_soak.py):
every registered mechanism, concurrent requests, ~5 % malformed ones, each answer checked against its own
request, and the server's memory. The checker itself is tested on crafted answers first."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from deniable import available_mechanisms

from .conftest import WORDS, small_vocab

pytest.importorskip("httpx", reason="the soak client needs httpx")
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the soak reads the server's memory from /proc (Linux)")

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_service_soak.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_service_soak", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_request_ids_round_trip_through_the_layout(bench):
    for rid in [*range(600), 4095, 4096, 99_999, 262_143]:
        assert bench.decode_layout(bench.layout_of(rid)) == rid
    assert len({tuple(bench.layout_of(r)) for r in range(5000)}) == 5000
    assert bench.decode_layout([3, 3]) is None and bench.decode_layout([]) is None and bench.decode_layout([2]) is None


def _answer(spec, *, texts=None, include=None) -> str:
    """A correct answer to ``spec``, optionally with other texts or input-dependent fields."""
    body = json.loads(spec.body)
    outs = texts if texts is not None else [t.replace(bench_marker(spec.rid), "unk").replace(bench_marker(spec.rid).capitalize(), "Unk") for t in body["texts"]]
    out = {"texts": outs, "mechanism": spec.mechanism, "epsilon": spec.epsilon, "params": {}, "guarantee": {}}
    inc = set(spec.include if include is None else include)
    if "summary" in inc:
        out["summary"] = {"words": sum(spec.counts), "unknown": len(spec.counts), "changed": 0, "changed_fraction": 0.0}
        out["per_text"] = [{"words": c, "changed": 0} for c in spec.counts]
    if "segments" in inc:
        from deniable.text.tokenize import split_words

        out["segments"] = [[{"text": p, "word": bool(i % 2), "changed": False} for i, p in enumerate(split_words(t)) if p] for t in outs]
    return json.dumps(out)


def bench_marker(rid: int) -> str:
    return f"zqx{rid}q"


def test_the_checker_catches_mixups_leaks_and_unasked_fields(bench):
    mechs = [("madlib", 5.0), ("brr", 0.5)]
    specs = [bench.make_spec(r, seed=1, mechanisms=mechs, words=WORDS, malformed=0.0) for r in range(40)]
    for s in specs:
        assert s.malformed is None and bench.check_response(s, 200, _answer(s)) == []
    a, b = specs[9], specs[30]  # different layouts
    swapped = bench.check_response(a, 200, _answer(a, texts=json.loads(_answer(b))["texts"]))
    assert any("layout of request 30" in p for p in swapped)
    leaked = bench.check_response(a, 200, _answer(a, texts=json.loads(a.body)["texts"]))
    assert any("marker" in p for p in leaked)
    s = next(s for s in specs if not s.include)
    assert any("without being asked" in p for p in bench.check_response(s, 200, _answer(s, include=("summary",))))
    s = next(s for s in specs if "segments" in s.include)
    assert any("missing" in p for p in bench.check_response(s, 200, _answer(s, include=())))
    assert any("server error" in p for p in bench.check_response(a, 500, "{}"))
    assert any("expected 200" in p for p in bench.check_response(a, 422, '{"error": {}}'))
    for kind in bench.MALFORMED_KINDS:
        m = bench.make_spec(3, seed=1, mechanisms=mechs, words=WORDS, malformed=1.0, kind=kind)
        assert m.malformed == kind
        assert bench.check_response(m, 422, '{"error": {"status": 422, "message": "x"}}') == []
        assert bench.check_response(m, 200, _answer(specs[3])) != []  # a malformed request must not succeed


def test_short_soak_of_a_real_server(bench, tmp_path):
    emb, binary = small_vocab()
    vec = tmp_path / "small.txt"
    vec.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(emb.words, emb.vectors)), encoding="utf-8")
    bundle = tmp_path / "small.brr"
    binary.save(bundle)
    s = bench.soak(12.0, 8, warmup=3.0, embedding=vec, bundle=bundle, words=WORDS, build_timeout=120.0)
    assert s["mechanisms"] and {m.split("@")[0] for m in s["mechanisms"]} == set(available_mechanisms())  # every served mechanism
    assert s["server_errors"] == 0 and s["transport_errors"] == 0 and s["failed_checks"] == 0, s["failures"]
    assert s["ok"] >= 50 and s["ok"] == s["well_formed"] and s["malformed_4xx"] == s["malformed"] >= 1, s
    assert s["rss_growth"] is not None and s["rss_growth"] < 0.10, s
    assert s["passed"], s
