"""Joint releases: rows of one release, and rows of two releases, share no randomness.

One black-box test for every adapter. Neighbouring two-row inputs (a, a) and (a, b), b the
nearest word to a, are privatized many times; the event "the two outputs are equal" (and its
complement) is counted under each input, and a one-sided Clopper–Pearson lower bound on the
privacy loss ln(P[E | one input] / P[E | the other]) is compared with the composed bound
ε·Σd = ε·d(a, b) that independent rows guarantee. A pair of rows is either two rows of one
release ("within": the adapter is called once on a, x, a, x, ... and rows 2i, 2i+1 form pair i)
or row i of two releases ("across": two calls, or two splits of one DatasetDict, or one
privatizer applied to two data sets). With independent rows the pairs are independent trials,
so the bound holds with probability at least 1 − 2α per event and direction.

The controls plant shared randomness — content keys, or two releases keyed by position under
one seed (what a DatasetDict used to do) — and the same machinery must flag them. Every test
runs with fixed seeds: the release secrets come from a seeded sequence in place of the OS.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

import deniable
from deniable.errors import PrivacyWarning
from deniable.integrations import keyed, row_keys
from deniable.integrations.keyed import privatize_keyed

from ..conftest import random_embedding
from ..spark.conftest import spark  # noqa: F401  (the session-wide local Spark, requested by the Spark cases only)

N_PAIRS = 300  # pairs per input; the controls are flagged with a wide margin (see test_the_design_has_power)
ALPHA = 1e-3  # one-sided level of each Clopper–Pearson bound


@pytest.fixture(scope="module")
def setup():
    """SanText at ε = 1 on 6 random 2-d words: a = w0, b its nearest word (d = 0.567, so
    ε·d = 0.567), outputs spread over all 6 words (P[equal] = 0.179 for (a, a), 0.175 for (a, b):
    true loss 0.02)."""
    mech = deniable.get_mechanism("santext", random_embedding(6, 2, seed=0), epsilon=1.0, cache_dir=False)
    a = 0
    d = mech.distance(np.full(6, a), np.arange(6))
    b = int(np.argsort(d)[1])
    return mech, "w0", f"w{b}", float(mech.epsilon * d[b])


@pytest.fixture(autouse=True)
def seeded_secrets(monkeypatch):
    """Release secrets from a seeded sequence instead of the OS, so every run is the same; each
    call still gets a new secret, as from the OS."""
    counter = itertools.count()
    def seeded() -> int:
        return int(np.random.default_rng([20240601, next(counter)]).integers(2**63))

    monkeypatch.setattr(row_keys, "secret_seed", seeded)  # the rule (resolve_randomness) draws here
    monkeypatch.setattr(keyed, "secret_seed", seeded)


# -- the statistics ----------------------------------------------------------------------------


def cp_lower(k: int, n: int) -> float:
    return 0.0 if k == 0 else float(stats.beta.ppf(ALPHA, k, n - k + 1))


def cp_upper(k: int, n: int) -> float:
    return 1.0 if k == n else float(stats.beta.ppf(1 - ALPHA, k + 1, n - k))


def loss_lower_bound(equal_same: int, equal_neighbour: int, n: int) -> float:
    """Largest Clopper–Pearson lower bound on ln(P[E | D] / P[E | D']) over E in {equal,
    differ} and both directions; -inf when no event shows a loss."""
    best = -math.inf
    for k1, k2 in ((equal_same, equal_neighbour), (n - equal_same, n - equal_neighbour)):
        for x, y in ((k1, k2), (k2, k1)):
            lo, hi = cp_lower(x, n), cp_upper(y, n)
            if lo > 0:
                best = max(best, math.log(lo / hi))
    return best


# -- the adapters, as (one release) and (two releases) -------------------------------------------


@dataclass
class Adapter:
    """``one(mech, texts) -> outputs`` is one release; ``two(mech, t1, t2) -> (o1, o2)`` two
    releases (default: two calls of ``one``)."""

    one: Callable
    two: Callable | None = None
    spark: bool = False

    def pair(self, mech, t1, t2):
        return self.two(mech, t1, t2) if self.two is not None else (self.one(mech, t1), self.one(mech, t2))


def _keyed_one(mech, texts):
    return privatize_keyed(mech, texts)


def _series_one(mech, texts):
    pd = pytest.importorskip("pandas")
    from deniable.integrations.pandas import privatize_series

    return privatize_series(pd.Series(texts, name="text"), mech).tolist()


def _frame_one(mech, texts):
    pd = pytest.importorskip("pandas")
    from deniable.integrations.pandas import privatize_frame

    return privatize_frame(pd.DataFrame({"text": texts}), "text", mech)["text"].tolist()


def _sklearn_two(mech, t1, t2):
    pytest.importorskip("sklearn")
    from deniable.integrations.sklearn import PrivatizeTransformer

    t = PrivatizeTransformer(mech)
    return list(t.fit_transform(t1)), list(t.transform(t2))  # train, then test, through one transformer


def _sklearn_one(mech, texts):
    return _sklearn_two(mech, texts, [])[0]


def _datasets():
    return pytest.importorskip("datasets")


def _dataset_one(mech, texts):
    from deniable.integrations.hf import privatize_dataset

    return list(privatize_dataset(_datasets().Dataset.from_dict({"text": texts}), "text", mech)["text"])


def _dict_two(mech, t1, t2):
    from deniable.integrations.hf import privatize_dataset

    ds = _datasets()
    out = privatize_dataset(ds.DatasetDict({"train": ds.Dataset.from_dict({"text": t1}), "test": ds.Dataset.from_dict({"text": t2})}), "text", mech)
    return list(out["train"]["text"]), list(out["test"]["text"])


def _dict_one(mech, texts):
    from deniable.integrations.hf import privatize_dataset

    ds = _datasets()
    return list(privatize_dataset(ds.DatasetDict({"train": ds.Dataset.from_dict({"text": texts})}), "text", mech)["train"]["text"])


def _privatizer_two(mech, t1, t2):
    from deniable.integrations.hf import dataset_privatizer

    ds = _datasets()
    fn = dataset_privatizer(mech, "text")  # one function, two data sets
    return [list(ds.Dataset.from_dict({"text": t}).map(fn, batched=True, batch_size=128)["text"]) for t in (t1, t2)]


def _privatizer_one(mech, texts):
    return _privatizer_two(mech, texts, [])[0]


def _spark_one(mech, texts, **kw):
    from pyspark.sql import SparkSession

    from deniable.spark import privatize_column

    session = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    df = session.createDataFrame(list(enumerate(texts)), "pos long, text string").repartition(3)
    rows = privatize_column(df, "text", mech, **kw).collect()
    return [r.text for r in sorted(rows, key=lambda r: r.pos)]


ADAPTERS = {
    "privatize_keyed": Adapter(_keyed_one),
    "pandas-series": Adapter(_series_one),
    "pandas-frame": Adapter(_frame_one),
    "sklearn": Adapter(_sklearn_one, _sklearn_two),
    "hf-dataset": Adapter(_dataset_one),
    "hf-datasetdict": Adapter(_dict_one, _dict_two),
    "hf-reused-privatizer": Adapter(_privatizer_one, _privatizer_two),
    "spark": Adapter(_spark_one, spark=True),
}


# planted shared randomness: the same machinery must flag these
def _content_one(mech, texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return privatize_keyed(mech, texts, rng=11, content_keys=True)


def _shared_seed_two(mech, t1, t2):
    # two releases keyed by position under one secret: row i of both shares its generator
    return privatize_keyed(mech, t1, range(len(t1)), rng=11), privatize_keyed(mech, t2, range(len(t2)), rng=11)


def _frame_content_one(mech, texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        pd = pytest.importorskip("pandas")
        from deniable.integrations.pandas import privatize_frame

        return privatize_frame(pd.DataFrame({"text": texts}), "text", mech, content_keys=True)["text"].tolist()


def _spark_content_one(mech, texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return _spark_one(mech, texts, content_keys=True)


CONTROLS = {
    "content-keys": Adapter(_content_one),
    "shared-seed-by-position": Adapter(_content_one, _shared_seed_two),
    "pandas-content-keys": Adapter(_frame_content_one),
    "spark-content-keys": Adapter(_spark_content_one, spark=True),
}


def _tag(i: int) -> str:
    """Pair i's punctuation (released as layout, never sampled): the texts of two pairs differ,
    so that content keys make pairs independent trials too, while the two texts of a pair are
    identical under (a, a)."""
    return format(i, "b").replace("0", ".").replace("1", "!")


def equal_counts(adapter: Adapter, layout: str, mech, a: str, b: str) -> tuple[int, int]:
    """Pairs with equal outputs out of N_PAIRS, for input pairs (a, a) and (a, b)."""
    counts = []
    for x in (a, b):
        first_in = [a + _tag(i) for i in range(N_PAIRS)]
        second_in = [x + _tag(i) for i in range(N_PAIRS)]
        if layout == "within":
            out = adapter.one(mech, [t for pair in zip(first_in, second_in) for t in pair])
            first, second = out[0::2], out[1::2]
        else:
            first, second = adapter.pair(mech, first_in, second_in)
        assert len(first) == len(second) == N_PAIRS and all(isinstance(o, str) for o in first + second)
        counts.append(sum(o1 == o2 for o1, o2 in zip(first, second)))
    return counts[0], counts[1]


def _cases(table, spark_layouts):
    for name, adapter in table.items():
        layouts = spark_layouts if adapter.spark else ("within", "across")
        for layout in layouts:
            if table is CONTROLS and (layout == "across") != (name == "shared-seed-by-position"):
                continue  # content keys share within a release; the shared seed, across two
            marks = [pytest.mark.slow] if adapter.spark else []
            yield pytest.param(name, layout, id=f"{name}-{layout}", marks=marks)


def _needs_spark(request, adapter: Adapter) -> None:
    if adapter.spark:
        request.getfixturevalue("spark")


@pytest.mark.parametrize("name, layout", list(_cases(ADAPTERS, ("within", "across"))))
def test_rows_share_no_randomness(request, setup, name, layout):
    """Every adapter, by default: the privacy loss of two rows, in one release or in two, stays
    within ε·d(a, b), and identical inputs are not always identical outputs."""
    adapter = ADAPTERS[name]
    _needs_spark(request, adapter)
    mech, a, b, bound = setup
    same, neighbour = equal_counts(adapter, layout, mech, a, b)
    loss = loss_lower_bound(same, neighbour, N_PAIRS)
    assert 0 < same < N_PAIRS, f"{name} ({layout}): (a, a) gave equal outputs {same}/{N_PAIRS} times: shared randomness"
    assert loss <= bound, f"{name} ({layout}): privacy loss >= {loss:.3f} (99.8 % lower bound) > eps*d = {bound:.3f}; equal {same} vs {neighbour} of {N_PAIRS}"


@pytest.mark.parametrize("name, layout", list(_cases(CONTROLS, ("within",))))
def test_planted_shared_randomness_is_flagged(request, setup, name, layout):
    """The controls: content keys, and two releases keyed by position under one seed. Their
    loss lower bound exceeds ε·d(a, b), so the test above can fail."""
    adapter = CONTROLS[name]
    _needs_spark(request, adapter)
    mech, a, b, bound = setup
    same, neighbour = equal_counts(adapter, layout, mech, a, b)
    loss = loss_lower_bound(same, neighbour, N_PAIRS)
    assert loss > bound, f"control {name} ({layout}) not flagged: loss lower bound {loss:.3f} <= eps*d = {bound:.3f} (equal {same} vs {neighbour})"


def test_the_design_has_power(setup):
    """The exact probabilities behind the numbers above: independent rows have a true loss far
    below ε·d (so the default passes), and a shared generator makes (a, a) always equal (so the
    controls fail); the bounds of the counts each outcome gives lie on the right sides."""
    mech, a, b, bound = setup
    pa, pb = mech.probabilities(a), mech.probabilities(b)
    p, q = float(pa @ pa), float(pa @ pb)
    assert math.log(p / q) < bound / 10 and math.log((1 - q) / (1 - p)) < bound / 10
    assert loss_lower_bound(round(p * N_PAIRS), round(q * N_PAIRS), N_PAIRS) < 0 < bound
    assert loss_lower_bound(N_PAIRS, round(q * N_PAIRS), N_PAIRS) > 2 * bound
