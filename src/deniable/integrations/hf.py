"""Hugging Face ``datasets``: privatize a text column with ``Dataset.map(batched=True)``.

Needs ``pip install "deniable[datasets]"``.

``Dataset.map(..., num_proc=k)`` pickles the mapped function for each worker; a function that
closes over a mechanism ships the whole embedding (about 82 MB for the bundled one) every time.
:func:`dataset_privatizer` returns a small callable instead (a few hundred bytes pickled): the
mechanism is written once to memory-mappable files (:mod:`deniable.integrations.shipping`) and each
worker process loads it once.

Rows are keyed by their index in the dataset (or by a key column), so with a seed the output is
the same whatever ``num_proc`` and ``batch_size`` are (:mod:`deniable.integrations.keyed`).

Example::

    from datasets import load_dataset
    from deniable.integrations.hf import privatize_dataset

    ds = load_dataset("imdb", split="train")
    private = privatize_dataset(ds, "text", "madlib", epsilon=10, seed=0, num_proc=4)

    # or with your own map call:
    fn = dataset_privatizer("madlib", "text", epsilon=10, seed=0)
    private = ds.map(fn, batched=True, with_indices=True, num_proc=4)
"""

from __future__ import annotations

from typing import Any

from ..text.privatize import check_oov
from ._common import as_mechanism, for_workers, require
from .keyed import check_seed, privatize_keyed, secret_seed
from .shipping import Shipment, shipment_for

__all__ = ["DatasetPrivatizer", "dataset_privatizer", "privatize_dataset"]


class DatasetPrivatizer:
    """The function for ``Dataset.map(fn, batched=True, with_indices=True)``.

    Holds only a :class:`~deniable.integrations.shipping.Shipment` and settings; the mechanism is
    loaded once per process on first call. Build it with :func:`dataset_privatizer`.
    """

    def __init__(self, shipment: Shipment, column: str, output_column: str, key: str | None, seed: int, stream: str, oov: str, case: str) -> None:
        self.shipment = shipment
        self.column = column
        self.output_column = output_column
        self.key = key
        self.seed = seed
        self.stream = stream
        self.oov = oov
        self.case = case

    def __repr__(self) -> str:
        return f"DatasetPrivatizer(column={self.column!r}, output_column={self.output_column!r}, key={self.key or 'row index'!r}, mechanism={self.shipment.digest})"

    def __call__(self, batch: dict[str, list[Any]], indices: list[int] | None = None) -> dict[str, list[Any]]:
        if self.column not in batch:
            raise KeyError(f"no column {self.column!r} in the dataset batch (columns: {', '.join(batch)})")
        texts = batch[self.column]
        if self.key is None:
            if indices is None:
                raise TypeError("rows are keyed by their index: call Dataset.map(fn, batched=True, with_indices=True), or give key=<column>")
            keys = list(indices)
        else:
            if self.key not in batch:
                raise KeyError(f"no key column {self.key!r} in the dataset batch (columns: {', '.join(batch)})")
            keys = batch[self.key]
        if isinstance(texts, str):
            raise TypeError("call Dataset.map(fn, batched=True, ...): the function takes batches of rows")
        mech = self.shipment.load()
        try:
            out = privatize_keyed(mech, texts, keys, seed=self.seed, stream=self.stream, oov=self.oov, case=self.case)
        except (TypeError, ValueError) as exc:
            first = indices[0] if indices else None
            raise type(exc)(f"column {self.column!r}, batch starting at dataset row {first}: {exc}") from None
        return {self.output_column: out}


def dataset_privatizer(
    mechanism: Any,
    column: str,
    *,
    epsilon: float | None = None,
    embedding: Any = None,
    output_column: str | None = None,
    key: str | None = None,
    seed: int | None = None,
    stream: str | None = None,
    oov: str = "unk",
    case: str = "preserve",
    **params: Any,
) -> DatasetPrivatizer:
    """A picklable function that privatizes ``column`` in ``Dataset.map(batched=True, with_indices=True)``.

    Guarantee: the mechanism's (``mechanism.guarantee``) for each text; missing values stay
    ``None``. Rows are keyed by their dataset index (or by the ``key`` column); with ``seed`` the
    output does not depend on ``num_proc`` or ``batch_size``; with ``seed=None`` a secret seed is
    drawn once, here, so the workers of one map call agree and a retried batch reproduces.

    Parameters
    ----------
    mechanism
        A mechanism name (with ``epsilon``, ``embedding``, ``**params``) or a Mechanism.
    column
        The text column; ``output_column`` defaults to it (replaced in place).
    key
        ``None`` (the row index: pass ``with_indices=True``) or a column of integer, string or
        bytes keys.
    seed, stream
        See :func:`deniable.integrations.keyed.privatize_keyed`; ``stream`` defaults to ``column``.
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    """
    check_oov(oov)
    mech = as_mechanism(mechanism, epsilon=epsilon, embedding=embedding, params=params)
    seed = check_seed(seed)
    return DatasetPrivatizer(
        shipment_for(for_workers(mech)),
        column,
        output_column or column,
        key,
        secret_seed() if seed is None else seed,
        column if stream is None else stream,
        oov,
        case,
    )


def privatize_dataset(
    dataset: Any,
    column: str,
    mechanism: Any,
    *,
    epsilon: float | None = None,
    embedding: Any = None,
    output_column: str | None = None,
    key: str | None = None,
    seed: int | None = None,
    stream: str | None = None,
    oov: str = "unk",
    case: str = "preserve",
    num_proc: int | None = None,
    batch_size: int = 1000,
    params: dict[str, Any] | None = None,
    **map_kwargs: Any,
) -> Any:
    """``dataset.map`` with :func:`dataset_privatizer`: a new Dataset with ``column`` privatized.

    ``num_proc``, ``batch_size`` and ``**map_kwargs`` go to ``Dataset.map``; ``params`` are the
    mechanism's parameters. See :func:`dataset_privatizer` for the rest.
    """
    require("datasets", purpose="deniable.integrations.hf")
    fn = dataset_privatizer(
        mechanism, column, epsilon=epsilon, embedding=embedding, output_column=output_column, key=key,
        seed=seed, stream=stream, oov=oov, case=case, **(params or {}),
    )
    map_kwargs.setdefault("desc", f"privatize {column}")
    return dataset.map(fn, batched=True, with_indices=True, num_proc=num_proc, batch_size=batch_size, **map_kwargs)
