"""The ε explorer in a real browser: Playwright driving Debian's headless Chromium.

Skipped where playwright or chromium is missing (``make test`` installs both; Playwright never
downloads a browser of its own here: it launches the system Chromium by path). The service runs
in-process with uvicorn on 127.0.0.1 over a small vocabulary. Checks: the page loads, privatizes
on the server and on the device, highlights changed words, draws the N_w plot, and in on-device
mode no request carries the input text (every request is intercepted and inspected). A
screenshot is kept in build/explorer.png.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the serve extra")
httpx = pytest.importorskip("httpx", reason="needs httpx")
uvicorn = pytest.importorskip("uvicorn", reason="needs the serve extra")
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (test extra)")

from deniable import available_mechanisms  # noqa: E402
from deniable.service import MechanismPool, ServiceConfig, create_app  # noqa: E402
from deniable.service.pool import supports_targets  # noqa: E402

expect = sync_api.expect

from ..service.conftest import small_vocab  # noqa: E402

CHROMIUM = os.environ.get("DENIABLE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; make test does)")
BUILD = Path(__file__).resolve().parents[2] / "build"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-dev-shm-usage"]
SECRET = "quokka"  # not in the vocabulary: privatized as UNK, must never leave the page


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve(cfg: ServiceConfig):
    emb, binary = small_vocab()
    app = create_app(cfg, pool=MechanismPool(emb, binary, compute_targets=cfg.compute_targets))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server_url():
    with _serve(ServiceConfig(compute_targets=True)) as url:  # a small vocabulary calibrates in about a second
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def test_explorer_server_and_on_device(server_url, browser):
    page = browser.new_page(viewport={"width": 1100, "height": 1200})
    requests: list[dict] = []
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(str(e)))

    def log(route, request):
        requests.append({"url": request.url, "method": request.method, "body": request.post_data_buffer or b"", "headers": request.headers})
        route.continue_()

    page.route("**/*", log)
    page.goto(server_url + "/")
    status = page.locator("#status")
    expect(status).to_have_text("Ready.", timeout=20_000)
    # the mechanisms come from GET /v1/mechanisms (every registered one the server serves), the default selected
    listed = httpx.get(server_url + "/v1/mechanisms").json()["mechanisms"]
    assert [m["name"] for m in listed] == available_mechanisms()
    options = page.eval_on_selector_all("#mechanism option", "els => els.map(e => e.value)")
    assert options == [m["name"] for m in listed if m["served"]] and len(options) >= 4
    assert page.input_value("#mechanism") == "madlib"
    titles = dict(page.eval_on_selector_all("#mechanism option", "els => els.map(e => [e.value, e.title])"))
    assert "lam" in titles["mahalanobis"] and titles["madlib"].startswith("Madlib")

    # the plot: two curves for the default mechanism
    page.wait_for_selector("#plot svg path.median", timeout=30_000)
    assert page.locator("#plot svg path.worst").count() == 1

    # server side, a small epsilon: most words change, and are highlighted
    text = f"Meet me at the station at noon with {SECRET}, then walk to the park."
    page.fill("#input", text)
    page.fill("#epsilon", "2")
    page.click("#run")
    expect(status).to_have_text("Done.", timeout=20_000)
    assert page.locator("#output mark.changed").count() >= 1
    assert "%" in page.inner_text("#changed")
    assert page.inner_text("#where") == "on the server"
    assert SECRET not in page.inner_text("#output")
    posted = [r for r in requests if r["method"] == "POST"]
    assert posted and SECRET.encode() in posted[-1]["body"]  # the interception sees request bodies
    # the page shows counts and changed words, so it asks for them (they stay in the owner's browser)
    assert sorted(json.loads(posted[-1]["body"])["include"]) == ["segments", "summary"]

    # server side, a huge epsilon: vocabulary words are kept (not highlighted), the unknown one is not
    page.fill("#epsilon", "5000")
    page.click("#run")
    expect(status).to_have_text("Done.", timeout=20_000)
    assert page.locator("#output span.kept").count() >= 10
    assert page.locator("#output mark.changed").count() == 3  # the unknown words: with, quokka, then

    # a privacy target instead of epsilon, where this installation can resolve targets
    target = page.locator('input[name="level"][value="target"]')
    assert target.is_enabled() == supports_targets()
    if target.is_enabled():
        target.check()
        page.fill("#target", "0.5")
        page.click("#run")
        expect(status).to_have_text(re.compile("chosen for the target"), timeout=60_000)
        assert float(page.inner_text("#eps-used")) > 0
        page.locator('input[name="level"][value="epsilon"]').check()

    # on the device: the bundle is fetched once, then nothing carrying the text leaves the page
    page.check('input[name="mode"][value="device"]')
    expect(status).to_have_text(re.compile("^Bundle loaded"), timeout=20_000)
    assert page.input_value("#mechanism") == "brr"
    n_before = len(requests)
    device_text = f"The cat and the dog walk to the river bank with {SECRET} tomorrow."
    page.fill("#input", device_text)
    page.fill("#epsilon", "0.2")
    page.click("#run")
    expect(status).to_have_text(re.compile("^Privatized on this device"), timeout=20_000)
    page.wait_for_timeout(300)
    assert page.inner_text("#where") == "on this device"
    assert page.locator("#output mark.changed").count() >= 1
    assert SECRET not in page.inner_text("#output")
    after = requests[n_before:]
    for r in requests:
        if r["url"].endswith("/v1/bundles/brr"):
            assert r["method"] == "GET"
    for r in after:
        blob = (r["url"] + " " + " ".join(f"{k}: {v}" for k, v in r["headers"].items())).encode() + r["body"]
        for needle in (SECRET, "river bank", "The cat"):
            assert needle.encode() not in blob, r
        assert r["method"] == "GET", r
    assert sum(r["url"].endswith("/v1/bundles/brr") for r in requests) == 1

    page.wait_for_selector("#plot svg path.median")
    BUILD.mkdir(exist_ok=True)
    page.screenshot(path=str(BUILD / "explorer.png"), full_page=True)
    assert not console_errors, console_errors
    page.close()


def test_explorer_with_an_api_key(browser):
    with _serve(ServiceConfig(api_key="page-key-12345")) as url:
        page = browser.new_page()
        page.goto(url + "/")
        status = page.locator("#status")
        expect(status).to_have_text(re.compile("needs an API key"), timeout=20_000)
        expect(page.locator("#api-key")).to_be_visible()  # the page opened the key box
        page.fill("#api-key", "page-key-12345")
        page.locator("#api-key").dispatch_event("change")
        expect(status).to_have_text("Ready.", timeout=20_000)
        page.fill("#epsilon", "3")
        page.click("#run")
        expect(status).to_have_text("Done.", timeout=20_000)
        assert page.inner_text("#where") == "on the server"
        page.check('input[name="mode"][value="device"]')  # the bundle download carries the key too
        expect(status).to_have_text(re.compile("^Bundle loaded"), timeout=20_000)
        page.close()
