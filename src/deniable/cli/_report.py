"""``deniable privatize --report``: the details behind the one-line run summary, each figure with
what it means, wrapped to :data:`~deniable.cli._output.WIDTH` characters a line."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._output import wrap

__all__ = ["report_lines", "OOV_MEANING"]

#: What each ``--oov`` policy did with the unknown words (for the report).
OOV_MEANING = {
    "unk": "each privatized as the UNK point",
    "drop": "removed from the output",
    "keep": "copied verbatim, without privacy",
}


def report_lines(mech: Any, docs: list[tuple[int, int]], stats: dict[str, int], oov: str) -> list[str]:
    """The report's lines: mechanism and guarantee, how ε was chosen, the input's counts, the
    metric's scale and the per-document bounds (docs/calibration.md, "Per-document guarantee").

    ``docs`` holds (line, privatized words ℓ) per record; ℓ counts the words the mechanism
    privatized (UNK included; dropped or kept unknown words are not privatized and carry no
    guarantee)."""
    from ..reports import document_bounds

    lines = wrap("report (input-dependent: it names input words; keep it with the text's owner, never release it with the output)")
    lines += wrap(f"mechanism: {mech!r}")
    guarantee = str(mech.guarantee)
    lines += wrap(f"guarantee: {guarantee}")
    choice = getattr(mech, "epsilon_choice", None)
    if choice is not None and str(choice) not in guarantee:
        lines += wrap(f"epsilon {choice}")
    unknown = stats.get("unknown", 0)
    lines += wrap(
        f"input: {stats.get('records', 0)} records, {stats.get('words', 0)} words, {unknown} out of the vocabulary "
        f"(--oov {oov}: {OOV_MEANING.get(oov, oov)})"
    )
    if docs:
        lines += _bound_lines(mech, docs, oov, document_bounds)
    if oov == "keep" and unknown:
        lines += wrap(f"warning: {unknown} unknown word(s) were copied verbatim and are not covered by any guarantee")
    return lines


def _bound_lines(mech: Any, docs: list[tuple[int, int]], oov: str, document_bounds: Any) -> list[str]:
    b = document_bounds(mech, [n for _, n in docs], oov=oov)
    lengths, worst, typical = b["lengths"], b["worst"], b["typical"]
    k = int(np.argmax(lengths))
    lines = wrap(f"per-document bound over the {len(docs)} document(s): median {np.median(worst):.4g}, max {worst.max():.4g} "
                 f"(line {docs[k][0]}, {lengths[k]} words)")
    lines += wrap(
        "  = epsilon*l*P_d^max for a document of l privatized words: the largest epsilon*sum_i d(x_i, x'_i) against any other "
        "document of the same length and layout; whatever the output, an observer's odds between the two documents change by "
        "at most a factor e^bound (smaller is more private)"
    )
    lines += wrap(f"typical per-document loss: median {np.median(typical):.4g}")
    lines += wrap("  = epsilon*l*P_d^avg: the loss against a random other document of the same length (an average, not a bound)")
    lines += wrap(
        f"distances d between vocabulary words: P_d^max = {b['p_max']:.4g} (the largest), P_d^avg = {b['p_avg']:.4g} (the mean); "
        f"d = {b['metric']}"
    )
    return lines
