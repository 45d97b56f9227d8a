"""Solver "newton": damped Newton steps for smooth losses, each solved by solver "cg".

For a loss with gradient ``G`` and diagonal Hessian ``h`` in the predictions
``F``, the second-order model of the objective at ``F`` is

    1/2 sum_i h_i (f'_i - z_i)^2 + alpha ||f'||_H^2 + const,   z = F - G / h,

a weighted kernel ridge problem (iteratively reweighted least squares). Its
minimiser, found by the preconditioned conjugate gradient of solver "cg"
with weights ``h / sum(h)`` (so the Nystroem or FALKON preconditioner is
rebuilt for the Hessian weights), gives the Newton direction, and a
backtracking line search on the true objective gives the step. For the
binary logistic loss this is Newton's method. For the softmax, whose
Hessian couples the classes, each class uses its own diagonal ``w p_c (1 -
p_c)``: a positive definite approximation, so the direction still descends
and the line search keeps every step a decrease, but convergence is only
linear (solver="auto" therefore uses "gd" for the softmax on all points,
and "newton" with centers).

The fit stops when the Newton decrement (the objective decrease the model
predicts) is at most ``tol**2`` times the intercept-only objective.
"""

import warnings

import numpy as np

from . import cg
from .._losses import SquaredLoss
from ._common import IterateLog, SolverSettings, baseline, finish, warn_not_converged

# Hessian weights are floored at this fraction of the largest: a point the
# model already fits with certainty still gets a (tiny) weight.
HESSIAN_FLOOR = 1e-10
ARMIJO = 1e-4
# A predicted decrease below this fraction of the objective is rounding.
ROUNDING = 64 * np.finfo(float).eps
MAX_HALVINGS = 30


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
    loss = settings.loss
    n, k = Y.shape
    m = operator.m
    alpha = settings.alpha
    K_mm = None if operator.symmetric else operator.center_matrix()

    # ||f||_H^2 of a model on centers is beta' K_mm beta (finish takes it too)
    center_penalty = None if K_mm is None else (lambda coef: np.einsum("ij,ij->", coef, K_mm @ coef))

    def penalty_terms(A, KA):
        """||f||_H^2 summed over columns."""
        return float(np.einsum("ij,ij->", A, KA) if center_penalty is None else center_penalty(A))

    def objective(A, KA, b):
        return loss.value(KA + b, Y, w) + (alpha * penalty_terms(A, KA) if alpha else 0.0)

    b0, value0 = baseline(Y, w, settings.fit_intercept, loss)
    if settings.coef_init is not None:
        A = settings.coef_init.copy()
        b = settings.intercept_init.copy() if settings.fit_intercept else np.zeros(k)
        KA = operator.matvec(A)
    else:  # the intercept-only optimum: the model every step must improve on
        A, b, KA = np.zeros((m, k)), b0.copy(), np.zeros((n, k))
    value = objective(A, KA, b)
    log = IterateLog()
    cache = {}  # the centers' factors, shared by every step's solve
    converged, reason, it = False, None, 0
    decrement = np.inf
    while it < settings.max_iter:
        it += 1
        F = KA + b
        G = loss.gradient(F, Y, w)
        H = loss.hessian_diagonal(F, w)
        A_new, b_new = np.empty_like(A), np.empty_like(b)
        for c in range(k):  # the weighted ridge problem of each column
            h = np.maximum(H[:, c], HESSIAN_FLOOR * max(H[:, c].max(), np.finfo(float).tiny))
            z = F[:, c] - G[:, c] / h
            inner = SolverSettings(
                alpha=2.0 * alpha / h.sum(), max_iter=settings.max_iter, tol=min(settings.tol, 1e-3),
                fit_intercept=settings.fit_intercept, psd=settings.psd, kernel_name=settings.kernel_name,
                random_state=settings.random_state, memory_budget=settings.memory_budget, loss=SquaredLoss,
                cache=cache,
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a loose inner solve is still a descent direction
                result = cg.solve(operator, z[:, None], h / h.sum(), inner)
            A_new[:, c], b_new[c] = result.dual_coef[:, 0], result.intercept[0]
        D, db = A_new - A, (b_new - b) if settings.fit_intercept else np.zeros(k)
        KD = operator.matvec(D)
        slope = float(np.einsum("ij,ij->", G, KD + db))  # directional derivative of the loss part
        if alpha:
            cross = np.einsum("ij,ij->", D, KA) if K_mm is None else np.einsum("ij,ij->", D, K_mm @ A)
            slope += 2.0 * alpha * float(cross)
        decrement = max(-slope, 0.0)
        if slope >= 0:  # no descent left: the inner solves are at rounding level
            reason = "no_descent"
            it -= 1
            break
        step, accepted = 1.0, False
        for _ in range(MAX_HALVINGS):
            A_t, b_t, KA_t = A + step * D, b + step * db, KA + step * KD
            value_t = objective(A_t, KA_t, b_t)
            if np.isfinite(value_t) and value_t <= value + ARMIJO * step * slope:
                accepted = True
                break
            step /= 2
        if not accepted:
            reason = "no_descent"
            it -= 1
            break
        A, b, KA, value = A_t, b_t, KA_t, value_t
        log.record(value, A, b)
        if settings.verbose:
            print(f"[newton] iter {it:4d}  objective {value:.6e}  step {step:.3g}  decrement {decrement:.3e}")
        if settings.tol > 0 and decrement <= settings.tol**2 * value0:
            converged = True
            break
        if decrement <= ROUNDING * (abs(value) + value0):  # below what float64 can resolve
            reason = "rounding"
            break
        if settings.callback is not None and settings.callback(A, b):
            reason = "callback"
            break

    if reason == "no_descent" and not (settings.tol > 0 and decrement <= 1e3 * settings.tol**2 * value0):
        warn_not_converged(
            "newton", f"stopped at iteration {it}: the Newton direction no longer decreases the "
            "objective (rounding)", "The model is the best iterate seen. Increase alpha or use options={'dtype': 'float64'}.",
        )
    elif reason == "no_descent":
        converged = True
    elif reason == "rounding":
        warn_not_converged(
            "newton", f"stopped at iteration {it} for lack of progress: the predicted decrease is at "
            f"the level of rounding, above tol={settings.tol:g}", "The model is the best iterate seen; a larger tol suffices.",
        )
    elif not converged and reason is None and settings.tol > 0:
        warn_not_converged(
            "newton", f"did not converge in max_iter={settings.max_iter} iterations",
            "Increase max_iter or alpha.",
        )
    return finish("newton", operator, Y, w, settings, A, b, log, it, converged, None, center_penalty)

