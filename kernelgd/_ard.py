"""Per-feature rbf scales by gradient descent on the exact leave-one-out error.

For weights ``w`` (summing to 1), ``S = diag(sqrt(w))``, ``Q = I - s s'``
and ``M = (Q S K S Q + lam I)^-1``, the hat matrix of the weighted kernel
ridge fit with an unpenalised intercept satisfies ``I - H = lam M - s s'``
(as ``Q S K S Q M = I - lam M``). The leave-one-out residual of point i is
therefore

    e_i = ((lam M - s s') S y)_i / (s_i (lam M_ii - s_i^2)),

and ``J = sum_i w_i e_i^2`` is a smooth function of the log-scales and of
``log lam``. Its gradient with respect to K is one n x n matrix (two
products with M), from which each scale's derivative is an O(n^2) sum, so a
gradient costs O(n^3 + d n^2), as a Gaussian process's marginal likelihood
does. The search runs on a subsample with L-BFGS.
"""

import numpy as np
from scipy.linalg import lapack
from scipy.optimize import minimize

from ._operator import single_threaded_blas
from .kernels import kernel_matrix

# Rows of the subsample the scales are fitted on.
ARD_MAX_SAMPLES = 1000
# log-scales and log-ridge stay within this many e-folds of the start.
BOUND = 8.0


def _spd_inverse(A):
    """The inverse of a symmetric positive definite matrix by Cholesky (half the flops of LU)."""
    factor, info = lapack.dpotrf(A, lower=False)
    if info == 0:
        inverse, info = lapack.dpotri(factor, lower=False, overwrite_c=True)
    if info != 0:  # not numerically positive definite (a ridge at rounding level): eigenvalues floored
        lam, V = np.linalg.eigh(A)
        lam = np.maximum(lam, len(A) * np.finfo(float).eps * max(lam[-1], np.finfo(float).tiny))
        inverse = (V / lam) @ V.T
    upper = np.triu(inverse)
    return upper + np.triu(upper, 1).T


def loo_error_and_gradient(theta, X, y, w, fit_intercept):
    """``J`` and its gradient in ``theta = (log sigma_1..d, log lam)``; see the module docstring."""
    d = X.shape[1]
    sigma, lam = np.exp(theta[:d]), np.exp(theta[d])
    s = np.sqrt(w)
    Xs = X / sigma
    K = kernel_matrix(Xs, sigma=1.0)

    def centre(A):  # Q A Q with Q = I - s s' (or A without intercept)
        if not fit_intercept:
            return A
        u = A @ s
        return A - np.outer(s, u) - np.outer(u, s) + np.outer(s, s) * (s @ u)

    Kt = centre(s[:, None] * K * s[None, :])
    M = _spd_inverse(Kt + lam * np.eye(len(y)))
    yt = s * y
    proj = s * (s @ yt) if fit_intercept else 0.0
    lever = s * s if fit_intercept else 0.0
    My = M @ yt
    u = lam * My - proj
    v = lam * np.diagonal(M) - lever
    e = u / (s * v)
    value = float(w @ e**2)
    grad = np.empty(d + 1)
    factor = 2.0 * w * e / (s * v)  # dJ/du_i; dJ/dv_i = -factor * e * s... folded below
    # A change dKt of the centred kernel moves u by -lam M dKt My and v_i by
    # -lam (M dKt M)_ii, so dJ = tr(G dKt) with G below; then dKt = Q S dK S Q
    # gives dJ = sum_ij H_ij dK_ij, one n^3 product for all d scales.
    G = lam * ((M * (factor * e * s)) @ M - np.outer(My, M @ factor))
    H = s[:, None] * centre((G + G.T) / 2) * s[None, :]
    P = H * K  # d K_ij / d log sigma_j = 2 K_ij (x_ij - x_kj)^2 on the scaled features
    row = P.sum(axis=1)
    grad[:d] = 4.0 * ((Xs * Xs).T @ row - np.einsum("ij,ij->j", Xs, P @ Xs))
    M2y = M @ My
    du = lam * My - lam**2 * M2y
    dv = lam * np.diagonal(M) - lam**2 * np.einsum("ij,ji->i", M, M)
    grad[d] = float(factor @ (du - e * s * dv))
    return value, grad


def fit_scales(X, y, w, sigma0, lam0, fit_intercept, rng, max_iter=100):
    """Per-feature scales and ridge minimising the leave-one-out error on a subsample.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    w : ndarray of shape (n_samples,)
        Sample weights (zero-weight rows are left out).
    sigma0, lam0 : float
        The starting scalar width and ridge (the best of the grid).
    fit_intercept : bool
    rng : RandomState
    max_iter : int

    Returns
    -------
    sigma : ndarray of shape (n_features,)
    lam : float
    value : float
        The subsample's leave-one-out error at the returned point.
    rows : ndarray of int
        The rows of X the scales were fitted on.
    """
    keep = rows = np.flatnonzero(w > 0)
    if len(keep) > ARD_MAX_SAMPLES:
        keep = rows = np.sort(rng.choice(keep, ARD_MAX_SAMPLES, replace=False))
    X, y, w = X[keep], y[keep], w[keep] / w[keep].sum()
    d = X.shape[1]
    start = np.append(np.full(d, np.log(sigma0)), np.log(max(lam0, 1e-12)))
    bounds = [(t - BOUND, t + BOUND) for t in start]
    with single_threaded_blas():
        result = minimize(loo_error_and_gradient, start, args=(X, y, w, fit_intercept), jac=True,
                          method="L-BFGS-B", bounds=bounds, options={"maxiter": max_iter})
    return np.exp(result.x[:d]), float(np.exp(result.x[d])), float(result.fun), rows
