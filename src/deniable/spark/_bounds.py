"""Per-user word caps and ledger records of :func:`deniable.spark.privatize_column`, computed on
the cluster: per-row word counts on the executors, the cap as a running sum per user key (a
window ordered by the key column, else by the row's position), and per-user aggregates — the only
rows collected to the driver, one per user key (one in all without user keys)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..integrations.shipping import Shipment

__all__ = ["Bounds", "bound_rows", "record_release"]

#: Spark integer types a user column may hold (besides strings).
_INTEGER_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")


@dataclass(frozen=True)
class Bounds:
    """The temporary columns added to the DataFrame: the row's position, its privatized-word
    count, and (with a cap) its allowance."""

    pos: str
    count: str
    allowed: str | None
    temporary: tuple[str, ...]


def check_user_column(df: Any, user_col: str) -> None:
    """TypeError / ValueError for a user column that is missing or not strings / integers."""
    if not isinstance(user_col, str):
        raise TypeError(f"user_col must be a column name (str), got {type(user_col).__name__}")
    if user_col not in df.columns:
        raise ValueError(f"no user column {user_col!r} in the DataFrame (columns: {', '.join(df.columns)})")
    kind = type(df.schema[user_col].dataType).__name__
    if kind != "StringType" and kind not in _INTEGER_TYPES:
        raise TypeError(f"user column {user_col!r} must hold strings or integers, got {df.schema[user_col].dataType.simpleString()}")


def bound_rows(df: Any, column: str, *, key: str | None, user_col: str | None, cap: int | None, shipment: Shipment, oov: str) -> tuple[Any, Bounds]:
    """``df`` with the temporary columns of :class:`Bounds`: each row's count of words the
    mechanism privatizes (counted on the executors) and, with ``cap``, its allowance: ``min(count,
    cap - words allowed to the same user key in earlier rows)``, rows ordered by ``key`` (else by
    position)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.functions import pandas_udf

    from ._udf import count_words_function

    tag = uuid.uuid4().hex[:8]
    pos, count, allowed = f"__deniable_pos_{tag}", f"__deniable_words_{tag}", f"__deniable_allowed_{tag}"
    counter = pandas_udf(count_words_function(shipment, oov), T.LongType())  # type: ignore[call-overload]
    text = df[column]
    out = df.withColumn(pos, F.monotonically_increasing_id()).withColumn(count, counter(text))
    if user_col is not None:
        msg = f"deniable.spark.privatize_column: the user column {user_col!r} is null in a row whose text is not null; every text needs a user key"
        out = out.withColumn(count, F.when(F.col(user_col).isNull() & F.col(column).isNotNull(), F.raise_error(F.lit(msg)).cast("long")).otherwise(F.col(count)))
    if cap is None:
        return out, Bounds(pos, count, None, (pos, count))
    if user_col is None:
        raise ValueError("a cap on the words of each user key needs the user column: give user_col")
    order = F.col(key) if key is not None else F.col(pos)
    earlier = Window.partitionBy(F.col(user_col)).orderBy(order, F.col(pos)).rowsBetween(Window.unboundedPreceding, -1)
    # allowances are a running sum of themselves; with a cap of N, min(count, N - sum of earlier counts) clipped at 0 is the same
    before = F.coalesce(F.sum(F.col(count)).over(earlier), F.lit(0))
    out = out.withColumn(allowed, F.least(F.col(count), F.greatest(F.lit(cap) - before, F.lit(0))))
    return out, Bounds(pos, count, allowed, (pos, count, allowed))


def record_release(df: Any, column: str, bounds: Bounds, *, user_col: str | None, book: Any, mechanism: Any, dataset: str, output: str | None) -> Any:
    """Aggregate the words privatized per user key on the cluster, collect only the aggregates,
    and record the release (the ledger checks its budget in the same transaction: a refusal
    raises :class:`~deniable.ledger.BudgetExceeded` and nothing is recorded). Returns the
    :class:`~deniable.ledger.Release`."""
    from pyspark.sql import functions as F

    from ..integrations.capping import user_key_of
    from ..ledger import Tally

    words = F.col(bounds.allowed or bounds.count)
    present = F.col(column).isNotNull()
    aggs = [F.sum(F.when(present, 1).otherwise(0)).alias("records"), F.sum(words).alias("words"), F.max(words).alias("max_words")]
    tally = Tally()
    if user_col is None:
        row = df.agg(*aggs).collect()[0]
        tally.add_totals(int(row["records"] or 0), int(row["words"] or 0), int(row["max_words"] or 0))
    else:
        grouped = df.where(present).groupBy(F.col(user_col).alias("user")).agg(*aggs)
        for row in grouped.toLocalIterator():
            tally.add_totals(int(row["records"]), int(row["words"]), int(row["max_words"]), user=user_key_of(row["user"], f"user column {user_col!r}"))
    return book.record(mechanism, dataset=dataset, words=tally, output=output)
