"""KernelGDRegressorCV and KernelGDClassifierCV: kernel, sigma and alpha chosen from the data.

Each candidate kernel and width is evaluated once. With ``cv=None`` and at most ``LOO_MAX_SAMPLES``
distinct rows, one eigendecomposition of the centred, weighted kernel matrix gives the exact leave-one-out
residuals of every alpha in closed form (as RidgeCV does for linear ridge). Beyond, with the default
grids, the base estimator's rules and a few alternatives are fitted on four fifths of the rows and
scored on the rest (``_held_out_search``); with given grids, the leave-one-out formula runs on a
rank-``LOW_RANK_LOO_RANK`` randomly pivoted Cholesky factor (the Nystroem model on its pivots). With an
integer ``cv`` (or the logistic loss) each fold's model is solved along a decreasing, warm-started alpha
path on the rows of one kernel matrix (a subsample of at most ``max_search_samples`` rows), widths racing
on paired folds. The chosen parameters are then refitted on all the data.
"""

import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    ClassifierMixin,
    MultiOutputMixin,
    RegressorMixin,
    _fit_context,
)
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from . import _ard
from ._ard import fit_scales
from ._auto_alpha import significantly_fewer
from ._array_api import follow, from_numpy, single_threaded_blas, to_numpy, xp_of
from ._base import _check_same_namespace
from ._classifier import KernelGDClassifier, _has_probabilities
from ._fit import TOL_SHARE
from ._loo import _Predictions
from ._regressor import KernelGDRegressor
from ._replicates import distinct_groups, distinct_rows, effective_count
from ._search import MIN_REFIT_TOL, _Decisions, _is_rbf, _KernelCV, _scale_sigma, _scorer
from ._targets import class_weights

# On held-out rows a classifier's candidate replaces the incumbent where its misclassifications are fewer by this
# many standard errors of the paired difference: a smaller gain is within chance (the one-standard-error rule).
HOLDOUT_SIGNIFICANCE = 1.0
# Beyond LOO_MAX_SAMPLES distinct rows, ARD's scales are fitted on this many of them (an O(rows^3) factorization
# per L-BFGS step), and judged on held-out rows.
HELD_OUT_ARD_ROWS = 500
# The search's dense copy of sparse X is refused where it would outgrow both the kernel matrix and these bytes.
DENSE_COPY_BYTES = 64 << 20


def _dense(X, name):
    """X for the search, dense: its kernel matrices are (the refit takes X as given, sparse or not)."""
    if not sp.issparse(X):
        return X
    size = X.shape[0] * X.shape[1] * np.dtype(np.float64).itemsize
    if X.shape[1] > X.shape[0] and size > DENSE_COPY_BYTES:
        raise ValueError(
            f"{name} computes on a dense copy of sparse X, which with {X.shape[1]} features for {X.shape[0]} "
            f"rows ({size / 2**20:.0f} MiB) would outgrow the kernel matrix itself. Reduce the features "
            "(TruncatedSVD, feature selection), or fit KernelGDRegressor / KernelGDClassifier, which take sparse "
            "X, in a GridSearchCV."
        )
    return X.toarray()


class KernelGDRegressorCV(MultiOutputMixin, RegressorMixin, _KernelCV):
    """Kernel ridge regression with the kernel, sigma and alpha chosen by cross-validation.

    For every candidate kernel and width the kernel is evaluated once and
    every ridge strength in ``alphas`` is scored together: by the exact
    leave-one-out residuals of one eigendecomposition (``cv=None``, up to
    3,000 distinct rows), or by K-fold cross-validation whose solves run
    along a decreasing alpha path, each warm-started from the previous one.
    The best triple is then refitted on all the data with
    :class:`KernelGDRegressor`.

    Beyond 3,000 distinct rows (``cv=None``, default ``sigmas`` and
    ``alphas``) candidates are fitted on a random four fifths of the rows
    and scored on the other fifth: :class:`KernelGDRegressor`'s own rules
    (its ``kernel="auto"`` compares the default pair of kernels), then their
    ridge divided by sqrt(10) step by step while the held-out score
    improves (at most one decade), then ARD's per-feature scales. The best
    is refitted on all rows, its solve started from its held-out fit (zero
    on the held-out rows); where the rules won, they choose again on all
    of them, and the model is :class:`KernelGDRegressor`'s own. A subsample
    and a low-rank factor would misjudge kernels of slowly decaying spectrum
    and miss small ridges, at many times the cost of a fit.

    Read more in the :ref:`User Guide <ug-model-selection>`.

    Parameters
    ----------
    kernel : str, callable or list of them, default=("rbf", "laplacian")
        The candidate kernels, each as in :class:`KernelGDRegressor` (not
        "precomputed"); one kernel is searched alone. The default compares
        the smooth rbf with the rough laplacian: on the UCI sets of the user
        guide the laplacian wins on energy, concrete, wine, power and
        protein, the rbf on kin8nm, naval and most of yacht's splits.
    sigmas : array-like of float, default=None
        Candidate widths, for every kernel with a ``sigma``. None: widths
        ``sigma_scale * 2**(k / 2)`` with ``sigma_scale**2`` the sum of the
        features' variances (the base estimator's ``sigma="scale"``), walked per kernel:
        k = -2, 0, 2 first (for every kernel), then steps of 2 toward the
        better end while it is the best (k from -8 to 8), then the best k's
        neighbours k - 1 and k + 1. The kernel of the best first three walks
        on first; another kernel's steps are skipped where they cannot beat
        the best score so far (a step gains at most what the step before it
        gained, a half step what the whole step beside it lost). Ignored by
        kernels without sigma.
    alphas : array-like of float, default=None
        Candidate ridge strengths (the base estimator's ``alpha``, per
        sample: ``KernelRidge(alpha=n_samples * alpha)``). None: 21 values
        from 1e-10 to 1, evenly spaced in log.
    ard : bool or "auto", default="auto"
        After the search, learn one rbf scale per feature (and a ridge) by
        L-BFGS, started from the best rbf candidate, then score the scales
        with every alpha by the search's leave-one-out criterion; they are
        kept only if they beat the search's best (of every kernel). Up to 1,000 distinct rows the scales
        maximise the Gaussian-process marginal likelihood of all rows (the
        rows that then judge them, by a different criterion); beyond, they
        minimise the exact leave-one-out error of a subsample of 1,000 distinct rows
        (with their copies) and are judged on the other rows only; beyond 3,000
        (the held-out search above), of 500 of the fitted rows, with the ridge
        rule at those scales, judged on the held-out rows. ``sigma_`` is then
        an array of shape (n_features,). ``"auto"``: on when the rbf kernel
        wins the search, with one target; ``True`` needs "rbf" among the
        candidates. See the user guide for the UCI figures. With
        ``cv`` given, the scales are judged by the same K-fold search.
    cv : int, cross-validation generator, iterable or None, default=None
        None: exact leave-one-out up to 3,000 distinct rows; beyond, the
        held-out search above, or with ``sigmas`` or ``alphas`` given, the
        exact leave-one-out error of the Nystroem model whose rank-2,000
        factor randomly pivoted Cholesky draws (O(n * 2000^2) per width). An
        int gives KFold with that many folds.
    scoring : str or callable, default=None
        A scikit-learn scorer; None: negative mean squared error. With
        ``sample_weight``, held-out scores are weighted where the scorer's
        metric takes ``sample_weight``, and unweighted otherwise (as in
        ``GridSearchCV``); the fits are weighted either way.
    n_jobs : int, default=None
        Widths searched in parallel threads (each holds its own kernel
        matrix); None means 1, -1 all cores. With K-fold and one width at a
        time, a search of at least 4 million rows^2 x target columns (2,000
        rows, or 633 rows of a 10-class problem) runs its folds in worker
        processes, one per core (``options["n_threads"]``), each holding its
        fold's block of the kernel matrix; smaller ones stay in this process,
        where starting the workers would cost more than it saves.
    max_search_samples : int, default=10000
        Above this many rows the search (leave-one-out or K-fold) runs on a
        random subsample of this size (the refit uses all rows; the held-out
        search fits on all rows).
    degree, coef0, kernel_params, fit_intercept, solver, n_centers, max_iter, tol, options
        Passed to :class:`KernelGDRegressor` for the refit. With the
        default scoring, ``tol="auto"`` solves the refit to a fiftieth of
        the chosen model's leave-one-out RMSE relative to y's spread (not
        below 1e-8), as :class:`KernelGDRegressor`'s ``"auto"`` does with its
        rule's error, and a given ``tol`` is lowered to a tenth of it, so that
        the solve's error stays below the model's own. The K-fold
        solves use ``fit_intercept``, ``solver``, ``max_iter``, ``tol`` and
        ``options`` on the full model of the kernel matrix (``n_centers``
        applies to the refit only: with ``"auto"``, a refit whose kernel
        matrix does not fit the memory budget is a centers model).
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
        When ``ard_``: the score of the learned scales (kept if above the grid's best); the
        rules' held-out score where the scales stayed at the rules' rbf width.
    best_estimator_ : KernelGDRegressor
        The model refitted on all the data with ``sigma_`` and ``alpha_``.
    holdout_scores_ : dict or None
        After the held-out search (see above): the held-out ``scoring`` of
        the rules' model and of the chosen one, as ``{"rule": ...,
        "search": ...}``. Where the rules won, ``best_estimator_`` has
        ``sigma="scale"`` and ``alpha="auto"``, and ``sigma_``, ``alpha_``
        and ``kernel_`` are the values they resolved to on all rows (then not
        in ``cv_results_``, whose rule row holds those of the four fifths).
        None where the search was by leave-one-out or K-fold.
    cv_results_ : dict of ndarray
        GridSearchCV's layout: ``params``, ``param_kernel`` (with several
        candidates), ``param_sigma`` (masked for kernels without a width),
        ``param_alpha``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, and ``split{k}_test_score`` with K-fold. Only
        the widths the walk visited appear. With K-fold, each fold's
        decreasing alpha path stops after 2 alphas in a row that do not
        beat its best score; a width searched after another starts its path
        two decades above the best alpha so far (climbing back up where
        that start scores best), and from its second fold on it stops once
        its folds' best scores (each fold's best alpha) sum below the best
        candidate's on the same folds; what was
        not scored is NaN (a candidate without a score on every fold has a
        NaN mean and ranks last). With ``ard_``, the learned
        scales are the last row (``param_sigma`` is then of object dtype),
        ranked first when kept (after the held-out search, no row where
        they stayed at the rules' rbf width: that model is the rules' row);
        ``best_index_`` is always the row of rank 1 and ``best_score_`` its
        ``mean_test_score``. After the held-out
        search, one row per candidate fitted (the rules' first), its score
        the held-out one (``split0_test_score``); a classifier's candidate
        that scores higher without a gain beyond chance ranks below the
        chosen one.
    best_index_ : int
        The chosen candidate's row in ``cv_results_``.
    dual_coef_, intercept_, X_fit_, n_iter_
        Those of ``best_estimator_``.
    signal_variance_, noise_variance_ : float or ndarray of shape (n_targets,)
        Those of ``best_estimator_``: the Gaussian process's scale and noise
        that go with the chosen kernel, width and ridge (``predict``'s
        ``return_std``).
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
        tol="auto",
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

    def _ard_on(self, n_targets):
        """``ard`` resolved (``ard_``): "auto" where the rbf kernel won, with one target; a clear error where
        ``ard=True`` cannot apply."""
        self.ard_ = self.ard is True or (self.ard == "auto" and _is_rbf(self.kernel_) and n_targets == 1)
        if self.ard_ and not any(_is_rbf(kernel) for kernel in self._kernels()):
            raise ValueError(f"ard=True learns per-feature scales of the rbf kernel; got kernel={self.kernel!r}.")
        if self.ard_ and n_targets != 1:
            raise ValueError("ard=True supports one target column; fit one model per target.")
        return self.ard_

    def _held_out_candidates(self, X, y, sw, rng):
        """With ard: per-feature scales fitted on ``HELD_OUT_ARD_ROWS`` of the rows (the leave-one-out criterion),
        from the chosen width where the rbf kernel won (else ``sigma="scale"``'s) and the chosen ridge, then the
        base estimator's ridge rule at those scales; none where the scales stayed at the rules' rbf width (that model
        is the rules' own, scored already). A generator: ``ard_score_`` is read once the search scored it."""
        if not self._ard_on(1 if y.ndim == 1 else y.shape[1]):
            return
        kernel = next(k for k in self._kernels() if _is_rbf(k))
        X_host, y_host, sw_host = (np.asarray(to_numpy(A), dtype=np.float64) for A in (X, y, sw))
        sigma0 = self.sigma_ if _is_rbf(self.kernel_) else _scale_sigma(X_host, sw_host / sw_host.sum())
        scales = fit_scales(X_host, y_host.ravel(), sw_host, float(sigma0), self.alpha_, self.fit_intercept, rng,
                            criterion="loo", max_rows=HELD_OUT_ARD_ROWS)[0]
        if _is_rbf(self.kernel_) and np.allclose(scales, sigma0, rtol=1e-12, atol=0):  # unmoved: the rules' model
            self.ard_score_ = self.holdout_scores_["rule"]
            return
        model = self._base(kernel=kernel, sigma=scales)
        yield model, kernel
        self.ard_score_ = self.cv_results_["mean_test_score"][-1]

    def _refine(self, X, Y, sw, scorer, loo_scores, start):
        """With ard: per-feature scales from the best rbf candidate, kept only if they beat the best of all."""
        kernels = self._kernels()
        if not self._ard_on(Y.shape[1]):
            return
        params, ranks = self.cv_results_["params"], self.cv_results_["rank_test_score"]
        origin = params[min((i for i, p in enumerate(params) if _is_rbf(p.get("kernel", kernels[0]))),
                            key=lambda i: ranks[i])]
        sigma0, alpha0, kernel = origin["sigma"], origin["alpha"], origin.get("kernel", kernels[0])
        rng = check_random_state(self.random_state)
        # Fitted on every row, the scales would be judged on their own rows by another criterion than the judge's
        # own; on a subsample, the other rows judge leave-one-out scales without that bias.
        sw_host = np.asarray(to_numpy(sw))
        X_host = np.asarray(to_numpy(X))
        distinct = distinct_rows(sw_host, distinct_groups(X_host))  # as fit_scales reads them: copies as one
        criterion = "likelihood" if distinct <= _ard.ARD_MAX_SAMPLES else "loo"
        # the scales' L-BFGS runs on the host, on at most ARD_MAX_SAMPLES rows (numpy copies)
        sigma, lam, _, fitted = fit_scales(X_host, np.asarray(to_numpy(Y[:, 0])), sw_host, sigma0,
                                           alpha0, self.fit_intercept, rng, criterion=criterion)
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
            judge = self.best_score_ if len(fitted) == np.count_nonzero(sw_host) else scores(
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

    def _refit_params(self, Y, sw):
        """A refit solved to a tenth of the chosen model's own error (the default scoring only).

        ``tol`` bounds the solve's relative residual, so its error in the fit is about ``tol``
        times the spread of y: on a nearly noise-free target (naval: leave-one-out RMSE 1e-3 of
        y's) the default 1e-3 would be as large as the model's error."""
        if self.scoring is not None or self.tol == 0 or not self.best_score_ < 0:
            return {}
        xp = xp_of(Y)
        w = sw / xp.sum(sw)
        spread = float(np.sqrt(float(xp.mean(w @ (Y - w @ Y) ** 2))))
        if not spread > 0:
            return {}
        relative = np.sqrt(-self.best_score_) / spread
        if isinstance(self.tol, str):  # "auto": the base estimator's share of its rule's error
            return {"tol": max(TOL_SHARE * min(relative, 1.0), MIN_REFIT_TOL)}
        return {"tol": max(min(self.tol, 0.1 * relative), MIN_REFIT_TOL)}

    def _held_out_loo(self, X, Y, sw, scorer, fitted):
        """``loo(kernel, sigma, alphas)``: every alpha's leave-one-out score on all rows and on the rows
        outside ``fitted`` (all rows where none is outside), shape (n_alphas, 2).

        Scales fitted on some rows flatter those rows' leave-one-out error (wine: kept, and 1% worse
        on test); the rows they never saw judge them without that bias."""
        Y_host, sw_host = np.asarray(to_numpy(Y)), np.asarray(to_numpy(sw))  # scored on the host
        unseen = sw_host > 0  # a zero-weight row judges nothing: its score would be 0 / 0
        unseen[fitted] = False

        def score(P, rows):
            w = sw_host[rows]
            if self.scoring is None:  # weights summing to one first: w (Y - P)^2 of weights of 1e100 overflows
                with np.errstate(over="ignore"):  # an error past float64's range scores -inf, last
                    return -float((w / w.sum()) @ ((Y_host[rows] - P) ** 2).mean(axis=1))
            return scorer(_Predictions(P[:, 0]), None, Y_host[rows, 0], sample_weight=w)

        def rescore(predictions, rows):
            mask = unseen[rows]
            if not mask.any():
                mask = np.ones_like(mask)
            predictions = [np.asarray(to_numpy(P)) for P in predictions]
            return np.array([[score(P, rows), score(P[mask], rows[mask])] for P in predictions])

        return self._loo(X, Y, sw, scorer, rescore)

    @property
    def signal_variance_(self):
        """``best_estimator_``'s (computed when first read)."""
        if not hasattr(self, "best_estimator_"):
            raise AttributeError("signal_variance_ is set by fit: the model is not fitted.")
        return self.best_estimator_.signal_variance_

    @property
    def noise_variance_(self):
        """``best_estimator_``'s (computed when first read)."""
        if not hasattr(self, "best_estimator_"):
            raise AttributeError("noise_variance_ is set by fit: the model is not fitted.")
        return self.best_estimator_.noise_variance_

    def predict(self, X, return_std=False, return_cov=False):
        """Predictions of the refitted model, and how sure it is (see :meth:`KernelGDRegressor.predict`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Whether to return the predictive standard deviation.
        return_cov : bool, default=False
            Whether to return the predictive covariance of the rows of X.

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        y_std, y_cov : ndarray
            With ``return_std`` or ``return_cov``, as :meth:`KernelGDRegressor.predict`.
        """
        check_is_fitted(self)
        _check_same_namespace(X, self, attribute="dual_coef_", method="predict")
        return self.best_estimator_.predict(X, return_std=return_std, return_cov=return_cov)

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draws from the refitted model's predictive distribution (see :meth:`KernelGDRegressor.sample_y`).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=0

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
        """
        check_is_fitted(self)
        return self.best_estimator_.sample_y(X, n_samples=n_samples, random_state=random_state)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Choose sigma and alpha, then refit on all the data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse X is searched on a dense copy and refitted as given (a ValueError where that
            copy would exceed both the kernel matrix and 64 MiB).
            Under ``sklearn.config_context(array_api_dispatch=True)``, arrays of
            torch, CuPy or another array API library are searched on their own
            device (the "GPUs" page of the documentation).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : KernelGDRegressorCV
        """
        xp, _, y, sample_weight = follow(X, y, sample_weight)
        X_in, self._sample_weight = X, sample_weight
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, accept_sparse="csr",
                             dtype=[xp.float64, xp.float32])
        X = _dense(X, type(self).__name__)
        sw = _check_sample_weight(sample_weight, X, dtype=xp.float64, ensure_non_negative=True)
        if not float(xp.sum(sw)) > 0:
            raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
        X = xp.astype(X, xp.float64)
        Y = xp.reshape(xp.asarray(y, dtype=xp.float64), (y.shape[0], -1))
        w = sw / xp.sum(sw)
        with np.errstate(over="ignore", invalid="ignore"):
            spread = float(w @ xp.sum((Y - w @ Y) ** 2, axis=1))
        if not np.isfinite(spread):  # leave-one-out's and ARD's squares
            raise ValueError(
                f"{type(self).__name__} compares squared errors, and y's spread (max |y| = "
                f"{float(xp.max(xp.abs(Y))):.3g}) overflows them in float64. Divide y by a constant (its "
                "standard deviation) and scale the predictions back, or use KernelGDRegressor."
            )
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
    squared loss and ``cv=None`` every alpha is scored by its
    leave-one-out decision values (one-vs-rest ridge on +-1 targets; exact
    up to 3,000 distinct rows, on a rank-2,000 factor above with given
    grids), as in
    :class:`KernelGDRegressorCV`. Otherwise each fold of a stratified
    K-fold split (5 folds by default) is solved for the ``alphas`` from the
    largest to the smallest, each solve warm-started from the last, on the
    rows of that one matrix, until 2 alphas in a row have not beaten the
    fold's best score (the smallest ridges need the most Newton steps). A
    width searched after another starts two decades above the best alpha so
    far (climbing back where that start scores best), and from its second
    fold on stops once its folds' best scores sum below the best candidate's
    on the same folds. The best pair is then refitted on all the data with
    :class:`KernelGDClassifier`. Beyond 3,000 distinct rows (``cv=None``,
    default ``sigmas`` and ``alphas``, either loss) candidates are fitted on
    four fifths of the rows and scored on the rest, as in
    :class:`KernelGDRegressorCV`: :class:`KernelGDClassifier`'s own rules,
    then their ridge divided by sqrt(10) step by step while the held-out
    score improves; with accuracy (the squared loss's default scoring) a
    step must have fewer held-out misclassifications by one standard error
    of the paired difference. With the logistic
    loss and ``combine="logistic"``, the refit's probabilities are then
    calibrated as :class:`KernelGDClassifier`'s are under ``alpha="auto"``:
    the output layer and the share of labels drawn at random
    (``best_estimator_.combiner_`` and ``label_noise_``), each where it
    lowers the cross-validated log-loss of rows held out of fits at the
    chosen width and ridge.

    Read more in the :ref:`User Guide <ug-model-selection>`.

    Parameters
    ----------
    loss : {"squared", "logistic"}, default="squared"
        As in :class:`KernelGDClassifier`; the refit's ``predict_proba`` is
        the model's own with "logistic", its output layer's with "squared"
        (``combine="logistic"``).
    class_weight : dict, "balanced" or None, default=None
        As in :class:`KernelGDClassifier`: it weights the candidates' fits,
        not their scores. Held-out rows are scored by ``sample_weight`` alone,
        as ``GridSearchCV`` scores an estimator with ``class_weight``; pass
        ``compute_sample_weight(class_weight, y)`` as ``sample_weight``
        instead to weight the scores too.
    combine : {"logistic", "argmax"}, default="logistic"
        As in :class:`KernelGDClassifier`: the refit's (and K-fold's fits')
        output layer. The leave-one-out search reads its left-out outputs
        as the refit will decide: with "logistic", by a logistic regression
        fitted to them (on at most 1,000 rows, or 100 per class); with
        "argmax", by the largest.
    kernel : str, callable or list of them, default="rbf"
        The candidate kernels, as in :class:`KernelGDRegressorCV`. The
        default is the rbf kernel alone: a comparison with the laplacian has
        not been measured on classification, and it doubles the search.
    sigmas, alphas, max_search_samples, n_jobs, degree, coef0, kernel_params, fit_intercept, solver, n_centers, max_iter, tol, options, random_state, verbose
        As in :class:`KernelGDRegressorCV`.
    cv : int, cross-validation generator, iterable or None, default=None
        None: beyond 3,000 distinct rows with the default grids, the
        held-out search above; otherwise with the squared loss, exact
        leave-one-out (of the kernel up to 3,000 distinct rows, of its
        rank-2,000 pivoted-Cholesky factor on at most
        ``max_search_samples`` rows beyond); with the logistic loss,
        stratified 5-fold (fewer where the largest class, or the distinct
        rows, are fewer; a smaller class is then missing from some test
        folds). An int gives stratified K-fold.
    scoring : str or callable, default=None
        None: ``"neg_log_loss"`` with the logistic loss, accuracy otherwise.
        Weighted as in :class:`KernelGDRegressorCV`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    kernel_, sigma_, alpha_, best_score_, best_estimator_, cv_results_, best_index_, holdout_scores_
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
        "combine": [StrOptions({"logistic", "argmax"})],
    }
    _estimator_class = KernelGDClassifier

    def __init__(
        self,
        *,
        loss="squared",
        class_weight=None,
        combine="logistic",
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
        self.loss = loss
        self.class_weight = class_weight
        self.combine = combine
        super().__init__(
            kernel=kernel, sigmas=sigmas, alphas=alphas, cv=cv, scoring=scoring, n_jobs=n_jobs,
            max_search_samples=max_search_samples, degree=degree, coef0=coef0, kernel_params=kernel_params,
            fit_intercept=fit_intercept, solver=solver, n_centers=n_centers, max_iter=max_iter, tol=tol,
            options=options, random_state=random_state, verbose=verbose,
        )

    def _extra_params(self):
        return {"loss": self.loss, "class_weight": self.class_weight, "combine": self.combine}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Choose sigma and alpha, then refit on all the data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse X is searched on a dense copy and refitted as given (a ValueError where that
            copy would exceed both the kernel matrix and 64 MiB).
            Under ``sklearn.config_context(array_api_dispatch=True)``, arrays of
            torch, CuPy or another array API library are searched on their own
            device (the "GPUs" page of the documentation).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : KernelGDClassifierCV
        """
        xp, device, y, sample_weight = follow(X, y, sample_weight)
        X_in, self._sample_weight = X, sample_weight
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[xp.float64, xp.float32])
        X = _dense(X, type(self).__name__)
        y_host = np.asarray(to_numpy(y))  # labels, folds and scores live on the host
        check_classification_targets(y_host)
        self.classes_ = np.unique(y_host)
        if len(self.classes_) < 2:
            raise ValueError(f"The data contains only one class: {self.classes_[0]!r}; a classifier needs two.")
        sw = _check_sample_weight(sample_weight, X, dtype=xp.float64, ensure_non_negative=True)
        sw_host = np.asarray(to_numpy(sw))
        if not sw_host.sum() > 0:
            raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
        default = "neg_log_loss" if self.loss == "logistic" else "accuracy"
        scorer = _scorer(self, self.scoring or default, sample_weight, self.classes_)
        response = getattr(getattr(scorer, "scorer", scorer), "_response_method", None)
        if self.loss == "squared" and response in ("predict_proba", "predict_log_proba"):
            raise ValueError(
                f"scoring={self.scoring!r} needs predict_proba, which KernelGDClassifierCV(loss='squared') does "
                "not score candidates by (its output layer is fitted to the refit alone). Use loss='logistic' "
                "(kernel logistic regression, searched by its probabilities), or a scoring that reads labels or "
                "decision values, such as 'accuracy' (or 'roc_auc' for two classes)."
            )
        X = xp.astype(X, xp.float64)
        loo = None
        if self.cv is None and self.loss == "squared":
            # the squared loss is ridge regression on +-1 targets: exact leave-one-out
            # decision values, as RidgeClassifierCV has them
            Y = LabelBinarizer(neg_label=-1, pos_label=1).fit(self.classes_).transform(y_host).astype(np.float64)
            Y = from_numpy(Y, xp, device)
            fit_weight = sw if self.class_weight is None else sw * from_numpy(
                class_weights(self.class_weight, self.classes_, y_host, sw_host), xp, device)

            # with the output layer the left-out labels are its, read from the left-out outputs
            layer = self.combine == "logistic"
            codes, fit_host = np.searchsorted(self.classes_, y_host), np.asarray(to_numpy(fit_weight))

            def rescore(predictions, rows):
                labels, weights = (codes[rows], fit_host[rows]) if layer else (None, None)

                def score(decisions):
                    if self.scoring is None:  # accuracy, without the scorer's validation of every alpha's labels
                        return float(np.average(decisions.predict(None) == y_host[rows], weights=sw_host[rows]))
                    return scorer(decisions, None, y_host[rows], sample_weight=sw_host[rows])

                with single_threaded_blas():  # many small layer fits: idle BLAS threads would spin beside them
                    return np.array([score(_Decisions(self.classes_, np.asarray(to_numpy(F)), labels, weights))
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
        _check_same_namespace(X, self, attribute="dual_coef_", method="decision_function")
        return self.best_estimator_.decision_function(X)

    def _beats(self, challenger, incumbent, X, y, w, group_of):
        """With accuracy (the squared loss's default scoring), whether the challenger's held-out misclassifications
        are fewer than the incumbent's by ``HOLDOUT_SIGNIFICANCE`` standard errors of their paired difference over
        groups of identical rows; with another scoring, always (its score need not split over rows). Two close
        models' accuracies on a thousand rows differ by chance by a few rows either way."""
        if self.scoring is not None or self.loss != "squared":
            return True
        w = w / w.sum()
        wrong = [np.asarray(fit.predict(X) != y, dtype=float) for fit in (challenger, incumbent)]
        return significantly_fewer(*wrong, w, group_of, effective_count(w, group_of), HOLDOUT_SIGNIFICANCE)

    def _has_proba(self):
        # the refit's, as KernelGDClassifier has them: the logistic loss's, or the squared loss's output layer
        return _has_probabilities(self.best_estimator_ if hasattr(self, "best_estimator_") else self._base())

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities of the refitted model: the logistic loss's, or the squared loss's output layer's
        (``combine="logistic"``), as :class:`KernelGDClassifier`'s.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        _check_same_namespace(X, self, attribute="dual_coef_", method="predict_proba")
        return self.best_estimator_.predict_proba(X)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Log class probabilities of the refitted model, as ``predict_proba``'s.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        _check_same_namespace(X, self, attribute="dual_coef_", method="predict_log_proba")
        return self.best_estimator_.predict_log_proba(X)
