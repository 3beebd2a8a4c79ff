"""Driver for mldp-text 0.1.2 (https://pypi.org/project/mldp-text/), run by bench_peers.py with
the interpreter of the mldp virtual environment (see setup_peers.sh).

Mechanisms are built through mldp-text's documented constructors with the benchmark's embedding
passed as ``embedding_matrix`` (a gensim ``KeyedVectors`` made from ``vectors.npy`` and
``vocab.txt``) and ``vocab`` (the same words), and words are privatized with the documented
``replace_word(word)``, one call per word. ``:exact`` builds a mechanism with
``use_faiss=False`` (exact nearest-neighbour search in numpy), ``:faiss`` with the package default
``use_faiss=True`` (a FAISS IVF index, 100 lists, 50 probed: approximate).

TruncatedGumbel derives its noise scale from the smallest and largest distance between one
randomly chosen word and the others; its constructor draws that word with ``random.sample`` on a
dict view, which Python >= 3.11 rejects, so the driver computes the two distances itself (same
definition, the word drawn with the round seed 0) and passes ``min_inter_dist`` and
``max_inter_dist``.

Usage: started by benchmarks/bench_peers.py (``drive_mldp.py INPUT_DIR``).
"""

from __future__ import annotations

from typing import Any

import mldp_text
import numpy as np
from _driver_common import Inputs, serve
from gensim.models import KeyedVectors

_KV: dict[int, Any] = {}


def _keyed_vectors(inputs: Inputs) -> Any:
    if id(inputs) not in _KV:
        kv = KeyedVectors(vector_size=inputs.vectors.shape[1])
        kv.add_vectors(inputs.vocab, inputs.vectors)
        _KV[id(inputs)] = kv
    return _KV[id(inputs)]


def _inter_distances(vectors: np.ndarray) -> tuple[float, float]:
    start = np.random.default_rng(0).integers(len(vectors))
    d = np.sqrt(((vectors.astype(np.float64) - vectors[start]) ** 2).sum(axis=1))
    d = d[d != 0]
    return float(d.min()), float(d.max())


def _factory(cls_name: str, use_faiss: bool | None, extra: dict[str, str]) -> Any:
    def factory(inputs: Inputs, params: dict[str, Any]) -> Any:
        kw: dict[str, Any] = {
            "epsilon": float(params["epsilon"]),
            "embedding_matrix": _keyed_vectors(inputs),
            "dim": int(inputs.vectors.shape[1]),
            "vocab": set(inputs.vocab),
        }
        if use_faiss is not None:
            kw["use_faiss"] = use_faiss
        kw.update({theirs: params[ours] for theirs, ours in extra.items()})
        if cls_name == "TruncatedGumbel":
            kw["min_inter_dist"], kw["max_inter_dist"] = _inter_distances(inputs.vectors)
        mech = getattr(mldp_text, cls_name)(**kw)
        return (lambda words: [mech.replace_word(w) for w in words]), (lambda: None)

    return factory


FACTORIES = {
    "MultivariateCalibrated:exact": _factory("MultivariateCalibrated", False, {}),
    "MultivariateCalibrated:faiss": _factory("MultivariateCalibrated", True, {}),
    "Mahalanobis:exact": _factory("Mahalanobis", False, {"lambd": "lam"}),
    "Mahalanobis:faiss": _factory("Mahalanobis", True, {"lambd": "lam"}),
    "VickreyMechanism:exact": _factory("VickreyMechanism", False, {}),
    "VickreyMechanism:faiss": _factory("VickreyMechanism", True, {}),
    "TEM": _factory("TEM", None, {}),
    "TruncatedGumbel:exact": _factory("TruncatedGumbel", False, {}),
    "TruncatedGumbel:faiss": _factory("TruncatedGumbel", True, {}),
}

if __name__ == "__main__":
    serve(FACTORIES, packages=("mldp-text", "faiss-cpu", "gensim"))
