"""One Newton fit: its state between steps, the stopping tests and the failure policy."""

from dataclasses import replace
from enum import Enum

import numpy as np

from ..._array_api import (
    blas_dot, clip_min, copy_array, from_numpy, scalar_sum, sum_of, to_floats, to_numpy, xp_of, zeros_as,
)
from ..._losses import P_MIN, baseline_fits
from ..._warnings import warn
from .. import _dense_newton
from .._common import (
    ROUNDING_EPS, IterateLog, RoundingCheck, finish, stationary_start, warn_not_converged, warn_rounding,
)
from .._objective import Objective
from .._preconditioners import CENTERS_MIN_RIDGE, center_factors, check_center_memory
from . import _start as subsample
from ._directions import Dense, choose
from ._full import FullCoupled
from ._steps import LM_MAX, LM_MIN, Steps, damping, shorten

# Hessian weights are floored at this fraction of the largest: a point the
# model already fits with certainty still gets a (tiny) weight.
HESSIAN_FLOOR = 1e-10
ARMIJO = 1e-4
# A predicted decrease below this fraction of the objective is rounding.
ROUNDING = ROUNDING_EPS * np.finfo(float).eps
MAX_HALVINGS = 30
# The loosest relative residual of an inexact Newton step's CG run.
FORCING_MAX = 0.1
# A loose exact-model step whose decrement is below this share of the stopping threshold converges.
CONFIRM_MARGIN = 0.25
# A fit stops once this many accepted iterates in a row have predictions dominated by K's rounding
# (RoundingCheck): a converging fit can pass through such iterates, none of which may be returned.
NOISY_PATIENCE = 50
# A stop where no direction descends still converges if the last accepted step's decrement was within this
# factor of the stopping threshold (tol**2 times the intercept-only objective); float32 resolves far less.
NO_DESCENT_NEAR = {"float64": 10.0, "float32": 1e3}
# An exact step whose CG run stops before its first iteration right after a decrement above tol times the
# intercept-only objective is retaken with CG's tolerance this many times tighter; so are the steps after a
# damped exact step, and a failed exact direction before the fit gives up.
SOLVED_RETIGHTEN = 1e-3
# At a convergence, a running K A whose objective differs from the exact product's by more than tol**2 of
# the intercept-only objective, or DRIFT_EPS rounding units of it, has drifted (exact_state).
DRIFT_EPS = 1e3
# A fit goes on from the exact K A after at most this many drifted convergences, then stops with a warning.
DRIFT_RESUMES = 3
# Earlier steps kept for the softmax's subspace step.
SUBSPACE_MEMORY = 4
# A full step's decrement over this many times the last full step's is no convergence, whatever its size (_stops).
GROWING = 2.0
# The softmax's diagonal model switches to exact steps once a full step's decrement is above this
# share of the previous one's (its linear convergence has slowed).
LINEAR_SWITCH = 0.5
SWITCH_BACKOFF = 4


class Stop(Enum):
    """Why a fit stopped before its stopping test passed; each maps to its warning (``_NewtonRun.report``)."""

    NO_DESCENT = "no direction decreases the objective"
    ROUNDING = "the predicted decrease is at the objective's rounding"
    DRIFT = "the running predictions drifted from the exact ones"
    NOISE = "the predictions are dominated by the kernel's rounding"
    CALLBACK = "a callback asked to stop"


def solve(operator, Y, w, settings):
    """Minimise the objective by damped Newton steps; see the package docstring (``newton``).

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
    empty = _classes_without_weight(Y, w, settings)
    if empty is None:
        return _NewtonRun(operator, Y, w, settings).run()
    return _fit_without(empty, operator, Y, w, settings)


def _classes_without_weight(Y, w, settings):
    """The softmax's classes of no weight (host indices) where at least two others weigh and an intercept is
    fitted; else None."""
    if settings.loss.diagonal_hessian or not settings.fit_intercept:
        return None
    totals = np.asarray(to_numpy(w @ Y))
    empty = np.flatnonzero(~(totals > 0))
    return empty if len(empty) and len(totals) - len(empty) >= 2 else None


def _fit_without(empty, operator, Y, w, settings):
    """The softmax fit with the classes ``empty`` left out. A class without weight has no optimum (its intercept
    runs to -inf, where the exact steps' floor on its probabilities breaks them); the others' fit is the model's.
    A left-out class gets no coefficients and an intercept that gives it a probability of at most ``P_MIN`` (the
    baseline's floor) on every row of weight."""
    k = Y.shape[1]
    kept, weighs = np.setdiff1d(np.arange(k), empty), np.asarray(to_numpy(w)) > 0

    def put_back(M):  # M @ put_back(M): the kept columns in their places, zeros in the left-out ones
        return from_numpy(np.eye(k)[kept], xp_of(M), getattr(M, "device", None))

    def narrow(M):
        return None if M is None else M @ put_back(M).T

    def wide(A, b):
        # the kept outputs' log-sum-exp on every row of weight is at least ``least``: an intercept log(P_MIN)
        # below it bounds the left-out class's probability there
        F = np.asarray(to_numpy(operator.matvec(A) + b))[weighs]
        least = float(np.min(np.logaddexp.reduce(F, axis=1)))
        floor = from_numpy(np.isin(np.arange(k), empty) * (least + np.log(P_MIN)), xp_of(b), getattr(b, "device", None))
        return A @ put_back(A), b @ put_back(b) + floor

    callback = settings.callback
    reduced = replace(settings, coef_init=narrow(settings.coef_init), intercept_init=narrow(settings.intercept_init),
                      callback=None if callback is None else lambda A, b: callback(*wide(A, b)))
    result = _NewtonRun(operator, narrow(Y), w, reduced).run()
    A, b = wide(result.dual_coef, result.intercept)
    return replace(result, dual_coef=A, intercept=b)


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
        self.steps = steps = Steps(inner_cap=settings.max_iter)
        if not operator.symmetric:
            check_center_memory(operator.m, settings.memory_budget, Y, operator.center_dtype)
        self.on_centers = not operator.symmetric
        coupled = not loss.diagonal_hessian  # the softmax
        # dense steps where CG's are not to be trusted (few centers), or cost what CG's would (a tiny full model)
        steps.dense = _dense_newton.features(operator, k, alpha, coupled)
        if self.on_centers and steps.dense is None:  # CG's factors only for CG's steps; dense steps
            steps.centers = center_factors(operator)  # read the penalty as |B|^2, exactly
        # a warm-started fit on the same matrix keeps the last preconditioner: it leaves CG's solution unchanged
        self.state = settings.reuse if operator.symmetric else None
        if self.state is not None and self.state.get("shape") == (n, k):
            steps.L, steps.factors = self.state["preconditioner"]
        penalty_factor = (steps.centers.T if steps.dense is None else steps.dense.penalty_map) if self.on_centers else None
        self.objective = Objective(loss, Y, w, alpha, T=penalty_factor)
        started = subsample.applies(operator, Y, w, settings)  # exact steps from near the optimum pay longer
        self.direction = choose(operator, settings, steps, loss, w, k, started)
        self.b0, self.value0 = self.objective.baseline(settings.fit_intercept)
        self.rounding = RoundingCheck(operator, w, loss, self.value0)
        # a start near the optimum pays where the steps converge quadratically (not the diagonal model's)
        start = subsample.subsample_start(operator, Y, w, settings, solve) if started and self.exact_model else None
        self._start(start)
        self.restartable = settings.coef_init is not None or start is not None
        self.log = IterateLog()
        self.previous = []  # the last steps taken: (D, db, K D), newest first
        self.converged, self.reason, self.it = False, None, 0
        self.decrement = self.accepted_decrement = self.prior_decrement = self.slope = np.inf
        self.damped = False
        self.noisy_run = 0  # accepted iterates in a row whose predictions are rounding
        self.inner_tol = steps.exact_tol = min(settings.tol, 1e-3)  # the full model's exact steps: relative to B
        # Inexact steps until a stopping test passes, which an exact step then retakes; the full
        # model's diagonal-model softmax steps are inexact at first and after a shortened step (see _take).
        self.exact = not self.value0 > 0 or steps.dense is not None
        self.tighten = 1.0  # SOLVED_RETIGHTEN while a step is retaken (see _iterate)
        self.moved_decrement = np.inf  # the decrement of the last accepted step whose CG run iterated
        self.exact_KA = None  # K A computed exactly at a convergence (exact_state)
        self.resumed = 0  # convergences found drifted, from which the fit went on
        # A stop without descent converges only if the last step taken predicted almost no further decrease;
        # float32's rounding blurs decrements below about 1e3 eps of the objective
        self.near = NO_DESCENT_NEAR[np.dtype(operator.dtype).name]
        # the softmax's diagonal model: its last full step's decrement, its slow steps in a row, how many
        # make it switch to exact steps, and its direction while they run (_switch_if_linear)
        self.last_full, self.slow, self.patience, self.diagonal = None, 0, 1, None

    @property
    def exact_model(self):
        """Whether the steps' second-order model is the objective's own (not the softmax's diagonal model)."""
        return self.direction.exact

    def _start(self, start):
        """The first iterate: a warm start, a subsample's fit, or the intercept-only optimum."""
        settings, steps, Y, k = self.settings, self.steps, self.Y, self.k
        # the tiny full model's dense steps ignore a warm start: from saturated predictions a dense step can land
        # where its decrement passes above the optimum; a cold start costs a few exact steps of milliseconds
        if settings.coef_init is not None and not (self.operator.symmetric and steps.dense is not None):
            A = copy_array(settings.coef_init)
            b = copy_array(settings.intercept_init) if settings.fit_intercept else zeros_as(Y, k)
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
        self.A, self.KA = zeros_as(self.Y, (self.operator.m, self.k)), zeros_as(self.Y, (self.n, self.k))
        self.b = copy_array(self.b0)
        self.value = self.objective.value(self.A, self.KA, self.b)

    def inner(self, U, KV):
        """<U, V>_H summed over columns (a 0-d array), given K V (or V itself with centers: as the objective's
        penalty, through T'T = K_mm + jitter, which huge coefficients on a rank-deficient K_mm feel)."""
        if not self.on_centers:
            return sum_of(U, KV)
        T = self.objective.T
        return sum_of(blas_dot(T, U), blas_dot(T, KV))

    def pair(self, U, V, KV):
        """<U, V>_H (a 0-d array) given V and K V (whichever the model's norm needs)."""
        return self.inner(U, V if self.on_centers else KV)

    # ------------------------------------------------------------------ stopping tests

    def exact_state(self):
        """At a convergence, K A recomputed exactly: whether the running K A agrees with it to what the convergence
        test resolves (huge, cancelling coefficients can drift it); the fit then stops with a warning, its best
        iterate judged by exact objectives.
        """
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
        """Where the softmax's diagonal model stops: whether the fit goes on with exact steps instead. That model
        converges linearly and its decrement understates what is left; exact steps (at a ridge, undamped, on a
        tiny system formed densely) converge quadratically from there.
        """
        if self.exact_model or self.on_centers or not self.alpha > 0 or self.steps.damping:
            return False
        steps = self.steps
        steps.dense = _dense_newton.features(self.operator, self.k, self.alpha, True, confirm=True)
        args = (self.operator, self.settings, steps, self.loss, self.w)
        # too large to form: CG's exact steps
        self.direction = FullCoupled(*args, self.k) if steps.dense is None else Dense(*args)
        self.exact = True
        return True

    def stop_without_descent(self):
        """Where no direction descends: whether the fit stops (``Stop.NO_DESCENT``, or ``Stop.DRIFT`` once
        ``DRIFT_RESUMES`` are spent). The softmax's diagonal model goes on with exact steps
        (``confirm_exactly``); otherwise the exact K A decides: from running products that had
        drifted, their objective an understatement, the fit goes on."""
        # (only where the stop would count as convergence, or the diagonal direction failed by more than rounding:
        # exact steps cannot resolve what rounding hides)
        if (self._nearly_converged() or self._model_failed()) and self.confirm_exactly():
            return False
        if self.exact_state():
            self.reason = Stop.NO_DESCENT
            return True
        if self.resumed < DRIFT_RESUMES:
            self.resumed += 1
            return False
        self.reason = Stop.DRIFT
        return True

    def _model_failed(self):
        """Whether the softmax's diagonal model failed beyond rounding: its last direction's slope is above
        the objective's rounding (not a descent direction, or one no step decreases), which says the model,
        not the optimum, ended the steps."""
        return not self.exact_model and abs(self.slope) > ROUNDING * (abs(self.value) + self.value0)

    def _nearly_converged(self):
        """Whether the last full step predicted almost no further decrease (``near``), or two full exact steps in a
        row converge quadratically below the threshold (the next decrement about ``d (d / d_prior)^2``, which the
        CPU's BLAS rounding would otherwise decide); before any step, whether the last direction is flat to
        rounding at the start (a stationary start).
        """
        if not self.settings.tol > 0:
            return False
        if not self.log.curve:
            return abs(self.slope) <= ROUNDING * (abs(self.value) + self.value0)
        d, prior, threshold = self.accepted_decrement, self.prior_decrement, self.settings.tol**2 * self.value0
        quadratic = self.exact_model and d < prior < np.inf and d * (d / prior) ** 2 <= threshold
        return d <= self.near * threshold or quadratic

    def failed(self, exact_solved, n_inner, loose):
        """After a direction that does not descend, or along which no step decreases the objective:
        whether the fit stops. In order: a dense step's small decrement is convergence; a damped or
        truncated direction is retried with more damping or a shorter CG run; a loose step is
        retaken exactly, an exact one once more tightly; a given start gives way to the
        intercept-only model; else the fit stops without descent."""
        steps = self.steps
        if exact_solved:
            return self.settle()
        if shorten(steps, n_inner):
            return False
        if loose:
            self.exact = True
            return False
        if self.exact_model and self.tighten == 1.0 and not steps.damping and steps.dense is None:  # retaken tighter
            self.tighten = SOLVED_RETIGHTEN
            return False
        if self.restart():
            return False
        if self.diagonal is not None:  # an early switch whose exact direction failed
            self.switch_back()
            return False
        return self.stop_without_descent()

    # ------------------------------------------------------------------ the steps

    def run(self):
        fitted = self.settings.fit_intercept and baseline_fits(self.loss, self.value0, self.k)
        if fitted:  # (labels of one class: no step is worth taking)
            self._intercept_only()
            self.converged = True
        while not fitted and self.it < self.settings.max_iter:
            self.it += 1
            if self._iterate():
                break
        self.report()
        if self.state is not None:
            steps = self.steps
            self.state["shape"] = (self.n, self.k)
            self.state["preconditioner"] = (steps.L, steps.factors)
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
        if self.exact or self.direction.tight:  # (a tight direction's exact solve is cheap: never loose)
            steps.inner_tol = self.inner_tol * self.tighten
        else:
            forcing = min(FORCING_MAX, np.sqrt(self.decrement / self.value0)) if self.exact_model else FORCING_MAX
            steps.inner_tol = max(self.inner_tol, forcing)
        loose = steps.loose = steps.inner_tol > self.inner_tol
        F = self.KA + self.b
        G = self.loss.gradient(F, self.Y, self.w)
        H = self._hessian(F)
        if not self.on_centers and steps.dense is None:  # damping where the model is (nearly) singular: see _damping
            steps.damping = damping(steps, self.operator, H, self.alpha)
        # saturated predictions (every row fitted with certainty) leave H at underflow: the diagonal
        # model's sums overflow there, a direction that fails below as no descent, without warnings
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            A_new, b_new, KA_new, n_inner = self.direction(F, G, H, self.A, self.KA, self.b)
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
            # right after a decrement that large, Newton's quadratic convergence cannot have finished: CG's tolerance,
            # relative to a right-hand side that holds the predictions, passed a non-optimum. Retake it tighter.
            self.it -= 1
            self.tighten = SOLVED_RETIGHTEN
            return False
        D, KD = A_new - self.A, KA_new - self.KA
        db = (b_new - self.b) if settings.fit_intercept else zeros_as(self.Y, self.k)
        slope = self.slope = self._slope(G, D, KD, db)
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
        if self._stops(solved, step, loose):
            return True
        self._switch_if_linear(step)
        return False

    def _switch_if_linear(self, step):
        """Past its damped phase the softmax's diagonal model converges linearly: after ``patience``
        full steps in a row whose decrement is above ``LINEAR_SWITCH`` times the previous one's, the
        fit goes on with exact steps (``confirm_exactly``), which converge quadratically near the
        optimum. An exact step the line search shortens shows the coupled model is not to be trusted
        yet: back to the diagonal model, with ``SWITCH_BACKOFF`` times the patience."""
        if self.diagonal is not None:  # switched
            if step != 1.0:
                self.switch_back()
            return
        if self.exact_model or not self.exact:
            return
        previous, self.last_full = self.last_full, self.decrement if step == 1.0 else None
        slow = previous is not None and self.last_full is not None and self.decrement > LINEAR_SWITCH * previous
        self.slow = self.slow + 1 if slow else 0
        if self.slow >= self.patience:
            diagonal = self.direction
            if self.confirm_exactly():
                self.diagonal, self.exact = diagonal, False  # inexact Newton until a stopping test passes

    def switch_back(self):
        """From the exact steps of ``_switch_if_linear`` back to the diagonal model's."""
        self.direction, self.steps.dense, self.tighten, self.exact = self.diagonal, None, 1.0, True
        self.diagonal, self.slow, self.patience = None, 0, self.patience * SWITCH_BACKOFF

    def _slope(self, G, D, KD, db):
        """The objective's directional derivative along the step (inf where it overflowed: no descent)."""
        with np.errstate(over="ignore", invalid="ignore"):
            if self.alpha:  # the loss part's directional derivative and the penalty's, in one read
                loss_part, penalty_part = to_floats(sum_of(G, KD + db), self.inner(D, self.A if self.on_centers else self.KA))
                slope = loss_part + 2.0 * self.alpha * penalty_part
            else:
                slope = scalar_sum(G, KD + db)
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
        # a damped step's decrement (what its full step predicted) is no evidence of convergence: the model failed
        # along it. An exact step's CG run, held to a tolerance relative to the predictions, can point badly: the
        # steps after a damped one, and a failed exact direction, are solved SOLVED_RETIGHTEN times tighter.
        # (a decrement at the objective's rounding is damped by that rounding, not by the model)
        self.full = step == 1.0 or self.decrement <= ROUNDING * (abs(self.value) + self.value0)
        # an exact step's decrement (the objective's own Hessian, undamped) measures what is left however far the
        # line search went: one below the threshold was cut short by the objective's rounding, not by the model
        measured = self.full or (self.exact_model and not loose and not steps.damping
                                 and self.decrement <= settings.tol**2 * self.value0)
        self.prior_decrement, self.accepted_decrement = self.accepted_decrement, self.decrement if measured else np.inf
        if n_inner:
            self.moved_decrement = self.decrement
        self.tighten = 1.0 if self.full or loose or not self.exact_model or steps.damping else SOLVED_RETIGHTEN
        if steps.damping:  # a full step quarters the damping, a damped one raises it
            steps.lm = max(LM_MIN, steps.lm / 4) if step == 1.0 else min(LM_MAX, steps.lm * 2 / step)
        steps.inner_cap = min(settings.max_iter, 2 * steps.inner_cap)  # a shortened cap grows back
        D, db, KD = direction
        self.previous = [(step * D, step * db, step * KD)] + self.previous[: SUBSPACE_MEMORY - 1]
        self.A, self.b, self.KA, self.value = trial
        if not self.on_centers and not self.exact_model:
            # the softmax's diagonal model: solved tightly after a full step only; a shortened one shows
            # the model, not CG's residual, limits the step
            self.exact = step == 1.0
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
        # A loose step's decrement is only an estimate: confirm it with an exact step, unless the model is the true
        # second-order one and its CG residual (at most FORCING_MAX relative) errs by far less than CONFIRM_MARGIN
        confirmed = self.exact_model and self.full and decrement <= CONFIRM_MARGIN * threshold
        if loose and not confirmed and (decrement <= threshold or below_rounding):
            self.exact = True
            return False
        self.damped = bool(steps.damping) and steps.lm > LM_MIN  # its decrement understates Newton's
        # near an optimum Newton's decrements fall; one that grows (above the objective's rounding) is a step
        # along a flat direction whose curvature falls as the model moves, far from the optimum
        growing = not below_rounding and decrement > GROWING * self.prior_decrement
        if solved or settings.tol > 0 and decrement <= threshold and not self.damped and not growing:
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
        was left after a step that predicted almost none, or where the intercept-only model is the optimum (a kernel
        constant on the data: no step can descend)."""
        settings, operator, it, alpha, reason = self.settings, self.operator, self.it, self.alpha, self.reason
        if reason in (Stop.NO_DESCENT, Stop.ROUNDING) and stationary_start(operator, self.loss, self.Y, self.w,
                                                                           self.b0):
            self.converged = True
        elif reason is Stop.NO_DESCENT and self.damped:
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


def _subspace_step(loss, F, Y, w, G, alpha, pair, A, KA, new, previous):
    """The minimiser of the exact second-order model in the span of the latest steps: ``new`` is the diagonal
    model's step ``(D, db, K D, slope)``, and the model's gradient and Hessian in the span come from
    Hessian-vector products in F (no product with K). Without previous steps the new direction is scaled by
    the exact curvature along it. Returns the step and its slope; the new step itself where the model is
    degenerate.
    """
    if loss.diagonal_hessian:
        return new
    steps = [new[:3]] + previous
    E = [KD + db for _, db, KD in steps]  # how each step changes F
    HE = [loss.hessp(F, Y, w, e) for e in E]
    s = len(steps)
    # the model's gradient and Hessian (and the penalty's) in one read from the arrays' device
    sums = [sum_of(G, e) for e in E] + [sum_of(e, he) for e in E for he in HE]
    if alpha:
        sums += [pair(D, A, KA) for D, _, _ in steps] + [pair(Di, Dj, KDj) for Di, _, _ in steps for Dj, _, KDj in steps]
    read = np.array(to_floats(*sums))
    g, M = read[:s], read[s : s + s * s].reshape(s, s)
    if alpha:
        g += 2.0 * alpha * read[s + s * s : 2 * s + s * s]
        M += 2.0 * alpha * read[2 * s + s * s :].reshape(s, s)
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
