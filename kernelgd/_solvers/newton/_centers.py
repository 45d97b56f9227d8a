"""The directions of a model on centers: the diagonal model's and the softmax's exact one.

Both run CG in FALKON's variables (solver "cg"'s preconditioner, weighted
by the Hessian's diagonal), every class in one run; the ridge is ``2 alpha``
floored at ``CENTERS_MIN_RIDGE`` times the mean ``k(c, c)`` in the
Hessian's scale, as solver "cg" floors it, unless ``steps.unfloored``.
"""

from typing import NamedTuple

import numpy as np

from ..._array_api import (
    clip_min, coldot, concat, diagonal, eye, rows_of, take_columns, to_numpy, triangular_dot, triangular_solver, xp_of,
    zeros_as,
)
from .._krylov import ProductTracker, block_pcg
from .._preconditioners import CENTERS_MIN_RIDGE, FalkonPreconditioner, falkon_factor
from ._steps import REFACTOR_CHANGE, REFACTOR_RATIO, Step

# The softmax with an intercept and more classes than this eliminates the intercepts in each CG
# product (two passes over K_nm) rather than precomputing K'H 1's k (k + 1) / 2 columns per step.
PAIR_COLUMNS_MAX_CLASSES = 8
# The softmax's steps precondition each class by a FALKON factor of its own Hessian weights (a class's weights
# lie near its boundaries, far from their mean over the classes) where the k factors cost at most
# CLASS_FACTOR_PASSES products' flops (k 2 m^3 / 3 against 4 n m k: m^2 <= 6 P n) and hold at most
# CLASS_FACTOR_MEMORY of the memory budget; else by one factor of the classes' mean weights.
CLASS_FACTOR_PASSES = 32
CLASS_FACTOR_MEMORY = 0.25


class ClassFactor(NamedTuple):
    """A class's FALKON factor (applied as ``solve(V, trans)``) and the weights and ridge it was made for."""

    solve: object
    weights: object
    ridge: float


def intercept_pinv(WP, P):
    """The pseudo-inverse of ``S = sum_i w_i (diag(p_i) - p_i p_i')``, the intercepts' Hessian: with S's null
    space ``1 / sqrt(k)`` (the softmax's invariance), ``S^+ = (S + c 1 1' / k)^+ - 1 1' / (c k)`` exactly for
    any ``c > 0``, which keeps the rounding of that null eigenvalue from passing for a real one. ``c`` is S's
    mean eigenvalue; the cutoff drops only classes no row gives a probability.
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


def intercept_coupling(operator, WP, P):
    """``K'H 1``, shape (m, k, k): ``[:, :, d] = K'H(1 e_d')``, the gradient's change of the centers'
    coefficients when intercept d moves by one, where ``H(1 e_d') = w p_d (e_d - P)``. From ``K'(w P)``
    and the k (k + 1) / 2 distinct ``K'(w p_c p_d)``, in one pass over K_nm."""
    xp = xp_of(P)
    m, k = operator.m, P.shape[1]
    pairs = np.triu_indices(k)
    KWP = operator.rmatvec(concat([WP, take_columns(WP, pairs[0]) * take_columns(P, pairs[1])], axis=1))
    index = np.zeros((k, k), dtype=np.int64)
    index[pairs[0], pairs[1]] = index[pairs[1], pairs[0]] = np.arange(len(pairs[0]))
    KPP = xp.reshape(take_columns(KWP[:, k:], index.ravel()), (m, k, k))
    return eye(KWP, k)[None, :, :] * KWP[:, None, :k] - KPP


def _center_weights(operator, H, total):
    """D: the centers' Hessian weights averaged over the columns, relative to uniform weights of the same
    total (so that the ridge compares as in solver "cg")."""
    return xp_of(H).mean(_class_weights(operator, H, total), axis=1)


def _class_weights(operator, H, total):
    """Each column's Hessian weights at the centers, relative to uniform weights of the same total."""
    rows = np.arange(operator.m) if operator.center_rows is None else operator.center_rows
    return operator.n * rows_of(H, rows) / total


def class_preconditioner(operator, factors, falkon, H, total, ridge, center, steps, memory_budget):
    """The inverse of each class's block of the softmax's system in FALKON's shared variables, or None where the
    per-class factors do not pay (``CLASS_FACTOR_PASSES``, ``CLASS_FACTOR_MEMORY``). With ``A_c`` FALKON's factor
    of class c's own weights and ridge, ``B'(K'H_c K + r K_mm)B ~ total_c A^-T A_c'A_c A^-1`` for the shared
    ``B = T^-1 A^-1``, so that block's inverse is ``A A_c^-1 A_c^-T A' / total_c``. Factors are kept in ``steps``
    and remade where their weights or ridge moved (``REFACTOR_CHANGE``, ``REFACTOR_RATIO``).
    """
    m, k = operator.m, H.shape[1]
    if m * m > 6 * CLASS_FACTOR_PASSES * operator.n or k * m * m * 8 > CLASS_FACTOR_MEMORY * memory_budget:
        return None
    xp = xp_of(H)
    D = _class_weights(operator, H, total)
    ridges = ridge / np.asarray(to_numpy(total), dtype=np.float64)
    kept = steps.class_factors if steps.class_factors is not None and len(steps.class_factors) == k else [None] * k
    seen = [c for c in range(k) if kept[c] is not None]
    moved = np.full(k, np.inf)  # each kept factor's weights' L1 change, in one read from the device
    if seen:
        moved[seen] = np.asarray(to_numpy(xp.stack(
            [xp.sum(xp.abs(D[:, c] - kept[c].weights)) / xp.sum(kept[c].weights) for c in seen])))
    for c in range(k):
        old = kept[c]
        if (old is None or moved[c] > REFACTOR_CHANGE
                or max(ridges[c] / old.ridge, old.ridge / ridges[c]) > REFACTOR_RATIO):
            A_c = falkon_factor(factors.T, D[:, c], float(ridges[c]), center)
            kept[c] = ClassFactor(triangular_solver(A_c), D[:, c], float(ridges[c]))
    steps.class_factors = kept

    def apply(R):  # R: (m, k), one column per class
        Z = triangular_dot(falkon.A, R, trans=True)
        Z = concat([kept[c].solve(kept[c].solve(Z[:, c : c + 1], trans=True)) for c in range(k)], axis=1)
        return triangular_dot(falkon.A, Z) / total

    return apply


class CentersDiagonal:
    """The diagonal model's minimiser on centers, all columns in one CG run.

    Column c solves ``(K_c' H_c K_c + r_c K_mm) beta = K_c' H_c (z - z_bar)``
    (``K_c`` the ``h_c``-centred K_nm) in FALKON's variables, with one
    preconditioner for every column (a factor per column would cost m^3
    flops per class per step). Warm-started from the current iterate.
    """

    exact = True  # taken for a diagonal Hessian only (the softmax's is CentersCoupled)
    tight = False

    def __init__(self, operator, settings, steps, loss, w):
        self.operator, self.settings, self.steps = operator, settings, steps

    def __call__(self, F, G, H, A, KA, b):
        operator, settings, steps = self.operator, self.settings, self.steps
        n, k = F.shape
        xp = xp_of(F)
        center = settings.fit_intercept
        factors = steps.centers
        total = xp.sum(H, axis=0)
        Z = F - G / H
        z_bar = coldot(H, Z) / total if center else zeros_as(F, k)
        floor = CENTERS_MIN_RIDGE * factors.diag_mean
        ridge = clip_min(floor * total, 2.0 * settings.alpha)  # solver "cg"'s floor, in H's scale
        mean_ridge = float(xp.exp(xp.mean(xp.log(ridge / total))))  # the preconditioner's, floored in any case
        if steps.unfloored:
            ridge = 2.0 * settings.alpha
        steps.floored = not steps.unfloored and 2.0 * settings.alpha < floor * float(xp.max(total))
        falkon = FalkonPreconditioner(factors, _center_weights(operator, H, total), mean_ridge, center)
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
            return apply_Bt(scale * (HK + ridge * factors.kmm_dot(BU)))

        def on_iter(X, step):
            tracker.advance(step)
            return False

        U, n_inner, steps.status = block_pcg(
            apply_A, apply_Bt(scale * KtH[:, :k]), lambda V: V, max_iter=steps.inner_cap, tol=steps.inner_tol,
            tol_from_start=True, tol_b=steps.exact_tol, on_iter=on_iter, x0=falkon.variables(A), tracker=tracker,
        )
        A_new, KA_new = apply_B(U), tracker.KX
        b_new = z_bar - coldot(H, KA_new) / total if center else zeros_as(F, k)
        return Step(A_new, b_new, KA_new, n_inner)


class CentersCoupled:
    """The softmax's exact Newton step on centers, every class in one CG run.

    The Hessian couples the classes row by row (``H_i = w_i (diag(p_i) - p_i p_i')``); eliminating the
    intercepts' step e through ``S = sum_i H_i`` (singular along the softmax's invariance, where the
    right-hand side vanishes) leaves for D the Schur complement

        (K'H K - K'H 1 S^+ 1'H K + R) D = -(K'G + 2 alpha K_mm A) - K'H 1 e0,

    ``R = r K_mm`` (one floored ridge for every class, so D's rows keep summing to zero),
    ``e0 = -S^+ 1'G``. ``K'H 1`` is made once per step (k^2 columns); past ``PAIR_COLUMNS_MAX_CLASSES``
    classes each product is ``K'H (K D - 1 e')`` instead, two passes over K_nm. Each class is scaled by
    its total weight.
    """

    exact = True
    tight = False

    def __init__(self, operator, settings, steps, loss, w):
        self.operator, self.settings, self.steps, self.loss, self.w = operator, settings, steps, loss, w

    def __call__(self, F, G, H_diagonal, A, KA, b):
        operator, settings, steps, w = self.operator, self.settings, self.steps, self.w
        n, k = F.shape
        xp = xp_of(F)
        m = operator.m
        center = settings.fit_intercept
        factors = steps.centers
        P = self.loss.probabilities(F)
        H = w[:, None] * P * (1.0 - P)  # the diagonal, for the preconditioner and the floor
        total = clip_min(xp.sum(H, axis=0), np.finfo(float).tiny)
        floor = CENTERS_MIN_RIDGE * factors.diag_mean
        ridge = max(2.0 * settings.alpha, floor * float(xp.max(total)))
        d = _center_weights(operator, H, total)
        falkon = FalkonPreconditioner(factors, d, float(xp.exp(xp.mean(xp.log(ridge / total)))), center)
        by_class = class_preconditioner(operator, factors, falkon, H, total, ridge, center, steps,
                                        settings.memory_budget)
        if steps.unfloored:
            ridge = 2.0 * settings.alpha
        steps.floored = 2.0 * settings.alpha < ridge
        apply_B, apply_Bt = falkon.apply, falkon.apply_t

        def hess(rows, V):  # H applied row by row to V = the rows' change of F
            P_rows = rows_of(P, rows)
            PV = P_rows * V
            return rows_of(w, rows)[:, None] * (PV - P_rows * xp.sum(PV, axis=1, keepdims=True))

        project = center and k > PAIR_COLUMNS_MAX_CLASSES
        if center:
            WP = w[:, None] * P
            S_pinv = intercept_pinv(WP, P)
            e0 = -(S_pinv @ xp.sum(G, axis=0))
        if project:
            ones = xp.ones_like(G[:, :1])
            # H(1 e0') is the intercept step's change of the gradient: the right-hand side's K'H 1 e0 term
            rhs = -(operator.rmatvec(G + hess(slice(None), ones * e0[None, :]))
                    + 2.0 * settings.alpha * factors.kmm_dot(A))
        else:
            rhs = -(operator.rmatvec(G) + 2.0 * settings.alpha * factors.kmm_dot(A))
        if center and not project:
            KH1 = intercept_coupling(operator, WP, P)
            rhs = rhs - KH1 @ e0

        tracker = ProductTracker(zeros_as(F, (n, k)))

        def operator_D(D):
            if project:  # K'H (K D - 1 e'), e the intercepts' best answer to K D
                KD = operator.matvec(D)
                tracker.record(KD)
                HKD = hess(slice(None), KD)
                e = S_pinv @ xp.sum(HKD, axis=0)
                return operator.rmatvec(HKD - hess(slice(None), ones * e[None, :])) + ridge * factors.kmm_dot(D)
            HK, KD = operator.gram_matvec(D, hess)
            tracker.record(KD)
            out = HK + ridge * factors.kmm_dot(D)
            if center:
                out = out - KH1 @ (S_pinv @ xp.sum(hess(slice(None), KD), axis=0))
            return out

        def zero_sum(Z):  # CG stays where rows sum to zero: the operator's rounding would leave it
            return xp.reshape(Z - xp.mean(Z, axis=1, keepdims=True), (-1, 1))

        def apply_A(u):  # one CG column of m * k entries
            return zero_sum(apply_Bt(operator_D(apply_B(xp.reshape(u, (m, k))))))

        def precondition(r):  # each class by its block (or its weight; see ridge for the zero sums)
            R = xp.reshape(r, (m, k))
            return zero_sum(R / total if by_class is None else by_class(R))

        def on_iter(X, step):
            tracker.advance(step[0])
            return False

        U, n_inner, steps.status = block_pcg(
            apply_A, zero_sum(apply_Bt(rhs)), precondition, max_iter=steps.inner_cap, tol=steps.inner_tol,
            on_iter=on_iter,
        )
        D, KD = apply_B(xp.reshape(U, (m, k))), tracker.KX
        e = (e0 - S_pinv @ xp.sum(hess(slice(None), KD), axis=0)) if center else zeros_as(F, k)
        return Step(A + D, b + e, KA + KD, n_inner)
