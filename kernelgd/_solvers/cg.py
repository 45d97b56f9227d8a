"""Solver "cg": preconditioned conjugate gradient on the ridge system.

The objective ``sum_i w_i (f(x_i) - y_i)^2 + alpha ||f||_H^2`` is minimised through its optimality
conditions, a symmetric positive (semi-)definite linear system.

* All training points as centers (``f = K a + b``): with ``S = W^1/2``,
  ``(Q S K S Q + alpha I) c = Q S y`` and ``a = S c``, where ``Q = I - s s'`` (``s = sqrt(w)``)
  removes the intercept (for any a the best is ``b = w'(y - K a)``): no division, no second
  right-hand side. The preconditioner is ``Q P^-1 Q``, ``P = N + mu I`` with N the Nystroem
  approximation of ``S K S`` on landmarks drawn by randomly pivoted Cholesky (Woodbury, O(n m)).
* m centers (``f = K_nm beta + b``): ``(K_c' W K_c + alpha K_mm) beta = K_c' W y`` with the centred
  ``K_c = (I - 1 w') K_nm``, preconditioned as in FALKON (Rudi et al., 2017) by Cholesky factors of
  ``K_mm = T'T`` and ``T D T' / m + alpha I`` (D the centers' weights ``n w_c``); alpha is at least
  ``CENTERS_MIN_RIDGE`` times the mean ``k(c, c)``. A small system where CG's residual is not to be
  trusted (``_dense_newton.features``) is formed and solved exactly, at alpha itself.

Without ridge, or below ``LEAST_SQUARES_RIDGE`` times the mean ``w_i k(x_i, x_i)``, the full system is
(nearly) singular and, with noisy targets, inconsistent: CG's iterates would grow while the objective
rises. There CG runs on the objective's Hessian ``M (M + alpha I)`` (``M = Q S K S Q``) with right-hand
side ``M B``, preconditioned by the square of the Nystroem preconditioner: two products per
iteration, but every iterate decreases the objective and stays in M's range, so the limit is the
minimum-norm least-squares fit. Up to ``DENSE_LEAST_SQUARES_MAX`` rows that limit also comes from one
eigendecomposition of M, and the lower of the two objectives is kept.

One pass over K per iteration; ``tol`` bounds every column's relative residual; the best iterate by
the objective is returned.
"""

from typing import NamedTuple

import numpy as np

from .._array_api import (
    colnorm, full_as, outer_product, read_interval, scalar_sum, sum_of, take_columns, take_rows, to_floats, to_numpy,
    weighted_sum, xp_of, zeros_as,
)
from .._warnings import warn
from . import _dense_newton
from ._common import ROUNDING_EPS, IterateLog, finish, mean_diagonal, warn_not_converged, warn_rounding
from ._objective import Objective
from ._krylov import ProductTracker, block_pcg
from ._preconditioners import (
    CENTERS_MIN_RIDGE,
    PRECONDITIONER_MIN_SHIFT,
    check_center_memory,
    FalkonPreconditioner,
    NystroemPreconditioner,
    center_factors,
    full_landmarks,
)

# What this solver minimises: its losses, and its models (all points as centers, or n_centers).
LOSSES = {"squared"}
MODELS = {"full", "centers"}

# Below this ridge (times the mean weighted k(x, x)) the full model solves least squares (module doc).
LEAST_SQUARES_RIDGE = PRECONDITIONER_MIN_SHIFT
# Up to this many rows least-squares mode is solved by one dense eigendecomposition instead, where CG on the
# normal equations can crawl.
DENSE_LEAST_SQUARES_MAX = 2000
# Its cuts: eigenvalues of M at most this times the largest are left out (the first keeps all but M's rounding).
DENSE_CUTS = (1e-15, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6)
# Iterations over which least-squares mode measures the objective's decrease to stop.
SETTLE_WINDOW = 5
# Iterations without a new best objective before stopping for lack of progress.
NO_PROGRESS_PATIENCE = 20


class _Solved(NamedTuple):
    """One way's solution: coefficients, intercepts, CG iterations, its IterateLog, status and Objective."""

    coef: object
    intercept: object
    n_iter: int
    log: object
    status: str
    objective: object


def _residual_targets(Y, w, y_bar):
    """``Y - y_bar``, with the columns that are constant to rounding (``ROUNDING_EPS``) set to 0: the
    intercept-only model fits them, and CG would only chase their rounding."""
    xp = xp_of(Y)
    s = xp.sqrt(w)[:, None]
    R = Y - y_bar
    constant = colnorm(s * R) <= ROUNDING_EPS * float(np.finfo(np.float64).eps) * colnorm(s * Y)
    return xp.where(constant[None, :], 0.0, R)


def _solve_full_dense(operator, Y, w, settings, s, center):
    """The minimiser from one eigendecomposition of ``M = Q S K S Q``: ``c = (M + alpha)^-1 Q S y``, ``a = S c``,
    on M's eigenvectors above a cut (the tiny eigenvalues' huge coefficients put rounding into ``K a``): of
    the cuts ``DENSE_CUTS``, the one whose objective, computed as the model predicts, is least.
    """
    xp = xp_of(Y)
    K = xp.astype(operator.rows(slice(None)), xp.float64)
    y_bar = weighted_sum(w, Y) if center else zeros_as(Y, Y.shape[1])

    def project(V):
        return V - outer_product(s, s @ V) if center else V

    M = project(project(s[:, None] * K * s[None, :]).T)
    del K
    lam, V = xp.linalg.eigh((M + M.T) / 2)
    projections = V.T @ project(s[:, None] * (Y - y_bar))
    lam_host = to_numpy(lam)
    objective = Objective(settings.loss, Y, w, settings.alpha)
    log = IterateLog()
    for cut in DENSE_CUTS:
        idx = np.flatnonzero(lam_host > cut * lam_host.max())
        if len(idx) == 0:
            continue
        shrink = take_rows(projections, idx) / (take_rows(lam, idx) + settings.alpha)[:, None]
        A = s[:, None] * (take_columns(V, idx) @ shrink)
        KA = operator.matvec(A)
        b = y_bar - weighted_sum(w, KA) if center else zeros_as(Y, Y.shape[1])
        log.record(objective.value(A, KA, b), A, b)
    A, b = log.best if log.best is not None else (zeros_as(Y, (len(s), Y.shape[1])), y_bar)
    return _Solved(A, b, 1, log, "converged", objective)


def _solve_full(operator, Y, w, settings, rng):
    n = Y.shape[0]
    xp = xp_of(Y)
    alpha = settings.alpha
    s = xp.sqrt(w)
    center = settings.fit_intercept
    diag_mean = mean_diagonal(operator, w)
    dense = None
    if alpha < LEAST_SQUARES_RIDGE * diag_mean and n <= DENSE_LEAST_SQUARES_MAX:
        dense = _solve_full_dense(operator, Y, w, settings, s, center)
        if not dense.log.best_value < dense.objective.baseline(center)[1]:  # rounding dominates its cuts
            dense = None
    solved = _solve_full_cg(operator, Y, w, settings, rng, s, center, diag_mean)
    # Neither dominates: the cuts keep CG from the tiny eigenvalues' rounding, CG reaches eigenvalues below
    # the cuts. The lower objective is kept.
    if dense is not None and dense.log.best_value <= solved.log.best_value:
        return dense
    return solved


def _solve_full_cg(operator, Y, w, settings, rng, s, center, diag_mean):
    n, t = Y.shape
    xp = xp_of(Y)
    alpha = settings.alpha
    # mu = alpha makes P^-1 (N + alpha I) well conditioned; without ridge, or far below it, P needs a shift:
    # 1 / alpha would blow up rounding outside N's span.
    mu = float(max(alpha, PRECONDITIONER_MIN_SHIFT * diag_mean, np.finfo(float).tiny))
    rank, landmarks = full_landmarks(n, t, settings.landmarks)
    precond = NystroemPreconditioner(operator, s, mu, rank, rng, center=center, factor=landmarks)
    y_bar = weighted_sum(w, Y) if center else zeros_as(Y, t)
    least_squares = alpha < LEAST_SQUARES_RIDGE * diag_mean

    def project(V):  # Q = I - s s': b is eliminated by centring (s's = 1)
        return V - outer_product(s, s @ V) if center else V

    def apply_M(V):
        return project(s[:, None] * operator.matvec(s[:, None] * V))

    def apply_A(V):
        KV = operator.matvec(s[:, None] * V)
        tracker.record(KV)  # K times the iterate's direction, for the objective
        AV = project(s[:, None] * KV) + alpha * V
        return apply_M(AV) if least_squares else AV

    def apply_P(V):
        V = project(precond(V))
        return project(precond(V)) if least_squares else V

    def combine(C, KX):
        A = s[:, None] * C
        b = y_bar - weighted_sum(w, KX) if center else zeros_as(Y, t)
        return A, b, KX + b

    tracker = ProductTracker(zeros_as(Y, (n, t)))
    X0 = None
    if settings.coef_init is not None:  # warm start: c = a / s on the weighted rows
        positive = s[:, None] > 0
        X0 = project(xp.where(positive, settings.coef_init / xp.where(positive, s[:, None], 1.0), 0.0))
    B = project(s[:, None] * _residual_targets(Y, w, y_bar))
    # In least-squares mode the fit has converged once the gradient's relative norm is at most tol and the best
    # objective fell by at most tol^2 times the intercept-only one over SETTLE_WINDOW iterations: what CG has
    # left is about what it made over the last few (Strakos & Tichy, 2002); the gradient alone underweights the
    # error in K's small eigenvalues.
    settle = (SETTLE_WINDOW, settings.tol**2 * scalar_sum(B, B), settings.tol) if least_squares else None
    if least_squares:
        B = apply_M(B)

    def quadratic(C):  # what CG minimises, 1/2 C'(Q S K S Q + alpha) C - C'B, from the tracked K A (0-d)
        return 0.5 * (sum_of(C, s[:, None] * tracker.KX) + alpha * sum_of(C, C)) - sum_of(C, B)

    log = IterateLog()
    # In least-squares mode CG minimises the objective itself: progress is judged by it.
    on_iter = _Monitor(
        settings, tracker, combine, Objective(settings.loss, Y, w, alpha), log, None if least_squares else quadratic,
        settle,
    )
    C, n_iter, status = block_pcg(
        apply_A, B, apply_P, max_iter=settings.max_iter, tol=0.0 if least_squares else settings.tol,
        on_iter=on_iter, x0=X0, tracker=tracker,
    )
    on_iter.flush()
    if status == "stalled" and settle is not None and (
            _settled(log.curve, tracker.residual, settle) or on_iter.best_residual_at_best <= settings.tol**2):
        status = "converged"  # conjugacy lost at the objective's rounding floor, or past it (the best iterate's)
    A, b, _ = combine(C, tracker.KX)
    if settle is not None and log.best is not None and (status == "converged" or on_iter.reason == "settled"):
        A, b = log.best  # least-squares mode's stop judges the best iterate's objective and gradient: the model
    return _Solved(A, b, n_iter, log, _status(status, on_iter), None)



def _solve_centers_dense(dense, Y, w, settings):
    """The minimiser, formed and factored densely (``_dense_newton``): the objective is quadratic, so one
    Newton step from the intercept-only model reaches it. Weights spanning 1e-4 to 1e4 left CG's
    residual at tol with the objective 1e-4 of var(y) above this minimiser, silently."""
    loss = settings.loss
    objective = Objective(loss, Y, w, settings.alpha, T=dense.penalty_map)
    b0, _ = objective.baseline(settings.fit_intercept)
    A0 = zeros_as(Y, (dense.Z.shape[0], Y.shape[1]))
    F0 = zeros_as(Y, Y.shape) + b0
    D, db, KD = _dense_newton.direction(dense, F0, loss.gradient(F0, Y, w), A0, b0, settings.alpha,
                                        settings.fit_intercept, loss, w)
    log = IterateLog()
    b = b0 + db
    log.record(objective.value(D, KD, b), D, b)
    return _Solved(D, b, 1, log, "converged", objective)


def _solve_centers(operator, Y, w, settings, rng):
    n, t = Y.shape
    m = operator.m
    center = settings.fit_intercept
    check_center_memory(m, settings.memory_budget, Y, operator.center_dtype)
    dense = _dense_newton.features(operator, t, settings.alpha, False)
    if dense is not None:  # small, and where CG's residual is not to be trusted: one exact solve
        return _solve_centers_dense(dense, Y, w, settings)
    factors = center_factors(operator)
    # FALKON needs a positive ridge: without one K_nm'W K_nm is as singular as K_mm and CG stalls.
    alpha = max(settings.alpha, CENTERS_MIN_RIDGE * factors.diag_mean)
    floored = 0 < settings.alpha < alpha
    ridge = [alpha]  # the system's; the preconditioner keeps the floor
    if operator.center_rows is None:
        d = full_as(Y, m, 1.0)
    else:
        d = n * take_rows(w, operator.center_rows)
    falkon = FalkonPreconditioner(factors, d, alpha, center)
    apply_B, apply_Bt = falkon.apply, falkon.apply_t

    # The best intercept for a given beta is w'(y - K beta): centring leaves K_c' W K_c = K'W K - k_w k_w'
    # (k_w = K'w) in the normal equations, with no division and no extra column.
    y_bar = weighted_sum(w, Y) if center else zeros_as(Y, t)
    k_w = operator.rmatvec(w) if center else None
    rhs = operator.rmatvec(w[:, None] * _residual_targets(Y, w, y_bar))

    def apply_A(V):
        BV = apply_B(V)
        H, KBV = operator.gram_matvec(BV, w)
        tracker.record(KBV)
        if center:
            H = H - outer_product(k_w, k_w @ BV)
        return apply_Bt(H + ridge[0] * factors.kmm_dot(BV))

    def combine(Z, KX):
        beta = apply_B(Z)
        b = y_bar - k_w @ beta if center else zeros_as(Y, t)
        return beta, b, KX + b

    objective = Objective(settings.loss, Y, w, settings.alpha, T=factors.T)
    tracker = ProductTracker(zeros_as(Y, (n, t)))
    Z0 = None
    if settings.coef_init is not None:  # warm start: z = B^-1 beta
        Z0 = falkon.variables(settings.coef_init)
    log = IterateLog()
    on_iter = _Monitor(settings, tracker, combine, objective, log, residual_progress=True)
    Z, n_iter, status = block_pcg(
        apply_A, apply_Bt(rhs), lambda V: V, max_iter=settings.max_iter, tol=settings.tol,
        on_iter=on_iter, x0=Z0, tracker=tracker,
    )
    on_iter.flush()
    if floored and status != "max_iter" and n_iter < settings.max_iter:  # converged, or stopped by rounding
        # Go on from the floor's solution at alpha itself, the floor only preconditioning, until the residual is
        # at most tol and the objective is flat to tol^2 of the intercept-only one (as least-squares mode does).
        ridge[0] = settings.alpha
        settle = (SETTLE_WINDOW, settings.tol**2 * objective.baseline(center)[1], settings.tol)
        confirm = _Monitor(settings, tracker, combine, objective, log, settle=settle, residual_progress=True)
        Z, more, confirmed = block_pcg(
            apply_A, apply_Bt(rhs), lambda V: V, max_iter=settings.max_iter - n_iter, tol=0.0,
            on_iter=confirm, x0=Z, tracker=tracker,
        )
        confirm.flush()
        n_iter += more
        floored = _status(confirmed, confirm) != "converged"  # else the floor's solution stands (the best
        status = status if floored else "converged"            # iterate is kept), with the warning
    if floored:  # a ridge the user asked for is not the one solved: say so
        warn(
            f"alpha={settings.alpha:.3g} is below the smallest ridge solver 'cg' resolves reliably on these "
            f"centers, {CENTERS_MIN_RIDGE:g} times the mean of k(c, c), here {alpha:.3g}: from the solution at that "
            "ridge, CG did not reach tol at alpha itself, and the model is the best iterate seen. Scale the "
            "features (a linear kernel, or a polynomial one at a fixed sigma, grows with their scale), or set "
            "alpha >= that value.",
        )
    beta, b, _ = combine(Z, tracker.KX)
    return _Solved(beta, b, n_iter, log, _status(status, on_iter), objective)


def _settled(curve, residual, settle):
    """Least-squares mode's stop: small gradient, best objective flat over the window.

    With a gradient below tol^2 one flat step is window enough: iterating on
    at the rounding floor only lets rounding grow.
    """
    window, eps, tol = settle
    if residual > tol or len(curve) <= (1 if residual <= tol**2 else window):
        return False
    before = curve[: -min(window, len(curve) - 1)]
    return min(before) - min(curve) <= eps


def _status(status, monitor):
    """block_pcg's status, with the monitor's reason where it stopped CG."""
    if status == "stopped" and monitor.reason == "settled":
        return "converged"
    return "no_progress" if status == "stopped" and monitor.reason == "no_progress" else status


class _Monitor:
    """The per-iteration step of block_pcg (its ``on_iter``): objective, progress line, callback.

    The tracker holds K times the iterate, so the ``objective`` costs no extra product. Progress is
    judged by ``quadratic(X)``, which CG decreases at every step, where it differs from the objective
    (which an ill-conditioned system may raise for many steps); with ``residual_progress`` a new
    smallest residual is progress too (a flat objective at float64's resolution). ``reason`` says why
    it stopped CG ("settled", "no_progress"), if it did. Scalars are read from the device every
    ``read_interval`` iterations in one transfer; the caller ``flush``-es the rest once CG ends.
    """

    def __init__(self, settings, tracker, combine, objective, log, quadratic=None, settle=None,
                 residual_progress=False):
        self.settings, self.tracker, self.combine, self.objective, self.log = settings, tracker, combine, objective, log
        self.quadratic, self.settle, self.residual_progress = quadratic, settle, residual_progress
        self.best_quadratic, self.since_quadratic = np.inf, 0
        self.best_residual, self.since_residual = np.inf, 0
        self.best_residual_at_best = np.inf  # the relative residual of the best iterate logged (with settle)
        self.reason, self.pending, self.stopped = None, [], False
        self.every = read_interval(tracker.KX)

    def __call__(self, X, step):
        tracker = self.tracker
        tracker.advance(step)
        coef, b, _ = self.combine(X, tracker.KX)
        reads_residual = self.settle is not None or self.residual_progress
        wanted = [self.objective.value_sum(coef, tracker.KX, b)]
        wanted += [self.quadratic(X)] if self.quadratic is not None else []
        wanted += [tracker.largest] if reads_residual else []
        self.pending.append((coef, b, wanted))
        return self.flush() if len(self.pending) >= self.every else False

    def flush(self):
        """Read the pending iterates' scalars in one transfer and judge each in turn; whether CG stops."""
        if not self.pending:
            return self.stopped
        pending, self.pending = self.pending, []
        read = to_floats(*[scalar for _, _, wanted in pending for scalar in wanted])
        size = len(pending[0][2])
        for i, (coef, b, _) in enumerate(pending):
            values = read[i * size : (i + 1) * size]
            if self.stopped:
                self.log.record(values[0], coef, b)
            else:
                self.stopped = self._judge(coef, b, values)
        return self.stopped

    def _judge(self, coef, b, values):
        settings, log = self.settings, self.log
        value, residual = values[0], values[-1] if self.settle is not None or self.residual_progress else None
        log.record(value, coef, b)
        if residual is not None and log.best_index == len(log.curve):
            self.best_residual_at_best = residual
        if self.quadratic is not None:
            q = values[1]
            self.since_quadratic = 0 if q < self.best_quadratic else self.since_quadratic + 1
            self.best_quadratic = min(self.best_quadratic, q)
        it = len(log.curve)
        if settings.verbose and (settings.verbose > 1 or it % 10 == 0 or it == 1):
            print(f"[cg] iter {it:5d}  objective {value:.6e}")
        if self.settle is not None and _settled(log.curve, residual, self.settle):
            self.reason = "settled"
            return True
        since = self.since_quadratic if self.quadratic is not None else log.since_best()
        if self.residual_progress:
            self.since_residual = 0 if residual < self.best_residual else self.since_residual + 1
            self.best_residual = min(self.best_residual, residual)
            since = min(since, self.since_residual)
        if settings.tol > 0 and since >= NO_PROGRESS_PATIENCE:
            self.reason = "no_progress"  # rounding has taken over: stop
            return True
        return settings.callback is not None and settings.callback(coef, b)


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
    coef, b, n_iter, log, status, objective = run(operator, Y, w, settings, rng)
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
    return finish("cg", operator, Y, w, settings, coef, b, log, n_iter, status == "converged", None, objective)
