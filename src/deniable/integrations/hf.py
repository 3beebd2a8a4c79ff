"""Hugging Face ``datasets``: privatize a text column with ``Dataset.map(batched=True)``.

Needs ``pip install "deniable[datasets]"``.

``Dataset.map(..., num_proc=k)`` pickles the mapped function for each worker; a function that
closes over a mechanism ships the whole embedding (about 82 MB for the bundled one) every time.
:func:`dataset_privatizer` returns a small callable instead (a few hundred bytes pickled): the
mechanism is written once to memory-mappable files (:mod:`deniable.integrations.shipping`) and each
worker process loads it once.

Randomness (:func:`deniable.integrations.keyed.resolve_randomness`): by default every batch the
function privatizes draws a fresh secret, and each row its own generator, so every row of every
split and every data set the function is applied to is independent of every other. With a key
column and an integer ``rng`` the output is reproducible and the same whatever ``num_proc`` and
``batch_size`` are; :func:`privatize_dataset` then mixes the split name into each row's key, so the
rows of two splits never share randomness.

Example::

    from datasets import load_dataset
    from deniable.integrations.hf import privatize_dataset

    dd = load_dataset("imdb")                                   # a DatasetDict: train, test, ...
    private = privatize_dataset(dd, "text", "madlib", epsilon=10, num_proc=4)

    # reproducible (experiments): a key column and an integer rng
    ds = dd["train"].add_column("id", range(len(dd["train"])))
    private = privatize_dataset(ds, "text", "madlib", epsilon=10, key="id", rng=0, num_proc=4)

    # or with your own map call:
    fn = dataset_privatizer("madlib", "text", epsilon=10)
    private = ds.map(fn, batched=True, num_proc=4)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..text.privatize import check_oov
from ._common import as_mechanism, for_workers, require
from .keyed import CONTENT, EXPLICIT, RowRandomness, privatize_rows, resolve_randomness, rng_or_seed
from .shipping import Shipment, shipment_for

__all__ = ["DatasetPrivatizer", "dataset_privatizer", "privatize_dataset"]


@dataclasses.dataclass(eq=False, repr=False)
class DatasetPrivatizer:
    """The function for ``Dataset.map(fn, batched=True)`` (``with_indices=True`` is accepted).

    Holds only a :class:`~deniable.integrations.shipping.Shipment` and settings; the mechanism is
    loaded once per process on first call. Build it with :func:`dataset_privatizer`.

    Without ``rng`` each batch draws its own fresh secret and keys its rows by their position in
    the batch (or by the key column), so applying the same function to two data sets, or to one
    twice, gives independent outputs. With an integer ``rng`` (or a Generator, drawn from once
    when the function is built) and a key column a row draws from
    ``row_generator(seed, stream, key, release=release)``, the same in any batch and worker. With
    ``content_keys`` the rows are keyed by their text under the function's one secret (drawn when
    it is built, or the caller's seed).
    """

    shipment: Shipment
    column: str
    output_column: str
    key: str | None
    randomness: RowRandomness
    oov: str
    case: str

    def __repr__(self) -> str:
        r = self.randomness
        keyed = {EXPLICIT: repr(self.key), CONTENT: "text (content_keys)"}.get(r.keying, "position, fresh secret per batch")
        release = f", release={'/'.join(r.release)!r}" if r.release else ""
        return f"DatasetPrivatizer(column={self.column!r}, output_column={self.output_column!r}, key={keyed}{release}, mechanism={self.shipment.digest})"

    def for_release(self, part: str) -> DatasetPrivatizer:
        """The same function with ``part`` (a split name) appended to the release identity."""
        return dataclasses.replace(self, randomness=dataclasses.replace(self.randomness, release=(*self.randomness.release, str(part))))

    def __call__(self, batch: dict[str, list[Any]], indices: list[int] | None = None) -> dict[str, list[Any]]:
        if self.column not in batch:
            raise KeyError(f"no column {self.column!r} in the dataset batch (columns: {', '.join(batch)})")
        texts = batch[self.column]
        if isinstance(texts, str):
            raise TypeError("call Dataset.map(fn, batched=True, ...): the function takes batches of rows")
        texts = list(texts)
        randomness = self.randomness
        if randomness.keying != CONTENT:
            randomness = randomness.redrawn()  # a fresh secret for this batch, unless the caller gave rng
        if randomness.keying == EXPLICIT:
            if self.key not in batch:
                raise KeyError(f"no key column {self.key!r} in the dataset batch (columns: {', '.join(batch)})")
            keys = list(batch[self.key])
        else:
            keys = randomness.row_keys(texts)  # the texts, or the positions in this batch (under its own secret)
        mech = self.shipment.load()
        try:
            out = privatize_rows(mech, texts, keys, randomness, oov=self.oov, case=self.case)
        except (TypeError, ValueError) as exc:
            first = indices[0] if indices else None
            where = f"batch starting at dataset row {first}" if first is not None else "batch"
            raise type(exc)(f"column {self.column!r}, {where}: {exc}") from None
        return {self.output_column: out}


def dataset_privatizer(
    mechanism: Any, column: str, *, epsilon: float | None = None, embedding: Any = None, output_column: str | None = None,
    key: str | None = None, rng: Any = None, stream: str | None = None, release_id: str | None = None,
    content_keys: bool = False, oov: str = "unk", case: str = "preserve", seed: Any = None, **params: Any,
) -> DatasetPrivatizer:
    """A picklable function that privatizes ``column`` in ``Dataset.map(batched=True)``.

    Guarantee: the mechanism's (``mechanism.guarantee``) for each text; missing values stay
    ``None``; every row has its own randomness, so the guarantees of rows compose.

    Randomness (:func:`deniable.integrations.keyed.resolve_randomness`): without ``rng`` every
    batch draws a fresh secret — the function can be applied to several data sets (or splits)
    and each row of each gets independent randomness. With an integer ``rng`` and ``key`` the
    output is reproducible and does not depend on ``num_proc`` or ``batch_size``; an integer
    ``rng`` without ``key`` (or ``content_keys``) raises ``ValueError``.

    Parameters
    ----------
    mechanism
        A mechanism name (with ``epsilon``, ``embedding``, ``**params``) or a Mechanism.
    column
        The text column; ``output_column`` defaults to it (replaced in place).
    key
        ``None`` or a column of integer, string or bytes keys, unique per row (for example
        ``ds.add_column("id", range(len(ds)))``).
    rng
        ``None`` (fresh secrets), a non-negative integer seed (reproducible; needs ``key``) or a
        ``numpy.random.Generator`` (128 bits drawn from it once, when the function is built).
    stream
        Separates the columns of one release; defaults to ``column``.
    release_id
        The release identity hashed into every row's key: give each data set privatized with one
        ``rng`` seed its own, so rows with equal keys in two data sets do not share their randomness.
    content_keys
        Key each row by its text (opt-in, warns): identical texts get identical outputs, which
        shows that they were equal. Each text keeps its guarantee; the data set does not.
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    seed
        Deprecated alias of ``rng`` (same values, same outputs; warns with a
        ``DeprecationWarning``); giving both raises ``TypeError``.
    """
    check_oov(oov)
    rng = rng_or_seed(rng, seed, where="dataset_privatizer")
    randomness = resolve_randomness(
        rng, keyed=key is not None, content_keys=content_keys, release_id=release_id,
        stream=column if stream is None else stream, key_hint="key=<id column>",
    )
    mech = as_mechanism(mechanism, epsilon=epsilon, embedding=embedding, params=params)
    return DatasetPrivatizer(shipment_for(for_workers(mech)), column, output_column or column, key, randomness, oov, case)


def privatize_dataset(
    dataset: Any, column: str, mechanism: Any, *, epsilon: float | None = None, embedding: Any = None,
    output_column: str | None = None, key: str | None = None, rng: Any = None, stream: str | None = None,
    release_id: str | None = None, content_keys: bool = False, oov: str = "unk", case: str = "preserve",
    num_proc: int | None = None, batch_size: int = 1000, params: dict[str, Any] | None = None, seed: Any = None,
    **map_kwargs: Any,
) -> Any:
    """``dataset.map`` with :func:`dataset_privatizer`: ``column`` privatized in a new Dataset,
    or in every split of a ``DatasetDict`` (a new DatasetDict).

    Each split is its own release: its name (the key of a DatasetDict, or ``Dataset.split`` when
    set, as ``load_dataset(..., split="train")`` sets it) is appended to the release identity, so
    with an integer ``rng`` and a key the rows of two splits never share randomness. With one,
    ``privatize_dataset(dd, ...)["train"]`` equals ``privatize_dataset(dd["train"], ...)`` when
    that Dataset knows its split, and ``privatize_dataset(dd["train"], ..., release_id="train")``
    in any case.

    ``num_proc``, ``batch_size`` and ``**map_kwargs`` go to ``Dataset.map``; ``params`` are the
    mechanism's parameters; ``seed`` is the deprecated alias of ``rng``. See
    :func:`dataset_privatizer` for the rest.
    """
    ds_mod = require("datasets", purpose="deniable.integrations.hf")
    rng = rng_or_seed(rng, seed, where="privatize_dataset")
    fn = dataset_privatizer(
        mechanism, column, epsilon=epsilon, embedding=embedding, output_column=output_column, key=key,
        rng=rng, stream=stream, release_id=release_id, content_keys=content_keys, oov=oov, case=case, **(params or {}),
    )
    desc = map_kwargs.pop("desc", None)

    def run(ds: Any, split: Any) -> Any:
        split_fn = fn if split is None else fn.for_release(str(split))
        label = desc or (f"privatize {column}" + ("" if split is None else f" ({split})"))
        return ds.map(split_fn, batched=True, with_indices=True, num_proc=num_proc, batch_size=batch_size, desc=label, **map_kwargs)

    if isinstance(dataset, ds_mod.DatasetDict):
        return ds_mod.DatasetDict({name: run(split, name) for name, split in dataset.items()})
    return run(dataset, getattr(dataset, "split", None))
