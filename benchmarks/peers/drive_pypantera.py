"""Driver for pypantera 1.0.2 (https://github.com/Kekkodf/pypantera), run by bench_peers.py with
the interpreter of the pypantera virtual environment (see setup_peers.sh).

Mechanisms are built through pypantera's documented constructor, ``Class({"embPath": ...,
"epsilon": ..., <mechanism parameters>})``, on the benchmark's embedding written as a GloVe text
file. A chunk of words is privatized the way pypantera's ``obfuscateText`` treats one text:
``processText(noisyEmb(words))`` for the embedding-perturbation mechanisms (CMP, Mahalanobis,
VickreyCMP, VickreyMhl) and ``processText(words)`` for the sampling mechanisms (TEM, SanText,
CusText). SanText and CusText keep per-text / per-word results in instance dictionaries; these are
emptied before every timed round, so each round privatizes the input as new text.

Usage: started by benchmarks/bench_peers.py (``drive_pypantera.py INPUT_DIR``).
"""

from __future__ import annotations

from typing import Any

from _driver_common import Inputs, serve

# pypantera installs its modules as the top-level package "src".
from src.EmbeddingPerturbationMechanism.cmp import CMP
from src.EmbeddingPerturbationMechanism.mahalanobis import Mahalanobis
from src.EmbeddingPerturbationMechanism.vickrey import VickreyCMP, VickreyMhl
from src.SamplingPerturbationMechanism.custext import CusText
from src.SamplingPerturbationMechanism.santext import SanText
from src.SamplingPerturbationMechanism.tem import TEM


def _no_reset() -> None:
    return None


def _embedding_mech(cls: Any, keys: tuple[str, ...]) -> Any:
    def factory(inputs: Inputs, params: dict[str, Any]) -> Any:
        kw = {"embPath": str(inputs.glove_text()), "epsilon": float(params["epsilon"])}
        kw.update({k: params[k] for k in keys})
        mech = cls(kw)
        return (lambda words: mech.processText(mech.noisyEmb(words)).split(" ")), _no_reset

    return factory


def _sampling_mech(cls: Any, keys: dict[str, str], caches: tuple[str, ...]) -> Any:
    def factory(inputs: Inputs, params: dict[str, Any]) -> Any:
        kw: dict[str, Any] = {"embPath": str(inputs.glove_text()), "epsilon": float(params["epsilon"])}
        kw.update({theirs: params[ours] for theirs, ours in keys.items()})
        if cls is CusText:
            kw["distance"] = "euclidean"
        mech = cls(kw)

        def reset() -> None:
            for name in caches:
                setattr(mech, name, {})

        return (lambda words: mech.processText(list(words)).split(" ")), reset

    return factory


FACTORIES = {
    "CMP": _embedding_mech(CMP, ()),
    "Mahalanobis": _embedding_mech(Mahalanobis, ("lam",)),
    "VickreyCMP": _embedding_mech(VickreyCMP, ("t",)),
    "VickreyMhl": _embedding_mech(VickreyMhl, ("t", "lam")),
    "TEM": _sampling_mech(TEM, {"beta": "beta"}, ()),
    "SanText": _sampling_mech(SanText, {}, ("prob_matrix",)),
    "CusText": _sampling_mech(CusText, {"k": "K"}, ("_simWordDict", "_pDict")),
}

if __name__ == "__main__":
    serve(FACTORIES, packages=("pypantera",), prepare=Inputs.glove_text)
