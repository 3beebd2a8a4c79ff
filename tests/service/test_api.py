"""The HTTP API: privatization, errors as JSON 4xx, limits, API key, shared mechanisms."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from deniable import available_mechanisms, get_mechanism
from deniable.brr_runtime import parse_bundle
from deniable.service import MechanismPool, ServiceConfig
from deniable.service.pool import supports_targets
from deniable.text.privatize import privatize_texts

from .conftest import WORDS

TEXTS = ["Meet me at the station at noon.", "We will go to the park, tomorrow!", "zzqsecret name xq-17 and the river"]


def _error(resp, status: int, code: str | None = None) -> dict:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    err = resp.json()["error"]
    assert err["status"] == status and err["message"]
    if code is not None:
        assert err["code"] == code, err
    return err


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_mechanisms_lists_offered_names_and_limits(client):
    r = client.get("/v1/mechanisms")
    assert r.status_code == 200
    body = r.json()
    assert [m["name"] for m in body["mechanisms"]] == available_mechanisms()
    assert all(m["served"] and m["reason"] is None for m in body["mechanisms"])
    assert body["default_mechanism"] == "madlib"
    assert body["limits"]["max_texts"] == ServiceConfig().max_texts
    assert body["privacy_targets"] == supports_targets()
    params = {m["name"]: {p["name"]: p for p in m["params"]} for m in body["mechanisms"]}
    assert params["mahalanobis"]["lam"] == {
        "name": "lam", "type": "number", "nullable": False, "default": 0.5, "settable": True,
        "description": "Regularization λ ∈ [0, 1]; 0 gives Madlib, 1 the plain Mahalanobis norm.",
    }
    assert [n for n, p in params["mahalanobis"].items() if p["settable"]] == ["lam"]
    assert not params["tem"]["precomputed_neighbors"]["settable"] and params["tem"]["precomputed_neighbors"]["default"] == 128


@pytest.mark.parametrize("mechanism,epsilon", [("madlib", 5.0), ("mahalanobis", 5.0), ("tem", 3.0), ("brr", 0.5)])
def test_privatize_matches_the_library_for_the_same_seed(client, vocab, mechanism, epsilon):
    r = client.post("/v1/privatize", json={"texts": TEXTS, "mechanism": mechanism, "epsilon": epsilon, "seed": 7, "include": ["summary"]})
    assert r.status_code == 200, r.text
    body = r.json()
    mech = get_mechanism(mechanism, vocab[1] if mechanism == "brr" else vocab[0], epsilon=epsilon)
    assert body["texts"] == privatize_texts(mech, TEXTS, rng=7)
    assert body["epsilon"] == epsilon and body["mechanism"] == mechanism
    assert body["guarantee"]["epsilon"] == epsilon and body["guarantee"]["metric"]
    s = body["summary"]
    assert s["words"] == sum(t["words"] for t in body["per_text"]) == 21
    assert s["unknown"] == 5  # zzqsecret name xq 17 and
    assert 0 <= s["changed"] <= s["words"] and s["changed_fraction"] == pytest.approx(s["changed"] / s["words"])
    assert "segments" not in body


def test_out_of_vocabulary_words_are_never_copied(client):
    for oov in ("unk", "drop"):
        r = client.post("/v1/privatize", json={"texts": TEXTS[2:] * 20, "epsilon": 50.0, "oov": oov, "details": True})
        assert r.status_code == 200
        for t in r.json()["texts"]:
            for secret in ("zzqsecret", "name", "xq", "17", "and"):
                assert secret not in t
            assert set(w.lower() for w in t.replace("-", " ").split()) <= set(WORDS)


def test_oov_keep_is_refused(client):
    _error(client.post("/v1/privatize", json={"texts": ["a"], "epsilon": 1.0, "oov": "keep"}), 422, "invalid_request")


def test_segments_rebuild_the_output_and_mark_changes(client):
    r = client.post("/v1/privatize", json={"texts": TEXTS + ["", "  ...  "], "mechanism": "madlib", "epsilon": 8.0, "seed": 1, "include": ["summary", "segments"]})
    body = r.json()
    for text, segs, per in zip(body["texts"], body["segments"], body["per_text"]):
        assert "".join(s["text"] for s in segs) == text
        assert sum(s["word"] for s in segs) == per["words"]
        assert sum(s["changed"] for s in segs) == per["changed"]
        assert not any(s["changed"] for s in segs if not s["word"])
    assert body["texts"][3:] == ["", "  ...  "]
    # very large epsilon: nothing in the vocabulary changes, every unknown word does
    r = client.post("/v1/privatize", json={"texts": [TEXTS[2]], "epsilon": 9000.0, "seed": 1, "include": ["segments", "summary"]}).json()
    changed = [s["text"] for s in r["segments"][0] if s["changed"]]
    assert len(changed) == 5 and r["summary"]["changed"] == 5


INPUT_DEPENDENT = {"summary", "per_text", "segments"}


def test_by_default_only_the_texts_and_the_guarantee_leave(client):
    body = {"texts": TEXTS, "mechanism": "madlib", "epsilon": 9000.0, "seed": 3}
    r = client.post("/v1/privatize", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"texts", "mechanism", "epsilon", "params", "guarantee"}
    assert set(out["guarantee"]) == {"epsilon", "metric", "domain", "statement"}
    # the same output as with the summary asked for: opting in adds fields and changes nothing else
    full = client.post("/v1/privatize", json={**body, "include": ["summary", "segments"]}).json()
    assert set(full) >= INPUT_DEPENDENT and {k: v for k, v in full.items() if k not in INPUT_DEPENDENT} == out


@pytest.mark.parametrize(
    "extra,fields",
    [
        ({"include": []}, set()),
        ({"include": ["summary"]}, {"summary", "per_text"}),
        ({"include": ["segments"]}, {"segments"}),
        ({"include": ["segments", "summary", "summary"]}, INPUT_DEPENDENT),
        ({"details": True}, {"segments"}),
        ({"details": True, "include": ["summary"]}, INPUT_DEPENDENT),
        ({"details": False}, set()),
    ],
)
def test_input_dependent_fields_only_when_asked(client, extra, fields):
    r = client.post("/v1/privatize", json={"texts": TEXTS, "epsilon": 5.0, **extra})
    assert r.status_code == 200, r.text
    assert set(r.json()) & INPUT_DEPENDENT == fields


@pytest.mark.parametrize(
    "include,fragment",
    [(["sumary"], "'sumary'"), (["summary", "details"], "'details'"), ("summary", "valid list"), ([1], "include"), (["summary"] * 5, "at most")],
)
def test_unknown_include_values_are_refused_by_name(client, include, fragment):
    err = _error(client.post("/v1/privatize", json={"texts": ["the cat"], "epsilon": 1.0, "include": include}), 422, "invalid_request")
    assert err["message"].startswith("include") and fragment in err["message"], err
    if isinstance(include, list) and include and isinstance(include[0], str) and len(include) < 5:
        assert "'summary' or 'segments'" in err["message"]  # names the allowed values


class _NoSharedState:
    """A mechanism whose ``last_privatization`` cannot be read (writes are ignored): the service
    must count from its own call, never from state on the shared mechanism."""

    def __init__(self, mech):
        object.__setattr__(self, "_mech", mech)

    def __getattr__(self, name):
        if name == "last_privatization":
            raise AssertionError("the service read mechanism.last_privatization")
        return getattr(self._mech, name)

    def __setattr__(self, name, value):
        if name != "last_privatization":
            setattr(self._mech, name, value)


def test_summary_comes_from_the_call_not_the_shared_mechanism(make_client, monkeypatch):
    c = make_client()
    pool = c.app.state.pool
    get = pool.get
    monkeypatch.setattr(pool, "get", lambda *a, **k: _NoSharedState(get(*a, **k)))
    with pytest.raises(AssertionError):  # control: the wrapper does catch a read
        _ = pool.get("madlib", {}, epsilon=9000.0).last_privatization
    # concurrent requests on one shared mechanism, each with its own number of words and unknown words
    from concurrent.futures import ThreadPoolExecutor

    def ask(n: int) -> tuple[int, dict]:
        text = " ".join(["the cat"] * n + ["qqunknown"] * (n % 5))
        r = c.post("/v1/privatize", json={"texts": [text], "epsilon": 9000.0, "include": ["summary"]})
        assert r.status_code == 200, r.text
        return n, r.json()

    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(ask, range(1, 41)))
    for n, body in results:
        assert body["summary"]["words"] == 2 * n + n % 5 and body["summary"]["unknown"] == n % 5
        assert body["summary"]["changed"] == n % 5  # at this epsilon only the unknown words change
        assert body["per_text"] == [{"words": 2 * n + n % 5, "changed": n % 5}]


def test_unseeded_requests_differ(client):
    body = {"texts": ["the cat and the dog walk to the park " * 5], "mechanism": "brr", "epsilon": 0.2}
    outs = {client.post("/v1/privatize", json=body).json()["texts"][0] for _ in range(4)}
    assert len(outs) > 1


@pytest.mark.parametrize(
    "body,where",
    [
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "laplace"}, "mechanism"),
        ({"texts": ["a"], "epsilon": 0.0}, "epsilon"),
        ({"texts": ["a"], "epsilon": -1.0}, "epsilon"),
        ({"texts": ["a"], "epsilon": 1e9}, "epsilon"),
        ({"texts": ["a"], "epsilon": "1"}, "epsilon"),
        ({"texts": ["a"]}, "epsilon"),
        ({"texts": ["a"], "epsilon": 1.0, "max_n_w": 0.5}, "epsilon"),
        ({"texts": ["a"], "epsilon": 1.0, "max_n_w": 1.5}, "max_n_w"),
        ({"texts": [1, 2], "epsilon": 1.0}, "texts"),
        ({"texts": "a single string", "epsilon": 1.0}, "texts"),
        ({"texts": [None], "epsilon": 1.0}, "texts"),
        ({"texts": [], "epsilon": 1.0}, "texts"),
        ({"epsilon": 1.0}, "texts"),
        ({"texts": ["a"], "epsilon": 1.0, "seed": -3}, "seed"),
        ({"texts": ["a"], "epsilon": 1.0, "seed": 2**70}, "seed"),
        ({"texts": ["a"], "epsilon": 1.0, "unknown_field": 1}, "unknown_field"),
        ({"texts": ["a"], "epsilon": 1.0, "params": {"lam": [1]}}, "params"),
        ({"texts": ["a"], "epsilon": 1.0, "params": "lam=0.5"}, "params"),
        ([1, 2, 3], "body"),
        ("text", "body"),
    ],
)
def test_bad_input_is_a_json_422_naming_the_field(client, body, where):
    err = _error(client.post("/v1/privatize", json=body), 422, "invalid_request")
    assert where in err["message"] or any(where in d["loc"] for d in err["details"]), err


def test_nan_and_malformed_json(client):
    for raw in ('{"texts": ["a"], "epsilon": NaN}', '{"texts": ["a"], "epsilon": Infinity}', '{"texts": ["a"', "", "\xff\xfe"):
        r = client.post("/v1/privatize", content=raw.encode("latin-1"), headers={"content-type": "application/json"})
        _error(r, 400 if r.status_code == 400 else 422)


def test_lone_surrogate_is_refused(client):
    raw = b'{"texts": ["a \\ud800 b"], "epsilon": 1.0}'
    r = client.post("/v1/privatize", content=raw, headers={"content-type": "application/json"})
    assert r.status_code in (200, 422), r.text
    if r.status_code == 200:  # the parser replaced it: the output must still be valid text
        r.json()


@pytest.mark.parametrize(
    "body,code,fragment",
    [
        ({"texts": ["a"], "epsilon": 1.0, "params": {"index": 1}}, "invalid_parameters", "index"),
        ({"texts": ["a"], "epsilon": 1.0, "params": {"batch_size": 10**9}}, "invalid_parameters", "batch_size is fixed at 8192"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "mahalanobis", "params": {"lam": 5.0}}, "invalid_parameters", "lam"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "mahalanobis", "params": {"lam": "0.5"}}, "invalid_parameters", "lam"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "tem", "params": {"beta": 2.0}}, "invalid_parameters", "beta"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "tem", "params": {"precomputed_neighbors": 4096}}, "invalid_parameters", "precomputed_neighbors is fixed at 128"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "tem", "params": {"cache_dir": "/tmp"}}, "invalid_parameters", "cache_dir"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "madlib", "params": {"lam": 0.5}}, "invalid_parameters", "lam"),
        ({"texts": ["a"], "epsilon": 1.0, "mechanism": "brr", "params": {"beta": 0.5}}, "invalid_parameters", "beta"),
    ],
)
def test_parameters_are_whitelisted_and_validated(client, body, code, fragment):
    err = _error(client.post("/v1/privatize", json=body), 422, code)
    assert fragment in err["message"]


def test_mahalanobis_lam_is_accepted(client):
    r = client.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "mahalanobis", "epsilon": 3.0, "params": {"lam": 0.2}, "seed": 0})
    assert r.status_code == 200 and r.json()["params"] == {"lam": 0.2}
    assert "lam=0.2" in r.json()["guarantee"]["metric"]


def test_a_default_value_shares_the_instance_built_without_it(make_client):
    c = make_client()
    pool = c.app.state.pool
    for params in ({}, {"lam": 0.5}, {"lam": 0.5}):
        r = c.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "mahalanobis", "epsilon": 3.0, "params": params})
        assert r.status_code == 200 and r.json()["params"] == params
    assert pool.builds == 1
    assert c.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "mahalanobis", "epsilon": 3.0, "params": {"lam": 0.25}}).status_code == 200
    assert pool.builds == 2  # another value: another instance


def test_privacy_target(client, make_client):
    # no calibration is shipped for this vocabulary: refused rather than minutes of work
    err = _error(client.post("/v1/privatize", json={"texts": ["the cat"], "max_n_w": 0.5}), 422, "target_unavailable")
    assert "epsilon" in err["message"]
    assert not any(m["targets"] for m in client.get("/v1/mechanisms").json()["mechanisms"])
    # the operator may allow computing it (once, then cached)
    c = make_client(compute_targets=True)
    r = c.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "brr", "max_n_w": 0.5})
    if supports_targets():
        assert r.status_code == 200, r.text
        assert r.json()["max_n_w"] == 0.5 and r.json()["epsilon"] > 0
        assert all(m["targets"] for m in c.get("/v1/mechanisms").json()["mechanisms"] if m["served"])
    else:
        _error(r, 422, "target_unavailable")


def test_batch_and_size_limits(make_client):
    c = make_client(max_texts=3, max_text_chars=50, max_total_chars=80, max_body_bytes=2000)
    ok = {"texts": ["the cat"] * 3, "epsilon": 1.0}
    assert c.post("/v1/privatize", json=ok).status_code == 200
    _error(c.post("/v1/privatize", json={"texts": ["a"] * 4, "epsilon": 1.0}), 422, "invalid_request")
    _error(c.post("/v1/privatize", json={"texts": ["a" * 51], "epsilon": 1.0}), 422, "invalid_request")
    err = _error(c.post("/v1/privatize", json={"texts": ["a" * 40, "b" * 41], "epsilon": 1.0}), 422, "invalid_request")
    assert "81 characters" in err["message"]
    _error(c.post("/v1/privatize", json={"texts": ["a" * 3000], "epsilon": 1.0}), 413, "body_too_large")

    def chunks():  # no Content-Length: the bytes are counted as they arrive
        yield b'{"texts": ["'
        for _ in range(50):
            yield b"a" * 100
        yield b'"], "epsilon": 1.0}'

    _error(c.post("/v1/privatize", content=chunks(), headers={"content-type": "application/json"}), 413, "body_too_large")
    spec = c.get("/openapi.json").json()
    req = spec["components"]["schemas"]["PrivatizeRequest"]["properties"]["texts"]
    assert req["maxItems"] == 3 and req["items"]["maxLength"] == 50


def test_api_key(make_client, monkeypatch):
    c = make_client(api_key="s3cret-key-123")
    body = {"texts": ["the cat"], "epsilon": 1.0}
    assert c.get("/healthz").status_code == 200
    for path in ("/v1/mechanisms", "/openapi.json", "/docs", "/v1/bundles/brr", "/v1/curves/brr"):
        _error(c.get(path), 401, "unauthorized")
        _error(c.get(path, headers={"X-API-Key": "wrong-key-456"}), 401, "unauthorized")
    _error(c.post("/v1/privatize", json=body), 401, "unauthorized")
    assert c.post("/v1/privatize", json=body, headers={"X-API-Key": "s3cret-key-123"}).status_code == 200
    assert c.post("/v1/privatize", json=body, headers={"Authorization": "Bearer s3cret-key-123"}).status_code == 200
    assert c.get("/openapi.json", headers={"X-API-Key": "s3cret-key-123"}).status_code == 200
    assert c.get("/").status_code == 200  # the static page holds no data; its API calls need the key


def test_unknown_route_and_method_are_json(client):
    _error(client.get("/v1/nothing"), 404, "not_found")
    _error(client.get("/v1/privatize"), 405, "method_not_allowed")
    _error(client.get("/v1/curves/laplace"), 422, "invalid_request")


def test_mechanisms_are_built_once_and_shared(vocab):
    pool = MechanismPool(vocab[0], vocab[1], max_cached=2)
    got: list = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        got.append(pool.get("madlib", {}, epsilon=3.0))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pool.builds == 1 and all(m is got[0] for m in got)
    pool.get("madlib", {}, epsilon=4.0)
    pool.get("madlib", {}, epsilon=3.0)  # recently used: kept
    pool.get("brr", {}, epsilon=1.0)  # evicts epsilon=4
    assert pool.builds == 3 and len(pool.cached_keys()) == 2
    assert pool.get("madlib", {}, epsilon=3.0) is got[0]
    pool.get("madlib", {}, epsilon=4.0)
    assert pool.builds == 4


def test_requests_share_the_pool(make_client):
    c = make_client()
    pool = c.app.state.pool
    for _ in range(3):
        assert c.post("/v1/privatize", json={"texts": ["the cat"], "epsilon": 2.0}).status_code == 200
    assert pool.builds == 1


def test_bundle_endpoint_serves_the_brr_codes(client, vocab):
    r = client.get("/v1/bundles/brr")
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    parsed = parse_bundle(r.content)
    assert parsed["words"] == WORDS
    assert np.array_equal(parsed["codes"], vocab[1].codes)


def test_curve_endpoint(client):
    r = client.get("/v1/curves/brr")
    assert r.status_code == 200, r.text
    c = r.json()
    assert len(c["epsilons"]) == len(c["median"]) == len(c["worst"]) >= 5
    assert all(0 <= m <= w <= 1 for m, w in zip(c["median"], c["worst"]))
    assert c["median"][-1] >= c["median"][0]  # more epsilon, more words kept
    assert c["source"]


def test_openapi_documents_the_routes(client):
    spec = client.get("/openapi.json").json()
    assert {"/v1/privatize", "/v1/mechanisms", "/healthz"} <= set(spec["paths"])
    responses = spec["paths"]["/v1/privatize"]["post"]["responses"]
    assert {"200", "413", "422"} <= set(responses)
    json.dumps(spec)


def test_every_epsilon_shares_the_search_index(vocab):
    pool = MechanismPool(vocab[0], vocab[1])
    for name in ("madlib", "mahalanobis", "brr"):
        a, b = pool.get(name, {}, epsilon=1.0), pool.get(name, {}, epsilon=2.0)
        assert a is not b and a.index is b.index
    assert pool.get("madlib", {}, epsilon=1.0).index is pool.get("mahalanobis", {}, epsilon=1.0).index


def test_shipped_calibration_drives_targets_and_curves_on_the_bundled_embedding():
    from deniable.service.curves import CurveCache

    pool = MechanismPool(mechanisms=("tem", "madlib"))
    cal = pool.shipped_calibration("tem")
    if cal is None:
        pytest.skip("this installation ships no TEM calibration")
    assert pool.targets_ready("tem") == supports_targets()
    assert pool.shipped_calibration("tem", {"beta": 0.5}) is None  # other parameters: not this calibration
    curve = CurveCache(pool).get("tem")
    assert curve["source"].startswith("shipped calibration")
    assert len(curve["epsilons"]) == len(curve["median"]) == len(curve["worst"]) >= 5
    assert all(m <= w + 1e-12 for m, w in zip(curve["median"], curve["worst"]))
    assert pool.builds == 0  # answered from package data, no mechanism built


def test_config_is_validated():
    for bad in ({"max_texts": 0}, {"max_concurrent": 0}, {"min_epsilon": 0.0}, {"min_epsilon": 2.0, "max_epsilon": 1.0}, {"api_key": "short"}, {"mechanisms": ()},
                {"mechanisms": ("madlib", "laplace")}, {"default_mechanism": "laplace"}):
        with pytest.raises(ValueError):
            ServiceConfig(**bad)
    assert ServiceConfig().max_concurrent >= 2
    assert ServiceConfig().mechanisms == tuple(available_mechanisms())  # default: every registered mechanism


def test_the_default_mechanism_falls_back_to_the_first_offered(make_client):
    c = make_client(mechanisms=("tem", "brr"))
    assert c.get("/v1/mechanisms").json()["default_mechanism"] == "tem"
    assert c.post("/v1/privatize", json={"texts": ["the cat"], "epsilon": 2.0}).json()["mechanism"] == "tem"
