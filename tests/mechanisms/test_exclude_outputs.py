"""``exclude_outputs``: every mechanism never outputs an excluded word, keeps ε·d-privacy over the
smaller output set (exact checks where probabilities are exact), and is unchanged when nothing
is excluded."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from deniable import available_mechanisms, get_mechanism, load_embedding
from deniable.binary import binarize
from deniable.embeddings import Embedding
from deniable.errors import DeniableWarning
from deniable.text.tokenize import words_of
from deniable.text.wordlists import word_list

from ._metric_dp import assert_metric_dp, distance_matrix, log_rows, metric_dp_excess

EPS = 1.5
N_WORDS = 30
#: Excluded in the small embedding: every third word, the input "w0" among them.
EXCLUDED = [f"w{i}" for i in range(0, N_WORDS, 3)]
#: Per-mechanism parameters on the small embedding (in memory; BRR on 8-bit codes so that its
#: exact enumeration applies; small k / K so that truncation, rejection and set boundaries occur).
PARAMS = {
    "tem": {"cache_dir": False, "precomputed_neighbors": 4},
    "santext": {"cache_dir": False, "precomputed_neighbors": 4},
    "santext_plus": {"cache_dir": False, "precomputed_neighbors": 4, "sensitive": [f"w{i}" for i in range(0, N_WORDS, 2)], "p": 0.4},
    "knn_tem": {"cache_dir": False, "k": 5},
    "custext": {"cache_dir": False, "K": 6},
    "diffractor": {"cache_dir": False, "noise": "tem", "gamma": 4.0},
}


def _embedding() -> Embedding:
    rng = np.random.default_rng(3)
    return Embedding([f"w{i}" for i in range(N_WORDS)], rng.standard_normal((N_WORDS, 8)).astype(np.float32))


def _build(name: str, exclude=None):
    emb = _embedding()
    vocab = binarize(emb, n_bits=8, method="random-projection", rng=0) if name == "brr" else emb
    return get_mechanism(name, vocab, epsilon=EPS, exclude_outputs=exclude, **PARAMS.get(name, {}))


@pytest.mark.parametrize("name", available_mechanisms())
def test_excluded_words_never_come_out(name: str) -> None:
    mech = _build(name, EXCLUDED)
    excluded = mech.excluded_output_ids
    assert sorted(mech.vocabulary.words[i] for i in excluded) == sorted(EXCLUDED)
    ids = np.repeat(np.arange(-1, N_WORDS), 300)  # every input, excluded ones and UNK included
    out = mech.sample_ids(ids, rng=0)
    assert not np.isin(out, excluded).any()
    assert np.unique(out).size > 1  # the control: outputs do vary


def _check_exact(mech) -> None:
    """Excluded outputs at probability 0, rows summing to 1, ε·d-privacy on every pair of inputs
    (UNK included), and draws that follow the probabilities (5 binomial standard deviations + 0.01)."""
    ids = np.arange(-1, N_WORDS)
    lp = mech.log_probability_rows(ids)
    assert np.all(lp[:, mech.excluded_output_ids] == -np.inf)
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0, atol=1e-9)
    assert_metric_dp(lp, distance_matrix(mech, ids), EPS)
    n = 2000
    out = mech.sample_ids(np.repeat(ids, n), rng=1).reshape(ids.size, n)
    freq = np.stack([np.bincount(o, minlength=mech.n_words) for o in out]) / n
    p = np.exp(lp)
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 0.01)


@pytest.mark.parametrize("name", available_mechanisms())
def test_exact_probabilities_zero_and_metric_dp_over_the_restricted_outputs(name: str) -> None:
    mech = _build(name, EXCLUDED)
    if not mech.has_exact_probabilities:
        pytest.skip(f"{name} has no exact probabilities")
    _check_exact(mech)


@pytest.mark.parametrize(
    "name, params",
    [
        ("tem", {"cache_dir": False, "precomputed_neighbors": 4, "storage": "compact"}),
        ("tem", {"cache_dir": False, "neighbors": "radius", "gamma": 2.0}),
        ("santext_plus", {"cache_dir": False, "precomputed_neighbors": 4, "sensitive": ["w0", "w1", "w2", "w4", "w5", "w9", "w10"], "p": 0.5}),
        ("custext", {"cache_dir": False, "K": 4, "metric": "cosine", "keep_stop_words": True, "stop_words": ["w3", "w6"]}),
        ("diffractor", {"cache_dir": False, "metrics": ("euclidean", "angular"), "starts": (1, 2)}),
    ],
)
def test_other_configurations(name: str, params: dict) -> None:
    mech = get_mechanism(name, _embedding(), epsilon=EPS, exclude_outputs=EXCLUDED, **params)
    _check_exact(mech)


def test_metric_dp_check_fails_on_conditioning_instead_of_restricting() -> None:
    """Control: dropping the excluded outputs from a finished distribution and renormalizing
    (conditioning on "not excluded") is not ε·d-private in general, and the checker says so;
    rebuilding the mechanism over the remaining outputs (what ``exclude_outputs`` does) is.
    1-Diffractor with geometric noise, excluding a block of 10 neighbouring list positions: an
    input inside the block keeps little allowed mass, so conditioning inflates its outputs."""
    emb = _embedding()
    base = get_mechanism("diffractor", emb, epsilon=EPS, cache_dir=False)
    block = [emb.words[i] for i in base.precompute()[0][1:11]]
    ids = np.arange(-1, N_WORDS)
    p = np.exp(base.log_probability_rows(ids))
    p[:, [emb.words.index(w) for w in block]] = 0
    p /= p.sum(axis=1, keepdims=True)
    assert metric_dp_excess(log_rows(p), distance_matrix(base, ids), EPS) > 5.0  # measured: 7.5
    restricted = get_mechanism("diffractor", emb, epsilon=EPS, cache_dir=False, exclude_outputs=block)
    assert_metric_dp(restricted.log_probability_rows(ids), distance_matrix(restricted, ids), EPS)


@pytest.mark.parametrize("name", available_mechanisms())
@pytest.mark.parametrize("empty", [None, [], ["not-a-word"]])
def test_nothing_excluded_keeps_the_samples(name: str, empty) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeniableWarning)  # the unknown word's warning
        mech = _build(name, empty)
    ref = _build(name, None)
    assert mech.excluded_output_ids.size == 0
    assert "exclude_outputs" not in mech.params
    ids = np.repeat(np.arange(-1, N_WORDS), 20)
    assert np.array_equal(mech.sample_ids(ids, rng=7), ref.sample_ids(ids, rng=7))


def test_excluded_input_is_still_privatized() -> None:
    mech = get_mechanism("tem", _embedding(), epsilon=EPS, cache_dir=False, exclude_outputs=["w0"])
    out = mech.sample_ids(np.zeros(500, dtype=np.int64), rng=0)
    assert not (out == 0).any() and np.unique(out).size > 1
    assert np.isfinite(mech.privacy_loss_bound("w0", "w1"))


def test_list_forms_unknown_words_and_errors(tmp_path: Path) -> None:
    emb = _embedding()
    f = tmp_path / "words.txt"
    f.write_text("# my list\nW1\n\nw2\nzzz\n", encoding="utf-8")
    with pytest.warns(DeniableWarning, match="1 of the 3 listed words are not in the vocabulary"):
        mech = get_mechanism("madlib", emb, epsilon=EPS, exclude_outputs=f)
    assert [emb.words[i] for i in mech.excluded_output_ids] == ["w1", "w2"]  # matched ignoring case
    assert mech.params["exclude_outputs"] == ("w1", "w2")
    assert "2 words excluded from the outputs" in repr(mech) and "excluded from the outputs" in mech.guarantee.domain
    with pytest.raises(ValueError, match="removes all 30 vocabulary words.*exclude fewer"):
        get_mechanism("madlib", emb, epsilon=EPS, exclude_outputs=emb.words)
    with pytest.raises(ValueError, match="neither a shipped list"):
        get_mechanism("madlib", emb, epsilon=EPS, exclude_outputs="no-such-list")
    with pytest.raises(TypeError, match="exclude_outputs must be"):
        get_mechanism("madlib", emb, epsilon=EPS, exclude_outputs=3)
    with pytest.raises(ValueError, match="every sensitive word is excluded"):
        get_mechanism("santext_plus", emb, epsilon=EPS, cache_dir=False, sensitive=["w1"], exclude_outputs=["w1"])
    with pytest.raises(ValueError, match="start word 'w4' is excluded"):
        get_mechanism("diffractor", emb, epsilon=EPS, cache_dir=False, starts="w4", exclude_outputs=["w4"])


def test_excluded_non_sensitive_word_is_always_replaced() -> None:
    emb = _embedding()
    mech = get_mechanism("santext_plus", emb, epsilon=EPS, cache_dir=False, sensitive=["w1", "w2", "w3"], p=0.2, exclude_outputs=["w5"])
    out = mech.sample_ids(np.full(400, 5), rng=0)
    assert not (out == 5).any()
    assert set(np.unique(out)) <= {1, 2, 3}


def test_pickled_mechanism_keeps_its_exclusion() -> None:
    import pickle

    mech = get_mechanism("madlib", _embedding(), epsilon=EPS, exclude_outputs=EXCLUDED)
    copy = pickle.loads(pickle.dumps(mech))
    ids = np.arange(N_WORDS)
    assert np.array_equal(copy.excluded_output_ids, mech.excluded_output_ids)
    assert np.array_equal(copy.sample_ids(ids, rng=3), mech.sample_ids(ids, rng=3))


# -- the bundled embedding and the shipped list ----------------------------------------------------

#: Nearest-neighbour mechanisms run on the whole bundled embedding; the others need a k-nearest
#: table, output sets or word lists over all its words (a minute or more to build in a fresh
#: cache), so they run on its first 3,000 words plus every listed word it holds.
BUNDLED = ["madlib", "mahalanobis", "vickrey", "brr"]
SUBSET = ["tem", "santext", "knn_tem", "custext", "diffractor"]
DEMO = Path(__file__).resolve().parents[2] / "examples" / "sample.txt"
UNIT = re.compile(r"[\w]+(?:['\u2019][\w]+)*")  # a word with its apostrophe-joined parts


def test_the_shipped_list_is_plain_and_offensive_only() -> None:
    words = word_list("profanity")
    assert 100 <= len(words) <= 300
    assert all(w == w.strip().lower() and " " not in w for w in words)
    assert "nigger" in words and "the" not in words and "sex" not in words


def _bundled_subset() -> Embedding:
    emb = load_embedding()
    listed = [w for w in word_list("profanity") if w in emb]
    return emb.restrict(words=list(dict.fromkeys(emb.words[:3000] + listed)))


@pytest.mark.parametrize("name", BUNDLED + SUBSET)
def test_bundled_embedding_with_profanity_list(name: str) -> None:
    vocab = _bundled_subset() if name in SUBSET else None
    mech = get_mechanism(name, vocab, epsilon=4.0 if name != "brr" else 1.0, exclude_outputs="profanity")
    listed = set(word_list("profanity"))
    excluded = mech.excluded_output_ids
    assert excluded.size > 50 and {mech.vocabulary.words[i] for i in excluded} <= listed
    ids = np.repeat(excluded, 40)  # the listed words themselves as inputs: their neighbours are the likeliest slips
    out = mech.sample_ids(ids, rng=0)
    assert not np.isin(out, excluded).any()


@pytest.mark.parametrize("name, epsilon", [("madlib", 10.0), ("vickrey", 10.0)])
def test_demo_sentences_contain_no_listed_word(name: str, epsilon: float) -> None:
    """The README / ``make demo`` sentences, privatized at a mid privacy level with the shipped
    list: no output word is listed, read word by word (clitics split, as the tokenizer reads) and
    as apostrophe-joined units (``mother's`` one unit)."""
    texts = DEMO.read_text(encoding="utf-8").splitlines()
    assert len(texts) == 5
    listed = set(word_list("profanity"))
    mech = get_mechanism(name, epsilon=epsilon, exclude_outputs="profanity")
    for seed in range(20):
        for src, out in zip(texts, mech.privatize(texts, rng=seed)):
            assert len(words_of(out)) >= len(words_of(src))  # one output per input word
            units = {u.lower() for u in UNIT.findall(out)}
            assert not units & listed, (src, out)
            assert not {w.lower() for w in words_of(out)} & listed, (src, out)


def test_demo_check_catches_a_listed_word() -> None:
    """Control for the check above: without the list, inputs that are listed words come out
    listed at a high ε (the check is able to fail)."""
    mech = get_mechanism("madlib", epsilon=50.0)
    out = mech.privatize("you bastard, that's bullshit", rng=0)
    assert {u.lower() for u in UNIT.findall(out)} & set(word_list("profanity"))


def test_cli_exclude_outputs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from deniable.cli.main import cli

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    emb = tmp_path / "emb.txt"
    emb.write_text("".join(f"{w} " + " ".join(f"{v:.4f}" for v in rng.standard_normal(3)) + "\n" for w in words))
    src = tmp_path / "in.txt"
    src.write_text(" ".join(words * 20) + "\n")
    listed = tmp_path / "listed.txt"
    listed.write_text("# excluded\nw1\nW2\n")
    args = ["privatize", str(src), "-m", "tem", "-e", "0.5", "--embedding", str(emb), "--seed", "0"]
    plain = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert plain.exit_code == 0 and {"w1", "w2"} <= set(plain.stdout.split())  # control: they do come out without the list
    res = CliRunner().invoke(cli, [*args, "--exclude-outputs", str(listed)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = set(res.stdout.split())
    assert not out & {"w1", "w2"} and len(out) > 3
    bad = CliRunner().invoke(cli, [*args, "--exclude-outputs", str(tmp_path / "missing.txt")])
    assert bad.exit_code == 2 and "neither a shipped list" in bad.output
