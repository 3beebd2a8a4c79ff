"""pandas: privatize a text column, missing values kept, errors naming the row.

Needs ``pip install "deniable[pandas]"``.

Example::

    import pandas as pd
    from deniable.integrations.pandas import privatize_series, privatize_frame

    s = pd.Series(["The quick brown fox", None, "jumps over"], name="text")
    privatize_series(s, "madlib", epsilon=10)          # fresh randomness; NaN/None stay missing
    privatize_frame(df, "text", "madlib", epsilon=10, key="id", rng=0, output_col="private")  # reproducible

Randomness follows :func:`deniable.integrations.keyed.resolve_randomness`: each call is one
release with its own fresh secret and every row its own generator, unless an int seed and a
``key`` make it reproducible.

Per-user bounding and the ledger: ``users=`` (``user_col=`` in :func:`privatize_frame`) gives
each row a user key; ``max_words_per_user=N`` privatizes at most N words per user key in the
call (the first N in row order; the rest become ``[UNK]`` or are dropped:
:mod:`deniable.integrations.capping`); ``ledger=`` with ``dataset=`` records the release
(:class:`deniable.Ledger`) before any text is privatized, and a release over the ledger's
budget raises :class:`~deniable.ledger.BudgetExceeded` with nothing privatized.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from ..text.privatize import check_oov
from ._common import as_mechanism, require
from .capping import allowances, check_cap, check_over_cap, open_ledger, privatize_capped, privatized_counts, user_key_of
from .keyed import EXPLICIT, is_null, key_bytes, privatize_rows, resolve_randomness

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


def _keys(series: Any, key: Any, what: str = "key") -> list[Any]:
    pd = _pd()
    if isinstance(key, str) and key == "index":
        values = list(series.index)
    else:
        if isinstance(key, pd.Series):
            if not key.index.equals(series.index):
                raise ValueError(f"{what} must have the same index as the series (align it first, e.g. {what}.reindex(series.index))")
            values = key.to_numpy(dtype=object, na_value=None).tolist()
        else:
            values = list(key)
        if len(values) != len(series):
            raise ValueError(f"{what} has {len(values)} entries but the series has {len(series)} rows")
    return values


def _bound(series: Any, mech: Any, rows: list[int], texts: list[str], *, users: Any, cap: int | None, oov: str, book: Any, dataset: Any, output: Any) -> list[int] | None:
    """Per-row allowances under the cap (None: no cap), after recording the release in the
    ledger (budget checked there; a refusal raises before anything is privatized)."""
    if users is None:
        if cap is not None:
            raise ValueError("max_words_per_user caps the words of each user key: give users= (user_col= in privatize_frame)")
        user_keys = None
    else:
        values = _keys(series, users, "users")
        user_keys = [user_key_of(None if is_null(values[i]) else values[i], _label(series.index, i)) for i in rows]
    if cap is None and book is None:
        return None
    counts = privatized_counts(mech.vocabulary, texts, oov)
    allowed = None if cap is None or user_keys is None else allowances(user_keys, counts, cap)
    if book is not None:
        book.record(mech, dataset=dataset, words=allowed if allowed is not None else counts, users=user_keys, output=output)
    return allowed


def privatize_series(
    series: Any,
    mechanism: Any,
    *,
    epsilon: float | None = None,
    embedding: Any = None,
    rng: Any = None,
    key: Any = None,
    stream: str | None = None,
    release_id: str | None = None,
    content_keys: bool = False,
    oov: str = "unk",
    case: str = "preserve",
    users: Any = None,
    max_words_per_user: int | None = None,
    over_cap: str = "unk",
    ledger: Any = None,
    dataset: str | None = None,
    output: str | None = None,
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
        ``None`` (default): a fresh secret for this call, every row its own generator keyed by
        its position, so every row of every call is independent. An int seed makes the output
        reproducible and needs ``key`` (or ``content_keys``): each row then draws from
        ``row_generator(seed, stream, key, release=release_id)``
        (:mod:`deniable.integrations.keyed`), the same output as
        :func:`deniable.spark.privatize_column` with that seed, key and release. A
        ``numpy.random.Generator`` is drawn from (128 bits per call), so successive calls differ.
    key
        ``None``, ``"index"`` (the series index), or one key per row (integers, strings or
        bytes; a Series must share the index), unique per row.
    stream
        Separates the columns of one release; default the series name (as Spark's default is
        the column name), ``""`` when it has none.
    release_id
        The release identity, hashed into every row's key: give each release made with one seed
        its own (``"train"``, ``"test"``), so rows with equal keys in two releases do not share
        their randomness.
    content_keys
        Key each row by its text (opt-in, warns): identical texts then get identical outputs,
        which shows they were equal. Each text keeps its guarantee; the series as a whole does not.
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    users
        Optional: one user key per row (strings or integers; a Series must share the index), for
        the cap and the ledger's per-user totals. Every non-missing text needs one.
    max_words_per_user
        Privatize at most this many words per user key in this call: the first ones in row order,
        then word order; every later word of the user is replaced by ``"[UNK]"``
        (``over_cap="unk"``) or removed (``over_cap="drop"``). A capped word costs no ε (the
        output there does not depend on it). See :mod:`deniable.integrations.capping`.
    ledger, dataset, output
        A :class:`deniable.Ledger` (or its path) to record this release in, under the name
        ``dataset``, with ``output`` as its location: one row with the words privatized per
        text (after the cap) and per user key. It is recorded before any text is privatized; a
        release over the ledger's ``max_total`` raises
        :class:`~deniable.ledger.BudgetExceeded` and nothing is privatized.

    Returns
    -------
    pandas.Series
        Same index and name; the privatized texts, missing values where the input had them.
    """
    pd = _pd()
    if not isinstance(series, pd.Series):
        raise TypeError(f"series must be a pandas Series, got {type(series).__name__}; for a DataFrame use privatize_frame(df, column, ...)")
    check_oov(oov)
    cap = check_cap(max_words_per_user)
    check_over_cap(over_cap)
    book = open_ledger(ledger, dataset)
    mech = as_mechanism(mechanism, epsilon=epsilon, embedding=embedding, params=params)
    if stream is None:
        stream = series.name if isinstance(series.name, str) else ""
    randomness = resolve_randomness(
        rng, keyed=key is not None, content_keys=content_keys, release_id=release_id, stream=stream,
        key_hint="key='index', one key per row or, in privatize_frame, an id column",
    )
    rows, texts = _texts(series)
    if randomness.keying == EXPLICIT:
        keys = _keys(series, key)
        for i in rows:
            k = keys[i]
            if is_null(k):
                raise ValueError(f"{_label(series.index, i)}: the row key is missing; every non-missing text needs a key")
            try:
                key_bytes(k)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{_label(series.index, i)}: {exc}") from None
        row_keys = [keys[i] for i in rows]
    else:
        row_keys = randomness.row_keys(texts, positions=rows)  # the texts, or the row positions
    allowed = _bound(series, mech, rows, texts, users=users, cap=cap, oov=oov, book=book, dataset=dataset, output=output)
    new: list[str | None] = []
    start = chars = 0
    for j, t in enumerate(texts):
        chars += len(t)
        if chars >= _BATCH_CHARS or j == len(texts) - 1:
            batch, batch_keys = texts[start : j + 1], row_keys[start : j + 1]
            if allowed is None:
                new.extend(privatize_rows(mech, batch, batch_keys, randomness, oov=oov, case=case))
            else:
                new.extend(privatize_capped(mech, batch, batch_keys, randomness, allowed[start : j + 1], oov=oov, case=case, over_cap=over_cap))
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
    user_col: Hashable | None = None,
    **kwargs: Any,
) -> Any:
    """A copy of ``df`` with ``column`` privatized (into ``output_col``, default in place).

    ``key`` is a column name whose values key each row's randomness (unique per row), or
    ``"index"``; ``user_col`` a column of user keys (for ``max_words_per_user`` and the
    ledger's per-user totals); the other keyword arguments are those of
    :func:`privatize_series` (``epsilon``, ``rng``, ``release_id``, ``content_keys``, ``oov``,
    ``max_words_per_user``, ``over_cap``, ``ledger``, ``dataset``, ...). The default ``stream``
    is the column name, as in :func:`deniable.spark.privatize_column`. Without ``rng`` every
    call is a fresh release; an int ``rng`` needs ``key``.
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
    if user_col is not None:
        if user_col not in df.columns:
            raise KeyError(f"no user column {user_col!r} in the DataFrame (columns: {', '.join(map(str, df.columns))})")
        if user_col == column:
            raise ValueError(f"user_col {user_col!r} is the text column; the user key must be another column")
        kwargs["users"] = df[user_col]
    kwargs.setdefault("stream", str(column))
    out = df.copy()
    out[column if output_col is None else output_col] = privatize_series(df[column], mechanism, key=key, **kwargs)
    return out
