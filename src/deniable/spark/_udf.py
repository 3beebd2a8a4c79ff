"""The functions that run on the executors (imported only when Spark is used).

No ``from __future__ import annotations`` here: PySpark reads the pandas UDF's type hints.
"""

from typing import Any, Iterator, Optional, Tuple

import numpy as np
import pandas as pd

from ..integrations.capping import privatize_capped, privatized_counts
from ..integrations.keyed import NGRAM_STREAM, RowRandomness, bound_user_row, privatize_rows, row_generator
from ..integrations.shipping import Shipment


def _spark_files(name: str) -> str:
    from pyspark import SparkFiles

    return SparkFiles.get(name)


def _load(shipment: Shipment) -> Any:
    return shipment.load(resolve=_spark_files)


def privatize_udf_function(shipment: Shipment, randomness: RowRandomness, *, oov: str, case: str, keyed: bool, over_cap: Optional[str] = None):
    """The body of the pandas UDF of :func:`deniable.spark.privatize_column`: rows drawn with
    ``randomness`` (resolved on the driver), keyed by the second argument (``keyed``: the key
    column or the row position) or by their text. With ``over_cap`` (a per-user word cap) the
    arguments are (text, key, allowed words) and each row privatizes at most its allowance
    (:func:`deniable.integrations.capping.privatize_capped`)."""

    def run(texts: pd.Series, keys: Optional[pd.Series], allowed: Optional[pd.Series] = None) -> pd.Series:
        mech = _load(shipment)
        values = texts.to_numpy(dtype=object, na_value=None).tolist()
        key_values = values if keys is None else keys.to_numpy(dtype=object, na_value=None).tolist()
        if allowed is None:
            out = privatize_rows(mech, values, key_values, randomness, oov=oov, case=case)
        else:
            limits = allowed.fillna(0).astype(np.int64).tolist()
            out = privatize_capped(mech, values, key_values, randomness, limits, oov=oov, case=case, over_cap=str(over_cap))
        return pd.Series(out, dtype=object)

    if over_cap is not None:

        def privatize_capped_batches(batches: Iterator[Tuple[pd.Series, pd.Series, pd.Series]]) -> Iterator[pd.Series]:
            for texts, keys, allowed in batches:
                yield run(texts, keys, allowed)

        return privatize_capped_batches

    if keyed:

        def privatize_keyed_batches(batches: Iterator[Tuple[pd.Series, pd.Series]]) -> Iterator[pd.Series]:
            for texts, keys in batches:
                yield run(texts, keys)

        return privatize_keyed_batches

    def privatize_batches(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        for texts in batches:
            yield run(texts, None)

    return privatize_batches


def count_words_function(shipment: Shipment, oov: str):
    """The body of the pandas UDF that counts, per row, the words the mechanism privatizes
    (:func:`deniable.integrations.capping.privatized_counts`; 0 for a null text)."""

    def count_batches(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        for texts in batches:
            vocabulary = _load(shipment).vocabulary
            values = texts.to_numpy(dtype=object, na_value=None).tolist()
            yield pd.Series(privatized_counts(vocabulary, values, oov), dtype=np.int64)

    return count_batches


def count_batches_function(shipment: Shipment, n: int):
    """mapInPandas body of :func:`deniable.spark.count_ngrams`: per batch, (user, column,
    count, first position) with column -1 carrying the user's out-of-vocabulary count."""
    from ..ngrams import ngrams_of

    def count(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        vocab = _load(shipment)
        get = vocab.get
        lowercase = vocab.lowercase
        for pdf in batches:
            users = pdf["u"].to_numpy(dtype=object, na_value=None).tolist()
            texts = pdf["t"].to_numpy(dtype=object, na_value=None).tolist()
            positions = pdf["pos"].to_numpy().tolist()
            cells: dict = {}
            first: dict = {}
            dropped: dict = {}
            for u, t, p in zip(users, texts, positions):
                if u is None:
                    raise ValueError("deniable.spark.count_ngrams: a row has a null user id; drop or fill those rows first")
                if u not in first or p < first[u]:
                    first[u] = p
                if t is None:
                    continue
                for g in ngrams_of(t, n, lowercase=lowercase):
                    c = get(g, -1)
                    if c < 0:
                        dropped[u] = dropped.get(u, 0) + 1
                    else:
                        cells[(u, c)] = cells.get((u, c), 0) + 1
            rows_u = [u for u, _ in cells] + list(first)
            rows_c = [c for _, c in cells] + [-1] * len(first)
            rows_n = list(cells.values()) + [dropped.get(u, 0) for u in first]
            rows_p = [first[u] for u, _ in cells] + list(first.values())
            yield pd.DataFrame({"u": rows_u, "c": np.asarray(rows_c, dtype=np.int32), "cnt": np.asarray(rows_n, dtype=np.int64), "pos": np.asarray(rows_p, dtype=np.int64)})

    return count


def bound_function(*, max_ngrams_per_user: Optional[int], C: Optional[float], seed: int):
    """applyInPandas body: one user's aggregated rows, bounded as
    :func:`deniable.integrations.keyed.keyed_bound_contributions` does on one machine."""

    def bound(pdf: pd.DataFrame) -> pd.DataFrame:
        user = pdf["u"].iloc[0]
        if isinstance(user, np.generic):
            user = user.item()
        meta = pdf[pdf["c"] < 0]
        body = pdf[pdf["c"] >= 0]
        cols, counts = bound_user_row(
            body["c"].to_numpy(), body["cnt"].to_numpy(dtype=np.float64 if C is not None and not float(C).is_integer() else np.int64),
            max_ngrams_per_user=max_ngrams_per_user, C=C, generator=lambda: row_generator(seed, NGRAM_STREAM, user),
        )
        kept = pd.DataFrame({"u": pdf["u"].iloc[:1].repeat(len(cols)).to_numpy(), "c": cols.astype(np.int32), "cnt": counts.astype(np.float64), "pos": np.zeros(len(cols), dtype=np.int64)})
        meta = meta.assign(cnt=meta["cnt"].astype(np.float64))
        return pd.concat([meta, kept], ignore_index=True)

    return bound
