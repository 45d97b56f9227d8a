"""Solver "gd": plain gradient descent on the dual coefficients.

For ``L = sum_i w_i (f(x_i) - y_i)^2 + alpha ||f||_H^2`` with ``f = K a + b``, each iteration from the
intercept-only optimum (``a = 0``) applies

    a_i <- a_i - eta * (2 w_i (f(x_i) - y_i) + 2 alpha a_i)
    b   <- b   - eta * sum_i 2 w_i (f(x_i) - y_i)          (fit_intercept)

primal gradient descent carried out through the kernel. One product ``K @ g`` per iteration gives
both the next ``K a`` and the primal gradient's norm ``||grad L||^2 = g'K g + (sum_i g_i)^2``; the fit
stops when it is at most ``tol`` times its value at the intercept-only model, a scale-free test that a
warm start from a converged model passes at once.
"""


import numpy as np

from ._common import (
    ROUNDING_EPS,
    IterateLog,
    NonPSDKernelWarning,
    baseline,
    finish,
    stable_step_bound,
    warn_not_converged,
    warn_rounding,
)
from .._array_api import copy_array, scalar_sum, xp_of, zeros_as
from .._warnings import warn
from ._objective import Objective

# What this solver minimises: its losses, and its models (all points as centers, or n_centers).
LOSSES = {"squared", "logistic"}
MODELS = {"full"}

# Safety factor on the stable bound for step_size="auto".
AUTO_STEP_FRACTION = 0.9
# Iterations without a new best objective before stopping for lack of progress.
NO_PROGRESS_PATIENCE = 10


def _step_error(eta, it, bound):
    return ValueError(
        f"step_size={eta:.6g} is too large: gradient descent diverged at "
        f"iteration {it}. The stable bound for this data is step_size < "
        f"{bound:.6g}; use a smaller step_size or step_size='auto'."
    )


def gradient_norm2(G, KG, gb):
    """``||grad L||^2`` of the primal from the dual gradient G, K G and the intercept's gradient."""
    value = scalar_sum(G, KG)
    if gb is not None:
        value += scalar_sum(gb**2)
    return max(value, 0.0)


def reference_gradient_norm2(operator, Y, w, settings):
    """``||grad L||^2`` at the intercept-only model: the scale of the stopping test; 0 where it is
    at the rounding of the zero model's (``ROUNDING_EPS``: a constant target, whose intercept-only
    model every iterate can only round), and the fit converges at its start."""
    b0, _ = baseline(Y, w, settings.fit_intercept, settings.loss)
    xp = xp_of(Y)
    G0, G_zero = (settings.loss.gradient(xp.broadcast_to(b, Y.shape), Y, w) for b in (b0, zeros_as(Y, Y.shape[1])))
    GG = operator.matvec(xp.concat([G0, G_zero], axis=1))
    t = Y.shape[1]
    ref2 = gradient_norm2(G0, GG[:, :t], xp.sum(G0, axis=0) if settings.fit_intercept else None)
    zero2 = gradient_norm2(G_zero, GG[:, t:], xp.sum(G_zero, axis=0) if settings.fit_intercept else None)
    return 0.0 if ref2 <= (ROUNDING_EPS * np.finfo(np.float64).eps) ** 2 * zero2 else ref2


def solve(operator, Y, w, settings):
    """Run the update; see the module docstring.

    Parameters
    ----------
    operator : KernelOperator
    Y : ndarray of shape (n_samples, n_targets)
    w : ndarray of shape (n_samples,)
        Sample weights summing to 1.
    settings : SolverSettings

    Returns
    -------
    SolverResult
    """
    n, n_targets = Y.shape
    alpha = settings.alpha
    loss = settings.loss
    if settings.step_size == "auto":
        eta = AUTO_STEP_FRACTION * stable_step_bound(operator, w, alpha, settings.fit_intercept, loss.curvature)
        if not np.isfinite(eta):  # K = 0 and no ridge: any step is stable
            eta = 1.0
    else:
        eta = float(settings.step_size)

    xp = xp_of(Y)
    A = zeros_as(Y, (n, n_targets)) if settings.coef_init is None else copy_array(settings.coef_init)
    # a cold start is the intercept-only optimum, the model every iterate must beat: from b = 0 the
    # intercept's steps, limited by the ridge (eta ~ 1 / alpha), left it unconverged for thousands
    b = copy_array(settings.intercept_init) if settings.intercept_init is not None else baseline(
        Y, w, settings.fit_intercept, loss)[0]
    if not settings.fit_intercept:
        b = zeros_as(Y, n_targets)
    KA = xp.zeros_like(A) if settings.coef_init is None else operator.matvec(A)
    ref2 = reference_gradient_norm2(operator, Y, w, settings)
    log = IterateLog()
    objective = Objective(loss, Y, w, alpha)
    previous = objective.value(A, KA, b)
    converged, reason = not ref2 > 0 and settings.coef_init is None, None  # converged: a stationary start
    report_every = max(1, settings.max_iter // 10) if settings.verbose < 2 else 1

    it = 0
    while it < settings.max_iter and not converged:
        G = loss.gradient(KA + b, Y, w)  # 2 w_i (f(x_i) - y_i) for the squared loss
        gb = xp.sum(G, axis=0)
        if alpha:
            G = G + 2.0 * alpha * A
        it += 1
        if settings.fit_intercept:
            b -= eta * gb
        A -= eta * G
        KA_prev, KA = KA, operator.matvec(A)
        # K G = (K a_old - K a_new) / eta: the gradient norm at the previous
        # iterate for free (its cancellation is harmless down to tol ~ 1e-6).
        grad2 = gradient_norm2(G, (KA_prev - KA) / eta, gb if settings.fit_intercept else None)
        current = objective.value(A, KA, b)
        if not np.isfinite(current) or current > previous * (1 + 1e-7) + 1e-13 * abs(previous):
            bound = stable_step_bound(operator, w, alpha, settings.fit_intercept, loss.curvature)
            if eta >= bound:
                raise _step_error(eta, it, bound)
            # A stable step can only raise the objective along negative
            # eigenvalues of K: the best iterate so far is returned.
            warn(
                f"Solver 'gd' stopped at iteration {it}: the objective rose although "
                f"step_size={eta:.4g} is below the stable bound, because the "
                f"{settings.kernel_name} kernel matrix is not positive semi-definite. "
                "The best iterate seen is returned; increase alpha or use a PSD kernel.",
                NonPSDKernelWarning,
            )
            A += eta * G  # undo the step: the last iterate is the one before it
            if settings.fit_intercept:
                b += eta * gb
            it -= 1
            reason = "diverged"
            break
        log.record(current, A, b)
        if settings.verbose and (it % report_every == 0 or it == settings.max_iter):
            print(f"[gd] iter {it:6d}  objective {current:.6e}  gradient {np.sqrt(grad2 / max(ref2, 1e-300)):.3e}")
        # Every iterate reaches the callback, the last one included.
        stop_requested = settings.callback is not None and settings.callback(A, b)
        if settings.tol > 0 and grad2 <= settings.tol**2 * ref2:
            converged = True  # the previous iterate passed; this one is better still
            break
        if stop_requested:
            reason = "callback"
            break
        if settings.tol > 0 and log.since_best() >= NO_PROGRESS_PATIENCE:
            reason = "stalled"
            break
        previous = current

    if reason == "stalled":
        warn_rounding(
            settings, "gd", f"stopped at iteration {it} for lack of progress: the objective has not "
            f"decreased for {NO_PROGRESS_PATIENCE} iterations (rounding)",
            "The model is the best iterate seen; a larger tol or options={'dtype': 'float64'} may help.",
        )
    elif not converged and reason is None and settings.tol > 0:
        warn_not_converged(
            "gd", f"did not converge in max_iter={settings.max_iter} iterations (the gradient "
            f"norm is {np.sqrt(grad2 / max(ref2, 1e-300)):.2e} of its value at the intercept-only model, above tol={settings.tol:g})",
            "Increase max_iter, or use a faster solver such as 'cg' or 'eigenpro'.",
        )
    return finish("gd", operator, Y, w, settings, A, b, log, it, converged, eta)
