"""CusText: output sets (every word covered, against an independent emulation of the authors'
construction with placeholder vectors), closed form vs brute force, ε-DP on all pairs inside each
set (with a control that must fail), exact sampling (chi-square), cosine similarity, the completed
last set, CusText+ stop words, OOV, registry and CLI."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from deniable import DeniableWarning, Embedding, get_mechanism
from deniable.mechanisms.custext import CusText, build_output_sets
from deniable.text.stopwords import english_stop_words

from ._metric_dp import assert_metric_dp, distance_matrix, log_rows, metric_dp_excess

N_DRAWS = 60_000
P_MIN = 1e-4


def make_embedding(n: int = 47, dim: int = 4, seed: int = 1) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def _scores(x: np.ndarray, Y: np.ndarray, metric: str) -> np.ndarray:
    """Similarity of vector x to the rows of Y, as the authors compute it: −Euclidean distance, or
    the dot product of unit vectors (a zero row, the cosine placeholder, scores 0); the angle for
    our angular variant."""
    x = x.astype(np.float64)
    Y = Y.astype(np.float64)
    if metric == "euclidean":
        return -np.sqrt(((Y - x) ** 2).sum(axis=1))
    norms = np.linalg.norm(Y, axis=1)
    cos = np.where(norms > 0, (Y @ x) / np.where(norms > 0, norms, 1.0) / np.linalg.norm(x), 0.0)
    if metric == "cosine":
        return cos
    if not np.all(norms > 0):  # the angle to the zero placeholder: π/2
        return np.where(norms > 0, _scores(x, np.where(norms[:, None] > 0, Y, 1.0), metric), -np.pi / 2)
    u, v = x / np.linalg.norm(x), Y / norms[:, None]
    return -2 * np.arctan2(np.linalg.norm(v - u, axis=1), np.linalg.norm(v + u, axis=1))  # the angle, accurate near 0


def authors_sets(X: np.ndarray, K: int, metric: str = "euclidean", complete: bool = True) -> list[tuple[list[int], list[int]]]:
    """The conservative mapping emulated from the specification: heads in order; each takes the K
    most similar words of the current matrix, in which every used word's vector is overwritten by
    the placeholder (10⁹·𝟙, or zero for the angle/cosine). Ties among placeholders: the used word
    nearest the head by its real vector, then by id. Returns (members, placeholders) per set."""
    X = X.astype(np.float64)
    V = len(X)
    ph_vec = np.full(X.shape[1], 1e9) if metric == "euclidean" else np.zeros(X.shape[1])
    used = np.zeros(V, dtype=bool)
    out = []
    for h in range(V):
        if used[h]:
            continue
        cur = np.where(used[:, None], ph_vec, X)
        s = _scores(X[h], cur, metric) if complete else np.where(used, -np.inf, _scores(X[h], X, metric))
        real = _scores(X[h], X, metric)
        order = sorted(range(V), key=lambda j: (-s[j], used[j], -real[j], j))
        top = [j for j in order[:K] if complete or not used[j]]
        members = [j for j in top if not used[j]]
        out.append((members, [j for j in top if used[j]]))
        used[members] = True
    return out


def authors_probs(x: np.ndarray, X: np.ndarray, members: list[int], placeholders: list[int], eps: float, metric: str = "euclidean") -> np.ndarray:
    """P[M(x) = ·] as the authors compute it: min-max normalized similarity to the set's vectors
    (placeholders: the overwritten vector), exp(ε·u/2), normalized."""
    ph_vec = np.full(X.shape[1], 1e9) if metric == "euclidean" else np.zeros(X.shape[1])
    words = members + placeholders
    Y = np.array([X[j].astype(np.float64) for j in members] + [ph_vec] * len(placeholders)).reshape(len(words), X.shape[1])
    s = _scores(x, Y, metric)
    u = (s - s.min()) / (s.max() - s.min()) if s.max() > s.min() else np.ones_like(s)
    w = np.exp(eps * u / 2)
    p = np.zeros(len(X))
    p[words] = w / w.sum()
    return p


def chi2_pvalue(samples: np.ndarray, p: np.ndarray) -> float:
    obs = np.bincount(samples, minlength=p.size).astype(float)
    assert obs[p == 0].sum() == 0, "sampled an output of probability 0"
    exp = p * samples.size
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep]).pvalue)


@pytest.mark.parametrize("metric", ["euclidean", "angular", "cosine"])
@pytest.mark.parametrize("K", [1, 5, 20])
@pytest.mark.parametrize("complete", [True, False])
def test_output_sets_cover_every_word_and_match_the_authors_construction(K: int, metric: str, complete: bool) -> None:
    emb = make_embedding()
    members = build_output_sets(emb, K, metric, complete=complete, k_lists=3, cache_dir=False)  # short lists: exact-scan fallback
    want = authors_sets(emb.vectors, K, metric, complete)
    assert len(members) == len(want)
    for row, (mem, ph) in zip(members, want):
        assert sorted(row[row >= 0].tolist()) == sorted(mem + ph)
    firsts = {}
    for g, row in enumerate(members):
        for w in row[row >= 0].tolist():
            firsts.setdefault(w, g)
    assert sorted(firsts) == list(range(len(emb)))  # every word has a set (the first row holding it)
    np.testing.assert_array_equal(members, build_output_sets(emb, K, metric, complete=complete, k_lists=128, cache_dir=False))
    sizes = np.count_nonzero(members >= 0, axis=1)
    if complete:
        assert (sizes == K).all()  # 47 = 9·5 + 2 and 2·20 + 7: the last set is completed to K
    else:
        assert (sizes[:-1] == K).all() or metric != "euclidean"


def test_completion_matters_the_partial_last_set_can_be_a_single_word() -> None:
    emb = make_embedding(n=41)  # 41 = 2·20 + 1: without completion the last word is alone
    partial = CusText(emb, epsilon=1.0, K=20, complete_sets=False, cache_dir=False)
    full = CusText(emb, epsilon=1.0, K=20, cache_dir=False)
    last = int(partial.precompute()[-1][0])
    assert partial.output_set(last) == [f"w{last}"] and partial.probabilities(last)[last] == 1.0  # never replaced
    p = full.probabilities(last)
    assert len(full.output_set(last)) == 20 and p[last] < 0.2
    # the authors' placeholders (19 used words at 10⁹·𝟙) get u = 0, the word itself u = 1
    np.testing.assert_allclose(p[last], np.exp(0.5) / (np.exp(0.5) + 19), rtol=1e-9)


@pytest.mark.parametrize("metric", ["euclidean", "angular", "cosine"])
@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_closed_form_and_dp_inside_every_set(eps: float, metric: str) -> None:
    emb = make_embedding()
    K = 6
    mech = CusText(emb, epsilon=eps, K=K, metric=metric, cache_dir=False)
    sets = authors_sets(emb.vectors, K, metric)
    X = emb.vectors
    mean = X.astype(np.float64).mean(axis=0).astype(np.float32)
    P = {}
    for mem, ph in sets:
        for x in mem:
            P[x] = authors_probs(X[x], X, mem, ph, eps, metric)
            np.testing.assert_allclose(mech.probabilities(x), P[x], rtol=1e-9, atol=1e-15)
            assert sorted(mech.output_set(x)) == sorted(f"w{j}" for j in mem + ph)
    near = _scores(mean, X, metric).argmax()
    unk_mem, unk_ph = next(s for s in sets if near in s[0])
    P[-1] = authors_probs(mean, X, unk_mem, unk_ph, eps, metric)
    np.testing.assert_allclose(mech.probabilities(-1), P[-1], rtol=1e-9, atol=1e-15)
    rows = list(P)
    assert_metric_dp(mech.log_probability_rows(rows), distance_matrix(mech, rows), eps)  # ∞ across sets: no bound
    worst = 0.0
    for a in P:
        for b in P:
            d = mech.distance(np.array([a]), np.array([b]))[0]
            if np.isfinite(d):
                m = (P[a] > 0) & (P[b] > 0)
                worst = max(worst, float(np.max(np.log(P[a][m] / P[b][m]))))
    assert worst > 0.5 * eps  # the bound is approached
    # control: scores without the 1/2 (exp(eps*u)) break the bound inside some set
    bad_excess = -np.inf
    for mem, ph in sets:
        if len(mem) < 2:
            continue
        Q = [authors_probs(X[x], X, mem, ph, 2 * eps, metric) for x in mem]
        bad_excess = max(bad_excess, metric_dp_excess(log_rows(Q), 1.0 - np.eye(len(mem)), eps))  # d = 1 inside a set
    assert bad_excess > np.log(1.01)


def test_cosine_scores_differ_from_the_angle_on_the_same_sets() -> None:
    emb = make_embedding()
    cos = CusText(emb, epsilon=3.0, K=8, metric="cosine", cache_dir=False)
    ang = CusText(emb, epsilon=3.0, K=8, metric="angular", cache_dir=False)
    np.testing.assert_array_equal(cos.precompute(), ang.precompute())
    gaps = [np.abs(cos.probabilities(w) - ang.probabilities(w)).max() for w in range(47)]
    assert max(gaps) > 1e-3  # min-max of cos(θ) is not min-max of θ


def test_sampler_is_exact_and_control_fails() -> None:
    emb = make_embedding()
    mech = CusText(emb, epsilon=2.0, K=8, cache_dir=False)
    words = [0, 9, 46, -1]
    out = mech.sample_ids(np.repeat(words, N_DRAWS), rng=3).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], mech.probabilities(w)) > P_MIN, w
    wrong = CusText(emb, epsilon=2.3, K=8, cache_dir=False)
    assert chi2_pvalue(out[0], wrong.probabilities(0)) < 1e-6


def test_extremes() -> None:
    emb = make_embedding()
    one = CusText(emb, epsilon=1.0, K=1, cache_dir=False)  # every word is its own set: identity
    ids = np.arange(47)
    np.testing.assert_array_equal(one.sample_ids(ids, rng=0), ids)
    big = CusText(emb, epsilon=1e-9, K=100, cache_dir=False)  # one set, near-uniform
    np.testing.assert_allclose(big.probabilities(3), 1 / 47, rtol=1e-6)
    assert big.distance(np.array([0]), np.array([40]))[0] == 1.0


def test_interface_cache_registry_repr(tmp_path) -> None:
    emb = make_embedding()
    m = get_mechanism("custext", emb, epsilon=3.0, K=5, cache_dir=tmp_path)
    assert isinstance(m, CusText)
    out = m.sample_ids(np.array([[0, -1], [5, 46]]), rng=0)
    assert out.shape == (2, 2) and ((out >= 0) & (out < 47)).all()
    assert m.cache_file is not None and m.cache_file.exists()
    m2 = CusText(emb, epsilon=1.0, K=5, cache_dir=tmp_path)
    np.testing.assert_array_equal(m2.precompute(), m.precompute())
    g = m.guarantee
    assert g.epsilon == 3.0 and "output set" in g.metric and "UNK" in g.domain
    assert "CusText(epsilon=3" in repr(m) and "K=5" in repr(m)
    assert m.privacy_loss_bound(0, 0) == 0.0
    text = m.privatize("w1 zzz", rng=0)
    assert "zzz" not in text
    for kwargs, exc in [
        (dict(K=0), ValueError),
        (dict(K=2.0), TypeError),
        (dict(metric="manhattan"), ValueError),
        (dict(cache_dir=1), TypeError),
        (dict(complete_sets="yes"), TypeError),
        (dict(keep_stop_words=1), TypeError),
        (dict(stop_words=["the"]), ValueError),
        (dict(keep_stop_words=True, stop_words="the"), TypeError),
    ]:
        with pytest.raises(exc):
            CusText(emb, epsilon=1.0, **kwargs)


def test_scores_are_cached_next_to_their_output_sets(tmp_path, monkeypatch) -> None:
    """The ε-free scores of every row are computed once per embedding, metric, K and output
    sets: a second mechanism (any ε) loads them and samples exactly as the first; scores stored
    for other output sets, or an unreadable file, are computed again; nothing is stored with an
    exclusion list or cache_dir=False."""
    emb = make_embedding()
    first = CusText(emb, epsilon=3.0, K=5, cache_dir=tmp_path)
    fresh = CusText(emb, epsilon=3.0, K=5, cache_dir=False)
    ids = np.tile(np.arange(-1, 47), 40)
    out = first.sample_ids(ids, rng=5)
    path = first._scores_path()
    assert path is not None and path.exists() and path.parent == tmp_path
    np.testing.assert_array_equal(first._get_cum(), fresh._get_cum())  # cached scores: the same tables
    computed = []
    real = CusText._scores

    def counting(self, rows):
        computed.append(rows.size)
        return real(self, rows)

    monkeypatch.setattr(CusText, "_scores", counting)
    again = CusText(emb, epsilon=3.0, K=5, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.sample_ids(ids, rng=5), out)
    other_eps = CusText(emb, epsilon=1.0, K=5, cache_dir=tmp_path)
    np.testing.assert_array_equal(other_eps._get_cum(), CusText(emb, epsilon=1.0, K=5, cache_dir=False)._get_cum())
    assert sum(computed) == 48  # only the fresh one's rows (47 words and UNK)
    computed.clear()
    with np.load(path) as z:  # scores stored for other output sets: computed again
        np.savez(path, scores=z["scores"], members_sha256=np.array("0" * 64))
    np.testing.assert_array_equal(CusText(emb, epsilon=3.0, K=5, cache_dir=tmp_path).sample_ids(ids, rng=5), out)
    assert sum(computed) == 48
    path.write_bytes(b"not a zip")
    with pytest.warns(DeniableWarning, match="unreadable cache file"):
        np.testing.assert_array_equal(CusText(emb, epsilon=3.0, K=5, cache_dir=tmp_path).sample_ids(ids, rng=5), out)
    excluded = CusText(emb, epsilon=3.0, K=5, cache_dir=tmp_path, exclude_outputs=["w3"])
    assert excluded._scores_path() is None and fresh._scores_path() is None


def test_angular_metric() -> None:
    emb = make_embedding()
    m = CusText(emb, epsilon=2.0, K=4, metric="angular", cache_dir=False)
    members = m.precompute()
    assert np.unique(members[members >= 0]).tolist() == list(range(47))
    out = m.sample_ids(np.full(N_DRAWS, 7), rng=2)
    assert chi2_pvalue(out, m.probabilities(7)) > P_MIN


def test_cosine_sampler_and_completed_set_are_exact() -> None:
    emb = make_embedding(n=41)
    m = CusText(emb, epsilon=2.0, K=20, metric="cosine", cache_dir=False)
    last = int(m.precompute()[-1][0])
    words = [0, last, -1]
    out = m.sample_ids(np.repeat(words, N_DRAWS), rng=4).reshape(len(words), N_DRAWS)
    for j, w in enumerate(words):
        assert chi2_pvalue(out[j], m.probabilities(w)) > P_MIN, w
    # control: the angle's scores on the same sets are rejected
    assert chi2_pvalue(out[0], CusText(emb, epsilon=2.0, K=20, metric="angular", cache_dir=False).probabilities(0)) < 1e-6


def test_custext_plus_keeps_stop_words_and_only_them() -> None:
    words = ["the", "a", "of", "The", "cat", "dog", "sat", "mat", "rug", "hat", "bat", "ran"]
    rng = np.random.default_rng(7)
    emb = Embedding(words, rng.standard_normal((len(words), 4)).astype(np.float32))
    plus = CusText(emb, epsilon=0.1, K=4, keep_stop_words=True, cache_dir=False)
    base = CusText(emb, epsilon=0.1, K=4, cache_dir=False)
    assert [emb.words[i] for i in plus.stop_word_ids] == ["the", "a", "of", "The"]  # cased vocabulary: Title forms too
    ids = np.arange(len(words)).repeat(2000)
    out_plus, out_base = plus.sample_ids(ids, rng=5), base.sample_ids(ids, rng=5)
    stop = np.isin(ids, plus.stop_word_ids)
    np.testing.assert_array_equal(out_plus[stop], ids[stop])  # kept verbatim
    np.testing.assert_array_equal(out_plus[~stop], out_base[~stop])  # the others: the same draws as CusText
    assert (out_base[stop] != ids[stop]).mean() > 0.5  # control: CusText replaces them at this epsilon
    assert plus.probabilities("the")[0] == 1.0 and plus.output_set("of") == ["of"]
    np.testing.assert_array_equal(plus.probabilities("cat"), base.probabilities("cat"))
    assert plus.distance(np.array([0]), np.array([4]))[0] == np.inf and not plus.finite_metric
    assert "stop words are released verbatim" in plus.guarantee.domain and "keep_stop_words=True" in repr(plus)
    rows = list(range(len(words))) + [-1]
    assert_metric_dp(plus.log_probability_rows(rows), distance_matrix(plus, rows), 0.1)
    mine = CusText(emb, epsilon=0.1, K=4, keep_stop_words=True, stop_words=["cat"], cache_dir=False)
    assert mine.stop_word_ids.tolist() == [4] and "stop_words" in mine.params
    assert plus.privatize("the cat", rng=0).split()[0] == "the"


def test_shipped_stop_word_list() -> None:
    sw = english_stop_words()
    assert len(sw) == 179 and len(set(sw)) == 179 and {"the", "i", "don", "t", "wouldn't"} <= set(sw)
    assert all(w == w.lower() for w in sw)


def test_cli_params(tmp_path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    emb = make_embedding()
    vec = tmp_path / "emb.txt"
    vec.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(emb.words, emb.vectors)) + "\n")
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 qqq\n")
    out = tmp_path / "out.txt"
    res = CliRunner().invoke(cli, ["privatize", str(src), "-o", str(out), "-m", "custext", "-e", "2", "--embedding", str(vec), "--param", "K=5", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert len(out.read_text().split()) == 3 and "qqq" not in out.read_text()
    words = ["the", "cat", "sat", "mat", "rug", "hat"]
    vec2 = tmp_path / "emb2.txt"
    vec2.write_text("\n".join(w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in zip(words, emb.vectors[:6])) + "\n")
    src.write_text("the cat\n" * 50)
    res = CliRunner().invoke(
        cli, ["privatize", str(src), "-o", str(out), "-m", "custext", "-e", "0.1", "--embedding", str(vec2), "--param", "K=6", "--param", "metric=cosine", "--param", "keep_stop_words=true"]
    )
    assert res.exit_code == 0, res.output
    first = [line.split()[0] for line in out.read_text().splitlines()]
    assert first == ["the"] * 50  # CusText+: the stop word is kept
