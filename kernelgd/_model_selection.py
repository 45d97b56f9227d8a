"""KernelGDRegressorCV and KernelGDClassifierCV: kernel, sigma and alpha chosen from the data.

For each candidate kernel and width the kernel is evaluated once. With ``cv=None`` and
at most ``LOO_MAX_SAMPLES`` rows, one eigendecomposition of the centred,
weighted kernel matrix gives the exact leave-one-out residuals of every
alpha in closed form (as RidgeCV does for linear ridge). With more rows
(regressor, ``cv=None``) the same formula runs on a rank-``LOW_RANK_LOO_RANK``
randomly pivoted Cholesky factor ``K ~ F F'`` (O(n r^2) per width): the exact
leave-one-out error of the Nystroem model on those pivots. Otherwise each
fold's model is solved along a decreasing alpha path, warm-started from the
previous alpha, on the rows of the one kernel matrix (on a subsample of at
most ``max_search_samples`` rows where n is large), and stops once
``PATH_PATIENCE`` alphas in a row have not beaten the fold's best score; a
width that loses its first ``RACE_FOLDS`` folds to the best candidate stops
there. The chosen parameters are then refitted on all the data.
"""

import threading
import time
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MultiOutputMixin,
    RegressorMixin,
    _fit_context,
)
from sklearn.metrics import check_scoring, log_loss, make_scorer
from sklearn.model_selection import check_cv
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from . import _ard
from ._ard import fit_scales
from ._classifier import KernelGDClassifier, _class_weights
from ._base import CallbackSupportMixin, with_callbacks
from ._operator import KernelOperator, single_threaded_blas
from ._progress import SearchProgress
from ._regressor import KernelGDRegressor
from ._solvers.cg import rp_cholesky
from .kernels import _CarriesRegisteredKernels, bind_kernel, get_spec, kernel_matrix

# Exact leave-one-out (an O(n^3) eigendecomposition per width) up to this many rows.
LOO_MAX_SAMPLES = 3000
# Beyond, leave-one-out of a rank-r pivoted-Cholesky approximation K ~ F F' (O(n r^2)).
LOW_RANK_LOO_RANK = 2000
# Default widths: sigma_scale * 2**(k / 2), |k| <= WIDTH_STEPS, walked to the best (see _walk_widths).
WIDTH_STEPS = 8
# Leave-one-out batches the rows of each distinct weight (one shift each) up to this many weights.
LOO_WEIGHT_GROUPS = 32
# Default ridges, per sample (KernelRidge's alpha / n).
DEFAULT_ALPHAS = np.logspace(-10, 0, 21)
# A fold's decreasing alpha path stops once this many alphas in a row have not beaten the fold's
# best score (two decades on the default grid): the smallest ridges cost the most solves.
PATH_PATIENCE = 4
# K-fold races widths on paired folds: a width whose best score on each of its first RACE_FOLDS folds
# is below the best candidate's on the same fold stops there (it would have to win the rest by far).
RACE_FOLDS = 3
# The refit's tolerance tracks the chosen model's error down to this (float64 CG's reach).
MIN_REFIT_TOL = 1e-8


def _best_mean(split_scores):
    """The best alpha's mean score over the folds; -inf for a width stopped before its last fold."""
    means = split_scores.mean(axis=1)
    return float(np.nanmax(means)) if np.isfinite(means).any() else -np.inf


def _numpy_only(estimator, X):
    """A clear error for array API inputs, which the searches do not take yet."""
    from sklearn import get_config

    from ._array_api import namespace

    if get_config()["array_api_dispatch"] and not sp.issparse(X) and namespace(X)[0] is not np:
        raise ValueError(
            f"{type(estimator).__name__} does not support array API inputs ({type(X).__module__} arrays) "
            "yet: fit it on numpy arrays, or fit KernelGDRegressor / KernelGDClassifier, which compute on "
            "the inputs' device, with sigma and alpha set."
        )


class _Predictions(RegressorMixin, BaseEstimator):
    """A fitted "regressor" whose predictions are given: scorers evaluate held-out predictions."""

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions


class _Decisions(ClassifierMixin, BaseEstimator):
    """A fitted "classifier" whose decision values are given (leave-one-out ones), for classifier scorers."""

    def __init__(self, classes, scores):
        self.classes = classes
        self.scores = scores
        self.classes_ = classes

    def decision_function(self, X):
        return self.scores[:, 0] if self.scores.shape[1] == 1 else self.scores

    def predict(self, X):
        if self.scores.shape[1] == 1:
            return self.classes_[(self.scores[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(self.scores, axis=1)]


class _Unweighted:
    """A scorer called without ``sample_weight``: where the user gave none, a metric need not take it."""

    def __init__(self, scorer):
        self.scorer = scorer

    def __call__(self, estimator, X, y, sample_weight=None):
        return self.scorer(estimator, X, y)


def _scorer(estimator, scoring, sample_weight, classes=None):
    """The search's scorer; it passes sample weights on only where the user gave them.

    The log-loss is told every class: a fold's test rows may lack some.
    """
    if scoring == "neg_log_loss" and classes is not None:
        scoring = make_scorer(log_loss, greater_is_better=False, response_method="predict_proba", labels=classes)
    scorer = check_scoring(estimator, scoring=scoring)
    return scorer if sample_weight is not None else _Unweighted(scorer)


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


def _is_rbf(kernel):
    return isinstance(kernel, str) and get_spec(kernel).name == "rbf"


def _scale_sigma(X, w, kernel="rbf"):
    """The ``sigma="scale"`` of the base estimator for ``kernel``: ``sqrt(n_features * Var(X))`` for rbf."""
    return KernelGDRegressor(kernel=kernel)._resolve_sigma(X, w)


def _eigen_system(K, Y, w, fit_intercept):
    """``s = sqrt(w)``, the eigenpairs of ``Q S K S Q``, the weighted mean of Y and ``V' Q S Y``."""
    s = np.sqrt(w)
    Ks = s[:, None] * K * s[None, :]
    if fit_intercept:
        u = Ks @ s
        Ks = Ks - np.outer(s, u) - np.outer(u, s) + np.outer(s, s) * (s @ u)
    with single_threaded_blas():
        lam, V = np.linalg.eigh(Ks)
    lam = np.maximum(lam, 0.0)
    y_bar = w @ Y if fit_intercept else np.zeros(Y.shape[1])
    # Q S y = S (y - y_bar) since s's = 1
    return s, lam, V, y_bar, V.T @ (s[:, None] * (Y - y_bar))


def _inverse_shift(lam, alpha):
    """``1 / (lam + alpha)``; for alpha = 0 the pseudo-inverse (directions of rounding-level lam dropped)."""
    if alpha > 0:
        return 1.0 / (lam + alpha)
    keep = lam > lam[-1] * len(lam) * np.finfo(float).eps
    return np.where(keep, 1.0 / np.where(keep, lam, 1.0), 0.0)


def _low_rank_system(F, Y, w, fit_intercept):
    """As :func:`_eigen_system` for ``K = F F'`` (n x r factor): eigenpairs from the r x r Gram matrix."""
    s = np.sqrt(w)
    B = s[:, None] * F
    if fit_intercept:
        B -= np.outer(s, s @ B)
    with single_threaded_blas():
        lam, W = np.linalg.eigh(B.T @ B)
    keep = lam > max(lam[-1], 0.0) * len(lam) * np.finfo(float).eps
    lam = lam[keep]
    V = (B @ W[:, keep]) / np.sqrt(lam)  # orthonormal: the left singular vectors of B
    y_bar = w @ Y if fit_intercept else np.zeros(Y.shape[1])
    return s, lam, V, y_bar, V.T @ (s[:, None] * (Y - y_bar))


def _loo_scores(system, Y, w, alphas, fit_intercept, scorer):
    """Exact leave-one-out scores of every alpha from one eigendecomposition.

    The fit minimises ``sum_i w_i (f_i - y_i)^2 + alpha ||f||_H^2`` (w sums
    to 1). With ``S = diag(sqrt(w))``, ``Q = I - s s'`` (the intercept) and
    ``Q S K S Q = V diag(lam) V'``, the hat matrix of the weighted problem
    is ``s s' + V diag(lam / (lam + alpha)) V'``, and the leave-one-out
    residual is ``(y_i - f_i) / (1 - H_ii)``, row i's with the shift
    ``alpha (1 - w_i)``: the base estimator fitted without row i
    renormalises the others' weights. ``system`` is
    :func:`_eigen_system`'s or :func:`_low_rank_system`'s result (V may have
    fewer columns than rows: the other directions have lam = 0).
    """
    s, lam, V, y_bar, VtY = system
    t = Y.shape[1]
    # The base estimator's alpha is per unit weight: without row i the weights are w / (1 - w_i),
    # the same fit as keeping row i at weight 0 with the ridge alpha (1 - w_i), row i's own shift.
    F_t, leverage = np.empty((len(s), len(alphas), t)), np.empty((len(s), len(alphas)))
    values, group = np.unique(w, return_inverse=True)
    if len(values) <= LOO_WEIGHT_GROUPS:  # rows of one weight share a shift: every alpha in two products
        for g, value in enumerate(values):
            rows = slice(None) if len(values) == 1 else np.flatnonzero(group == g)  # a slice: V uncopied
            shrink = np.column_stack([lam * _inverse_shift(lam, alpha * (1.0 - value)) for alpha in alphas])
            F_t[rows] = (V[rows] @ (shrink[:, :, None] * VtY[:, None, :]).reshape(len(lam), -1)).reshape(
                -1, len(alphas), t)
            leverage[rows] = (V[rows] * V[rows]) @ shrink
    else:  # many weights: a shift per row, one alpha at a time
        for a, alpha in enumerate(alphas):
            # w_i < 1 here (several weights): every shift is positive
            shrink = lam / (lam + alpha * (1.0 - w)[:, None]) if alpha > 0 else \
                np.broadcast_to(lam * _inverse_shift(lam, 0.0), (len(s), len(lam)))
            VS = V * shrink
            F_t[:, a] = VS @ VtY
            leverage[:, a] = np.einsum("ij,ij->i", VS, V)
    if fit_intercept:
        leverage += (s * s)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        F = np.where(s[:, None, None] > 0, F_t / s[:, None, None], 0.0) + y_bar
    scores, predictions = [], []
    for i in range(len(alphas)):
        loo = Y - (Y - F[:, i]) / np.maximum(1.0 - leverage[:, i], 1e-12)[:, None]
        predictions.append(loo)
        if scorer is None:  # the default: minus the weighted mean squared error, directly
            scores.append(-float(w @ ((Y - loo) ** 2).mean(axis=1)))
        else:
            scores.append(scorer(_Predictions(loo if t > 1 else loo[:, 0]), None, Y if t > 1 else Y[:, 0],
                                 sample_weight=w))
    return np.array(scores), predictions


def _shared_memory_backend():
    """Whether the joblib backend the widths would run on shares this process's memory (threads)."""
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend(prefer="threads")
    return bool(getattr(backend, "supports_sharedmem", False))


def _walk_widths(scale, score, n_jobs=None):
    """Widths ``scale * 2**(k / 2)`` walked to the best score: ``[(sigma, scores), ...]``.

    ``score(sigma)`` returns an (n_alphas, n_splits) array; a width's value is its best
    alpha's mean. From the factors 1/2, 1 and 2 the walk steps by factors of 2 towards
    the better end while that end is the best (within ``2**(+-WIDTH_STEPS / 2)``), then
    scores the best width's two half-step neighbours: 5 to 7 widths where the score is
    unimodal in log sigma, against 13 for the half-step grid over the same range
    (each width is one kernel factorisation, the search's cost).
    """
    done = {}

    def run(steps):
        steps = [k for k in steps if k not in done and abs(k) <= WIDTH_STEPS]
        results = Parallel(n_jobs=n_jobs, prefer="threads")(delayed(score)(scale * 2.0 ** (k / 2)) for k in steps)
        done.update(zip(steps, results))

    def best():  # ties go to the wider kernel: the smoother model
        return max(done, key=lambda k: (_best_mean(done[k]), k))

    run([0, -2, 2])  # the middle first: with K-fold the others race against it
    while True:
        k = best()
        step = 2 if k == max(done) else -2 if k == min(done) else 0
        if not step or abs(k + step) > WIDTH_STEPS:
            break
        run([k + step])
    k = best()
    run([k - 1, k + 1])
    return [(scale * 2.0 ** (k / 2), done[k]) for k in sorted(done)]


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
        "tol": [Interval(Real, 0, None, closed="left")],
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
        tol=1e-3,
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
        tags.input_tags.sparse = False
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
        """``[(sigma, score(sigma)), ...]`` over the widths searched for ``kernel``."""
        if "sigma" not in get_spec(kernel).params:
            return [(None, score(None))]
        sigmas = self._sigmas()
        if sigmas is not None:
            return list(zip(sigmas, Parallel(n_jobs=self.n_jobs, prefer="threads")(
                delayed(score)(s) for s in sigmas)))
        return _walk_widths(_scale_sigma(X, w, kernel), score, self.n_jobs)

    def _kernel(self, X, Y, kernel, sigma):
        params = dict(self.kernel_params or {})
        if sigma is not None:
            params["sigma"] = sigma
        return kernel_matrix(X, Y, kernel=kernel, degree=self.degree, coef0=self.coef0, **params)

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

    def _kfold_scores(self, X, Y, sw, kernel, sigma, alphas, scorer, incumbent=None):
        """Scores of every alpha on every fold, from one kernel matrix (of a subsample where n is large).

        ``incumbent``: the best candidate's score on each fold so far; the width stops after
        ``RACE_FOLDS`` folds on which even its best alpha scored lower (the folds must be the same
        for every width: all rows, and ``cv`` None or an int)."""
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        idx = np.arange(n) if n <= self.max_search_samples else np.sort(
            rng.choice(n, self.max_search_samples, replace=False))
        Xs, Ys, ws = X[idx], Y[idx], sw[idx]
        K = self._kernel(Xs, Xs, kernel, sigma)
        y_fit = Ys if Ys.ndim == 1 or Ys.shape[1] > 1 else Ys[:, 0]
        classifier = self._estimator_class is not KernelGDRegressor
        splits = list(check_cv(self._folds(y_fit, classifier), y_fit, classifier=classifier).split(Xs, y_fit))
        scores = np.full((len(alphas), len(splits)), np.nan)  # NaN: past the fold's early stop
        paired = incumbent is not None and len(idx) == n and (self.cv is None or isinstance(self.cv, Integral))
        for j, (train, test) in enumerate(splits):
            if paired and RACE_FOLDS <= j < len(splits) and np.all(
                    np.nanmax(scores[:, :j], axis=0) < incumbent[:j]):
                break  # lost every fold so far to the best candidate
            K_train, K_test = K[np.ix_(train, train)], K[np.ix_(test, train)]
            model = self._estimator_class(
                kernel="precomputed", fit_intercept=self.fit_intercept, solver=self.solver,
                max_iter=self.max_iter, tol=self.tol, warm_start=True, random_state=self.random_state,
                options=self.options, **self._extra_params(),
            )
            best, since_best = -np.inf, 0
            for i, alpha in enumerate(alphas):  # decreasing: each solve starts from the last
                model.set_params(alpha=alpha).fit(K_train, y_fit[train], sample_weight=ws[train])
                scored = model
                if classifier and self.loss == "logistic" and len(model.classes_) < len(self.classes_):
                    scored = _EveryClass(model, self.classes_)  # a class only in the test rows
                scores[i, j] = scorer(scored, K_test, y_fit[test], sample_weight=ws[test])
                best, since_best = (scores[i, j], 0) if scores[i, j] > best else (best, since_best + 1)
                if since_best >= PATH_PATIENCE:
                    break
        return scores

    def _store_results(self, rows, loo, kernels):
        """``rows``: (index in ``kernels``, sigma, alpha, split scores) per candidate."""
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
        ranks = np.empty(len(rows), dtype=np.int32)
        ranks[order] = np.arange(1, len(rows) + 1)
        results["rank_test_score"] = ranks
        self.cv_results_ = results
        self.best_index_ = int(order[0])
        self.best_score_ = float(means[self.best_index_])

    @with_callbacks
    def _search(self, X_in, X, y, Y, sw, scorer, loo_scores=None):
        """Score every kernel's widths and alphas (by ``loo_scores(kernel, sigma, alphas)`` where
        given, else K-fold), store them, refine the best (``_refine``) and refit it."""
        kernels, alphas = self._kernels(), self._alphas()
        start = time.perf_counter()
        progress = SearchProgress.start(self, X_in, y, self._sample_weight)

        def search(kernel, sigma):
            if progress is not None:
                name = f"kernel={get_spec(kernel).name}" + ("" if sigma is None else f" sigma={sigma:.4g}")
                return progress.candidate(name, lambda: score_width(kernel, sigma))
            return score_width(kernel, sigma)

        # the best candidate's fold scores so far; only threads share it (under joblib's Dask
        # backend the widths run in other processes, and each scores every fold)
        race = {"best": None, "lock": threading.Lock() if _shared_memory_backend() else None}

        def score_width(kernel, sigma):
            if loo_scores is not None:
                split_scores = loo_scores(kernel, sigma, alphas)[:, None]
            elif race["lock"] is None:
                split_scores = self._kfold_scores(X, Y, sw, kernel, sigma, alphas, scorer, None)
            else:
                split_scores = self._kfold_scores(X, Y, sw, kernel, sigma, alphas, scorer, race["best"])
                with race["lock"]:
                    if _best_mean(split_scores) > (-np.inf if race["best"] is None else race["best"].mean()):
                        race["best"] = split_scores[int(np.nanargmax(split_scores.mean(axis=1)))].copy()
            if self.verbose:
                name = f"kernel={get_spec(kernel).name}  " if len(kernels) > 1 else ""
                width = "" if sigma is None else f"sigma={sigma:.4g}  "
                means = split_scores.mean(axis=1)
                if np.isfinite(means).any():
                    best = int(np.nanargmax(means))
                    result = f"best alpha={alphas[best]:.3g}  score={means[best]:.6g}"
                else:
                    result = f"stopped after {int(np.isfinite(split_scores).any(axis=0).sum())} folds (cannot win)"
                print(f"[{type(self).__name__}] {name}{width}{result}  elapsed {time.perf_counter() - start:.1f}s",
                      flush=True)
            return split_scores

        rows = []
        for k, kernel in enumerate(kernels):
            for sigma, scores in self._widths(kernel, X, sw, lambda s, kernel=kernel: search(kernel, s)):
                rows += [(k, sigma, alpha, s) for alpha, s in zip(alphas, scores)]
        self._store_results(rows, loo_scores is not None, kernels)
        index, self.sigma_, self.alpha_, _ = rows[self.best_index_]
        self.kernel_ = kernels[index]
        self._refine(X, Y, sw, scorer, loo_scores, start)
        model = self._base(kernel=self.kernel_, sigma=self.sigma_ if self.sigma_ is not None else "scale",
                           alpha=self.alpha_, **self._refit_params(Y, sw))

        def refit():
            self.best_estimator_ = model.fit(X_in, y, sample_weight=self._sample_weight)

        if progress is None:
            refit()
        else:
            progress.refit(model, refit)
            progress.end()
        for name in ("dual_coef_", "intercept_", "X_fit_", "n_iter_", "loss_curve_"):
            setattr(self, name, getattr(self.best_estimator_, name))
        return self

    def _loo(self, X, Y, sw, scorer, rescore=None):
        """``loo(kernel, sigma, alphas)``: exact leave-one-out scores, of the kernel itself up to
        ``LOO_MAX_SAMPLES`` rows, else of its rank-``LOW_RANK_LOO_RANK`` pivoted-Cholesky
        (Nystroem) approximation on at most ``max_search_samples`` rows. ``rescore(predictions,
        rows)``, where given, scores the leave-one-out predictions of every alpha instead of
        ``scorer`` (the classifier's decision values)."""
        n = X.shape[0]

        def scores(system, Ys, ws, alphas, rows):
            if rescore is None:
                return _loo_scores(system, Ys, ws, alphas, self.fit_intercept, scorer)[0]
            return rescore(_loo_scores(system, Ys, ws, alphas, self.fit_intercept, None)[1], rows)

        if n <= LOO_MAX_SAMPLES:
            w = sw / sw.sum()
            rows = np.arange(n)
            return lambda kernel, sigma, alphas: scores(
                _eigen_system(self._kernel(X, X, kernel, sigma), Y, w, self.fit_intercept), Y, w, alphas, rows,
            )
        rng = check_random_state(self.random_state)
        idx = np.arange(n) if n <= self.max_search_samples else np.sort(
            rng.choice(n, self.max_search_samples, replace=False))
        Xs, Ys, ws = X[idx], Y[idx], sw[idx] / sw[idx].sum()
        seed = rng.randint(np.iinfo(np.int32).max)

        def loo(kernel, sigma, alphas):
            params = dict(self.kernel_params or {})
            if sigma is not None:
                params["sigma"] = sigma
            bound = bind_kernel(kernel, degree=self.degree, coef0=self.coef0, kernel_params=params)
            operator = KernelOperator(Xs, bound, dtype="float64", store=False)

            def columns(cols):
                with single_threaded_blas():
                    return np.asfortranarray(operator.columns(cols))

            F = rp_cholesky(columns, operator.diag(), LOW_RANK_LOO_RANK, np.random.RandomState(seed))[0]
            return scores(_low_rank_system(F, Ys, ws, self.fit_intercept), Ys, ws, alphas, idx)

        return loo

    def _refine(self, X, Y, sw, scorer, loo_scores, start):
        """Improve on the grid's best (sigma_, alpha_, best_score_) in place; the grid search alone by default."""

    def _refit_params(self, Y, sw):
        """Parameters of the refit beyond sigma and alpha; none by default."""
        return {}

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
        return self.best_estimator_.predict(X)


class KernelGDRegressorCV(MultiOutputMixin, RegressorMixin, _KernelCV):
    """Kernel ridge regression with the kernel, sigma and alpha chosen by cross-validation.

    For every candidate kernel and width the kernel is evaluated once and
    every ridge strength in ``alphas`` is scored together: by the exact
    leave-one-out residuals of one eigendecomposition (``cv=None``, up to
    3,000 rows; beyond, of a rank-2,000 pivoted-Cholesky approximation of
    the kernel on at most ``max_search_samples`` rows), or by K-fold
    cross-validation whose solves run along a decreasing alpha path, each
    warm-started from the previous one. The best triple is then refitted on
    all the data with :class:`KernelGDRegressor`.

    Parameters
    ----------
    kernel : str, callable or list of them, default=("rbf", "laplacian")
        The candidate kernels, each as in :class:`KernelGDRegressor` (not
        "precomputed"); one kernel is searched alone. The default compares
        the smooth rbf with the rough laplacian: on the UCI sets of the user
        guide the laplacian wins the leave-one-out comparison on energy,
        concrete, wine, power and protein, the rbf on kin8nm, naval and
        most of yacht's splits.
    sigmas : array-like of float, default=None
        Candidate widths, for every kernel with a ``sigma``. None: widths
        ``sigma_scale * 2**(k / 2)`` with ``sigma_scale**2 = n_features *
        Var(X)`` (the base estimator's ``sigma="scale"``), walked per kernel:
        k = -2, 0, 2 first, then steps of 2 toward the better end while it is
        the best (k from -8 to 8), then the best k's neighbours k - 1 and k + 1.
        Ignored by kernels without sigma.
    alphas : array-like of float, default=None
        Candidate ridge strengths (the base estimator's ``alpha``, per
        sample: ``KernelRidge(alpha=n_samples * alpha)``). None: 21 values
        from 1e-10 to 1, evenly spaced in log.
    ard : bool or "auto", default="auto"
        After the search, learn one rbf scale per feature (and a ridge) by
        L-BFGS, started from the best rbf candidate, then score the scales
        with every alpha by the search's leave-one-out criterion; they are
        kept only if they beat the search's best (of every kernel). Up to 1,000 rows the scales
        maximise the Gaussian-process marginal likelihood of all rows (the
        rows that then judge them, by a different criterion); beyond, they
        minimise the exact leave-one-out error of a random 1,000-row
        subsample and are judged on the other rows only. ``sigma_`` is then
        an array of shape (n_features,). ``"auto"``: on when the rbf kernel
        wins the search, with one target; ``True`` needs "rbf" among the
        candidates. See the user guide for the UCI figures. With
        ``cv`` given, the scales are judged by the same K-fold search.
    cv : int, cross-validation generator, iterable or None, default=None
        None: exact leave-one-out up to 3,000 rows; beyond, the exact
        leave-one-out error of the Nystroem model whose rank-2,000 factor
        randomly pivoted Cholesky draws (O(n * 2000^2) per width). An int
        gives KFold with that many folds.
    scoring : str or callable, default=None
        A scikit-learn scorer; None: negative mean squared error.
    n_jobs : int, default=None
        Widths searched in parallel threads (each holds its own kernel
        matrix); None means 1, -1 all cores.
    max_search_samples : int, default=10000
        Above this many rows the search (leave-one-out or K-fold) runs on a
        random subsample of this size (the refit uses all rows).
    degree, coef0, kernel_params, fit_intercept, solver, n_centers, max_iter, tol, options
        Passed to :class:`KernelGDRegressor` for the refit. With the
        default scoring the refit's ``tol`` is lowered to a tenth of the
        chosen model's leave-one-out RMSE relative to y's spread (not below
        1e-8), so that the solve's error stays below the model's own. The K-fold
        solves use ``fit_intercept``, ``solver``, ``max_iter``, ``tol`` and
        ``options`` on the full model of the kernel matrix (``n_centers``
        applies to the refit only: with ``"auto"``, a refit on more than
        20,000 rows is a centers model).
    random_state : int, RandomState instance or None, default=None
        Seeds the subsample and the base estimator.
    verbose : int, default=0
        1 prints one line per kernel and width (best alpha, its score,
        elapsed time). With scikit-learn 1.9+, callbacks set by
        ``set_callbacks`` see the same progress: a task per scored width,
        then the refit, to which auto-propagated callbacks (such as
        ``sklearn.callback.ProgressBar``) pass on.

    Attributes
    ----------
    kernel_ : str or callable
        The chosen kernel (an entry of ``kernel``).
    sigma_ : float, ndarray of shape (n_features,) or None
        The chosen width (per feature when ARD's scales are kept).
    alpha_ : float
        The chosen ridge strength.
    best_score_ : float
        Its cross-validated score.
    ard_ : bool
        Whether per-feature scales were searched (``ard``, with "auto" resolved).
    ard_score_ : float
        When ``ard_``: the score of the learned scales (kept if above the grid's best).
    best_estimator_ : KernelGDRegressor
        The model refitted on all the data with ``sigma_`` and ``alpha_``.
    cv_results_ : dict of ndarray
        GridSearchCV's layout: ``params``, ``param_kernel`` (with several
        candidates), ``param_sigma`` (masked for kernels without a width),
        ``param_alpha``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, and ``split{k}_test_score`` with K-fold. Only
        the widths the walk visited appear. With K-fold, each fold's
        decreasing alpha path stops after 4 alphas in a row that do not
        beat its best score, and a width whose best alpha scored below the
        best candidate on each of its first 3 folds stops there; what was
        not scored is NaN (a candidate without a score on every fold has a
        NaN mean and ranks last). With ``ard_``, the learned
        scales are the last row (``param_sigma`` is then of object dtype),
        ranked first when kept; ``best_index_`` is always the row of rank 1
        and ``best_score_`` its ``mean_test_score``.
    best_index_ : int
        The chosen candidate's row in ``cv_results_``.
    dual_coef_, intercept_, X_fit_, n_iter_
        Those of ``best_estimator_``.
    n_features_in_ : int
        Number of features seen during fit.

    See Also
    --------
    KernelGDRegressor : One fit at given sigma and alpha.
    sklearn.model_selection.GridSearchCV : The general tool, for any parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import KernelGDRegressorCV
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(200, 1))
    >>> y = np.sin(X).ravel() + 0.1 * rng.randn(200)
    >>> model = KernelGDRegressorCV().fit(X, y)
    >>> bool(model.best_score_ > -0.02)
    True
    """

    _estimator_class = KernelGDRegressor
    _parameter_constraints: dict = {**_KernelCV._parameter_constraints, "ard": ["boolean", StrOptions({"auto"})]}

    def __init__(
        self,
        *,
        kernel=("rbf", "laplacian"),
        sigmas=None,
        alphas=None,
        ard="auto",
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
        tol=1e-3,
        options=None,
        random_state=None,
        verbose=0,
    ):
        self.ard = ard
        super().__init__(
            kernel=kernel, sigmas=sigmas, alphas=alphas, cv=cv, scoring=scoring, n_jobs=n_jobs,
            max_search_samples=max_search_samples, degree=degree, coef0=coef0, kernel_params=kernel_params,
            fit_intercept=fit_intercept, solver=solver, n_centers=n_centers, max_iter=max_iter, tol=tol,
            options=options, random_state=random_state, verbose=verbose,
        )

    def _refine(self, X, Y, sw, scorer, loo_scores, start):
        """With ard: per-feature scales from the best rbf candidate, kept only if they beat the best of all."""
        kernels = self._kernels()
        self.ard_ = self.ard is True or (self.ard == "auto" and _is_rbf(self.kernel_) and Y.shape[1] == 1)
        if not self.ard_:
            return
        if not any(_is_rbf(kernel) for kernel in kernels):
            raise ValueError(f"ard=True learns per-feature scales of the rbf kernel; got kernel={self.kernel!r}.")
        if Y.shape[1] != 1:
            raise ValueError("ard=True supports one target column; fit one model per target.")
        params, ranks = self.cv_results_["params"], self.cv_results_["rank_test_score"]
        origin = params[min((i for i, p in enumerate(params) if _is_rbf(p.get("kernel", kernels[0]))),
                            key=lambda i: ranks[i])]
        sigma0, alpha0, kernel = origin["sigma"], origin["alpha"], origin.get("kernel", kernels[0])
        rng = check_random_state(self.random_state)
        # Fitted on every row, the scales are judged on the rows they were fitted on: by another
        # criterion than the judge's own (the marginal likelihood); on a subsample, the other rows
        # judge leave-one-out scales without that bias.
        criterion = "likelihood" if np.count_nonzero(sw) <= _ard.ARD_MAX_SAMPLES else "loo"
        sigma, lam, _, fitted = fit_scales(X, Y[:, 0], sw, sigma0, alpha0, self.fit_intercept,
                                           rng, criterion=criterion)
        # The subsample's ridge suits its own size: the scales are scored with every alpha on all rows.
        grid_alphas = self._alphas()
        alphas = np.unique(np.append(grid_alphas, lam))[::-1]
        if loo_scores is None:
            splits = self._kfold_scores(X, Y, sw, kernel, sigma, alphas, scorer)
            best = int(np.nanargmax(splits.mean(axis=1)))
            splits = splits[best]
            score = float(splits.mean())
            better = score > self.best_score_
        else:
            scores = self._held_out_loo(X, Y, sw, scorer, fitted)
            learned = scores(kernel, sigma, alphas)
            best = int(np.argmax(learned[:, 1]))
            score = float(learned[best, 0])
            # with no unseen row the judge is the grid's own leave-one-out: its best score stands
            judge = self.best_score_ if len(fitted) == np.count_nonzero(sw) else scores(
                self.kernel_, self.sigma_, grid_alphas)[:, 1].max()
            better = learned[best, 1] > judge
            splits = np.array([score])
        alpha = float(alphas[best])
        if self.verbose:
            print(f"[{type(self).__name__}] ard: score={score:.6g} (grid's best {self.best_score_:.6g})  "
                  f"alpha={alpha:.3g}  kept={better}  elapsed {time.perf_counter() - start:.1f}s", flush=True)
        self.ard_score_ = score
        self._add_result(kernel if len(kernels) > 1 else None, sigma, alpha, splits, chosen=better)
        if better:
            self.kernel_, self.sigma_, self.alpha_, self.best_score_ = kernel, sigma, alpha, score

    def _add_result(self, kernel, sigma, alpha, splits, chosen):
        """Append one candidate (ARD's scales) to ``cv_results_``; ranked first when chosen.

        Otherwise it ranks by its mean score, but never above the chosen candidate: the
        search may judge by other rows than the mean's (``_held_out_loo``), and
        ``best_index_`` is always the row of rank 1.
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

    def _refit_params(self, Y, sw):
        """A refit solved to a tenth of the chosen model's own error (the default scoring only).

        ``tol`` bounds the solve's relative residual, so its error in the fit is about ``tol``
        times the spread of y: on a nearly noise-free target (naval: leave-one-out RMSE 1e-3 of
        y's) the default 1e-3 would be as large as the model's error."""
        if self.scoring is not None or self.tol == 0 or not self.best_score_ < 0:
            return {}
        w = sw / sw.sum()
        spread = float(np.sqrt(np.mean(w @ (Y - w @ Y) ** 2)))
        if not spread > 0:
            return {}
        return {"tol": max(min(self.tol, 0.1 * np.sqrt(-self.best_score_) / spread), MIN_REFIT_TOL)}

    def _held_out_loo(self, X, Y, sw, scorer, fitted):
        """``loo(kernel, sigma, alphas)``: every alpha's leave-one-out score on all rows and on the rows
        outside ``fitted`` (all rows where none is outside), shape (n_alphas, 2).

        Scales fitted on some rows flatter those rows' leave-one-out error (wine: kept, and 1% worse
        on test); the rows they never saw judge them without that bias."""
        unseen = np.ones(len(X), dtype=bool)
        unseen[fitted] = False

        def score(P, rows):
            w = sw[rows]
            if self.scoring is None:
                return -float(w @ ((Y[rows] - P) ** 2).mean(axis=1) / w.sum())
            return scorer(_Predictions(P[:, 0]), None, Y[rows, 0], sample_weight=w)

        def rescore(predictions, rows):
            mask = unseen[rows]
            if not mask.any():
                mask = np.ones_like(mask)
            return np.array([[score(P, rows), score(P[mask], rows[mask])] for P in predictions])

        return self._loo(X, Y, sw, scorer, rescore)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Choose sigma and alpha, then refit on all the data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : KernelGDRegressorCV
        """
        X_in, self._sample_weight = X, sample_weight
        _numpy_only(self, X)
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=[np.float64, np.float32])
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        if not sw.sum() > 0:
            raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
        X = X.astype(np.float64, copy=False)
        Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
        scorer = _scorer(self, self.scoring or "neg_mean_squared_error", sample_weight)
        loo = None
        if self.cv is None:
            loo = self._loo(X, Y, sw, None if self.scoring is None else scorer)

        try:
            return self._search(X_in, X, y, Y, sw, scorer, loo)
        finally:
            del self._sample_weight


class KernelGDClassifierCV(ClassifierMixin, _KernelCV):
    """Kernel classification with sigma and alpha chosen by cross-validation.

    For every candidate width the kernel is evaluated once. With the
    squared loss and ``cv=None`` every alpha is scored by its exact
    leave-one-out decision values (one-vs-rest ridge on +-1 targets), as
    in :class:`KernelGDRegressorCV`. Otherwise each fold of a stratified
    K-fold split (5 folds by default) is solved for the ``alphas`` from the
    largest to the smallest, each solve warm-started from the last, on the
    rows of that one matrix, until 4 alphas in a row have not beaten the
    fold's best score (the smallest ridges need the most Newton steps); a
    width that loses each of its first 3 folds to the best candidate so far
    stops there. The best pair is then refitted on all the data with
    :class:`KernelGDClassifier`.

    Parameters
    ----------
    loss : {"squared", "logistic"}, default="squared"
        As in :class:`KernelGDClassifier`; with "logistic" the model has
        ``predict_proba``.
    class_weight : dict, "balanced" or None, default=None
        As in :class:`KernelGDClassifier`.
    kernel : str, callable or list of them, default="rbf"
        The candidate kernels, as in :class:`KernelGDRegressorCV`. The
        default is the rbf kernel alone: a comparison with the laplacian has
        not been measured on classification, and it doubles the search.
    sigmas, alphas, max_search_samples, n_jobs, degree, coef0, kernel_params, fit_intercept, solver, n_centers, max_iter, tol, options, random_state, verbose
        As in :class:`KernelGDRegressorCV`.
    cv : int, cross-validation generator, iterable or None, default=None
        None: with the squared loss, exact leave-one-out (of the kernel up to
        3,000 rows, of its rank-2,000 pivoted-Cholesky factor on at most
        ``max_search_samples`` rows beyond); with the logistic loss,
        stratified 5-fold. An int gives stratified K-fold.
    scoring : str or callable, default=None
        None: ``"neg_log_loss"`` with the logistic loss, accuracy otherwise.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    kernel_, sigma_, alpha_, best_score_, best_estimator_, cv_results_, best_index_
        As in :class:`KernelGDRegressorCV`.
    dual_coef_, intercept_, X_fit_, n_iter_
        Those of ``best_estimator_``.
    n_features_in_ : int
        Number of features seen during fit.

    See Also
    --------
    KernelGDClassifier : One fit at given sigma and alpha.
    KernelGDRegressorCV : The same search for regression, with exact leave-one-out.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from kernelgd import KernelGDClassifierCV
    >>> X, y = make_moons(200, noise=0.2, random_state=0)
    >>> model = KernelGDClassifierCV(loss="logistic", sigmas=[0.5, 1.0], alphas=[1e-4, 1e-2]).fit(X, y)
    >>> bool(model.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **_KernelCV._parameter_constraints,
        "loss": [StrOptions({"squared", "logistic"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }
    _estimator_class = KernelGDClassifier

    def __init__(
        self,
        *,
        loss="squared",
        class_weight=None,
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
        tol=1e-3,
        options=None,
        random_state=None,
        verbose=0,
    ):
        self.loss = loss
        self.class_weight = class_weight
        super().__init__(
            kernel=kernel, sigmas=sigmas, alphas=alphas, cv=cv, scoring=scoring, n_jobs=n_jobs,
            max_search_samples=max_search_samples, degree=degree, coef0=coef0, kernel_params=kernel_params,
            fit_intercept=fit_intercept, solver=solver, n_centers=n_centers, max_iter=max_iter, tol=tol,
            options=options, random_state=random_state, verbose=verbose,
        )

    def _extra_params(self):
        return {"loss": self.loss, "class_weight": self.class_weight}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Choose sigma and alpha, then refit on all the data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : KernelGDClassifierCV
        """
        X_in, self._sample_weight = X, sample_weight
        _numpy_only(self, X)
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError(f"The data contains only one class: {self.classes_[0]!r}; a classifier needs two.")
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        if not sw.sum() > 0:
            raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
        default = "neg_log_loss" if self.loss == "logistic" else "accuracy"
        scorer = _scorer(self, self.scoring or default, sample_weight, self.classes_)
        response = getattr(getattr(scorer, "scorer", scorer), "_response_method", None)
        if self.loss == "squared" and response in ("predict_proba", "predict_log_proba"):
            raise ValueError(
                f"scoring={self.scoring!r} needs predict_proba, which KernelGDClassifierCV(loss='squared') does "
                "not have. Use loss='logistic' (kernel logistic regression, with probabilities), or a scoring "
                "that reads labels or decision values, such as 'accuracy' (or 'roc_auc' for two classes)."
            )
        X = X.astype(np.float64, copy=False)
        loo = None
        if self.cv is None and self.loss == "squared":
            # the squared loss is ridge regression on +-1 targets: exact leave-one-out
            # decision values, as RidgeClassifierCV has them
            Y = LabelBinarizer(neg_label=-1, pos_label=1).fit(self.classes_).transform(y).astype(np.float64)
            fit_weight = sw if self.class_weight is None else sw * _class_weights(
                self.class_weight, self.classes_, y, sw)

            def rescore(predictions, rows):
                return np.array([scorer(_Decisions(self.classes_, F), None, y[rows], sample_weight=sw[rows])
                                 for F in predictions])

            loo = self._loo(X, Y, fit_weight, None, rescore)
        try:
            return self._search(X_in, X, y, y, sw, scorer, loo)
        finally:
            del self._sample_weight

    def decision_function(self, X):
        """Scores of the refitted model (see :meth:`KernelGDClassifier.decision_function`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities of the refitted model (``loss="logistic"`` only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Log class probabilities of the refitted model (``loss="logistic"`` only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)
