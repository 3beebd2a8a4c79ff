"""The side of ``bench_peers.py`` that runs inside a peer's own virtual environment.

A driver script (``drive_<peer>.py``) builds the peer's mechanisms and hands them to
:func:`serve`, which answers JSON-line commands from ``bench_peers.py`` on stdin/stdout. It only
needs numpy and the standard library, never deniable.

Input folder (written by ``bench_peers.py``): ``vectors.npy`` (float32, one row per vocabulary
word), ``vocab.txt`` (the vocabulary, one word a line, row order), ``words.txt`` (the input
words, one a line).

Commands (one JSON object a line) and replies:

* ``{"cmd": "list"}`` -> ``{"mechanisms": [...], "versions": {...}}``
* ``{"cmd": "setup", "mech": KEY, "params": {...}}`` -> ``{"cpu_s": ..., "wall_s": ...}``
* ``{"cmd": "run", "mech": KEY, "n": N or null, "budget_s": B, "chunk": C, "seed": S}`` ->
  ``{"n": words done, "cpu_s": ..., "wall_s": ..., "unchanged": fraction of outputs equal to
  their input, "in_vocab": fraction of outputs in the vocabulary, "sample": first outputs}``.
  With ``n`` null the run stops after the chunk that passes ``budget_s`` CPU seconds.
* ``{"cmd": "drop", "mech": KEY}`` frees a built mechanism; ``{"cmd": "quit"}`` ends.

Times are process CPU time (``time.process_time``) and wall time around the mechanism calls
only. Anything the peer prints goes to stderr, so it cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# A runner privatizes one chunk of words and returns one output word per input word.
Runner = Callable[[list[str]], list[str]]
# A factory builds a mechanism from the shared inputs and the parameters; it returns the runner
# and a reset callable run before every timed round (empties per-instance caches).
Factory = Callable[["Inputs", dict[str, Any]], tuple[Runner, Callable[[], None]]]


class Inputs:
    """The neutral input files: the embedding and the input words."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        folder = Path(folder)
        self.folder = folder
        self.vectors = np.load(folder / "vectors.npy")
        self.vocab = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[: len(self.vectors)]
        self.words = [w for w in (folder / "words.txt").read_text(encoding="utf-8").split("\n") if w]
        if len(self.vocab) != len(self.vectors):
            raise ValueError(f"{folder}: {len(self.vocab)} vocabulary words for {len(self.vectors)} vectors")

    def glove_text(self) -> Path:
        """The embedding as a GloVe text file (``word v1 ... vd`` a line, no header), written once."""
        path = self.folder / "embedding.txt"
        if not path.exists():
            tmp = path.with_suffix(".part")
            with open(tmp, "w", encoding="utf-8") as f:
                for word, row in zip(self.vocab, self.vectors):
                    f.write(word + " " + " ".join(f"{x:.9g}" for x in row.tolist()) + "\n")
            tmp.replace(path)
        return path


def _run(runner: Runner, reset: Callable[[], None], inputs: Inputs, cmd: dict[str, Any]) -> dict[str, Any]:
    words = inputs.words
    n = cmd.get("n")
    limit = len(words) if n is None else min(int(n), len(words))
    chunk = max(1, int(cmd.get("chunk", 4)))
    budget = float(cmd.get("budget_s", 10.0))
    seed = int(cmd.get("seed", 0))
    np.random.seed(seed)  # the peers draw from numpy's and Python's global generators
    random.seed(seed)
    reset()
    outs: list[str] = []
    c0, w0 = time.process_time(), time.perf_counter()
    done = 0
    while done < limit:
        part = words[done : min(done + chunk, limit)]
        outs.extend(runner(part))
        done += len(part)
        if n is None and time.process_time() - c0 >= budget:
            break
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    vocab = set(inputs.vocab)
    pairs = list(zip(words[:done], outs))
    return {
        "n": done,
        "cpu_s": cpu,
        "wall_s": wall,
        "outputs": len(outs),
        "unchanged": sum(a == b for a, b in pairs) / max(1, len(pairs)),
        "in_vocab": sum(b in vocab for b in outs) / max(1, len(outs)),
        "sample": [str(b) for b in outs[:8]],
    }


def _versions(packages: tuple[str, ...]) -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def serve(factories: dict[str, Factory], packages: tuple[str, ...] = (), argv: list[str] | None = None,
          prepare: Callable[[Inputs], object] | None = None) -> None:
    """Answer commands on stdin for the mechanisms ``factories`` can build (see module doc);
    ``packages``: the distributions whose versions ``list`` reports; ``prepare(inputs)`` runs once
    before the first command (e.g. to write a file format the peer reads)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: drive_<peer>.py INPUT_DIR   (started by benchmarks/bench_peers.py)")
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the peer's own prints go to stderr
    sys.stdout = sys.stderr
    inputs = Inputs(argv[0])
    if prepare is not None:
        prepare(inputs)
    built: dict[str, tuple[Runner, Callable[[], None]]] = {}

    def reply(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "quit":
                break
            if cmd["cmd"] == "list":
                reply({"mechanisms": sorted(factories), "versions": _versions(packages)})
            elif cmd["cmd"] == "setup":
                c0, w0 = time.process_time(), time.perf_counter()
                built[cmd["mech"]] = factories[cmd["mech"]](inputs, dict(cmd.get("params", {})))
                reply({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0})
            elif cmd["cmd"] == "run":
                runner, reset = built[cmd["mech"]]
                reply(_run(runner, reset, inputs, cmd))
            elif cmd["cmd"] == "drop":
                built.pop(cmd["mech"], None)
                reply({"dropped": cmd["mech"]})
            else:
                reply({"error": f"unknown command {cmd['cmd']!r}"})
        except Exception as exc:  # reported to bench_peers.py, which shows it and goes on
            reply({"error": f"{type(exc).__name__}: {exc}"})
