"""Spark: privatize a DataFrame column and count n-grams per user on a cluster.

Needs ``pip install "deniable[spark]"`` (PySpark >= 3.5, Java 17) on the driver and the
executors. An adapter only: every text goes through the same core as on one machine
(:func:`deniable.text.privatize_texts` via :func:`deniable.integrations.keyed.privatize_keyed`;
:func:`deniable.ngrams.ngrams_of` and the vocabulary lookup for counting).

* :func:`privatize_column` — a pandas UDF over Arrow batches. The mechanism is packed once into
  memory-mappable files (:mod:`deniable.integrations.shipping`), distributed once per executor with
  ``SparkContext.addFile`` and loaded once per Python worker; each task receives a few hundred
  bytes. Within a batch the nearest-neighbour searches of all rows run as one call.
* :func:`count_ngrams` — per-user counts over a public vocabulary, bounded per user on the
  executors, collected to the driver as the same :class:`~deniable.ngrams.UserCounts` the
  single-machine counting returns (save it with :func:`deniable.ngrams.io.save_counts` for
  ``deniable ngrams release``). The release itself runs on the driver.

Randomness (:func:`deniable.integrations.keyed.resolve_randomness`): each ``privatize_column``
call draws a fresh secret on the driver and every row its own generator, so every row of every
call is independent. With a ``key`` column and an integer ``rng`` a row's output depends only on
(seed, stream, release, row key) — never on partitions, executors or task retries (a retried task
redraws exactly what the failed attempt drew). See docs/spark.md.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from ..integrations._common import as_mechanism, for_workers, require
from ..integrations.keyed import CONTENT, POSITION, check_bounds, resolve_randomness
from ..integrations.row_keys import master_seed, rng_or_seed
from ..integrations.shipping import Shipment, pack, shipment_for
from ..text.privatize import check_case, check_oov

__all__ = ["privatize_column", "count_ngrams", "distribute"]

_SHIPPED: set[tuple[str, str]] = set()  # (Spark application id, shipment digest)
_LOCK = threading.Lock()


def _pyspark() -> Any:
    return require("pyspark", purpose="deniable.spark")


_CHECKED: set[str] = set()  # Spark application ids whose Python workers import what deniable needs


def _worker_probe(_: Any) -> str:
    import sys

    import pandas  # noqa: F401  (pandas UDFs)
    import pyarrow  # noqa: F401

    import deniable.spark  # noqa: F401  (what the tasks unpickle)

    return sys.executable


def check_workers(spark: Any) -> None:
    """Check, once per Spark application, that the Python workers can import deniable, pandas
    and pyarrow; raise one readable ``RuntimeError`` naming ``PYSPARK_PYTHON`` when they cannot.

    Workers run ``PYSPARK_PYTHON`` (default: ``python3`` on the PATH), not necessarily the
    interpreter of the driver: a session started from a virtual environment that is not activated
    gives workers a Python without deniable, and the job would otherwise fail deep inside a task."""
    sc = spark.sparkContext
    app = str(sc.applicationId)
    with _LOCK:
        if app in _CHECKED:
            return
    try:
        sc.parallelize([0], 1).map(_worker_probe).collect()
    except Exception as exc:  # a Py4J / PySpark error carrying the worker's traceback
        text = str(exc)
        missing = re.search(r"No module named '([^']+)'", text)
        if missing is None:
            raise
        import sys

        worker = os.environ.get("PYSPARK_PYTHON") or sc.pythonExec or "python3"
        raise RuntimeError(
            f"Spark's Python workers cannot import {missing.group(1)!r} (they run {worker!r}, the driver runs "
            f"{sys.executable!r}): set PYSPARK_PYTHON to an interpreter with deniable[spark] installed before the "
            "SparkSession starts (e.g. os.environ['PYSPARK_PYTHON'] = sys.executable), or start it with "
            "deniable.spark.spark_session()"
        ) from None
    with _LOCK:
        _CHECKED.add(app)


def distribute(spark: Any, shipment: Shipment) -> Shipment:
    """Add the shipment's files to the Spark application (``SparkContext.addFile``), once, after
    checking that its Python workers can import deniable (:func:`check_workers`).

    Executors fetch each file once and keep it for the application's lifetime; tasks find it
    with ``SparkFiles.get``.
    """
    check_workers(spark)
    sc = spark.sparkContext
    ident = (sc.applicationId, shipment.digest)
    with _LOCK:
        if ident in _SHIPPED:
            return shipment
        for path in shipment.paths:
            sc.addFile(path)
        _SHIPPED.add(ident)
    return shipment


def _check_column(df: Any, name: str, what: str) -> Any:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a column name (str), got {type(name).__name__}")
    if name not in df.columns:
        raise ValueError(f"no {what} {name!r} in the DataFrame (columns: {', '.join(df.columns)})")
    return df.schema[name].dataType


def privatize_column(
    df: Any,
    column: str,
    mechanism: Any,
    *,
    epsilon: float | None = None,
    max_n_w: float | None = None,
    embedding: Any = None,
    output_col: str | None = None,
    key: str | None = None,
    oov: str = "unk",
    case: str = "preserve",
    rng: Any = None,
    stream: str | None = None,
    release_id: str | None = None,
    content_keys: bool = False,
    user_col: str | None = None,
    max_words_per_user: int | None = None,
    over_cap: str = "unk",
    ledger: Any = None,
    dataset: str | None = None,
    output: str | None = None,
    seed: Any = None,
    **params: Any,
) -> Any:
    """Privatize the text column ``column`` of a Spark DataFrame, word by word.

    Guarantee: the mechanism's (``mechanism.guarantee``: ε·d-privacy per word, summed over the
    words of a text) for every row, as on one machine; layout and case patterns are released as
    in :func:`deniable.text.privatize_texts`. Nulls stay null and draw nothing.

    Randomness (:func:`deniable.integrations.keyed.resolve_randomness`): row ``r`` draws from
    ``row_generator(seed, stream, key_r, release=release_id)``. By default (no ``rng``, no key) the
    seed is a 128-bit secret drawn on the driver for this call only and ``key_r`` is the row's
    identity in this computation (its partition and position in it,
    ``monotonically_increasing_id``), so every row of every call is independent. A task retried
    on the same input recomputes the same rows in the same places and redraws what it drew; a
    recomputation that partitions or orders the rows differently may redraw them. With a ``key``
    column the draw of a row depends only on the seed, the stream, the release and its key —
    the same for any partitioning, executor count or recomputation — and with an integer
    ``rng`` (the seed) it is reproducible and equal to
    :func:`deniable.integrations.keyed.privatize_keyed` on one machine. An integer ``rng``
    without a key raises ``ValueError``. ``content_keys=True`` keys each row by its text (opt-in, warns):
    identical texts get identical outputs, which shows they were equal.

    Parameters
    ----------
    df
        A ``pyspark.sql.DataFrame``.
    column
        A string column to privatize.
    mechanism
        A mechanism name (then ``epsilon`` — or ``max_n_w``, a privacy target that chooses ε,
        see :func:`deniable.get_mechanism` — is required, ``embedding`` is an Embedding or a file
        path readable on the driver — default the bundled one — and ``**params`` are the
        mechanism's parameters) or a Mechanism instance.
    output_col
        Where to write the result (default: replace ``column``).
    key
        A column of integers, strings or binary keys, unique per row for independent draws;
        ``None``: the row's position (or its text with ``content_keys``).
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    rng
        ``None`` (a fresh secret per call), a non-negative integer seed for reproducible
        experiments (needs ``key``) or a ``numpy.random.Generator`` (128 bits drawn from it on
        the driver).
    stream
        Separates the columns of one release; default ``column``.
    release_id
        The release identity (e.g. the table's name), hashed into every row's key: give each
        table privatized with one ``rng`` seed its own, so rows with equal keys in two tables do not
        share their randomness.
    content_keys
        Key each row by its text (opt-in; a :class:`~deniable.errors.PrivacyWarning` explains
        the leak). Not with ``key``.
    user_col
        Optional: a column of user keys (strings or integers; null only where the text is null),
        for the cap and the ledger's per-user totals.
    max_words_per_user
        Privatize at most this many words per user key in this release: the first ones with
        rows ordered by ``key`` (else by their position in the input), then word order; every
        later word of the user becomes ``"[UNK]"`` (``over_cap="unk"``) or is removed
        (``over_cap="drop"``). Computed on the cluster (a running sum per user key). See
        :mod:`deniable.integrations.capping`.
    ledger, dataset, output
        A :class:`deniable.Ledger` (or its path) to record the release in, under the name
        ``dataset``, with ``output`` as its location. The words privatized per row (after the
        cap) are counted on the executors and aggregated per user key on the cluster; only the
        aggregates reach the driver. The release is recorded when this function returns, before
        the output is computed or written (an output never written still counts: the ledger may
        over-count, never under-count); over the ledger's ``max_total`` it raises
        :class:`~deniable.ledger.BudgetExceeded` and nothing is recorded.
    seed
        Deprecated alias of ``rng`` (same values, same outputs; warns with a
        ``DeprecationWarning``); giving both raises ``TypeError``.

    Returns
    -------
    pyspark.sql.DataFrame
        ``df`` with ``output_col`` (string) holding the privatized texts. Lazy, as every Spark
        transformation: the work runs when an action (write, count, collect) asks for it.
    """
    _pyspark()
    from pyspark.sql import types as T
    from pyspark.sql.functions import pandas_udf

    from ..integrations.capping import check_cap, check_over_cap, open_ledger
    from ._bounds import bound_rows, check_user_column, record_release
    from ._udf import privatize_udf_function

    rng = rng_or_seed(rng, seed, where="deniable.spark.privatize_column")
    check_oov(oov)
    check_case(case)
    cap = check_cap(max_words_per_user)
    check_over_cap(over_cap)
    book = open_ledger(ledger, dataset)
    if user_col is not None:
        check_user_column(df, user_col)
    elif cap is not None:
        raise ValueError("max_words_per_user caps the words of each user key: give user_col=<user id column>")
    key_type = _check_text_and_key(df, column, key, output_col)
    randomness = resolve_randomness(
        rng, keyed=key is not None, content_keys=content_keys, release_id=release_id,
        stream=column if stream is None else stream, key_hint="key=<id column>",
    )
    if max_n_w is not None:
        params["max_n_w"] = max_n_w
    mech = as_mechanism(mechanism, epsilon=epsilon, embedding=embedding, params=params)
    ship = distribute(df.sparkSession, shipment_for(for_workers(mech)))
    bounds = None
    if cap is not None or book is not None:
        df, bounds = bound_rows(df, column, key=key, user_col=user_col, cap=cap, shipment=ship, oov=oov)
        if book is not None:
            record_release(df, column, bounds, user_col=user_col, book=book, mechanism=mech, dataset=str(dataset), output=output)
    capped = bounds is not None and bounds.allowed is not None
    fn = privatize_udf_function(ship, randomness, oov=oov, case=case, keyed=randomness.keying != CONTENT, over_cap=over_cap if capped else None)
    udf = pandas_udf(fn, T.StringType())  # type: ignore[call-overload]
    out = df.withColumn(output_col or column, _udf_column(df, udf, column, key, key_type, randomness.keying, bounds))
    return out if bounds is None else out.drop(*bounds.temporary)


def _check_text_and_key(df: Any, column: str, key: str | None, output_col: str | None) -> Any:
    """Check that ``column`` is a string column, ``key`` (when given) a column of integers, strings
    or binary keys, and ``output_col`` a name; returns the key column's Spark type (None without
    a key)."""
    from pyspark.sql import types as T

    text_type = _check_column(df, column, "column")
    if not isinstance(text_type, T.StringType):
        raise TypeError(f"column {column!r} must be a string column, got {text_type.simpleString()}; cast it with F.col({column!r}).cast('string')")
    key_type = None
    if key is not None:
        key_type = _check_column(df, key, "key column")
        if not isinstance(key_type, (T.StringType, T.BinaryType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            raise TypeError(f"key column {key!r} must hold integers, strings or binary, got {key_type.simpleString()}; cast it to a string")
    if output_col is not None and not isinstance(output_col, str):
        raise TypeError(f"output_col must be a column name (str), got {type(output_col).__name__}")
    return key_type


def _udf_column(df: Any, udf: Any, column: str, key: str | None, key_type: Any, keying: str, bounds: Any) -> Any:
    """The privatized column: ``udf`` applied to the text, the row's key by ``keying`` (the text
    itself with content keys, the row's position, or the ``key`` column, which must not be null
    where the text is not) and, under a cap, the words each row may privatize."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    text = df[column]
    extra = [df[bounds.allowed]] if bounds is not None and bounds.allowed is not None else []
    if keying == CONTENT:
        return udf(text, text, *extra) if extra else udf(text)
    if keying == POSITION:
        # unique per row within this computation: (partition index << 33) + position in the partition
        return udf(text, df[bounds.pos] if bounds is not None else F.monotonically_increasing_id(), *extra)
    k = df[key]
    msg = f"deniable.spark.privatize_column: the key column {key!r} is null in a row whose text is not null; every text needs a key"
    # null keys are allowed only where the text is null; they become 0 / "" (never used) so
    # integer keys reach the executors as int64, not float64 with NaN
    filler = F.lit("" if isinstance(key_type, T.StringType) else (b"" if isinstance(key_type, T.BinaryType) else 0)).cast(key_type)
    k = F.when(k.isNull() & text.isNotNull(), F.raise_error(F.lit(msg)).cast(key_type)).when(k.isNull(), filler).otherwise(k)
    return udf(text, k, *extra)


def count_ngrams(
    df: Any,
    user_col: str,
    text_col: str,
    vocabulary: Any,
    *,
    n: int | None = None,
    max_ngrams_per_user: int | None = None,
    C: float | None = None,
    rng: Any = None,
    seed: Any = None,
) -> Any:
    """Count each user's n-grams over a PUBLIC vocabulary on the executors.

    Produces what :func:`deniable.ngrams.count_users` produces on one machine for the same rows
    (users in order of first appearance in the DataFrame, n-grams outside the vocabulary dropped
    and counted in ``dropped``), followed, when bounds are given, by
    :func:`deniable.integrations.keyed.keyed_bound_contributions`: at most ``max_ngrams_per_user``
    distinct n-grams per user (a random subset keyed by (the seed of ``rng``, user)) and counts clamped to
    ``C``, applied per user on the executors. Only the bounded per-user counts reach the driver.

    Guarantee: none by itself — counting is not a release. Release on the driver with
    :func:`deniable.ngrams.release_bayesian` (which enforces its own bounds), or save the result with
    :func:`deniable.ngrams.io.save_counts` for ``deniable ngrams release``.

    Parameters
    ----------
    df
        A Spark DataFrame with one row per record (a user may have many rows).
    user_col, text_col
        The user id column (integers or strings; nulls rejected) and the text column (nulls count
        as empty texts).
    vocabulary
        A :class:`deniable.ngrams.NgramVocabulary` built from PUBLIC data.
    n
        The n-gram order; default (and must equal) ``vocabulary.n``.
    max_ngrams_per_user, C
        Per-user bounds (None: off).
    rng
        The per-user subset draws: ``None`` (a fresh secret seed), a non-negative integer seed
        (reproducible) or a ``numpy.random.Generator`` (128 bits drawn from it on the driver).
    seed
        Deprecated alias of ``rng`` (same values, same outputs; warns with a
        ``DeprecationWarning``); giving both raises ``TypeError``.

    Returns
    -------
    deniable.ngrams.UserCounts
    """
    _pyspark()
    import numpy as np
    import scipy.sparse as sp
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ..ngrams import NgramVocabulary, UserCounts
    from ._udf import bound_function, count_batches_function

    if not isinstance(vocabulary, NgramVocabulary):
        raise TypeError(f"vocabulary must be a deniable.ngrams.NgramVocabulary (from build_vocabulary on public data), got {type(vocabulary).__name__}")
    if n is None:
        n = vocabulary.n
    elif n != vocabulary.n:
        raise ValueError(f"n={n!r} but the vocabulary holds {vocabulary.n}-grams")
    k, c = check_bounds(max_ngrams_per_user, C)
    master, _ = master_seed(rng_or_seed(rng, seed, where="deniable.spark.count_ngrams"))
    user_type = _check_column(df, user_col, "user column")
    if not isinstance(user_type, (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        raise TypeError(f"user column {user_col!r} must hold integers or strings, got {user_type.simpleString()}")
    text_type = _check_column(df, text_col, "text column")
    if not isinstance(text_type, T.StringType):
        raise TypeError(f"text column {text_col!r} must be a string column, got {text_type.simpleString()}")
    ship = distribute(df.sparkSession, pack(vocabulary))
    rows = df.select(df[user_col].alias("u"), df[text_col].alias("t"), F.monotonically_increasing_id().alias("pos"))
    schema = T.StructType([T.StructField("u", user_type), T.StructField("c", T.IntegerType()), T.StructField("cnt", T.LongType()), T.StructField("pos", T.LongType())])
    cells = rows.mapInPandas(count_batches_function(ship, n), schema)
    cells = cells.groupBy("u", "c").agg(F.sum("cnt").alias("cnt"), F.min("pos").alias("pos"))
    if k is not None or c is not None:
        bounded_schema = T.StructType([*schema.fields[:2], T.StructField("cnt", T.DoubleType()), T.StructField("pos", T.LongType())])
        cells = cells.groupBy("u").applyInPandas(bound_function(max_ngrams_per_user=k, C=c, seed=master), bounded_schema)
    pdf = cells.toPandas()
    meta = pdf[pdf["c"] < 0].sort_values("pos", kind="stable")
    users = meta["u"].tolist()
    row_of = {u: i for i, u in enumerate(users)}
    body = pdf[pdf["c"] >= 0]
    integral = c is None or float(c).is_integer()
    data = body["cnt"].to_numpy()
    data = data.astype(np.int32) if integral else data.astype(np.float64)
    r = np.fromiter((row_of[u] for u in body["u"].tolist()), dtype=np.int64, count=len(body))
    m = sp.csr_matrix((data, (r, body["c"].to_numpy(dtype=np.int64))), shape=(len(users), len(vocabulary)))
    m.sum_duplicates()
    m.indices = m.indices.astype(np.int32, copy=False)
    return UserCounts(m, vocabulary.keys, tuple(users), int(meta["cnt"].sum()))
