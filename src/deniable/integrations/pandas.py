"""pandas: privatize a text column, missing values kept, errors naming the row.

Needs ``pip install "deniable[pandas]"``.

Example::

    import pandas as pd
    from deniable.integrations.pandas import privatize_series, privatize_frame

    s = pd.Series(["The quick brown fox", None, "jumps over"], name="text")
    privatize_series(s, "madlib", epsilon=10, rng=0)            # NaN/None stay missing
    privatize_frame(df, "text", "madlib", epsilon=10, key="id", rng=0, output_col="private")
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from ..text.privatize import check_oov, privatize_texts
from ._common import as_mechanism, require
from .keyed import check_seed, is_null, key_bytes, privatize_keyed

__all__ = ["privatize_series", "privatize_frame"]

_BATCH_CHARS = 1 << 20  # about 1 MiB of text per mechanism call, as the CLI


def _pd() -> Any:
    return require("pandas", purpose="deniable.integrations.pandas")


def _label(index: Any, i: int) -> str:
    label = index[i]
    if isinstance(label, np.generic):
        label = label.item()
    return f"row {i} (index {label!r})"


def _texts(series: Any) -> tuple[list[int], list[str]]:
    """Positions and values of the non-missing entries; TypeError naming the first bad row."""
    values = series.to_numpy(dtype=object, na_value=None)
    rows: list[int] = []
    texts: list[str] = []
    for i, v in enumerate(values):
        if is_null(v):
            continue
        if not isinstance(v, str):
            raise TypeError(
                f"{_label(series.index, i)} of {series.name!r}: expected a string or a missing value, got "
                f"{type(v).__name__} {v!r}; convert the column with .astype(str) or fix that row"
            )
        rows.append(i)
        texts.append(v)
    return rows, texts


def _keys(series: Any, key: Any) -> list[Any]:
    pd = _pd()
    if isinstance(key, str) and key == "index":
        values = list(series.index)
    else:
        if isinstance(key, pd.Series):
            if not key.index.equals(series.index):
                raise ValueError("key must have the same index as the series (align it first, e.g. key.reindex(series.index))")
            values = key.to_numpy(dtype=object, na_value=None).tolist()
        else:
            values = list(key)
        if len(values) != len(series):
            raise ValueError(f"key has {len(values)} entries but the series has {len(series)} rows")
    return values


def privatize_series(
    series: Any,
    mechanism: Any,
    *,
    epsilon: float | None = None,
    embedding: Any = None,
    rng: RNGLike = None,
    key: Any = None,
    stream: str | None = None,
    oov: str = "unk",
    case: str = "preserve",
    **params: Any,
) -> Any:
    """Privatize every text of a pandas Series, word by word.

    Guarantee: the mechanism's (``mechanism.guarantee``: ε·d-privacy per word, summed over the
    words of each text); layout and case patterns are released as in
    :func:`deniable.text.privatize_texts`. Missing values (None, NaN, ``pd.NA``) stay missing and
    draw no randomness.

    Parameters
    ----------
    series
        A ``pandas.Series`` of strings and missing values; anything else raises ``TypeError``
        naming the row (position and index label).
    mechanism
        A mechanism name (then ``epsilon`` is required; ``embedding`` is an Embedding or a file
        path, default the bundled one; ``**params`` are the mechanism's) or a Mechanism.
    rng
        Without ``key``: a Generator, an int seed or None (one generator for the whole series,
        rows in order — the same outputs as ``mechanism.privatize(list_of_texts, rng)``).
        With ``key``: an int seed or None; each row then uses its own keyed generator
        (:mod:`deniable.integrations.keyed`) and gives the same output as
        :func:`deniable.spark.privatize_column` with that seed and key.
    key
        ``None``, ``"index"`` (the series index), or one key per row (integers, strings or
        bytes; a Series must share the index).
    stream
        Keyed mode only: separates uses of one seed; default the series name (as Spark's default
        is the column name), ``""`` when it has none.
    oov, case
        As in :func:`deniable.text.privatize_texts`.

    Returns
    -------
    pandas.Series
        Same index and name; the privatized texts, missing values where the input had them.
    """
    pd = _pd()
    if not isinstance(series, pd.Series):
        raise TypeError(f"series must be a pandas Series, got {type(series).__name__}; for a DataFrame use privatize_frame(df, column, ...)")
    check_oov(oov)
    mech = as_mechanism(mechanism, epsilon=epsilon, embedding=embedding, params=params)
    rows, texts = _texts(series)
    if key is None:
        if stream is not None:
            raise TypeError("stream applies only with key=... (keyed randomness)")
        gen = as_generator(rng)
        new: list[str] = []
        start = chars = 0
        for j, t in enumerate(texts):
            chars += len(t)
            if chars >= _BATCH_CHARS:
                new.extend(privatize_texts(mech, texts[start : j + 1], rng=gen, oov=oov, case=case))
                start, chars = j + 1, 0
        new.extend(privatize_texts(mech, texts[start:], rng=gen, oov=oov, case=case))
    else:
        if rng is not None and not isinstance(rng, (int, np.integer)):
            raise TypeError(f"with key=..., rng must be an int seed or None (each row gets its own generator), got {type(rng).__name__}")
        seed = check_seed(rng)
        keys = _keys(series, key)
        for i in rows:
            k = keys[i]
            if is_null(k):
                raise ValueError(f"{_label(series.index, i)}: the row key is missing; every non-missing text needs a key")
            try:
                key_bytes(k)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{_label(series.index, i)}: {exc}") from None
        if stream is None:
            stream = series.name if isinstance(series.name, str) else ""
        new = []
        start = chars = 0
        row_keys = [keys[i] for i in rows]
        if seed is None:
            from .keyed import secret_seed

            seed = secret_seed()
        for j, t in enumerate(texts):
            chars += len(t)
            if chars >= _BATCH_CHARS or j == len(texts) - 1:
                new.extend(privatize_keyed(mech, texts[start : j + 1], row_keys[start : j + 1], seed=seed, stream=stream, oov=oov, case=case))  # type: ignore[arg-type]
                start, chars = j + 1, 0
    out = series.astype(object).copy()
    if rows:
        out.iloc[rows] = new
    if isinstance(series.dtype, pd.StringDtype):
        out = out.astype(series.dtype)
    return out


def privatize_frame(
    df: Any,
    column: Hashable,
    mechanism: Any,
    *,
    output_col: Hashable | None = None,
    key: Hashable | None = None,
    **kwargs: Any,
) -> Any:
    """A copy of ``df`` with ``column`` privatized (into ``output_col``, default in place).

    ``key`` is a column name whose values key each row's randomness, or ``"index"``; the other
    keyword arguments are those of :func:`privatize_series` (``epsilon``, ``rng``, ``oov``, ...).
    The default ``stream`` is the column name, as in :func:`deniable.spark.privatize_column`.
    """
    pd = _pd()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if column not in df.columns:
        raise KeyError(f"no column {column!r} in the DataFrame (columns: {', '.join(map(str, df.columns))})")
    if key is not None and not (isinstance(key, str) and key == "index"):
        if key not in df.columns:
            raise KeyError(f"no key column {key!r} in the DataFrame (columns: {', '.join(map(str, df.columns))})")
        key = df[key]
    if "stream" not in kwargs and key is not None:
        kwargs["stream"] = str(column)
    out = df.copy()
    out[column if output_col is None else output_col] = privatize_series(df[column], mechanism, key=key, **kwargs)
    return out
