"""docs/ngrams.md quotes the code: every guarantee line and formal_dp value in its table is real."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from deniable import ngrams

DOC = Path(__file__).resolve().parents[2] / "docs" / "ngrams.md"

CASES = [  # (release kwargs, formal_dp)
    (dict(sensitivity=2.0), True),
    (dict(sensitivity=2.0, calibration="classic"), False),
    (dict(), False),
    (dict(tune=True, S_grid=[0.1, 1.0], rho_grid=[0.3]), False),
    (dict(mechanism="laplace", W=3.0), True),
    (dict(mechanism="laplace", W="paper-rule"), False),
    (dict(mechanism="laplace-public", W=3.0, sensitivity=2.0), True),
    (dict(mechanism="laplace-public", W=3.0), False),
    (dict(mechanism="laplace-public", W="paper-rule", sensitivity=2.0), False),
    (dict(mechanism="k-anonymity", K=2), False),
]


def _template(text: str) -> str:
    """The code's guarantee line with the numbers replaced by the doc's symbols."""
    text = text.replace("(1, 1e-06)", "(ε, δ)").replace("(1, 0)", "(ε, 0)").replace("W=3)", "W=W)")
    text = re.sub(r"epsilon=0\.666667", "epsilon=ε_r", text)
    text = re.sub(r"epsilon=0\.333333", "epsilon=ε_t", text)
    return text.replace(">= 2 users", ">= K users").replace("|", "\\|")


@pytest.mark.parametrize("kwargs,formal", CASES)
def test_guarantee_table_quotes_the_code(kwargs, formal):
    if not DOC.exists():
        pytest.skip("docs/ngrams.md not in this checkout")
    doc = DOC.read_text(encoding="utf-8")
    vocab = ngrams.build_vocabulary(ngrams.count_public(["a b c d e. a b c d. b c d e a"], 2), n=2)
    users = ngrams.count_users([(f"u{i}", t) for i, t in enumerate(["a b c", "c d e", "b c d", "a b", "d e a b", "b c", "a b c d e", "e a"])], vocab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = ngrams.release(users, vocab, epsilon=1.0, delta=1e-6, rng=0, **kwargs)
    assert rel.formal_dp is formal
    line = _template(rel.guarantee)
    rows = [row for row in doc.splitlines() if row.startswith("|") and f"`{line}`" in row]
    assert rows, line
    if "paper-rule" not in str(kwargs) or kwargs.get("mechanism") == "laplace":
        assert any(f"| {'**True**' if formal else 'False'} |" in row for row in rows), rows


def test_cli_examples_show_a_global_sensitivity_and_smoothing():
    if not DOC.exists():
        pytest.skip("docs/ngrams.md not in this checkout")
    doc = DOC.read_text(encoding="utf-8")
    assert re.search(r"deniable ngrams release .*--sensitivity \d", doc)
    assert re.search(r"deniable ngrams evaluate .*--smoothing 1e-3", doc)
    assert "sensitivity=\"exact\"` (**default**)" in doc and "formal_dp" in doc and "diagnostics" in doc
