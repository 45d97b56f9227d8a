"""Solver "cg": preconditioned conjugate gradient on the ridge system.

The objective ``sum_i w_i (f(x_i) - y_i)^2 + alpha ||f||_H^2`` is minimised
through its optimality conditions, a symmetric positive (semi-)definite
linear system solved by conjugate gradient with a Nystroem preconditioner.

* All training points as centers (``f = K a + b``): with ``S = W^1/2``,
  ``(Q S K S Q + alpha I) c = Q S y`` and ``a = S c``, where ``Q = I - s s'``
  (``s = sqrt(w)``) removes the intercept: for any a the best intercept is
  ``b = w'(y - K a)``. The preconditioner is ``Q P^-1 Q`` with ``P = N + mu I``
  and ``N`` the Nystroem approximation of ``S K S`` on 500 landmarks chosen
  by randomly pivoted Cholesky, applied by the Woodbury identity in O(n m).
* m centers (``f = K_nm beta + b``): ``(K_c' W K_c + alpha K_mm) beta =
  K_c' W y`` with the centred ``K_c = (I - 1 w') K_nm``, preconditioned as in
  FALKON (Rudi et al., 2017) by Cholesky factors of ``K_mm`` and
  ``T D T' / m + alpha I`` (``K_mm = T'T``; D the centers' weights ``n w_c``,
  the identity for uniform weights); alpha is at least
  ``CENTERS_MIN_RIDGE`` times the mean of ``k(c, c)``.

Without ridge, or with a ridge below ``LEAST_SQUARES_RIDGE`` times the mean
of ``w_i k(x_i, x_i)``, the full system is (nearly) singular and, with noisy
targets, inconsistent: CG's iterates then grow without bound while the
objective rises. There CG runs on the objective's Hessian ``M (M + alpha I)``
(``M = Q S K S Q``) with right-hand side ``M B``, preconditioned by the
square of the Nystroem preconditioner: two products with K per iteration,
but every iterate decreases the objective itself, and the iterates stay in
the range of M, so the limit is the least-squares fit with the smallest
coefficients, as a pseudo-inverse gives.

Centring eliminates the intercept without a division and without a second
right-hand side. One pass over K per iteration. ``tol`` bounds the relative
residual of every column; the best iterate by the objective is returned.
"""

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.blas import dgemm as gemm
from scipy.linalg.blas import dsyr as syr
from scipy.linalg.blas import dsyrk as syrk
from scipy.linalg.blas import dtrsm as trsm
from scipy.linalg.lapack import dlauum as lauum
from scipy.linalg.lapack import dpstrf as pstrf

from .._array_api import (
    coldot, colnorm, outer, pivoted_cholesky, total, weighted_sum, xp_of, zeros,
)
from .._array_api import solve_triangular as xp_solve_triangular
from .._operator import blas_dot, check_budget, single_threaded_blas
from ._common import IterateLog, cholesky, finish, warn_not_converged, warn_rounding

# Landmarks of the Nystroem preconditioner for the full system, and the
# pivots drawn per round of randomly pivoted Cholesky.
N_LANDMARKS = 500
RPC_BLOCK = 100
# With centers, the ridge is at least this times the mean of k(c, c).
CENTERS_MIN_RIDGE = 1e-7
# The full model's preconditioner shift is at least this times the mean weighted k(x, x).
PRECONDITIONER_MIN_SHIFT = 1e-6
# Below this ridge (times the mean weighted k(x, x)) the full model solves the
# objective's own normal equations (least-squares mode, module doc).
LEAST_SQUARES_RIDGE = PRECONDITIONER_MIN_SHIFT
# Iterations over which least-squares mode measures the objective's decrease to stop.
SETTLE_WINDOW = 5
# Iterations without a new best objective before stopping for lack of progress.
NO_PROGRESS_PATIENCE = 20


def block_pcg(
    apply_A, B, apply_P, *, max_iter, tol, on_iter=None, x0=None, state=None, tol_from_start=False, tol_b=0.0,
    Ax0=None,
):
    """Conjugate gradient on ``A X = B``, one independent run per column of B.

    Parameters
    ----------
    apply_A, apply_P : callable
        ``V -> A V`` and ``V -> P^-1 V`` on (n, k) arrays.
    B : ndarray of shape (n, k)
    on_iter : callable, default=None
        ``on_iter(X, step) -> bool`` after every iteration, with the column
        steps taken; True stops.
    x0 : ndarray of shape (n, k), default=None
        The starting point (zero by default).
    state : dict, default=None
        With x0, ``state["KX"]`` is set to ``state["last"]`` after the
        product ``A x0`` (the callers' record of K times the iterate);
        ``state["residual"]`` is the largest relative residual, before on_iter.
    tol_from_start : bool, default=False
        Whether tol is relative to the initial residual ``B - A x0`` rather
        than to B: CG then solves for the correction to x0, and every
        iterate's correction is a descent direction of the quadratic.
    tol_b : float, default=0.0
        With tol_from_start, a column also stops once its residual is at
        most tol_b times B's: near the solution the initial residual is
        tiny, and tol times it can be stricter than an exact solve.
    Ax0 : ndarray of shape (n, k), default=None
        ``A x0``, where the caller already has it: no product is spent on
        it, and ``state["KX"]`` is then the caller's to set.

    Returns
    -------
    X, n_iter, status
        status is "converged" (every relative residual at most tol),
        "max_iter", "stalled" (a column lost conjugacy: ``p'A p <= 0`` in
        rounding) or "stopped" (on_iter returned True).
    """
    xp = xp_of(B)
    # numpy scalars are no operands of other namespaces' arrays
    tol, tol_b = (float(t) if np.ndim(t) == 0 else t for t in (tol, tol_b))
    if x0 is None:
        X, R = xp.zeros_like(B), xp.asarray(B, copy=True)
    else:
        X = xp.asarray(x0, dtype=xp.float64, copy=True)
        if Ax0 is None:
            Ax0 = apply_A(X)
            if state is not None:
                state["KX"] = xp.asarray(state["last"], copy=True)
        R = B - Ax0
    Z = apply_P(R)
    P = xp.asarray(Z, copy=True)
    rz = coldot(R, Z)
    b_norm = colnorm(B)
    if tol_from_start:  # the looser of tol * |R0| and tol_b * |B|, as a tolerance relative to |R0|
        r0_norm = colnorm(R)
        r0_norm = xp.where(r0_norm == 0, 1.0, r0_norm)
        tol = np.maximum(tol, tol_b * b_norm / r0_norm) if xp is np else xp.clip(tol_b * b_norm / r0_norm, min=tol)
        b_norm = r0_norm
    b_norm = xp.where(b_norm == 0, 1.0, b_norm)
    active = colnorm(R) / b_norm > tol
    stalled = False
    it = 0
    for it in range(1, max_iter + 1):
        if not bool(xp.any(active)):
            return X, it - 1, "stalled" if stalled else "converged"
        AP = apply_A(P)
        pap = coldot(P, AP)
        lost = active & ~(pap > 0) | active & ~(rz > 0)
        if bool(xp.any(lost)):  # no descent left in these columns: they stop here
            stalled, active = True, active & ~lost
        step = xp.where(active, rz / xp.where(active, pap, 1.0), 0.0)
        X += step * P
        R -= step * AP
        if state is not None:
            state["residual"] = float(xp.max(colnorm(R) / b_norm))
        if on_iter is not None and on_iter(X, step):
            return X, it, "stopped"
        active &= colnorm(R) / b_norm > tol
        Z = apply_P(R)
        rz_new = coldot(R, Z)
        beta = xp.where(rz > 0, rz_new / xp.where(rz > 0, rz, 1.0), 0.0)
        P = Z + beta * P
        rz = rz_new
    if not bool(xp.any(active)):
        return X, it, "stalled" if stalled else "converged"
    return X, it, "max_iter"


def rp_cholesky(columns, diag, rank, rng, block=RPC_BLOCK):
    """Randomly pivoted Cholesky: ``A ~ F F'`` from ``rank`` columns of A.

    Pivots are drawn in proportion to the diagonal of the residual
    ``A - F F'``, so they land where the current approximation is worst
    (Chen, Epperly, Tropp & Webber, 2022). ``F F'`` equals the Nystroem
    approximation on the pivots; on Cal-16k such pivots halve the CG
    iterations of uniformly drawn landmarks (benchmarks/bench_preconditioner.py).

    Parameters
    ----------
    columns : callable
        ``idx -> A[:, idx]`` as a Fortran-ordered float64 array.
    diag : ndarray of shape (n,)
        ``diag(A)``; pivots are never drawn where it is zero.
    rank : int
        Number of pivots (columns of F); fewer when A is numerically of lower rank.
    rng : RandomState
    block : int
        Pivots drawn per round: a round is one GEMM instead of ``block`` GEMVs.

    Returns
    -------
    F : ndarray of shape (n, r), r <= rank
    pivots : ndarray of shape (r_pivots,)
    """
    if not isinstance(diag, np.ndarray):
        return _rp_cholesky_array_api(columns, diag, rank, rng, block)
    n = len(diag)
    d = np.maximum(diag, 0.0)  # a non-PSD kernel can have negative diagonal entries
    rank = min(rank, np.count_nonzero(d > 0))
    F = np.empty((n, rank), order="F")
    pivots, k = [], 0
    floor = np.finfo(np.float64).eps * d.sum()
    while k < rank and d.sum() > floor:
        S = np.unique(rng.choice(n, min(block, rank - k), p=d / d.sum()))
        G = columns(S)
        if k:  # residual columns: G -= F[:, :k] F[S, :k]'
            G = gemm(-1.0, F[:, :k], F[S, :k], beta=1.0, c=G, trans_b=1, overwrite_c=1)
        # Pivoted Cholesky of the pivot block keeps only the pivots that add
        # rank (a round can draw near-duplicates or exhaust a low-rank A).
        R, perm, r, _ = pstrf(G[S], lower=0)
        if r == 0:
            break
        keep = perm[:r] - 1
        Fk = F[:, k : k + r]  # a Fortran-ordered view: trsm works in place
        Fk[...] = G.T[keep].T  # gather rows of the C-ordered transpose: fast
        trsm(1.0, R[:r, :r], Fk, side=1, lower=0, overwrite_b=1)
        S = S[keep]
        d -= np.einsum("ij,ij->i", Fk, Fk)
        np.maximum(d, 0.0, out=d)
        d[S] = 0.0
        pivots.extend(S)
        k += r
    return F[:, :k], np.asarray(pivots, dtype=np.intp)


def _rp_cholesky_array_api(columns, diag, rank, rng, block):
    """:func:`rp_cholesky` for arrays of another namespace: the same pivots (drawn on the host
    from the same residual diagonal), F on the device."""
    from .._array_api import take_columns, take_rows, to_numpy

    xp = xp_of(diag)
    n = diag.shape[0]
    d = np.maximum(to_numpy(diag), 0.0)
    rank = min(rank, np.count_nonzero(d > 0))
    parts, pivots, k = [], [], 0
    floor = np.finfo(np.float64).eps * d.sum()
    while k < rank and d.sum() > floor:
        S = np.unique(rng.choice(n, min(block, rank - k), p=d / d.sum()))
        G = columns(S)
        if k:
            F = xp.concat(parts, axis=1)
            G = G - F @ take_rows(xp, F, S).T
        R, perm, r = pivoted_cholesky(take_rows(xp, G, S))
        if r == 0:
            break
        keep = perm[:r]
        R = xp.asarray(R[:r, :r], device=G.device)
        # Fk R = G[:, keep]: Fk' = R^-T G[:, keep]'
        Fk = xp_solve_triangular(xp, R, take_columns(xp, G, keep).T, upper=True, trans=True).T
        S = S[keep]
        d -= to_numpy(xp.sum(Fk * Fk, axis=1))
        np.maximum(d, 0.0, out=d)
        d[S] = 0.0
        parts.append(Fk)
        pivots.extend(S)
        k += r
    F = xp.concat(parts, axis=1) if parts else xp.zeros((n, 0), dtype=xp.float64, device=diag.device)
    return F, np.asarray(pivots, dtype=np.intp)


class NystroemPreconditioner:
    """``P^-1`` for ``P = F F' + mu I``, with ``F F'`` a Nystroem approximation of A.

    ``F`` comes from :func:`rp_cholesky` on ``A = S K S``, or with
    ``center=True`` on the centred ``A = Q S K S Q`` (``Q = I - s s'``, s the
    unit vector ``sqrt(w)``) that CG solves with an intercept: the centred
    system's range is not in the span of S K S's landmarks (a linear kernel
    on features with a large mean), and outside it ``P^-1`` is ``1 / mu``.
    By Woodbury ``P^-1 v = (v - F G^-1 F' v) / mu`` with ``G = mu I + F' F``,
    all in float64: in float32 the subtraction loses the small components
    that make the preconditioner good.
    """

    def __init__(self, operator, s, mu, n_landmarks, rng, block=RPC_BLOCK, center=False):
        diag = operator.diag() * s**2
        if center:  # Q e_j = e_j - s_j s, so Q A Q's columns need only u = S K S s
            u = s * operator.matvec(s[:, None] * s[:, None])[:, 0]
            diag = diag - 2 * s * u + s**2 * (s @ u)

        xp = xp_of(s)

        def columns(idx):
            if xp is not np:
                from .._array_api import take_rows

                s_idx = take_rows(xp, s, idx)
                C = operator.columns(idx) * s[:, None] * s_idx[None, :]
                if center:
                    C = C - outer(u, s_idx)
                    C = C - outer(s, s @ C)
                return C
            with single_threaded_blas():
                C = operator.columns(idx)
            C *= s[:, None]
            C *= s[idx][None, :]
            if center:
                C -= np.outer(u, s[idx])
                C -= np.outer(s, s @ C)
            return np.asfortranarray(C)

        F, self.pivots = rp_cholesky(columns, diag, n_landmarks, rng, block)
        self.F, self.mu = F, mu
        if F.shape[1] == 0:  # nothing to approximate: P = mu I
            self.G_factor = None
            return
        if xp is not np:
            G = F.T @ F + mu * xp.eye(F.shape[1], dtype=F.dtype, device=F.device)
            self.G_factor = (cholesky(G, "preconditioner matrix"), False)
            return
        G = syrk(1.0, F, trans=1)  # F'F, upper triangle, through scipy's BLAS
        G = np.triu(G) + np.triu(G, 1).T
        G[np.diag_indices_from(G)] += mu
        self.G_factor = (cholesky(G, "preconditioner matrix"), False)

    def __call__(self, V):
        if self.G_factor is None:
            return V / self.mu
        if not isinstance(V, np.ndarray):
            inner = _cho_solve_upper(self.G_factor[0], self.F.T @ V)
            return (V - self.F @ inner) / self.mu
        inner = cho_solve(self.G_factor, blas_dot(self.F.T, V), check_finite=False)
        return (V - blas_dot(self.F, inner)) / self.mu


def _cho_solve_upper(U, V):
    """``(U'U)^-1 V`` for an upper Cholesky factor U of another namespace."""
    xp = xp_of(U)
    return xp_solve_triangular(xp, U, xp_solve_triangular(xp, U, V, upper=True, trans=True), upper=True)


def _solve_full(operator, Y, w, settings, rng):
    n, t = Y.shape
    xp = xp_of(Y)
    alpha = settings.alpha
    s = xp.sqrt(w)
    center = settings.fit_intercept
    diag_mean = float(xp.mean(operator.diag() * w))
    # mu = alpha makes P^-1 (N + alpha I) + ... well conditioned (the Nystroem
    # residual only adds eigenvalues above 1); without ridge, or with a ridge far
    # below it, P needs a shift: 1 / alpha would blow up rounding outside N's span.
    mu = float(max(alpha, PRECONDITIONER_MIN_SHIFT * diag_mean, np.finfo(float).tiny))
    precond = NystroemPreconditioner(operator, s, mu, N_LANDMARKS, rng, center=center)
    y_bar = weighted_sum(w, Y) if center else zeros(Y, t)
    least_squares = alpha < LEAST_SQUARES_RIDGE * diag_mean

    def project(V):  # Q = I - s s': b is eliminated by centring (s's = 1)
        return V - outer(s, s @ V) if center else V

    def apply_M(V):
        return project(s[:, None] * operator.matvec(s[:, None] * V))

    def apply_A(V):
        KV = operator.matvec(s[:, None] * V)
        state["last"] = KV  # K times the iterate's direction, for the objective
        AV = project(s[:, None] * KV) + alpha * V
        return apply_M(AV) if least_squares else AV

    def apply_P(V):
        V = project(precond(V))
        return project(precond(V)) if least_squares else V

    def combine(C, KX):
        A = s[:, None] * C
        b = y_bar - weighted_sum(w, KX) if center else zeros(Y, t)
        return A, b, KX + b

    state = {"last": None, "KX": zeros(Y, (n, t))}
    X0 = None
    if settings.coef_init is not None:  # warm start: c = a / s on the weighted rows
        if xp is np:
            X0 = project(np.divide(settings.coef_init, s[:, None], out=np.zeros((n, t)), where=s[:, None] > 0))
        else:
            positive = s[:, None] > 0
            X0 = project(xp.where(positive, settings.coef_init / xp.where(positive, s[:, None], 1.0), 0.0))
    B = project(s[:, None] * (Y - y_bar))
    # In least-squares mode the fit has converged once the gradient's relative norm is at
    # most tol and the best objective fell by at most tol^2 times the intercept-only one
    # over SETTLE_WINDOW iterations: the decrease CG has left is about what it made over the
    # last few (Strakos & Tichy, 2002), and (tol |B|)^2 is what a relative residual of tol
    # allows the ridge system. The gradient alone would stop early: it underweights the
    # error in K's small eigenvalues.
    settle = (SETTLE_WINDOW, settings.tol**2 * total(B, B), settings.tol) if least_squares else None
    if least_squares:
        B = apply_M(B)

    def quadratic(C):  # what CG minimises, 1/2 C'(Q S K S Q + alpha) C - C'B, from the tracked K A
        return 0.5 * (total(C, s[:, None] * state["KX"]) + alpha * total(C, C)) - total(C, B)

    log = IterateLog()
    # In least-squares mode CG minimises the objective itself: progress is judged by it.
    on_iter = _monitor(
        settings, Y, w, state, combine, lambda A, KA: total(A, KA), log,
        None if least_squares else quadratic, settle,
    )
    C, n_iter, status = block_pcg(
        apply_A, B, apply_P, max_iter=settings.max_iter, tol=0.0 if least_squares else settings.tol,
        on_iter=on_iter, x0=X0, state=state,
    )
    if status == "stalled" and settle is not None and _settled(log.curve, state, settle):
        status = "converged"  # conjugacy lost at the objective's rounding floor
    A, b, _ = combine(C, state["KX"])
    return A, b, n_iter, log, _status(status, state), None



def center_factors(operator, cache):
    """``(K_mm, T, T T' / m)`` with ``K_mm = T'T`` (upper T; T T' / m's upper triangle), cached.

    They depend on the centers only: a caller that solves several systems on
    one operator (solver "newton") passes the same cache.
    """
    if "T" not in cache:
        Kmm = operator.center_matrix()
        m = Kmm.shape[0]
        # FALKON's jitter m * eps(dtype) on K_mm: K_mm is nearly singular for
        # smooth kernels, and beta = B z is an exact change of variables, so
        # the jitter only shapes the preconditioner, never the solution.
        xp = xp_of(Kmm)
        jitter = m * np.finfo(operator.dtype).eps * float(xp.mean(xp.linalg.diagonal(Kmm)))
        cache["Kmm"] = Kmm
        cache["T"] = cholesky(Kmm, "center kernel matrix", jitter=jitter)
        T = cache["T"]
        cache["TTt"] = lauum(T, lower=0)[0] / m if xp is np else T @ T.T / m  # m^3/3 flops
    return cache["Kmm"], cache["T"], cache["TTt"]


def falkon_factor(T, TTt, d, alpha, center):
    """The upper Cholesky factor of ``T D T' / m + alpha I``, FALKON's second factor.

    ``K_nm'W K_nm ~ K_mm D K_mm / m`` with D the centers' weights relative to
    uniform (``n w_c``): Newton's Hessian weights spread over orders of
    magnitude, and the unweighted ``T T' / m`` then leaves CG many more
    iterations. Uniform weights reuse ``TTt``, the upper triangle of ``T T' / m``.
    """
    m = T.shape[0]
    xp = xp_of(T)
    if xp is not np:
        if bool(xp.all(xp.abs(d - 1.0) <= 1e-3 * xp.abs(d) + 1e-8)):  # np.allclose's test
            d = xp.ones_like(d)
        else:
            Td = T * xp.sqrt(d)
            TTt = Td @ Td.T / m
        if center:
            v = T @ d / float(xp.sqrt(m * xp.sum(d)))
            TTt = TTt - outer(v, v)
        return cholesky(TTt, "FALKON preconditioner", jitter=alpha)
    if np.allclose(d, 1.0, rtol=1e-3):
        d = np.ones(m)
    else:
        TTt = syrk(1.0 / m, T * np.sqrt(d), lower=0)  # the upper triangle of T D T' / m
    if center:
        # The centred system K_c'W K_c is approximated by K_mm (D - d d'/sum(d)) K_mm / m
        # (positive semi-definite, a weighted covariance): without the rank-one downdate the
        # preconditioner keeps the constant direction the centring removed, and CG needs many
        # more iterations.
        v = T @ d / np.sqrt(m * d.sum())
        TTt = syr(-1.0, v, lower=0, a=TTt.copy(order="F"), overwrite_a=1)  # the cached one stays
    return cholesky(TTt, "FALKON preconditioner", jitter=alpha)  # reads the upper triangle only


def falkon_maps(T, A_fac):
    """FALKON's change of variables ``B = T^-1 A^-1`` and its transpose, as two functions."""
    xp = xp_of(T)
    if xp is not np:
        def apply_B(V):
            return xp_solve_triangular(xp, T, xp_solve_triangular(xp, A_fac, V))

        def apply_Bt(V):
            return xp_solve_triangular(xp, A_fac, xp_solve_triangular(xp, T, V, trans=True), trans=True)

        return apply_B, apply_Bt

    # The factors are finite (checked by cholesky): skip scipy's O(m^2)
    # finiteness scan on every one of the loop's solves.
    def apply_B(V):  # B = T^-1 A^-1
        return solve_triangular(T, solve_triangular(A_fac, V, check_finite=False), check_finite=False)

    def apply_Bt(V):  # B' = A^-T T^-T
        inner = solve_triangular(T, V, trans="T", check_finite=False)
        return solve_triangular(A_fac, inner, trans="T", check_finite=False)

    return apply_B, apply_Bt


def _solve_centers(operator, Y, w, settings, rng):
    n, t = Y.shape
    xp = xp_of(Y)
    m = operator.m
    center = settings.fit_intercept
    check_budget(
        3 * m * m * 8, f"n_centers={m} (three m x m matrices)", settings.memory_budget,
        "Use fewer centers (n_centers) or raise options['memory_budget'].",
    )
    Kmm, T, TTt = center_factors(operator, settings.cache if settings.cache is not None else {})
    diag_mean = float(xp.mean(xp.linalg.diagonal(Kmm)))
    # FALKON needs a positive ridge: without one, K_nm'W K_nm is as singular
    # as K_mm and CG stalls. The floor is far below any statistically useful
    # ridge (documented with the alpha parameter).
    alpha = max(settings.alpha, CENTERS_MIN_RIDGE * diag_mean)
    if operator.center_rows is None:
        d = xp.ones(m, dtype=xp.float64) if xp is np else xp.ones(m, dtype=xp.float64, device=Y.device)
    else:
        from .._array_api import take_rows

        d = n * take_rows(xp, w, operator.center_rows)
    A_fac = falkon_factor(T, TTt, d, alpha, center)

    apply_B, apply_Bt = falkon_maps(T, A_fac)

    # The intercept is eliminated by centring: for a given beta the best b is
    # w'(y - K beta), which leaves K_c = (I - 1 w') K in the normal equations,
    # K_c' W K_c = K'W K - k_w k_w' with k_w = K'w. No division, no extra column.
    y_bar = weighted_sum(w, Y) if center else zeros(Y, t)
    k_w = operator.rmatvec(w) if center else None
    rhs = operator.rmatvec(w[:, None] * (Y - y_bar))

    def apply_A(V):
        BV = apply_B(V)
        H, KBV = operator.gram_matvec(BV, w)
        state["last"] = KBV
        if center:
            H = H - outer(k_w, k_w @ BV)
        return apply_Bt(H + alpha * blas_dot(Kmm, BV))

    def combine(Z, KX):
        beta = apply_B(Z)
        b = y_bar - k_w @ beta if center else zeros(Y, t)
        return beta, b, KX + b

    def penalty(beta):  # beta' K_mm beta as |T beta|^2: never negative in rounding
        return total(blas_dot(T, beta) ** 2)

    state = {"last": None, "KX": zeros(Y, (n, t))}
    Z0 = None
    if settings.coef_init is not None:  # warm start: z = B^-1 beta = A_fac T beta
        Z0 = blas_dot(A_fac, blas_dot(T, settings.coef_init))
    log = IterateLog()
    on_iter = _monitor(settings, Y, w, state, combine, lambda beta, _: penalty(beta), log, residual_progress=True)
    Z, n_iter, status = block_pcg(
        apply_A, apply_Bt(rhs), lambda V: V, max_iter=settings.max_iter, tol=settings.tol,
        on_iter=on_iter, x0=Z0, state=state,
    )
    beta, b, _ = combine(Z, state["KX"])
    return beta, b, n_iter, log, _status(status, state), penalty


def _settled(curve, state, settle):
    """Least-squares mode's stop: small gradient, best objective flat over the window.

    With a gradient below tol^2 one flat step is window enough: iterating on
    at the rounding floor only lets rounding grow.
    """
    window, eps, tol = settle
    residual = state.get("residual", np.inf)
    if residual > tol or len(curve) <= (1 if residual <= tol**2 else window):
        return False
    before = curve[: -min(window, len(curve) - 1)]
    return min(before) - min(curve) <= eps


def _status(status, state):
    if status == "stopped" and state.get("settled"):
        return "converged"
    return "no_progress" if status == "stopped" and state.get("no_progress") else status


def _monitor(settings, Y, w, state, combine, penalty, log, quadratic=None, settle=None, residual_progress=False):
    """The per-iteration step of block_pcg: objective, progress line, callback.

    ``state["KX"]`` tracks K times the iterate from the products already
    computed (``state["last"]``), so the objective costs no extra product;
    ``penalty(coef, K coef)`` is ``||f||_H^2``. Progress is judged by
    ``quadratic(X)``, the function CG minimises, where it differs from the
    objective: CG decreases it at every step in exact arithmetic, while the
    objective, a different norm of the error, may rise for many steps when
    the system is ill-conditioned, which is not rounding. With
    ``residual_progress`` a new smallest residual is progress too: once the
    objective is flat to float64's resolution, CG can still be reducing the
    residual that its stopping test reads (centers at a tiny ridge).
    """
    best = {"quadratic": np.inf, "since": 0, "residual": np.inf, "since_residual": 0}

    def on_iter(X, step):
        state["KX"] += step * state["last"]
        coef, b, F = combine(X, state["KX"])
        value = settings.loss.value(F, Y, w)
        if settings.alpha:
            value += settings.alpha * float(penalty(coef, F - b))
        log.record(value, coef, b)
        if quadratic is not None:
            q = float(quadratic(X))
            best["since"] = 0 if q < best["quadratic"] else best["since"] + 1
            best["quadratic"] = min(best["quadratic"], q)
        it = len(log.curve)
        if settings.verbose and (settings.verbose > 1 or it % 10 == 0 or it == 1):
            print(f"[cg] iter {it:5d}  objective {value:.6e}")
        if settle is not None and _settled(log.curve, state, settle):
            state["settled"] = True
            return True
        since = best["since"] if quadratic is not None else log.since_best()
        if residual_progress:
            residual = state.get("residual", np.inf)
            best["since_residual"] = 0 if residual < best["residual"] else best["since_residual"] + 1
            best["residual"] = min(best["residual"], residual)
            since = min(since, best["since_residual"])
        if settings.tol > 0 and since >= NO_PROGRESS_PATIENCE:
            state["no_progress"] = True  # rounding has taken over: stop
            return True
        return settings.callback is not None and settings.callback(coef, b)

    return on_iter


def solve(operator, Y, w, settings):
    """Minimise the objective by preconditioned conjugate gradient.

    Parameters
    ----------
    operator : KernelOperator
        Square (all points as centers) or n x m (centers).
    Y : ndarray of shape (n_samples, n_targets)
    w : ndarray of shape (n_samples,)
        Sample weights summing to 1.
    settings : SolverSettings

    Returns
    -------
    SolverResult
    """
    rng = np.random.RandomState(settings.random_state)
    run = _solve_full if operator.symmetric else _solve_centers
    coef, b, n_iter, log, status, penalty = run(operator, Y, w, settings, rng)
    # in float64 already (centers always are), more precision is no remedy: a looser tol is
    remedy = "use options={'dtype': 'float64'}" if operator.dtype == np.float32 else "raise tol"
    if status == "stalled":
        warn_rounding(
            settings, "cg", f"stopped at iteration {n_iter} for lack of progress: the search directions "
            "lost conjugacy in rounding",
            f"The model is the best iterate seen. Increase alpha or {remedy}.",
        )
    elif status == "no_progress":
        warn_rounding(
            settings, "cg", f"stopped at iteration {n_iter} for lack of progress: the objective has not "
            f"decreased for {NO_PROGRESS_PATIENCE} iterations (rounding)",
            f"The model is the best iterate seen. Increase alpha or {remedy}.",
        )
    elif status == "max_iter" and settings.tol > 0:
        warn_not_converged(
            "cg", f"did not reach tol={settings.tol:g} in max_iter={settings.max_iter} iterations",
            "Increase max_iter or alpha.",
        )
    return finish("cg", operator, Y, w, settings, coef, b, log, n_iter, status == "converged", None, penalty)
