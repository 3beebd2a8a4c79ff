"""Mechanisms built once and shared across requests, and privatization with per-word detail.

Nothing here imports a web framework: the pool and :func:`privatize_detailed` are plain library
code that the FastAPI app (:mod:`deniable.service.app`) calls from its worker threads.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from ..text.privatize import privatize_texts
from ..text.tokenize import lookup_key, split_words
from .catalog import MechanismSpec, mechanism_spec, normalize_params, without_defaults
from .errors import PoolError

__all__ = ["MechanismPool", "PoolError", "privatize_detailed", "supports_targets"]


def supports_targets() -> bool:
    """Whether this installation can pick ε from a privacy target (``get_mechanism(max_n_w=...)``,
    the calibration work); the service degrades to ε-only requests when it cannot."""
    from ..mechanisms.registry import get_mechanism

    try:
        sig = inspect.signature(get_mechanism)
    except (TypeError, ValueError):  # pragma: no cover
        return False
    return "max_n_w" in sig.parameters


def _freeze(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


class MechanismPool:
    """Thread-safe, bounded cache of mechanisms keyed by (name, parameters, ε or target).

    The embedding (and BRR's binary codes) are loaded once; each distinct key is built once —
    concurrent requests for a key being built wait for it instead of building it again — and
    kept until ``max_cached`` newer keys push it out (least recently used first). Mechanisms are
    read-only after construction (their ``precompute`` and one warm-up draw run here, before
    sharing, so lazily built tables exist before concurrent use), so one instance serves many
    threads. What each mechanism takes and which parameters a request may set come from the
    registry (:mod:`deniable.service.catalog`).

    Parameters
    ----------
    embedding
        An :class:`~deniable.embeddings.Embedding`, or ``None`` for the bundled default.
    binary_embedding
        BRR's :class:`~deniable.binary.BinaryEmbedding`; ``None`` uses the prebuilt codes of the
        bundled default embedding when ``embedding`` is ``None``, and leaves BRR unavailable
        otherwise (binarizing a new embedding trains a model: do that offline with
        ``deniable export brr``).
    mechanisms
        Names offered (default: every registered mechanism, ``available_mechanisms()``). Those
        that cannot be served here (no binary codes; a mechanism the service cannot build from
        a request) are left out of :attr:`names`, with the reason in :attr:`unavailable`.
    max_cached
        Mechanism instances kept.
    compute_targets
        Accept privacy targets (``max_n_w``) for mechanisms without shipped calibration data:
        the first such request computes the calibration (minutes on a large vocabulary; cached
        on disk afterwards). By default only shipped calibrations are used, so no request can
        start minutes of work.
    """

    def __init__(
        self,
        embedding: Any = None,
        binary_embedding: Any = None,
        *,
        mechanisms: Sequence[str] | None = None,
        max_cached: int = 16,
        compute_targets: bool = False,
    ) -> None:
        from ..mechanisms.registry import available_mechanisms

        known = available_mechanisms()
        offered = tuple(known if mechanisms is None else mechanisms)
        for name in offered:
            if name not in known:
                raise ValueError(f"unknown mechanism {name!r}; known mechanisms: {', '.join(known)}")
        self._embedding = embedding
        self._binary = binary_embedding
        self._default_vocab = embedding is None
        self.specs: dict[str, MechanismSpec] = {n: mechanism_spec(n) for n in offered}
        self.unavailable: dict[str, str] = {}
        for n, spec in self.specs.items():
            if spec.excluded is not None:
                self.unavailable[n] = spec.excluded
            elif spec.vocabulary == "binary" and binary_embedding is None and embedding is not None:
                self.unavailable[n] = "it needs binary codes: start the service with --bundle FILE (deniable export brr)"
        self.names = tuple(n for n in offered if n not in self.unavailable)
        self.max_cached = int(max_cached)
        self._lock = threading.Lock()
        self._vocab_lock = threading.Lock()
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._indexes: dict[tuple, Any] = {}
        self.compute_targets = bool(compute_targets)
        self._shipped: dict[str, Any] = {}
        self._building: dict[tuple, threading.Event] = {}
        self.builds = 0  # how many mechanisms were constructed (tests check sharing)

    # -- vocabularies -------------------------------------------------------------------------
    def embedding(self) -> Any:
        with self._vocab_lock:
            if self._embedding is None:
                from ..embeddings import load_embedding

                self._embedding = load_embedding()
            return self._embedding

    def binary_embedding(self) -> Any:
        with self._vocab_lock:
            if self._binary is None:
                if not self._default_vocab:
                    raise PoolError("binary codes are not available: start the service with --bundle FILE (deniable export brr)", code="unavailable")
                from ..binary import load_default_binary_embedding

                self._binary = load_default_binary_embedding()
            return self._binary

    def vocabulary_for(self, name: str) -> Any:
        """The vocabulary ``name`` works on: the binary codes or the embedding (its spec says)."""
        return self.binary_embedding() if mechanism_spec(name).vocabulary == "binary" else self.embedding()

    def shared_index(self, name: str) -> Any:
        """The search index every ε of ``name`` shares, or None. A mechanism whose constructor
        takes an ``index`` object gets the index of its default kind over its vocabulary (exact
        Euclidean search over the vectors, Hamming search over binary codes); one index serves
        every ε and every mechanism of that kind. It depends only on the vocabulary, and an index
        is about as large as the embedding (about 40 MB for the bundled one), so one per ε would
        multiply the memory."""
        spec = mechanism_spec(name)
        if spec.shared_index is None:
            return None
        key = (spec.vocabulary, spec.shared_index)
        with self._vocab_lock:
            index = self._indexes.get(key)
        if index is None:
            if spec.vocabulary == "binary":
                from ..binary.hamming import make_hamming_index

                index = make_hamming_index(spec.shared_index, self.binary_embedding().codes)
            else:
                from ..neighbors import make_index

                index = make_index(spec.shared_index, self.embedding().vectors)
            with self._vocab_lock:
                index = self._indexes.setdefault(key, index)
        return index

    # -- mechanisms ---------------------------------------------------------------------------
    def shipped_calibration(self, name: str, params: dict[str, Any] | None = None) -> Any:
        """The calibration shipped with deniable for ``name`` on this pool's vocabulary with
        these parameters (:class:`deniable.calibration.targets.Calibration`), or None. Read once
        per mechanism from package data and matched by vocabulary fingerprint and parameters
        (the given ones over the constructor's defaults: every parameter the calibration records
        must agree, and a given parameter it does not record must equal its default), without
        building any mechanism."""
        params = dict(params or {})
        with self._vocab_lock:
            cached = name in self._shipped
            cal = self._shipped.get(name)
        if not cached:
            cal = None
            try:
                from ..calibration import targets

                path = Path(targets._DATA) / f"{name}.npz"
                if path.is_file():
                    cal = targets.Calibration.load(path, source="shipped calibration")
                    if cal.fingerprint != str(getattr(self.vocabulary_for(name), "fingerprint", "")):
                        cal = None  # calibrated on another vocabulary
            except (ImportError, AttributeError, TypeError, ValueError, KeyError, OSError, PoolError):
                cal = None
            with self._vocab_lock:
                self._shipped[name] = cal
        if cal is None:
            return None
        defaults = mechanism_spec(name).defaults()
        effective = {**defaults, **params}
        if any(k in effective and effective[k] != v for k, v in cal.params.items()):
            return None
        if any(k not in cal.params and v != defaults.get(k) for k, v in params.items()):
            return None
        return cal

    def targets_ready(self, name: str, params: dict[str, Any] | None = None) -> bool:
        """Whether a ``max_n_w`` request for ``name`` can be answered from shipped calibration
        data (no minutes of computation), or computing is allowed (``compute_targets``)."""
        if name not in self.names or not supports_targets():
            return False
        if self.compute_targets:
            return True
        return self.shipped_calibration(name, params) is not None

    def check(self, name: str, params: dict[str, Any]) -> dict[str, float]:
        """The parameters to build ``name`` with (:func:`~deniable.service.catalog.normalize_params`:
        only those a request may set, as floats); raises :class:`PoolError` for a mechanism not
        offered here or a parameter a request may not set."""
        if name not in self.names:
            if name in self.unavailable:
                raise PoolError(f"mechanism {name!r} is not available here: {self.unavailable[name]}", code="unavailable")
            raise PoolError(f"unknown mechanism {name!r}; this service offers: {', '.join(self.names)}", code="unknown_mechanism")
        return normalize_params(self.specs[name], params)

    def get(self, name: str, params: dict[str, Any] | None = None, *, epsilon: float | None = None, max_n_w: float | None = None) -> Any:
        """The shared mechanism for ``name`` with ``params`` at ``epsilon`` (or chosen for the
        privacy target ``max_n_w``); built on first use. Raises :class:`PoolError` for bad input."""
        params = without_defaults(self.specs[name], self.check(name, dict(params or {})))
        if (epsilon is None) == (max_n_w is None):
            raise PoolError("give exactly one of epsilon and max_n_w")
        key = (name, _freeze(params), "epsilon" if max_n_w is None else "max_n_w", float(epsilon if max_n_w is None else max_n_w))  # type: ignore[arg-type]  # one is given
        while True:
            with self._lock:
                mech = self._cache.get(key)
                if mech is not None:
                    self._cache.move_to_end(key)
                    return mech
                event = self._building.get(key)
                if event is None:
                    event = self._building[key] = threading.Event()
                    break
            event.wait()  # another thread builds this key; then look again (it may have failed)
        try:
            mech = self._build(name, params, epsilon=epsilon, max_n_w=max_n_w)
            with self._lock:
                self._cache[key] = mech
                self.builds += 1
                while len(self._cache) > self.max_cached:
                    self._cache.popitem(last=False)
            return mech
        finally:
            with self._lock:
                self._building.pop(key, None)
            event.set()

    def _build(self, name: str, params: dict[str, Any], *, epsilon: float | None, max_n_w: float | None) -> Any:
        from ..errors import DataError
        from ..mechanisms.registry import get_mechanism

        vocab = self.vocabulary_for(name)
        try:
            if max_n_w is not None:
                if not supports_targets():
                    raise PoolError(
                        "privacy targets (max_n_w) need the calibration data of a newer deniable; pass epsilon instead",
                        code="target_unavailable",
                    )
                if not self.targets_ready(name, params):
                    raise PoolError(
                        f"no calibration data for {name} with these parameters on this vocabulary, so max_n_w cannot be "
                        "resolved without minutes of computation; pass epsilon instead (the server operator can allow "
                        "computing it once with --compute-targets)",
                        code="target_unavailable",
                    )
                mech = get_mechanism(name, vocab, max_n_w=max_n_w, **params)
            else:
                index = self.shared_index(name)
                extra = {"index": index} if index is not None else {}
                mech = get_mechanism(name, vocab, epsilon=epsilon, **params, **extra)
            _warm_up(mech)
        except PoolError:
            raise
        except (TypeError, ValueError, NotImplementedError) as exc:
            if isinstance(exc, DataError):
                raise
            raise PoolError(f"cannot build {name}: {exc}") from None
        return mech

    def cached_keys(self) -> list[tuple]:
        with self._lock:
            return list(self._cache)


def _warm_up(mech: Any) -> None:
    """Build what the mechanism builds lazily (neighbour tables, samplers) now, before it is
    shared, instead of under concurrent first use: its ``precompute()`` (a no-op for mechanisms
    without tables), then one draw for word 0 with a fixed seed (output discarded)."""
    mech.precompute()
    if mech.n_words:
        mech.sample_ids(np.zeros(1, dtype=np.int64), rng=0)


def _changed(word: str, out: str, lower: bool) -> bool:
    return out == "" or lookup_key(out, lower=lower) != lookup_key(word, lower=lower)


def privatize_detailed(
    mechanism: Any,
    texts: Sequence[str],
    *,
    rng: RNGLike = None,
    oov: str = "unk",
    case: str = "preserve",
    segments: bool = False,
) -> dict[str, Any]:
    """Privatize ``texts`` and say which words changed.

    The texts go through :func:`deniable.text.privatize_texts` as one batch (one ``sample_ids``
    call: the same output as privatizing the texts with the library and the same ``rng``, clitics
    included), which keeps every privacy rule (OOV words privatized as UNK or dropped, never
    copied) in one place; this function only reads its per-word outputs (``token_outputs``) and
    counts. A word counts as changed when the output's lookup key differs from the input's (or it
    was dropped). Every count comes from this call's own data (its ``stats`` and flags), never
    from state kept on ``mechanism``, which concurrent requests share.

    The counts, flags and segments depend on the input beyond what the guarantee covers (an
    unchanged flag next to its output word is the input word): they must stay with the texts'
    owner; only ``texts`` is the privatized release.

    Returns
    -------
    dict
        ``texts`` (outputs), ``per_text`` (``words``, ``changed`` per text), ``privatized``
        (the words the mechanism privatized in each text, for the ledger), ``words``,
        ``unknown``, ``changed``, and with ``segments=True`` per text a list of
        ``{"text", "word", "changed"}`` pieces of the output (separators have ``word`` false).
    """
    stats: dict[str, int] = {}
    tokens: list[tuple[list[str], list[str]]] = []
    privatized: list[int] = []
    out_texts = privatize_texts(mechanism, list(texts), rng=as_generator(rng), oov=oov, case=case, stats=stats, token_outputs=tokens, privatized_per_text=privatized)
    lower = bool(getattr(mechanism.vocabulary, "uncased", False))
    per_text: list[dict[str, int]] = []
    segs: list[list[dict[str, Any]]] = []
    all_flags: list[bool] = []
    for text, (words, outs) in zip(texts, tokens):
        fl = [_changed(w, o, lower) for w, o in zip(words, outs)]
        all_flags += fl
        per_text.append({"words": len(words), "changed": int(sum(fl))})
        if segments:
            parts = split_words(text)
            parts[1::2] = outs
            seg: list[dict[str, Any]] = []
            for i, piece in enumerate(parts):
                if i % 2 == 0:
                    if piece:
                        seg.append({"text": piece, "word": False, "changed": False})
                else:
                    seg.append({"text": piece, "word": True, "changed": fl[i // 2]})
            segs.append(seg)
    words_total = sum(p["words"] for p in per_text)
    flags = all_flags
    result: dict[str, Any] = {
        "texts": out_texts,
        "per_text": per_text,
        "privatized": privatized,
        "words": words_total,
        "unknown": int(stats.get("unknown", 0)),
        "changed": int(sum(flags)),
    }
    if segments:
        result["segments"] = segs
    return result
