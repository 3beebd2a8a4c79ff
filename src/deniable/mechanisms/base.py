"""The :class:`Mechanism` interface shared by every word-level mechanism.

A mechanism maps word ids to word ids at random, satisfying metric differential privacy
(d_X-privacy, Chatzikokolakis et al. 2013; Madlib paper §2.3):

    Pr[M(x) = y] ≤ exp(ε · d(x, x')) · Pr[M(x') = y]   for all inputs x, x' and outputs y,

and, applied word by word to a document of ℓ words, exp(ε · Σᵢ d(xᵢ, xᵢ')) for whole documents
(Madlib paper Theorem 1). The id :data:`~deniable.embeddings.UNK_ID` (-1) is the single
out-of-vocabulary point; mechanisms define where it lies in their metric space.

The module is long on purpose: the whole contract (every optional capability with its one
signature and default) is declared in one class, so a reader finds it in one place.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, overload

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_positive
from ..embeddings.embedding import UNK_ID
from ..metrics import MetricLike, MetricSpace, paired_distances
from ..text.privatize import PrivatizationSummary, check_oov, privatize_texts, summarize_privatization
from ._exclude import Exclusion, resolve_exclusion
from ._rows import _batched_rows_match as _batched_rows_match
from ._rows import _defined_by, log_probability_rows_of, stacked_log_probability_rows

__all__ = ["Guarantee", "Mechanism", "EmbeddingMechanism", "log_probability_rows_of"]


@dataclass(frozen=True)
class Guarantee:
    """What a mechanism guarantees: ε·d-privacy for metric ``metric`` over inputs ``domain``."""

    epsilon: float
    metric: str
    domain: str
    #: How ε was chosen when it came from a privacy target (``get_mechanism(..., max_n_w=...)``):
    #: the target, the covered words, the confidence and the calibration's source; None for a given ε.
    chosen_by: str | None = None

    def __str__(self) -> str:
        return (
            f"metric DP with epsilon={self.epsilon:g}: Pr[M(x)=y] <= exp({self.epsilon:g}*d(x,x'))*Pr[M(x')=y] "
            f"for all x, x' in {self.domain}, d = {self.metric}; per document: exp(epsilon * sum_i d(x_i, x'_i))"
        ) + (f"; epsilon {self.chosen_by}" if self.chosen_by else "")


class Mechanism(ABC):
    """Base class: a randomized map from vocabulary ids to vocabulary ids.

    Subclasses implement :meth:`_sample_ids` (vectorized over a batch), :meth:`distance` (the
    metric of their guarantee) and :attr:`guarantee`, set ``name``, and validate their parameters
    in ``__init__``.

    What every mechanism declares (the contract calibration, evaluation and the CLI rely on):

    * :meth:`derive_guarantee` (read as :attr:`guarantee`) — ε, the metric d and the domain of
      the ε·d-privacy guarantee;
    * :meth:`distance` — d itself, and :meth:`metric_space` — d as points and a named metric
      where it has that form (the privacy ratio's fast path), else None;
    * :attr:`params` — the constructor parameters besides ε;
    * :attr:`has_exact_probabilities` — whether :meth:`probabilities` gives the exact output
      distribution (then statistics are computed, not sampled), with :meth:`log_probabilities`
      and :meth:`log_probability_rows` its logarithm, computed without underflow (what exact
      computations read; a subclass with a closed form defines one of ``log_probabilities`` and
      ``probabilities``, and the other follows);
    * :attr:`finite_metric` — False when d is infinite between some words (an output reveals a
      partition of the input), so metric scales, and the privacy ratio, are undefined;
    * :attr:`has_points` and :meth:`points` — vectors standing for the words, where the
      mechanism works on vectors (calibrations rank words by isolation with them);
    * :meth:`precompute` — build (or load from the disk cache) the one-time tables sampling
      reads, ahead of first use; a no-op returning None for mechanisms without any;
    * :attr:`fittable` and :meth:`fit` — whether the mechanism learns from a corpus before use
      (SanText+), and that step;
    * :meth:`calibration_estimator` — how a calibration measures N_w for this instance
      (``"kernel"``, ``"radial"``, ``"flips"``, ``"exact"`` or ``"sampled"``);
    * :meth:`epsilon_dependent_params` — which of :attr:`params` ε derives (left out of a
      calibration's key), or None when undeclared (a calibration then compares two builds);
    * :attr:`epsilon_choice` — how ε was chosen from a privacy target (None for a given ε), set
      by building a configured copy with :meth:`with_epsilon_choice`;
    * :attr:`backend` — ``"numpy"``, or ``"torch"`` for the device samplers of
      :mod:`deniable.backends`.

    Every capability has one signature and a default here, so consumers ask the instance
    instead of probing for attributes. A new mechanism is registered by name with
    :func:`~deniable.mechanisms.registry.register` (docs/tutorials/add_mechanism.md).
    """

    name: ClassVar[str] = "mechanism"
    #: ``"numpy"`` (sampled on the CPU), or ``"torch"`` for the device samplers of
    #: :mod:`deniable.backends` (their text work can then run in worker processes).
    backend: ClassVar[str] = "numpy"
    #: Whether the mechanism learns from a corpus (:meth:`fit`) before use.
    fittable: ClassVar[bool] = False
    #: Constructor parameters kept only as deprecated aliases (accepted, never listed by the
    #: service's catalog or the CLI's parameter help).
    deprecated_params: ClassVar[frozenset[str]] = frozenset()
    #: How ε was chosen when it came from a privacy target (a
    #: :class:`~deniable.calibration.targets.EpsilonChoice`), None for a given ε: set on a copy
    #: built by :meth:`with_epsilon_choice` (``get_mechanism(..., max_n_w=...)``); the
    #: :attr:`guarantee` then carries it as ``Guarantee.chosen_by``.
    epsilon_choice: Any = None

    def _with_choice(self, g: Guarantee) -> Guarantee:
        """``g`` with ``chosen_by`` saying how ε was chosen, when :attr:`epsilon_choice` chose
        this ε (and ``g`` does not say it already)."""
        choice = self.epsilon_choice
        if choice is None or not isinstance(g, Guarantee) or g.chosen_by is not None or g.epsilon != choice.epsilon:
            return g
        return dataclasses.replace(g, chosen_by=str(choice))

    def _with_exclusion(self, g: Guarantee) -> Guarantee:
        """``g`` with its domain saying which outputs are excluded (``exclude_outputs``); the
        guarantee holds over the remaining outputs (docs/explanation/excluded_outputs.md)."""
        ex = self._exclusion
        if ex is None or not isinstance(g, Guarantee) or "excluded from the outputs" in g.domain:
            return g
        return dataclasses.replace(g, domain=f"{g.domain}; outputs: the {ex.allowed.size} other words, {ex.describe()}")

    # -- excluded outputs (``exclude_outputs=``) -------------------------------------------
    #: The words this mechanism may not output (None: none), set by :meth:`_set_exclusion`.
    _exclusion: Exclusion | None = None

    def _set_exclusion(self, exclude_outputs: Any, *, stacklevel: int = 5) -> None:
        """Read ``exclude_outputs`` (None, a shipped list's name such as ``"profanity"``, a path
        to a file of words, or a list of words; :mod:`deniable.mechanisms._exclude`) against the
        vocabulary; subclasses call it in ``__init__`` (an :class:`EmbeddingMechanism` passes it
        to its constructor) and restrict their outputs to :attr:`allowed_output_ids`."""
        self._exclusion = resolve_exclusion(self.vocabulary, exclude_outputs, stacklevel=stacklevel)

    @property
    def excluded_output_ids(self) -> np.ndarray:
        """Sorted vocabulary ids the mechanism never outputs (``exclude_outputs``; empty when
        none). They remain valid inputs."""
        ex = self._exclusion
        return ex.excluded if ex is not None else np.empty(0, dtype=np.int64)

    @property
    def allowed_output_ids(self) -> np.ndarray:
        """Sorted vocabulary ids the mechanism may output (every word unless ``exclude_outputs``)."""
        ex = self._exclusion
        return ex.allowed if ex is not None else np.arange(self.n_words, dtype=np.int64)

    def with_epsilon_choice(self, choice: Any) -> Mechanism:
        """A copy of this mechanism that records how its ε was chosen from a privacy target
        (``choice``: an :class:`~deniable.calibration.targets.EpsilonChoice` whose ``epsilon`` is
        this mechanism's ε; None: a given ε). The copy shares this one's tables (same ε, same
        parameters, so the same distribution and the same samples for a seed); this mechanism
        is unchanged. Its :attr:`guarantee` then says how ε was chosen."""
        if choice is not None and not math.isclose(float(choice.epsilon), self.epsilon, rel_tol=1e-12, abs_tol=0.0):
            raise ValueError(
                f"the choice is for epsilon={float(choice.epsilon):g} but this mechanism has epsilon={self.epsilon:g}; "
                "build the mechanism at the chosen epsilon first"
            )
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__["epsilon_choice"] = choice
        return copy

    def __init__(self, vocabulary: Any, *, epsilon: float) -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.vocabulary = vocabulary

    # -- the interface ---------------------------------------------------------------------
    @abstractmethod
    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Sample outputs for a validated flat int64 array of ids (may contain UNK_ID)."""

    @abstractmethod
    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """Element-wise metric ``d`` of the guarantee between words ``ids_a[i]`` and ``ids_b[i]``."""

    @abstractmethod
    def derive_guarantee(self) -> Guarantee:
        """The formal guarantee this instance's parameters give: ε, metric, domain — each
        mechanism derives it here, in one place; read it as :attr:`guarantee`."""

    @property
    def guarantee(self) -> Guarantee:
        """The formal guarantee: ε, metric, domain (:meth:`derive_guarantee`, with the excluded
        outputs named), and how ε was chosen when a privacy target chose it (``Guarantee.chosen_by``)."""
        return self._with_choice(self._with_exclusion(self.derive_guarantee()))

    def _params(self) -> dict[str, Any]:
        """Parameters shown in ``repr`` (besides epsilon); subclasses extend it."""
        return {}

    # -- capabilities ----------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """The constructor parameters besides ε (as ``repr`` shows them), e.g. ``{"lam": 0.5}``."""
        p = dict(self._params())
        if self._exclusion is not None:
            p["exclude_outputs"] = self._exclusion.spec
        return p

    @property
    def has_exact_probabilities(self) -> bool:
        """Whether ``probabilities(word)`` (and ``log_probabilities(word)``) give the exact output
        distribution Pr[M(w) = ·] of every word (closed form or an exact finite sum) for this
        instance.

        The default asks the mechanism: its ``probabilities`` does not raise
        ``NotImplementedError`` for word 0. Mechanisms that know the answer without computing a
        row override this."""
        try:
            self.probabilities(0)
        except NotImplementedError:
            return False
        return True

    def log_probabilities(self, word_or_id: str | int) -> np.ndarray:
        """``log P[M(w) = y]`` for every vocabulary word y, ``(V,)`` float64, ``-inf`` for the
        outputs w cannot become; an out-of-vocabulary word is UNK. Needs exact probabilities
        (:attr:`has_exact_probabilities`).

        Mechanisms with a closed form compute it here, in log space (log-sum-exp
        normalisation), so that no output of positive probability underflows to 0: the exact
        statistics and the exact inversion adversary read this. The default is the log of a
        subclass's ``probabilities`` (which may underflow where that one does), and raises
        ``NotImplementedError`` for mechanisms with neither."""
        if _defined_by(type(self), "probabilities") is Mechanism:
            raise NotImplementedError(f"{type(self).__name__} has no closed-form probabilities; estimate by sampling instead")
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(self.probabilities(word_or_id), dtype=np.float64))

    def probabilities(self, word_or_id: str | int) -> np.ndarray:
        """``P[M(w) = y]`` for every vocabulary word y, ``(V,)`` float64 summing to 1 (an
        out-of-vocabulary word is UNK). Needs exact probabilities (:attr:`has_exact_probabilities`).

        The default is ``exp(log_probabilities(w))``: very unlikely outputs then underflow to 0
        here but not in :meth:`log_probabilities`, which exact computations should read. Raises
        ``NotImplementedError`` for mechanisms with neither."""
        if _defined_by(type(self), "log_probabilities") is Mechanism:
            raise NotImplementedError(f"{type(self).__name__} has no closed-form probabilities; estimate by sampling instead")
        return np.exp(self.log_probabilities(word_or_id))

    def log_probability_rows(self, ids: Any) -> np.ndarray:
        """``log P[M(x) = y]`` for each id x in ``ids`` (rows; UNK_ID allowed) and every vocabulary
        word y, ``(len(ids), V)`` float64. Needs exact probabilities (:attr:`has_exact_probabilities`).

        The default stacks :meth:`log_probabilities` one row at a time (or the log of
        ``probabilities`` when a class redefines that one below the other); mechanisms whose rows
        share one distance computation override it with a batched one (the exact inversion
        adversary and statistics over the whole vocabulary call this)."""
        return stacked_log_probability_rows(self, ids)

    def self_probabilities(self, ids: Any, epsilons: Any) -> np.ndarray | None:
        """N_w = ``P[M_ε(w) = w]`` for each id of ``ids`` (rows) and each ε of ``epsilons``
        (columns), the other parameters as this instance's, from one pass over each word's
        distances; None (the default) when the mechanism has no such shortcut. Calibrations use it
        only after it agrees with :meth:`probabilities` on a few words (SanText and kNN-TEM: about
        100× fewer distance computations than one row per ε)."""
        return None

    @property
    def finite_metric(self) -> bool:
        """Whether the guarantee's distance is finite between every two words (False: an output
        can reveal a partition of the input, and the metric has no scale to compare)."""
        return True

    def metric_space(self) -> MetricSpace | None:
        """The guarantee's metric d as points and a named metric, d(x, x') = metric(points[x],
        points[x']) for vocabulary words x, x' (UNK excluded), with a cache key; None when d has
        no such form (consumers then evaluate :meth:`distance` on pairs)."""
        return None

    @property
    def has_points(self) -> bool:
        """Whether :meth:`points` gives vectors for the words (an embedding's vectors), which
        calibrations use to find the most isolated words; True when a class defines
        :meth:`points`."""
        return _defined_by(type(self), "points") is not Mechanism

    def points(self, ids: np.ndarray) -> np.ndarray:
        """Vectors of the words ``ids`` (rows; UNK_ID allowed), where the mechanism works on
        vectors (:attr:`has_points`). The default raises ``NotImplementedError``."""
        raise NotImplementedError(f"{type(self).__name__} has no vector points for its words")

    def precompute(self, *, progress: bool | None = False, rebuild: bool = False) -> Any:
        """Build now (or load from the disk cache) the one-time tables sampling reads, instead
        of at the first draw, and return them; ``progress`` shows a bar (None: when stderr is a
        terminal), ``rebuild`` ignores a cached copy. The default, for mechanisms without such
        tables, does nothing and returns None."""
        return None

    def fit(self, texts: Any) -> Mechanism:
        """Learn from a corpus (an iterable of texts) what the mechanism needs before use, and
        return the mechanism; only for :attr:`fittable` mechanisms (SanText+). The default
        raises ``TypeError``."""
        raise TypeError(f"{self.name} has no fit step (fittable is False); only mechanisms that learn from a corpus, such as santext_plus, are fitted")

    def calibration_estimator(self) -> str:
        """How a calibration (docs/calibration.md) measures N_w = Pr[M(w) = w] over ε for this
        instance: ``"kernel"`` (TEM's exact distance histograms), ``"radial"`` (noise R·u of a
        Gamma radius along random directions, Madlib and Mahalanobis with an exact search),
        ``"flips"`` (BRR's coupled bit flips), ``"exact"`` (:meth:`log_probabilities`) or
        ``"sampled"`` (draws). The default: ``"exact"`` with :attr:`has_exact_probabilities`,
        else ``"sampled"``."""
        return "exact" if self.has_exact_probabilities else "sampled"

    def epsilon_dependent_params(self) -> frozenset[str] | None:
        """Names of :attr:`params` whose value ε derives for this instance (e.g. TEM's
        ``gamma`` when only ``beta`` was given): calibrations leave them out of their key, which
        holds what the user chose. None (the default): not declared, so a calibration builds
        the mechanism at two ε and leaves out what differs."""
        return None

    # -- shared behaviour ------------------------------------------------------------------
    @property
    def n_words(self) -> int:
        return len(self.vocabulary)

    def _as_ids(self, ids: Any) -> np.ndarray:
        arr = np.asarray(ids)
        if arr.size == 0:
            return arr.astype(np.int64).reshape(arr.shape)
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"ids must be an integer array, got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < UNK_ID or hi >= self.n_words:
            raise ValueError(f"ids must lie in [-1, {self.n_words - 1}] (-1 = out of vocabulary), got values in [{lo}, {hi}]")
        return arr

    def id_of(self, word_or_id: str | int, *, oov: str | None = None) -> int:
        """Id of a word (looked up as the text path does: NFC, lower-cased for uncased
        vocabularies) or a validated id.

        ``oov=None`` (default) raises ``KeyError`` for an out-of-vocabulary word; ``oov="unk"``
        returns :data:`~deniable.embeddings.UNK_ID` (-1), the point every unknown word is
        privatized as. ``"drop"`` and ``"keep"`` give an unknown word no id (it is removed or
        copied, not privatized) and raise ``KeyError`` saying so.
        """
        if isinstance(word_or_id, str):
            from ..text.tokenize import lookup_key

            key = lookup_key(word_or_id, lower=self.vocabulary.uncased)
            if key in self.vocabulary:
                return self.vocabulary.id_of(key)
            if oov == "unk":
                return UNK_ID
            if oov is None:
                raise KeyError(f"{word_or_id!r} is not in the vocabulary ({self.n_words} words); pass oov='unk' to use the UNK point it is privatized as")
            check_oov(oov)
            raise KeyError(f"{word_or_id!r} is not in the vocabulary and oov={oov!r} does not privatize it ({'it is removed' if oov == 'drop' else 'it is copied verbatim'}); use oov='unk'")
        if isinstance(word_or_id, (bool, np.bool_)) or not isinstance(word_or_id, (int, np.integer)):
            raise TypeError(f"expected a word (str) or an id (int), got {type(word_or_id).__name__}")
        return int(self._as_ids(np.asarray([word_or_id]))[0])

    def sample_ids(self, ids: Any, rng: RNGLike = None) -> np.ndarray:
        """Privatize word ids: an output id for each input id (same shape, int64).

        ``ids`` may contain :data:`~deniable.embeddings.UNK_ID` (-1), the out-of-vocabulary point.
        """
        arr = self._as_ids(ids)
        if arr.size == 0:
            return arr.copy()
        out = self._sample_ids(arr.ravel(), as_generator(rng))
        return np.asarray(out, dtype=np.int64).reshape(arr.shape)

    def privacy_loss_bound(self, w1: str | int, w2: str | int, *, oov: str = "unk") -> float:
        """ε·d(w1, w2): the largest log-likelihood ratio an observer can get between w1 and w2.

        Words follow the ``oov`` policy of :meth:`privatize`: with ``"unk"`` (default) an
        out-of-vocabulary word is the UNK point. With ``"drop"`` or ``"keep"`` an unknown word
        is not privatized, so the bound is ``inf`` against any different word (kept words are
        copied, dropped ones leave a visible gap), and 0 between two unknown words under
        ``"drop"`` (both vanish) or the same word under ``"keep"``.
        """
        check_oov(oov)
        if oov != "unk":
            unknown = [isinstance(w, str) and self.id_of(w, oov="unk") == UNK_ID for w in (w1, w2)]
            if any(unknown):
                if all(unknown) and (oov == "drop" or w1 == w2):
                    return 0.0
                return math.inf
        a, b = self.id_of(w1, oov="unk"), self.id_of(w2, oov="unk")
        return self.epsilon * float(self.distance(np.array([a]), np.array([b]))[0])

    @overload
    def privatize(  # type: ignore[overload-overlap]
        self, texts: str, rng: RNGLike = None, *, oov: str = "unk", case: str = "preserve", return_summary: Literal[False] = False
    ) -> str: ...

    @overload
    def privatize(
        self, texts: Sequence[str], rng: RNGLike = None, *, oov: str = "unk", case: str = "preserve", return_summary: Literal[False] = False
    ) -> list[str]: ...

    @overload
    def privatize(  # type: ignore[overload-overlap]
        self, texts: str, rng: RNGLike = None, *, oov: str = "unk", case: str = "preserve", return_summary: Literal[True]
    ) -> tuple[str, PrivatizationSummary]: ...

    @overload
    def privatize(
        self, texts: Sequence[str], rng: RNGLike = None, *, oov: str = "unk", case: str = "preserve", return_summary: Literal[True]
    ) -> tuple[list[str], PrivatizationSummary]: ...

    def privatize(
        self,
        texts: str | Sequence[str],
        rng: RNGLike = None,
        *,
        oov: str = "unk",
        case: str = "preserve",
        return_summary: bool = False,
    ) -> Any:
        """Privatize a text or a list of texts, word by word, keeping the layout.

        ``oov``: ``"unk"`` (default; unknown words are privatized as the UNK point), ``"drop"``
        (removed), or ``"keep"`` (emitted verbatim: an unsafe opt-out that warns). ``case``:
        ``"preserve"`` (output words take the input words' case pattern, which is released as
        is) or ``"lower"``. Separators (whitespace, punctuation) pass through: the layout is
        released too. See :func:`deniable.text.privatize_texts`.

        ``return_summary=True`` returns ``(output, summary)``: the
        :class:`~deniable.text.PrivatizationSummary` of this call (words, unknown, changed, ε).
        The summary depends on the input and is not covered by the guarantee: it stays with the
        texts' owner. Nothing is written on the mechanism, so one mechanism may serve many threads.
        """
        if isinstance(texts, (bytes, bytearray, memoryview)):
            raise TypeError(f"texts must be a str or a list of str, got {type(texts).__name__}; decode it first, e.g. data.decode('utf-8')")
        single = isinstance(texts, str)
        if not single and not isinstance(texts, (list, tuple)) and not hasattr(texts, "__iter__"):
            raise TypeError(f"texts must be a str or a list of str, got {type(texts).__name__}")
        batch: list[str] = [texts] if isinstance(texts, str) else list(texts)
        stats: dict[str, int] | None = {} if return_summary else None
        out = privatize_texts(self, batch, rng=rng, oov=oov, case=case, stats=stats)
        result: Any = out[0] if single else out
        if return_summary:
            assert stats is not None
            return result, summarize_privatization(self, stats, oov=oov)
        return result

    @property
    def last_privatization(self) -> Any:
        """Removed: a summary stored on a shared mechanism could be read by another thread.
        Use ``privatize(..., return_summary=True)``."""
        raise AttributeError(
            "Mechanism.last_privatization was removed (one thread could read another's summary); "
            "use out, summary = mechanism.privatize(texts, rng, return_summary=True)"
        )

    def __repr__(self) -> str:
        shown = dict(self._params())
        if self._exclusion is not None:
            shown["exclude_outputs"] = self._exclusion.describe()
        params = "".join(f", {k}={v!r}" for k, v in shown.items())
        g = self.guarantee
        return (
            f"{type(self).__name__}(epsilon={self.epsilon:g}{params}, vocabulary={self.n_words} words "
            f"[{getattr(self.vocabulary, 'fingerprint', '?')}]; guarantee: {g.epsilon:g}*d-privacy, d = {g.metric}, "
            f"over {g.domain})"
        )


def _rebuild(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return cls(*args, **kwargs)


#: Attributes besides the constructor call that pickling keeps (how ε was chosen,
#: :meth:`Mechanism.with_epsilon_choice`).
_PICKLED_AFTER_INIT = ("epsilon_choice",)


class EmbeddingMechanism(Mechanism):
    """A mechanism over a real-valued :class:`~deniable.embeddings.Embedding`; UNK is the
    vocabulary mean vector.

    Pickles as its constructor call: the embedding by reference (a few hundred bytes, memory-mapped
    on load, see :class:`~deniable.embeddings.Embedding`), derived tables (search index, TEM
    tables) rebuilt, or reloaded from their disk cache, in the process that unpickles it; the same
    seed then gives the same samples there.
    """

    _init_call: tuple[tuple[Any, ...], dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self._init_call = (args, dict(kwargs))
        return self

    def __reduce__(self) -> Any:
        args, kwargs = self._init_call
        extra = {k: self.__dict__[k] for k in _PICKLED_AFTER_INIT if k in self.__dict__}
        return (_rebuild, (type(self), args, kwargs), extra or None)

    def __init__(self, embedding: Any, *, epsilon: float, exclude_outputs: Any = None) -> None:
        """Check ``embedding`` and ε, and read ``exclude_outputs`` (the words never output)."""
        from ..embeddings.embedding import Embedding

        if not isinstance(embedding, Embedding):
            raise TypeError(f"embedding must be a deniable.Embedding, got {type(embedding).__name__}; see deniable.load_embedding()")
        super().__init__(embedding, epsilon=epsilon)
        self.embedding = embedding
        self._set_exclusion(exclude_outputs, stacklevel=6)

    def points(self, ids: np.ndarray) -> np.ndarray:
        """Vectors of ``ids`` (float32), the vocabulary mean for UNK_ID."""
        ids = np.asarray(ids, dtype=np.int64)
        pts = self.embedding.vectors[np.maximum(ids, 0)]
        unk = ids == UNK_ID
        if unk.any():
            pts[unk] = self.embedding.mean
        return pts

    def distance(self, ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray:
        """Element-wise d(a, b): :attr:`metric` (Euclidean when None) between the words' vectors
        (UNK: the vocabulary mean)."""
        return paired_distances(self.points(ids_a), self.points(ids_b), "euclidean" if self.metric is None else self.metric)

    #: The guarantee's metric on ``embedding.vectors`` for mechanisms that take a ``metric``
    #: parameter (TEM, SanText, ...); None: Euclidean, as :meth:`distance` computes it.
    metric: MetricLike | None = None

    def metric_space(self) -> MetricSpace | None:
        """``embedding.vectors`` with :attr:`metric` (Euclidean when it is None); None when a
        subclass overrides :meth:`distance` without declaring a metric or a metric space."""
        fp = self.embedding.fingerprint
        if self.metric is not None:
            return MetricSpace(self.embedding.vectors, self.metric, key=("metric", self.metric, fp) if isinstance(self.metric, str) else None)
        if type(self).distance is EmbeddingMechanism.distance:
            return MetricSpace(self.embedding.vectors, "euclidean", key=("euclidean", fp))
        return None

    @property
    def _domain(self) -> str:
        return f"the {self.n_words} vocabulary words and UNK (the vocabulary mean vector)"
