"""L2-regularized multinomial logistic regression fitted with L-BFGS: the classifier of
:mod:`deniable.evaluation.utility` (re-exported there), with no dependency beyond numpy/scipy."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from .._validation import check_int, check_positive

__all__ = ["LogisticRegression"]


class LogisticRegression:
    """L2-regularized multinomial logistic regression, fitted with L-BFGS.

    Minimizes the convex objective

        f(W, b) = (1/n) Σ_i −log softmax(x_i W + b)_{y_i}  +  (alpha/2)·‖W‖²_F

    (the intercept b is not penalized) with ``scipy.optimize.minimize(method="L-BFGS-B")`` and
    the analytic gradient (1/n)·Xᵀ(P − Y) + alpha·W. With alpha > 0 the optimum is unique. No
    randomness: the start is W = 0, b = 0.

    Parameters
    ----------
    alpha
        L2 penalty (> 0) on the per-sample mean loss (sklearn's C corresponds to 1/(alpha·n)).
    fit_intercept
        Learn the per-class bias b.
    max_iter, tol
        L-BFGS iteration limit and gradient tolerance (``gtol``).
    """

    def __init__(self, *, alpha: float = 1e-4, fit_intercept: bool = True, max_iter: int = 1000, tol: float = 1e-8) -> None:
        self.alpha = check_positive("alpha", alpha)
        if not isinstance(fit_intercept, bool):
            raise TypeError(f"fit_intercept must be a bool, got {fit_intercept!r}")
        self.fit_intercept = fit_intercept
        self.max_iter = check_int("max_iter", max_iter, minimum=1)
        self.tol = check_positive("tol", tol)
        self.classes_: Any = None  # an array once fitted
        self.coef_: Any = None  # (n_features, n_classes) once fitted
        self.intercept_: Any = None  # (n_classes,) once fitted
        self.n_iter_: int = 0
        self.converged_: bool = False

    @staticmethod
    def _as_matrix(X: Any) -> Any:
        if sp.issparse(X):
            return sp.csr_matrix(X, dtype=np.float64)
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be two-dimensional (n_samples, n_features), got shape {X.shape}")
        return X

    def objective(self, X: Any, y_index: np.ndarray, params: np.ndarray) -> tuple[float, np.ndarray]:
        """f and its gradient at the flat parameter vector ``[W.ravel(), b]`` (``y_index``:
        class indices 0..K-1)."""
        n, p = X.shape
        K = len(self.classes_)
        W = params[: p * K].reshape(p, K)
        b = params[p * K :] if self.fit_intercept else np.zeros(K)
        Z = np.asarray(X @ W) + b
        Z -= Z.max(axis=1, keepdims=True)
        logsum = np.log(np.exp(Z).sum(axis=1))
        loss = float(np.mean(logsum - Z[np.arange(n), y_index])) + 0.5 * self.alpha * float(np.vdot(W, W))
        P = np.exp(Z - logsum[:, None])
        P[np.arange(n), y_index] -= 1.0
        P /= n
        gW = np.asarray(X.T @ P) + self.alpha * W
        grad = np.concatenate([gW.ravel(), P.sum(axis=0)]) if self.fit_intercept else gW.ravel()
        return loss, grad

    def fit(self, X: Any, y: Any) -> LogisticRegression:
        """Fit on features ``X`` (n, p) (dense or sparse) and labels ``y`` (n,) of ≥ 2 classes."""
        X = self._as_matrix(X)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be one-dimensional with {X.shape[0]} labels, got shape {y.shape}")
        classes, y_index = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"y must contain at least 2 classes, got {len(classes)}")
        self.classes_ = classes
        p, K = X.shape[1], len(classes)
        x0 = np.zeros(p * K + (K if self.fit_intercept else 0))
        res = scipy.optimize.minimize(
            lambda w: self.objective(X, y_index, w),
            x0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": self.max_iter, "gtol": self.tol, "ftol": 1e-14},
        )
        self.coef_ = res.x[: p * K].reshape(p, K)
        self.intercept_ = res.x[p * K :] if self.fit_intercept else np.zeros(K)
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Class scores x·W + b, shape (n, K)."""
        if self.coef_ is None:
            raise RuntimeError("LogisticRegression is not fitted: call fit(X, y) first")
        X = self._as_matrix(X)
        if X.shape[1] != self.coef_.shape[0]:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted with {self.coef_.shape[0]}")
        return np.asarray(X @ self.coef_) + self.intercept_

    def predict_proba(self, X: Any) -> np.ndarray:
        return _softmax_rows(self.decision_function(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]


def _softmax_rows(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of class scores (in place on ``Z``, shifted by each row's maximum)."""
    Z -= Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)
