"""docs/ngrams.md quotes the code: every guarantee line and formal_dp value in its table is real."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from deniable import ngrams
from deniable.ngrams import paper

DOC = Path(__file__).resolve().parents[2] / "docs" / "ngrams.md"

E, D = dict(epsilon=1.0, delta=1e-6), dict(rng=0)
CASES = [  # (name, release on (users, vocab), formal_dp)
    ("bayesian", lambda u, v: ngrams.release_bayesian(u, v, **E, **D), True),
    ("bayesian-S", lambda u, v: ngrams.release_bayesian(u, v, S=0.5, **E, **D), True),
    ("laplace", lambda u, v: ngrams.release_laplace(u, epsilon=1.0, **D), True),
    ("laplace-W", lambda u, v: ngrams.release_laplace(u, epsilon=1.0, W=3.0, **D), True),
    ("laplace-public", lambda u, v: ngrams.release_laplace(u, v, epsilon=1.0, **D), True),
    ("laplace-public-W", lambda u, v: ngrams.release_laplace(u, v, epsilon=1.0, W=3.0, **D), True),
    ("paper-bayesian", lambda u, v: paper.bayesian_not_dp(u, v, **E, **D), False),
    ("paper-bayesian-given", lambda u, v: paper.bayesian_not_dp(u, v, sensitivity=2.0, **E, **D), False),
    ("paper-tuned", lambda u, v: paper.bayesian_tuned_not_dp(u, v, S_grid=[0.1, 1.0], rho_grid=[0.3], **E, **D), False),
    ("paper-laplace-public", lambda u, v: paper.laplace_public_not_dp(u, v, epsilon=1.0, W=3.0, **D), False),
    ("paper-rule", lambda u, v: paper.laplace_not_dp(u, epsilon=1.0, **D), False),
    ("paper-rule-public", lambda u, v: paper.laplace_public_not_dp(u, v, epsilon=1.0, sensitivity=2.0, **D), False),
    ("k-anonymity", lambda u, v: paper.k_anonymity_not_dp(u, K=2), False),
]


def _template(text: str) -> str:
    """The code's guarantee line with the numbers replaced by the doc's symbols."""
    text = text.replace("(1, 1e-06)", "(ε, δ)").replace("(1, 0)", "(ε, 0)").replace("W=3;", "W=W;")
    text = re.sub(r"epsilon=0\.666667", "epsilon=ε_r", text)
    text = re.sub(r"epsilon=0\.333333", "epsilon=ε_t", text)
    text = text.replace("at most 50 distinct", "at most k distinct").replace("clamped to C=1;", "clamped to C=C;")
    text = text.replace("L2 sensitivity 7.07107", "L2 sensitivity C·√k").replace("L1 sensitivity 50", "L1 sensitivity C·k")
    text = text.replace("L1 sensitivity 3 ", "L1 sensitivity W ")
    text = re.sub(r"\((opendp|numpy) sampler\)", "(SAMPLER sampler)", text)
    return text.replace(">= 2 users", ">= K users").replace("|", "\\|")


@pytest.mark.parametrize("name,release,formal", CASES, ids=[c[0] for c in CASES])
def test_guarantee_table_quotes_the_code(name, release, formal):
    if not DOC.exists():
        pytest.skip("docs/ngrams.md not in this checkout")
    doc = DOC.read_text(encoding="utf-8")
    vocab = ngrams.build_vocabulary(ngrams.count_public(["a b c d e. a b c d. b c d e a"], 2), n=2)
    users = ngrams.count_users([(f"u{i}", t) for i, t in enumerate(["a b c", "c d e", "b c d", "a b", "d e a b", "b c", "a b c d e", "e a"])], vocab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = release(users, vocab)
    assert rel.formal_dp is formal
    line = _template(rel.guarantee)
    rows = [row for row in doc.splitlines() if row.startswith("|") and f"`{line}`" in row]
    assert rows, line
    if name != "paper-rule-public":  # shares its row (and guarantee line) with paper-rule
        assert any(f"| {'**True**' if formal else 'False'} |" in row for row in rows), rows


def test_cli_examples_are_formal_by_default_and_smooth():
    """The docs' first release examples (API and CLI) use only ε, δ: formal by default; every
    paper-calibration example carries --local-sensitivity or goes through deniable.ngrams.paper."""
    if not DOC.exists():
        pytest.skip("docs/ngrams.md not in this checkout")
    doc = DOC.read_text(encoding="utf-8")
    assert "rel = ngrams.release_bayesian(users, vocab, epsilon=1.0, delta=1e-6)\n" in doc
    assert "deniable ngrams release counts.npz -e 1 -d 1e-6 -o release.tsv\n" in doc
    assert re.search(r"deniable ngrams evaluate .*--smoothing 1e-3", doc)
    paper_examples = 0
    for line in doc.splitlines():
        if line.startswith("deniable ngrams release") and ("claim1" in line or "--score" in line or "-S 0.01 --rho 0.3" in line):
            assert "--local-sensitivity" in line, line
        code = re.match(r"\w+ = (\w+)\.\w+\(", line)  # a Python example line
        if code and ("score=" in line or "rho=0.3" in line):  # the paper's calibrations: only through the paper namespace
            assert code.group(1) == "paper", line
            paper_examples += 1
    assert paper_examples >= 2  # the check above saw the examples (so it can fail)
    assert "formal_dp" in doc and "diagnostics" in doc and "sampler" in doc
