"""Solver "cg": preconditioned conjugate gradient on the ridge system.

The objective ``sum_i w_i (f(x_i) - y_i)^2 + alpha ||f||_H^2`` is minimised
through its optimality conditions, a symmetric positive (semi-)definite
linear system solved by conjugate gradient with a Nystroem preconditioner.

* All training points as centers (``f = K a + b``): with ``S = W^1/2``,
  ``(S K S + alpha I) c = S (y - b)`` and ``a = S c``. The preconditioner
  is ``P = N + mu I`` with ``N`` the Nystroem approximation of ``S K S`` on
  500 landmarks chosen by randomly pivoted Cholesky, applied by the Woodbury
  identity in O(n m).
* m centers (``f = K_nm beta + b``): ``(K_nm' W K_nm + alpha K_mm) beta =
  K_nm' W (y - b)``, preconditioned as in FALKON (Rudi et al., 2017) by
  Cholesky factors of ``K_mm`` and ``K_mm / m + alpha I``.

The intercept is eliminated exactly by solving for the right-hand sides
``[Y, 1]`` at once (see ``dual_sum_intercept`` and ``eliminate_intercept``).
One pass over K per iteration. ``tol`` bounds the relative residual of every
column.
"""

import warnings

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.blas import dgemm as gemm
from scipy.linalg.blas import dsyrk as syrk
from scipy.linalg.blas import dtrsm as trsm
from scipy.linalg.lapack import dpstrf as pstrf
from scipy.linalg.lapack import dlauum as lauum
from sklearn.exceptions import ConvergenceWarning

from .._operator import blas_dot, check_budget, single_threaded_blas
from ._common import SolverResult, cholesky, dual_sum_intercept, eliminate_intercept

# Landmarks of the Nystroem preconditioner for the full system, and the
# pivots drawn per round of randomly pivoted Cholesky.
N_LANDMARKS = 500
RPC_BLOCK = 100


def block_pcg(apply_A, B, apply_P, *, max_iter, tol, on_iter=None):
    """Conjugate gradient on ``A X = B``, one independent run per column of B.

    Parameters
    ----------
    apply_A, apply_P : callable
        ``V -> A V`` and ``V -> P^-1 V`` on (n, k) arrays.
    B : ndarray of shape (n, k)
    on_iter : callable, default=None
        ``on_iter(X, step) -> bool`` after every iteration, with the column
        steps taken; True stops.

    Returns
    -------
    X, n_iter, converged
    """
    X = np.zeros_like(B)
    R = B.copy()
    Z = apply_P(R)
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z)
    b_norm = np.linalg.norm(B, axis=0)
    b_norm[b_norm == 0] = 1.0
    active = np.linalg.norm(R, axis=0) / b_norm > tol
    it = 0
    for it in range(1, max_iter + 1):
        if not active.any():
            return X, it - 1, True
        AP = apply_A(P)
        pap = np.einsum("ij,ij->j", P, AP)
        ok = active & (pap > 0)
        step = np.where(ok, rz / np.where(ok, pap, 1.0), 0.0)
        X += step * P
        R -= step * AP
        if on_iter is not None and on_iter(X, step):
            return X, it, False
        active &= np.linalg.norm(R, axis=0) / b_norm > tol
        Z = apply_P(R)
        rz_new = np.einsum("ij,ij->j", R, Z)
        beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P = Z + beta * P
        rz = rz_new
    return X, it, not active.any()


def _rhs_columns(Y, fit_intercept):
    return np.column_stack([Y, np.ones(len(Y))]) if fit_intercept else Y


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


class NystroemPreconditioner:
    """``P^-1`` for ``P = F F' + mu I``, with ``F F'`` a Nystroem approximation of A.

    ``F`` comes from :func:`rp_cholesky` on ``A = S K S``; by Woodbury
    ``P^-1 v = (v - F G^-1 F' v) / mu`` with ``G = mu I + F' F``, all in
    float64: in float32 the subtraction loses the small components that make
    the preconditioner good.
    """

    def __init__(self, operator, s, mu, n_landmarks, rng, block=RPC_BLOCK):
        def columns(idx):
            with single_threaded_blas():
                C = operator.columns(idx)
            C *= s[:, None]
            C *= s[idx][None, :]
            return np.asfortranarray(C)

        F, self.pivots = rp_cholesky(columns, operator.diag() * s**2, n_landmarks, rng, block)
        G = syrk(1.0, F, trans=1)  # F'F, upper triangle, through scipy's BLAS
        G = np.triu(G) + np.triu(G, 1).T
        G[np.diag_indices_from(G)] += mu
        self.F, self.mu = F, mu
        self.G_factor = (cholesky(G, "preconditioner matrix"), False)

    def __call__(self, V):
        inner = cho_solve(self.G_factor, blas_dot(self.F.T, V), check_finite=False)
        return (V - blas_dot(self.F, inner)) / self.mu


def _solve_full(operator, Y, w, settings, rng):
    n, t = Y.shape
    alpha = settings.alpha
    s = np.sqrt(w)
    diag_mean = float(np.mean(operator.diag() * w))
    # The preconditioner needs a positive shift even without ridge.
    mu = max(alpha, 1e-6 * diag_mean)
    precond = NystroemPreconditioner(operator, s, mu, N_LANDMARKS, rng)
    B = s[:, None] * _rhs_columns(Y, settings.fit_intercept)
    state = {"KX": np.zeros_like(B), "last": None}

    def apply_A(V):
        KV = operator.matvec(s[:, None] * V)
        state["last"] = KV
        return s[:, None] * KV + alpha * V

    def combine(Xc, KX):
        A = s[:, None] * Xc
        if settings.fit_intercept:
            coef, b = dual_sum_intercept(w, Y, A[:, :t], A[:, t])
            return coef, b, KX[:, :t] - np.outer(KX[:, t], b) + b
        return A, np.zeros(t), KX

    curve = []
    on_iter = _monitor(settings, Y, w, state, combine, lambda A, KA: np.einsum("ij,ij->", A, KA), curve)
    Xc, n_iter, converged = block_pcg(
        apply_A, B, precond, max_iter=settings.max_iter, tol=settings.tol, on_iter=on_iter
    )
    A, b, _ = combine(Xc, state["KX"])
    return A, b, n_iter, curve, converged


def _solve_centers(operator, Y, w, settings, rng):
    n, t = Y.shape
    m = operator.m
    alpha = settings.alpha
    check_budget(
        3 * m * m * 8, f"n_centers={m} (three m x m matrices)", settings.memory_budget,
        "Use fewer centers (n_centers) or raise options['memory_budget'].",
    )
    Kmm = operator.center_matrix()
    # FALKON's jitter m * eps(dtype): K_mm is nearly singular for smooth
    # kernels, and beta = B z is an exact change of variables, so the jitter
    # only shapes the preconditioner, never the solution.
    jitter = m * np.finfo(operator.dtype).eps * float(np.mean(np.diagonal(Kmm)))
    T = cholesky(Kmm + jitter * np.eye(m), "center kernel matrix")  # Kmm = T'T
    TTt = lauum(T, lower=0)[0]  # T T' in place from the triangle: m^3/3 flops
    TTt = np.triu(TTt) + np.triu(TTt, 1).T
    A_fac = cholesky(TTt / m + alpha * np.eye(m), "FALKON preconditioner")

    # The factors are finite (checked by cholesky): skip scipy's O(m^2)
    # finiteness scan on every one of the loop's solves.
    def apply_B(V):  # B = T^-1 A^-1
        return solve_triangular(T, solve_triangular(A_fac, V, check_finite=False), check_finite=False)

    def apply_Bt(V):  # B' = A^-T T^-T
        inner = solve_triangular(T, V, trans="T", check_finite=False)
        return solve_triangular(A_fac, inner, trans="T", check_finite=False)

    rhs = operator.rmatvec(w[:, None] * _rhs_columns(Y, settings.fit_intercept))
    state = {"KX": np.zeros((n, rhs.shape[1])), "last": None}

    def apply_A(V):
        BV = apply_B(V)
        H, KBV = operator.gram_matvec(BV, w)
        state["last"] = KBV
        return apply_Bt(H + alpha * blas_dot(Kmm, BV))

    def combine(Z, KX):
        beta = apply_B(Z)
        if settings.fit_intercept:
            return eliminate_intercept(w, Y, KX[:, :t], KX[:, t], beta[:, :t], beta[:, t])
        return beta, np.zeros(t), KX

    curve = []
    on_iter = _monitor(settings, Y, w, state, combine, lambda beta, _: np.einsum("ij,ij->", beta, blas_dot(Kmm, beta)), curve)
    Z, n_iter, converged = block_pcg(
        apply_A, apply_Bt(rhs), lambda V: V, max_iter=settings.max_iter, tol=settings.tol,
        on_iter=on_iter,
    )
    beta, b, _ = combine(Z, state["KX"])
    return beta, b, n_iter, curve, converged


def _monitor(settings, Y, w, state, combine, penalty, curve):
    """The per-iteration step of block_pcg: objective, progress line, callback.

    ``state["KX"]`` tracks K times the iterate from the products already
    computed (``state["last"]``), so the objective costs no extra product;
    ``penalty(coef, K coef)`` is ``||f||_H^2``.
    """

    def on_iter(X, step):
        state["KX"] += step * state["last"]
        coef, b, F = combine(X, state["KX"])
        value = settings.loss.value(F, Y, w)
        if settings.alpha:
            value += settings.alpha * float(penalty(coef, F - b))
        curve.append(value)
        it = len(curve)
        if settings.verbose and (settings.verbose > 1 or it % 10 == 0 or it == 1):
            print(f"[cg] iter {it:5d}  objective {value:.6e}")
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
    coef, b, n_iter, curve, converged = run(operator, Y, w, settings, rng)
    if not converged and settings.tol > 0 and n_iter == settings.max_iter:
        warnings.warn(
            f"Solver 'cg' did not reach tol={settings.tol:g} in max_iter="
            f"{settings.max_iter} iterations. Increase max_iter or alpha.",
            ConvergenceWarning,
        )
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(b))):
        raise ValueError(
            "Solver 'cg' produced non-finite coefficients: the system is too badly "
            "conditioned in this precision. Increase alpha or use "
            "options={'dtype': 'float64'}."
        )
    return SolverResult(coef, b, n_iter, curve, None, converged)
