"""Property tests of the API: generated requests never get a 500 and responses match the spec.

Schemathesis generates requests from the service's own OpenAPI spec (valid and invalid ones)
and checks every response: no server error, status code and body documented in the spec.
A hypothesis test adds arbitrary JSON bodies that the spec does not describe.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import small_vocab

schemathesis = pytest.importorskip("schemathesis", reason="the fuzz test needs schemathesis (test extra)")
from fastapi.testclient import TestClient  # noqa: E402

from deniable.service import MechanismPool, ServiceConfig, create_app  # noqa: E402

_emb, _bin = small_vocab()
# (a body limit above what 8 texts of 200 escaped characters can take: a request the spec rejects
# gets its 422, not a 413 for its size)
_config = ServiceConfig(max_texts=8, max_text_chars=200, max_total_chars=800, max_body_bytes=1 << 16, max_cached=8)
APP = create_app(_config, pool=MechanismPool(_emb, _bin, max_cached=8))
# the spec the service serves at /openapi.json, read without a request: schemathesis's own ASGI
# client leaves an event-loop thread running, and a process with other threads may not fork
# (tests of the worker processes run in this session too)
schema = schemathesis.openapi.from_dict(APP.openapi())
schema.app = APP
schema.location = "/openapi.json"
CLIENT = TestClient(APP, raise_server_exceptions=False)
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@schema.parametrize()
@FUZZ
def test_api_conforms_to_its_spec(case):
    # Not checked: that every schema-valid request is accepted. Some rules span fields or need
    # the vocabulary (exactly one of epsilon / max_n_w, a parameter of another mechanism, the
    # total-characters limit, an epsilon a mechanism rejects) and correctly answer 422.
    case.call_and_validate(excluded_checks=[schemathesis.checks.positive_data_acceptance])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_fields = st.fixed_dictionaries(
    {},
    optional={
        "texts": st.lists(st.text(max_size=40), max_size=4) | _json,
        "mechanism": st.sampled_from(["madlib", "mahalanobis", "tem", "brr", "x"]) | _json,
        "epsilon": st.floats(allow_nan=True, allow_infinity=True) | _json,
        "max_n_w": st.floats() | _json,
        "seed": st.integers() | _json,
        "params": st.dictionaries(st.sampled_from(["lam", "beta", "index", "k"]), st.floats() | _json, max_size=2) | _json,
        "oov": st.sampled_from(["unk", "drop", "keep"]) | _json,
        "case": st.sampled_from(["preserve", "lower", "upper"]) | _json,
        "details": st.booleans() | _json,
        "include": st.lists(st.sampled_from(["summary", "segments", "details", "x"]), max_size=5) | _json,
    },
)


@given(body=_fields | _json)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_arbitrary_json_bodies_never_cause_a_server_error(body):
    raw = json.dumps(body, allow_nan=True)
    r = CLIENT.post("/v1/privatize", content=raw, headers={"content-type": "application/json"})
    assert r.status_code in (200, 413, 422), (raw, r.text)
    data = r.json()
    if r.status_code == 200:
        assert len(data["texts"]) == len(body["texts"])
        asked = set(body.get("include", ())) | ({"segments"} if body.get("details") is True else set())
        assert ("summary" in data) == ("per_text" in data) == ("summary" in asked)
        assert ("segments" in data) == ("segments" in asked)
    else:
        assert data["error"]["status"] == r.status_code and data["error"]["message"]
