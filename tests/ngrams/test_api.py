"""The n-gram API: the formal functions, the paper's namespace, and the deprecated entry points.

The deprecated ``release`` (and the old names) must give exactly what the function it names gives
for the same seed, and warn with that name.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from deniable import ngrams
from deniable.errors import PrivacyWarning
from deniable.ngrams import paper

TEXTS = ["a b c", "c d e", "b c d", "a b", "d e a b", "b c", "a b c d e", "e a", "a b c d", "c d e a b", "b c d e", "e a b c"]


@pytest.fixture(scope="module")
def data():
    vocab = ngrams.build_vocabulary(ngrams.count_public(["a b c d e. a b c d. b c d e a. e a b"], 2), n=2)
    users = ngrams.count_users([(f"u{i}", t) for i, t in enumerate(TEXTS * 10 + ["a b"] * 300)], vocab)
    return users, vocab


NUMPY = dict(sampler="numpy")
EPS = 8.0  # large enough that the tuned releases leave the prior, so different seeds give different outputs
GRID = dict(S_grid=[0.1, 1.0], rho_grid=[0.3, 0.9])
# (deprecated release kwargs, the replacement's name in the warning, the replacement on (users, vocab, seed))
PAIRS = [
    (dict(NUMPY), "release_bayesian", lambda u, v, s: ngrams.release_bayesian(u, v, epsilon=EPS, delta=1e-6, sampler="numpy", rng=s)),
    (dict(NUMPY, S=0.5), "release_bayesian", lambda u, v, s: ngrams.release_bayesian(u, v, epsilon=EPS, delta=1e-6, S=0.5, sampler="numpy", rng=s)),
    (dict(NUMPY, tune=False), "release_bayesian", lambda u, v, s: ngrams.release_bayesian(u, v, epsilon=EPS, delta=1e-6, S=1.0, rho=0.5, sampler="numpy", rng=s)),
    (dict(NUMPY, tune=True, S=3.0, **GRID), "release_bayesian", lambda u, v, s: ngrams.release_bayesian(u, v, epsilon=EPS, delta=1e-6, sampler="numpy", rng=s, **GRID)),
    (
        dict(NUMPY, C=2, max_ngrams_per_user=3, sensitivity=9.0, S=0.3),
        "release_bayesian",
        lambda u, v, s: ngrams.release_bayesian(u, v, epsilon=EPS, delta=1e-6, C=2, max_ngrams_per_user=3, sensitivity=9.0, S=0.3, sampler="numpy", rng=s),
    ),
    (dict(NUMPY, mechanism="laplace", C=2, max_ngrams_per_user=3), "release_laplace", lambda u, v, s: ngrams.release_laplace(u, epsilon=EPS, C=2, max_ngrams_per_user=3, sampler="numpy", rng=s)),
    (dict(NUMPY, mechanism="laplace", W=3.0), "release_laplace", lambda u, v, s: ngrams.release_laplace(u, epsilon=EPS, W=3.0, sampler="numpy", rng=s)),
    (dict(NUMPY, mechanism="laplace-public", W=2.0), "release_laplace", lambda u, v, s: ngrams.release_laplace(u, v, epsilon=EPS, W=2.0, sampler="numpy", rng=s)),
    (dict(local_sensitivity=True, S=0.2, C=2), "paper.bayesian_not_dp", lambda u, v, s: paper.bayesian_not_dp(u, v, epsilon=EPS, delta=1e-6, S=0.2, C=2, rng=s)),
    (dict(local_sensitivity=True, sensitivity="claim1"), "paper.bayesian_not_dp", lambda u, v, s: paper.bayesian_not_dp(u, v, epsilon=EPS, delta=1e-6, sensitivity="claim1", rng=s)),
    (
        dict(local_sensitivity=True, tune=True, score="expected", **GRID),
        "paper.bayesian_tuned_not_dp",
        lambda u, v, s: paper.bayesian_tuned_not_dp(u, v, epsilon=EPS, delta=1e-6, score="expected", rng=s, **GRID),
    ),
    (dict(mechanism="laplace", W="paper-rule"), "paper.laplace_not_dp", lambda u, v, s: paper.laplace_not_dp(u, epsilon=EPS, rng=s)),
    (
        dict(mechanism="laplace-public", W="paper-rule"),
        "paper.laplace_public_not_dp",
        lambda u, v, s: paper.laplace_public_not_dp(u, v, epsilon=EPS, W="paper-rule", sensitivity=2.0, rng=s),
    ),
    (dict(mechanism="laplace-public", W=3.0, local_sensitivity=True), "paper.laplace_public_not_dp", lambda u, v, s: paper.laplace_public_not_dp(u, v, epsilon=EPS, W=3.0, rng=s)),
    (dict(mechanism="k-anonymity", K=2), "paper.k_anonymity_not_dp", lambda u, v, s: paper.k_anonymity_not_dp(u, K=2)),
]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _same(a: ngrams.Release, b: ngrams.Release) -> None:
    np.testing.assert_array_equal(a.probabilities, b.probabilities)
    assert (a.keys, a.mechanism, a.guarantee, a.formal_dp, a.sigma, a.laplace_scale, a.sampler) == (b.keys, b.mechanism, b.guarantee, b.formal_dp, b.sigma, b.laplace_scale, b.sampler)
    assert a.diagnostics == b.diagnostics
    assert {k: v for k, v in a.params.items() if k != "n"} == {k: v for k, v in b.params.items() if k != "n"}


@pytest.mark.parametrize("old,name,new", PAIRS, ids=[f"{p[1]}-{i}" for i, p in enumerate(PAIRS)])
def test_deprecated_release_gives_the_new_functions_output(data, old, name, new):
    users, vocab = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rel = ngrams.release(users, vocab, epsilon=EPS, delta=1e-6, rng=3, **old)
    deprecations = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert deprecations == [f"deniable.ngrams.release is deprecated; use deniable.ngrams.{name}" + (" (NOT DP)" if name.startswith("paper.") else "")]
    assert all(w.filename == __file__ for w in caught if w.category in (DeprecationWarning, PrivacyWarning))  # points at the caller
    _same(rel, _quiet(new, users, vocab, 3))
    assert rel.params["n"] == 2  # the NgramVocabulary's n-gram order, recorded as before
    assert rel.formal_dp is (not name.startswith("paper."))
    if name != "paper.k_anonymity_not_dp":  # control: the comparison can fail (another seed, another output)
        assert not np.array_equal(rel.probabilities, _quiet(new, users, vocab, 4).probabilities)


def test_deprecated_release_still_refuses_what_it_refused(data):
    users, vocab = data
    with pytest.raises(ValueError, match="W applies to the Laplace"):
        _quiet(ngrams.release, users, vocab, epsilon=1.0, delta=1e-6, W=3.0)
    with pytest.raises(ValueError, match="tune applies"):
        _quiet(ngrams.release, users, vocab, epsilon=1.0, delta=1e-6, mechanism="laplace", tune=True)
    with pytest.raises(TypeError, match="local_sensitivity"):
        _quiet(ngrams.release, users, vocab, epsilon=1.0, delta=1e-6, local_sensitivity="yes")
    with pytest.raises(ValueError, match="deniable.ngrams.paper"):  # a local sensitivity without the paper's flag
        _quiet(ngrams.release, users, vocab, epsilon=1.0, delta=1e-6, sensitivity="exact")


@pytest.mark.parametrize(
    "old,replacement,new,kwargs",
    [
        ("formal_bayesian", "release_bayesian", ngrams.release_bayesian, dict(epsilon=1.0, delta=1e-6, S=0.4, sampler="numpy")),
        ("formal_laplace", "release_laplace", ngrams.release_laplace, dict(epsilon=1.0, sampler="numpy")),
        ("bayesian_dp", "paper.bayesian_not_dp", paper.bayesian_not_dp, dict(epsilon=1.0, delta=1e-6)),
        ("end_to_end_dp", "paper.bayesian_tuned_not_dp", paper.bayesian_tuned_not_dp, dict(epsilon=1.0, delta=1e-6, **GRID)),
    ],
)
def test_deprecated_names_are_aliases_that_warn(data, old, replacement, new, kwargs):
    users, vocab = data
    args = (users,) if old == "formal_laplace" else (users, vocab)
    assert old not in ngrams.__all__  # importable, not advertised
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with pytest.deprecated_call(match=f"deniable.ngrams.{old} is deprecated; use deniable.ngrams.{replacement}$"):
            rel = getattr(ngrams, old)(*args, rng=5, **kwargs)
    _same(rel, _quiet(new, *args, rng=5, **kwargs))


def test_formal_bayesian_and_laplace_public_aliases_map_their_arguments(data):
    users, vocab = data
    with pytest.deprecated_call(match="release_bayesian"):
        tuned = ngrams.formal_bayesian(users, vocab, epsilon=1.0, delta=1e-6, tune=True, S=7.0, sampler="numpy", rng=2, **GRID)
    _same(tuned, ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6, sampler="numpy", rng=2, **GRID))
    with pytest.deprecated_call(match="release_laplace"):
        lp = ngrams.formal_laplace_public(users, vocab, epsilon=1.0, W=2.0, sampler="numpy", rng=2)
    _same(lp, ngrams.release_laplace(users, vocab, epsilon=1.0, W=2.0, sampler="numpy", rng=2))
    assert lp.mechanism == "laplace-public"


def test_formal_functions_take_only_what_a_formal_release_needs():
    bayes = set(inspect.signature(ngrams.release_bayesian).parameters)
    lap = set(inspect.signature(ngrams.release_laplace).parameters)
    paper_only = {"local_sensitivity", "calibration", "score", "tune_fraction", "mechanism", "K", "tune"}
    assert not paper_only & bayes and not paper_only & lap
    assert {"epsilon", "delta", "C", "max_ngrams_per_user", "public_counts", "rng"} <= bayes
    assert "delta" not in lap and {"epsilon", "W", "C", "max_ngrams_per_user", "rng"} <= lap  # (ε, 0)-DP
    for fn in (ngrams.release_bayesian, ngrams.release_laplace):
        doc = inspect.getdoc(fn)
        assert "Guarantee: (ε, " in doc and "ngram_bayesian_dp.txt" in doc and "§" in doc
    assert {"release_bayesian", "release_laplace"} <= set(ngrams.__all__)


def test_paper_namespace_says_plainly_it_is_not_dp(data):
    users, vocab = data
    names = [n for n in paper.__all__ if callable(getattr(paper, n))]
    assert names and all(n.endswith("_not_dp") for n in names)
    assert "NONE of these is differentially private" in paper.__doc__
    assert "paper" not in ngrams.__all__ and not any(n in ngrams.__all__ or hasattr(ngrams, n) for n in names)  # reached only as ngrams.paper.*
    calls = {
        "bayesian_not_dp": lambda: paper.bayesian_not_dp(users, vocab, epsilon=1.0, delta=1e-6, rng=0),
        "bayesian_tuned_not_dp": lambda: paper.bayesian_tuned_not_dp(users, vocab, epsilon=1.0, delta=1e-6, rng=0, **GRID),
        "laplace_not_dp": lambda: paper.laplace_not_dp(users, epsilon=1.0, rng=0),
        "laplace_public_not_dp": lambda: paper.laplace_public_not_dp(users, vocab, epsilon=1.0, W=3.0, rng=0),
        "k_anonymity_not_dp": lambda: paper.k_anonymity_not_dp(users, K=2),
    }
    assert set(calls) == set(names)
    for name, call in calls.items():
        with pytest.warns(PrivacyWarning, match="NOT"):
            rel = call()
        assert rel.formal_dp is False and "NOT" in rel.guarantee, name
        assert "NOT DP" in inspect.getdoc(getattr(paper, name)), name
    # a configuration that would be formal is refused, naming the formal API
    with pytest.raises(ValueError, match="release_laplace"):
        paper.laplace_public_not_dp(users, vocab, epsilon=1.0, W=3.0, sensitivity=2.0)
