"""CLI privacy targets: ``-e/--epsilon`` or ``--max-nw``, the one-line run summary, and the
``--report`` list of the input words most likely to come back unchanged.

Used by ``deniable privatize`` (and any command that takes ε): decorate the command with
:func:`target_options`, build the mechanism with :func:`build_targeted`, let a
:class:`SurvivalTracker` observe the run for ``--report``, and print :func:`summary_lines` at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click
import numpy as np

from ._options import check_epsilon
from ._output import wrap

__all__ = ["target_options", "check_targets", "build_targeted", "build_for_targets", "summary_lines", "SurvivalTracker"]


def _number(name: str) -> Callable[[click.Context, click.Parameter, Any], float | None]:
    def convert(ctx: click.Context, param: click.Parameter, value: Any) -> float | None:
        if value is None:
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            raise click.BadParameter(f"{name} must be a number, got {value!r}") from None

    return convert


def target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``-e/--epsilon`` and ``--max-nw`` (mutually exclusive; one is required) to a command.
    The command receives ``epsilon`` and ``max_nw`` (floats or None); call :func:`check_targets`."""
    f = click.option(
        "--max-nw", "max_nw", default=None, metavar="P", callback=_number("--max-nw"),
        help="Privacy target instead of -e: the largest epsilon at which every vocabulary word comes back unchanged "
        "with probability N_w <= P (0 < P < 1; e.g. 0.5), from the shipped or a cached calibration.",
    )(f)
    f = click.option(
        "-e", "--epsilon", default=None, metavar="EPS", callback=_number("epsilon"),
        help="Privacy parameter epsilon > 0 (per unit of the mechanism's metric); or give --max-nw.",
    )(f)
    return f


def check_targets(epsilon: float | None, max_nw: float | None) -> tuple[float | None, float | None]:
    """Validate: exactly one of ε (finite, > 0) and ``--max-nw`` (strictly between 0 and 1).
    Raises a click usage error (exit 2, one line) otherwise."""
    if epsilon is not None and max_nw is not None:
        raise click.UsageError("give either -e/--epsilon or --max-nw, not both (--max-nw chooses epsilon)")
    if epsilon is None and max_nw is None:
        raise click.UsageError("give -e/--epsilon EPS (privacy parameter > 0) or --max-nw P (largest allowed chance, 0 < P < 1, that a word comes back unchanged)")
    if epsilon is not None:
        epsilon = check_epsilon(epsilon, "-e/--epsilon")
    if max_nw is not None and not (0.0 < max_nw < 1.0):
        raise click.BadParameter(
            f"must be strictly between 0 and 1 (a probability; e.g. 0.5), got {max_nw:g}", param_hint="--max-nw"
        )
    return epsilon, max_nw


def build_targeted(
    build: Callable[..., Any], name: str, epsilon: float | None, max_nw: float | None, params: dict[str, Any],
    embedding_path: str | None, limit: int | None, *, progress: bool | None = None, device: str | None = None,
) -> Any:
    """The mechanism at ``epsilon``, or at the ε chosen for ``max_nw``.

    ``build(name, epsilon, params, embedding_path, limit, progress=...)`` is the command's own
    builder (validation, vocabulary loading, pre-computation); ``device``: the torch device the
    builder uses, if any. With a target see :func:`build_for_targets`."""
    epsilon, max_nw = check_targets(epsilon, max_nw)
    if max_nw is None:
        return build(name, epsilon, params, embedding_path, limit, progress=progress)
    return build_for_targets(build, name, [max_nw], params, embedding_path, limit, progress=progress, device=device)[0]


def build_for_targets(
    build: Callable[..., Any], name: str, max_nws: Sequence[float], params: dict[str, Any],
    embedding_path: str | None, limit: int | None, *, progress: bool | None = None, device: str | None = None,
) -> list[Any]:
    """One mechanism per worst-case N_w target in ``max_nws``, each at the ε the calibration chose
    for it, with ``epsilon_choice`` set: :func:`deniable.calibration.targets.mechanism_for_target`.

    Builds once at ε = 1 with the command's ``build`` to validate the options and load the
    vocabulary (read from the file once for all targets), then asks the library for each target
    (the shipped / cached / computed calibration: a bar while computing; computed at most once,
    then cached) on that vocabulary, on the torch ``device`` when given. A target no ε meets is a
    usage error naming the word that cannot meet it."""
    from ..calibration.targets import mechanism_for_target

    for tau in max_nws:
        check_targets(None, tau)
    probe = build(name, 1.0, params, embedding_path, limit, progress=progress)
    backend: dict[str, Any] = {} if device is None else {"backend": "torch", "device": device}
    mechs = []
    for tau in max_nws:
        try:
            mech = mechanism_for_target(name, probe.vocabulary, max_n_w=tau, progress=progress, **backend, **params)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        mech.precompute(progress=progress)
        mechs.append(mech)
    return mechs


def summary_lines(mech: Any, stats: dict[str, int], oov: str) -> list[str]:
    """The run summary for stderr, each line at most :data:`~deniable.cli._output.WIDTH`
    characters: words changed and unknown, how a ``--max-nw`` target chose ε (its source and
    the full statement are in ``--report``), and any warning (output ≈ input, or ≈ noise)."""
    from ..text.privatize import summarize_privatization

    s = summarize_privatization(mech, stats, oov=oov)
    lines = wrap(s.line())
    choice = getattr(mech, "epsilon_choice", None)
    if choice is not None:
        lines += wrap(
            f"epsilon {choice.epsilon:.4g} chosen: every word ({choice.coverage}) comes back unchanged with probability "
            f"N_w <= {choice.max_n_w:g}; worst word {choice.worst_word!r} {choice.worst_n_w:.3g}, median word {choice.median_n_w:.3g} "
            "(how and from which calibration: --report)",
            sep="; ",
        )
    for w in s.warnings():
        lines += wrap(f"warning: {w}", sep="; ")
    return lines


class SurvivalTracker:
    """Counts the input words a mechanism privatizes (:meth:`observe`, an observer of
    :class:`~deniable.text.privatize.ObservedSampler`; nothing is written on the mechanism) so
    ``--report`` can list the input words most likely to come back unchanged.

    N_w per word comes from the shipped or cached calibration at the mechanism's ε when one
    matches; else from exact ``probabilities`` where the mechanism has them; else from
    ``draws`` samples per word for up to ``max_sampled`` distinct words (most frequent first)."""

    def __init__(self, mech: Any) -> None:
        self.mech = mech
        self.counts = np.zeros(int(mech.n_words), dtype=np.int64)

    def observe(self, ids: np.ndarray, out: np.ndarray) -> None:
        if ids.size and np.issubdtype(ids.dtype, np.integer):
            flat = ids.ravel()
            flat = flat[(flat >= 0) & (flat < self.counts.size)]
            self.counts += np.bincount(flat, minlength=self.counts.size)

    def survival(self, *, draws: int = 200, max_sampled: int = 300, rng: Any = 0) -> tuple[np.ndarray, np.ndarray, str]:
        """(ids, N_w, how) for the distinct input words (N_w NaN where not estimated)."""
        ids = np.flatnonzero(self.counts)
        if ids.size == 0:
            return ids, np.full(0, np.nan), ""
        from ..reports import n_w_of_words

        n_w, how, _ = n_w_of_words(self.mech, ids, self.counts, draws=draws, max_estimated=max_sampled, rng=rng)
        return ids, n_w, how

    def lines(self, top: int = 10, **kw: Any) -> list[str]:
        ids, n_w, how = self.survival(**kw)
        ok = ~np.isnan(n_w)
        if not ok.any():
            return []
        ids, n_w = ids[ok], n_w[ok]
        order = np.lexsort((ids, -n_w))[:top]
        words = self.mech.vocabulary.words
        items = ", ".join(f"{words[int(ids[i])]} {n_w[i]:.2f}" for i in order)
        return wrap(
            f"input words most likely to come back unchanged, each with N_w, the probability that the output word is the "
            f"input word (at epsilon {self.mech.epsilon:.4g}; {how}):"
        ) + wrap(f"  {items}")
