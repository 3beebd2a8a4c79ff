"""``deniable serve``: option checks, and one real server process on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from click.testing import CliRunner

from deniable import available_mechanisms
from deniable.cli.main import cli

from .conftest import small_vocab


def test_help_lists_the_options():
    r = CliRunner().invoke(cli, ["serve", "--help"])
    assert r.exit_code == 0
    for opt in ("--host", "--port", "--api-key", "--max-texts", "--max-body-bytes", "--bundle", "--no-page"):
        assert opt in r.output
    assert "127.0.0.1" in r.output


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--embedding-limit", "10"], "--embedding-limit: needs --embedding"),
        (["--api-key", "short"], "at least 8 characters"),
        (["--port", "70000"], "70000"),
        (["--max-total", "3"], "applies to a ledger; add --ledger PATH"),
        (["--ledger", "l.db", "--dataset", " "], "needs a non-empty name"),
        (["-m", "madlib,laplace"], "unknown mechanism(s) 'laplace'; registered mechanisms: " + ", ".join(available_mechanisms())),
    ],
)
def test_usage_errors_exit_2(args, fragment):
    r = CliRunner().invoke(cli, ["serve", *args])
    assert r.exit_code == 2 and fragment in " ".join(r.output.split())


def test_mechanisms_option_takes_any_registered_names():
    from deniable.cli.serve import _mechanism_names

    assert _mechanism_names(None, None, ()) == ()  # none given: every registered mechanism
    assert _mechanism_names(None, None, ("santext,brr", "vickrey", "brr")) == ("santext", "brr", "vickrey")
    assert "--mechanisms" in CliRunner().invoke(cli, ["serve", "--help"]).output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_runs_on_loopback_with_an_api_key(tmp_path):
    emb, binary = small_vocab()
    vec = tmp_path / "small.txt"
    vec.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(emb.words, emb.vectors)), encoding="utf-8")
    bundle = tmp_path / "small.brr"
    binary.save(bundle)
    port = _free_port()
    env = dict(os.environ, DENIABLE_API_KEY="key-for-tests-1")
    cmd = [sys.executable, "-m", "deniable.cli.main", "serve", "--port", str(port), "--embedding", str(vec), "--bundle", str(bundle), "--log-level", "warning", "--ledger", str(tmp_path / "l.db")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        body = {"texts": ["meet me at the station"], "mechanism": "brr", "epsilon": 0.5, "seed": 1, "include": ["summary"]}
        assert httpx.post(url + "/v1/privatize", json=body).status_code == 401
        r = httpx.post(url + "/v1/privatize", json=body, headers={"X-API-Key": "key-for-tests-1"})
        assert r.status_code == 200 and r.json()["summary"]["words"] == 5
        assert httpx.get(url + "/static/brr.js").status_code == 200
        # concurrent requests on one shared mechanism: all answered, seeded ones identically
        headers = {"X-API-Key": "key-for-tests-1"}
        with httpx.Client(base_url=url, headers=headers) as c, ThreadPoolExecutor(8) as ex:
            outs = list(ex.map(lambda _: c.post("/v1/privatize", json=body), range(40)))
        assert all(o.status_code == 200 for o in outs)
        assert len({o.json()["texts"][0] for o in outs}) == 1
        # each answered request is one ledger row, none lost or duplicated under the server's threads
        from deniable import Ledger

        recorded = [r.release_id for r in Ledger(tmp_path / "l.db").releases()]
        assert sorted(recorded) == sorted([r.json()["release_id"]] + [o.json()["release_id"] for o in outs]) and len(set(recorded)) == 41
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert f"http://127.0.0.1:{port}/" in err and "API key required" in err
