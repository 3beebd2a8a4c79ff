"""Lazy import of optional dependencies, with one clear install hint when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_optional"]

# module name -> the extra that provides it
_EXTRAS = {
    "faiss": "faiss",
    "matplotlib": "plot",
    "pyarrow": "parquet",
    "torch": "torch",
    "randomgen": "secure",
    "opendp": "opendp",
    "fastapi": "serve",
    "uvicorn": "serve",
    "pyspark": "spark",
    "pandas": "pandas",
    "sklearn": "sklearn",
    "datasets": "datasets",
    "sentence_transformers": "eval",
}


def import_optional(module: str, *, purpose: str | None = None) -> ModuleType:
    """Import ``module`` or raise ``ImportError`` saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        root = module.split(".")[0]
        extra = _EXTRAS.get(root)
        hint = f'pip install "deniable[{extra}]"' if extra else f"pip install {root}"
        need = f" for {purpose}" if purpose else ""
        raise ImportError(f"{root} is needed{need} but is not installed; install it with: {hint}") from exc
