"""Solver "gd": the gradient descent on the dual coefficients of the notes.

Objective ``L = sum_i w_i (f(x_i) - y_i)^2 + alpha ||f||_H^2`` with
``f = K a + b`` and ``||f||_H^2 = a'K a``. Starting from ``a = 0`` each
iteration applies

    a_i <- a_i - eta * (2 w_i (f(x_i) - y_i) + 2 alpha a_i)
    b   <- b   - eta * sum_i 2 w_i (f(x_i) - y_i)          (fit_intercept)

which is primal gradient descent on ``beta = sum_i a_i phi(x_i)`` carried
out through the kernel. One product ``K @ a`` per iteration.
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._common import NonPSDKernelWarning, SolverResult, objective, stable_step_bound

# Safety factor on the stable bound for step_size="auto".
AUTO_STEP_FRACTION = 0.9


def _diverged(loss, previous, initial):
    # For a stable step the objective of a convex quadratic never increases;
    # allow rounding-level increases only.
    return not np.isfinite(loss) or loss > previous * (1 + 1e-7) + 1e-13 * initial


def _step_error(eta, it, bound):
    return ValueError(
        f"step_size={eta:.6g} is too large: gradient descent diverged at "
        f"iteration {it}. The stable bound for this data is step_size < "
        f"{bound:.6g}; use a smaller step_size or step_size='auto'."
    )


def solve(operator, Y, w, settings):
    """Run the update of the notes; see the module docstring.

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
        eta = AUTO_STEP_FRACTION * stable_step_bound(operator, w, alpha, settings.fit_intercept)
        if not np.isfinite(eta):  # K = 0 and no ridge: any step is stable
            eta = 1.0
    else:
        eta = float(settings.step_size)

    A = np.zeros((n, n_targets)) if settings.coef_init is None else settings.coef_init.copy()
    b = np.zeros(n_targets) if settings.intercept_init is None else settings.intercept_init.copy()
    if not settings.fit_intercept:
        b[:] = 0.0
    KA = np.zeros_like(A) if settings.coef_init is None else operator.matvec(A)
    previous = initial = objective(KA, A, b, Y, w, alpha, loss)
    curve = []
    converged = False
    report_every = max(1, settings.max_iter // 10) if settings.verbose < 2 else 1

    it = 0
    for it in range(1, settings.max_iter + 1):
        A_prev, b_prev = A.copy(), b.copy()
        G = loss.gradient(KA + b, Y, w)  # 2 w_i (f(x_i) - y_i)
        if settings.fit_intercept:
            b -= eta * G.sum(axis=0)
        if alpha:
            G += 2.0 * alpha * A
        A -= eta * G
        KA = operator.matvec(A)
        current = objective(KA, A, b, Y, w, alpha, loss)
        if _diverged(current, previous, initial):
            bound = stable_step_bound(operator, w, alpha, settings.fit_intercept)
            if eta >= bound:
                raise _step_error(eta, it, bound)
            # A stable step can only diverge along negative eigenvalues of K:
            # keep the last iterate before the objective rose.
            warnings.warn(
                f"Gradient descent stopped at iteration {it}: the objective rose "
                f"although step_size={eta:.4g} is below the stable bound, because "
                f"the {settings.kernel_name} kernel matrix is not positive "
                "semi-definite. Increase alpha or use a PSD kernel.",
                NonPSDKernelWarning,
            )
            A, b, it = A_prev, b_prev, it - 1
            break
        curve.append(current)
        if settings.callback is not None and settings.callback(A, b):
            break
        if settings.verbose and (it % report_every == 0 or it == settings.max_iter):
            print(f"[gd] iter {it:6d}  objective {current:.6e}  step_size {eta:.4g}")
        # stop when an update lowers the objective by at most tol times its start
        if settings.tol > 0 and previous - current <= settings.tol * initial:
            converged = True
            break
        previous = current

    else:  # no break: max_iter updates ran
        if settings.tol > 0:
            warnings.warn(
                f"Solver 'gd' did not converge in max_iter={settings.max_iter} "
                f"iterations (objective still falling by more than tol={settings.tol:g} "
                "times its initial value per update). "
                "Increase max_iter, or use a faster solver.",
                ConvergenceWarning,
            )
    return SolverResult(A, b, it, curve, eta, converged)
