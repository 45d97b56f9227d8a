"""Solver "cg": preconditioned conjugate gradient on the ridge system.

The objective ``sum_i w_i (f(x_i) - y_i)^2 + alpha ||f||_H^2`` is minimised
through its optimality conditions, a symmetric positive (semi-)definite
linear system solved by conjugate gradient with a Nystroem preconditioner.

* All training points as centers (``f = K a + b``): with ``S = W^1/2``,
  ``(S K S + alpha I) c = S (y - b)`` and ``a = S c``. The preconditioner
  is ``P = N + mu I`` with ``N`` the Nystroem approximation of ``S K S`` on a
  few hundred landmarks, applied by the Woodbury identity in O(n m).
* m centers (``f = K_nm beta + b``): ``(K_nm' W K_nm + alpha K_mm) beta =
  K_nm' W (y - b)``, preconditioned as in FALKON (Rudi et al., 2017) by
  Cholesky factors of ``K_mm`` and ``K_mm / m + alpha I``.

The intercept is eliminated exactly by solving for the right-hand sides
``[Y, 1]`` at once (see ``eliminate_intercept``). One pass over K per
iteration. ``tol`` bounds the relative residual of every column.
"""

import warnings

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.blas import dsyrk as syrk
from scipy.linalg.lapack import dlauum as lauum
from sklearn.exceptions import ConvergenceWarning

from .._operator import blas_dot, check_budget
from ._common import SolverResult, cholesky, eliminate_intercept

# Landmarks of the Nystroem preconditioner for the full system.
N_LANDMARKS = 500


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


class NystroemPreconditioner:
    """``P^-1`` for ``P = C M^+ C' + mu I``, the Nystroem approximation of S K S.

    ``C = (S K S)[:, landmarks]`` and ``M = C[landmarks]``; by Woodbury
    ``P^-1 v = (v - C G^-1 C' v) / mu`` with ``G = mu M + C' C``, all in
    float64: in float32 the subtraction loses the small components that make
    the preconditioner good (30 iterations instead of 21 on Cal-16k).
    """

    def __init__(self, operator, s, mu, n_landmarks, rng):
        candidates = np.flatnonzero(s > 0)
        m = min(n_landmarks, len(candidates))
        idx = np.sort(rng.choice(candidates, m, replace=False))
        C = operator.columns(idx)
        C *= s[:, None]
        C *= s[idx][None, :]
        G = syrk(1.0, C, trans=1)  # C'C, upper triangle, through scipy's BLAS
        G = np.triu(G) + np.triu(G, 1).T
        G += mu * C[idx]
        self.C, self.mu = C, mu
        self.G_factor = (cholesky((G + G.T) / 2, "preconditioner matrix"), False)

    def __call__(self, V):
        inner = cho_solve(self.G_factor, blas_dot(self.C.T, V))
        return (V - blas_dot(self.C, inner)) / self.mu


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
            return eliminate_intercept(w, Y, KX[:, :t], KX[:, t], A[:, :t], A[:, t])
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

    def apply_B(V):  # B = T^-1 A^-1
        return solve_triangular(T, solve_triangular(A_fac, V), lower=False)

    def apply_Bt(V):  # B' = A^-T T^-T
        return solve_triangular(A_fac, solve_triangular(T, V, trans="T"), trans="T")

    rhs = operator.rmatvec(w[:, None] * _rhs_columns(Y, settings.fit_intercept))
    state = {"KX": np.zeros((n, rhs.shape[1])), "last": None}

    def apply_A(V):
        BV = apply_B(V)
        H, KBV = operator.gram_matvec(BV, w)
        state["last"] = KBV
        return apply_Bt(H + alpha * (Kmm @ BV))

    def combine(Z, KX):
        beta = apply_B(Z)
        if settings.fit_intercept:
            return eliminate_intercept(w, Y, KX[:, :t], KX[:, t], beta[:, :t], beta[:, t])
        return beta, np.zeros(t), KX

    curve = []
    on_iter = _monitor(settings, Y, w, state, combine, lambda beta, _: np.einsum("ij,ij->", beta, Kmm @ beta), curve)
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
