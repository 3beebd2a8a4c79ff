"""scikit-learn: :class:`PrivatizeTransformer`, privatized text inside a ``Pipeline``.

Needs ``pip install "deniable[sklearn]"``.

Example::

    from sklearn.pipeline import make_pipeline
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from deniable.integrations.sklearn import PrivatizeTransformer

    pipe = make_pipeline(PrivatizeTransformer("madlib", epsilon=10),
                         TfidfVectorizer(), LogisticRegression())
    pipe.fit(train_texts, train_labels)

Every ``transform`` call is one release with its own fresh randomness per row
(:func:`deniable.integrations.keyed.resolve_randomness`).
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from ._common import as_mechanism, require

__all__ = ["PrivatizeTransformer"]

require("sklearn", purpose="deniable.integrations.sklearn")

from sklearn.base import BaseEstimator, TransformerMixin  # noqa: E402

# (name, epsilon, embedding path, params) -> Mechanism: clones of one transformer (GridSearchCV,
# cross_val_score) share the loaded embedding instead of loading or deep-copying it again
_BUILT: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_LOCK = threading.Lock()


def _spec_key(mechanism: str, epsilon: float, embedding: Any, params: dict[str, Any]) -> tuple[Any, ...] | None:
    if embedding is not None and not isinstance(embedding, str):
        fingerprint = getattr(embedding, "fingerprint", None)
        if not isinstance(fingerprint, str):
            return None
        embedding = ("fingerprint", fingerprint)
    try:
        key = (mechanism, float(epsilon), embedding, tuple(sorted(params.items())))
        hash(key)
    except TypeError:
        return None
    return key


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class PrivatizeTransformer(TransformerMixin, BaseEstimator):
    """Privatize texts word by word; place it before a vectorizer in a ``Pipeline``.

    ``fit`` learns nothing (the mechanism's noise does not depend on the data); ``transform``
    privatizes each text of a 1-D input (list, array or pandas Series of strings; missing values
    stay missing) and returns an array of ``dtype=object`` (a Series for a Series input, same
    index).

    Guarantee: the mechanism's (ε·d-privacy per word, see ``mechanism.guarantee``) for every text
    passed to ``transform``, and the rows' guarantees compose: every row of every call draws
    independent randomness (a fresh secret per call, each row its own generator keyed by its
    position), so transforming the same texts twice releases two samples (their guarantees add
    up), and equal texts in one call or in two calls (train and test) get independent outputs.

    Parameters
    ----------
    mechanism
        A mechanism name (``"madlib"``, ``"mahalanobis"``, ``"tem"``, ``"brr"``) or a Mechanism
        instance. A name keeps clones cheap (the mechanism is built once per process and shared);
        an instance is deep-copied by ``sklearn.clone``.
    epsilon
        Privacy parameter ε > 0 (with a mechanism name).
    embedding
        An embedding file path or a :class:`~deniable.embeddings.Embedding` (default the bundled
        one), with a mechanism name.
    params
        Mechanism parameters as a dict (e.g. ``{"lam": 0.5}``), with a mechanism name.
    oov, case
        As in :func:`deniable.text.privatize_texts`.
    rng
        ``None`` (default) draws a fresh OS secret at each call; a ``numpy.random.Generator`` or
        a legacy ``RandomState`` instance is drawn from (128 bits per call), so successive calls
        differ and a seeded one reproduces a sequence of calls (``sklearn.clone`` copies it, so
        clones repeat that sequence). An int is accepted only with ``content_keys=True``: an
        int would otherwise give row *i* of every call the same randomness. numpy's global
        state is never used.
    content_keys
        Key each row by its text (opt-in, warns at ``transform``): identical texts then always
        get identical outputs — with an int ``rng``, the same output at every call —
        which shows that they were equal. Each text keeps its guarantee; a data set does not.
    release_id
        A release identity hashed into every row's key (with ``content_keys`` and an int
        ``rng``: separates two uses of one seed).
    random_state
        Deprecated alias of ``rng`` (warns when set; give one of the two).
    """

    def __init__(
        self,
        mechanism: Any = "madlib",
        *,
        epsilon: float | None = None,
        embedding: Any = None,
        params: dict[str, Any] | None = None,
        oov: str = "unk",
        case: str = "preserve",
        rng: Any = None,
        content_keys: bool = False,
        release_id: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.embedding = embedding
        self.params = params
        self.oov = oov
        self.case = case
        self.rng = rng
        self.content_keys = content_keys
        self.release_id = release_id
        self.random_state = random_state  # deprecated alias of rng, read (and warned about) at fit/transform

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.non_deterministic = not (self.content_keys and _is_int(self.random_state if self.rng is None else self.rng))
        return tags

    def _mechanism(self) -> Any:
        from ..text.privatize import check_oov

        check_oov(self.oov)
        params = dict(self.params or {})
        if not isinstance(self.mechanism, str):
            return as_mechanism(self.mechanism, epsilon=self.epsilon, embedding=self.embedding, params=params)
        key = _spec_key(self.mechanism, self.epsilon if self.epsilon is not None else float("nan"), self.embedding, params)
        with _LOCK:
            mech = _BUILT.get(key) if key is not None else None
        if mech is None:
            mech = as_mechanism(self.mechanism, epsilon=self.epsilon, embedding=self.embedding, params=params)
            if key is not None:
                with _LOCK:
                    _BUILT[key] = mech
                    while len(_BUILT) > 2:
                        _BUILT.popitem(last=False)
        return mech

    def _rng_param(self, *, warn: bool = True) -> Any:
        """``rng``, or the deprecated ``random_state`` when only that one is set (warns)."""
        if self.random_state is None:
            return self.rng
        if self.rng is not None:
            raise ValueError("rng and random_state (its deprecated alias) were both given; give rng only")
        if warn:
            warnings.warn("PrivatizeTransformer(random_state=...) is deprecated; use rng=... (same values)", DeprecationWarning, stacklevel=4)
        return self.random_state

    def _seed(self) -> Any:
        """``rng`` as :func:`~deniable.integrations.keyed.resolve_randomness` takes it."""
        rs = self._rng_param()
        if isinstance(rs, np.random.RandomState):
            return np.random.default_rng(rs.randint(0, 2**32, size=4, dtype=np.uint64))
        if rs is None or isinstance(rs, np.random.Generator):
            return rs
        if _is_int(rs):
            if not self.content_keys:
                raise ValueError(
                    f"rng={rs} would give row i of every transform call the same randomness (the rows of "
                    "fit_transform(train) and transform(test) at one position would share it: equal texts, equal outputs). "
                    "Use rng=None (fresh per call) or a numpy Generator such as np.random.default_rng(0) "
                    "(drawn from at each call: reproducible, and successive calls differ); content_keys=True with an int "
                    "keys each row by its text instead (identical texts, identical outputs)"
                )
            return int(rs)
        raise TypeError(f"rng must be None, a numpy Generator, a RandomState or (with content_keys=True) an int, got {type(rs).__name__}")

    def _check(self) -> None:
        from .keyed import check_release_id

        if not isinstance(self.content_keys, (bool, np.bool_)):
            raise TypeError(f"content_keys must be True or False, got {self.content_keys!r}")
        check_release_id(self.release_id)
        if _is_int(self._rng_param(warn=False)):
            self._seed()

    def fit(self, X: Any, y: Any = None) -> PrivatizeTransformer:
        """Check the parameters (building the mechanism once); learns nothing from ``X``."""
        self._check()
        self._mechanism()
        return self

    def transform(self, X: Any) -> Any:
        """Privatized texts: an object array (or a Series for a Series input)."""
        from .keyed import is_null, privatize_rows, resolve_randomness

        self._check()
        mech = self._mechanism()
        if isinstance(X, str):
            raise TypeError("X must be a 1-D collection of texts, got a single string; wrap it in a list")
        is_series = type(X).__name__ == "Series" and hasattr(X, "index")
        values = X.to_numpy(dtype=object) if is_series else np.asarray(X, dtype=object)
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.ndim != 1:
            raise ValueError(f"X must be 1-D (one text per sample), got shape {values.shape}")
        rows, texts = [], []
        for i, v in enumerate(values):
            if is_null(v):
                continue
            if not isinstance(v, str):
                raise TypeError(f"row {i}: expected a string or a missing value, got {type(v).__name__} {v!r}")
            rows.append(i)
            texts.append(v)
        out = values.copy()
        randomness = resolve_randomness(self._seed(), keyed=False, content_keys=bool(self.content_keys), release_id=self.release_id, stream="")
        if texts:
            new = privatize_rows(mech, texts, randomness.row_keys(texts, positions=rows), randomness, oov=self.oov, case=self.case)
            for i, t in zip(rows, new):
                out[i] = t
        if is_series:
            return type(X)(out, index=X.index, name=X.name)
        return out

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.asarray(["text"] if input_features is None else list(input_features), dtype=object)
