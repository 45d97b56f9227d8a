"""What every solver takes and returns, and helpers they share."""

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh
from sklearn.exceptions import ConvergenceWarning

from .._array_api import as_float64, copy_array, from_numpy, outer_product, scalar_sum, to_numpy, weighted_sum, xp_of
from .._losses import SquaredLoss
from .._replicates import distinct_rows
from ._objective import Objective
from .._warnings import warn

# A quantity within this many eps of the scale it was computed from is rounding (a constant target
# about its mean, a gradient at a stationary start, an eigenvalue of a kernel constant on the data).
ROUNDING_EPS = 64


class NonPSDKernelWarning(UserWarning):
    """The kernel (matrix) is not positive semi-definite.

    Raised by a fit whose kernel is not positive semi-definite (the sigmoid
    kernel, a precomputed matrix with negative eigenvalues): the objective
    may then be non-convex, solvers ``"cg"``, ``"eigenpro"`` and
    ``"newton"`` do not apply, and gradient descent may diverge. A positive
    ``alpha`` or a PSD kernel avoids it; :func:`kernelgd.check_psd` tells
    which kernels are.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from kernelgd import KernelGDRegressor, NonPSDKernelWarning
    >>> X, y = np.random.RandomState(0).randn(40, 3), np.arange(40.0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = KernelGDRegressor(kernel="sigmoid", max_iter=20).fit(X, y)
    >>> any(issubclass(w.category, NonPSDKernelWarning) for w in caught)
    True
    """


@dataclass
class SolverSettings:
    """The estimator's optimisation settings, as one object."""

    alpha: float = 0.0
    step_size: object = "auto"
    max_iter: int = 1000
    tol: float = 1e-6
    fit_intercept: bool = True
    coef_init: np.ndarray = None
    intercept_init: np.ndarray = None
    verbose: int = 0
    psd: bool = True
    kernel_name: str = "kernel"
    loss: object = SquaredLoss
    random_state: object = None
    # callback(A, b) -> bool, called after every iteration; True stops the fit.
    callback: object = None
    memory_budget: int = 2 << 30
    # a list: stops caused by float32 rounding are recorded here, not warned,
    # because the estimator will redo the fit in float64; None: warn
    rounding_stops: list = None
    # whether that float64 fit follows: a run that rounding broke (a negative objective) is recorded too, else
    # warned (a search path's rounding stops are optima to score, which a broken run is not)
    float64_retry: bool = False
    # a dict a solver may keep state in between warm-started fits on one kernel matrix (a search's
    # alpha path): only what cannot change the result it converges to, such as a preconditioner
    reuse: dict = None
    # the full model's Nystroem factor L of Q S K S Q and L'L (Landmarks; alpha="auto" drew it on this
    # operator and these weights): the preconditioner reuses them
    landmarks: object = None


@dataclass
class SolverResult:
    """What a solver returns; the estimator stores it as fitted attributes."""

    dual_coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    loss_curve: list = field(default_factory=list)
    step_size: float = None
    converged: bool = True


def mean_diagonal(operator, w):
    """The mean of ``w_i k(x_i, x_i)`` over the rows of positive weight (w sums to 1): the scale of
    ``S K S``'s eigenvalues, below a multiple of which a ridge is singular to the solvers. A row of
    weight zero does not count: the fit with it is the fit without it."""
    return float(scalar_sum(operator.diag() * w)) / max(distinct_rows(w), 1)


def baseline(Y, w, fit_intercept, loss=SquaredLoss):
    """The model every fit must beat: the best constant (or zero), and its objective."""
    return loss.baseline(Y, w, fit_intercept)


class IterateLog:
    """The objective of every iterate a solver evaluates, and a copy of the best one (``record`` is called with
    iterate k's objective, k = 1, 2, ...): a solver can always return the best model it has seen.
    """

    def __init__(self):
        self.curve = []
        self.best_value, self.best, self.best_index = np.inf, None, 0
        self.negative = 0  # objectives below 0: an invariant broken by rounding, never a best

    def record(self, value, coef, b, valid=True):
        """Iterate k's objective; ``valid=False``: an iterate that may never be returned (its
        predictions are rounding), in the curve but never the best."""
        self.curve.append(value)
        if value < 0:
            self.negative += 1
            return
        # an iterate after a negative objective came from a path rounding broke: never a best either
        if valid and not self.negative and np.isfinite(value) and value < self.best_value:
            self.best_value, self.best_index = value, len(self.curve)
            self.best = (copy_array(coef), as_float64(b, copy=True))

    def since_best(self):
        """Iterates recorded since the best one."""
        return len(self.curve) - self.best_index


def finish(name, operator, Y, w, settings, coef, b, log, n_iter, converged, step_size=None, objective=None, KA=None):
    """The SolverResult of a run: the best of the last iterate and the logged ones.

    ``objective``: the run's :class:`Objective` (the full model's by default); ``KA``: the exact ``K coef``
    where the solver has just computed it. The returned iterate's objective is recomputed exactly, so
    ``loss_curve[-1]`` is the returned model's. A model worse than the intercept-only one, or not finite,
    is never returned: the intercept-only model is, with a warning.
    """
    xp = xp_of(coef)
    if objective is None:
        objective = Objective(settings.loss, Y, w, settings.alpha)
    value = np.inf
    if bool(xp.all(xp.isfinite(coef))) and bool(xp.all(xp.isfinite(b))):
        with np.errstate(all="ignore"):
            value = objective.value(coef, operator.matvec(coef) if KA is None else KA, b)
    if value < 0 or log.negative:  # a loss plus a PSD penalty cannot be negative: rounding broke the fit
        message = (
            f"Solver {name!r} computed a negative objective ({min(value, *log.curve):.3g}), which a loss "
            "plus a positive semi-definite penalty cannot have: rounding broke the fit. The best iterate "
            "with a valid objective is returned. Increase alpha, use fewer centers, or scale the features."
        )
        if settings.float64_retry and settings.rounding_stops is not None:  # float64 goes on from that iterate
            settings.rounding_stops.append(message)
        else:
            warn(message, ConvergenceWarning)
        value = np.inf if value < 0 else value
    curve = list(log.curve[:n_iter])
    if len(curve) == n_iter and n_iter:
        curve[-1] = value  # the exact value of the iterate the log estimated
    else:
        curve.append(value)
    loss = settings.loss
    b0, value0 = objective.baseline(settings.fit_intercept)
    # differences at the level of rounding do not count as worse
    slack = 1e-12 * (value0 + scalar_sum(Y, Y, w))
    check = RoundingCheck(operator, w, loss, value0)
    # the best iterate where it is better, or where the last one's predictions are rounding; its logged value
    # came from the running K A, which rounding can carry away, so it is recomputed too
    broken = log.negative > 0  # the iterates from the first negative objective on are rounding's
    if log.best is not None and (broken or not log.best_value >= value - slack or check.dominated(coef)):
        best_coef, best_b = log.best
        with np.errstate(all="ignore"):
            best_value = objective.value(best_coef, operator.matvec(best_coef), best_b)
        if broken or not best_value >= value - slack or check.dominated(coef):
            if converged and not broken:  # the iterate its stopping test passed is not the model returned
                warn_rounding(
                    settings, name, f"stopped at iteration {n_iter} on an iterate whose predictions are dominated "
                    "by rounding, or that an earlier one beats by its exact objective (huge coefficients that "
                    "cancel)", "The best earlier iterate is returned. Scale the features, or increase alpha.",
                )
                converged = False
            coef, b, converged = best_coef, best_b, converged and not broken
            curve, value = list(log.curve[: log.best_index]), best_value
            curve[-1] = value
    noise = check.noise(coef)
    # accepted only if better than the baseline by more than rounding could fake
    if not (
        np.isfinite(value)
        and value + loss.noise_effect(value0, noise) <= value0 + slack
        and noise <= check.limit
    ):
        # where the intercept-only model is the optimum (a kernel constant on the data), it is the fit: no failure
        converged = stationary_start(operator, loss, Y, w, b0)
        if not converged:
            warn_rounding(
                settings, name, f"found no model better than the intercept-only one "
                f"(objective {value:.6g} against {value0:.6g}), or only one whose predictions "
                "are dominated by rounding: the problem is too badly conditioned in this precision",
                "The intercept-only model is returned. "
                "Increase alpha, scale the features, or change the kernel parameters.",
            )
        coef, b = xp.zeros_like(coef), b0
        curve = [value0]
    b = xp.asarray(b, dtype=xp.float64)
    if getattr(loss, "shift_invariant", False):  # the softmax: the same model whatever the solver's path
        b = b - xp.mean(b)
    return SolverResult(coef, b, n_iter, curve, step_size, converged)


def stationary_start(operator, loss, Y, w, b0):
    """Whether the intercept-only model ``b0`` is the optimum: the objective is convex, and the gradient of its loss
    in the coefficients there, ``K' G`` (the penalty's is 0), is rounding of its scale in every column (with
    ``|K_ij| <= sqrt(k_ii k_jj)``: ``max_j sqrt(k_jj) sum_i sqrt(k_ii) |G_i|``)."""
    xp = xp_of(Y)
    G = loss.gradient(xp.zeros_like(Y) + b0, Y, w)
    rows, columns = xp.sqrt(xp.abs(operator.diag())), xp.sqrt(xp.abs(operator.center_diag()))
    scale = xp.max(columns) * (rows @ xp.abs(G))
    rounding = ROUNDING_EPS * float(np.finfo(operator.dtype).eps) * scale
    return bool(xp.all(xp.max(xp.abs(operator.rmatvec(G)), axis=0) <= rounding))


# A model whose predictions carry rounding noise above this fraction of the
# targets' spread cannot be told from noise (huge cancelling coefficients).
NOISE_FRACTION = 0.03


class RoundingCheck:
    """Whether a model's predictions ``K @ coef`` are dominated by the rounding of K's precision: with
    ``|K_ij| <= sqrt(k_ii k_jj)`` (PSD) the weighted mean square of that rounding is at most
    ``eps^2 (w'|d_rows|) (sum_j |d_j| a_j^2)``, O(m) per model; above ``NOISE_FRACTION`` of
    ``loss.prediction_scale`` the predictions cannot be told from noise.
    """

    def __init__(self, operator, w, loss, value0):
        xp = xp_of(w)
        self.eps = float(np.finfo(operator.dtype).eps)
        self.rows = float(w @ xp.abs(operator.diag()))
        self.center_diag = xp.abs(operator.center_diag())
        self.limit = NOISE_FRACTION * loss.prediction_scale(value0)

    def noise(self, coef):
        """The root weighted mean square of the rounding in ``K @ coef``, estimated."""
        if 0 in coef.shape:
            return 0.0
        with np.errstate(over="ignore"):
            cols = float(xp_of(coef).max(self.center_diag @ (coef**2)))
        return self.eps * float(np.sqrt(self.rows * cols))

    def dominated(self, coef):
        return not self.noise(coef) <= self.limit


def warn_not_converged(name, reason, advice):
    """A ConvergenceWarning that says why a solver stopped and what to do."""
    warn(f"Solver {name!r} {reason}. {advice}", ConvergenceWarning)


def warn_rounding(settings, name, reason, advice):
    """A stop caused by rounding: recorded where the estimator will retry in float64, else warned."""
    if settings.rounding_stops is not None:
        settings.rounding_stops.append(f"Solver {name!r} {reason}. {advice}")
    else:
        warn(f"Solver {name!r} {reason}. {advice}", ConvergenceWarning)



def dual_sum_intercept(w, Y, X_y, X_1):
    """Combine the solutions for [Y, 1] of the full model into coefficients and intercept.

    At the optimum (alpha > 0) the b-gradient vanishes exactly when ``sum_i a_i = 0``, so
    ``b = sum(X_y) / sum(X_1)`` and ``a = X_y - b X_1``: on an unconverged iterate a ratio of two sums that
    grow with every iteration, where the b-gradient form divides two vanishing residuals. Without ridge it
    converges to the generalised least squares intercept ``1'K^-1 y / 1'K^-1 1``.
    """
    xp = xp_of(X_y)
    total_1 = float(xp.sum(X_1))
    if total_1 > 0 and np.isfinite(total_1):
        b = xp.sum(X_y, axis=0) / total_1
    else:  # not positive definite, or nothing learned yet: the weighted mean
        b = weighted_sum(w, Y)
    return X_y - outer_product(X_1, b), b


# Dense eigensolver below this size: exact and cheap, and far below the size
# where multithreaded LAPACK is hazardous here.
_DENSE_EIG_MAX = 300


def top_eigenvalue(operator, w, fit_intercept):
    """Largest eigenvalue of ``W^1/2 (K [+ 1 1']) W^1/2`` (the ``1 1'`` for an unpenalised intercept),
    deterministically: Lanczos (ARPACK, on the host) from a fixed pseudo-random vector, its products with
    K in w's namespace.
    """
    xp = xp_of(w)
    s = xp.sqrt(w)
    n = operator.n
    if n <= _DENSE_EIG_MAX:
        M = operator.rows(slice(None)) * outer_product(s, s)
        if fit_intercept:
            M = M + outer_product(s, s)
        M = np.asarray(to_numpy(M), dtype=np.float64)
        return float(np.linalg.eigvalsh((M + M.T) / 2)[-1])

    def matvec(v):
        v = from_numpy(np.ravel(v), xp, getattr(w, "device", None))
        out = s * operator.matvec(s * v)
        if fit_intercept:
            out = out + s * (s @ v)
        return np.asarray(to_numpy(out))

    A = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    v0 = np.random.RandomState(0).uniform(0.5, 1.5, n)
    try:
        return float(eigsh(A, k=1, which="LA", v0=v0, tol=1e-6, return_eigenvectors=False)[0])
    except ArpackNoConvergence as exc:  # pragma: no cover - rare on PSD matrices
        if len(exc.eigenvalues):
            return float(np.max(exc.eigenvalues)) * 1.1
        raise


def stable_step_bound(operator, w, alpha, fit_intercept, curvature=2.0):
    """The step size below which gradient descent on the dual converges: the update
    ``a <- a - eta (2 W (K a + b - y) + 2 alpha a)`` is primal gradient descent with Hessian
    ``2 (W^1/2 (K [+11']) W^1/2 + alpha)``, so ``eta < 1 / (lambda_max + alpha)``; a loss whose second
    derivative is at most ``curvature`` gives ``1 / (curvature / 2 lambda_max + alpha)``.
    """
    denom = curvature / 2.0 * top_eigenvalue(operator, w, fit_intercept) + alpha
    return 1.0 / denom if denom > 0 else np.inf
