"""Exact O(nnz) sensitivity vs the brute-force remove-one-user recomputation; Claim 1 >= exact."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from deniable import ngrams
from deniable.errors import PrivacyWarning
from deniable.ngrams import paper
from deniable.ngrams.sensitivity import brute_force_sensitivity, claim1_bound, exact_sensitivity, per_user_sensitivity


def random_counts(seed: int, users: int, vocab: int, density: float = 0.4, high: int = 5) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.integers(1, high, size=(users, vocab)) * (rng.random((users, vocab)) < density)
    return sp.csr_matrix(dense)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("S,C", [(0.01, 1), (0.3, 1), (1.0, 1), (2.5, 3), (100.0, 2), (0.7, 2)])
def test_exact_equals_brute_force(seed, S, C):
    rng = np.random.default_rng(1000 + seed)
    m = ngrams.clamp_counts(random_counts(seed, int(rng.integers(2, 14)), int(rng.integers(2, 12))), C)
    bf_max, bf = brute_force_sensitivity(m, S, C)
    per = per_user_sensitivity(m, S, C, chunk_nnz=3)  # tiny chunks exercise the chunking
    np.testing.assert_allclose(per, bf, rtol=1e-10, atol=1e-12)
    assert exact_sensitivity(m, S, C) == pytest.approx(bf_max, rel=1e-10, abs=1e-12)
    if m.nnz:
        assert claim1_bound(m, S, C) >= bf_max * (1 - 1e-12)


def test_claim1_never_below_exact_on_skewed_data():
    rng = np.random.default_rng(7)
    for _trial in range(30):
        users, vocab = int(rng.integers(2, 40)), int(rng.integers(2, 30))
        dense = rng.zipf(1.5, size=(users, vocab)) * (rng.random((users, vocab)) < rng.uniform(0.05, 0.9))
        for C in (1, 3):
            m = ngrams.clamp_counts(sp.csr_matrix(dense), C)
            if not m.nnz:
                continue
            for S in (1e-3, 0.05, 0.5, 1.0, 1e4):
                assert claim1_bound(m, S, C) >= exact_sensitivity(m, S, C) * (1 - 1e-12)


def test_claim1_needs_integer_like_counts():
    with pytest.raises(ValueError, match=">= 1"):
        claim1_bound(sp.csr_matrix(np.array([[0.5, 1.0]])), 1.0, 1.0)


def test_chunk_size_does_not_change_result():
    m = ngrams.clamp_counts(random_counts(3, 200, 50, 0.2), 2)
    a = per_user_sensitivity(m, 0.4, 2, chunk_nnz=1 << 22)
    b = per_user_sensitivity(m, 0.4, 2, chunk_nnz=17)
    np.testing.assert_allclose(a, b, rtol=1e-13)


def test_users_without_vocabulary_ngrams_have_zero_sensitivity():
    m = sp.csr_matrix(np.array([[1, 0], [0, 0], [1, 1]]))
    per = per_user_sensitivity(m, 1.0, 1.0)
    assert per[1] == 0.0 and per[0] > 0


def test_release_reports_sensitivity_and_method():
    m = ngrams.clamp_counts(random_counts(5, 20, 15), 1)
    alpha = np.arange(15, dtype=float)
    with pytest.warns(PrivacyWarning):
        ex = paper.bayesian_not_dp(m, alpha, epsilon=0.5, delta=1e-6, S=0.5, rho=0.4, C=1, rng=0)
    with pytest.warns(PrivacyWarning):
        c1 = paper.bayesian_not_dp(m, alpha, epsilon=0.5, delta=1e-6, S=0.5, rho=0.4, C=1, sensitivity="claim1", rng=0)
    assert not ex.formal_dp and not c1.formal_dp  # both are local sensitivities of this data
    assert ex.sensitivity_method == "exact" and c1.sensitivity_method == "claim1"
    assert ex.sensitivity == pytest.approx(0.4 * exact_sensitivity(m, 0.5, 1))
    assert c1.sensitivity >= ex.sensitivity and c1.sigma >= ex.sigma
    assert ex.calibration == "analytic"
    assert ex.sigma == pytest.approx(ngrams.analytic_sigma(0.5, 1e-6, ex.sensitivity))
