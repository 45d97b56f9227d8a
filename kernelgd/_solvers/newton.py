"""Solver "newton": damped Newton steps for smooth losses, each solved by conjugate gradient.

For a loss with gradient ``G`` and Hessian ``H`` in the predictions ``F``,
each column's diagonal ``h`` gives the second-order model

    1/2 sum_i h_i (f'_i - z_i)^2 + alpha ||f'||_H^2 + const,   z = F - G / h,

a weighted kernel ridge problem (iteratively reweighted least squares). Its
minimiser is found by preconditioned conjugate gradient, all columns at
once (one product with K per iteration for every class): for the full model
preconditioned by one Nystroem factor ``K ~ L L'`` shared by every step and
re-weighted by each column's ``h``; with centers by solver "cg"'s FALKON
preconditioner, weighted by the columns' mean ``h``. For the binary logistic loss this is Newton's method. The
softmax's Hessian couples the classes. With centers, its steps are exact
Newton steps on the coupled Hessian, one CG run over every class at once
(``_direction_centers_coupled``; a 6-class fit at alpha=1e-6 converges in
19 steps where the diagonal model did not in 200). The full model takes
exact steps too where the ridge is large against K's largest eigenvalue
(``COUPLED_MAX_CONDITION``, or ``STARTED_MAX_CONDITION`` for a fit that
starts from a subsample's fit, below; ``_direction_full_coupled``: the diagonal model's least
squares with each row's Hessian factor ``M_i`` for ``sqrt(h)``, one CG run
over every class, preconditioned by the diagonal model's factors; letter at
C=1: 9 steps and 43 products with K, against 18 steps and 76 products).
Below that ridge the classes couple too strongly for that preconditioner
and the diagonal model is solved instead: its step is then taken in the plane of this direction and the
previous steps, minimising the exact second-order model there (Hessian-vector
products in F cost no product with K), which speeds convergence (still
linear). A backtracking line search on the true objective keeps every step a
decrease.

Steps are inexact (with centers, and for the full model with the binary
loss, until a stopping test passes; for the full model with the softmax
only while the line search damps them): each CG run, warm-started from the
current iterate, stops once its residual is a forcing term times its
initial one (0.1 for the softmax's diagonal model, whose steps converge
linearly anyway; ``sqrt(decrement / objective0)`` up to 0.1 where the
second-order model is exact), and no later than its residual is ``min(tol, 1e-3)`` of its
right-hand side. The full model's exact steps stop at that test alone, the
centers' at the looser of it and ``min(tol, 1e-3)`` of the initial
residual. A run that stops before its first iteration moves only the
intercept: its coefficients' change would be rounding, which the softmax's
subspace step would blow up. The full model's warm start costs no product
with K, which the solver already has times the iterate. The fit stops when
the Newton decrement (the objective decrease the diagonal model predicts)
is at most ``tol**2`` times the intercept-only objective, a test always
confirmed by an exact step, or when an exact step's CG run finds the
iterate already solving the Newton system (after a quadratically
convergent step).

On few centers where CG's residual is not to be trusted (a tiny system, alpha
below the centers' ridge floor, or a rank-deficient K_mm) the steps are
formed and factored densely instead (``_dense_newton``), and so are the exact
steps that confirm a tiny full model's diagonal-model stop. Before it reports
convergence, or stops where no direction descends, the solver recomputes K A exactly (the product ``finish`` then
reuses); from a running K A that drifted from it by rounding (huge cancelling
coefficients) the fit goes on, ``DRIFT_RESUMES`` times at most, then stops
with a warning. A start given to the solver (a warm start, a subsample's fit)
from which the steps fail or converge before any iterate beats the
intercept-only model (saturated predictions, whose Hessian weights underflow)
is left for the intercept-only model, once.

A full model of at least ``SUBSAMPLE_MIN_ROWS`` weighted rows whose steps
are exact (not the softmax's diagonal model), fitted without a warm start,
starts from the same objective's minimiser on a random
eighth of its rows (at least 1,000; their block of the stored K, to a
looser tolerance), which is near the full optimum: letter's defaults take 5
Newton steps from there against 9 from the intercept-only model. A start
that is no better than the intercept-only model is not used.

Without ridge (alpha negligible against the weighted kernel's trace) the
full model's diagonal model is singular and its minimiser, an interpolant
of the working targets, is no usable step. The step is then damped
(Levenberg-Marquardt: ``damping * |x - x0|^2`` added to the model, its CG
run truncated), and a damped step's small decrement is never taken for
convergence. A direction that is no descent is never convergence either:
it is retried with more damping or a shorter CG run.

An iterate whose predictions are dominated by the rounding of K's
precision (``RoundingCheck``: huge coefficients, as at a tiny ridge in
float32) is never the best iterate, and ``NOISY_PATIENCE`` of them in a
row stop the fit with a warning (a rounding stop: ``dtype="auto"`` then
refits in float64).
"""

from dataclasses import dataclass, replace
from enum import Enum

import numpy as np
from scipy.linalg.lapack import dtrtri as trtri

from .._array_api import (
    add_to_diagonal, cholesky, clip_min, from_numpy, coldot, concat, contiguous, copy, diagonal, eye, gram, rows_of, take_columns,
    to_numpy, xp_of, zeros,
)
from .._array_api import total as total_of
from .._array_api import blas_dot
from .._operator import KernelOperator, single_threaded_blas
from .._warnings import warn
from . import _dense_newton
from ._krylov import ProductTracker, block_pcg, rp_cholesky
from ._objective import Objective
from ._preconditioners import (
    CENTERS_MIN_RIDGE,
    PRECONDITIONER_MIN_SHIFT,
    FalkonPreconditioner,
    _cho_solve_upper,
    center_factors,
    center_jitter,
)
from ._preconditioners import N_LANDMARKS as _N_LANDMARKS
from ._common import (
    IterateLog,
    RoundingCheck,
    finish,
    warn_not_converged,
    warn_rounding,
)

# What this solver minimises: its losses, and its models (all points as centers, or n_centers).
LOSSES = {"squared", "logistic"}
MODELS = {"full", "centers"}

# Hessian weights are floored at this fraction of the largest: a point the
# model already fits with certainty still gets a (tiny) weight.
HESSIAN_FLOOR = 1e-10
ARMIJO = 1e-4
# A predicted decrease below this fraction of the objective is rounding.
ROUNDING = 64 * np.finfo(float).eps
MAX_HALVINGS = 30
# Landmarks of the shared Nystroem factor of K (the full model's preconditioner).
N_LANDMARKS = _N_LANDMARKS
MIN_LANDMARKS = 100
REFACTOR_PRODUCTS = 8
REFACTOR_CHANGE = 0.25
# A row whose h_i K_ii moves this many times can ruin a stale factor that the L1 share above
# passes: a degree-3 polynomial kernel's largest diagonal entries are 10^5 times its mean's, and
# at a ratio of 568 CG stalled at its cap and the fit stopped 10% above the optimum. Fits at the
# rbf kernel (letter, MNIST 8,000 rows at C=1 and 16) move it at most 3.4 times between factors.
REFACTOR_RATIO = 8.0
# The loosest relative residual of an inexact Newton step's CG run.
FORCING_MAX = 0.1
# A loose exact-model step whose decrement is below this share of the stopping threshold converges.
CONFIRM_MARGIN = 0.25
# A full model of at least SUBSAMPLE_MIN_ROWS weighted rows (K stored) whose steps are exact Newton steps
# starts from the fit on a random subsample of max(SUBSAMPLE_MIN, n / SUBSAMPLE_SHARE) of them, solved
# to SUBSAMPLE_TOL (_subsample_start).
# benchmarks/bench_subsample_start.py: letter (16,000 rows, 26 classes) defaults 1.29 times faster (5 Newton
# steps and 31 products with K against 9 and 43), MNIST (8,000 rows) 1.17 and 1.33 times at C=1 and 4,
# binary MNIST 1.01 times.
SUBSAMPLE_MIN_ROWS = 4000
SUBSAMPLE_MIN = 1000
SUBSAMPLE_SHARE = 8
SUBSAMPLE_TOL = 1e-2
# A fit stops once this many accepted iterates in a row have predictions dominated by the rounding of
# K's precision (RoundingCheck), none of which may be returned. A converging fit can pass through such
# iterates (the softmax at alpha=1e-12 in float32: 20 in a row, then back to valid ones); a float32 fit
# of 1,500 rows on 100 centers at alpha=1e-12 crept on for 280 s with none valid after its first.
NOISY_PATIENCE = 50
# A stop where no direction descends still converges if the last accepted step's decrement was
# within this factor of the stopping threshold (tol**2 times the intercept-only objective).
# float64: 10 (at 1e3, a polynomial kernel's fit on 50 centers stopped silently at three times
# its optimum's objective, with a decrement 80 times the threshold); float32 resolves far less.
NO_DESCENT_NEAR = {"float64": 10.0, "float32": 1e3}
# An exact step whose CG run stops before its first iteration, right after an accepted decrement
# above tol times the intercept-only objective, is retaken with CG's tolerance this many times
# tighter: the binary logistic loss at a polynomial kernel (800 rows) "converged" at 0.3664 where
# the optimum is 0.3643, its last decrement 1.6e-2 against a threshold of 6.9e-7. So are the steps
# after a damped exact step, and an exact direction that failed, before the fit gives up.
SOLVED_RETIGHTEN = 1e-3
# At a convergence the running K A is checked against the exact product (exact_state): a difference
# in the objective above tol**2 of the intercept-only objective, or DRIFT_EPS rounding units of it,
# is drift
DRIFT_EPS = 1e3
# A fit goes on from the exact K A after at most this many drifted convergences, then stops with a warning
# (a warm start's coefficients scaled by 1e8 drifted once on the way down to the optimum's)
DRIFT_RESUMES = 3
# Earlier steps kept for the softmax's subspace step.
SUBSPACE_MEMORY = 4
# Levenberg-Marquardt damping (relative to the weighted kernel's trace) where 2 alpha is below
# LM_ALPHA of it: its start, and its range.
LM_ALPHA = 1e-10
LM_START = 1e-3
LM_MIN = 1e-9
LM_MAX = 1e3
# A damped step's CG run is truncated here: any of its iterates is a descent direction.
LM_INNER = 50
# The softmax on centers with an intercept and more classes than this eliminates the intercepts in
# each CG product rather than precomputing K'H 1's k (k + 1) / 2 columns per Newton step.
PAIR_COLUMNS_MAX_CLASSES = 8
# Column sums of the coefficients below this share of their size are rounding of 0.
ZERO_SUM = 1e-10
# Probabilities are floored here in the softmax's exact full-model step (its g divides by sqrt(p)),
# as the diagonal model floors the Hessian's weights.
PROBABILITY_FLOOR = HESSIAN_FLOOR
# The full model's softmax takes exact Newton steps where K's largest eigenvalue is at most this
# many times 2 alpha n (C times it, in scikit-learn's terms), else the diagonal model's: the coupled
# system's CG, preconditioned by the diagonal model's factors, needs ever more iterations as this
# ratio grows. Measured by benchmarks/bench_softmax_steps.py (exact against diagonal-model steps at
# the scale width; digits, MNIST 8,000 rows, letter 16,000): ratio 435 to 8,800: the exact steps
# 1.15 to 1.63 times faster; 7,000: 1.03 times; 15,000 to 35,000: 1.2 to 2.2 times slower.
COUPLED_MAX_CONDITION = 10_000.0
# The same bound for a fit that starts from a subsample's fit (_subsample_start): from near the optimum
# the exact steps skip the damped phase. Forced exact against diagonal-model steps with that start
# (bench_softmax_steps.py, two runs, and ad hoc runs): letter at ratio 14,916 1.5 and 1.8 times faster;
# MNIST at 17,600 1.24 times, at 24,200 a tie, at 35,154 1.5 and 1.6 times slower.
STARTED_MAX_CONDITION = 20_000.0
# Up to this ratio the exact steps precondition with the Nystroem factor's leading half (at least
# MIN_LANDMARKS columns): letter at 3,700, 13% faster in alternating runs; letter at 15,000 (where
# the rule takes the diagonal model) needed 780 CG iterations against 187 on all landmarks.
HALF_RANK_MAX_CONDITION = COUPLED_MAX_CONDITION / 2


@dataclass
class _Steps:
    """What newton's steps share: CG's cap and tolerances, the damping, the preconditioners' factors."""

    inner_cap: int  # CG's iteration cap (shortened after a failed direction, grown back after a step)
    exact_tol: float = 0.0  # an exact step's tolerance, relative to the right-hand side
    inner_tol: float = 0.0  # this step's tolerance
    loose: bool = False  # whether this step is inexact
    status: str = None  # the last CG run's status
    damping: float = 0.0  # Levenberg-Marquardt damping of the full model (0: none)
    lm: float = LM_START  # that damping relative to the weighted kernel's trace
    centers: tuple = None  # (K_mm, T, T T' / m) of a model on centers ((K_mm, None, None) with dense steps)
    L: object = None  # the full model's Nystroem factor of K
    rank: int = None  # the leading columns of L the preconditioner uses (None: all)
    factors: list = None  # per column: the Woodbury factor, the weights and shift it was made with
    weights: list = None
    shifts: object = None
    inverses: object = None  # numpy: each factor's triangular inverse R_c^-1, stacked (k, r, r)
    floored: bool = False  # whether the last centers step's ridge was CENTERS_MIN_RIDGE's floor, not 2 alpha
    unfloored: bool = False  # centers steps solve with 2 alpha itself (the floor then only preconditions)
    dense: tuple = None  # few centers where CG is not to be trusted: _dense_newton's features (dense steps)


def _direction_centers(operator, F, G, H, A, KA, settings, steps):
    """The diagonal model's minimiser on centers, all columns in one CG run.

    Column c solves ``(K_c' H_c K_c + r_c K_mm) beta = K_c' H_c (z - z_bar)``
    (``K_c`` the ``h_c``-centred K_nm, ``r_c = 2 alpha`` floored as solver
    "cg" floors it) in FALKON's variables ``beta = T^-1 A^-1 u``, with one
    ``A`` for every column: ``T D T' / m + r I``, D the centers' Hessian
    weights averaged over the columns. A factor per column would cost m^3
    flops per class per step; the shared one leaves CG a few more
    iterations, each one product with K_nm for every class. Warm-started from
    the current iterate. Returns the new coefficients, intercepts, K_nm
    times the coefficients and the number of CG iterations.
    """
    n, k = F.shape
    xp = xp_of(F)
    m = operator.m
    center = settings.fit_intercept
    Kmm, T, TTt = steps.centers
    total = xp.sum(H, axis=0)
    Z = F - G / H
    z_bar = coldot(H, Z) / total if center else zeros(F, k)
    floor = CENTERS_MIN_RIDGE * float(xp.mean(diagonal(Kmm)))
    # solver "cg"'s floor, in H's scale
    ridge = clip_min(floor * total, 2.0 * settings.alpha)
    mean_ridge = float(xp.exp(xp.mean(xp.log(ridge / total))))  # the preconditioner's, floored in any case
    if steps.unfloored:  # the floor then only preconditions
        ridge = 2.0 * settings.alpha
    steps.floored = not steps.unfloored and 2.0 * settings.alpha < floor * float(xp.max(total))
    # D relative to uniform weights of the same total, so that r compares as in solver "cg"
    rows = np.arange(m) if operator.center_rows is None else operator.center_rows
    d = xp.mean(n * rows_of(H, rows) / total, axis=1)
    falkon = FalkonPreconditioner(T, TTt, d, mean_ridge, center)
    apply_B, apply_Bt = falkon.apply, falkon.apply_t

    # one pass over K_nm for the right-hand side and k_h (K_c'H K_c = K'H K - k_h k_h' / total)
    KtH = operator.rmatvec(concat([H * (Z - z_bar), H], axis=1) if center else H * (Z - z_bar))
    k_h = KtH[:, k:] if center else None
    tracker = ProductTracker()
    scale = 1.0 / total  # each column's system divided by its total weight: comparable scales

    def apply_A(U):
        BU = apply_B(U)
        HK, KBU = operator.gram_matvec(BU, H)
        tracker.record(KBU)
        if center:
            HK = HK - k_h * (coldot(k_h, BU) / total)
        return apply_Bt(scale * (HK + ridge * blas_dot(Kmm, BU)))

    def on_iter(X, step):
        tracker.advance(step)
        return False

    rhs = apply_Bt(scale * KtH[:, :k])
    U0 = falkon.variables(A)  # u = B^-1 beta
    U, n_inner, steps.status = block_pcg(
        apply_A, rhs, lambda V: V, max_iter=steps.inner_cap, tol=steps.inner_tol, tol_from_start=True,
        tol_b=steps.exact_tol, on_iter=on_iter, x0=U0, tracker=tracker,
    )
    A_new, KA_new = apply_B(U), tracker.KX
    b_new = z_bar - coldot(H, KA_new) / total if center else zeros(F, k)
    return A_new, b_new, KA_new, n_inner


def _intercept_pinv(WP, P):
    """The pseudo-inverse of ``S = sum_i w_i (diag(p_i) - p_i p_i')``, the intercepts' Hessian.

    S's null space holds the softmax's invariance, ``1 / sqrt(k)``: then
    ``S^+ = (S + c 1 1' / k)^+ - 1 1' / (c k)`` exactly for any ``c > 0``,
    where a pseudo-inverse of S itself can take the rounding of that null
    eigenvalue for a real one (rows of equal probabilities, as at the first
    step: S^+ of order 1e15). ``c`` is S's mean eigenvalue, so the cutoff
    compares at S's scale; it drops only classes no row gives a probability
    (their intercepts then get no step).
    """
    xp = xp_of(P)
    k = P.shape[1]
    I = eye(P, k)
    J = xp.ones_like(I) / k
    S = I * xp.sum(WP, axis=0)[None, :] - WP.T @ P
    S = (S + S.T) / 2
    c = float(xp.sum(diagonal(S))) / max(k - 1, 1)
    if not c > 0:  # no row weighs: the intercepts' Hessian is 0
        return xp.zeros_like(S)
    return xp.linalg.pinv(S + c * J) - J / c


def _intercept_coupling(operator, WP, P):
    """``K'H 1``, shape (m, k, k): ``[:, :, d] = K'H(1 e_d')``, the gradient's change of the centers'
    coefficients when intercept d moves by one, where ``H(1 e_d') = w p_d (e_d - P)``. From ``K'(w P)``
    and the k (k + 1) / 2 distinct ``K'(w p_c p_d)``, in one pass over K_nm."""
    xp = xp_of(P)
    m, k = operator.m, P.shape[1]
    pairs = np.triu_indices(k)
    if xp is np:
        KWP = operator.rmatvec(np.hstack([WP, WP[:, pairs[0]] * P[:, pairs[1]]]))
        KPP = np.empty((m, k, k))
        KPP[:, pairs[0], pairs[1]] = KPP[:, pairs[1], pairs[0]] = KWP[:, k:]
        KH1 = -KPP
        KH1[:, np.arange(k), np.arange(k)] += KWP[:, :k]
        return KH1
    # no scatter into 3-d arrays: gather the pair columns into a (m, k, k) block
    KWP = operator.rmatvec(xp.concat([WP, take_columns(xp, WP, pairs[0]) * take_columns(xp, P, pairs[1])], axis=1))
    index = np.zeros((k, k), dtype=np.int64)
    index[pairs[0], pairs[1]] = index[pairs[1], pairs[0]] = np.arange(len(pairs[0]))
    KPP = xp.reshape(take_columns(xp, KWP[:, k:], index.ravel()), (m, k, k))
    eye = xp.eye(k, dtype=KWP.dtype, device=KWP.device)
    return -KPP + eye[None, :, :] * KWP[:, None, :k]


def _direction_centers_coupled(operator, F, G, A, KA, b, settings, steps, loss, w):
    """The exact Newton step of the softmax on centers, every class in one CG run.

    The Hessian in the predictions couples the classes row by row
    (``H_i = w_i (diag(p_i) - p_i p_i')``), so the step ``(D, e)`` of the
    coefficients and intercepts solves the whole system; eliminating ``e``
    through ``S = sum_i H_i`` (singular along the softmax's invariance, where
    the right-hand side vanishes) leaves for D the Schur complement

        (K'H K - K'H 1 S^+ 1'H K + R) D = -(K'G + 2 alpha K_mm A) - K'H 1 e0,

    ``R = r_c K_mm`` per class (``r_c = 2 alpha`` floored as in
    ``_direction_centers``: extra damping, so D is always a descent
    direction), ``e0 = -S^+ 1'G``. One product is one pass over K_nm for
    every class (``K'H 1`` is made once per step, k^2 columns); past
    ``PAIR_COLUMNS_MAX_CLASSES`` classes each product is instead
    ``K'H (K D - 1 e')`` with ``e = S^+ 1'H K D``, two passes over K_nm and
    no k^2 columns. CG runs
    jointly over all classes in FALKON's variables (the factor
    ``_direction_centers`` builds, weighted by the Hessian's diagonal),
    each class scaled by its total weight. Returns the new coefficients,
    intercepts, K_nm times the coefficients and the number of CG iterations.
    """
    n, k = F.shape
    xp = xp_of(F)
    m = operator.m
    center = settings.fit_intercept
    Kmm, T, TTt = steps.centers
    P = loss.probabilities(F)
    H = w[:, None] * P * (1.0 - P)  # the diagonal, for the preconditioner and the floor
    total = clip_min(xp.sum(H, axis=0), np.finfo(float).tiny)
    floor = CENTERS_MIN_RIDGE * float(xp.mean(diagonal(Kmm)))
    # one ridge for every class: the operator then keeps coefficients whose rows sum to zero (the
    # softmax ignores a function added to every class: only the ridge would see that direction)
    ridge = max(2.0 * settings.alpha, floor * float(xp.max(total)))
    rows_c = np.arange(m) if operator.center_rows is None else operator.center_rows
    d = xp.mean(n * rows_of(H, rows_c) / total, axis=1)
    falkon = FalkonPreconditioner(T, TTt, d, float(xp.exp(xp.mean(xp.log(ridge / total)))), center)
    if steps.unfloored:  # the floor then only preconditions
        ridge = 2.0 * settings.alpha
    steps.floored = 2.0 * settings.alpha < ridge
    apply_B, apply_Bt = falkon.apply, falkon.apply_t

    def hess(rows, V):  # H applied row by row to V = the rows' change of F
        P_rows = rows_of(P, rows)
        PV = P_rows * V
        return rows_of(w, rows)[:, None] * (PV - P_rows * xp.sum(PV, axis=1, keepdims=True))

    # many classes: K'H 1 would take k (k + 1) / 2 columns per step; the intercepts are then
    # eliminated in each product instead, with K D and K'(...) as two passes over K_nm
    project = center and k > PAIR_COLUMNS_MAX_CLASSES
    if project:
        WP = w[:, None] * P
        S_pinv = _intercept_pinv(WP, P)
        e0 = -(S_pinv @ xp.sum(G, axis=0))
        ones = xp.ones_like(G[:, :1])
        # H(1 e0') is the intercept step's change of the gradient: the right-hand side's K'H 1 e0 term
        rhs = -(operator.rmatvec(G + hess(slice(None), ones * e0[None, :]))
                + 2.0 * settings.alpha * blas_dot(Kmm, A))
    else:
        rhs = -(operator.rmatvec(G) + 2.0 * settings.alpha * blas_dot(Kmm, A))
    if center and not project:
        WP = w[:, None] * P
        S_pinv = _intercept_pinv(WP, P)
        KH1 = _intercept_coupling(operator, WP, P)
        e0 = -(S_pinv @ xp.sum(G, axis=0))
        rhs = rhs - KH1 @ e0

    tracker = ProductTracker(zeros(F, (n, k)))

    def operator_D(D):
        if project:  # K'H (K D - 1 e'), e the intercepts' best answer to K D
            KD = operator.matvec(D)
            tracker.record(KD)
            HKD = hess(slice(None), KD)
            e = S_pinv @ xp.sum(HKD, axis=0)
            return operator.rmatvec(HKD - hess(slice(None), ones * e[None, :])) + ridge * blas_dot(Kmm, D)
        HK, KD = operator.gram_matvec(D, hess)
        tracker.record(KD)
        out = HK + ridge * blas_dot(Kmm, D)
        if center:
            out = out - KH1 @ (S_pinv @ xp.sum(hess(slice(None), KD), axis=0))
        return out

    # joint CG over every class: one column of m * k entries
    def zero_sum(Z):  # CG stays where rows sum to zero: the operator's rounding would leave it
        return xp.reshape(Z - xp.mean(Z, axis=1, keepdims=True), (-1, 1))

    def apply_A(u):
        return zero_sum(apply_Bt(operator_D(apply_B(xp.reshape(u, (m, k))))))

    def precondition(r):  # each class by its weight (see ridge for the zero sums)
        return zero_sum(xp.reshape(r, (m, k)) / total)

    def on_iter(X, step):
        tracker.advance(step[0])
        return False

    U, n_inner, steps.status = block_pcg(
        apply_A, zero_sum(apply_Bt(rhs)), precondition, max_iter=steps.inner_cap, tol=steps.inner_tol,
        on_iter=on_iter,
    )
    D, KD = apply_B(xp.reshape(U, (m, k))), tracker.KX
    e = (e0 - S_pinv @ xp.sum(hess(slice(None), KD), axis=0)) if center else zeros(F, k)
    return A + D, b + e, KA + KD, n_inner


def _nystroem_factor(operator, k, settings, steps):
    """The full model's Nystroem factor ``L`` of K (``K ~ L L'``), drawn once per fit into ``steps.L``."""
    if steps.L is not None:
        return steps.L
    xp = xp_of(operator.diag())
    rng = np.random.RandomState(settings.random_state)

    def columns(idx):
        if xp is not np:
            return operator.columns(idx)
        with single_threaded_blas():
            return np.asfortranarray(operator.columns(idx))

    # k factors cost n r^2 k flops per refactoring, a product with K n^2 k: r <= sqrt(8 n) keeps a
    # refactoring within 8 products (digits' 5-fold path: 2.2 times faster than r = 316, while
    # adult's binary fits at small alpha keep their 500); below MIN_LANDMARKS rows every row is
    # a landmark: an exact, deterministic preconditioner
    n = operator.n
    rank = int(min(N_LANDMARKS, 2 * N_LANDMARKS / np.sqrt(k),
                   max(np.sqrt(REFACTOR_PRODUCTS * n), MIN_LANDMARKS)))
    steps.L = rp_cholesky(columns, operator.diag(), rank, rng)[0]
    return steps.L


def _full_preconditioner(operator, H, ridge, settings, steps):
    """The inverse of ``P_c = S_c L L' S_c + mu_c I`` for every column (Woodbury), ``S_c = diag(sqrt(h_c))``.

    ``L`` is one Nystroem factor of the unweighted K, drawn once per fit
    (and kept along a search's path). Returns the function applying every
    column's ``P_c^-1`` at once.
    """
    n, k = H.shape
    xp = xp_of(H)
    S = xp.sqrt(H)
    _nystroem_factor(operator, k, settings, steps)
    # randomly pivoted Cholesky's leading columns are the factor of a smaller rank
    L = steps.L if steps.rank is None or steps.rank >= steps.L.shape[1] else steps.L[:, : steps.rank]
    L = contiguous(L)
    if steps.factors is not None and any(f is not None and f[0].shape[0] != L.shape[1] for f in steps.factors):
        steps.factors = None  # made at another rank (a search path's earlier fit)
    diag = operator.diag()
    # floored as in solver "cg": a shift of a tiny ridge would blow every component outside
    # L's span (K's null space) up by 1 / ridge, coefficients K cannot see but the penalty's rounding can
    shift_floor = float(max(ridge, np.finfo(float).tiny))
    mu = PRECONDITIONER_MIN_SHIFT * (diag @ H) / n
    mu = clip_min(mu, shift_floor)
    # G_c = L' diag(h_c) L + mu_c I, refactored only where h_c has moved by a
    # REFACTOR_CHANGE share since its factor was made, or where some row's weighted
    # diagonal h_i K_ii + mu has moved by a factor of REFACTOR_RATIO: a stale factor still
    # preconditions (P stays positive definite), and late steps barely move h.
    if steps.factors is None:
        steps.factors, steps.weights, steps.shifts = [None] * k, [None] * k, np.ones(k)  # shifts: each factor's mu
    factors, weights, shifts = steps.factors, steps.weights, steps.shifts
    for c in range(k):
        old = weights[c]
        moved = old is None or (float(xp.sum(xp.abs(H[:, c] - old))) > REFACTOR_CHANGE * float(xp.sum(old))
                                or _diagonal_ratio(H[:, c], old, diag, float(mu[c]), float(shifts[c])) > REFACTOR_RATIO)
        if L.shape[1] and (moved or not 0.5 <= float(mu[c]) / shifts[c] <= 2.0):  # or a damping that moved
            Gc = add_to_diagonal(gram(S[:, c : c + 1] * L, trans=True), float(mu[c]))
            factors[c], weights[c] = (cholesky(Gc, "preconditioner matrix"), False), copy(H[:, c])
            shifts[c] = float(mu[c])
            if xp is np:  # G_c^-1 u = R^-1 R^-T u: every class's solve in two batched products
                if steps.inverses is None or steps.inverses.shape != (k,) + Gc.shape:
                    steps.inverses = np.empty((k,) + Gc.shape)
                steps.inverses[c] = trtri(factors[c][0], lower=0)[0]

    if not L.shape[1]:
        return lambda V: V / mu
    # each factor is applied with the weights and shift it was made for (Woodbury needs them to match)
    S_factor = xp.sqrt(xp.stack(weights, axis=1))
    shifts_now = from_numpy(np.asarray(shifts, dtype=np.float64), xp, H.device)

    def apply(V):
        U = blas_dot(L.T, S_factor * V)
        if xp is np:
            R_inv = steps.inverses
            inner = np.matmul(R_inv, np.matmul(R_inv.transpose(0, 2, 1), U.T[:, :, None]))[:, :, 0].T
        else:
            inner = xp.concat([_cho_solve_upper(factors[c][0], U[:, c : c + 1]) for c in range(k)], axis=1)
        return (V - S_factor * blas_dot(L, inner)) / shifts_now

    return apply


def _diagonal_ratio(h, h_old, diag, mu, mu_old):
    """The largest factor by which a row's ``h_i K_ii + mu`` has moved since ``h_old``'s factor."""
    xp = xp_of(h)
    ratio = (h * diag + mu) / (h_old * diag + mu_old)
    return float(xp.max(xp.maximum(ratio, 1.0 / ratio)))


def _direction_full(operator, F, G, H, A, KA, settings, steps):
    """The diagonal model's minimiser for the full model, all columns in one CG run.

    Column c solves ``(Q S K S Q + 2 alpha I) x = Q S (z - z_bar)`` with
    ``S = diag(sqrt(h_c))`` and ``a = S x`` as solver "cg" does, preconditioned
    by ``P = S L L' S + mu I`` (Woodbury, ``_full_preconditioner``).
    Warm-started from the current iterate ``x0 = Q A / s``, whose product is
    the known ``K A`` where ``S x0 = A``. Returns the new coefficients,
    intercepts, K times the coefficients and the number of CG iterations.
    """
    n, k = F.shape
    xp = xp_of(F)
    damping = steps.damping
    ridge = 2.0 * settings.alpha + damping
    center = settings.fit_intercept
    S = xp.sqrt(H)
    total = xp.sum(H, axis=0)
    Z = F - G / H
    z_bar = coldot(H, Z) / total if center else zeros(F, k)
    inverse = _full_preconditioner(operator, H, ridge, settings, steps)

    def project(V):  # removes the intercept: Q_c = I - s_c s_c' / total_c
        return V - S * (coldot(S, V) / total) if center else V

    def precondition(V):
        return project(inverse(V))

    tracker = ProductTracker()

    def apply_A(V):
        KV = operator.matvec(S * V)
        tracker.record(KV)
        return project(S * KV) + ridge * V

    def on_iter(X, step):
        tracker.advance(step)
        return False

    X0, AX0 = project(A / S), None
    # Q removes nothing from A / s where A's columns sum to 0 (every iterate but a user's coef_init, with
    # an intercept): then K S X0 = K A, known, and the warm start costs no product with K
    sums, sizes = xp.abs(xp.sum(A, axis=0)), xp.sum(xp.abs(A), axis=0)
    if not center or bool(xp.all(sums <= ZERO_SUM * sizes)):
        tracker.KX = copy(KA)
        AX0 = project(S * KA) + ridge * X0
    rhs = project(S * (Z - z_bar))
    tol_b, from_start = steps.exact_tol, steps.loose
    if damping:  # Levenberg-Marquardt: damping * |x - x0|^2 added to the model, solved for the correction
        rhs += damping * X0  # (B grows with the margins: no tolerance relative to it)
        tol_b, from_start = 0.0, True
    X, n_inner, steps.status = block_pcg(
        apply_A, rhs, precondition, max_iter=min(steps.inner_cap, LM_INNER) if damping else steps.inner_cap,
        tol=steps.inner_tol, tol_from_start=from_start, tol_b=tol_b, on_iter=on_iter, x0=X0,
        tracker=tracker, Ax0=AX0,
    )
    A_new, KA_new = S * X, tracker.KX
    b_new = z_bar - coldot(H, KA_new) / total if center else zeros(F, k)
    return A_new, b_new, KA_new, n_inner


def _direction_full_coupled(operator, F, G, H, A, KA, settings, steps, loss, w):
    """The exact Newton step of the softmax for the full model, every class in one CG run.

    Row i's Hessian ``H_i = w_i (diag(p_i) - p_i p_i')`` factors as
    ``M_i M_i'`` with ``M_i = sqrt(w_i) (diag(sqrt(p_i)) - p_i sqrt(p_i)')``,
    and the gradient as ``G_i = M_i g_i``, ``g_i = G_i / sqrt(w_i p_i)``
    (G's rows sum to zero). With coefficients ``A = M x`` the second-order
    model is ``1/2 |M'(K M x + 1 b') - (M'F - g)|^2 + alpha x'M'K M x``,
    the diagonal model's least squares with the block ``M`` for ``S``:
    ``(Q M'K M Q + 2 alpha I) x = Q (M'F - g)``, ``Q`` the projection that
    removes the intercepts (``B = M'1``: ``Q = I - B S^+ B'``,
    ``S = B'B = sum_i H_i``). One product with K per CG iteration for every
    class, preconditioned by the diagonal model's factors
    (``_full_preconditioner``); warm-started from ``x0 = A / sqrt(w p)``,
    for which ``M x0 = A`` where A's rows and columns sum to zero.
    Returns the new coefficients, intercepts, K times the coefficients and
    the number of CG iterations.
    """
    n, k = F.shape
    xp = xp_of(F)
    ridge = 2.0 * settings.alpha  # (never damped: the solver takes these steps with a ridge only)
    center = settings.fit_intercept
    P = loss.probabilities(F)
    # p floored where it underflows: g's true class divides by sqrt(p)
    root_p = xp.sqrt(clip_min(P, PROBABILITY_FLOOR))
    root_w = xp.sqrt(w)[:, None]
    root_h = root_w * root_p
    scale = xp.where(root_h > 0, 1.0 / xp.where(root_h > 0, root_h, 1.0), 0.0)  # 0 where w is

    def M(X):  # rows M_i x_i
        RX = root_p * X
        return root_w * (RX - P * xp.sum(RX, axis=1, keepdims=True))

    def Mt(V):  # rows M_i' v_i
        return root_w * root_p * (V - xp.sum(P * V, axis=1, keepdims=True))

    if center:
        S_pinv = _intercept_pinv(w[:, None] * P, P)

        def project(X):  # X - B S^+ B'X, B e = rows M_i' e
            e = S_pinv @ xp.sum(M(X), axis=0)
            return X - Mt(xp.broadcast_to(e[None, :], X.shape))
    else:
        def project(X):
            return X

    inverse = _full_preconditioner(operator, H, ridge, settings, steps)

    # one CG run over every class's coefficients: a column of n * k entries
    def flat(X):
        return xp.reshape(X, (-1, 1))

    def square(u):
        return xp.reshape(u, (n, k))

    def precondition(v):
        return flat(project(inverse(square(v))))

    tracker = ProductTracker()

    def apply_A(u):
        X = square(u)
        KX = operator.matvec(M(X))
        tracker.record(KX)
        return flat(project(Mt(KX)) + ridge * X)

    def on_iter(X, step):
        tracker.advance(step[0])
        return False

    X0, AX0 = project(A * scale), None
    # M X0 = A where A's rows sum to zero (and its columns, with an intercept): every iterate but a
    # user's coef_init. Then K M X0 = K A, known, and the warm start costs no product with K
    sizes = xp.sum(xp.abs(A))
    rows_ok = bool(xp.all(xp.abs(xp.sum(A, axis=1)) <= ZERO_SUM * sizes))
    if rows_ok and (not center or bool(xp.all(xp.abs(xp.sum(A, axis=0)) <= ZERO_SUM * sizes))):
        tracker.KX = copy(KA)
        AX0 = project(Mt(KA)) + ridge * X0
    g = G * scale
    rhs = project(Mt(F) - g)
    tol_b, from_start = steps.exact_tol, steps.loose
    u, n_inner, steps.status = block_pcg(
        apply_A, flat(rhs), precondition, max_iter=steps.inner_cap,
        tol=steps.inner_tol, tol_from_start=from_start, tol_b=tol_b, on_iter=on_iter, x0=flat(X0),
        tracker=tracker, Ax0=None if AX0 is None else flat(AX0),
    )
    A_new, KA_new = M(square(u)), tracker.KX
    if center:  # the intercepts' optimum given K A_new: S b = sum_i (H_i (F_i - K A_new_i) - G_i)
        b_new = S_pinv @ xp.sum(loss.hessp(F, None, w, F - KA_new) - G, axis=0)
    else:
        b_new = zeros(F, k)
    return A_new, b_new, KA_new, n_inner


def _coupling_ratio(operator, w, k, settings, steps):
    """K's largest eigenvalue over ``2 alpha n``: where the softmax's exact steps pay (``COUPLED_MAX_CONDITION``).

    The eigenvalue is read from the Nystroem factor the preconditioner
    draws anyway (``L'L``'s, which the randomly pivoted Cholesky's first
    columns capture), ``n`` is the rows that weigh. Infinite without ridge.
    """
    if not settings.alpha > 0:
        return np.inf
    L = _nystroem_factor(operator, k, settings, steps)
    if not L.shape[1]:
        return np.inf
    top = float(np.linalg.eigvalsh(to_numpy(L.T @ L))[-1])
    return top / (2.0 * settings.alpha * int(np.count_nonzero(to_numpy(w))))


def _subsample_applies(operator, Y, w, settings):
    """Whether a fit without a warm start starts from a subsample's fit (``_subsample_start``)."""
    return (settings.coef_init is None and operator.symmetric and operator.stored and xp_of(Y) is np
            and settings.alpha > 0 and int(np.count_nonzero(w)) >= SUBSAMPLE_MIN_ROWS)


def _subsample_start(operator, Y, w, settings):
    """A start for a large full model: the same objective minimised on a random subsample of its rows.

    For a fit where ``_subsample_applies``: the subsample's ``max(SUBSAMPLE_MIN, n / SUBSAMPLE_SHARE)``
    weighted rows (their weights renormalised, the same alpha: the same function estimated
    from fewer rows) are fitted on their block of the stored K to ``SUBSAMPLE_TOL``; their
    coefficients, zero elsewhere, start the full fit near its optimum, where Newton's steps
    converge fastest. Returns ``(A, b, K A)``.
    """
    n, k = Y.shape
    rows = np.flatnonzero(w > 0)
    rng = np.random.RandomState(settings.random_state)
    sub = np.sort(rng.choice(rows, max(SUBSAMPLE_MIN, len(rows) // SUBSAMPLE_SHARE), replace=False))
    operator.mirror_lower()  # whole rows, as the pooled products need anyway
    part = KernelOperator(operator.K[np.ix_(sub, sub)], None, dtype=operator.dtype, threads=operator.n_threads)
    result = solve(part, Y[sub], w[sub] / np.sum(w[sub]), replace(
        settings, tol=max(settings.tol, SUBSAMPLE_TOL), coef_init=None, intercept_init=None, verbose=0,
        callback=None, rounding_stops=[], reuse=None))
    A = np.zeros((n, k))
    A[sub] = result.dual_coef
    return A, result.intercept, operator.matvec(A)


def _direction(operator, F, G, H, A, KA, b, settings, steps, loss, w, coupled, coupled_full, K_mm):
    """This step's new coefficients, intercepts, K times the coefficients and CG iterations (see solve)."""
    if steps.dense is not None:
        D, db, KD = _dense_newton.direction(steps.dense, F, G, A, b, settings.alpha, settings.fit_intercept, loss, w)
        steps.status = "converged"
        return A + D, b + db, KA + KD, 1
    if coupled:
        return _direction_centers_coupled(operator, F, G, A, KA, b, settings, steps, loss, w)
    if coupled_full:
        return _direction_full_coupled(operator, F, G, H, A, KA, settings, steps, loss, w)
    direction = _direction_full if K_mm is None else _direction_centers
    return direction(operator, F, G, H, A, KA, settings, steps)


class Stop(Enum):
    """Why a fit stopped before its stopping test passed; each maps to its warning (``_NewtonRun.report``)."""

    NO_DESCENT = "no direction decreases the objective"
    ROUNDING = "the predicted decrease is at the objective's rounding"
    DRIFT = "the running predictions drifted from the exact ones"
    NOISE = "the predictions are dominated by the kernel's rounding"
    CALLBACK = "a callback asked to stop"


def solve(operator, Y, w, settings):
    """Minimise the objective by damped Newton steps; see the module docstring.

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
    return _NewtonRun(operator, Y, w, settings).run()


class _NewtonRun:
    """One fit: its model and start, the state between steps, the stopping tests and the failure policy.

    Invariants: ``A, b, KA, value`` are an accepted iterate (``KA`` = K A up to the running products'
    rounding, ``value`` its objective, never above the start's); every accepted iterate is logged and
    passed to the callback; ``it`` counts the steps taken.
    """

    def __init__(self, operator, Y, w, settings):
        self.operator, self.Y, self.w, self.settings = operator, Y, w, settings
        self.loss = loss = settings.loss
        self.xp = xp_of(Y)
        n, k = self.n, self.k = Y.shape
        self.alpha = alpha = settings.alpha
        self.steps = steps = _Steps(inner_cap=settings.max_iter)
        self.K_mm = K_mm = None if operator.symmetric else operator.center_matrix()
        self.coupled = K_mm is not None and not loss.diagonal_hessian  # the softmax on centers: see below
        if K_mm is not None:  # small and where CG's steps are not to be trusted: dense steps (see there)
            steps.dense = _dense_newton.features(operator, K_mm, k, alpha, self.coupled,
                                                 center_jitter(operator, K_mm))
            # CG's factors only for CG's steps; dense steps read the penalty as |B|^2, exactly (|T A|^2
            # rounds by 3% in B's smallest directions)
            steps.centers = center_factors(operator, K_mm) if steps.dense is None else (K_mm, None, None)
        else:  # a tiny full model below the ridge floor: exact dense steps cost what CG's would, and their
            # stop does not move with the BLAS (CG's moved ninefold between OpenBLAS's kernels)
            steps.dense = _dense_newton.features(operator, None, k, alpha, not loss.diagonal_hessian, 0.0)
        # a warm-started fit on the same matrix keeps the last one's preconditioner: any preconditioner
        # leaves CG's solution unchanged (a stale factor is applied with the weights it was made for)
        self.state = settings.reuse if operator.symmetric else None
        if self.state is not None and self.state.get("shape") == (n, k):
            steps.L, steps.factors, steps.weights, steps.shifts, steps.inverses = self.state["preconditioner"]
        penalty_factor = None if K_mm is None else steps.centers[1] if steps.dense is None else steps.dense[2]
        self.objective = Objective(loss, Y, w, alpha, T=penalty_factor)
        # the softmax takes exact Newton steps (the Hessian is coupled, not diagonal) on centers (coupled,
        # above), and for the full model where its preconditioner can follow (see COUPLED_MAX_CONDITION)
        full_coupled = K_mm is None and not loss.diagonal_hessian and steps.dense is None
        ratio = _coupling_ratio(operator, w, k, settings, steps) if full_coupled else np.inf
        started = _subsample_applies(operator, Y, w, settings)  # exact steps from near the optimum pay longer
        self.coupled_full = ratio <= (STARTED_MAX_CONDITION if started else COUPLED_MAX_CONDITION)
        if self.coupled_full and ratio <= HALF_RANK_MAX_CONDITION:  # a large ridge hides K's smaller eigenvalues
            steps.rank = max(steps.L.shape[1] // 2, min(steps.L.shape[1], MIN_LANDMARKS))  # half the landmarks do
        # the second-order model is the true one
        self.exact_model = loss.diagonal_hessian or self.coupled or self.coupled_full or steps.dense is not None
        self.b0, self.value0 = self.objective.baseline(settings.fit_intercept)
        self.rounding = RoundingCheck(operator, w, loss, self.value0)
        # a start near the optimum pays where the steps converge quadratically: the diagonal model's
        # steps converge linearly, and from there take exact CG runs from the first step (letter at C=4
        # with diagonal-model steps: 75 s against 63 s)
        start = _subsample_start(operator, Y, w, settings) if started and self.exact_model else None
        self._start(start)
        self.restartable = settings.coef_init is not None or start is not None
        self.log = IterateLog()
        self.previous = []  # the last steps taken: (D, db, K D), newest first
        self.converged, self.reason, self.it = False, None, 0
        self.decrement = self.accepted_decrement = np.inf
        self.damped = False
        self.noisy_run = 0  # accepted iterates in a row whose predictions are rounding
        self.inner_tol = steps.exact_tol = min(settings.tol, 1e-3)  # the full model's exact steps: relative to B
        # Inexact steps until a stopping test passes, which an exact step then retakes; the full
        # model's diagonal-model softmax steps are inexact only until the first full step (letter,
        # 16,000 rows: 74 s against 121 s with every step exact, 127 s with later steps at a forcing term of 0.01).
        self.exact = not self.value0 > 0 or steps.dense is not None
        self.tighten = 1.0  # SOLVED_RETIGHTEN while a step is retaken (see _iterate)
        self.moved_decrement = np.inf  # the decrement of the last accepted step whose CG run iterated
        self.exact_KA = None  # K A computed exactly at a convergence (exact_state)
        self.resumed = 0  # convergences found drifted, from which the fit went on
        # A stop without descent converges only if the last step taken predicted almost no further decrease
        # (none taken: failure); float32's rounding of the objective blurs decrements below about 1e3 eps of
        # it, float64's far less
        self.near = NO_DESCENT_NEAR[np.dtype(operator.dtype).name]

    def _start(self, start):
        """The first iterate: a warm start, a subsample's fit, or the intercept-only optimum."""
        settings, steps, Y, k = self.settings, self.steps, self.Y, self.k
        # the tiny full model's dense steps ignore a warm start: from saturated predictions (coefficients
        # scaled by 1e6, features of 1e6) a dense step landed where its decrement passed 0.7% above the
        # optimum, silently; a cold start costs a few exact steps of a few milliseconds
        if settings.coef_init is not None and not (self.operator.symmetric and steps.dense is not None):
            A = copy(settings.coef_init)
            b = copy(settings.intercept_init) if settings.fit_intercept else zeros(Y, k)
            if steps.dense is not None:  # dense steps move A in K_mm's resolved span only: start there
                Z, _, penalty_map = steps.dense
                A = Z @ (penalty_map @ A)
            self.A, self.b, self.KA = A, b, self.operator.matvec(A)
        elif start is not None:  # a subsample's fit, where it beats the intercept-only model
            self.A, self.b, self.KA = start
        else:  # the intercept-only optimum: the model every step must improve on
            self._intercept_only()
            return
        self.value = self.objective.value(self.A, self.KA, self.b)
        if start is not None and not self.value < self.value0:
            self._intercept_only()

    def _intercept_only(self):
        self.A, self.b, self.KA = zeros(self.Y, (self.operator.m, self.k)), copy(self.b0), zeros(self.Y, (self.n, self.k))
        self.value = self.objective.value(self.A, self.KA, self.b)

    def inner(self, U, KV):
        """<U, V>_H summed over columns, given K V (or V itself with centers: as the objective's
        penalty, through T'T = K_mm + jitter, which huge coefficients on a rank-deficient K_mm feel)."""
        if self.K_mm is None:
            return total_of(U, KV)
        T = self.objective.T
        return total_of(blas_dot(T, U), blas_dot(T, KV))

    def pair(self, U, V, KV):
        """<U, V>_H given V and K V (whichever the model's norm needs)."""
        return self.inner(U, KV if self.K_mm is None else V)

    # ------------------------------------------------------------------ stopping tests

    def exact_state(self):
        """At a convergence, K A recomputed exactly: whether the running K A agrees with it to what the
        convergence test resolves. It can drift by the rounding of huge, cancelling coefficients (a
        linear kernel on features of 1e4 without ridge "converged" at 7.7e-7, its exact objective 0.51):
        the fit then stops with a warning, its best iterate judged by exact objectives."""
        KA_exact = self.operator.matvec(self.A)
        value_exact = self.objective.value(self.A, KA_exact, self.b)
        rounding = DRIFT_EPS * np.finfo(self.operator.dtype).eps * (abs(self.value) + self.value0)
        resolution = max(self.settings.tol**2 * self.value0, rounding)
        agrees = abs(value_exact - self.value) <= resolution
        self.KA, self.value, self.exact_KA = KA_exact, value_exact, KA_exact
        return agrees

    def restart(self):
        """A start given to the solver (a warm start, a subsample's fit) where no direction descends,
        or the steps converge, before any iterate beats the intercept-only model (saturated
        predictions: a warm start's coefficients scaled up) is left for that model, once: whether it was."""
        if not self.restartable or self.log.best_value < self.value0:
            return False
        self.restartable, self.tighten, self.previous = False, 1.0, []
        self._intercept_only()
        self.steps.inner_cap = self.settings.max_iter
        return True

    def settle(self):
        """Where a stopping test passes: whether the fit stops there, converged or drifted. It goes on
        from the intercept-only model (``restart``), or from the exact K A after a drift, up to
        ``DRIFT_RESUMES`` times."""
        if self.restart():
            return False
        self.converged = self.exact_state()
        if not self.converged and self.resumed < DRIFT_RESUMES:
            self.resumed += 1
            return False
        self.reason = None if self.converged else Stop.DRIFT
        return True

    def confirm_exactly(self):
        """Where the softmax's diagonal model stops: whether the fit goes on with exact steps instead.

        That model converges linearly and its decrement understates what is left (5 classes at alpha
        1e-9: 5e-4 of the objective); exact steps converge quadratically from there (they take a
        ridge, no damping), on a tiny system formed densely (CG's residual on a rank-two linear
        kernel of entries ~1e6 passed a point 0.36% above the optimum, silently).
        """
        if self.exact_model or self.K_mm is not None or not self.alpha > 0 or self.steps.damping:
            return False
        self.steps.dense = _dense_newton.features(self.operator, None, self.k, self.alpha, True, 0.0, confirm=True)
        self.coupled_full = self.exact_model = self.exact = True
        return True

    def stop_without_descent(self):
        """Where no direction descends: whether the fit stops (``Stop.NO_DESCENT``, or ``Stop.DRIFT`` once
        ``DRIFT_RESUMES`` are spent). The softmax's diagonal model goes on with exact steps
        (``confirm_exactly``); otherwise the exact K A decides: from running products that had
        drifted, their objective an understatement, the fit goes on."""
        # (only where the stop would count as convergence: a stop that warns stays one, rather than
        # exact steps that cannot resolve what rounding hides, as near-duplicate rows at a tiny ridge)
        if self._nearly_converged() and self.confirm_exactly():
            return False
        if self.exact_state():
            self.reason = Stop.NO_DESCENT
            return True
        if self.resumed < DRIFT_RESUMES:
            self.resumed += 1
            return False
        self.reason = Stop.DRIFT
        return True

    def _nearly_converged(self):
        """Whether the last full step predicted almost no further decrease (see ``near``)."""
        return self.settings.tol > 0 and self.accepted_decrement <= self.near * self.settings.tol**2 * self.value0

    def failed(self, exact_solved, n_inner, loose):
        """After a direction that does not descend, or along which no step decreases the objective:
        whether the fit stops. In order: a dense step's small decrement is convergence; a damped or
        truncated direction is retried with more damping or a shorter CG run; a loose step is
        retaken exactly, an exact one once more tightly; a given start gives way to the
        intercept-only model; else the fit stops without descent."""
        steps = self.steps
        if exact_solved:
            return self.settle()
        if _shorten(steps, n_inner):
            return False
        if loose:
            self.exact = True
            return False
        if self.exact_model and self.tighten == 1.0 and not steps.damping and steps.dense is None:  # retaken tighter
            self.tighten = SOLVED_RETIGHTEN
            return False
        if self.restart():
            return False
        return self.stop_without_descent()

    # ------------------------------------------------------------------ the steps

    def run(self):
        while self.it < self.settings.max_iter:
            self.it += 1
            if self._iterate():
                break
        self.report()
        if self.state is not None:
            steps = self.steps
            self.state["shape"] = (self.n, self.k)
            self.state["preconditioner"] = (steps.L, steps.factors, steps.weights, steps.shifts, steps.inverses)
        return finish("newton", self.operator, self.Y, self.w, self.settings, self.A, self.b, self.log, self.it,
                      self.converged, None, self.objective, KA=self.exact_KA if self.exact_KA is self.KA else None)

    def _hessian(self, F):
        """The loss's Hessian diagonal at F, floored at ``HESSIAN_FLOOR`` of each column's largest."""
        H = self.loss.hessian_diagonal(F, self.w)
        xp = self.xp
        floor = HESSIAN_FLOOR * clip_min(xp.max(H, axis=0), float(np.finfo(float).tiny))
        return xp.maximum(H, xp.broadcast_to(floor, H.shape))

    def _iterate(self):
        """One step: its direction, line search and stopping tests; whether the fit stops."""
        steps, settings = self.steps, self.settings
        steps.exact_tol = self.inner_tol * self.tighten
        # Inexact Newton: far from the optimum a loose solve points as well as an exact one; the
        # softmax's steps, from a diagonal model, converge linearly however exactly they are solved.
        if self.exact:
            steps.inner_tol = self.inner_tol * self.tighten
        else:
            forcing = min(FORCING_MAX, np.sqrt(self.decrement / self.value0)) if self.exact_model else FORCING_MAX
            steps.inner_tol = max(self.inner_tol, forcing)
        loose = steps.loose = steps.inner_tol > self.inner_tol
        F = self.KA + self.b
        G = self.loss.gradient(F, self.Y, self.w)
        H = self._hessian(F)
        if self.K_mm is None and steps.dense is None:  # damping where the model is (nearly) singular: see _damping
            steps.damping = _damping(steps, self.operator, H, self.alpha)
        # saturated predictions (every row fitted with certainty) leave H at underflow: the diagonal
        # model's sums overflow there, a direction that fails below as no descent, without warnings
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            A_new, b_new, KA_new, n_inner = _direction(
                self.operator, F, G, H, self.A, self.KA, self.b, settings, steps, self.loss, self.w, self.coupled,
                self.coupled_full, self.K_mm)
        if steps.unfloored and steps.status != "converged":  # alpha's own system is beyond CG: the floor's
            self.it -= 1                                          # converged fit stands, with its warning
            steps.floored = self.converged = True
            return True
        if n_inner == 0:  # the iterate already solves the system: rounding noise is no step (only b may move)
            A_new, KA_new = self.A, self.KA
        # an exact step's CG run that stops before its first iteration: the coefficients' Newton step
        # is below CG's tolerance (after a quadratically convergent step, with a decrement above tol's)
        solved = n_inner == 0 and self.exact_model and not loose and not steps.damping
        if n_inner == 0 and self.tighten == 1.0 and settings.tol > 0 and self.moved_decrement > settings.tol * self.value0:
            # right after a decrement that large, Newton's quadratic convergence cannot have finished:
            # CG's tolerance, relative to a right-hand side that holds the predictions, passed an
            # iterate that is not the optimum (its decrement, the intercepts' alone, would pass as
            # convergence). Retake the step with CG held to a tighter tolerance.
            self.it -= 1
            self.tighten = SOLVED_RETIGHTEN
            return False
        D, KD = A_new - self.A, KA_new - self.KA
        db = (b_new - self.b) if settings.fit_intercept else zeros(self.Y, self.k)
        slope = self._slope(G, D, KD, db)
        self.decrement = max(-slope, 0.0)
        if slope >= 0 and solved:  # nor may the intercepts move: the iterate is the optimum
            self.it -= 1
            return self.settle()
        # a dense step is the exact Newton step: its decrement within tol is convergence, whatever the
        # line search makes of a decrease at the objective's rounding
        exact_solved = steps.dense is not None and settings.tol > 0 and self.decrement <= settings.tol**2 * self.value0
        if slope >= 0:  # not a descent direction: never convergence
            self.it -= 1
            return self.failed(exact_solved, n_inner, loose)
        if not self.exact_model:
            D, db, KD, slope = _subspace_step(self.loss, F, self.Y, self.w, G, self.alpha, self.pair, self.A,
                                              self.KA, (D, db, KD, slope), self.previous)
        step, trial = self._line_search(D, db, KD, slope)
        if trial is None:
            self.it -= 1
            return self.failed(exact_solved, n_inner, loose)
        self._take(step, trial, (D, db, KD), n_inner, loose)
        return self._stops(solved, step, loose)

    def _slope(self, G, D, KD, db):
        """The objective's directional derivative along the step (inf where it overflowed: no descent)."""
        with np.errstate(over="ignore", invalid="ignore"):
            slope = total_of(G, KD + db)  # directional derivative of the loss part
            if self.alpha:
                slope += 2.0 * self.alpha * self.inner(D, self.KA if self.K_mm is None else self.A)
        return slope if np.isfinite(slope) else np.inf

    def _line_search(self, D, db, KD, slope):
        """Backtracking to Armijo's decrease: ``(step, (A, b, KA, value))``, the trial None where none decreases."""
        step = 1.0
        for _ in range(MAX_HALVINGS):
            A_t, b_t, KA_t = self.A + step * D, self.b + step * db, self.KA + step * KD
            value_t = self.objective.value(A_t, KA_t, b_t)
            if np.isfinite(value_t) and value_t <= self.value + ARMIJO * step * slope:
                return step, (A_t, b_t, KA_t, value_t)
            step /= 2
        return step, None

    def _take(self, step, trial, direction, n_inner, loose):
        """Accept the line search's iterate: the step's bookkeeping, the log and the callback."""
        steps, settings = self.steps, self.settings
        # a damped step's decrement (what its full step predicted) is no evidence of convergence: the
        # second-order model failed along it. An exact step's CG run, held to a tolerance relative to a
        # right-hand side that holds the predictions, can point badly (a degree-3 polynomial softmax
        # stuck 0.04 above its optimum at steps of 1e-7): the steps after a damped one, and a failed
        # exact direction before the fit gives up, are solved SOLVED_RETIGHTEN times tighter.
        # (a decrement at the objective's rounding is damped by that rounding, not by the model)
        self.full = step == 1.0 or self.decrement <= ROUNDING * (abs(self.value) + self.value0)
        self.accepted_decrement = self.decrement if self.full else np.inf
        if n_inner:
            self.moved_decrement = self.decrement
        self.tighten = 1.0 if self.full or loose or not self.exact_model or steps.damping else SOLVED_RETIGHTEN
        if steps.damping:  # a full step quarters the damping, a damped one raises it
            steps.lm = max(LM_MIN, steps.lm / 4) if step == 1.0 else min(LM_MAX, steps.lm * 2 / step)
        steps.inner_cap = min(settings.max_iter, 2 * steps.inner_cap)  # a shortened cap grows back
        D, db, KD = direction
        self.previous = [(step * D, step * db, step * KD)] + self.previous[: SUBSPACE_MEMORY - 1]
        self.A, self.b, self.KA, self.value = trial
        self.exact |= self.K_mm is None and step == 1.0 and not self.exact_model  # the softmax: damped phase over
        noisy = self.rounding.dominated(self.A)
        self.noisy_run = self.noisy_run + 1 if noisy else 0
        self.log.record(self.value, self.A, self.b, valid=not noisy)
        if settings.verbose:
            print(f"[newton] iter {self.it:4d}  objective {self.value:.6e}  step {step:.3g}  "
                  f"decrement {self.decrement:.3e}  cg iterations {n_inner}")
        # Every accepted iterate reaches the callback, the last one included.
        self.stop_requested = settings.callback is not None and settings.callback(self.A, self.b)

    def _stops(self, solved, step, loose):
        """After an accepted step: whether the fit stops (converged, or for a ``Stop`` reason)."""
        steps, settings, decrement = self.steps, self.settings, self.decrement
        threshold = settings.tol**2 * self.value0
        below_rounding = decrement <= ROUNDING * (abs(self.value) + self.value0)
        # A loose step's decrement is only an estimate: confirm it with an exact step, unless the model is
        # the true second-order one and the estimate has a margin (its CG residual, at most FORCING_MAX
        # relative, errs by far less than CONFIRM_MARGIN; the confirming step cost 30-50% of a fit)
        confirmed = self.exact_model and self.full and decrement <= CONFIRM_MARGIN * threshold
        if loose and not confirmed and (decrement <= threshold or below_rounding):
            self.exact = True
            return False
        self.damped = bool(steps.damping) and steps.lm > LM_MIN  # its decrement understates Newton's
        if solved or settings.tol > 0 and decrement <= threshold and not self.damped:
            if steps.floored and self.alpha > 0 and not steps.unfloored:
                # the floor's steps are shorter than Newton's, their decrement an understatement:
                # confirm (or go on) with steps at 2 alpha itself, the floor only preconditioning
                steps.unfloored = True
                return False
            if self.confirm_exactly():
                return False
            if solved or self.full:
                if self.settle():
                    return True
                if self.stop_requested:  # the fit went on (settle), but the callback asked it to stop
                    self.reason = Stop.CALLBACK
                    return True
                return False
        if below_rounding:  # below what float64 can resolve
            self.reason = Stop.ROUNDING
        elif self.noisy_run >= NOISY_PATIENCE:
            self.reason = Stop.NOISE
        elif self.stop_requested:
            self.reason = Stop.CALLBACK
        return self.reason is not None

    # ------------------------------------------------------------------ the outcome

    def report(self):
        """The warning of the stop: each ``Stop`` reason's, or max_iter's; ``converged`` where no descent
        was left after a step that predicted almost none."""
        settings, operator, it, alpha, reason = self.settings, self.operator, self.it, self.alpha, self.reason
        if reason is Stop.NO_DESCENT and self.damped:
            if alpha > 0:  # a ridge the kernel's scale makes negligible (see _damping)
                what = (f"alpha={alpha:g} is negligible against the kernel's values (up to "
                        f"{float(self.xp.max(operator.diag())):.3g}): its steps, damped as without a ridge, no "
                        "longer decrease the objective (rounding)")
                fix = "Scale the features (for example with StandardScaler), or increase alpha."
            else:
                what = ("without ridge (alpha=0) the loss has no minimiser it can reach, and its Newton steps no "
                        "longer decrease it (rounding)")
                fix = "Set alpha > 0 (for example alpha='auto')."
            warn_not_converged("newton", f"stopped at iteration {it}: {what}",
                               "The model is the best iterate seen. " + fix)
        elif reason is Stop.NO_DESCENT and not self._nearly_converged():
            warn_rounding(
                settings, "newton", f"stopped at iteration {it}: the Newton direction no longer decreases the "
                "objective (rounding)", "The model is the best iterate seen. Increase alpha"
                + (" or use options={'dtype': 'float64'}." if operator.dtype == np.float32 else "."),
            )
        elif reason is Stop.NO_DESCENT:
            self.converged = True
        elif reason is Stop.ROUNDING:
            warn_rounding(
                settings, "newton", f"stopped at iteration {it} for lack of progress: the predicted decrease is "
                f"at the level of rounding, above tol={settings.tol:g}",
                "The model is the best iterate seen; a larger tol suffices.",
            )
        elif reason is Stop.DRIFT:
            warn_rounding(
                settings, "newton", f"stopped at iteration {it}: its running predictions K A had drifted from "
                "the exact ones by rounding (huge coefficients that cancel)", "The best iterate seen, by its "
                "exact objective, is returned. Scale the features, or increase alpha.",
            )
        elif reason is Stop.NOISE:
            precision = np.dtype(operator.dtype).name
            warn_rounding(
                settings, "newton", f"stopped at iteration {it}: the predictions of its last {NOISY_PATIENCE} "
                f"iterates are dominated by the rounding of {precision} kernel values (the coefficients are "
                "too large for this precision)", "The best iterate whose predictions are not is returned (the "
                "intercept-only model if none is). Increase alpha"
                + (" or use options={'dtype': 'float64'}." if precision == "float32" else "."),
            )
        elif not self.converged and reason is None and settings.tol > 0:
            warn_not_converged(
                "newton", f"did not converge in max_iter={settings.max_iter} iterations",
                "Increase max_iter or alpha.",
            )
        if self.steps.floored and alpha > 0:  # the decrement then understates what is left, as "cg" says
            warn(
                f"alpha={alpha:.3g} is below the smallest ridge solver 'newton' resolves on these centers "
                f"({CENTERS_MIN_RIDGE:g} times the mean of k(c, c), in the Hessian's scale); its steps were "
                "shortened to that ridge (CG did not resolve steps at alpha itself), and the fit may stop short "
                "of the minimiser. Scale the features (a linear kernel, or a polynomial one at a fixed sigma, "
                "grows with their scale), or increase alpha.",
            )


def _damping(steps, operator, H, alpha):
    """The Levenberg-Marquardt damping of the full model's Newton step (0 where the ridge suffices).

    Without ridge (alpha below ``LM_ALPHA`` times the weighted kernel's
    trace) the diagonal model is singular: its minimiser interpolates the
    working targets, as far as the rbf kernel's conditioning allows, and is
    no usable step. Adding ``damping * |x - x0|^2`` makes the model strictly
    convex, its minimiser a descent direction of any length the line search
    can trust; the damping shrinks after full steps and grows after damped
    ones, relative to the trace. A fit without ridge then decreases the loss
    towards its infimum (0 on separable data) until max_iter.
    """
    scale = float(xp_of(H).max(operator.diag() @ H))
    if not 2.0 * alpha < LM_ALPHA * scale:
        return 0.0
    lm = steps.lm
    return max(lm * scale, 2.0 * alpha)


def _shorten(steps, n_inner):
    """After a failed direction: whether to retry, with more damping or a shorter CG run.

    A damped model is damped further (up to ``LM_MAX``).
    A CG run that stopped unconverged (its cap, or conjugacy lost) on an
    ill-conditioned system, as with alpha = 0, can return a direction that
    is no descent in rounding; its earlier iterates are descent directions
    (truncated Newton). A converged run's failure is rounding at the optimum.
    """
    if steps.damping and steps.lm < LM_MAX:
        steps.lm = min(LM_MAX, 16 * steps.lm)
        return True
    if n_inner <= 1 or steps.status == "converged":
        return False
    steps.inner_cap = max(1, n_inner // 4)
    return True


def _subspace_step(loss, F, Y, w, G, alpha, pair, A, KA, new, previous):
    """The minimiser of the exact second-order model in the span of the latest steps.

    ``new`` is the diagonal model's step ``(D, db, K D, slope)``; with the
    previous steps it spans a subspace in which the model (gradient and
    Hessian from Hessian-vector products in F, no product with K) is exact,
    a preconditioned Krylov-like acceleration. Without previous steps the
    new direction is scaled by the exact curvature along it. Where the
    Hessian is diagonal the new step is already the Newton step. Returns the
    step and its slope; the new step itself where the model is degenerate.
    """
    if loss.diagonal_hessian:
        return new
    steps = [new[:3]] + previous
    E = [KD + db for _, db, KD in steps]  # how each step changes F
    HE = [loss.hessp(F, Y, w, e) for e in E]
    g = np.array([total_of(G, e) for e in E])
    M = np.array([[total_of(e, he) for he in HE] for e in E])
    if alpha:
        g += 2.0 * alpha * np.array([pair(D, A, KA) for D, _, _ in steps])
        M += 2.0 * alpha * np.array([[pair(Di, Dj, KDj) for Dj, _, KDj in steps] for Di, _, _ in steps])
    M = (M + M.T) / 2
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(g))):
        return new
    eigenvalues = np.linalg.eigvalsh(M)
    while len(steps) > 1 and not eigenvalues[0] > 1e-12 * eigenvalues[-1] > 0:
        steps, g, M = steps[:-1], g[:-1], M[:-1, :-1]  # drop the oldest until the model is well posed
        eigenvalues = np.linalg.eigvalsh(M)
    if len(steps) == 1:
        if not M[0, 0] > 0:
            return new
    t = np.linalg.solve(M, -g)
    combined = tuple(sum(float(ti) * part for ti, part in zip(t, parts)) for parts in zip(*steps))
    slope = float(g @ t)
    return (*combined, slope) if slope < 0 else new
