"""One in-memory fit: the estimator's parameters and its data resolved into a ``FitProblem``, solved, exported.

``prepare_fit``: weights -> (validation split) -> target scale -> kernel and width ->
centers -> solver -> operator -> ridge. ``solve``: ``run_solver`` (again in float64
where float32's rounding stopped it), early stopping's best iterate. ``export``: the
fitted attributes, in the units of y.
"""

from dataclasses import dataclass, replace

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils import check_random_state

from . import _loo_ridge as loo_ridge
from ._array_api import add_at_rows, block_of, copy_array, like, on_host, rows_of, take_rows, to_numpy, xp_of, zeros_as
from ._auto_alpha import auto_alpha
from ._combiner import (
    class_shares, combiner_label_noise, combiner_rows, fit_output_layer, layer_landmarks, left_out_outputs,
    training_outputs,
)
from ._logistic_layer import output_layer
from ._losses import SquaredLoss
from ._operator import KernelOperator, resolve_dtype
from ._replicates import distinct_groups, distinct_rows, effective_count
from ._solvers import CENTER_SOLVERS, SMOOTH_LOSS_SOLVERS, SolverSettings, choose_solver, run_solver
from ._solvers._preconditioners import center_dtype, check_center_memory


# tol="auto": CG on the squared loss's exact model stops where its error in the fitted values is this share of
# the error alpha="auto"'s rule measured at its ridge; DEFAULT_TOL elsewhere.
TOL_SHARE = 0.02
DEFAULT_TOL = 1e-3
MIN_TOL = 1e-8


def resolve_tol(est, loss, error, solver, centers=False):
    """``tol``; for ``tol="auto"``, the rule's ``error`` (``_auto_alpha.relative_error``) times ``TOL_SHARE`` where
    alpha="auto" chose the ridge of the squared loss's exact model solved by CG, else ``DEFAULT_TOL``."""
    if not (isinstance(est.tol, str) and est.tol == "auto"):
        return float(est.tol)
    chosen = isinstance(est.alpha, str) and est.alpha == "auto"
    if not chosen or loss is not SquaredLoss or solver != "cg" or centers or error is None:
        return DEFAULT_TOL
    return max(TOL_SHARE * min(error, 1.0), MIN_TOL)


def power_of_two_scale(Y):
    """A power of two near max|Y| (1 for zero targets): dividing by it is exact."""
    xp = xp_of(Y)
    top = float(xp.max(xp.abs(Y))) if Y.shape[0] * Y.shape[1] else 0.0
    if not (top > 0 and np.isfinite(top)):
        return 1.0
    return float(np.ldexp(1.0, np.frexp(top)[1] - 1))


def unscale_curve(curve, y_scale):
    """Objective values back in the units of y**2, capped at the largest float."""
    with np.errstate(over="ignore"):
        values = np.asarray(curve, dtype=np.float64) * y_scale * y_scale
    return [float(v) for v in np.minimum(values, np.finfo(np.float64).max)]


def chain_callbacks(*callbacks):
    """One solver callback that calls each given one (None skipped); True if any asks to stop."""
    callbacks = [c for c in callbacks if c is not None]
    if len(callbacks) <= 1:
        return callbacks[0] if callbacks else None

    def chained(A, b):
        return any([c(A, b) for c in callbacks])  # a list: every callback sees every iterate

    return chained


class ValidationMonitor:
    """Early stopping: the validation loss after every iteration; keeps the best."""

    def __init__(self, kernel, X_val, Y_val, w_val, centers, n_iter_no_change, tol, options, precomputed, loss):
        self.K_val = X_val if precomputed else None
        self.op = None if precomputed else KernelOperator(
            X_val, kernel, centers=centers, memory_budget=options["memory_budget"] // 4,
            dtype=options["dtype"], threads=options["n_threads"],
        )
        self.Y, self.w, self.loss = Y_val, w_val / xp_of(w_val).sum(w_val), loss
        self.patience, self.tol = n_iter_no_change, tol
        self.curve, self.best, self.best_loss, self.waited = [], None, np.inf, 0
        self.best_iter = 0

    def __call__(self, A, b):
        xp = xp_of(A)
        K_val = None if self.K_val is None else xp.astype(self.K_val, xp.float64)
        F = (K_val @ A if self.op is None else self.op.matvec(A)) + b
        loss = float(self.loss.value(F, self.Y, self.w))
        self.curve.append(loss)
        if loss < self.best_loss * (1 - self.tol):
            self.best, self.best_loss, self.waited = (copy_array(A), copy_array(b)), loss, 0
            self.best_iter = len(self.curve)
        else:
            self.waited += 1
        return self.waited >= self.patience


@dataclass(frozen=True)
class TrainingRows:
    """The rows a fit trains on, and the validation rows early stopping holds out."""

    X: object  # the training rows (kernel="precomputed": their block of K)
    Y: object  # their targets, divided by y_scale
    w: object  # their weights, summing to one
    y_scale: float  # a power of two (1 for a logistic loss, which takes its labels as they are)
    replicates: object  # each row's group of identical rows, None where all differ (or unread: no rule needs it)
    weight_total: float  # the training rows' raw total sample weight
    train: object  # the training rows' indices, None where every row trains
    validation: object  # (X_val, Y_val, w_val) for early stopping, or None
    X_given: object  # every row given, validation included (kernel="precomputed": symmetrised)


@dataclass(frozen=True)
class FitProblem:
    """What the solver runs on, resolved from an estimator's parameters and its data."""

    rows: TrainingRows
    loss: type
    kernel: object  # bound; None for kernel="precomputed"
    alpha: float
    tol: float  # the solver's, resolved (``resolve_tol``)
    solver: str
    operator: object
    centers: object  # the rows of X the model is restricted to; None: all of them
    landmarks: object  # Landmarks: a factor of K to precondition the full model with, or None
    seed: int
    options: dict  # resolved; memory_budget that of the arrays' device


def training_rows(est, X, Y, sample_weight, stratify, rng):
    """``TrainingRows``: weights normalised, early stopping's split, targets scaled."""
    w, raw = est._sample_weights(X, sample_weight)
    xp = xp_of(w)
    w_host = np.asarray(to_numpy(w))  # index logic (splits, centers) runs on the host
    tr, val = est._split(X.shape[0], w_host, stratify, rng)
    if val is None:  # every row trains: no copy (a precomputed fold's K is most of a small fit's time)
        X_tr, w_tr, raw_tr, Y_tr = X, w, raw, Y
    else:
        X_tr = block_of(X, tr, tr) if est._precomputed else rows_of(X, tr)
        w_tr, raw_tr, Y_tr = rows_of(w, tr), rows_of(raw, tr), rows_of(Y, tr)
    # targets of any representable size: solved for Y / s, s a power of two (the squared loss only)
    y_scale = power_of_two_scale(Y_tr) if est._loss(Y.shape[1]) is SquaredLoss else 1.0
    validation = None
    if val is not None:
        X_val = block_of(X, val, tr) if est._precomputed else rows_of(X, val)
        validation = (X_val, rows_of(Y, val) / y_scale, rows_of(w, val))
    # alpha="auto" scales with the raw total, summed relative to the largest weight: weights of 1e308
    # sum past float64's range (then inf, alpha="auto" 0) without numpy's overflow warning
    top = float(xp.max(raw_tr))
    weight_total = float(xp.sum(raw_tr / top)) * top if 0 < top < np.inf else float(xp.sum(raw_tr))
    # the rules, the posterior and a search's refit's held-out layer (``_calibrates``) hold copies of a row together
    reads_copies = est._predictive or est._auto_kernel or est.alpha == "auto" or getattr(est, "_calibrates", False)
    return TrainingRows(
        X=X_tr, Y=Y_tr / y_scale, w=w_tr / xp.sum(w_tr), y_scale=y_scale,
        replicates=distinct_groups(X_tr) if reads_copies else None,
        weight_total=weight_total, train=None if val is None else tr, validation=validation, X_given=X,
    )


def _check_solver(est, solver, loss, kernel, centers):
    if loss is not SquaredLoss and solver not in SMOOTH_LOSS_SOLVERS:
        raise ValueError(
            f"solver={solver!r} minimises the squared loss only; with loss={loss.name!r} use "
            f"solver='auto' or one of {sorted(SMOOTH_LOSS_SOLVERS)}."
        )
    if centers is not None and solver not in CENTER_SOLVERS:
        if est.solver == "auto":  # auto chose gd: the kernel is not PSD
            raise ValueError(
                f"n_centers needs solver='cg' or 'newton', which need a positive semi-definite "
                f"kernel; the {kernel.name} kernel is not, so solver='auto' chose 'gd'. "
                "Use n_centers=None, or a PSD kernel."
            )
        raise ValueError(
            f"n_centers is supported by the solvers {sorted(CENTER_SOLVERS)} (and "
            f"solver='auto', which picks one), not solver={solver!r}. Use "
            "solver='auto' or n_centers=None."
        )


def prepare_fit(est, X, Y, sample_weight, stratify, options):
    """The ``FitProblem`` of ``est`` on validated X and 2-D float Y; sets ``kernel_`` and ``sigma_``."""
    X = est._validate_precomputed(X)
    rng = check_random_state(est.random_state)
    seed = rng.randint(np.iinfo(np.int32).max)
    rows = training_rows(est, X, Y, sample_weight, stratify, rng)
    xp = xp_of(rows.w)
    loss = est._loss(Y.shape[1])
    alpha = est._alpha(rows.weight_total)
    landmarks = None
    # the squared loss's ridge rule cuts the spectrum at float64's rounding where the fit can go on in
    # float64 (dtype "auto"), at float32's where float32 is asked for
    precision = np.float32 if options["dtype"] in ("float32", np.float32) else np.float64
    options = dict(options, memory_budget=est._device_budget(xp, getattr(rows.X, "device", None), options))
    width, error = 1.0, None  # kernel="auto"'s multiple of sigma="scale"; the rule's relative error
    if est._chooses_kernel(loss):
        alpha, landmarks, width, error = est._choose_kernel(rows, alpha, loss, seed, precision,
                                                            options["memory_budget"], options["n_threads"])
    else:
        est.kernel_ = est.kernel
    est.sigma_ = est._resolve_sigma(rows.X, rows.w)
    if width != 1.0:
        est.sigma_ = est.sigma_ * width
    kernel = est._bound_kernel()
    psd = True if kernel is None else kernel.psd
    est._warn_if_not_psd(kernel, rows.X)
    # the budget's exact model for the squared loss only: a smooth loss's Newton steps take many
    # products with K, each n^2 per class
    budget = options["memory_budget"] if loss is SquaredLoss else None
    w_host = np.asarray(to_numpy(rows.w))
    center_rows = est._choose_centers(rows.X, w_host, rng, psd, budget, squared=loss is SquaredLoss)
    est._center_rows = center_rows
    centers = None if center_rows is None else take_rows(rows.X, center_rows)
    if alpha == "auto" and not psd:  # the rule reads a PSD kernel's spectrum; gd as without ridge
        alpha = 0.0
    solver = est.solver
    if solver == "auto":
        solver = choose_solver(alpha=alpha, psd=psd, centers=centers is not None, loss=loss)
    _check_solver(est, solver, loss, kernel, centers)
    # FALKON's change of variables amplifies float32 rounding in K_nm products far beyond the signal
    # when alpha is small: centers run in float64 under dtype="auto"
    dtype = "float64" if options["dtype"] == "auto" and centers is not None else options["dtype"]
    if dtype == "auto":  # by the distinct rows of positive weight: rows of zero weight, or copies, change no precision
        n_distinct = distinct_rows(w_host, rows.replicates)
        dtype = resolve_dtype(dtype, n_distinct, n_distinct)
    operator_budget, matrices = options["memory_budget"], np.float64
    if centers is not None:  # the centers' m x m matrices first, checked before any allocation; K gets the rest
        matrices = center_dtype(centers.shape[0], operator_budget, rows.X, dtype)
        operator_budget -= check_center_memory(centers.shape[0], operator_budget, rows.X, matrices)
    operator = KernelOperator(
        rows.X, kernel, centers=centers, memory_budget=operator_budget, dtype=dtype,
        threads=options["n_threads"], center_rows=center_rows, center_dtype=matrices,
    )
    if centers is not None:
        landmarks = None  # a factor of the rows, not of the centers' system
    if alpha == "auto":
        # a smooth loss's rule keeps the precision K is stored in: on a float32 K, float64's lower floor
        # lets Newton chase nearly separable problems to costly ridges; on a float64 K, float32's smooths
        if loss is not SquaredLoss and operator.dtype == np.float32:
            precision = np.float32
        alpha, landmarks, error = _rule(est, rows, kernel, loss, seed, precision, centers is None,
                                        options["n_threads"])
    elif (landmarks is None and centers is None and psd and solver == "cg" and is_classifier(est)
          and est._combines(loss) and on_host(rows.w) and combiner_rows(rows.w, seed) is None):
        # the output layer's factor of every row (on the host, as the layer), drawn before a fixed ridge's solve:
        # its preconditioner reuses it
        landmarks = layer_landmarks(rows.X, kernel, rows.w, est.fit_intercept, est._precomputed,
                                    options["n_threads"], seed)
    tol = resolve_tol(est, loss, error, solver, centers is not None)
    return FitProblem(rows=rows, loss=loss, kernel=kernel, alpha=alpha, tol=tol, solver=solver, operator=operator,
                      centers=centers, landmarks=landmarks, seed=seed, options=options)


def _rule(est, rows, kernel, loss, seed, precision, full_model, threads):
    """``alpha="auto"``'s ``(alpha, landmarks, error)`` for ``kernel`` (``_auto_alpha.auto_alpha``), on ``threads``."""
    return auto_alpha(
        rows.X, kernel, rows.Y, rows.w, rows.replicates, est.fit_intercept, np.random.RandomState(seed),
        full_model=full_model, precomputed=est._precomputed, loss=loss, precision=precision,
        classify=is_classifier(est) and loss is SquaredLoss and est._left_out_classes(loss), threads=threads,
    )


def widener(est, problem):
    """``widen(factor)`` for ``_loo_ridge.choose``: the full model's problem with its kernel ``factor`` times
    as wide, its operator and rule's ridge anew; None where the width is the user's or not a distance's
    scale (a given sigma, a polynomial's inner-product scale, a precomputed kernel)."""
    kernel = problem.kernel
    if (kernel is None or not kernel.spec.centred_scale or not isinstance(kernel.params.get("sigma"), float)
            or not (isinstance(est.sigma, str) and est.sigma == "scale")):
        return None
    options, operator = problem.options, problem.operator

    def widen(factor):
        wider = loo_ridge.scaled(kernel, factor)
        wide = KernelOperator(problem.rows.X, wider, memory_budget=options["memory_budget"], dtype=options["dtype"],
                              threads=options["n_threads"])
        precision = np.float32 if operator.dtype == np.float32 else np.float64  # as prepare_fit's smooth loss
        alpha, landmarks, _ = _rule(est, problem.rows, wider, problem.loss, problem.seed, precision, True,
                                    options["n_threads"])
        return replace(problem, kernel=wider, operator=wide, alpha=alpha, landmarks=landmarks)

    return widen


def model_attributes(est, problem, coef, intercept, ravel):
    """What predict needs, from solver coefficients (also for callbacks mid-fit)."""
    rows, xp = problem.rows, xp_of(coef)
    X_fit = rows.X if problem.centers is None else problem.centers
    if est._precomputed and rows.train is not None:
        # predict takes kernels against all training samples: zero weight for the validation part
        full = zeros_as(coef, (rows.X_given.shape[0], coef.shape[1]))
        coef, X_fit = add_at_rows(full, rows.train, coef), rows.X_given
    coef, intercept = coef * rows.y_scale, intercept * rows.y_scale
    if ravel:
        coef, intercept = xp.reshape(coef, (-1,)), float(intercept[0])
    return {"X_fit_": X_fit, "dual_coef_": coef, "intercept_": intercept, "_compute_dtype": problem.operator.dtype}


def solver_settings(est, problem, callback=None):
    """The solver's settings from the estimator's parameters and the resolved problem."""
    rows = problem.rows
    coef_init, intercept_init = est._warm_start_init(problem.operator.m, rows.Y.shape[1])
    return SolverSettings(
        alpha=problem.alpha,
        step_size=est.step_size,
        max_iter=est.max_iter,
        tol=problem.tol,
        fit_intercept=est.fit_intercept,
        coef_init=None if coef_init is None else coef_init / rows.y_scale,
        intercept_init=None if intercept_init is None else intercept_init / rows.y_scale,
        verbose=est.verbose,
        psd=True if problem.kernel is None else problem.kernel.psd,
        kernel_name="precomputed" if problem.kernel is None else problem.kernel.name,
        random_state=problem.seed,
        callback=callback,
        memory_budget=int(problem.options["memory_budget"]),
        loss=problem.loss,
        reuse=getattr(est, "_path_state", None),
        landmarks=problem.landmarks,
    )


def solve(est, problem, callback, monitor):
    """Run the solver; returns ``(problem, coef, intercept, n_iter, curve, result, held_out)``, the problem
    with the operator that ran last, the rest in the solver's units; ``held_out``: the logistic ridge rule's
    held-out fits of the chosen model (``_loo_ridge.HeldOutFits``; None where it made none).

    Where ``options["dtype"]`` is "auto" and float32's rounding stopped the fit short, it goes on in
    float64 from where float32 got to. ``callback(problem)``: the solver's callback (None: none).
    With early stopping (``monitor``), the best iterate it saw.
    """
    rows, operator, options = problem.rows, problem.operator, problem.options
    settings = solver_settings(est, problem, callback(problem))
    path_iter, start, held_out = 0, None, None
    if (est.alpha == "auto" and problem.loss is not SquaredLoss and problem.centers is None and monitor is None
            and settings.psd):  # a small problem's ridge by leave-one-out; the path's fit there is its start
        problem, start, path_iter, held_out = loo_ridge.choose(problem, settings, widener(est, problem))
        operator = problem.operator
        settings = replace(settings, alpha=problem.alpha, landmarks=problem.landmarks)
        if problem.kernel is not None and "sigma" in problem.kernel.params:
            est.sigma_ = problem.kernel.params["sigma"]
        if start is not None:
            settings = replace(settings, coef_init=start[0], intercept_init=start[1])
    retry = options["dtype"] == "auto" and operator.dtype == np.float32
    # from the path's fit, converged at least as tightly, a stop at rounding returns that optimum or better
    settings.rounding_stops = [] if retry or (start is not None and start[2]) else None
    settings.float64_retry = retry
    result = run_solver(problem.solver, operator, rows.Y, rows.w, settings)
    n_iter, curve = path_iter + result.n_iter, list(result.loss_curve)
    if settings.rounding_stops and retry:
        operator = KernelOperator(
            rows.X, problem.kernel, centers=problem.centers, memory_budget=options["memory_budget"],
            dtype="float64", threads=options["n_threads"], center_rows=est._center_rows,
        )
        problem = replace(problem, operator=operator)
        settings = replace(settings, coef_init=result.dual_coef, intercept_init=result.intercept,
                           rounding_stops=None, float64_retry=False, callback=callback(problem))
        result = run_solver(problem.solver, operator, rows.Y, rows.w, settings)
        n_iter, curve = n_iter + result.n_iter, curve + list(result.loss_curve)
    coef, intercept = result.dual_coef, result.intercept
    if monitor is not None and monitor.best is not None:
        coef, intercept = monitor.best
        curve = curve[: monitor.best_iter]  # loss_curve_ ends at the returned model
    return problem, coef, intercept, n_iter, curve, result, held_out


def fit(est, X, Y, sample_weight, stratify, options, progress, ravel):
    """Fit ``est`` in memory (its BLAS single-threaded by the caller) and set its fitted attributes.

    ``progress``: the callback bridge (None: no callbacks); the rest as ``prepare_fit``.
    ``ravel``: a single-output regressor's 1-D ``dual_coef_`` and float ``intercept_``.
    """
    problem = prepare_fit(est, X, Y, sample_weight, stratify, options)
    est.alpha_ = problem.alpha
    rows = problem.rows
    monitor = None
    if rows.validation is not None:
        monitor = ValidationMonitor(
            problem.kernel, *rows.validation, rows.X if problem.centers is None else problem.centers,
            est.n_iter_no_change, problem.tol, problem.options, est._precomputed, problem.loss,
        )

    def callback(running):  # the progress bridge reconstructs models with the operator that runs
        return chain_callbacks(monitor, None if progress is None else progress.iteration(
            est, lambda coef, intercept: model_attributes(est, running, coef, intercept, ravel)))

    problem, coef, intercept, n_iter, curve, result, held_out = solve(est, problem, callback, monitor)
    if est._predictive:  # the Gaussian-process view: predict(X, return_std=True), computed when first asked for
        # a new observation's noise is that of a row of the mean weight: N is Kish's effective number of rows
        n_observations = effective_count(np.asarray(to_numpy(rows.w)), rows.replicates)
        est._deferred_posterior = DeferredPosterior(
            rows.X, problem.centers, est._center_rows, problem.operator.dtype, problem.options, rows.Y, coef,
            intercept, rows.w, problem.alpha, n_observations, rows.y_scale,
            problem.kernel is None or problem.kernel.psd, problem.seed, rows.replicates)
    export(est, problem, coef, intercept, n_iter, curve, result, ravel, monitor)
    if is_classifier(est) and est._combines(problem.loss):  # the output layer, on (at most 20,000 of) its rows
        picked = combiner_rows(rows.w, problem.seed)
        Y, w, X = (A if picked is None else take_rows(A, picked) for A in (rows.Y, rows.w, rows.X))
        shares = class_shares(Y, w)  # the layer's rows': the intercept-only model's probabilities
        left_out = left_out_outputs(rows.X, picked, problem.kernel, Y, w, problem.alpha, est.fit_intercept,
                                    est._precomputed, problem.options["n_threads"], problem.seed,
                                    problem.landmarks if picked is None else None)
        outputs, w = left_out or (training_outputs(problem.operator, coef, intercept, picked), w)
        est.combiner_ = fit_output_layer(outputs * rows.y_scale, Y, w, X, problem.seed)
        est.label_noise_ = combiner_label_noise(est.combiner_, outputs * rows.y_scale, Y, w, X, problem.seed, shares)
        est._noise_shares = like(shares, rows.Y)  # in X's namespace, as every array
    elif is_classifier(est) and est._layers(problem, monitor):  # the logistic loss's, where it lowers held-out loss
        est.combiner_, est.label_noise_, shares = output_layer(problem, solver_settings(est, problem), held_out)
        est._noise_shares = None if shares is None else like(shares, rows.Y)


@dataclass(frozen=True)
class DeferredPosterior:
    """What a fit keeps for its posterior (``_posterior``), which is computed when first asked for.

    The posterior's factors cost more than many fits (a centers model's ``K_nm' W K_nm``, n m^2; a
    small exact model's dense inverse, n^3); the kernel matrix is evaluated anew from the training rows.
    """

    X: object  # the training rows (the precomputed kernel's block)
    centers: object
    center_rows: object
    dtype: object  # the operator's, as the solver last ran it
    options: dict
    Y: object
    coef: object
    intercept: object
    w: object
    alpha: float
    n_observations: float
    y_scale: float
    psd: bool
    seed: int
    replicates: object

    def compute(self, est):
        """The posterior of ``est``'s fit (``est._fit_posterior``), or None for a kernel that is not PSD."""
        if not self.psd:
            return None
        operator = KernelOperator(
            self.X, est._bound_kernel(), centers=self.centers, memory_budget=self.options["memory_budget"],
            dtype=self.dtype, threads=self.options["n_threads"], center_rows=self.center_rows,
        )
        return est._fit_posterior(operator, self.Y, self.coef, self.intercept, self.w, self.alpha,
                                  self.n_observations, self.centers is not None, self.y_scale, self.psd, self.seed,
                                  self.replicates, self.X)


def export(est, problem, coef, intercept, n_iter, curve, result, ravel, monitor=None):
    """Set the fitted attributes from the solver's coefficients and objective curve (its units)."""
    for name, value in model_attributes(est, problem, coef, intercept, ravel).items():
        setattr(est, name, value)
    est.alpha_, est.tol_ = problem.alpha, problem.tol
    est.n_iter_ = n_iter
    est.loss_curve_ = unscale_curve(curve, problem.rows.y_scale)
    est.validation_loss_curve_ = None if monitor is None else unscale_curve(monitor.curve, problem.rows.y_scale)
    est.step_size_ = result.step_size
    est.solver_ = problem.solver
    est.n_centers_ = problem.operator.m
