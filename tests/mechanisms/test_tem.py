"""TEM: closed form vs an independent brute-force Algorithm 2, metric DP on all pairs, exact
sampling (chi-square against the closed form) on every code path, edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.mechanisms.tem import TEM, theorem3_gamma

from .._stats import chi2_pvalue
from ._metric_dp import ATOL, assert_metric_dp, log_rows, metric_dp_excess

METRICS = ("euclidean", "manhattan", "chebyshev", "angular")
EPSILONS = (0.5, 2.0, 8.0)
N_DRAWS = 100_000
P_MIN = 1e-4


def make_embedding(n: int = 40, dim: int = 5, seed: int = 0) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


# -- an independent reference: Algorithm 2 written out, evaluated in closed form ---------------


def brute_distance(x: np.ndarray, y: np.ndarray, metric: str) -> float:
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    if metric == "euclidean":
        return float(math.sqrt(sum((a - b) ** 2 for a, b in zip(x, y))))
    if metric == "manhattan":
        return float(sum(abs(a - b) for a, b in zip(x, y)))
    if metric == "chebyshev":
        return float(max(abs(a - b) for a, b in zip(x, y)))
    # angle between x and y (Kahan's formula: accurate near 0 and pi, unlike acos of the cosine)
    u, v = x / np.linalg.norm(x), y / np.linalg.norm(y)
    return 2.0 * math.atan2(float(np.linalg.norm(u - v)), float(np.linalg.norm(u + v)))


def brute_points(emb: Embedding) -> np.ndarray:
    """Vocabulary vectors, then UNK = the mean vector (float64 mean of the float32 vectors)."""
    return np.vstack([emb.vectors, emb.vectors.astype(np.float64).mean(axis=0).astype(np.float32)[None]])


def brute_algorithm2(dists: np.ndarray, epsilon: float, gamma: float, *, bottom: str = "paper") -> np.ndarray:
    """Output distribution of Algorithm 2 for one input, given d(w, y) for all y in W.

    Gumbel(0, 2/eps)-max picks candidate i with probability exp(eps/2 * score_i) / sum_j(...).
    L_w = {y : d <= gamma}, scores -d; bottom has score -gamma + 2 ln|W \\ L_w| / eps (absent when
    W \\ L_w is empty) and, when it wins, a uniform draw from W \\ L_w. ``bottom="buggy"`` uses
    the wrong score -gamma + 2 ln(|W| / |L_w|) / eps of one public implementation.
    """
    V = dists.size
    in_L = dists <= gamma
    n_out = V - int(in_L.sum())
    scores = list(-dists[in_L])
    if n_out > 0:
        if bottom == "paper":
            scores.append(-gamma + 2.0 * math.log(n_out) / epsilon)
        else:
            scores.append(-gamma + 2.0 * math.log(V / in_L.sum()) / epsilon)
    s = np.array(scores) * (epsilon / 2.0)
    q = np.exp(s - s.max())
    q /= q.sum()
    p = np.zeros(V)
    p[in_L] = q[: int(in_L.sum())]
    if n_out > 0:
        p[~in_L] = q[-1] / n_out
    return p


def brute_matrix(emb: Embedding, epsilon: float, gamma: float, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(P, D): P[i] = Algorithm 2's distribution for input row i (rows: words, then UNK);
    D = distances between all inputs."""
    pts = brute_points(emb)
    D = np.array([[brute_distance(a, b, metric) for b in pts] for a in pts])
    P = np.array([brute_algorithm2(D[i, : len(emb)], epsilon, gamma) for i in range(len(pts))])
    return P, D


def draws(mech: TEM, word_id: int, n: int = N_DRAWS, seed: int = 0) -> np.ndarray:
    return mech.sample_ids(np.full(n, word_id), rng=seed)


# -- closed form ---------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("gamma_rule", ["theorem3", "median"])
def test_probabilities_match_bruteforce_and_satisfy_metric_dp(metric: str, epsilon: float, gamma_rule: str) -> None:
    emb = make_embedding()
    pts = brute_points(emb)
    if gamma_rule == "theorem3":
        gamma = None
    else:  # a gamma that truncates: about half of each neighbourhood is beyond it
        gamma = float(np.median([brute_distance(pts[0], b, metric) for b in pts[:-1]]))
    mech = TEM(emb, epsilon=epsilon, gamma=gamma, metric=metric, cache_dir=False)
    g = mech.gamma if gamma is None else gamma
    if gamma is None:
        assert g == pytest.approx(2 / epsilon * math.log((1 - 0.001) * 39 / 0.001), rel=1e-12)
    P, D = brute_matrix(emb, epsilon, g, metric)
    ours = np.array([mech.probabilities(i) for i in range(len(emb))] + [mech.probabilities(-1)])
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(ours, P, rtol=1e-9, atol=0)
    # metric DP on every pair of inputs (words and UNK) and every output, from the log form
    assert_metric_dp(mech.log_probability_rows(np.r_[np.arange(len(emb)), -1]), D, epsilon)
    # ... and this check has teeth: the untruncated scores with exp(-eps*d) (no 1/2) break it
    bad = np.exp(-epsilon * np.minimum(D[:, : len(emb)], g))
    bad /= bad.sum(axis=1, keepdims=True)
    assert metric_dp_excess(log_rows(bad), D, epsilon) > ATOL
    # privacy_loss_bound = eps * d(w1, w2), with the mechanism's metric
    for i, j in [(0, 1), (3, 17), (5, -1)]:
        assert mech.privacy_loss_bound(i, j) == pytest.approx(epsilon * D[i, j], rel=1e-9)


def test_bottom_score_is_log_of_complement_size_not_ratio() -> None:
    """Closed form and sampled mass beyond gamma follow -gamma + 2 ln|W \\ L_w|/eps, not ln(|W|/|L_w|)."""
    emb = make_embedding()
    eps = 2.0
    d0 = np.array([brute_distance(emb.vectors[0], v, "euclidean") for v in emb.vectors])
    gamma = float(np.sort(d0)[10])  # |L_w| = 11, |W \ L_w| = 29
    mech = TEM(emb, epsilon=eps, gamma=gamma, cache_dir=False)
    right = brute_algorithm2(d0, eps, gamma)
    wrong = brute_algorithm2(d0, eps, gamma, bottom="buggy")
    np.testing.assert_allclose(mech.probabilities(0), right, rtol=1e-9)
    out_L = d0 > gamma
    p_right, p_wrong = right[out_L].sum(), wrong[out_L].sum()
    n = 200_000
    frac = np.isin(draws(mech, 0, n), np.flatnonzero(out_L)).mean()
    sd = math.sqrt(p_right * (1 - p_right) / n)
    assert abs(frac - p_right) < 5 * sd
    assert abs(frac - p_wrong) > 20 * sd


def test_bottom_never_falls_back_to_the_input_word() -> None:
    """L_w = {w}: bottom wins with prob (|W|-1)e^{-eps*gamma/2} / (1 + ...) and then returns a
    uniform *other* word; returning w on bottom would make w's frequency about 1."""
    emb = make_embedding()
    eps, gamma = 1.0, 0.05  # below every nearest-neighbour distance
    mech = TEM(emb, epsilon=eps, gamma=gamma, cache_dir=False)
    p_w = 1.0 / (1.0 + 39 * math.exp(-eps * gamma / 2))
    assert mech.probabilities(0)[0] == pytest.approx(p_w, rel=1e-12)
    out = draws(mech, 0, N_DRAWS)
    assert abs((out == 0).mean() - p_w) < 5 * math.sqrt(p_w * (1 - p_w) / N_DRAWS)
    assert chi2_pvalue(out, mech.probabilities(0)) > P_MIN


# -- exact sampling on every path ----------------------------------------------------------------

# (name, epsilon, TEM kwargs, expected path): "lookup": every row has bound >= gamma (the
# precomputed / small-gamma path, no distance at sampling time); "rejection": no row does (the
# large-gamma path: k-nearest envelope + rejection); "mixed": both kinds of rows.
SAMPLER_CASES = [
    ("lookup-knn", 8.0, dict(precomputed_neighbors=40), "lookup"),
    ("lookup-radius", 8.0, dict(neighbors="radius"), "lookup"),
    ("lookup-truncating", 2.0, dict(gamma=2.0, precomputed_neighbors=40), "lookup"),
    ("rejection-large-gamma", 0.5, dict(precomputed_neighbors=3), "rejection"),
    ("rejection-angular", 2.0, dict(precomputed_neighbors=4, metric="angular"), "rejection"),
    ("rejection-manhattan", 2.0, dict(precomputed_neighbors=5, metric="manhattan", gamma=5.0), "rejection"),
    ("mixed-chebyshev", 3.0, dict(precomputed_neighbors=4, metric="chebyshev", gamma=1.0), "mixed"),
]


# every case with the in-memory tables, and the k-nearest ones with the compact ids-only table
STORAGE_CASES = [(*c, "table") for c in SAMPLER_CASES] + [(*c, "compact") for c in SAMPLER_CASES if c[2].get("neighbors") != "radius"]


@pytest.mark.parametrize("name,epsilon,kwargs,path,storage", STORAGE_CASES, ids=[f"{c[0]}-{c[4]}" for c in STORAGE_CASES])
def test_sampling_matches_closed_form(name: str, epsilon: float, kwargs: dict, path: str, storage: str, monkeypatch) -> None:
    import deniable.mechanisms.tem as tem_module

    monkeypatch.setattr(tem_module, "_COMPACT_ROWS", 3)  # several chunks of recomputed rows per batch
    emb = make_embedding()
    mech = TEM(emb, epsilon=epsilon, cache_dir=False, storage=storage, **kwargs)
    assert mech.storage == storage
    words = [0, 7, 23, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=12345).reshape(len(words), N_DRAWS)
    if storage == "table":
        all_complete = mech._get_tables().complete
    else:
        all_complete = mech.precompute().bound >= mech.gamma
    complete = all_complete[[w if w >= 0 else len(emb) for w in words]]
    summary = mech.sampler_summary()
    assert summary["lookup_fraction"] == all_complete[: len(emb)].mean()
    if path == "lookup":
        assert complete.all()
    elif path == "rejection":
        assert not complete.any()
    else:
        assert complete.any() and not complete.all()
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, (name, w)


@pytest.mark.parametrize("storage", ["table", "compact"])
def test_chi_square_detects_a_wrong_sampler(storage: str) -> None:
    """The frequency test has power: draws at eps=2 do not fit the eps=2.2 closed form."""
    emb = make_embedding()
    out = draws(TEM(emb, epsilon=2.0, precomputed_neighbors=4, cache_dir=False, storage=storage), 3)
    assert chi2_pvalue(out, TEM(emb, epsilon=2.2, cache_dir=False).probabilities(3)) < 1e-6


def test_compact_sampler_detects_wrong_weights(monkeypatch) -> None:
    """Control for the compact sampler's own arithmetic: with the recomputed distances scaled by
    1.1 (as if it used the wrong row), the same chi-square test fails."""
    import deniable.mechanisms.tem as tem_module

    emb = make_embedding()
    mech = TEM(emb, epsilon=2.0, precomputed_neighbors=8, cache_dir=False, storage="compact")
    real = tem_module.row_distances
    monkeypatch.setattr(tem_module, "row_distances", lambda *a, **k: 1.1 * real(*a, **k))
    assert chi2_pvalue(draws(mech, 3), mech.probabilities(3)) < 1e-6


def test_storage_auto_and_validation() -> None:
    emb = make_embedding()
    assert TEM(emb, epsilon=2.0, cache_dir=False).storage == "table"
    assert "storage" not in TEM(emb, epsilon=2.0, cache_dir=False).params
    big = Embedding([f"w{i}" for i in range(70_000)], np.zeros((70_000, 2), dtype=np.float32))
    assert TEM(big, epsilon=2.0, cache_dir=False).storage == "compact"  # (70,001 x 128) entries
    assert TEM(big, epsilon=2.0, cache_dir=False, precomputed_neighbors=64).storage == "table"
    assert TEM(emb, epsilon=2.0, cache_dir=False, storage="compact").params["storage"] == "compact"
    with pytest.raises(ValueError, match="storage must be"):
        TEM(emb, epsilon=2.0, storage="mmap")
    with pytest.raises(ValueError, match="needs neighbors='knn'"):
        TEM(emb, epsilon=2.0, storage="compact", neighbors="radius")
    with pytest.raises(RuntimeError, match="storage='table'"):
        TEM(emb, epsilon=2.0, cache_dir=False, storage="compact")._get_tables()


def test_compact_disk_cache(tmp_path, monkeypatch) -> None:
    """The compact table is cached as a folder of .npy files, memory-mapped on load, and a second
    instance samples the same outputs for the same seed without recomputing."""
    import deniable.neighbors.neighborhoods as nbm

    emb = make_embedding()
    a = TEM(emb, epsilon=2.0, precomputed_neighbors=6, cache_dir=tmp_path, storage="compact")
    out_a = a.sample_ids(np.arange(40).repeat(20), rng=4)
    assert a.cache_file is not None and a.cache_file.is_dir() and a.cache_file.name.startswith("tem-knnids-")
    monkeypatch.setattr(nbm, "build_knn_ids", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    b = TEM(emb, epsilon=2.0, precomputed_neighbors=6, cache_dir=tmp_path, storage="compact")
    np.testing.assert_array_equal(b.sample_ids(np.arange(40).repeat(20), rng=4), out_a)
    assert isinstance(b.precompute().ids, np.memmap)


def test_callable_metric() -> None:
    emb = make_embedding()

    def scaled_l1(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return 0.5 * np.abs(A[:, None, :].astype(np.float64) - B[None, :, :]).sum(axis=-1)

    mech = TEM(emb, epsilon=2.0, metric=scaled_l1, precomputed_neighbors=3, cache_dir=False)
    d = np.array([0.5 * np.abs(emb.vectors[4].astype(np.float64) - v).sum() for v in emb.vectors])
    np.testing.assert_allclose(mech.probabilities(4), brute_algorithm2(d, 2.0, mech.gamma), rtol=1e-9)
    assert chi2_pvalue(draws(mech, 4), mech.probabilities(4)) > P_MIN
    assert "scaled_l1" in mech.guarantee.metric
    assert mech.privacy_loss_bound(4, 9) == pytest.approx(2.0 * 0.5 * np.abs(emb.vectors[4].astype(np.float64) - emb.vectors[9]).sum())


# -- edge cases ----------------------------------------------------------------------------------


def test_complement_empty_is_the_exponential_mechanism() -> None:
    emb = make_embedding()
    mech = TEM(emb, epsilon=0.5, cache_dir=False)  # gamma(Theorem 3) exceeds every distance
    pts = brute_points(emb)
    d = np.array([brute_distance(pts[2], v, "euclidean") for v in emb.vectors])
    assert d.max() < mech.gamma
    p = np.exp(-0.25 * d)
    np.testing.assert_allclose(mech.probabilities(2), p / p.sum(), rtol=1e-9)
    mech_inf = TEM(emb, epsilon=0.5, gamma=float("inf"), precomputed_neighbors=5, cache_dir=False)
    np.testing.assert_allclose(mech_inf.probabilities(2), p / p.sum(), rtol=1e-9)
    assert chi2_pvalue(draws(mech_inf, 2), p / p.sum()) > P_MIN


def test_ties_in_distance() -> None:
    """Integer grid points: many equal distances, gamma exactly on a distance, k cutting a tie."""
    pts = np.array([[x, y] for x in range(5) for y in range(5)], dtype=np.float32)
    emb = Embedding([f"p{i}" for i in range(25)], pts)
    for k, gamma in [(3, 1.0), (5, 2.0), (25, 2.0)]:
        mech = TEM(emb, epsilon=1.5, gamma=gamma, precomputed_neighbors=k, metric="manhattan", cache_dir=False)
        for w in (12, 0):
            d = np.abs(pts[w] - pts).sum(axis=1).astype(np.float64)
            p = brute_algorithm2(d, 1.5, gamma)
            np.testing.assert_allclose(mech.probabilities(w), p, rtol=1e-9)
            assert chi2_pvalue(draws(mech, w), p) > P_MIN


def test_extreme_epsilons() -> None:
    emb = make_embedding()
    tiny = TEM(emb, epsilon=1e-6, cache_dir=False)
    np.testing.assert_allclose(tiny.probabilities(0), 1 / 40, rtol=1e-4)
    assert chi2_pvalue(draws(tiny, 0), tiny.probabilities(0)) > P_MIN
    huge = TEM(emb, epsilon=1e6, cache_dir=False)  # L_w = {w}: P[w] = 1 - beta exactly
    assert huge.probabilities(5)[5] == pytest.approx(1 - 0.001, rel=1e-9)
    out = draws(huge, 5)
    assert chi2_pvalue(out, huge.probabilities(5)) > P_MIN
    assert (out != 5).any()
    # UNK is farther than gamma from every word: bottom only, uniform over the vocabulary
    np.testing.assert_allclose(huge.probabilities(-1), 1 / 40, rtol=1e-9)
    # underflow: exp(-eps/2 * d) is 0 for every other word
    under = TEM(emb, epsilon=1e6, gamma=1.0, cache_dir=False)
    assert under.probabilities(5)[5] == 1.0
    assert (under.sample_ids(np.full(1000, 5), rng=0) == 5).all()


def test_single_word_vocabulary() -> None:
    emb = Embedding(["only"], np.ones((1, 3), dtype=np.float32))
    mech = TEM(emb, epsilon=1.0, cache_dir=False)
    assert mech.gamma == 0.0
    np.testing.assert_array_equal(mech.probabilities(0), [1.0])
    np.testing.assert_array_equal(mech.probabilities(-1), [1.0])
    np.testing.assert_array_equal(mech.sample_ids([0, -1, 0], rng=0), [0, 0, 0])
    assert mech.privatize("only unknown", rng=0) == "only only"


def test_theorem3_gamma() -> None:
    assert theorem3_gamma(2.0, 33849, 0.001) == pytest.approx(math.log(0.999 * 33848 / 0.001))
    for eps in (1.0, 5.0, 20.0):  # eps * gamma / 2 does not depend on eps
        assert eps * theorem3_gamma(eps, 33849, 0.001) / 2 == pytest.approx(17.33, abs=0.01)
    assert theorem3_gamma(1.0, 2, 0.6) == 0.0


# -- interface -----------------------------------------------------------------------------------


def test_interface_shapes_unk_and_text() -> None:
    emb = make_embedding()
    mech = TEM(emb, epsilon=8.0, cache_dir=False)
    ids = np.array([[0, 1, -1], [39, 2, 2]])
    out = mech.sample_ids(ids, rng=0)
    assert out.shape == ids.shape and out.dtype == np.int64
    assert ((out >= 0) & (out < 40)).all()
    np.testing.assert_array_equal(mech.sample_ids(ids, rng=5), mech.sample_ids(ids, rng=5))
    assert mech.sample_ids(np.array([], dtype=np.int64)).size == 0
    text = mech.privatize("w1 zzz w2", rng=0)
    assert "zzz" not in text and all(t in emb for t in text.split())
    g = mech.guarantee
    assert g.epsilon == 8.0 and "Euclidean" in g.metric and "UNK" in g.domain
    assert "TEM(epsilon=8" in repr(mech) and "beta=0.001" in repr(mech)
    with pytest.raises(ValueError):
        mech.sample_ids([40])


def test_registry_and_string_params() -> None:
    emb = make_embedding()
    mech = get_mechanism("tem", emb, epsilon=2.0, beta=0.01, metric="angular", precomputed_neighbors=8, cache_dir=False)
    assert isinstance(mech, TEM) and mech.metric == "angular" and mech.beta == 0.01
    assert "angular" in mech.guarantee.metric
    assert mech.gamma == pytest.approx(theorem3_gamma(2.0, 40, 0.01))


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        (dict(beta=0.0), ValueError),
        (dict(beta=1.0), ValueError),
        (dict(beta="0.1"), TypeError),
        (dict(gamma=-1.0), ValueError),
        (dict(gamma=float("nan")), ValueError),
        (dict(gamma="1"), TypeError),
        (dict(metric="hamming"), ValueError),
        (dict(metric="cosine"), ValueError),
        (dict(metric=3), TypeError),
        (dict(precomputed_neighbors=0), ValueError),
        (dict(precomputed_neighbors=2.5), TypeError),
        (dict(neighbors="ball"), ValueError),
        (dict(cache_dir=3), TypeError),
        (dict(epsilon=0.0), ValueError),
    ],
)
def test_validation(kwargs: dict, exc: type) -> None:
    params = dict(epsilon=1.0)
    params.update(kwargs)
    with pytest.raises(exc):
        TEM(make_embedding(), **params)


def test_disk_cache_roundtrip(tmp_path, monkeypatch) -> None:
    emb = make_embedding()
    monkeypatch.setenv("DENIABLE_CACHE_DIR", str(tmp_path / "env"))
    a = TEM(emb, epsilon=2.0, precomputed_neighbors=5)
    out_a = a.sample_ids(np.arange(40).repeat(50), rng=3)
    assert a.cache_file is not None and a.cache_file.parent == tmp_path / "env" and a.cache_file.exists()
    b = TEM(emb, epsilon=2.0, precomputed_neighbors=5, cache_dir=tmp_path / "param")
    np.testing.assert_array_equal(b.sample_ids(np.arange(40).repeat(50), rng=3), out_a)
    assert b.cache_file.parent == tmp_path / "param"
    # a second instance loads the file instead of recomputing
    import deniable.neighbors.neighborhoods as nbm

    monkeypatch.setattr(nbm, "knn_neighborhoods", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    c = TEM(emb, epsilon=5.0, precomputed_neighbors=5)
    np.testing.assert_array_equal(c.sample_ids([1, 2, 3], rng=0).shape, (3,))
    assert c.cache_file == a.cache_file


@pytest.mark.parametrize("storage", ["table", "compact"])
def test_tem_draws_come_from_the_shared_sampler(storage: str) -> None:
    """TEM samples with the library's one exact sampler (``ExponentialSampler`` over
    ``SamplingTables``): the same tables and seed give the same draws outside the mechanism."""
    from deniable.mechanisms._exponential import ExponentialSampler, RowSubset, SamplingTables

    emb = make_embedding()
    mech = TEM(emb, epsilon=2.0, gamma=1.5, precomputed_neighbors=6, cache_dir=False, storage=storage)
    ids = np.r_[np.arange(40).repeat(30), -np.ones(50, dtype=np.int64)]
    rows = np.where(ids < 0, 40, ids)
    if storage == "table":
        tables, points, rows_in = mech._get_tables(), mech._pts, rows
        nb = mech.precompute()
        ref = SamplingTables.from_neighborhoods(nb, 1.0, 1.5, 40)
        np.testing.assert_array_equal(tables.cum, ref.cum)
    else:
        uniq, rows_in = np.unique(rows, return_inverse=True)
        tables, points = mech._compact_tables(uniq), RowSubset(mech._pts, uniq)
    sampler = ExponentialSampler.from_tables(points, emb.vectors, tables, 1.0, 1.5, "euclidean")
    np.testing.assert_array_equal(mech.sample_ids(ids, rng=8), sampler.sample(rows_in, np.random.default_rng(8)))


@pytest.mark.parametrize("storage", ["table", "compact"])
def test_loose_bound_stays_exact(storage: str) -> None:
    """The sampler needs only a valid lower bound b_w (the float32 Euclidean pre-processing may
    lower it): with bounds halved, listed words beyond b_w get (u - g)+ = 0 and the uniform
    branch supplies their exact weight."""
    from dataclasses import replace

    emb = make_embedding()
    mech = TEM(emb, epsilon=2.0, precomputed_neighbors=8, cache_dir=False, storage=storage)
    nb = mech.precompute()
    mech._nb = replace(nb, bound=nb.bound * 0.5)  # type: ignore[type-var]
    mech._tables = None
    words = [0, 11, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=7).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN
