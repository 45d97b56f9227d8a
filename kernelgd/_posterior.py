"""The Gaussian-process view of the squared-loss model: its scale, noise and predictive variance.

The minimiser of ``sum_i w_i (f(x_i) - y_i)^2 + alpha |f|^2`` (weights summing to one) is the
posterior mean of a Gaussian process with prior covariance ``s^2 k`` and independent noise of
variance ``s^2 alpha / w_i`` on row i: a new observation (weight ``1 / N``) has noise
``s^2 alpha N``. With ``C = K + alpha W^-1``, the dual coefficients are ``a = C^-1 (y - b)``.

The scale s^2 maximises the leave-one-out predictive likelihood (Sundararajan and Keerthi, 2001):
row i held out has residual ``a_i / c_ii`` and variance ``s^2 / c_ii`` (``c = diag(C^-1)``), so
``s^2 = mean_i a_i^2 / c_ii`` (``_loo_scale``); unlike the marginal likelihood's ``(y - b)'a / n``
it is fitted to held-out errors, which matters on nearly interpolating models. Above
``LOO_DENSE_MAX`` rows the exact model keeps the marginal likelihood's s^2, solved anew by CG
where the fit's coefficients do not resolve it.

The centers model ``f = K_xm beta`` is the subset-of-regressors process, for which Woodbury gives
``a_i = w_i r_i / alpha`` and ``c_ii = w_i (1 - h_i) / alpha`` (``h_i = w_i k_i' H^-1 k_i``,
``H = K_mn W K_nm + alpha K_mm``). Its predictive variance is the DTC one (Quinonero-Candela and
Rasmussen, 2005), which adds back the prior variance the centers do not carry:

    v(x) = k(x, x) - k_xm K_mm^-1 k_mx + alpha k_xm H^-1 k_mx.

The exact model's ``v(x) = k(x, x) - k_x' C^-1 k_x`` comes from one dense Cholesky factor for many
test points, else from block preconditioned CG, else, where both cost more than ``EXACT_COST_RATIO``
times it, from each point's ``LOCAL_ROWS`` nearest rows (never below the exact variance). The
intercept is taken as known (as ``GaussianProcessRegressor(normalize_y=True)`` takes the mean).
"""

from dataclasses import dataclass
from warnings import warn

import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.special import ndtri
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import gen_batches

from ._array_api import (
    add_to_diagonal, as_float64, block_of, cholesky, diagonal, eye, factor_in_place, from_numpy, like, scale_in_place,
    take_rows, to_numpy, xp_of,
)
from ._array_api import solve_triangular as xp_solve_triangular
from ._operator import KernelOperator
from ._replicates import collapse
from ._solvers._common import mean_diagonal
from ._solvers._krylov import block_pcg
from ._solvers._preconditioners import (
    CENTERS_MIN_RIDGE,
    N_LANDMARKS,
    PRECONDITIONER_MIN_SHIFT,
    NystroemPreconditioner,
    center_jitter,
)

# CG's relative residual for the exact model's solves at most. The variance's error is at most about
# tol^2 |S k_x|^2 / alpha, so below a ridge of about 1e-4 the variance's solves take a tol that holds it within
# VARIANCE_ERROR times the point's prior variance k(x, x), down to VARIANCE_TOL_MIN (float64 CG's reach).
VARIANCE_TOL = 1e-6
VARIANCE_ERROR = 1e-8
VARIANCE_TOL_MIN = 1e-12
# CG iterations per block of test points before the variance is reported unresolved.
VARIANCE_MAX_ITER = 2000
# Rows up to which the exact model's s^2 is the leave-one-out one, from a dense factorization of C; the
# centers model's comes from at most LOO_SAMPLE rows' leverages.
LOO_DENSE_MAX = 2000
LOO_SAMPLE = 4096
# Below this ridge (times the trace of S K S) the dense factorization is not to be trusted.
LOO_MIN_RIDGE = 1e3 * np.finfo(np.float64).eps
# Above LOO_DENSE_MAX rows, the fit's coefficients give the marginal likelihood's s^2 where their shortfall
# is at most this share of it; else it is solved anew.
QUADRATIC_RTOL = 1e-2
# Where the likelihood's 95% intervals clearly hold too few held-out rows, the scale whose intervals hold 95%.
COVERAGE = 0.95
COVERAGE_Z = float(ndtri((1 + COVERAGE) / 2))
# 1 - h_i at least this: a row the centers interpolate (h_i = 1 in rounding) stays finite.
LOO_MIN_FREEDOM = 1e-12
# Arrays of n x (block of test points) the exact model's CG holds at once (X, R, Z, P, A P, rhs).
CG_ARRAYS = 6
# The exact variance from one dense factor of S K S + alpha I (n^3 / 3 flops, then n^2 per point) from
# n / DENSE_BREAK_EVEN test points: CG costs about 2 n^2 per point and iteration, for 15-40 iterations.
DENSE_BREAK_EVEN = 100
# Arrays of n x n float64 the dense factorization holds at once (K in the operator's dtype, then in
# float64, factored in place).
DENSE_ARRAYS = 2
# Where the exact variance costs more than EXACT_COST_RATIO times the local one, each point's variance is
# conditioned on its LOCAL_ROWS rows of largest weighted kernel value: never below the exact variance.
LOCAL_ROWS = 512
EXACT_COST_RATIO = 4
# CG iterations the cost comparison assumes for the exact solves (15-40 on the UCI sets).
CG_ITERATIONS = 30


@dataclass(frozen=True)
class Posterior:
    """What ``predict(X, return_std=True)`` needs beside the mean, fitted once at the end of a fit: ``signal_std``
    s per target (in y's units: s^2 can overflow where y cannot); ``alpha`` the posterior's ridge (the centers':
    at least their floor); ``n_observations`` N; the exact model's training ``weights``; the centers model's
    upper Cholesky factors of ``K_mm`` (with FALKON's jitter) and of H.
    """

    signal_std: object
    alpha: float
    n_observations: float
    weights: object = None
    center_factor: object = None
    posterior_factor: object = None

    @property
    def noise_unit(self):
        """The noise variance of a new observation in units of s^2: ``alpha N``."""
        return self.alpha * self.n_observations

    def variances(self):
        """``(signal, noise)`` variances per target: inf where they pass float64's range (|y| > 1e154)."""
        with np.errstate(over="ignore"):
            s2 = self.signal_std * self.signal_std
            return s2, s2 * self.noise_unit


def per_target(v):
    """A length-t vector of variances, as a float for one target."""
    return float(v[0]) if v.shape[0] == 1 else v


def _loo_scale(xp, q, w):
    """s per target from ``q_i = a_i^2 / c_ii`` of the rows given (row i held out has the squared
    standardized residual ``q_i / s^2``): the likelihood's ``s^2 = sum_i w_i q_i / sum_i w_i``; where
    its 95% intervals hold less than 95% of the rows' weight by more than two binomial standard
    errors, the s^2 whose intervals hold 95% (the weighted quantile of q over 1.96^2)."""
    s2 = to_numpy(xp.sum(w[:, None] * q, axis=0) / xp.sum(w))
    q_host, w_host = np.asarray(to_numpy(q)), np.asarray(to_numpy(w))
    n_effective = np.sum(w_host) ** 2 / np.sum(w_host**2)
    for j in range(q_host.shape[1]):
        held = np.sum(w_host[q_host[:, j] <= COVERAGE_Z**2 * s2[j]]) / np.sum(w_host)
        if held >= COVERAGE - 2 * np.sqrt(COVERAGE * (1 - COVERAGE) / n_effective):
            continue  # within two binomial standard errors of 95%: the likelihood's scale stands
        order = np.argsort(q_host[:, j])
        share = np.cumsum(w_host[order]) / np.sum(w_host)
        k = min(int(np.searchsorted(share, COVERAGE - 1e-9)), len(order) - 1)  # (rounding of the sums)
        s2[j] = max(s2[j], q_host[order[k], j] / COVERAGE_Z**2)
    return xp.sqrt(from_numpy(np.where(s2 > 0, s2, 0.0), xp, getattr(q, "device", None)))


def _inverse_diagonal(A):
    """``diag(A^-1)`` of a positive definite A from its Cholesky factor, or None where A is singular."""
    xp = xp_of(A)
    try:
        U = cholesky(A, "leave-one-out system")
    except ValueError:
        return None
    U_inv = xp_solve_triangular(U, eye(A, A.shape[0], xp.float64), upper=True)  # A^-1 = U^-1 U^-T
    return xp.sum(U_inv * U_inv, axis=1)


def _distinct(group_of, Y, w, coef=None):
    """``(Y, w, coef, first)`` of the distinct rows: each group of identical rows as one row of its
    weighted mean target, its summed weight and its summed dual coefficients (the model's); ``first``
    the groups' first rows. Without groups, the arrays as they are and ``first`` None."""
    if group_of is None:
        return Y, w, coef, None
    first, Y_mean, w_sum = collapse(group_of, int(group_of.max()) + 1, to_numpy(Y), to_numpy(w))
    if coef is not None:
        sums = [np.bincount(group_of, weights=column, minlength=len(first)) for column in np.asarray(to_numpy(coef)).T]
        coef = like(np.stack(sums, axis=1), coef)
    return like(Y_mean, Y), like(w_sum, w), coef, first


def fit_exact(operator, X, Y, coef, intercept, w, alpha, n_observations, group_of=None):
    """The exact model's posterior from its dual coefficients ``a = C^-1 (y - b)``: s^2 by leave-one-out from a
    dense ``c = diag(C^-1)`` up to ``LOO_DENSE_MAX`` distinct rows of positive weight, above by the marginal
    likelihood (``_quadratic``; X the float64 training rows, or the precomputed kernel). Repeated rows
    (``group_of``) are read as one, rows of weight zero not at all: the rows repeated, or dropped, fit alike.
    """
    xp = xp_of(Y)
    Yd, wd, coefd, first = _distinct(group_of, Y, w, coef)
    kept = np.flatnonzero(np.asarray(to_numpy(wd)) > 0)  # the distinct rows of positive weight
    dense = operator is not None and len(kept) <= LOO_DENSE_MAX
    if dense:
        scale = _dense_loo_scale(operator, X, kept if first is None else np.asarray(first)[kept],
                                 take_rows(wd, kept), take_rows(coefd, kept), alpha)
        if scale is not None:
            return Posterior(scale, float(alpha), float(n_observations), weights=w)
    if not (operator is None or dense or _resolves_quadratic(operator, Y, coef, intercept, w, alpha)):
        alpha, quadratic = _quadratic(operator, X, Yd - intercept, wd, alpha, first, coefd)
    else:
        quadratic = xp.sum((Yd - intercept) * coefd, axis=0)
    s2 = quadratic / float(len(kept))
    return Posterior(xp.sqrt(xp.where(s2 > 0, s2, 0.0)), float(alpha), float(n_observations), weights=w)


def _dense_loo_scale(operator, X, rows, w, coef, alpha):
    """``_loo_scale`` of the training ``rows`` (weights ``w``, positive, and dual coefficients ``coef``) from a
    dense factor of ``S K S + alpha I`` in float64; None where it is singular (below ``LOO_MIN_RIDGE``)."""
    xp = xp_of(w)
    if len(rows) == operator.n:  # every row: the operator's own K
        K = xp.astype(operator.rows(slice(None)), xp.float64)
    elif operator.kernel is None:  # the precomputed kernel's block
        K = xp.astype(block_of(X, rows, rows), xp.float64)
    else:
        K = KernelOperator(take_rows(X, rows), operator.kernel, dtype="float64",
                           memory_budget=operator.memory_budget).rows(slice(None))
    # C^-1 = S (S K S + alpha I)^-1 S; below LOO_MIN_RIDGE times its trace, S K S + alpha I is singular
    if not alpha >= LOO_MIN_RIDGE * float(xp.sum(w * diagonal(K))):
        return None
    s = xp.sqrt(w)
    A = s[:, None] * K * s[None, :]
    d = _inverse_diagonal(A + float(alpha) * eye(A, A.shape[0], xp.float64))
    return None if d is None else _loo_scale(xp, coef * coef / (w * d)[:, None], w)


def _resolves_quadratic(operator, Y, coef, intercept, w, alpha):
    """Whether the coefficients give ``(y - b)' C^-1 (y - b)`` to ``QUADRATIC_RTOL``: ``(y - b)'a`` falls
    short of it by ``r' C^-1 r <= sum_i w_i r_i^2 / alpha`` (``C >= alpha W^-1``), r their residual."""
    xp = xp_of(Y)
    if not alpha > 0:
        return False
    positive = (w > 0)[:, None]
    share = xp.where(positive, coef / xp.where(positive, w[:, None], 1.0), 0.0)  # a_i / w_i
    R = xp.where(positive, Y - intercept - operator.matvec(coef) - alpha * share, 0.0)
    shortfall = xp.sum(w[:, None] * R * R, axis=0) / alpha
    quadratic = xp.sum((Y - intercept) * coef, axis=0)
    return bool(xp.all(shortfall <= QUADRATIC_RTOL * quadratic))


def _quadratic(operator, X, R, w, alpha, first, coef):
    """``(alpha, R' C^-1 R)`` per column on the distinct rows (``first``), by CG to ``VARIANCE_TOL`` with K in
    float64 (from X, the float64 rows or the precomputed kernel), at the least ridge float64 resolves
    (``LOO_MIN_RIDGE`` times the trace), from the fit's coefficients ``coef`` (naval: 82 iterations, not 107)."""
    xp = xp_of(R)
    if first is None and operator.dtype == np.float64:
        exact = operator  # the fit's own K is already in float64
    else:
        if first is not None:
            X = block_of(X, first, first) if operator.kernel is None else take_rows(X, first)
        exact = KernelOperator(X, operator.kernel, dtype="float64", memory_budget=operator.memory_budget)
    alpha = max(float(alpha), LOO_MIN_RIDGE * float(xp.sum(w * exact.diag())))
    apply_A, precond, s = _exact_system(exact, Posterior(None, alpha, 1.0, weights=w), np.random.RandomState(0))
    B = s[:, None] * R
    x0 = xp.where(s[:, None] > 0, coef / xp.where(s[:, None] > 0, s[:, None], 1.0), 0.0)  # c = a / s
    result = block_pcg(apply_A, B, precond, max_iter=VARIANCE_MAX_ITER, tol=VARIANCE_TOL, x0=x0)
    if result.status == "max_iter":
        warn("The marginal likelihood's solve did not reach its tolerance in "
             f"{VARIANCE_MAX_ITER} iterations: the predictive standard deviations are underestimated. "
             "A larger alpha conditions the system better.", ConvergenceWarning)
    return alpha, xp.sum(B * result.x, axis=0)


def weighted_gram(operator, w):
    """``K_nm' W K_nm`` (m x m, float64) in one pass over the rows of K, on the operator's pool."""
    xp = xp_of(w)
    if operator.host:  # on the operator's pool
        def part(batch):  # one thread's rows, a block at a time, into one m x m sum (not one per block)
            G = None
            for rows in gen_batches(batch.stop - batch.start, operator.block_rows):
                rows = slice(batch.start + rows.start, batch.start + rows.stop)
                block = np.asarray(operator.rows(rows), dtype=np.float64) * np.sqrt(w[rows])[:, None]
                # scipy's syrk: half the flops of a product, the upper triangle, added into G in place
                G = dsyrk(1.0, block, beta=0.0 if G is None else 1.0, c=G, trans=1, overwrite_c=1)
            return G

        G = np.sum(operator._run(part, operator._row_batches()), axis=0)
        return np.triu(G) + np.triu(G, 1).T
    G = None
    for rows in gen_batches(operator.n, operator.block_rows):
        block = xp.astype(operator.rows(rows), xp.float64)
        term = block.T @ (w[rows, None] * block)
        G = term if G is None else G + term
    return G


def loo_rows(w, rng):
    """The rows whose leave-one-out terms estimate the centers model's s^2: all rows with positive
    weight, or ``LOO_SAMPLE`` of them drawn at random (the estimate of a mean: about 2% of s^2)."""
    positive = np.flatnonzero(np.asarray(w) > 0)
    if len(positive) <= LOO_SAMPLE:
        return positive
    return np.sort(rng.choice(positive, LOO_SAMPLE, replace=False))


def fit_centers(operator, Y, coef, intercept, w, alpha, n_observations, rng, group_of=None):
    """The centers model's posterior: its two m x m factors, and s^2 from sampled rows' leave-one-out terms
    (repeated rows, ``group_of``, as one row of their mean target and summed weight)."""
    xp = xp_of(Y)
    Y_d, w_d, _, first = _distinct(group_of, Y, w)
    sample = loo_rows(to_numpy(w_d), rng)
    rows = sample if first is None else first[sample]
    K_rows = xp.astype(operator.rows(rows), xp.float64)
    Y_rows, w_rows = take_rows(Y_d, sample), take_rows(w_d, sample)
    Kmm = operator.center_matrix()
    prior = operator.kernel.diag(take_rows(operator.X, rows)) if operator.kernel is not None else None
    return centers_posterior(Kmm, weighted_gram(operator, w), alpha, n_observations, center_jitter(operator, Kmm),
                             (K_rows, Y_rows - intercept - K_rows @ coef, w_rows, xp.astype(prior, xp.float64)))


def centers_posterior(Kmm, gram, alpha, n_observations, jitter, sample):
    """The centers model's posterior from ``K_mm``, ``gram = K_nm' W K_nm`` and rows' residuals: ``sample``,
    ``(K_Sm, r_S, w_S)`` for rows S (``loo_rows``), gives the leave-one-out ``s^2 = sum_S w_i a_i^2 / c_ii /
    sum_S w_i``. Also for a fit on Dask, whose passes over the rows return the gram.
    """
    xp = xp_of(Kmm)
    alpha = max(float(alpha), CENTERS_MIN_RIDGE * float(xp.mean(diagonal(Kmm))))
    center_factor = cholesky(Kmm, "center kernel matrix", jitter=jitter)
    posterior_factor = cholesky(gram + alpha * Kmm, "posterior precision matrix")
    K_rows, residual, w_rows, prior = sample
    V = xp_solve_triangular(posterior_factor, K_rows.T, upper=True, trans=True)
    U = xp_solve_triangular(center_factor, K_rows.T, upper=True, trans=True)
    free = 1.0 - w_rows * xp.sum(V * V, axis=0)  # 1 - h_i, in (0, 1] but for rounding
    free = xp.where(free > LOO_MIN_FREEDOM, free, LOO_MIN_FREEDOM)
    missing = prior - xp.sum(U * U, axis=0)  # k(x, x) - q(x, x): what DTC adds at a new point
    held_out = alpha / (w_rows * free) + xp.where(missing > 0, missing, 0.0)
    q = (residual / free[:, None]) ** 2 / held_out[:, None]
    return Posterior(_loo_scale(xp, q, w_rows), alpha, float(n_observations), center_factor=center_factor,
                     posterior_factor=posterior_factor)


def _exact_system(operator, posterior, rng):
    """``(apply_A, apply_P, s)``: ``S K S + alpha I`` and its Nystroem preconditioner."""
    w = posterior.weights
    xp = xp_of(w)
    s = xp.sqrt(w)
    alpha = posterior.alpha
    mu = float(max(alpha, PRECONDITIONER_MIN_SHIFT * mean_diagonal(operator, w), np.finfo(float).tiny))
    precond = NystroemPreconditioner(operator, s, mu, N_LANDMARKS, rng)

    def apply_A(V):
        return s[:, None] * operator.matvec(s[:, None] * V) + alpha * V

    return apply_A, precond, s


def reduction(kernel, X_fit, Z, posterior, operator=None, system=None, full=False):
    """What the data explain of the prior at the rows of Z, in units of s^2: ``k_Z' C^-1 k_Z`` (exact model) or
    ``q(Z, Z) - alpha k_Zm H^-1 k_mZ`` (centers, q the Nystroem approximation). Its diagonal, or with ``full``
    the whole matrix; and the status of CG's solve (None for the centers model).
    """
    K = kernel(X_fit, Z)  # (n or m) x len(Z)
    xp = xp_of(K)
    K = xp.astype(K, xp.float64)
    if posterior.weights is None:
        U = xp_solve_triangular(posterior.center_factor, K, upper=True, trans=True)
        V = xp_solve_triangular(posterior.posterior_factor, K, upper=True, trans=True)
        if full:
            return U.T @ U - posterior.alpha * (V.T @ V), None
        return xp.sum(U * U, axis=0) - posterior.alpha * xp.sum(V * V, axis=0), None
    if system[0] == "local":
        _, s, q = system
        return _local_explained(kernel, X_fit, s[:, None] * K, s, posterior.alpha, q), None
    if system[0] == "dense":  # k_Z' C^-1 k_Z = |U^-T S k_Z|^2 with U'U = S K S + alpha I
        _, U, s = system
        V = xp_solve_triangular(U, s[:, None] * K, upper=True, trans=True)
        return (V.T @ V if full else xp.sum(V * V, axis=0)), None
    _, apply_A, precond, s = system
    B = s[:, None] * K
    result = block_pcg(apply_A, B, precond, max_iter=VARIANCE_MAX_ITER,
                       tol=_variance_tol(B, kernel.diag(Z), posterior.alpha))
    if full:
        return B.T @ result.x, result.status
    return xp.sum(B * result.x, axis=0), result.status


def _variance_tol(B, prior, alpha):
    """CG's tol for the columns of ``B = S k_Z``: ``VARIANCE_TOL``, or less where the error ``tol^2 |b|^2 / alpha``
    could pass ``VARIANCE_ERROR`` times a point's prior variance ``prior`` (not below ``VARIANCE_TOL_MIN``)."""
    xp = xp_of(B)
    energy = xp.sum(B * B, axis=0)
    if not alpha > 0:
        return VARIANCE_TOL_MIN
    with np.errstate(divide="ignore", invalid="ignore"):  # a column of zeros: any tol resolves it
        ratio = np.asarray(to_numpy(VARIANCE_ERROR * alpha * as_float64(prior) / energy), dtype=np.float64)
    least = float(np.min(ratio, initial=np.inf, where=np.isfinite(ratio)))
    return float(min(VARIANCE_TOL, max(VARIANCE_TOL_MIN, np.sqrt(least))))


def block_rows(n_fit, memory_budget):
    """Test rows per block: CG's ``CG_ARRAYS`` arrays of n_fit x block float64 within the budget."""
    return int(max(1, min(4096, memory_budget // (CG_ARRAYS * 8 * max(n_fit, 1)))))


def _dense_factor(operator, posterior, X=None):
    """Upper Cholesky factor of ``S K S + alpha I`` (K in float64, from X's float64 rows where given: the
    operator's may be float32), or None where the ridge is below ``LOO_MIN_RIDGE`` or the factorization fails."""
    w = posterior.weights
    xp = xp_of(w)
    s = xp.sqrt(w)
    if operator.kernel is None:
        K = operator.rows(slice(None))
    else:
        X = operator.X if X is None else X
        K = operator.kernel(X, X)
    K = as_float64(K, copy=True)  # scaled in place below where the namespace allows
    if not posterior.alpha >= LOO_MIN_RIDGE * float(xp.sum(w * diagonal(K))):
        return None
    return factor_in_place(add_to_diagonal(scale_in_place(K, s), posterior.alpha))


def local_system(posterior, n_fit, n_test, memory_budget, full):
    """``("local", s, q)`` where the exact model's exact variance would cost more than
    ``EXACT_COST_RATIO`` times the local one (diagonal only); else None."""
    if full or posterior.weights is None:
        return None
    q, n = min(LOCAL_ROWS, n_fit), float(n_fit)
    exact_cost = n_test * 2 * n * n * CG_ITERATIONS
    if DENSE_ARRAYS * 8.0 * n * n <= memory_budget:
        exact_cost = min(exact_cost, n**3 / 3 + n_test * n * n)
    if exact_cost <= EXACT_COST_RATIO * n_test * float(q) ** 3:
        return None
    return "local", xp_of(posterior.weights).sqrt(posterior.weights), q


def _local_explained(kernel, X_fit, B, s, alpha, q):
    """``b_S' (S K S + alpha I)_SS^-1 b_S`` per column b of B, S its q largest entries (``B = S k_Z``):
    conditioning on a subset of the rows explains no more than all of them, so the variance is never below
    the exact one.
    """
    xp = xp_of(B)
    # on the host, one contiguous row per test point: the standard has no argpartition
    nearest = np.argpartition(-np.ascontiguousarray(np.asarray(to_numpy(B)).T), q - 1, axis=1)[:, :q]
    out = []
    for j, rows in enumerate(nearest):
        s_S = take_rows(s, rows)
        X_S = take_rows(X_fit, rows)
        A = s_S[:, None] * as_float64(kernel(X_S, X_S)) * s_S[None, :]
        U = cholesky(add_to_diagonal(A, alpha), "local posterior covariance")
        v = xp_solve_triangular(U, take_rows(B[:, j], rows)[:, None], upper=True, trans=True)
        out.append(xp.sum(v * v))
    return xp.stack(out)


def exact_system(operator, posterior, seed, n_test=1, memory_budget=np.inf, X=None):
    """The exact model's system for :func:`reduction` (None for the centers model): ``("dense", U, s)`` for at
    least ``n / DENSE_BREAK_EVEN`` test points where ``DENSE_ARRAYS`` n x n arrays fit ``memory_budget`` and
    the ridge resolves a factor; else ``("cg", apply_A, apply_P, s)``.
    """
    if posterior.weights is None:
        return None
    n = operator.n
    if n_test * DENSE_BREAK_EVEN >= n and DENSE_ARRAYS * 8.0 * n * n <= memory_budget:
        U = _dense_factor(operator, posterior, X)
        if U is not None:
            return "dense", U, xp_of(posterior.weights).sqrt(posterior.weights)
    return ("cg",) + _exact_system(operator, posterior, np.random.RandomState(seed))
