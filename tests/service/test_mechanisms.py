"""Every registered mechanism through the service: listed with its parameters (read from the
registry), privatizing with its defaults, parameters checked by name; and what the catalog
derives from a constructor (settable, fixed, excluded) on mechanisms registered for the test."""

from __future__ import annotations

import inspect

import pytest

from deniable import available_mechanisms, get_mechanism
from deniable.mechanisms import registry
from deniable.mechanisms.madlib import Madlib
from deniable.service import MechanismPool, PoolError, ServiceConfig, mechanism_spec
from deniable.service.catalog import _json_types, _parameter_entries
from deniable.text.privatize import privatize_texts

from .conftest import WORDS

TEXTS = ["Meet me at the station at noon, qqsecret!", "We will go to the park tomorrow"]
NAMES = available_mechanisms()


@pytest.fixture(scope="module")
def listing(client) -> dict[str, dict]:
    r = client.get("/v1/mechanisms")
    assert r.status_code == 200, r.text
    return {m["name"]: m for m in r.json()["mechanisms"]}


def test_every_registered_mechanism_is_listed_and_served(listing):
    assert list(listing) == NAMES
    assert {n: m["reason"] for n, m in listing.items() if not m["served"]} == {}


@pytest.mark.parametrize("name", NAMES)
def test_parameters_come_from_the_constructor(listing, name):
    signature = registry.mechanism_parameters(name)
    listed = listing[name]["params"]
    assert [p["name"] for p in listed] == [n for n in signature if n in {p["name"] for p in listed}]  # constructor order
    for p in listed:
        assert p["default"] == signature[p["name"]].default
        assert p["type"] in ("number", "integer", "string", "boolean")
        assert p["settable"] == (p["type"] == "number" and p["name"] != "w")
    # parameters taking objects (indexes, callables, folders, word lists) are never listed
    assert not {"cache_dir", "sensitive", "metrics"} & {p["name"] for p in listed}
    assert listing[name]["description"] and "``" not in listing[name]["description"]


@pytest.mark.parametrize("name", NAMES)
def test_each_mechanism_privatizes_with_its_defaults(client, listing, vocab, name):
    grid = listing[name]["suggested_epsilons"]
    eps = grid[len(grid) // 2]  # a moderate epsilon for this mechanism
    r = client.post("/v1/privatize", json={"texts": TEXTS, "mechanism": name, "epsilon": eps, "seed": 11, "include": ["summary"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mechanism"] == name and body["epsilon"] == eps and body["params"] == {}
    assert body["guarantee"]["epsilon"] == eps and body["guarantee"]["statement"]
    vocabulary = vocab[1] if mechanism_spec(name).vocabulary == "binary" else vocab[0]
    assert body["texts"] == privatize_texts(get_mechanism(name, vocabulary, epsilon=eps), TEXTS, rng=11)  # the library's output
    assert body["summary"]["words"] == 15 and body["summary"]["unknown"] == 1
    for text in body["texts"]:
        assert "qqsecret" not in text.lower()
        assert {w.lower() for w in text.replace(",", " ").replace("!", " ").split()} <= set(WORDS)


@pytest.mark.parametrize("name", NAMES)
def test_settable_parameters_are_accepted_at_their_defaults(client, listing, name):
    settable = {p["name"]: p["default"] for p in listing[name]["params"] if p["settable"]}
    eps = listing[name]["suggested_epsilons"][0]
    r = client.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": name, "epsilon": eps, "params": settable})
    assert r.status_code == 200, r.text
    assert r.json()["params"] == {k: v for k, v in settable.items() if v is not None}


@pytest.mark.parametrize("name", NAMES)
def test_an_unknown_parameter_is_a_422_naming_it_and_the_valid_ones(client, listing, name):
    r = client.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": name, "epsilon": 1.0, "params": {"strength": 0.5}})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_parameters" and "'strength'" in err["message"]
    settable = [p["name"] for p in listing[name]["params"] if p["settable"]]
    assert err["message"].endswith(f"valid parameters of {name}: {', '.join(settable) or 'none'}")
    fixed = next((p for p in listing[name]["params"] if not p["settable"]), None)
    if fixed is not None:  # a listed parameter the server keeps at its default
        r = client.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": name, "epsilon": 1.0, "params": {fixed["name"]: fixed["default"]}})
        assert r.status_code == 422 and f"{fixed['name']} is fixed at {fixed['default']!r}" in r.json()["error"]["message"]


def test_the_pool_refuses_what_the_listing_refuses(vocab):
    pool = MechanismPool(*vocab)
    with pytest.raises(PoolError, match="valid parameters of tem: beta, gamma"):
        pool.get("tem", {"precomputed_neighbors": 4}, epsilon=1.0)
    with pytest.raises(PoolError, match="finite number or null"):
        pool.get("tem", {"gamma": float("nan")}, epsilon=1.0)
    assert pool.builds == 0


# -- the catalog on mechanisms registered for the test ---------------------------------------------


class _Scaled(Madlib):
    """Madlib with the noise scaled (a mechanism registered only for these tests).

    Parameters
    ----------
    scale : float
        Noise multiplier in (0, 1] (smaller: less noise).
    rounds, label
        Not request parameters.
    """

    name = "scaled"

    def __init__(self, embedding, *, epsilon: float, scale: float = 1.0, rounds: int = 2, label: str = "x", index="exact") -> None:
        if not 0 < scale <= 1:
            raise ValueError(f"scale must be in (0, 1], got {scale!r}")
        super().__init__(embedding, epsilon=epsilon / scale, index=index)


class _NeedsCorpus(Madlib):
    """A mechanism that cannot be built without a corpus."""

    def __init__(self, embedding, *, epsilon: float, corpus: list[str]) -> None:
        super().__init__(embedding, epsilon=epsilon)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, "zz_scaled", _Scaled)
    monkeypatch.setitem(registry._REGISTRY, "zz_needs_corpus", _NeedsCorpus)


def test_a_newly_registered_mechanism_is_served_with_its_parameters(registered, make_client):
    spec = mechanism_spec("zz_scaled")
    assert [(p.name, p.type, p.default, p.settable) for p in spec.params] == [("scale", "number", 1.0, True), ("rounds", "integer", 2, False), ("label", "string", "x", False)]
    assert spec.param("scale").description == "Noise multiplier in (0, 1] (smaller: less noise)."
    assert spec.shared_index == "exact" and spec.vocabulary == "embedding" and spec.excluded is None
    c = make_client()
    listed = {m["name"]: m for m in c.get("/v1/mechanisms").json()["mechanisms"]}
    assert listed["zz_scaled"]["served"] and [p["name"] for p in listed["zz_scaled"]["params"] if p["settable"]] == ["scale"]
    r = c.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "zz_scaled", "epsilon": 2.0, "params": {"scale": 0.5}, "seed": 1})
    assert r.status_code == 200 and r.json()["params"] == {"scale": 0.5}
    r = c.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "zz_scaled", "epsilon": 2.0, "params": {"scale": 2.0}})
    assert r.status_code == 422 and "scale must be in (0, 1]" in r.json()["error"]["message"]  # the constructor's own check


def test_a_mechanism_needing_what_a_request_cannot_supply_is_listed_with_the_reason(registered, make_client):
    assert "corpus" in mechanism_spec("zz_needs_corpus").excluded
    c = make_client()
    listed = {m["name"]: m for m in c.get("/v1/mechanisms").json()["mechanisms"]}
    entry = listed["zz_needs_corpus"]
    assert not entry["served"] and "corpus" in entry["reason"] and not entry["targets"]
    r = c.post("/v1/privatize", json={"texts": ["the cat"], "mechanism": "zz_needs_corpus", "epsilon": 2.0})
    assert r.status_code == 422  # not one of the served names
    assert "zz_needs_corpus" not in c.app.state.pool.names


def test_serving_nothing_is_refused(registered, vocab):
    from deniable.service import create_app

    with pytest.raises(ValueError, match="corpus"):
        create_app(ServiceConfig(mechanisms=("zz_needs_corpus",)), pool=MechanismPool(*vocab, mechanisms=("zz_needs_corpus",)))


@pytest.mark.parametrize(
    "annotation,expected",
    [("float", ("number",)), ("float | None", ("number", "null")), ("Optional[int]", ("integer", "null")), (float, ("number",)),
     (int | None, ("integer", "null")), ("str | SearchIndex", None), ("Any", None), ("Sequence[str] | None", None), (inspect.Parameter.empty, None)],
)
def test_json_types_of_annotations(annotation, expected):
    assert _json_types(annotation) == expected


def test_parameter_sections_are_read_as_numpydoc():
    entries = _parameter_entries(_Scaled.__doc__)
    assert entries == [(["scale"], "Noise multiplier in (0, 1] (smaller: less noise)."), (["rounds", "label"], "Not request parameters.")]
    assert _parameter_entries("No sections here.") == []
