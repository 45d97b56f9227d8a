"""Per-feature rbf scales by gradient descent on the exact leave-one-out error or the marginal likelihood.

For weights ``w`` (summing to 1), ``S = diag(sqrt(w))``, ``Q = I - s s'`` and
``M = (Q S K S Q + lam I)^-1``, the weighted kernel ridge fit with an unpenalised intercept has
``I - H = lam M - s s'``, so the leave-one-out residual of point i is

    e_i = ((lam M - s s') S y)_i / (s_i (lam M_ii - s_i^2)),

and ``J = sum_i w_i e_i^2`` is smooth in the log-scales and ``log lam``. Its gradient in K is one
n x n matrix (two products with M), from which each scale's derivative is an O(n^2) sum: O(n^3 + d n^2)
per gradient, as a Gaussian process's marginal likelihood. The search runs on a subsample with L-BFGS.

The other criterion is that likelihood: the fit is the posterior mean of ``f ~ GP(0, c K)`` observed
with noise of variance ``c lam / w_i``, so ``S y ~ N(0, c (S K S + lam I))``. With ``c`` at its optimum
``q / m`` (``q = y' S Q M Q S y``, m the rows less one for the intercept: the restricted likelihood),
minus the log likelihood is, up to a constant,

    L = m/2 log q + 1/2 (log det(Q S K S Q + lam I) - log lam),

whose gradient in K is again one n x n matrix from M.
"""

import numpy as np
from scipy.linalg import lapack
from scipy.optimize import minimize

from ._operator import single_threaded_blas
from ._replicates import collapse, replicate_groups
from .kernels import kernel_matrix

# Rows of the subsample the scales are fitted on.
ARD_MAX_SAMPLES = 1000
# log-scales and log-ridge stay within this many e-folds of the start.
BOUND = 8.0


def _spd_inverse(A, with_logdet=False):
    """The inverse of a symmetric positive definite matrix by Cholesky (half the flops of LU)."""
    factor, info = lapack.dpotrf(A, lower=False)
    if info == 0:
        logdet = 2.0 * float(np.log(np.diagonal(factor)).sum())
        inverse, info = lapack.dpotri(factor, lower=False, overwrite_c=True)
    if info != 0:  # not numerically positive definite (a ridge at rounding level): eigenvalues floored
        lam, V = np.linalg.eigh(A)
        lam = np.maximum(lam, len(A) * np.finfo(float).eps * max(lam[-1], np.finfo(float).tiny))
        inverse, logdet = (V / lam) @ V.T, float(np.log(lam).sum())
    upper = np.triu(inverse)
    inverse = upper + np.triu(upper, 1).T
    return (inverse, logdet) if with_logdet else inverse


def _system(theta, X, w, fit_intercept):
    """The scales, ridge, kernel and ``M = (Q S K S Q + lam I)^-1`` at ``theta``."""
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

    A = centre(s[:, None] * K * s[None, :])
    A[np.diag_indices_from(A)] += lam
    M, logdet = _spd_inverse(A, with_logdet=True)
    return lam, s, Xs, K, centre, M, logdet


def _scale_gradient(G, s, Xs, K, centre):
    """The derivatives in the log-scales of a criterion whose derivative in ``Q S K S Q`` is ``G``."""
    H = s[:, None] * centre((G + G.T) / 2) * s[None, :]
    P = H * K  # d K_ij / d log sigma_j = 2 K_ij (x_ij - x_kj)^2 on the scaled features
    row = P.sum(axis=1)
    return 4.0 * ((Xs * Xs).T @ row - np.einsum("ij,ij->j", Xs, P @ Xs))


def loo_error_and_gradient(theta, X, y, w, fit_intercept):
    """``J`` and its gradient in ``theta = (log sigma_1..d, log lam)``; see the module docstring."""
    d = X.shape[1]
    lam, s, Xs, K, centre, M, _ = _system(theta, X, w, fit_intercept)
    yt = s * y
    proj = s * (s @ yt) if fit_intercept else 0.0
    lever = s * s if fit_intercept else 0.0
    My = M @ yt
    u = lam * My - proj
    v = lam * np.diagonal(M) - lever
    e = u / (s * v)
    value = float(w @ e**2)
    grad = np.empty(d + 1)
    factor = 2.0 * w * e / (s * v)  # dJ/du_i
    # A change dKt of the centred kernel moves u by -lam M dKt My and v_i by -lam (M dKt M)_ii, so dJ = tr(G dKt)
    # with G below; dKt = Q S dK S Q then gives dJ = sum_ij H_ij dK_ij, one n^3 product for all d scales.
    G = lam * ((M * (factor * e * s)) @ M - np.outer(My, M @ factor))
    grad[:d] = _scale_gradient(G, s, Xs, K, centre)
    M2y = M @ My
    du = lam * My - lam**2 * M2y
    dv = lam * np.diagonal(M) - lam**2 * np.einsum("ij,ji->i", M, M)
    grad[d] = float(factor @ (du - e * s * dv))
    return value, grad


def neg_log_likelihood_and_gradient(theta, X, y, w, fit_intercept):
    """``L`` (the restricted, amplitude-profiled marginal likelihood) and its gradient; see the module docstring."""
    d = X.shape[1]
    lam, s, Xs, K, centre, M, logdet = _system(theta, X, w, fit_intercept)
    yt = s * (y - w @ y) if fit_intercept else s * y
    m = len(y) - 1 if fit_intercept else len(y)
    My = M @ yt
    q = float(yt @ My)
    if not q > 0:  # y constant: every scale fits it
        return 0.0, np.zeros(d + 1)
    value = 0.5 * m * np.log(q) + 0.5 * (logdet - (np.log(lam) if fit_intercept else 0.0))
    grad = np.empty(d + 1)
    grad[:d] = _scale_gradient(0.5 * M - 0.5 * m * np.outer(My, My) / q, s, Xs, K, centre)
    trace = np.trace(M) - (1.0 / lam if fit_intercept else 0.0)
    grad[d] = lam * (0.5 * trace - 0.5 * m * float(My @ My) / q)
    return float(value), grad


CRITERIA = {"loo": loo_error_and_gradient, "likelihood": neg_log_likelihood_and_gradient}


def fit_scales(X, y, w, sigma0, lam0, fit_intercept, rng, max_iter=100, criterion="loo", max_rows=None):
    """Per-feature scales and ridge minimising a criterion on a subsample.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    w : ndarray of shape (n_samples,)
        Sample weights (zero-weight rows are left out), relative: identical
        rows are fitted as one, of their summed weight and weighted mean
        target (both criteria would read agreeing copies as noiseless data).
    sigma0, lam0 : float
        The starting scalar width and ridge (the best of the grid).
    fit_intercept : bool
    rng : RandomState
    max_iter : int
    criterion : {"loo", "likelihood"}
        The leave-one-out error or minus the log marginal likelihood.
    max_rows : int, default=None
        The size of the subsample of distinct rows; None: ``ARD_MAX_SAMPLES``.

    Returns
    -------
    sigma : ndarray of shape (n_features,)
    lam : float
    value : float
        The criterion on the subsample at the returned point, for its targets
        divided by their weighted spread (the choice is the same at any scale).
    rows : ndarray of int
        The rows of X the scales were fitted on (every copy of a row fitted).
    """
    rows = np.flatnonzero(w > 0)
    group_of, n_groups = replicate_groups(X[rows])
    chosen = np.arange(n_groups)
    max_rows = ARD_MAX_SAMPLES if max_rows is None else max_rows
    if n_groups > max_rows:  # a subsample of the distinct rows, with all their copies
        chosen = np.sort(rng.choice(n_groups, max_rows, replace=False))
        inside = np.isin(group_of, chosen)
        rows, group_of = rows[inside], np.searchsorted(chosen, group_of[inside])
    if len(chosen) == len(rows):  # every row distinct
        X, y, w = X[rows], y[rows], w[rows] / w[rows].sum()
    else:
        first, y, W = collapse(group_of, int(group_of.max()) + 1, y[rows, None], w[rows])
        X, y, w = X[rows[first]], y[:, 0], W / W.sum()
    # the targets in units of their spread (L-BFGS-B's stopping tests are absolute below a criterion of 1),
    # centred where the intercept takes their mean (which would otherwise cancel in the criterion's rounding)
    y = y - w @ y if fit_intercept else y
    spread = np.sqrt(w @ y**2)
    y = y / spread if spread > 0 else y
    d = X.shape[1]
    start = np.append(np.full(d, np.log(sigma0)), np.log(max(lam0, 1e-12)))
    bounds = [(t - BOUND, t + BOUND) for t in start]
    args = (X, y, w, fit_intercept)
    with single_threaded_blas():
        result = minimize(CRITERIA[criterion], start, args=args, jac=True,
                          method="L-BFGS-B", bounds=bounds, options={"maxiter": max_iter})
    return np.exp(result.x[:d]), float(np.exp(result.x[d])), float(result.fun), rows
