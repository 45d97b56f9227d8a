"""Krylov pieces shared by the solvers: block preconditioned CG and randomly pivoted Cholesky.

Both work on numpy arrays through scipy's BLAS and on arrays of any array
API namespace through the standard's functions (kernelgd._array_api).
"""

from typing import NamedTuple

import numpy as np

from .._array_api import (
    GrowingFactor, clip_min, coldot, colnorm, copy_array, pivoted_cholesky, read_interval, take_rows, to_numpy, xp_of,
)

# Pivots drawn per round of randomly pivoted Cholesky.
RPC_BLOCK = 100
# A residual's entries carry rounding of about (eps of the columns' precision + rank x float64's eps) times A's
# largest diagonal entry; a pivot whose residual is within this factor of it is declined: it would divide that
# rounding by the residual's square root, and F F' would overshoot A (A - F F' indefinite).
RPC_MARGIN = 1000


class PCGResult(NamedTuple):
    """What :func:`block_pcg` returns (it unpacks as ``x, n_iter, status``)."""

    x: object
    n_iter: int
    status: str


class ProductTracker:
    """K times CG's iterate, kept up to date without a product of its own: CG's step ``x += step * p`` changes
    ``K x`` by ``step * K p``, the product CG has just taken, which ``apply_A`` records (``record``) and
    ``on_iter`` applies (``advance``). ``residual``: CG's largest relative residual after its latest step,
    read from the device only when asked for.
    """

    def __init__(self, KX=None):
        self.KX, self.last, self.largest = KX, None, np.inf

    @property
    def residual(self):
        return float(self.largest)

    def record(self, KV):
        self.last = KV

    def advance(self, step):
        self.KX += step * self.last


def block_pcg(
    apply_A, B, apply_P, *, max_iter, tol, on_iter=None, x0=None, tracker=None, tol_from_start=False, tol_b=0.0,
    Ax0=None,
):
    """Conjugate gradient on ``A X = B``, one independent run per column of B.

    Parameters
    ----------
    apply_A, apply_P : callable
        ``V -> A V`` and ``V -> P^-1 V`` on (n, k) arrays.
    B : ndarray of shape (n, k)
    on_iter : callable, default=None
        ``on_iter(X, step) -> bool`` after every iteration, with the column steps taken; True stops. Off
        the host, convergence is tested every ``read_interval(B)`` iterations only (a read waits for the
        device): converged columns take zero steps until then, and ``n_iter`` counts as if tested each time.
    x0 : ndarray of shape (n, k), default=None
        The starting point (zero by default).
    tracker : ProductTracker, default=None
        With x0, its ``KX`` is set to the product that ``A x0`` recorded.
    tol_from_start : bool, default=False
        Whether tol is relative to the initial residual ``B - A x0`` rather than to B (every iterate's
        correction to x0 is then a descent direction of the quadratic).
    tol_b : float, default=0.0
        With tol_from_start, a column also stops once its residual is at most tol_b times B's (near the
        solution tol times the initial residual can be stricter than an exact solve).
    Ax0 : ndarray of shape (n, k), default=None
        ``A x0``, where the caller already has it (the tracker's ``KX`` is then the caller's to set).

    Returns
    -------
    PCGResult
        ``(x, n_iter, status)``; status is "converged" (every relative residual at most tol), "max_iter",
        "stalled" (a column lost conjugacy: ``p'A p <= 0`` in rounding) or "stopped" (on_iter returned True).
    """
    xp = xp_of(B)
    # numpy scalars are no operands of other namespaces' arrays
    tol, tol_b = (float(t) if np.ndim(t) == 0 else t for t in (tol, tol_b))
    if x0 is None:
        X, R = xp.zeros_like(B), copy_array(B)
    else:
        X = copy_array(xp.asarray(x0, dtype=xp.float64))
        if Ax0 is None:
            Ax0 = apply_A(X)
            if tracker is not None:
                tracker.KX = copy_array(tracker.last)
        R = B - Ax0
    Z = apply_P(R)
    P = copy_array(Z)
    rz = coldot(R, Z)
    b_norm = colnorm(B)
    if tol_from_start:  # the looser of tol * |R0| and tol_b * |B|, as a tolerance relative to |R0|
        r0_norm = colnorm(R)
        r0_norm = xp.where(r0_norm == 0, 1.0, r0_norm)
        tol = clip_min(tol_b * b_norm / r0_norm, tol)
        b_norm = r0_norm
    b_norm = xp.where(b_norm == 0, 1.0, b_norm)
    active = colnorm(R) / b_norm > tol
    stalled = xp.zeros_like(active)  # columns that lost conjugacy, read once CG ends
    it, every = 0, read_interval(B)
    busy = 0  # iterations begun with a column active: those a test at every iteration would have run (read once)
    # one host read per `every` iterations, the convergence test: the rest stays on the arrays' device
    for it in range(1, max_iter + 1):
        if (it - 1) % every == 0 and not bool(xp.any(active)):
            return PCGResult(X, it - 1 if every == 1 else int(busy), _ended(stalled))
        if every > 1:
            busy = busy + xp.astype(xp.any(active), xp.int64)
        AP = apply_A(P)
        pap = coldot(P, AP)
        lost = active & ~(pap > 0) | active & ~(rz > 0)  # no descent left in these columns: they stop here
        stalled, active = stalled | lost, active & ~lost
        step = xp.where(active, rz / xp.where(active, pap, 1.0), 0.0)
        X += step * P
        R -= step * AP
        relative = colnorm(R) / b_norm
        if tracker is not None:
            tracker.largest = xp.max(relative)
        if on_iter is not None and on_iter(X, step):
            return PCGResult(X, it, "stopped")
        active &= relative > tol
        Z = apply_P(R)
        rz_new = coldot(R, Z)
        beta = xp.where(rz > 0, rz_new / xp.where(rz > 0, rz, 1.0), 0.0)
        P = Z + beta * P
        rz = rz_new
    if not bool(xp.any(active)):
        return PCGResult(X, it if every == 1 else int(busy), _ended(stalled))
    return PCGResult(X, it, "max_iter")


def _ended(stalled):
    """The status of a run whose every column stopped: "stalled" where any lost conjugacy."""
    return "stalled" if bool(xp_of(stalled).any(stalled)) else "converged"


def rp_cholesky(columns, diag, rank, rng, block=RPC_BLOCK, precision=np.float64):
    """Randomly pivoted Cholesky: ``A ~ F F'`` from ``rank`` columns of A (Chen, Epperly, Tropp & Webber, 2022).

    Pivots are drawn in proportion to the residual ``A - F F'``'s diagonal, where the approximation is worst
    (on Cal-16k they halve the CG iterations of uniform landmarks: bench_preconditioner.py); ``F F'`` is the
    Nystroem approximation on them. Pivots are drawn on the host; F stays in diag's namespace.

    Parameters
    ----------
    columns : callable
        ``idx -> A[:, idx]`` (numpy: a Fortran-ordered float64 array).
    diag : array of shape (n,)
        ``diag(A)``; pivots are never drawn where it is zero.
    rank : int
        Number of pivots; fewer when A is numerically of lower rank.
    rng : RandomState
    block : int
        Pivots drawn per round: a round is one GEMM instead of ``block`` GEMVs.
    precision : dtype
        The precision A's columns were computed in (a float32 kernel's, returned in float64, still carry
        float32's rounding): it sets which residuals are resolved (``RPC_MARGIN``).

    Returns
    -------
    F : array of shape (n, r), r <= rank
    pivots : ndarray of shape (r_pivots,)
    """
    d = np.maximum(np.asarray(to_numpy(diag)), 0.0)  # a non-PSD kernel can have negative diagonal entries
    n = len(d)
    rank = min(rank, np.count_nonzero(d > 0))
    factor = GrowingFactor(diag, n, rank)
    pivots = []
    rounding = float(np.finfo(precision).eps) + rank * float(np.finfo(np.float64).eps)
    resolved = RPC_MARGIN * rounding * d.max(initial=0.0)
    while factor.k < rank and d.max(initial=0.0) > resolved:
        S = np.unique(rng.choice(n, min(block, rank - factor.k), p=d / d.sum()))
        G = factor.residual(columns(S), S)
        # Pivoted Cholesky of the pivot block keeps only the pivots whose residual is resolved (a round can
        # draw near-duplicates or exhaust a low-rank A).
        R, perm, r = pivoted_cholesky(take_rows(G, S), tol=resolved)
        if r == 0:
            break
        keep = perm[:r]
        d -= factor.append(G, keep, R[:r, :r])
        np.maximum(d, 0.0, out=d)
        S = S[keep]
        d[S] = 0.0
        pivots.extend(S)
    return factor.F, np.asarray(pivots, dtype=np.intp)
