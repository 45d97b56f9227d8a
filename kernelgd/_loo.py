"""Exact leave-one-out for kernel ridge regression: every alpha from one eigendecomposition.

The closed form RidgeCV uses for linear ridge, on the centred, weighted kernel
matrix (:func:`_eigen_system`) or on a low-rank factor ``K ~ F F'``
(:func:`_low_rank_system`); :func:`_loo_scores` turns either into the
leave-one-out predictions and scores of every alpha.
"""

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from ._operator import single_threaded_blas

# Leave-one-out batches the rows of each distinct weight (one shift each) up to this many weights.
LOO_WEIGHT_GROUPS = 32


class _Predictions(RegressorMixin, BaseEstimator):
    """A fitted "regressor" whose predictions are given: scorers evaluate held-out predictions."""

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions


def _eigen_system(K, Y, w, fit_intercept):
    """``s = sqrt(w)``, the eigenpairs of ``Q S K S Q``, the weighted mean of Y and ``V' Q S Y``."""
    s = np.sqrt(w)
    Ks = s[:, None] * K * s[None, :]
    if fit_intercept:
        u = Ks @ s
        Ks = Ks - np.outer(s, u) - np.outer(u, s) + np.outer(s, s) * (s @ u)
    with single_threaded_blas():
        lam, V = np.linalg.eigh(Ks)
    lam = np.maximum(lam, 0.0)
    y_bar = w @ Y if fit_intercept else np.zeros(Y.shape[1])
    # Q S y = S (y - y_bar) since s's = 1
    return s, lam, V, y_bar, V.T @ (s[:, None] * (Y - y_bar))


def _inverse_shift(lam, alpha):
    """``1 / (lam + alpha)``; for alpha = 0 the pseudo-inverse (directions of rounding-level lam dropped)."""
    if alpha > 0:
        return 1.0 / (lam + alpha)
    keep = lam > lam[-1] * len(lam) * np.finfo(float).eps
    return np.where(keep, 1.0 / np.where(keep, lam, 1.0), 0.0)


def _low_rank_system(F, Y, w, fit_intercept):
    """As :func:`_eigen_system` for ``K = F F'`` (n x r factor): eigenpairs from the r x r Gram matrix."""
    s = np.sqrt(w)
    B = s[:, None] * F
    if fit_intercept:
        B -= np.outer(s, s @ B)
    with single_threaded_blas():
        lam, W = np.linalg.eigh(B.T @ B)
    keep = lam > max(lam[-1], 0.0) * len(lam) * np.finfo(float).eps
    lam = lam[keep]
    V = (B @ W[:, keep]) / np.sqrt(lam)  # orthonormal: the left singular vectors of B
    y_bar = w @ Y if fit_intercept else np.zeros(Y.shape[1])
    return s, lam, V, y_bar, V.T @ (s[:, None] * (Y - y_bar))


def _loo_scores(system, Y, w, alphas, fit_intercept, scorer):
    """Exact leave-one-out scores of every alpha from one eigendecomposition.

    The fit minimises ``sum_i w_i (f_i - y_i)^2 + alpha ||f||_H^2`` (w sums
    to 1). With ``S = diag(sqrt(w))``, ``Q = I - s s'`` (the intercept) and
    ``Q S K S Q = V diag(lam) V'``, the hat matrix of the weighted problem
    is ``s s' + V diag(lam / (lam + alpha)) V'``, and the leave-one-out
    residual is ``(y_i - f_i) / (1 - H_ii)``, row i's with the shift
    ``alpha (1 - w_i)``: the base estimator fitted without row i
    renormalises the others' weights. ``system`` is
    :func:`_eigen_system`'s or :func:`_low_rank_system`'s result (V may have
    fewer columns than rows: the other directions have lam = 0).
    """
    s, lam, V, y_bar, VtY = system
    t = Y.shape[1]
    # The base estimator's alpha is per unit weight: without row i the weights are w / (1 - w_i),
    # the same fit as keeping row i at weight 0 with the ridge alpha (1 - w_i), row i's own shift.
    F_t, leverage = np.empty((len(s), len(alphas), t)), np.empty((len(s), len(alphas)))
    values, group = np.unique(w, return_inverse=True)
    if len(values) <= LOO_WEIGHT_GROUPS:  # rows of one weight share a shift: every alpha in two products
        for g, value in enumerate(values):
            rows = slice(None) if len(values) == 1 else np.flatnonzero(group == g)  # a slice: V uncopied
            shrink = np.column_stack([lam * _inverse_shift(lam, alpha * (1.0 - value)) for alpha in alphas])
            F_t[rows] = (V[rows] @ (shrink[:, :, None] * VtY[:, None, :]).reshape(len(lam), -1)).reshape(
                -1, len(alphas), t)
            leverage[rows] = (V[rows] * V[rows]) @ shrink
    else:  # many weights: a shift per row, one alpha at a time
        for a, alpha in enumerate(alphas):
            # w_i < 1 here (several weights): every shift is positive
            shrink = lam / (lam + alpha * (1.0 - w)[:, None]) if alpha > 0 else \
                np.broadcast_to(lam * _inverse_shift(lam, 0.0), (len(s), len(lam)))
            VS = V * shrink
            F_t[:, a] = VS @ VtY
            leverage[:, a] = np.einsum("ij,ij->i", VS, V)
    if fit_intercept:
        leverage += (s * s)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        F = np.where(s[:, None, None] > 0, F_t / s[:, None, None], 0.0) + y_bar
    scores, predictions = [], []
    for i in range(len(alphas)):
        loo = Y - (Y - F[:, i]) / np.maximum(1.0 - leverage[:, i], 1e-12)[:, None]
        predictions.append(loo)
        if scorer is None:  # the default: minus the weighted mean squared error, directly
            scores.append(-float(w @ ((Y - loo) ** 2).mean(axis=1)))
        else:
            scores.append(scorer(_Predictions(loo if t > 1 else loo[:, 0]), None, Y if t > 1 else Y[:, 0],
                                 sample_weight=w))
    return np.array(scores), predictions
