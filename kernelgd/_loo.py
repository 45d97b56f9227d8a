"""Exact leave-one-out for kernel ridge regression: every alpha from one eigendecomposition, RidgeCV's
closed form on the centred, weighted kernel matrix (``_eigen_system``) or a low-rank factor ``K ~ F F'``
(``_low_rank_system``). The eigendecompositions are at most 3,000 x 3,000, where threaded LAPACK is safe.
"""

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from ._array_api import clip_min, concat, outer_product, row_dot, take_rows, to_numpy, xp_of, zeros_as

# Leave-one-out batches the rows of each distinct weight (one shift each) up to this many weights.
LOO_WEIGHT_GROUPS = 32


class _Predictions(RegressorMixin, BaseEstimator):
    """A fitted "regressor" whose predictions are given: scorers evaluate held-out predictions."""

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions


def centred_weighted(K, w, fit_intercept):
    """``Q S K S Q`` (``S = diag(sqrt(w))``, ``Q = I - s s'``; without an intercept ``S K S``), a new array."""
    s = xp_of(K).sqrt(w)
    Ks = s[:, None] * K * s[None, :]
    if fit_intercept:
        u = Ks @ s
        Ks = Ks - outer_product(s, u) - outer_product(u, s) + outer_product(s, s) * (s @ u)
    return Ks


def _eigen_system(K, Y, w, fit_intercept):
    """``s = sqrt(w)``, the eigenpairs of ``Q S K S Q``, the weighted mean of Y and ``V' Q S Y``."""
    xp = xp_of(K)
    s = xp.sqrt(w)
    lam, V = xp.linalg.eigh(centred_weighted(K, w, fit_intercept))  # the lower triangle, as LAPACK's syevd reads it
    lam = clip_min(lam, 0.0)
    y_bar = w @ Y if fit_intercept else zeros_as(Y, Y.shape[1])
    # Q S y = S (y - y_bar) since s's = 1
    return s, lam, V, y_bar, V.T @ (s[:, None] * (Y - y_bar))


def _inverse_shift(lam, alpha):
    """``1 / (lam + alpha)``; for alpha = 0 the pseudo-inverse (directions of rounding-level lam dropped)."""
    if alpha > 0:
        return 1.0 / (lam + alpha)
    xp = xp_of(lam)
    keep = lam > float(float(lam[-1]) * lam.shape[0] * np.finfo(float).eps)
    return xp.where(keep, 1.0 / xp.where(keep, lam, 1.0), 0.0)


def _low_rank_system(F, Y, w, fit_intercept):
    """As :func:`_eigen_system` for ``K = F F'`` (n x r factor, overwritten): eigenpairs from the r x r Gram
    matrix."""
    s = xp_of(F).sqrt(w)
    F *= s[:, None]  # in place, as the centring: each new n x r array costs a pass and its pages' first touch
    return _factor_system(center_columns(F, s) if fit_intercept else F, s, Y, w, fit_intercept)


def center_columns(F, s):
    """``Q F`` with ``Q = I - s s'``, in place a column block at a time (no second n x r copy)."""
    projection, r = s @ F, F.shape[1]
    for start in range(0, r, 64):
        stop = min(start + 64, r)  # the array API leaves out-of-bounds slices unspecified
        F[:, start:stop] -= s[:, None] * projection[None, start:stop]
    return F


def _factor_system(B, s, Y, w, fit_intercept):
    """As :func:`_eigen_system` for ``Q S K S Q ~ B B'``, B weighted and centred already (n x r)."""
    xp = xp_of(B)
    lam, W = xp.linalg.eigh(B.T @ B)
    top = max(float(lam[-1]), 0.0) if lam.shape[0] else 0.0
    keep = np.flatnonzero(np.asarray(to_numpy(lam)) > top * lam.shape[0] * np.finfo(float).eps)
    lam, W = take_rows(lam, keep), take_rows(W.T, keep).T
    V = B @ W
    V /= xp.sqrt(lam)  # in place (see _low_rank_system); orthonormal: the left singular vectors of B
    y_bar = w @ Y if fit_intercept else zeros_as(Y, Y.shape[1])
    return s, lam, V, y_bar, V.T @ (s[:, None] * (Y - y_bar))


def _loo_scores(system, Y, w, alphas, fit_intercept, scorer):
    """Exact leave-one-out scores of every alpha from one eigendecomposition (``system``: ``_eigen_system``'s
    or ``_low_rank_system``'s; V may have fewer columns than rows, the rest at lam = 0).

    For ``sum_i w_i (f_i - y_i)^2 + alpha ||f||_H^2`` (w sums to 1), with ``S = diag(sqrt(w))``,
    ``Q = I - s s'`` and ``Q S K S Q = V diag(lam) V'``, the hat matrix is
    ``s s' + V diag(lam / (lam + alpha)) V'`` and the leave-one-out residual ``(y_i - f_i) / (1 - H_ii)``,
    row i's with the ridge shifted to ``alpha (1 - w_i)`` (the others' weights renormalised without it).
    """
    s, lam, V, y_bar, VtY = system
    xp = xp_of(V)
    n, r, t = V.shape[0], lam.shape[0], Y.shape[1]
    w_host = np.asarray(to_numpy(w))
    # The base estimator's alpha is per unit weight: without row i the weights are w / (1 - w_i),
    # the same fit as keeping row i at weight 0 with the ridge alpha (1 - w_i), row i's own shift.
    values, group = np.unique(w_host, return_inverse=True)
    if len(values) <= LOO_WEIGHT_GROUPS:  # rows of one weight share a shift: every alpha in two products
        blocks, order = [], []
        for g, value in enumerate(values):
            rows = np.arange(n) if len(values) == 1 else np.flatnonzero(group == g)
            V_g = V if len(values) == 1 else take_rows(V, rows)
            shrink = xp.stack([lam * _inverse_shift(lam, float(alpha * (1.0 - value))) for alpha in alphas], axis=1)
            F_g = xp.reshape(V_g @ xp.reshape(shrink[:, :, None] * VtY[:, None, :], (r, -1)), (-1, len(alphas), t))
            blocks.append((F_g, (V_g * V_g) @ shrink))
            order.append(rows)
        F_t, leverage = (concat([block[i] for block in blocks], axis=0) for i in (0, 1))
        if len(values) > 1:  # back in row order
            inverse = np.argsort(np.concatenate(order))
            F_t, leverage = take_rows(F_t, inverse), take_rows(leverage, inverse)
    else:  # many weights: a shift per row, one alpha at a time (w_i < 1: every shift is positive)
        parts_F, parts_h = [], []
        for alpha in alphas:
            if alpha > 0:
                shrink = lam / (lam + float(alpha) * (1.0 - w)[:, None])
            else:
                shrink = xp.broadcast_to(lam * _inverse_shift(lam, 0.0), (n, r))
            VS = V * shrink
            parts_F.append(VS @ VtY)
            parts_h.append(row_dot(VS, V))
        F_t, leverage = xp.stack(parts_F, axis=1), xp.stack(parts_h, axis=1)
    if fit_intercept:
        leverage = leverage + (s * s)[:, None]
    positive = s[:, None, None] > 0
    F = xp.where(positive, F_t / xp.where(positive, s[:, None, None], 1.0), 0.0) + y_bar
    predictions = [Y - (Y - F[:, i, :]) / clip_min(1.0 - leverage[:, i], 1e-12)[:, None] for i in range(len(alphas))]
    return score_predictions(predictions, Y, w, scorer), predictions


def score_predictions(predictions, Y, w, scorer):
    """Each (n, t) array of held-out predictions' score: ``scorer``'s, or by default minus the mean
    squared error weighted by w (which sums to 1)."""
    if scorer is None:  # an error past float64's range scores -inf, last (a near-interpolating ridge's on y of 1e150)
        xp = xp_of(Y)
        with np.errstate(over="ignore"):
            return np.array([-float(w @ xp.mean((Y - P) ** 2, axis=1)) for P in predictions])
    Y_np, w_host, t = np.asarray(to_numpy(Y)), np.asarray(to_numpy(w)), Y.shape[1]  # a scorer reads numpy copies
    return np.array([scorer(_Predictions(P if t > 1 else P[:, 0]), None, Y_np if t > 1 else Y_np[:, 0],
                            sample_weight=w_host) for P in (np.asarray(to_numpy(P)) for P in predictions)])
