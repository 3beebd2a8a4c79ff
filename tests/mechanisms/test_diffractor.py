"""1-Diffractor: word lists against a brute-force chain, closed form against brute-force sums,
the metric-DP inequality on all pairs (max over lists of position distance), exact sampling
(chi-square, with a control that must fail) for geometric and TEM noise, one and several lists
(metrics, embeddings, start words), log-space probabilities against exact decimal arithmetic,
and the stop-word option."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deniable import Embedding, get_mechanism
from deniable.mechanisms.diffractor import Diffractor, greedy_word_list

from .._stats import chi2_pvalue
from ._metric_dp import ATOL, assert_metric_dp, distance_matrix, metric_dp_excess

N_DRAWS = 100_000
P_MIN = 1e-4


def make_embedding(n: int = 30, dim: int = 4, seed: int = 3) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def brute_chain(X: np.ndarray, metric: str, start: int = 0) -> list[int]:
    X = X.astype(np.float64)

    def d(a, b):
        if metric == "euclidean":
            return float(np.sqrt(((X[a] - X[b]) ** 2).sum()))
        u, v = X[a] / np.linalg.norm(X[a]), X[b] / np.linalg.norm(X[b])
        return 2 * math.atan2(np.linalg.norm(u - v), np.linalg.norm(u + v))

    order, free = [start], set(range(len(X))) - {start}
    while free:
        nxt = min(free, key=lambda j: (d(order[-1], j), j))
        order.append(nxt)
        free.remove(nxt)
    return order


def brute_position_probs(i: int, V: int, eps: float, noise: str, gamma: float) -> np.ndarray:
    p = np.zeros(V)
    if noise == "geometric":
        a = math.exp(-eps)
        for k in range(-V - 60, V + 61):  # tail beyond is below 1e-20 for the eps used here
            p[min(max(i + k, 0), V - 1)] += (1 - a) / (1 + a) * a ** abs(k)
        return p
    w = np.array([math.exp(-eps / 2 * min(abs(j - i), gamma)) for j in range(V)])
    return w / w.sum()


@pytest.mark.parametrize("metric", ["euclidean", "angular"])
@pytest.mark.parametrize("k", [2, 128])
def test_word_list_is_the_greedy_chain(metric: str, k: int) -> None:
    emb = make_embedding()
    np.testing.assert_array_equal(greedy_word_list(emb, metric, precomputed_neighbors=k, cache_dir=False), brute_chain(emb.vectors, metric))


CASES = [("geometric", 0.4, None), ("geometric", 2.0, None), ("tem", 1.0, None), ("tem", 1.5, 4.0)]


@pytest.mark.parametrize("noise,eps,gamma", CASES)
@pytest.mark.parametrize("metrics", [("euclidean",), ("euclidean", "angular")])
def test_closed_form_metric_dp_and_sampler(noise: str, eps: float, gamma, metrics) -> None:
    emb = make_embedding()
    mech = Diffractor(emb, epsilon=eps, noise=noise, gamma=gamma, metrics=metrics, cache_dir=False)
    V = len(emb)
    orders = [brute_chain(emb.vectors, m) for m in metrics]
    mean = emb.vectors.astype(np.float64).mean(axis=0)
    rows = list(range(V)) + [-1]
    P, POS = {}, {}
    for w in rows:
        p = np.zeros(V)
        POS[w] = []
        for m, order in zip(metrics, orders):
            if w == -1:
                if m == "euclidean":
                    near = int(np.argmin(np.linalg.norm(emb.vectors - mean.astype(np.float32), axis=1)))
                else:
                    X = emb.vectors.astype(np.float64)
                    near = int(np.argmax((X @ mean) / np.linalg.norm(X, axis=1)))
                i = order.index(near)
            else:
                i = order.index(w)
            POS[w].append(i)
            pp = brute_position_probs(i, V, eps, noise, mech.gamma)
            p[order] += pp
        P[w] = p / len(metrics)
        np.testing.assert_allclose(mech.probabilities(w), P[w], rtol=1e-9, atol=1e-300)
    D = distance_matrix(mech, rows)
    for ia, a in enumerate(rows):
        for ib, b in enumerate(rows):
            assert D[ia, ib] == max(abs(x - y) for x, y in zip(POS[a], POS[b]))
    assert_metric_dp(mech.log_probability_rows(rows), D, eps)
    words = [0, 17, V - 1, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=9).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], P[w]) > P_MIN, (noise, eps, w)


def test_metric_dp_check_has_teeth_and_sampler_control_fails() -> None:
    emb = make_embedding()
    mech = Diffractor(emb, epsilon=1.0, cache_dir=False)
    # the one-list bound fails for a distance that ignores a second list
    two = Diffractor(emb, epsilon=1.0, metrics=("euclidean", "angular"), cache_dir=False)
    pos = np.array([two.positions(w) for w in range(30)])
    a, b = np.unravel_index(np.argmax(np.abs(pos[:, None, 1] - pos[None, :, 1]) - np.abs(pos[:, None, 0] - pos[None, :, 0])), (30, 30))
    d_first = abs(pos[a, 0] - pos[b, 0])
    assert metric_dp_excess(two.log_probability_rows([a, b]), np.array([[0, d_first], [d_first, 0]]), 1.0) > ATOL
    # wrong epsilon is detected by the frequency test
    out = mech.sample_ids(np.full(N_DRAWS, 12), rng=1)
    assert chi2_pvalue(out, Diffractor(emb, epsilon=1.15, cache_dir=False).probabilities(12)) < 1e-6


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_clamping_is_the_truncated_geometric_and_renormalizing_would_break_the_bound(eps: float) -> None:
    """Our boundary rule is the truncated geometric mechanism of Ghosh, Roughgarden & Sundararajan
    (mass beyond an end lands on that end), tight at ε per position. The other reading of
    "truncated" (restrict to the list and renormalize) is not ε·d-private: for adjacent positions
    at an end the ratio is e^ε·(1 + α − α²) (finite-list form below); docs/mechanisms/diffractor.md
    states the numbers."""
    emb = make_embedding()
    V = len(emb)
    mech = Diffractor(emb, epsilon=eps, cache_dir=False)
    order = mech.precompute()[0]
    Q = np.array([mech.probabilities(int(order[i]))[order] for i in range(V)])  # position -> position
    a = math.exp(-eps)
    i, j = np.meshgrid(np.arange(V), np.arange(V), indexing="ij")
    grs = (1 - a) / (1 + a) * a ** np.abs(j - i)
    grs[:, 0] = a ** np.arange(V) / (1 + a)
    grs[:, V - 1] = a ** (V - 1 - np.arange(V)) / (1 + a)
    np.testing.assert_allclose(Q, grs, rtol=1e-12)
    gap = np.abs(np.arange(V)[:, None] - np.arange(V)[None, :]).astype(float)
    np.fill_diagonal(gap, np.inf)
    lr = np.log(Q[:, None, :] / Q[None, :, :]).max(axis=2) / gap  # worst log-ratio per unit distance
    assert lr.max() == pytest.approx(eps, rel=1e-9)  # tight, never above
    R = a ** np.abs(j - i).astype(float)  # the renormalized restriction to the list
    R /= R.sum(axis=1, keepdims=True)
    lr_r = np.log(R[:, None, :] / R[None, :, :]).max(axis=2)
    z0 = (1 - a**V) / (1 - a)
    z1 = a + (1 - a ** (V - 1)) / (1 - a)
    assert lr_r[0, 1] == pytest.approx(math.log(z1 / (a * z0)), rel=1e-9)
    assert lr_r[0, 1] - eps == pytest.approx(math.log(1 + a - a * a), abs=1e-6)
    assert (lr_r / gap).max() > eps * (1 + 1e-3)
    assert (lr_r - eps * gap).max() <= math.log(1 + a) + 1e-9


def test_edges_and_interface(tmp_path) -> None:
    emb = make_embedding()
    huge = Diffractor(emb, epsilon=50.0, cache_dir=False)
    np.testing.assert_array_equal(huge.sample_ids(np.arange(30), rng=0), np.arange(30))
    tiny = Diffractor(emb, epsilon=1e-9, noise="tem", cache_dir=False)
    np.testing.assert_allclose(tiny.probabilities(4), 1 / 30, rtol=1e-6)
    one = Diffractor(Embedding(["a"], np.ones((1, 2), np.float32)), epsilon=1.0, cache_dir=False)
    np.testing.assert_array_equal(one.sample_ids([0, -1], rng=0), [0, 0])
    m = get_mechanism("diffractor", emb, epsilon=2.0, metrics=["euclidean", "angular"], cache_dir=tmp_path)
    out = m.sample_ids(np.array([[0, -1], [3, 29]]), rng=0)
    assert out.shape == (2, 2) and ((out >= 0) & (out < 30)).all()
    assert len(m.cache_files) == 2 and all(p.exists() for p in m.cache_files)
    assert "position" in m.guarantee.metric and "UNK" in m.guarantee.domain and "noise='geometric'" in repr(m)
    assert "zzz" not in m.privatize("w1 zzz", rng=0)
    for kwargs, exc in [
        (dict(noise="laplace"), ValueError),
        (dict(metrics=[]), TypeError),
        (dict(metrics=["cosine"]), ValueError),
        (dict(metrics=["euclidean", "euclidean"]), ValueError),
        (dict(gamma=-1.0), ValueError),
        (dict(beta=0.0), ValueError),
        (dict(cache_dir=5), TypeError),
    ]:
        with pytest.raises(exc):
            Diffractor(emb, epsilon=1.0, **kwargs)


def test_cli_params(tmp_path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    emb = make_embedding()
    vec = tmp_path / "emb.txt"
    vec.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(emb.words, emb.vectors)) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 qqq\n")
    out = tmp_path / "out.txt"
    res = CliRunner().invoke(
        cli, ["privatize", str(src), "-o", str(out), "-m", "diffractor", "-e", "1", "--embedding", str(vec), "--param", "noise=tem", "--param", 'metrics=["euclidean","angular"]', "--seed", "1"]
    )
    assert res.exit_code == 0, res.output
    assert len(out.read_text().split()) == 3 and "qqq" not in out.read_text()
    res = CliRunner().invoke(
        cli, ["privatize", str(src), "-o", str(out), "-m", "diffractor", "-e", "1", "--embedding", str(vec), "--param", 'starts=["w0","w9"]', "--param", "keep_stop_words=true", "--seed", "1"]
    )
    assert res.exit_code == 0, res.output


# -- several lists: one per embedding, several start words; stop words ---------------------------------


def _mixture(emb: Embedding, orders: list[list[int]], ref_points: list[np.ndarray], w: int, eps: float, noise: str, gamma: float) -> tuple[np.ndarray, list[int]]:
    """Brute force: the uniform mixture over lists of the per-list position distributions; UNK at the
    word nearest each list embedding's mean (Euclidean)."""
    V = len(emb)
    p = np.zeros(V)
    pos = []
    for order, X in zip(orders, ref_points):
        if w == -1:
            mean = X.astype(np.float64).mean(axis=0).astype(np.float32)
            near = int(np.argmin(np.linalg.norm(X - mean, axis=1)))
            i = order.index(near)
        else:
            i = order.index(w)
        pos.append(i)
        p[order] += brute_position_probs(i, V, eps, noise, gamma)
    return p / len(orders), pos


def _other_embedding(emb: Embedding, seed: int = 11) -> Embedding:
    """A second model over the same words plus extra ones, in another order (as a different file would be)."""
    rng = np.random.default_rng(seed)
    words = emb.words[::-1] + ["extra1", "extra2"]
    return Embedding(words, rng.standard_normal((len(words), 5)).astype(np.float32))


@pytest.mark.parametrize("noise,eps", [("geometric", 0.7), ("tem", 1.5)])
def test_one_list_per_embedding_closed_form_metric_dp_and_sampler(noise: str, eps: float) -> None:
    emb = make_embedding()
    other = _other_embedding(emb)
    mech = Diffractor(emb, epsilon=eps, noise=noise, lists=[emb, other], cache_dir=False)
    V = len(emb)
    X2 = np.array([other.vector(w) for w in emb.words])  # the second model's vectors, in the vocabulary's order
    orders = [brute_chain(emb.vectors, "euclidean"), brute_chain(X2, "euclidean")]
    np.testing.assert_array_equal(mech.precompute(), np.array(orders))
    rows = list(range(V)) + [-1]
    P, POS = {}, {}
    for w in rows:
        P[w], POS[w] = _mixture(emb, orders, [emb.vectors, X2], w, eps, noise, mech.gamma)
        np.testing.assert_allclose(mech.probabilities(w), P[w], rtol=1e-9, atol=1e-300)
    D = distance_matrix(mech, rows)
    want = np.array([[max(abs(x - y) for x, y in zip(POS[a], POS[b])) for b in rows] for a in rows])
    np.testing.assert_array_equal(D, want)  # d = max over the lists
    assert_metric_dp(mech.log_probability_rows(rows), D, eps)
    # control: the distance of the first list alone is not a valid bound for the mixture
    d_first = np.array([[abs(POS[a][0] - POS[b][0]) for b in rows] for a in rows], dtype=float)
    assert metric_dp_excess(mech.log_probability_rows(rows), d_first, eps) > ATOL
    words = [0, 13, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=21).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], P[w]) > P_MIN, (noise, w)
    # control: the first list alone does not fit the samples
    alone = Diffractor(emb, epsilon=eps, noise=noise, cache_dir=False)
    assert chi2_pvalue(out[1], alone.probabilities(13)) < 1e-6
    assert "2 word list(s)" in mech.guarantee.metric and mech.params["lists"] == [emb.fingerprint, other.restrict(words=emb.words).fingerprint]


def test_several_start_words_on_one_embedding() -> None:
    emb = make_embedding()
    eps = 1.0
    mech = Diffractor(emb, epsilon=eps, starts=["w0", "w7", 19], cache_dir=False)
    orders = [brute_chain(emb.vectors, "euclidean", s0) for s0 in (0, 7, 19)]
    np.testing.assert_array_equal(mech.precompute(), np.array(orders))
    rows = list(range(30)) + [-1]
    P = {w: _mixture(emb, orders, [emb.vectors] * 3, w, eps, "geometric", mech.gamma)[0] for w in rows}
    for w in rows:
        np.testing.assert_allclose(mech.probabilities(w), P[w], rtol=1e-9, atol=1e-300)
    assert_metric_dp(mech.log_probability_rows(rows), distance_matrix(mech, rows), eps)
    out = mech.sample_ids(np.full(N_DRAWS, 5), rng=2)
    assert chi2_pvalue(out, P[5]) > P_MIN
    assert chi2_pvalue(out, Diffractor(emb, epsilon=eps, starts=["w0", "w7"], cache_dir=False).probabilities(5)) < 1e-6  # control
    assert mech.params["starts"] == ["w0", "w7", "w19"] and "3 start words" in mech.guarantee.metric


def _exact_log_mixture(pairs: list[tuple[int, int]], V: int, eps: float) -> float:
    """log of (1/L)·Σ_l P_l[position i_l -> j_l] for the clamped two-sided geometric (the
    specification's truncated geometric), over the lists' (i_l, j_l), in 60-digit decimal
    arithmetic (no underflow)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    a = (-Decimal(eps)).exp()
    total = Decimal(0)
    for i, j in pairs:
        if j == 0:
            total += a**i / (1 + a)
        elif j == V - 1:
            total += a ** (V - 1 - i) / (1 + a)
        else:
            total += (1 - a) / (1 + a) * a ** abs(j - i)
    return float((total / len(pairs)).ln())


def test_log_probabilities_of_several_lists_are_exact_where_probabilities_underflow() -> None:
    emb = make_embedding()
    eps = 100.0  # e^(-100·k) underflows float64 from k = 8 positions: log space only
    mech = Diffractor(emb, epsilon=eps, starts=[0, 11], cache_dir=False)
    order = mech.precompute()
    V = len(emb)
    pos = np.argsort(order, axis=1)  # pos[l, word]
    for w in (0, 11, 22, -1):
        got = mech.log_probabilities(w)
        src = mech.positions(w)
        want = np.array([_exact_log_mixture([(int(src[l]), int(pos[l, y])) for l in range(2)], V, eps) for y in range(V)])
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert (mech.probabilities(w) == 0).sum() > 0  # the probabilities underflow where the logs do not
    # control: one list's log-probabilities differ from the mixture's
    one = Diffractor(emb, epsilon=eps, cache_dir=False)
    assert np.abs(one.log_probabilities(11) - mech.log_probabilities(11)).max() > 1.0


def test_keep_stop_words() -> None:
    words = ["the", "a", "of", "cat", "dog", "sat", "mat", "rug", "hat", "bat", "ran", "sun"]
    rng = np.random.default_rng(2)
    emb = Embedding(words, rng.standard_normal((len(words), 4)).astype(np.float32))
    kept = Diffractor(emb, epsilon=0.2, keep_stop_words=True, cache_dir=False)
    plain = Diffractor(emb, epsilon=0.2, cache_dir=False)
    assert kept.stop_word_ids.tolist() == [0, 1, 2]
    ids = np.arange(len(words)).repeat(3000)
    a, b = kept.sample_ids(ids, rng=8), plain.sample_ids(ids, rng=8)
    stop = ids < 3
    np.testing.assert_array_equal(a[stop], ids[stop])  # stop words verbatim
    np.testing.assert_array_equal(a[~stop], b[~stop])  # other words: the same draws as without the option
    assert (b[stop] != ids[stop]).mean() > 0.5  # control: without the option they are replaced
    assert kept.probabilities("of")[2] == 1.0
    np.testing.assert_array_equal(kept.probabilities("cat"), plain.probabilities("cat"))
    assert kept.distance(np.array([0]), np.array([5]))[0] == np.inf and not kept.finite_metric and plain.finite_metric
    rows = list(range(len(words))) + [-1]
    assert_metric_dp(kept.log_probability_rows(rows), distance_matrix(kept, rows), 0.2)
    assert "stop words are released verbatim" in kept.guarantee.domain and kept.params["keep_stop_words"] is True
    assert kept.privatize("the cat sat", rng=0).split()[0] == "the"


def test_lists_and_starts_validation() -> None:
    emb = make_embedding()
    partial = Embedding(emb.words[:10], emb.vectors[:10])
    with pytest.raises(ValueError, match="lacks 20 of the vocabulary"):
        Diffractor(emb, epsilon=1.0, lists=[emb, partial], cache_dir=False)
    for kwargs, exc in [
        (dict(lists=[]), TypeError),
        (dict(lists=emb), TypeError),
        (dict(lists=["emb.txt"]), TypeError),
        (dict(starts=[]), TypeError),
        (dict(starts=[0, 0]), ValueError),
        (dict(starts=30), ValueError),
        (dict(starts=[1.5]), TypeError),
        (dict(keep_stop_words="yes"), TypeError),
        (dict(stop_words=["the"]), ValueError),
    ]:
        with pytest.raises(exc):
            Diffractor(emb, epsilon=1.0, cache_dir=False, **kwargs)
    with pytest.raises(KeyError):
        Diffractor(emb, epsilon=1.0, starts="nope", cache_dir=False)


def test_several_lists_cache_files_and_pickling(tmp_path) -> None:
    import pickle

    emb = make_embedding()
    other = _other_embedding(emb)
    m = Diffractor(emb, epsilon=1.0, lists=[emb, other], starts=[0, 4], cache_dir=tmp_path)
    out = m.sample_ids(np.arange(30).repeat(10), rng=1)
    assert len(m.cache_files) == 4 and len({p.name for p in m.cache_files}) == 4
    again = Diffractor(emb, epsilon=1.0, lists=[emb, other], starts=[0, 4], cache_dir=tmp_path)
    np.testing.assert_array_equal(again.precompute(), m.precompute())
    clone = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(clone.sample_ids(np.arange(30).repeat(10), rng=1), out)
