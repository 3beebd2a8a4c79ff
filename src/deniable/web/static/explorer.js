// The ε explorer page: privatize on the server (POST /v1/privatize) or in this page with the BRR
// runtime (brr.js; the only requests are GETs for the bundle and the curve, none carries text),
// highlight the changed words, and plot N_w against ε for the chosen mechanism. The mechanisms,
// the default one and the one the on-device runtime implements all come from GET /v1/mechanisms.
import { loadBundle } from "./brr.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const KEY = "deniable-api-key";
let info = null;
let bundlePromise = null;
let currentCurve = null;
const curves = new Map();

function apiHeaders(extra = {}) {
  const key = $("api-key").value.trim();
  return key ? { ...extra, "X-API-Key": key } : extra;
}

async function api(path, init = {}) {
  const resp = await fetch(path, { ...init, headers: apiHeaders(init.headers || {}) });
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    body = null;
  }
  if (!resp.ok) {
    const msg = body && body.error ? body.error.message : `HTTP ${resp.status}`;
    const err = new Error(msg);
    err.status = resp.status;
    throw err;
  }
  return body;
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function mode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function level() {
  return document.querySelector('input[name="level"]:checked').value;
}

function mechanismInfo(name) {
  return info ? info.mechanisms.find((m) => m.name === name) : null;
}

function served() {
  return info ? info.mechanisms.filter((m) => m.served) : [];
}

function onDeviceMechanism() {
  return served().find((m) => m.on_device) || null;
}

function mechanismTitle(m) {
  const settable = m.params.filter((p) => p.settable).map((p) => p.name);
  const extra = settable.length ? ` Parameters a request may set: ${settable.join(", ")}.` : "";
  return `${m.description}${m.notes ? ` (${m.notes})` : ""}${extra}`;
}

function defaultEpsilon(name) {
  const m = mechanismInfo(name);
  if (!m || !m.suggested_epsilons.length) return 1;
  const s = m.suggested_epsilons;
  return s[Math.floor(s.length / 2)];
}

async function init() {
  try {
    info = await api("/v1/mechanisms");
  } catch (e) {
    if (e.status === 401) {
      $("key-box").open = true;
      setStatus("This server needs an API key: enter it below.", true);
    } else {
      setStatus(`Cannot reach the service: ${e.message}`, true);
    }
    return;
  }
  const sel = $("mechanism");
  sel.replaceChildren();
  for (const m of served()) {
    const opt = document.createElement("option");
    opt.value = m.name;
    opt.textContent = m.name;
    opt.title = mechanismTitle(m);
    sel.append(opt);
  }
  const fallback = served().length ? served()[0].name : "";
  sel.value = mechanismInfo(info.default_mechanism) && mechanismInfo(info.default_mechanism).served ? info.default_mechanism : fallback;
  document.querySelector('input[name="mode"][value="device"]').disabled = !onDeviceMechanism();
  updateTargetAvailability();
  onMechanismChange();
  setStatus("Ready.");
}

function updateTargetAvailability() {
  const m = mechanismInfo($("mechanism").value);
  const ok = Boolean(info && info.privacy_targets && m && m.targets && mode() === "server");
  const radio = document.querySelector('input[name="level"][value="target"]');
  radio.disabled = !ok;
  $("target").disabled = !ok;
  $("target-label").title = ok ? "" : mode() === "device" ? "Targets are resolved on the server." : "No calibration data for this mechanism on this server.";
  if (!ok && radio.checked) document.querySelector('input[name="level"][value="epsilon"]').checked = true;
}

function onMechanismChange() {
  $("epsilon").value = defaultEpsilon($("mechanism").value);
  updateTargetAvailability();
  loadCurve($("mechanism").value);
}

function onModeChange() {
  const device = mode() === "device";
  if (device) {
    $("mechanism").value = onDeviceMechanism().name;
    onMechanismChange();
    getBundle().catch((e) => setStatus(`Cannot load the bundle: ${e.message}`, true));
  }
  $("mechanism").disabled = device;
  updateTargetAvailability();
}

function getBundle() {
  if (!bundlePromise) {
    setStatus("Loading the BRR bundle (once)…");
    const name = encodeURIComponent(onDeviceMechanism().name);
    bundlePromise = loadBundle(`/v1/bundles/${name}`, { headers: apiHeaders() }).then((b) => {
      setStatus(`Bundle loaded: ${b.nWords.toLocaleString()} words, ${b.nBits}-bit codes.`);
      return b;
    });
    bundlePromise.catch(() => {
      bundlePromise = null;
    });
  }
  return bundlePromise;
}

function render(segments, changed, words, epsilon, where, guarantee) {
  const out = $("output");
  out.replaceChildren();
  for (const s of segments) {
    if (!s.word) {
      out.append(document.createTextNode(s.text));
    } else if (s.changed) {
      const m = document.createElement("mark");
      m.className = "changed";
      m.textContent = s.text;
      out.append(m);
    } else {
      const k = document.createElement("span");
      k.className = "kept";
      k.textContent = s.text;
      out.append(k);
    }
  }
  $("changed").textContent = words ? `${((100 * changed) / words).toFixed(0)}% (${changed}/${words})` : "0 words";
  $("eps-used").textContent = Number(epsilon.toPrecision(4)).toString();
  $("where").textContent = where;
  $("guarantee").textContent = guarantee;
  drawPlot(currentCurve, epsilon);
}

async function run() {
  const text = $("input").value;
  const mech = $("mechanism").value;
  const btn = $("run");
  btn.disabled = true;
  try {
    if (mode() === "device") {
      const eps = Number($("epsilon").value);
      const bundle = await getBundle();
      const t0 = performance.now();
      const res = bundle.privatizeDetailed([text], eps);
      const ms = performance.now() - t0;
      render(
        res.segments[0], res.changed, res.words, eps, "on this device",
        `BRR, ε·d-privacy with d = Hamming distance between the words' ${bundle.nBits}-bit codes, over the bundle's ` +
          `${bundle.nWords} words and UNK; noise from crypto.getRandomValues in this page — the text was not sent anywhere.`,
      );
      setStatus(`Privatized on this device in ${ms.toFixed(0)} ms.`);
    } else {
      // The counts and per-word flags are input-dependent: asked for explicitly, and they stay in
      // this page (the text's owner), like the text itself.
      const body = { texts: [text], mechanism: mech, include: ["summary", "segments"] };
      if (level() === "target") body.max_n_w = Number($("target").value);
      else body.epsilon = Number($("epsilon").value);
      setStatus("Privatizing on the server…");
      const res = await api("/v1/privatize", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      render(res.segments[0], res.summary.changed, res.summary.words, res.epsilon, "on the server", res.guarantee.statement);
      setStatus(level() === "target" ? `ε = ${Number(res.epsilon.toPrecision(4))} chosen for the target.` : "Done.");
    }
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    btn.disabled = false;
  }
}

async function loadCurve(name) {
  $("plot-mech").textContent = `(${name})`;
  $("plot-source").textContent = "";
  currentCurve = null; // never draw another mechanism's curve under this name
  $("plot").replaceChildren(document.createTextNode("Computing the curve…"));
  if (!curves.has(name)) curves.set(name, api(`/v1/curves/${encodeURIComponent(name)}`));
  try {
    const curve = await curves.get(name);
    if ($("mechanism").value !== name) return;
    currentCurve = curve;
    drawPlot(curve, Number($("epsilon").value));
    $("plot-source").textContent = `Source: ${curve.source}.`;
  } catch (e) {
    curves.delete(name);
    $("plot").replaceChildren(document.createTextNode(`No curve: ${e.message}`));
  }
}

function el(name, attrs = {}, text = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== null) e.textContent = text;
  return e;
}

function drawPlot(curve, epsilon) {
  if (!curve) return;
  const W = 640, H = 300, L = 64, R = 16, T = 14, B = 44;
  const xs = curve.epsilons;
  const lo = Math.log10(Math.min(...xs)), hi = Math.log10(Math.max(...xs));
  const span = hi - lo || 1;
  const x = (e) => L + ((Math.log10(e) - lo) / span) * (W - L - R);
  const y = (v) => T + (1 - v) * (H - T - B);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "N_w against epsilon" });
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(el("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(el("text", { x: L - 8, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
  }
  for (let d = Math.floor(lo); d <= Math.ceil(hi); d++) {
    for (const m of [1, 2, 5]) {
      const e = m * 10 ** d;
      if (Math.log10(e) < lo - 1e-9 || Math.log10(e) > hi + 1e-9) continue;
      svg.append(el("line", { class: "grid", x1: x(e), x2: x(e), y1: T, y2: H - B }));
      svg.append(el("text", { x: x(e), y: H - B + 16, "text-anchor": "middle" }, Number(e.toPrecision(3)).toString()));
    }
  }
  svg.append(el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(el("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle" }, "ε (log scale)"));
  svg.append(el("text", { x: 14, y: (T + H - B) / 2, transform: `rotate(-90 14 ${(T + H - B) / 2})`, "text-anchor": "middle" }, "N_w"));
  const path = (ys) => ys.map((v, i) => `${i ? "L" : "M"}${x(xs[i]).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  svg.append(el("path", { class: "worst", d: path(curve.worst) }));
  svg.append(el("path", { class: "median", d: path(curve.median) }));
  if (Number.isFinite(epsilon) && epsilon > 0) {
    const cx = Math.min(Math.max(x(epsilon), L), W - R);
    svg.append(el("line", { class: "current", x1: cx, x2: cx, y1: T, y2: H - B }));
    svg.append(el("text", { x: cx + 4, y: T + 12 }, `ε = ${Number(epsilon.toPrecision(3))}`));
  }
  const legend = el("g", { class: "legend" });
  legend.append(el("line", { class: "median", x1: L + 12, x2: L + 40, y1: T + 14, y2: T + 14 }));
  legend.append(el("text", { x: L + 46, y: T + 18 }, "median word"));
  legend.append(el("line", { class: "worst", x1: L + 12, x2: L + 40, y1: T + 32, y2: T + 32 }));
  legend.append(el("text", { x: L + 46, y: T + 36 }, "worst word"));
  svg.append(legend);
  $("plot").replaceChildren(svg);
}

$("mechanism").addEventListener("change", onMechanismChange);
for (const r of document.querySelectorAll('input[name="mode"]')) r.addEventListener("change", onModeChange);
$("epsilon").addEventListener("input", () => drawPlot(currentCurve, Number($("epsilon").value)));
$("run").addEventListener("click", run);
$("api-key").value = sessionStorage.getItem(KEY) || "";
$("api-key").addEventListener("change", () => {
  sessionStorage.setItem(KEY, $("api-key").value.trim());
  bundlePromise = null;
  curves.clear();
  init();
});
init();
