"""scikit-learn: :class:`PrivatizeTransformer`, privatized text inside a ``Pipeline``.

Needs ``pip install "deniable[sklearn]"``.

Example::

    from sklearn.pipeline import make_pipeline
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from deniable.integrations.sklearn import PrivatizeTransformer

    pipe = make_pipeline(PrivatizeTransformer("madlib", epsilon=10, random_state=0),
                         TfidfVectorizer(), LogisticRegression())
    pipe.fit(train_texts, train_labels)
"""

from __future__ import annotations

import threading
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


class PrivatizeTransformer(TransformerMixin, BaseEstimator):
    """Privatize texts word by word; place it before a vectorizer in a ``Pipeline``.

    ``fit`` learns nothing (the mechanism's noise does not depend on the data); ``transform``
    privatizes each text of a 1-D input (list, array or pandas Series of strings; missing values
    stay missing) and returns an array of ``dtype=object`` (a Series for a Series input, same
    index).

    Guarantee: the mechanism's (ε·d-privacy per word, see ``mechanism.guarantee``) for every text
    passed to ``transform``; each call draws fresh noise, so transforming the same texts twice
    releases two samples (their guarantees add up), unless ``random_state`` is an int.

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
    random_state
        scikit-learn's convention: an int gives the same output at every ``transform`` call (for
        experiments only); a ``numpy.random.Generator`` or a legacy ``RandomState`` instance is
        drawn from, so successive calls differ; ``None`` draws fresh OS entropy at each call
        (numpy's global state is never used).
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
        random_state: Any = None,
    ) -> None:
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.embedding = embedding
        self.params = params
        self.oov = oov
        self.case = case
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.non_deterministic = self.random_state is None or not isinstance(self.random_state, (int, np.integer))
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

    def _generator(self) -> np.random.Generator:
        rs = self.random_state
        if isinstance(rs, np.random.RandomState):
            return np.random.default_rng(rs.randint(0, 2**32, size=4, dtype=np.uint64))
        from .._rng import as_generator

        return as_generator(rs)

    def fit(self, X: Any, y: Any = None) -> PrivatizeTransformer:
        """Check the parameters (building the mechanism once); learns nothing from ``X``."""
        self._mechanism()
        return self

    def transform(self, X: Any) -> Any:
        """Privatized texts: an object array (or a Series for a Series input)."""
        from ..text.privatize import privatize_texts
        from .keyed import is_null

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
        if texts:
            new = privatize_texts(mech, texts, rng=self._generator(), oov=self.oov, case=self.case)
            for i, t in zip(rows, new):
                out[i] = t
        if is_series:
            return type(X)(out, index=X.index, name=X.name)
        return out

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.asarray(["text"] if input_features is None else list(input_features), dtype=object)
