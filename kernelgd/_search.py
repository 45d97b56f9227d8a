"""The machinery of the CV estimators: scorers, the width walk and the shared search (``_KernelCV``).

kernelgd._model_selection holds the two public estimators; kernelgd._loo the
closed-form leave-one-out they use where it applies.
"""

import inspect
import threading
from copy import deepcopy
import time
import warnings
from contextlib import nullcontext
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin, is_classifier
from sklearn.metrics import check_scoring, log_loss, make_scorer
from sklearn.model_selection import KFold, StratifiedKFold, check_cv
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    check_is_fitted,
)

from ._array_api import (
    add_at_rows, as_float64, block_of, fortran, like, on_host, rows_of, scales_like, take_rows, to_numpy, xp_of,
    zeros_as,
)
from ._base import AUTO_KERNELS, CallbackSupportMixin, _check_same_namespace, resolve_options, with_callbacks
from ._auto_alpha import largest_output
from ._combiner import layer_classes
from ._operator import KernelOperator, n_threads, single_threaded_blas
from ._progress import SearchProgress
from ._regressor import KernelGDRegressor
from ._solvers._krylov import rp_cholesky
from ._warnings import held_back, labels_checked, recorded
from ._loo import _eigen_system, _loo_scores, _low_rank_system, score_predictions
from ._replicates import collapse, distinct_groups, distinct_rows, draw_groups, replicate_groups, subset_groups
from .kernels import _CarriesRegisteredKernels, bind_kernel, check_sparse_support, get_spec

# Exact leave-one-out (an O(n^3) eigendecomposition per width) up to this many rows.
LOO_MAX_SAMPLES = 3000
# Beyond, leave-one-out of a rank-r pivoted-Cholesky approximation K ~ F F' (O(n r^2)).
LOW_RANK_LOO_RANK = 2000
# Default widths: sigma_scale * 2**(k / 2), |k| <= WIDTH_STEPS, walked to the best (see _WidthWalk).
WIDTH_STEPS = 8
# K-fold runs its folds in worker processes, one per core, where the search's rows^2 x target columns reach
# this: starting a worker (importing kernelgd, seconds) costs more than smaller searches take.
FOLD_PROCESSES_MIN_WORK = 4_000_000
# Default ridges, per sample (KernelRidge's alpha / n).
DEFAULT_ALPHAS = np.logspace(-10, 0, 21)
# A fold's decreasing alpha path stops once this many alphas in a row have not beaten the fold's
# best score (one decade on the default grid): the smallest ridges cost the most solves.
PATH_PATIENCE = 2
# K-fold races widths on paired folds: from RACE_FOLDS folds on, a width whose best scores on the folds
# so far (each fold's best alpha) sum below the best candidate's on the same folds stops there.
RACE_FOLDS = 2
# A width searched after another starts its alpha path this many decades above the best alpha so far
# (neighbouring widths' best alphas are close), and climbs back up where its first alpha scores best.
PATH_HEADROOM = 2
# The refit's tolerance tracks the chosen model's error down to this (float64 CG's reach).
MIN_REFIT_TOL = 1e-8
# The search on held-out rows (_held_out_search) holds out one row in this many.
HOLDOUT_SHARE = 5
# Its ridge path: from the rules' ridge down by this factor per step, at most RIDGE_STEPS steps (one decade: each
# smaller ridge costs more solver iterations, and the rank-500 rules are rarely further off).
RIDGE_STEP = 10**0.5
RIDGE_STEPS = 2


def _best_mean(split_scores):
    """The best alpha's mean score over the folds; -inf for a width stopped before its last fold."""
    means = split_scores.mean(axis=1)
    return float(np.nanmax(means)) if np.isfinite(means).any() else -np.inf


class _OnHost:
    """A fitted model whose predictions the scorers read as numpy arrays: the searches fit on the inputs' device
    but score on the host, so scikit-learn's metrics never meet labels and predictions of two namespaces.
    """

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):  # what the model lacks (predict_proba of combine="argmax") stays missing
        attribute = getattr(self.model, name)
        if name not in ("predict", "decision_function", "predict_proba", "predict_log_proba"):
            return attribute

        def method(X):
            return np.asarray(to_numpy(attribute(X)))

        method.__name__ = name  # scikit-learn's scorers read which response they got by its name
        return method


class _Decisions(ClassifierMixin, BaseEstimator):
    """A fitted "classifier" whose decision values are given (leave-one-out ones), for classifier scorers.

    ``labels`` (class indices) and ``weights`` of the rows: its labels are then an output layer's
    (``_combiner.layer_classes``), as the refit's are with ``combine="logistic"``; else the largest output's.
    """

    def __init__(self, classes, scores, labels=None, weights=None):
        self.classes = classes
        self.scores = scores
        self.labels = labels
        self.weights = weights
        self.classes_ = classes

    def decision_function(self, X):
        return self.scores[:, 0] if self.scores.shape[1] == 1 else self.scores

    def predict(self, X):
        F = self.scores
        index = largest_output(F, None, None).astype(int)
        if self.labels is not None:
            read = np.isfinite(F).all(axis=1)
            index[read] = layer_classes(F[read], self.labels[read], self.weights[read])
        return self.classes_[index]


class _Unweighted:
    """A scorer called without ``sample_weight``: where the user gave none, a metric need not take it."""

    def __init__(self, scorer):
        self.scorer = scorer

    def __call__(self, estimator, X, y, sample_weight=None):
        return self.scorer(estimator, X, y)


def _takes_sample_weight(scorer):
    """Whether a scorer's metric (or a plain scoring callable) accepts ``sample_weight``."""
    function = getattr(scorer, "_score_func", scorer)
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: assume it does not
        return False
    return any(p.name == "sample_weight" or p.kind is p.VAR_KEYWORD for p in parameters)


def _scorer(estimator, scoring, sample_weight, classes=None):
    """The search's scorer; it passes sample weights on where the user gave them and it takes them (else it
    scores unweighted, as GridSearchCV's does, the fits staying weighted). The log-loss is told every class.
    """
    if scoring == "neg_log_loss" and classes is not None:
        scoring = make_scorer(log_loss, greater_is_better=False, response_method="predict_proba", labels=classes)
    scorer = check_scoring(estimator, scoring=scoring)
    weighted = sample_weight is not None and _takes_sample_weight(scorer)
    return scorer if weighted else _Unweighted(scorer)


class _EveryClass(ClassifierMixin, BaseEstimator):
    """A fold's classifier whose probabilities have a column, of zeros, for every class it never saw."""

    def __init__(self, model, classes):
        self.model = model
        self.classes_ = classes

    def predict(self, X):
        return self.model.predict(X)

    def predict_proba(self, X):
        P = np.zeros((X.shape[0], len(self.classes_)))
        P[:, np.searchsorted(self.classes_, self.model.classes_)] = self.model.predict_proba(X)
        return P


def _samples(n):
    return f"{n} sample" + ("" if n == 1 else "s")


def _name(kernel):
    return get_spec(kernel).name


def _is_rbf(kernel):
    return isinstance(kernel, str) and get_spec(kernel).name == "rbf"


def _scale_sigma(X, w, kernel="rbf"):
    """The ``sigma="scale"`` of the base estimator for ``kernel``: for rbf the root of the summed feature variances."""
    return KernelGDRegressor(kernel=kernel)._resolve_sigma(X, w)


def _shared_memory_backend():
    """Whether the joblib backend the widths would run on shares this process's memory (threads)."""
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend(prefer="threads")
    return bool(getattr(backend, "supports_sharedmem", False))


class _WidthWalk:
    """Widths ``scale * 2**(k / 2)`` of one kernel walked to the best score: ``start`` scores the factors 1/2, 1
    and 2, ``finish`` walks on and returns ``[(sigma, scores), ...]``, ``score(sigma)`` an (n_alphas, n_splits)
    array and a width's value its best alpha's mean.

    From the first three the walk steps by factors of 2 towards the better end while that end is the best (within
    ``2**(+-WIDTH_STEPS / 2)``), then scores the best width's two half-step neighbours: 5 to 7 kernel
    factorisations where the score is unimodal in log sigma, against 13 for the half-step grid. A step is skipped
    where it cannot beat ``incumbent`` (another kernel's best value): where the score is concave in log sigma, a
    step gains at most what the step before it gained, and a half step at most what the whole step beside it lost.
    """

    def __init__(self, scale, score, n_jobs=None):
        self.scale, self.score, self.n_jobs, self.done = scale, score, n_jobs, {}

    def _run(self, steps):
        steps = [k for k in steps if k not in self.done and abs(k) <= WIDTH_STEPS]
        results = Parallel(n_jobs=self.n_jobs, prefer="threads")(
            delayed(self.score)(self.scale * 2.0 ** (k / 2)) for k in steps)
        self.done.update(zip(steps, results))

    def _best(self):  # ties go to the wider kernel: the smoother model
        return max(self.done, key=lambda k: (_best_mean(self.done[k]), k))

    def value(self):
        """The best value scored so far."""
        return _best_mean(self.done[self._best()])

    def start(self):
        self._run([0, -2, 2])  # the middle first: with K-fold the others race against it
        return self

    def finish(self, incumbent=-np.inf):
        while True:
            k = self._best()
            step = 2 if k == max(self.done) else -2 if k == min(self.done) else 0
            if not step or abs(k + step) > WIDTH_STEPS or not self._may_beat(k, k - step, incumbent):
                break
            self._run([k + step])
        k = self._best()
        beside = [j for j in (k - 2, k + 2) if j in self.done]
        if not beside or self._may_beat(k, min(beside, key=lambda j: _best_mean(self.done[j])), incumbent):
            self._run([k - 1, k + 1])
        return [(self.scale * 2.0 ** (k / 2), self.done[k]) for k in sorted(self.done)]

    def _may_beat(self, k, other, incumbent):
        """Whether a step from width k away from ``other`` can beat ``incumbent``: by concavity it gains at most
        what k gains over ``other``."""
        if incumbent == -np.inf:
            return True
        value = _best_mean(self.done[k])
        return value + (value - _best_mean(self.done[other])) >= incumbent


class _GivenWidths:
    """The widths a user gave (or none, for a kernel without one), all scored at ``start``: a walk's interface."""

    def __init__(self, sigmas, score, n_jobs=None):
        self.sigmas, self.score, self.n_jobs = sigmas, score, n_jobs

    def start(self):
        self.found = list(zip(self.sigmas, Parallel(n_jobs=self.n_jobs, prefer="threads")(
            delayed(self.score)(s) for s in self.sigmas)))
        return self

    def value(self):
        return max(_best_mean(scores) for _, scores in self.found)

    def finish(self, incumbent=-np.inf):
        return self.found


def _walk_widths(scale, score, n_jobs=None, incumbent=-np.inf):
    """``_WidthWalk``'s widths of one kernel, walked to the best: ``[(sigma, scores), ...]``."""
    return _WidthWalk(scale, score, n_jobs).start().finish(incumbent)


def _fold_path(estimator_class, params, K, train, test, y_fit, w, y_host, w_host, alphas, start, scorer,
               every_class=None, record=False):
    """One fold's ``(scores, warnings)`` along the alpha path, from its block of the kernel matrix ``K``.

    The path runs down from ``alphas[start]``, warm-started, until ``PATH_PATIENCE`` alphas past the fold's
    best; then up from the start while the score rises, where the start scored best. Alphas off the path
    score NaN. ``every_class``: the classes the logistic scores need. ``record``: return the warnings raised
    (a worker process's would be lost) rather than raising them. The fits' own warnings (a solve stopped short
    at a probe's ridge) are held back (``_warnings.held_back``): each scores what it reached, and the user gets
    the refit, whose warnings show.
    """
    scores = np.full(len(alphas), np.nan)
    K_train, K_test = block_of(K, train, train), block_of(K, test, train)
    model = estimator_class(**params)
    # the path's own symmetric blocks: no symmetry check, and each solve may keep the last one's
    # preconditioner (kernelgd._solvers._common.SolverSettings.reuse)
    model._path_state = {}
    model._predictive = False  # scored on its predictions only: no posterior
    y_train, w_train = rows_of(y_fit, train), rows_of(w, train)

    def score(i):
        with labels_checked():  # the user's labels are checked once, by the search's own fit
            model.set_params(alpha=alphas[i]).fit(K_train, y_train, sample_weight=w_train)
        scored = _OnHost(model)
        if every_class is not None and len(model.classes_) < len(every_class):
            scored = _EveryClass(scored, every_class)  # a class only in the test rows
        scores[i] = scorer(scored, K_test, y_host[test], sample_weight=w_host[test])
        return scores[i]

    with warnings.catch_warnings(record=True) if record else nullcontext() as caught, held_back():
        if record:
            warnings.simplefilter("always")  # the caller's filters decide
        for path in (range(start, len(alphas)), range(start - 1, -1, -1)):
            best, since_best = -np.inf if path.step > 0 else scores[start], 0
            for i in path:
                value = score(i)
                best, since_best = (value, 0) if value > best else (best, since_best + 1)
                if since_best >= (PATH_PATIENCE if path.step > 0 else 1):
                    break
            if start == 0 or np.nanargmax(scores) != start:
                break
    return scores, [w.message for w in caught or ()]


class _KernelCV(_CarriesRegisteredKernels, CallbackSupportMixin, BaseEstimator):
    """What the CV estimators share: the grids, the per-width search, the K-fold path and the refit."""

    _parameter_constraints: dict = {
        "kernel": [str, callable, list, tuple],
        "sigmas": ["array-like", None],
        "alphas": ["array-like", None],
        "cv": ["cv_object"],
        "scoring": [str, callable, None],
        "n_jobs": [Integral, None],
        "max_search_samples": [Interval(Integral, 10, None, closed="left")],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "fit_intercept": ["boolean"],
        "solver": [str],
        "n_centers": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "options": [dict, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        kernel="rbf",
        sigmas=None,
        alphas=None,
        cv=None,
        scoring=None,
        n_jobs=None,
        max_search_samples=10_000,
        degree=3,
        coef0=1.0,
        kernel_params=None,
        fit_intercept=True,
        solver="auto",
        n_centers="auto",
        max_iter=1000,
        tol="auto",
        options=None,
        random_state=None,
        verbose=0,
    ):
        self.kernel = kernel
        self.sigmas = sigmas
        self.alphas = alphas
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.max_search_samples = max_search_samples
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.n_centers = n_centers
        self.max_iter = max_iter
        self.tol = tol
        self.options = options
        self.random_state = random_state
        self.verbose = verbose


    # set by subclasses
    _estimator_class = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # searched on a dense copy (_model_selection._dense)
        tags.array_api_support = True
        return tags

    def _common_params(self):
        return dict(
            kernel=self.kernel, degree=self.degree, coef0=self.coef0, kernel_params=self.kernel_params,
            fit_intercept=self.fit_intercept, solver=self.solver, n_centers=self.n_centers,
            max_iter=self.max_iter, tol=self.tol, options=self.options, random_state=self.random_state,
        )

    def _base(self, **params):
        return self._estimator_class(**{**self._common_params(), **self._extra_params(), **params})

    def _extra_params(self):
        return {}

    def _kernels(self):
        """The candidate kernels: ``kernel`` itself, or each entry of a list of them."""
        kernels = list(self.kernel) if isinstance(self.kernel, (list, tuple)) else [self.kernel]
        if not kernels:
            raise ValueError("kernel is an empty list: give a kernel, or a list of candidate kernels.")
        for kernel in kernels:
            if isinstance(kernel, str) and kernel == "precomputed":
                raise ValueError(f"{type(self).__name__} evaluates the kernel itself; kernel='precomputed' is "
                                 "not supported.")
            get_spec(kernel)  # an unknown name is a clear error before any work
        return kernels

    def _alphas(self):
        """The ridge grid, decreasing: the warm-start path of the K-fold solves."""
        alphas = DEFAULT_ALPHAS if self.alphas is None else np.asarray(self.alphas, dtype=float).ravel()
        if not alphas.size or not np.all(np.isfinite(alphas) & (alphas >= 0)):
            raise ValueError(f"alphas must be a non-empty list of finite floats >= 0, got {self.alphas!r}.")
        return np.sort(alphas)[::-1]

    def _sigmas(self):
        """The given widths, checked; None: walk the default ones."""
        if self.sigmas is None:
            return None
        sigmas = np.asarray(self.sigmas, dtype=float).ravel()
        if not sigmas.size or not np.all(np.isfinite(sigmas) & (sigmas > 0)):
            raise ValueError(f"sigmas must be a non-empty list of finite floats > 0, got {self.sigmas!r}.")
        return list(sigmas)

    def _widths(self, kernel, X, w, score):
        """The widths searched for ``kernel``, started (``_WidthWalk``, or ``_GivenWidths`` for given ``sigmas`` and
        a kernel without a width)."""
        if "sigma" not in get_spec(kernel).params:
            return _GivenWidths([None], score).start()
        sigmas = self._sigmas()
        if sigmas is not None:
            return _GivenWidths(sigmas, score, self.n_jobs).start()
        return _WidthWalk(_scale_sigma(X, w, kernel), score, self.n_jobs).start()

    def _kernel(self, X, Y, kernel, sigma):
        params = dict(self.kernel_params or {})
        if sigma is not None:
            params["sigma"] = scales_like(sigma, X)  # ARD's scales per feature, fitted on the host: on X's device
        bound = bind_kernel(kernel, degree=self.degree, coef0=self.coef0, kernel_params=params)
        check_sparse_support(bound.spec, X, Y)
        return as_float64(bound(as_float64(X), as_float64(Y)))

    def _folds(self, y, classifier):
        """``cv``, or by default 5 folds (fewer where the data are too few), with a clear error where too few."""
        name = type(self).__name__
        if self.cv is None:
            largest = int(np.max(np.unique(y, return_counts=True)[1])) if classifier else len(y)
            if largest < 2:
                raise ValueError(
                    f"{name} found {_samples(len(y))}, too few for cross-validation: it needs at least 2 "
                    f"{'of one class' if classifier else 'samples'}. Fit on more data, or use "
                    f"{'KernelGDClassifier' if classifier else 'KernelGDRegressor'} with sigma and alpha set."
                )
            return min(5, largest)  # stratified folds need as many members of the largest class
        if isinstance(self.cv, Integral) and self.cv > len(y):
            raise ValueError(
                f"{name}(cv={self.cv}) needs at least {self.cv} samples, one per fold; got {_samples(len(y))}. "
                "Pass a smaller cv or more data."
            )
        return self.cv

    def _fold_workers(self, X, n_splits, n_rows, n_columns):
        """Folds fitted at once in worker processes, one per core the widths leave free, on the host: a small fold's
        products gain little from threads, the factorizations run on one thread, and scipy's BLAS wrappers hold
        the GIL (bench_cv_classification.py).
        """
        if not on_host(X):  # one device: its fits queue on it
            return 1
        if n_rows**2 * n_columns < FOLD_PROCESSES_MIN_WORK:  # starting the workers would cost more
            return 1
        cores = n_threads(resolve_options(self.options)["n_threads"])
        return int(max(1, min(n_splits, cores // max(1, effective_n_jobs(self.n_jobs)))))

    def _splits(self, X, y, classifier):
        """The folds of the rows of X: ``cv``'s, or where ``cv`` is None or an int and some rows repeat,
        as many folds of the distinct rows (as ``check_cv`` splits rows, by the label of each one's first
        copy), every copy of a row in its fold: a copy in the test fold would be predicted by its twin in the
        training rows, which favours interpolation, and the rows repeated then split as their integer
        weights do. Copies of one row alone split as ``check_cv`` splits rows: every model of them is the
        intercept-only one."""
        folds, chosen = self._folds(y, classifier), self.cv is None
        with warnings.catch_warnings():
            if chosen:  # a class with fewer rows than the folds is missing from some test folds: the scores allow it
                warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
            if isinstance(folds, Integral):
                group_of, n_groups = replicate_groups(X)
                # one distinct row: every candidate is the intercept-only model, and its copies split as rows do
                if 2 <= n_groups < X.shape[0]:
                    if n_groups < folds and not chosen:  # the default folds take fewer
                        raise ValueError(
                            f"{type(self).__name__} found {n_groups} distinct rows of X, too few for {folds} "
                            "folds (copies of a row share a fold). Pass cv with at most that many folds."
                        )
                    first = np.unique(group_of, return_index=True)[1]  # group g's first row: first[g]
                    labels = np.asarray(to_numpy(y))[first]
                    n_splits = min(folds, n_groups)
                    stratified = classifier and np.unique(labels, return_counts=True)[1].max() >= n_splits
                    splitter = StratifiedKFold(n_splits) if stratified else KFold(n_splits)
                    return [(np.flatnonzero(np.isin(group_of, train)), np.flatnonzero(np.isin(group_of, test)))
                            for train, test in splitter.split(first[:, None], labels)]
            return list(check_cv(folds, y, classifier=classifier).split(to_numpy(X), y))

    def _kfold_scores(self, X, Y, sw, kernel, sigma, alphas, scorer, incumbent=None, near=None):
        """Scores of every alpha on every fold, from one kernel matrix (of a subsample where n is large); alphas
        outside a fold's path score NaN. ``incumbent``: the best candidate's score on each fold so far; from
        ``RACE_FOLDS`` folds on the width stops once its folds' best scores sum below it (the same folds for every
        width). ``near``: the best candidate's alpha, each path starting ``PATH_HEADROOM`` decades above it.
        """
        rng = check_random_state(self.random_state)
        # zero-weight rows neither train nor score a fold (a fold of them alone has no score); a given
        # splitter or list of splits may index every row (PredefinedSplit), so it keeps them
        rows = np.arange(X.shape[0])
        if self.cv is None or isinstance(self.cv, Integral):
            rows = np.flatnonzero(np.asarray(to_numpy(sw)) > 0)
        n = len(rows)
        idx = rows if n <= self.max_search_samples else rows[np.sort(
            rng.choice(n, self.max_search_samples, replace=False))]
        Xs, Ys, ws = (rows_of(A, idx) for A in (X, Y, sw))
        K = self._kernel(Xs, Xs, kernel, sigma)
        y_fit = Ys if Ys.ndim == 1 or Ys.shape[1] > 1 else Ys[:, 0]
        classifier = self._estimator_class is not KernelGDRegressor
        # the folds are drawn, and every fold scored, on the host; kernels and fits stay on X's device
        y_host, w_host = np.asarray(to_numpy(y_fit)), np.asarray(to_numpy(ws))
        splits = self._splits(Xs, y_host, classifier)
        if classifier:
            for train, _ in splits:
                present = np.unique(y_host[train])
                if len(present) < 2:
                    raise ValueError(
                        f"{type(self).__name__} cannot cross-validate these labels: one of its {len(splits)} folds "
                        f"trains on class {np.asarray(present[0]).item()!r} alone, every other class's samples "
                        "being in its test rows. Give each class at least 2 samples, and use at most as many "
                        "folds as the rarest class has samples (for example cv=2)."
                    )
        scores = np.full((len(alphas), len(splits)), np.nan)  # NaN: outside the fold's path
        paired = incumbent is not None and len(idx) == n and (self.cv is None or isinstance(self.cv, Integral))
        # alphas are decreasing: the first at most PATH_HEADROOM decades above near
        start = 0 if near is None else min(int(np.searchsorted(-alphas, -near * 10.0**PATH_HEADROOM)), len(alphas) - 1)
        n_classes = len(self.classes_) if classifier else 0
        columns = n_classes if n_classes > 2 else 1 if classifier or Ys.ndim == 1 else Ys.shape[1]
        workers = self._fold_workers(X, len(splits), len(idx), columns)
        params = dict(
            kernel="precomputed", fit_intercept=self.fit_intercept, solver=self.solver, max_iter=self.max_iter,
            tol=self.tol, warm_start=True, random_state=self.random_state, options=self.options,
            **self._extra_params(),
        )
        if workers > 1:  # one thread per process: the folds share the cores
            params["options"] = {**(self.options or {}), "n_threads": 1}
        every_class = self.classes_ if classifier and self.loss == "logistic" else None

        def fold(j):  # _fold_path's arguments for fold j
            train, test = splits[j]
            return (self._estimator_class, params, K, train, test, y_fit, ws, y_host, w_host, alphas, start, scorer,
                    every_class)

        # the folds in rounds, the race judged between them: one fold at a time on one worker; on
        # several, the first RACE_FOLDS (at least a round) and then the rest, as workers free up
        if workers == 1:
            rounds = [range(j, j + 1) for j in range(len(splits))]
        elif paired:
            first_round = min(len(splits), max(RACE_FOLDS, workers))
            rounds = [range(first_round), range(first_round, len(splits))]
        else:
            rounds = [range(len(splits))]
        for group in rounds:
            first = group.start
            if not len(group):
                continue
            if paired and RACE_FOLDS <= first and (
                    np.sum(np.nanmax(scores[:, :first], axis=0)) < np.sum(incumbent[:first])):
                break  # behind the best candidate on the folds so far, even with each fold's own best alpha
            if workers == 1:
                results = [_fold_path(*fold(first))]
            else:
                results = Parallel(n_jobs=min(workers, len(group)), prefer="processes")(
                    delayed(_fold_path)(*fold(j), record=True) for j in group)
            for j, (column, caught) in zip(group, results):
                scores[:, j] = column
                for message in caught:  # a worker's warnings reach the caller, as in one process
                    warnings.warn(message, stacklevel=2)
        return scores

    def _store_results(self, rows, loo, kernels, chosen=None):
        """``rows``: (index in ``kernels``, sigma, alpha, split scores) per candidate. ``chosen``: the row ranked
        first whatever its mean score (a choice that also asks a gain beyond chance); by default the best mean."""
        several = len(kernels) > 1
        split_scores = np.array([s for *_, s in rows])
        means = split_scores.mean(axis=1)
        results = {
            "params": [({"kernel": kernels[k]} if several else {})
                       | ({} if sigma is None else {"sigma": float(sigma)}) | {"alpha": float(alpha)}
                       for k, sigma, alpha, _ in rows],
            "param_alpha": np.ma.MaskedArray([float(a) for _, _, a, _ in rows]),
            "mean_test_score": means,
            "std_test_score": np.zeros_like(means) if loo else split_scores.std(axis=1),
        }
        if several:
            results["param_kernel"] = np.ma.MaskedArray(np.array([kernels[k] for k, *_ in rows], dtype=object))
        if any(sigma is not None for _, sigma, _, _ in rows):
            results["param_sigma"] = np.ma.MaskedArray(
                [0.0 if sigma is None else float(sigma) for _, sigma, _, _ in rows],
                mask=[sigma is None for _, sigma, _, _ in rows])
        if not loo:
            for k in range(split_scores.shape[1]):
                results[f"split{k}_test_score"] = split_scores[:, k]
        # ties go to the larger alpha, then the larger width, then the earlier kernel: the smoother model
        order = np.lexsort((np.array([k for k, *_ in rows]), -np.array([s or 0.0 for _, s, _, _ in rows]),
                            -np.array([a for _, _, a, _ in rows]), -means))
        if chosen is not None:
            order = np.r_[chosen, order[order != chosen]]
        ranks = np.empty(len(rows), dtype=np.int32)
        ranks[order] = np.arange(1, len(rows) + 1)
        results["rank_test_score"] = ranks
        self.cv_results_ = results
        self.best_index_ = int(order[0])
        self.best_score_ = float(means[self.best_index_])

    @with_callbacks
    def _search(self, X_in, X, y, Y, sw, scorer, loo_scores=None):
        """Choose the kernel, width and ridge, on held-out rows (``_held_out_search``) or over the grids
        (``_grid_search``), and refit them on all the data."""
        start = time.perf_counter()
        progress = SearchProgress.start(self, X_in, y, self._sample_weight)
        self.holdout_scores_, self._held_out_fit, rule = None, None, None
        if self._by_held_out_rows(X, sw):
            rule = self._held_out_search(X, y, sw, scorer, progress, start)
        else:
            self._grid_search(X, Y, sw, scorer, loo_scores, progress, start)
        if rule is None:
            model = self._base(kernel=self.kernel_, sigma=self.sigma_ if self.sigma_ is not None else "scale",
                               alpha=self.alpha_, **self._refit_params(Y, sw))
            model._calibrates = True  # a one-off refit of the chosen ridge: the classifier's layer is checked on it
            self._start_refit(model, X)
        else:  # the rules won on held-out rows: they choose again on all of them, as the base estimator does
            model = self._base(kernel=rule)

        def refit():
            with labels_checked():
                self.best_estimator_ = model.fit(X_in, y, sample_weight=self._sample_weight)
            model.set_params(warm_start=False)  # the refit's own start, not the user's
            if rule is not None:
                self.kernel_ = self._kernels()[self._kernel_index(self._kernels(), self.best_estimator_.kernel_)]
                self.sigma_, self.alpha_ = self.best_estimator_.sigma_, self.best_estimator_.alpha_

        if progress is None:
            refit()
        else:
            progress.refit(model, refit)
            progress.end()
        for name in ("dual_coef_", "intercept_", "X_fit_", "n_iter_", "loss_curve_"):
            setattr(self, name, getattr(self.best_estimator_, name))
        self.sigma_ = scales_like(self.sigma_, self.dual_coef_)  # per-feature scales: in X's namespace too
        return self

    def _grid_search(self, X, Y, sw, scorer, loo_scores, progress, start):
        """Score every kernel's widths and alphas (by ``loo_scores(kernel, sigma, alphas)`` where given, else
        K-fold), store them and refine the best (``_refine``)."""
        kernels, alphas = self._kernels(), self._alphas()

        def search(kernel, sigma):
            if progress is not None:
                name = f"kernel={get_spec(kernel).name}" + ("" if sigma is None else f" sigma={sigma:.4g}")
                return progress.candidate(name, lambda: score_width(kernel, sigma))
            return score_width(kernel, sigma)

        # the best candidate's fold scores so far; only threads share it (under joblib's Dask
        # backend the widths run in other processes, and each scores every fold)
        race = {"best": None, "alpha": None, "lock": threading.Lock() if _shared_memory_backend() else None}

        def score_width(kernel, sigma):
            if loo_scores is not None:
                split_scores = loo_scores(kernel, sigma, alphas)[:, None]
            elif race["lock"] is None:
                split_scores = self._kfold_scores(X, Y, sw, kernel, sigma, alphas, scorer, None)
            else:
                split_scores = self._kfold_scores(X, Y, sw, kernel, sigma, alphas, scorer, race["best"], race["alpha"])
                with race["lock"]:
                    if _best_mean(split_scores) > (-np.inf if race["best"] is None else race["best"].mean()):
                        best = int(np.nanargmax(split_scores.mean(axis=1)))
                        race["best"], race["alpha"] = split_scores[best].copy(), alphas[best]
            if self.verbose:
                means = split_scores.mean(axis=1)
                if np.isfinite(means).any():
                    best = int(np.nanargmax(means))
                    result = f"best alpha={alphas[best]:.3g}  score={means[best]:.6g}"
                else:
                    result = f"stopped after {int(np.isfinite(split_scores).any(axis=0).sum())} folds (cannot win)"
                self._say(kernel if len(kernels) > 1 else None, sigma, result, start)
            return split_scores

        walks = [self._widths(kernel, X, sw, lambda s, kernel=kernel: search(kernel, s)) for kernel in kernels]
        found = {}
        # the best first round walks on first: each other kernel's steps must then beat what it reached
        for k in sorted(range(len(kernels)), key=lambda k: -walks[k].value()):
            found[k] = walks[k].finish(max((walk.value() for j, walk in enumerate(walks) if j != k), default=-np.inf))
        rows = [(k, sigma, alpha, s) for k in range(len(kernels)) for sigma, scores in found[k]
                for alpha, s in zip(alphas, scores)]
        self._store_results(rows, loo_scores is not None, kernels)
        index, self.sigma_, self.alpha_, _ = rows[self.best_index_]
        self.kernel_ = kernels[index]
        self._refine(X, Y, sw, scorer, loo_scores, start)

    def _say(self, kernel, sigma, result, start):
        """``verbose``'s line for one candidate of the grids."""
        name = "" if kernel is None else f"kernel={_name(kernel)}  "
        width = "" if sigma is None else f"sigma={sigma:.4g}  "
        print(f"[{type(self).__name__}] {name}{width}{result}  elapsed {time.perf_counter() - start:.1f}s", flush=True)

    def _by_held_out_rows(self, X, sw):
        """Whether the search compares the base estimator's rules with a few alternatives on held-out rows: with
        the default grids and ``cv=None``, beyond ``LOO_MAX_SAMPLES`` distinct rows."""
        if self.cv is not None or self.sigmas is not None or self.alphas is not None:
            return False
        return distinct_rows(np.asarray(to_numpy(sw)), distinct_groups(X)) > LOO_MAX_SAMPLES

    def _held_out_search(self, X, y, sw, scorer, progress, start):
        """Candidates fitted on a random four fifths of the rows (every copy of a row on one side) and scored on
        the other fifth: the base estimator's rules, then from the best of them ridges ``RIDGE_STEP`` apart
        downwards, each solve warm-started from the last, while the held-out score rises beyond chance
        (``_beats``), then ``_held_out_candidates`` (the regressor's per-feature scales). Returns the ``kernel``
        argument of the rules where they won (their refit chooses again on all rows), else None.

        A leave-one-out search on this many rows would run on a subsample and a low-rank factor, which misjudges
        kernels of slowly decaying spectrum and cannot resolve small ridges, at many times a fit's cost. A fit that
        warns scores what it reached, not its model: it ends the path and is never chosen.
        """
        weights = np.asarray(to_numpy(sw))
        rng = check_random_state(self.random_state)
        positive = np.flatnonzero(weights > 0)
        group_of, n_groups = replicate_groups(take_rows(X, positive))
        in_held = np.isin(group_of, rng.permutation(n_groups)[: n_groups // HOLDOUT_SHARE])
        held, fitted = positive[in_held], positive[~in_held]
        X_fit, X_held = take_rows(X, fitted), take_rows(X, held)
        y_fit, sw_fit = take_rows(y, fitted), take_rows(sw, fitted)
        y_held, w_held = np.asarray(to_numpy(y))[held], weights[held]
        held_groups = np.unique(group_of[in_held], return_inverse=True)[1]
        kernels = self._kernels()

        def score(model, name):
            def run():
                with recorded() as caught, labels_checked():
                    model._predictive = False  # scored on its predictions only: no posterior
                    model.fit(X_fit, y_fit, sample_weight=sw_fit)
                scored = _OnHost(model)
                if hasattr(self, "classes_") and len(model.classes_) < len(self.classes_):
                    scored = _EveryClass(scored, self.classes_)  # a class only in the held-out rows
                return float(scorer(scored, X_held, y_held, sample_weight=w_held)), scored, bool(caught)

            value, scored, warned = run() if progress is None else progress.candidate(name, run)
            if self.verbose:
                print(f"[{type(self).__name__}] {name}: alpha={model.alpha_:.3g}  held-out score={value:.6g}"
                      f"{'  (warned: not chosen)' if warned else ''}  elapsed {time.perf_counter() - start:.1f}s",
                      flush=True)
            return value, scored, warned

        # the rules: the default pair of kernels in one kernel="auto" fit, as the base estimator compares them
        rule_kernels = ["auto"] if self._auto_pair(kernels) else kernels
        rows, fits = [], []
        for kernel in rule_kernels:
            model = self._base(kernel=kernel)
            value, scored, warned = score(model, "rules" + ("" if kernel == "auto" else f" kernel={_name(kernel)}"))
            k = self._kernel_index(kernels, model.kernel_)
            rows.append((k, model.sigma_, model.alpha_, np.array([value])))
            fits.append((value, scored, warned, model))
        # the best rule that did not warn (the first where all did); ties go to the earlier kernel
        best = max(range(len(fits)), key=lambda i: (not fits[i][2], fits[i][0], -i))
        chosen, (value, scored, warned, model) = best, fits[best]
        self.holdout_scores_ = {"rule": value}
        kernel, sigma = kernels[rows[best][0]], model.sigma_
        alpha = model.alpha_
        for _ in range(RIDGE_STEPS if alpha > 0 and not warned else 0):
            alpha /= RIDGE_STEP
            path = deepcopy(model).set_params(kernel=kernel, sigma=sigma, alpha=alpha, warm_start=True)
            step = score(path, f"kernel={_name(kernel)}" + ("" if sigma is None else f" sigma={sigma:.4g}"))
            rows.append((rows[best][0], sigma, alpha, np.array([step[0]])))
            if step[2] or not (step[0] > value and self._beats(step[1], scored, X_held, y_held, w_held, held_groups)):
                break
            chosen, (value, scored, warned, model) = len(rows) - 1, (*step, path)
        self._store_results(rows, False, kernels, chosen=chosen)
        index, self.sigma_, self.alpha_, _ = rows[self.best_index_]
        self.kernel_ = kernels[index]
        for candidate, kernel in self._held_out_candidates(X_fit, y_fit, sw_fit, rng):
            step = score(candidate, f"kernel={_name(kernel)} sigma=(per feature)")
            better = not step[2] and step[0] > value and self._beats(step[1], scored, X_held, y_held, w_held,
                                                                      held_groups)
            self._add_result(kernel if len(kernels) > 1 else None, candidate.sigma, candidate.alpha_,
                             np.array([step[0]]), chosen=better)
            if better:
                self.kernel_, self.sigma_, self.alpha_ = kernel, candidate.sigma, candidate.alpha_
                self.best_score_ = step[0]
                value, scored, chosen, model = step[0], step[1], len(self.cv_results_["params"]) - 1, candidate
        self.holdout_scores_["search"] = self.best_score_
        self._held_out_fit = None if chosen < len(rule_kernels) else (fitted, model)
        return rule_kernels[chosen] if chosen < len(rule_kernels) else None

    @staticmethod
    def _auto_pair(kernels):
        """Whether the candidates are the base estimator's ``kernel="auto"`` pair, which one rule fit compares."""
        return len(kernels) == 2 and all(isinstance(k, str) for k in kernels) and sorted(
            get_spec(k).name for k in kernels) == sorted(AUTO_KERNELS)

    @staticmethod
    def _kernel_index(kernels, kernel):
        """The index in ``kernels`` of a rule's chosen kernel (a name where ``kernel="auto"`` chose it)."""
        for k, candidate in enumerate(kernels):
            if candidate is kernel or (isinstance(candidate, str) and isinstance(kernel, str)
                                       and get_spec(candidate).name == get_spec(kernel).name):
                return k
        raise AssertionError(f"the rule chose {kernel!r}, not one of {kernels!r}")

    def _held_out_candidates(self, X, y, sw, rng):
        """``(model, kernel)`` pairs scored after the rules and the ridge path (reading ``kernel_``, ``sigma_``
        and ``alpha_``); none by default."""
        return ()

    def _add_result(self, kernel, sigma, alpha, splits, chosen):
        """Append one candidate to ``cv_results_``; ranked first when chosen.

        Otherwise it ranks by its mean score, but never above the chosen candidate: the
        search may judge by other rows than the mean's (``_held_out_loo``) or ask a gain beyond chance
        (``_beats``), and ``best_index_`` is always the row of rank 1.
        """
        results = self.cv_results_
        results["params"].append(({} if kernel is None else {"kernel": kernel}) | {"sigma": sigma, "alpha": alpha})
        for key, value in (("param_alpha", alpha), ("param_kernel", kernel), ("param_sigma", sigma)):
            if key in results:  # object columns: a width per feature is one entry
                old = results[key]
                results[key] = np.ma.MaskedArray(list(old.data) + [value], mask=list(np.ma.getmaskarray(old)) + [False],
                                                 dtype=object if key != "param_alpha" else float)
        mean = float(np.mean(splits))
        results["mean_test_score"] = np.append(results["mean_test_score"], mean)
        results["std_test_score"] = np.append(results["std_test_score"], float(np.std(splits)))
        for k in range(len(splits) if "split0_test_score" in results else 0):
            results[f"split{k}_test_score"] = np.append(results[f"split{k}_test_score"], splits[k])
        ranks = results["rank_test_score"]
        rank = 1 if chosen else max(2, 1 + int(np.count_nonzero(results["mean_test_score"][:-1] >= mean)))
        results["rank_test_score"] = np.append(np.where(ranks >= rank, ranks + 1, ranks), rank).astype(np.int32)
        if chosen:
            self.best_index_ = len(ranks)

    def _loo(self, X, Y, sw, scorer, rescore=None):
        """``loo(kernel, sigma, alphas)``: exact leave-one-out scores, of the kernel itself up to
        ``LOO_MAX_SAMPLES`` distinct rows, else of its rank-``LOW_RANK_LOO_RANK`` pivoted-Cholesky
        (Nystroem) approximation on the rows of at most ``max_search_samples`` groups of identical
        rows (``draw_groups``: weights and the rows repeated read alike). ``rescore(predictions,
        rows)``, where given, scores the leave-one-out predictions of every alpha instead of
        ``scorer`` (the classifier's decision values)."""
        n = X.shape[0]
        xp = xp_of(X)

        # widths searched in parallel share the cores: each then runs single-threaded BLAS
        blas = nullcontext if effective_n_jobs(self.n_jobs) == 1 else single_threaded_blas

        def search_rows(rows):
            """The rows' ``(X, Y, w, scores)``, identical rows read as one (``_replicates``): a row left
            out with its copies, each copy scored by that prediction."""
            Xr, Yr, wr = (take_rows(A, rows) for A in (X, Y, sw))
            wr = wr / xp.sum(wr)
            group_of = subset_groups(copies, rows)  # X's groups, renumbered by first row as replicate_groups does
            if group_of is None:
                def scores(system, alphas):
                    if rescore is None:
                        return _loo_scores(system, Yr, wr, alphas, self.fit_intercept, scorer)[0]
                    return rescore(_loo_scores(system, Yr, wr, alphas, self.fit_intercept, None)[1], rows)

                return Xr, Yr, wr, scores
            first, Y_mean, w_sum = collapse(group_of, int(group_of.max()) + 1, to_numpy(Yr), to_numpy(wr))

            def scores(system, alphas):
                held_out = _loo_scores(system, like(Y_mean, Yr), like(w_sum, wr), alphas, self.fit_intercept, None)[1]
                held_out = [take_rows(P, group_of) for P in held_out]
                return score_predictions(held_out, Yr, wr, scorer) if rescore is None else rescore(held_out, rows)

            return take_rows(Xr, first), like(Y_mean, Yr), like(w_sum, wr), scores

        group_of, n_groups = replicate_groups(X)  # hashed once: search_rows reads its rows' groups from it
        copies = group_of if n_groups < n else None
        if n_groups <= LOO_MAX_SAMPLES:  # the distinct rows' eigensystem: copies cost nothing there
            Xd, Yd, wd, exact_scores = search_rows(np.arange(n))

            def exact(kernel, sigma, alphas):
                with blas():
                    system = _eigen_system(self._kernel(Xd, Xd, kernel, sigma), Yd, wd, self.fit_intercept)
                return exact_scores(system, alphas)

            return exact
        rng = check_random_state(self.random_state)
        idx = np.arange(n) if n <= self.max_search_samples else draw_groups(
            sw, copies, self.max_search_samples, rng)
        Xs, Ys, ws, low_rank_scores = search_rows(idx)
        seed = rng.randint(np.iinfo(np.int32).max)

        def loo(kernel, sigma, alphas):
            params = dict(self.kernel_params or {})
            if sigma is not None:
                params["sigma"] = sigma
            bound = bind_kernel(kernel, degree=self.degree, coef0=self.coef0, kernel_params=params)
            operator = KernelOperator(Xs, bound, dtype="float64", store=False, memory_budget=1 << 28)

            def columns(cols, operator=operator):
                with single_threaded_blas():
                    return fortran(operator.columns(cols))

            with blas():
                F = rp_cholesky(columns, operator.diag(), LOW_RANK_LOO_RANK, np.random.RandomState(seed))[0]
                system = _low_rank_system(F, Ys, ws, self.fit_intercept)
            return low_rank_scores(system, alphas)

        return loo

    def _beats(self, challenger, incumbent, X, y, w, group_of):
        """Whether a held-out fit of the better score beats the incumbent's beyond chance: always."""
        return True

    def _refine(self, X, Y, sw, scorer, loo_scores, start):
        """Improve on the grid's best (sigma_, alpha_, best_score_) in place; the grid search alone by default."""

    def _refit_params(self, Y, sw):
        """Parameters of the refit beyond sigma and alpha; none by default."""
        return {}

    def _start_refit(self, model, X):
        """Start a regressor's refit of a held-out search's winner from that fit, zero on the held-out rows: the
        same system on a fifth more rows, whose solve then starts near its end. Only an exact model's coefficients
        are the rows'; a classifier's are its output layer's inputs."""
        fitted, fit = self._held_out_fit or (None, None)
        self._held_out_fit = None  # a fitted model: not kept past the refit
        if fit is None or is_classifier(self) or getattr(fit, "n_centers_", None) != len(fitted):
            return
        coef = fit.dual_coef_
        full = zeros_as(coef, (X.shape[0], *coef.shape[1:]))
        model.set_params(warm_start=True)
        model.dual_coef_, model.intercept_ = add_at_rows(full, fitted, coef), fit.intercept_

    def predict(self, X):
        """Predictions of the refitted model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        check_is_fitted(self)
        _check_same_namespace(X, self, attribute="dual_coef_", method="predict")
        return self.best_estimator_.predict(X)
