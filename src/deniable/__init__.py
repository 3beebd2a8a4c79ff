"""deniable: word-level metric differential privacy for text, and DP release of n-gram statistics.

Quick start::

    import deniable
    mech = deniable.get_mechanism("madlib", epsilon=15)      # bundled GloVe embedding
    mech.privatize("The quick brown fox")      # rng=None: fresh OS entropy (seeds are for experiments)

Every random function takes ``rng`` (None, an int seed, or a numpy Generator).
"""

from __future__ import annotations

from typing import Any

from ._rng import as_generator
from .calibration import equivalent_epsilon, plausible_deniability, select_epsilon
from .embeddings import UNK_ID, Embedding, load_embedding
from .errors import DataError, DeniableWarning, PrivacyWarning
from .ledger import Ledger
from .mechanisms import Guarantee, Madlib, Mahalanobis, Mechanism, available_mechanisms, get_mechanism, register_mechanism
from .mechanisms.tem import TEM


def _connect_layers() -> None:
    """The composition root (docs/architecture.md): give the lower layers' extension points the
    higher layers' functions, so that no module imports a layer above its own."""
    from .calibration.targets import known_calibration, mechanism_for_target
    from .mechanisms import registry
    from .text import privatize

    def build_torch(name: str, embedding: Any, **kwargs: Any) -> Mechanism:
        from .backends.torch_backend import build

        return build(name, embedding, **kwargs)

    def useful_range(mechanism: object) -> tuple[float, float] | None:
        cal = known_calibration(mechanism)
        return cal.useful_range() if cal is not None else None

    registry._connect(target_resolver=mechanism_for_target, backends={"torch": build_torch})
    privatize._connect(useful_range=useful_range)


_connect_layers()

# BRR and the binary embeddings import deniable.brr_runtime; loading them on first use keeps
# `import deniable` light and lets `python -m deniable.brr_runtime` run without a RuntimeWarning
# (runpy warns when the package has already imported the module it is asked to run).
_LAZY = {"BRR": "deniable.mechanisms.brr", "BinaryEmbedding": "deniable.binary", "binarize": "deniable.binary"}
# the mechanisms users compare with, also loaded on first use; the version (importlib.metadata)
_LAZY.update(
    __version__="deniable._version",
    SanText="deniable.mechanisms.santext",
    SanTextPlus="deniable.mechanisms.santext",
    CusText="deniable.mechanisms.custext",
    Vickrey="deniable.mechanisms.vickrey",
    KnnTEM="deniable.mechanisms.knn_tem",
    TruncatedGumbel="deniable.mechanisms.truncated_gumbel",  # deprecated alias of KnnTEM (warns when built)
    Diffractor="deniable.mechanisms.diffractor",
)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'deniable' has no attribute {name!r}")


__all__ = [
    "Embedding",
    "UNK_ID",
    "load_embedding",
    "Mechanism",
    "Guarantee",
    "Madlib",
    "Mahalanobis",
    "TEM",
    "BRR",
    "SanText",
    "SanTextPlus",
    "CusText",
    "Vickrey",
    "KnnTEM",
    "Diffractor",
    "BinaryEmbedding",
    "binarize",
    "plausible_deniability",
    "select_epsilon",
    "equivalent_epsilon",
    "get_mechanism",
    "register_mechanism",
    "available_mechanisms",
    "as_generator",
    "DataError",
    "DeniableWarning",
    "PrivacyWarning",
    "Ledger",
    "__version__",
]
