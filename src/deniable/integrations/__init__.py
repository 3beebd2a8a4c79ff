"""Adapters for the data tools users already have; each imports its library only when used.

* :mod:`deniable.integrations.pandas` — :func:`privatize_series`, :func:`privatize_frame`
  (``pip install "deniable[pandas]"``);
* :mod:`deniable.integrations.sklearn` — :class:`PrivatizeTransformer`, a scikit-learn
  transformer for pipelines (``deniable[sklearn]``);
* :mod:`deniable.integrations.hf` — :func:`dataset_privatizer` / :func:`privatize_dataset` for
  Hugging Face ``datasets.Dataset.map`` without pickling the embedding per worker
  (``deniable[datasets]``);
* :mod:`deniable.spark` — Spark DataFrames (``deniable[spark]``).

The shared pieces have no third-party dependency: :mod:`~deniable.integrations.keyed` (per-row
keyed randomness, the same outputs whatever the batching) and
:mod:`~deniable.integrations.shipping` (a mechanism sent to workers once, as memory-mapped files).
See docs/integrations.md.
"""

__all__: list[str] = []
