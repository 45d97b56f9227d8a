"""The preconditioners: Nystroem (full model) and FALKON (centers), as objects.

``NystroemPreconditioner`` applies ``(F F' + mu I)^-1`` with F from
randomly pivoted Cholesky. ``FalkonPreconditioner`` is FALKON's change of
variables ``B = T^-1 A^-1`` (``apply``) and its transpose (``apply_t``),
built from the centers' factors ``K_mm = T'T`` (``center_factors``) and the
weights of the system it preconditions.
"""

from typing import NamedTuple

import numpy as np

from .._array_api import (
    add_to_diagonal, as_float64, blas_dot, cast, cho_solve, cholesky, cholesky_in_place, copy_array, diagonal,
    factors_in_place, fortran, gram, is_float32, keeps_inverses, minus_outer, on_host, outer_product,
    scaled_triangle_gram, single_threaded_blas, take_rows, triangular_dot, triangular_solver, xp_of,
)
from .._operator import POOLED_MIN_BYTES, check_budget
from ._krylov import RPC_BLOCK, rp_cholesky

# Landmarks of the Nystroem preconditioner for the full system: N_LANDMARKS, and with many right-hand sides up to
# MAX_LANDMARKS where its factor (n r^2 flops) costs at most FACTOR_PRODUCTS products with K (``full_landmarks``).
N_LANDMARKS = 500
MAX_LANDMARKS = 2000
FACTOR_PRODUCTS = 1
# With centers, the ridge is at least this times the mean of k(c, c).
CENTERS_MIN_RIDGE = 1e-7
# The full model's preconditioner shift is at least this times the mean weighted k(x, x).
PRECONDITIONER_MIN_SHIFT = 1e-6


class Landmarks(NamedTuple):
    """A factor ``F`` of the weighted (centred) kernel matrix drawn already (``alpha="auto"``'s), ``F'F``,
    the rows it pivoted on, and its ``_auto_alpha.Directions`` where the rule made them."""

    F: object
    gram: object
    pivots: object = None
    directions: object = None


class NystroemPreconditioner:
    """``P^-1`` for ``P = F F' + mu I``, with ``F F'`` a Nystroem approximation of A: F from :func:`rp_cholesky`
    on ``A = S K S``, or with ``center=True`` on the centred ``A = Q S K S Q`` (``Q = I - s s'``) that CG
    solves with an intercept (its range is not in the span of S K S's landmarks, and outside it ``P^-1`` is
    ``1 / mu``). By Woodbury ``P^-1 v = (v - F G^-1 F' v) / mu`` with ``G = mu I + F' F``, in float64: in
    float32 the subtraction loses the small components that make the preconditioner good.
    """

    def __init__(self, operator, s, mu, n_landmarks, rng, block=RPC_BLOCK, center=False, factor=None):
        # factor: Landmarks drawn already by landmark_factor, on this operator and weights (alpha="auto")
        if factor is None:
            self._finish(operator, *landmark_factor(operator, s, n_landmarks, rng, block, center), mu)
        else:
            self._finish(operator, factor.F, None, mu, factor.gram)

    def _finish(self, operator, F, pivots, mu, F_gram=None):
        """Keep the factor F and factor ``G = mu I + F'F`` (``F_gram``: F'F, where known already)."""
        self.F, self.pivots, self.mu = F, pivots, mu
        # a large F's products are memory-bound: split by rows over the operator's pool, one BLAS thread each
        pooled = getattr(operator, "host", False) and operator.n_threads > 1 and F.nbytes >= POOLED_MIN_BYTES
        self._pool = (operator._run, operator._row_batches()) if pooled else None  # F has K's rows
        if F.shape[1] == 0:  # nothing to approximate: P = mu I
            self.G_factor = None
            return
        G = gram(F, trans=True) if F_gram is None else copy_array(F_gram)  # (add_to_diagonal works in place)
        self.G_factor = cholesky(add_to_diagonal(G, mu), "preconditioner matrix")

    def __call__(self, V):
        return self.apply(V)

    def apply(self, V):
        """``P^-1 V``; P is symmetric, so this is also ``apply_t``."""
        if self.G_factor is None:
            return V / self.mu
        if self._pool is None:
            inner = cho_solve(self.G_factor, blas_dot(self.F.T, V))
            return (V - blas_dot(self.F, inner)) / self.mu
        run, batches = self._pool
        FtV = np.sum(run(lambda rows: self.F[rows].T @ V[rows], batches), axis=0)  # numpy's matmul frees the GIL
        inner = cho_solve(self.G_factor, FtV)
        out = np.empty_like(V)

        def finish(rows):
            out[rows] = (V[rows] - self.F[rows] @ inner) / self.mu

        run(finish, batches)
        return out

    apply_t = apply  # P is symmetric


def full_landmarks(n, columns, landmarks=None):
    """``(rank, landmarks)``: the full system's preconditioner rank for n rows and ``columns`` right-hand sides
    (``N_LANDMARKS``, more with many columns), and the factor drawn already (``alpha="auto"``'s) where it
    serves: of that rank, or of the kernel's own rank where that is less; else None."""
    rank = int(min(MAX_LANDMARKS, max(N_LANDMARKS, np.sqrt(2.0 * FACTOR_PRODUCTS * n * columns))))
    if landmarks is not None and rank > max(N_LANDMARKS, landmarks.F.shape[1]):
        landmarks = None
    return min(rank, n), landmarks


def landmark_factor(operator, s, n_landmarks, rng, block=RPC_BLOCK, center=False):
    """``(F, pivots)``: randomly pivoted Cholesky of ``S K S`` (centred: ``Q S K S Q``), rank ``n_landmarks``."""
    diag = operator.diag() * s**2
    if center:  # Q e_j = e_j - s_j s, so Q A Q's columns need only u = S K S s
        u = s * operator.matvec(s[:, None] * s[:, None])[:, 0]
        diag = diag - 2 * s * u + s**2 * (s @ u)

    def columns(idx):
        with single_threaded_blas():
            C = operator.columns(idx)  # a new array: scaled in place, in its own memory order
        s_idx = take_rows(s, idx)
        C *= s[:, None]
        C *= s_idx[None, :]
        if center:
            C -= outer_product(u, s_idx)
            C -= outer_product(s, s @ C)
        return fortran(C)

    return rp_cholesky(columns, diag, n_landmarks, rng, block, precision=operator.dtype)


def center_jitter(operator, Kmm):
    """FALKON's jitter on K_mm, ``m * eps(dtype)`` times the mean ``k(c, c)``: the kernel's dtype, or K_mm's
    where it is float32."""
    eps = np.finfo(np.float32 if is_float32(Kmm) else operator.dtype).eps
    return Kmm.shape[0] * eps * float(xp_of(Kmm).mean(diagonal(Kmm)))


def center_matrix_count(m, like=None):
    """The m x m matrices (of ``center_dtype``) a centers fit holds at its peak, for arrays like ``like`` (None:
    numpy): T and FALKON's factor A, each factored in its own memory (numpy, torch); also both triangular
    inverses where ``keeps_inverses(m)``; and where the namespace does not factor in place, A's matrix, its
    symmetrised copy, an identity and the factor at once.
    """
    if like is None or on_host(like):
        return 2
    in_place = factors_in_place(like)
    if not keeps_inverses(m):
        return 2 if in_place else 5
    return 4 if in_place else 6


def center_dtype(m, memory_budget, like, compute_dtype):
    """The dtype of the centers' m x m matrices: float64, unless a float32 fit off the host past
    ``keeps_inverses(m)`` (its factors applied by solves) would not fit them in the budget: then float32,
    half the memory (10^5 centers in 80 GB; FALKON's float32 factors), whose products with T for the
    objective and its gradient still sum in float64 (``triangular_dot``)."""
    if like is None or on_host(like) or np.dtype(compute_dtype) != np.float32 or keeps_inverses(m):
        return np.float64
    return np.float64 if center_matrix_count(m, like) * m * m * 8 <= memory_budget else np.float32


def check_center_memory(m, memory_budget, like=None, dtype=np.float64):
    """The bytes of the centers' m x m matrices of ``dtype``; a MemoryBudgetError where they exceed the budget.

    ``like``: an array of the fit's namespace (numpy keeps fewer matrices than the others); None
    for numpy (the Dask client's).
    """
    count, itemsize = center_matrix_count(m, like), np.dtype(dtype).itemsize
    check_budget(
        count * m * m * itemsize, f"n_centers={m} ({count} m x m matrices of {np.dtype(dtype).name})",
        memory_budget, "Use fewer centers (n_centers) or raise options['memory_budget'].",
    )
    return count * m * m * itemsize


class CenterFactors(NamedTuple):
    """The centers' kernel matrix through its upper Cholesky factor alone: ``K_mm + jitter I = T'T``.

    ``jitter`` is FALKON's, or the larger one the factorization needed; ``diag_mean`` the mean
    ``k(c, c)`` (the ridge floor's scale); ``solve_T`` applies ``T^-1`` (``T^-T`` with trans).
    """

    T: object
    jitter: float
    diag_mean: float
    solve_T: object

    def kmm_dot(self, V):
        """``K_mm V`` as ``T'(T V) - jitter V``: K_mm itself is not kept (one m x m matrix fewer)."""
        return triangular_dot(self.T, triangular_dot(self.T, V), trans=True) - self.jitter * V


def center_factors(operator):
    """``CenterFactors`` of the operator's centers (or of a problem with ``center_matrix``).

    They depend on the centers only: a solver that solves several systems on
    one operator (solver "newton") computes them once and keeps them. K_mm is
    factored in its own memory.
    """
    Kmm = operator.center_matrix()
    diag_mean = float(xp_of(Kmm).mean(diagonal(Kmm)))
    # FALKON's jitter m * eps(dtype) on the nearly singular K_mm: beta = B z is an exact change of variables,
    # so the jitter shapes the preconditioner, never the solution.
    T, jitter = cholesky_in_place(operator.center_matrix, "center kernel matrix", center_jitter(operator, Kmm), Kmm)
    return CenterFactors(T, jitter, diag_mean, triangular_solver(T))


def falkon_factor(T, d, alpha, center):
    """The upper Cholesky factor of ``T D T' / m + alpha I``, FALKON's second factor, in its own memory:
    ``K_nm'W K_nm ~ K_mm D K_mm / m`` with D the centers' weights relative to uniform (``n w_c``), which
    Newton's Hessian weights spread over orders of magnitude.
    """
    m = T.shape[0]
    xp = xp_of(T)
    if bool(xp.all(xp.abs(d - 1.0) <= 1e-3 + 1e-8)):  # np.allclose(d, 1, rtol=1e-3)
        d = xp.ones_like(d)

    d_T = cast(d, np.float32 if is_float32(T) else np.float64)  # A in T's dtype

    def build():
        M = scaled_triangle_gram(T, xp.sqrt(d_T / m))  # T D T' / m
        if center:
            # The centred system K_c'W K_c is approximated by K_mm (D - d d'/sum(d)) K_mm / m (PSD, a weighted
            # covariance): without the rank-one downdate CG would see the constant direction the centring removed.
            M = minus_outer(M, T @ d_T / float(np.sqrt(m * float(xp.sum(d)))))
        return M

    return cholesky_in_place(build, "FALKON preconditioner", alpha)[0]


class FalkonPreconditioner:
    """FALKON's ``B = T^-1 A^-1``: ``apply(V) = B V``, ``apply_t(V) = B' V``.

    ``A`` is the upper factor of ``T D T' / m + alpha I`` (:func:`falkon_factor`);
    CG then runs on ``B' H B`` in the variables ``z = B^-1 beta``.
    """

    def __init__(self, factors, d, alpha, center):
        self.T, solve_T = factors.T, factors.solve_T
        self.A = falkon_factor(factors.T, d, alpha, center)
        solve_A = triangular_solver(self.A)
        self.apply = lambda V: solve_T(solve_A(V))  # B = T^-1 A^-1
        self.apply_t = lambda V: solve_A(solve_T(V, trans=True), trans=True)  # B' = A^-T T^-T

    def variables(self, beta):
        """``z = B^-1 beta = A T beta``: a model's coefficients as CG's variables."""
        return as_float64(blas_dot(self.A, blas_dot(self.T, beta)))
