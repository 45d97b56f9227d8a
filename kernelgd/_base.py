"""Shared estimator machinery: parameters, validation, and the rules that resolve them
(kernel and width, ridge, centers); the fit itself runs in ``_fit``."""

from dataclasses import replace
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, is_classifier

try:  # scikit-learn >= 1.9: progress bars and monitors through sklearn.callback
    from sklearn.callback import CallbackSupportMixin, with_callbacks
except ImportError:  # older scikit-learn: fits run without them

    class CallbackSupportMixin:
        """Stands in for scikit-learn's mixin where sklearn.callback does not exist."""

    def with_callbacks(method):
        return method

from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from . import _fit, _posterior
from ._array_api import (
    as_float64, copy_array, full_as, like, memory_budget, namespace, on_host, take_rows, to_numpy, xp_of,
)
from ._auto_alpha import choose_kernel
from ._losses import SquaredLoss

try:  # scikit-learn >= 1.9: the standard error for predicting on another namespace than fit's
    from sklearn.utils._array_api import check_same_namespace as _check_same_namespace
except ImportError:  # pragma: no cover - older scikit-learn

    def _check_same_namespace(X, estimator, *, attribute, method):
        if type(X).__module__.split(".")[0] != type(getattr(estimator, attribute)).__module__.split(".")[0]:
            raise ValueError(
                f"Inputs passed to {type(estimator).__name__}.{method}() must use the same namespace "
                "and the same device as those passed to fit()."
            )
from ._operator import (
    cross_kernel_dot,
    resolve_dtype,
    resolve_memory_budget,
    single_threaded_blas,
)
from ._psd import probe_psd
from ._solvers import CENTER_SOLVERS, SOLVERS
from ._solvers._common import NonPSDKernelWarning
from .kernels import (
    _CarriesRegisteredKernels,
    bind_kernel,
    check_sigma,
    check_sparse_support,
    get_spec,
    is_builtin,
)
from ._warnings import warn

# kernel="auto": the kernels compared (see _choose_kernel)
AUTO_KERNELS = ("rbf", "laplacian")
# kernel="auto" with sigma="scale" on a set small enough for exact leave-one-out: the wider multiples of the
# best kernel's width tried in turn
AUTO_WIDTHS = (2.0, 4.0)
# n_centers="auto" (see auto_centers)
AUTO_EXACT_MAX_ROWS = 20_000
# Above those rows, the exact model still where its float32 kernel matrix takes at most this share of the budget.
AUTO_EXACT_BUDGET_SHARE = 1.0
# The fewest centers: for the squared loss twice the Nystroem(2000) features a user would fit instead; for a
# smooth loss, whose Newton steps take many products per class, fewer.
AUTO_MIN_CENTERS_SQUARED = 4000
AUTO_MIN_CENTERS = 1000
AUTO_CENTERS_PER_ROOT = 2.0
OPTION_DEFAULTS = {"memory_budget": "auto", "dtype": "auto", "n_threads": "auto"}


def resolve_options(options):
    """The performance options with defaults filled in, validated."""
    options = dict(options or {})
    unknown = set(options) - set(OPTION_DEFAULTS)
    if unknown:
        raise ValueError(
            f"Unknown options {sorted(unknown)}; the options are {sorted(OPTION_DEFAULTS)}."
        )
    resolved = {**OPTION_DEFAULTS, **options}
    budget = resolved["memory_budget"]
    if not (
        budget == "auto"
        or (isinstance(budget, Real) and not isinstance(budget, bool) and 0 < budget < 2**63)
    ):
        raise ValueError(
            "options['memory_budget'] must be 'auto' or a finite number of bytes > 0 "
            f"(for example 4 * 2**30 for 4 GiB), got {budget!r}."
        )
    resolved["memory_budget"] = resolve_memory_budget(budget)
    if resolved["dtype"] not in ("auto", "float32", "float64", np.float32, np.float64):
        raise ValueError(
            f"options['dtype'] must be 'auto', 'float32' or 'float64', got {resolved['dtype']!r}."
        )
    threads = resolved["n_threads"]
    if not (threads == "auto" or (isinstance(threads, Integral) and not isinstance(threads, bool) and threads >= 1)):
        raise ValueError(
            f"options['n_threads'] must be 'auto' (every core this process may use) or an "
            f"integer >= 1, got {threads!r}."
        )
    return resolved


def _distinct_rows(X, chosen, candidates, rng):
    """``chosen``, or where it repeats a row of X, as many distinct rows drawn in a random order: a repeated
    center leaves K_mm exactly singular, which FALKON's factors amplify by 1 / sqrt(jitter). Fewer rows
    remain where X has fewer distinct rows than centers asked for.
    """
    if len(np.unique(to_numpy(take_rows(X, chosen)), axis=0)) == len(chosen):
        return chosen  # the common case: one check on m rows
    order = rng.permutation(candidates)
    _, first = np.unique(to_numpy(take_rows(X, order)), axis=0, return_index=True)
    return np.sort(order[np.sort(first)[: len(chosen)]])


class _CallbackBridge:
    """scikit-learn's callback API (``sklearn.callback``, 1.9+) around a fit: the fit is the root task and each
    solver iteration a subtask, so ``ProgressBar`` shows the iterations and monitors such as
    ``ScoringMonitor`` get a model that predicts with the iterate.
    """

    def __init__(self, context, X, y, sample_weight):
        self.context = context
        self.data = {"X": X, "y": y, "metadata": None if sample_weight is None else {"sample_weight": sample_weight}}

    @classmethod
    def start(cls, estimator, X, y, sample_weight):
        """The bridge of this fit, or None when no callbacks are set (no cost then)."""
        if not getattr(estimator, "_skl_callbacks", None) and not hasattr(estimator, "_parent_callback_ctx"):
            return None
        bridge = cls(estimator._init_callback_context(max_subtasks=estimator.max_iter), X, y, sample_weight)
        bridge.context.call_on_fit_task_begin(estimator=estimator, **bridge.data)
        return bridge

    def iteration(self, estimator, model_attributes):
        """The solver callback: one finished subtask per iteration; a callback may stop the fit."""

        def on_iteration(A, b):
            task = self.context.subcontext(task_name="iteration")
            task.call_on_fit_task_begin(estimator=estimator)
            return task.call_on_fit_task_end(
                estimator=estimator, reconstruction_attributes=lambda: model_attributes(A.copy(), b.copy()),
                **self.data,
            )

        return on_iteration

    def end(self, estimator):
        self.context.call_on_fit_task_end(estimator=estimator, reconstruction_attributes={}, **self.data)


def _asymmetry(X, block=256):
    """``max |X - X'|`` by square tiles of the upper triangle, each pair of entries read once (without the
    whole-matrix version's strided reads and n x n temporaries, which a K-fold search pays on every fit).
    """
    xp, n = xp_of(X), X.shape[0]
    edges = [(start, min(start + block, n)) for start in range(0, n, block)]  # in bounds: the standard asks it
    tiles = [
        xp.max(xp.abs(X[i:i_end, j:j_end] - X[j:j_end, i:i_end].T))
        for k, (i, i_end) in enumerate(edges) for j, j_end in edges[k:]
    ]
    return float(xp.max(xp.stack(tiles))) if tiles else 0.0


def auto_centers(n_samples, memory_budget=None, squared=False):
    """``n_centers="auto"``: None (the exact model) up to ``AUTO_EXACT_MAX_ROWS`` rows, else a count of centers.

    ``n_samples`` counts the training rows with positive weight. With a ``memory_budget`` (bytes), the exact
    model also above that many rows wherever its kernel matrix, stored in float32, takes at most
    ``AUTO_EXACT_BUDGET_SHARE`` of the budget: centers lose accuracy that the stored matrix keeps at a few
    times their time. Otherwise ``AUTO_CENTERS_PER_ROOT * sqrt(n)`` centers (FALKON's analysis: m of order
    sqrt(n) keeps the exact model's statistical rate), at least ``AUTO_MIN_CENTERS_SQUARED`` for the squared
    loss (``squared``) and ``AUTO_MIN_CENTERS`` for a smooth loss (bench_auto_centers.py,
    bench_large_logistic.py).
    """
    if n_samples <= AUTO_EXACT_MAX_ROWS:
        return None
    if memory_budget is not None and 4.0 * n_samples**2 <= AUTO_EXACT_BUDGET_SHARE * memory_budget:
        return None
    fewest = AUTO_MIN_CENTERS_SQUARED if squared else AUTO_MIN_CENTERS
    return int(max(fewest, np.ceil(AUTO_CENTERS_PER_ROOT * np.sqrt(n_samples))))


class BaseKernelGD(_CarriesRegisteredKernels, CallbackSupportMixin, BaseEstimator):
    """Base class of the kernelgd estimators; not for direct use."""

    _parameter_constraints: dict = {
        "kernel": [str, callable],
        "sigma": [Interval(Real, 0, None, closed="neither"), StrOptions({"scale"}), "array-like"],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "step_size": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "solver": [StrOptions(set(SOLVERS) | {"auto"})],
        "n_centers": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],  # bools rejected in fit
        "fit_intercept": ["boolean"],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "options": [dict, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        kernel="auto",
        sigma="scale",
        degree=3,
        coef0=1.0,
        kernel_params=None,
        alpha="auto",
        solver="auto",
        step_size="auto",
        max_iter=1000,
        tol="auto",
        n_centers="auto",
        fit_intercept=True,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=5,
        warm_start=False,
        random_state=None,
        options=None,
        verbose=0,
    ):
        self.kernel = kernel
        self.sigma = sigma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.solver = solver
        self.step_size = step_size
        self.max_iter = max_iter
        self.tol = tol
        self.n_centers = n_centers
        self.fit_intercept = fit_intercept
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.random_state = random_state
        self.options = options
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.input_tags.sparse = True
        tags.array_api_support = True
        return tags

    # ------------------------------------------------------------ helpers

    def _loss(self, n_columns):
        """The loss component for targets of ``n_columns`` columns (squared; the classifier overrides)."""
        return SquaredLoss

    def _alpha(self, weight_total):
        """The ridge strength given, or "auto" where the data choose it (``_auto_alpha``);
        ``weight_total`` is the training rows' total sample weight."""
        return "auto" if self.alpha == "auto" else float(self.alpha)

    @property
    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _resolve_sigma(self, X, w):
        """sigma as a float; "scale" means sigma^2 = the sum of the features' variances (sigma^4 for exponential),
        each about its own mean and weighted by the sample weights (integer weights and repeated rows give the same
        sigma): half the mean squared distance between two rows, which a shift of any feature leaves unchanged; on
        centred features ``n_features * X.var()``, SVC's gamma="scale". For the polynomial kernel
        (``centred_scale=False``) the mean square about 0.
        """
        spec = None if self._precomputed else get_spec(self._kernel_used)
        if spec is None or "sigma" not in spec.params:
            return None
        if not (isinstance(self.sigma, str) and self.sigma == "scale"):
            sigma = check_sigma(self.sigma, spec)
            if np.ndim(sigma) and sigma.shape != (X.shape[1],):
                raise ValueError(
                    f"sigma has {sigma.shape[0]} per-feature scales but X has {X.shape[1]} features; "
                    "pass one scale per feature."
                )
            return sigma if np.ndim(sigma) else float(sigma)
        # Computed on X / max|X| so that the variance of huge features does not overflow.
        xp = xp_of(X)  # numpy for sparse X
        top = 0.0 if not X.shape[0] * X.shape[1] else float(abs(X).max() if sp.issparse(X) else xp.max(xp.abs(X)))
        if top == 0.0:
            return 1.0
        Xs = X / top
        positive = w > 0
        if not bool(xp.all(positive)):  # rows of zero weight change nothing, not even the sums' rounding
            Xs, w = Xs[positive], w[positive]
        centred = spec.centred_scale
        if sp.issparse(X):  # per feature E[x^2] - E[x]^2 from the nonzeros: no dense copy
            shares = np.asarray(w, dtype=np.float64) / float(np.sum(w))
            means = Xs.T @ shares if centred else 0.0
            var = max(float(np.mean(Xs.multiply(Xs).T @ shares - means**2)), 0.0)
        else:  # the weighted mean of each row's mean square about the features' weighted means, in X's namespace
            means = xp.sum(Xs * w[:, None], axis=0) / xp.sum(w) if centred else 0.0
            var = float(xp.sum(xp.mean((Xs - means) ** 2, axis=1) * w)) / float(xp.sum(w))
        sigma = top * float(np.sqrt(X.shape[1] * var))
        # exponential divides distances by sigma**2: its sigma**2 takes the scale
        sigma = sigma ** (1.0 / spec.sigma_power)
        return sigma if sigma > 0 else 1.0

    @property
    def _auto_kernel(self):
        return isinstance(self.kernel, str) and self.kernel == "auto"

    @property
    def _kernel_used(self):
        """The kernel fitted: ``kernel``, or the one ``"auto"`` chose (``kernel_``)."""
        return self.kernel_ if self._auto_kernel else self.kernel

    def _bound_kernel(self):
        if self._precomputed:
            return None
        return bind_kernel(
            self._kernel_used,
            sigma=self.sigma_ if self.sigma_ is not None else 1.0,
            degree=self.degree,
            coef0=self.coef0,
            kernel_params=self.kernel_params,
        )

    def _validate_precomputed(self, X):
        """The square, symmetric training kernel matrix (symmetrised, with a warning)."""
        if not self._precomputed:
            for kernel in AUTO_KERNELS if self._auto_kernel else [self.kernel]:
                check_sparse_support(get_spec(kernel), X)
            return X
        if sp.issparse(X):  # a kernel matrix is dense in general
            X = X.toarray()
        if X.shape[0] != X.shape[1]:
            raise ValueError(
                "With kernel='precomputed', X must be the square training kernel "
                f"matrix of shape (n_samples, n_samples); got shape {tuple(X.shape)}."
            )
        if getattr(self, "_path_state", None) is not None:  # a search's own block of its kernel matrix
            return X
        xp = xp_of(X)
        scale = max(float(xp.max(X)), -float(xp.min(X))) if X.shape[0] else 0.0
        gap = _asymmetry(X)
        if gap > 1e-8 * scale:
            warn(
                "With kernel='precomputed', X must be a symmetric kernel matrix "
                f"K[i, j] = k(x_i, x_j); here |K - K.T| reaches {gap:.3g} (largest "
                f"entry {scale:.3g}). It is fitted as (K + K.T) / 2. Pass the kernel "
                "matrix of the training points against themselves.",
                UserWarning,
            )
            return (X + X.T) / 2
        return X

    def _kernel_candidates(self, names, sigma_of):
        """The bound kernels ``names`` to compare, each at the sigma ``sigma_of()`` resolves for it."""
        candidates = []
        for name in names:
            self.kernel_ = name
            self.sigma_ = sigma_of()
            candidates.append(self._bound_kernel())
        return candidates

    def _choose_kernel(self, rows, alpha, loss, seed, precision, memory_budget, threads="auto", sigma_of=None):
        """``kernel="auto"``, and a squared-loss classifier's width: sets ``kernel_``; returns
        ``(alpha, landmarks, width, error)``; ``error``: the rule's at its ridge (``_auto_alpha.relative_error``).

        With the squared loss, the kernel of ``AUTO_KERNELS`` (``kernel="auto"``, else the one given) whose
        Nystroem model has the least error at its own best ridge (``_auto_alpha.choose_kernel``), each at its own
        ``sigma``; with ``sigma="scale"`` and the exact model, the best then walks on to the multiples
        ``_walk_widths`` of its width while each lowers that error (``width``: the multiple kept). ``landmarks``:
        the chosen factor where it can precondition the full model. Other losses: the rbf for ``kernel="auto"``.
        ``rows``: ``_fit.TrainingRows``; ``precision``: the dtype the fit resolves; ``memory_budget``,
        ``threads``: the fit's; ``sigma_of()``: the candidates' sigma (None: ``sigma`` resolved on ``rows``).
        """
        names = AUTO_KERNELS if self._auto_kernel else (self.kernel,)
        if loss is not SquaredLoss:
            self.kernel_ = names[0]
            return alpha, None, 1.0, None
        sigma_of = sigma_of or (lambda: self._resolve_sigma(rows.X, rows.w))
        candidates, walked = self._kernel_candidates(names, sigma_of), []
        # leave-one-out scores the exact model: widths are walked only for it (on centers a wider kernel at
        # the exact model's ridge can lose)
        exact_model = self._n_centers_for(np.asarray(to_numpy(rows.w)), True, memory_budget, True) is None
        walks = isinstance(self.sigma, str) and self.sigma == "scale" and exact_model

        def walk(kernel, exact):  # the best candidate at each width walked to, recorded as (name, width)
            widths = self._walk_widths(exact)
            walked.extend((names[candidates.index(kernel)], width) for width in widths)
            return [type(kernel)(kernel.spec, dict(kernel.params, sigma=kernel.params["sigma"] * width))
                    for width in widths]

        index, alpha, landmarks, error = choose_kernel(
            candidates, rows.X, rows.Y, rows.w, rows.replicates, self.fit_intercept, np.random.RandomState(seed),
            alpha, precision, classify=is_classifier(self) and self._left_out_classes(loss),
            walk=walk if walks else None, threads=threads, memory_budget=memory_budget,
        )
        self.kernel_, width = ([(name, 1.0) for name in names] + walked)[index]
        return alpha, landmarks, width, error

    def _chooses_kernel(self, loss):
        """Whether the fit's kernel or width is chosen by the rule (``_choose_kernel``): ``kernel="auto"``."""
        return self._auto_kernel

    def _walk_widths(self, exact):
        """The multiples of sigma="scale"'s width ``_choose_kernel`` walks to: wider ones
        (``AUTO_WIDTHS``) where the rule is exact leave-one-out (``exact``)."""
        return AUTO_WIDTHS if exact else ()

    def _warm_start_init(self, n_coef, n_targets):
        if not (self.warm_start and hasattr(self, "dual_coef_")):
            return None, None
        xp = xp_of(self.dual_coef_)
        coef = xp.reshape(self.dual_coef_, (self.dual_coef_.shape[0], -1))
        if tuple(coef.shape) != (n_coef, n_targets):
            return None, None
        return coef, xp.reshape(copy_array(as_float64(like(self.intercept_, coef))), (-1,))

    def _split(self, n_samples, w, stratify, rng):
        """Indices of the training and validation parts for early stopping."""
        from sklearn.model_selection import train_test_split

        idx = np.arange(n_samples)
        if not self.early_stopping:
            return idx, None
        # Only rows that carry weight are split; the others cannot matter.
        weighted = np.flatnonzero(w > 0)
        n_val = int(np.ceil(self.validation_fraction * len(weighted)))
        if len(weighted) - n_val < 2:
            raise ValueError(
                f"early_stopping: validation_fraction={self.validation_fraction} of "
                f"{len(weighted)} samples with positive weight leaves {len(weighted) - n_val} "
                "for training, fewer than 2. Use more samples or a smaller validation_fraction."
            )
        if stratify is not None:
            stratify = stratify[weighted]
            n_classes = len(np.unique(stratify))
            counts = np.unique(stratify, return_counts=True)[1]
            if min(n_val, len(weighted) - n_val) < n_classes or counts.min() < 2:
                stratify = None  # too few samples to put every class in both parts
        tr, val = train_test_split(weighted, test_size=n_val, random_state=rng, stratify=stratify)
        tr = np.union1d(tr, np.flatnonzero(w == 0))
        return np.sort(tr), np.sort(val)

    def _sample_weights(self, X, sample_weight):
        """Sample weights normalised to sum to one, and the raw weights (ones without weights)."""
        n_samples = X.shape[0]
        xp = xp_of(X)  # numpy for sparse X
        if sample_weight is None:
            raw = full_as(X, (n_samples,), 1.0)
        else:
            raw = _check_sample_weight(sample_weight, X, dtype=xp.float64, ensure_non_negative=True)
        top = float(xp.max(raw))
        if not top > 0:
            raise ValueError("sample_weight must have a positive sum; got all zero weights.")
        w = raw / top  # first by the largest, so that the sum cannot overflow
        return w / xp.sum(w), raw

    def _n_centers_for(self, w, psd, memory_budget=None, squared=False):
        """The number of centers ``n_centers`` resolves to on rows of weights w; None: the exact model."""
        n_centers = self.n_centers
        if isinstance(n_centers, str):  # "auto"
            solver_has_centers = self.solver == "auto" and psd or self.solver in CENTER_SOLVERS
            # counted over the rows that carry weight: the others cannot shape the model, and centers as
            # many as those rows would interpolate them (without ridge, the least-squares interpolant)
            n_weighted = int(np.count_nonzero(w > 0))
            n_centers = (auto_centers(n_weighted, memory_budget, squared)
                         if solver_has_centers and not self._precomputed else None)
        return None if n_centers is None or n_centers >= len(w) else n_centers

    def _choose_centers(self, X_tr, w_tr, rng, psd, memory_budget=None, squared=False):
        """The indices of the rows of X_tr the model is restricted to (None: all of them).

        ``memory_budget`` and ``squared`` (whether the loss is): for ``n_centers="auto"`` (see ``auto_centers``).
        """
        if isinstance(self.n_centers, (bool, np.bool_)):
            raise ValueError(
                f"n_centers must be a positive int, 'auto' or None, got {self.n_centers!r}; "
                "for example n_centers=1000."
            )
        n_centers = self._n_centers_for(w_tr, psd, memory_budget, squared)
        if n_centers is None:
            return None
        previous = self._warm_start_centers(X_tr, n_centers)
        if previous is not None:
            return previous
        if self._precomputed:
            raise ValueError(
                "n_centers cannot be used with kernel='precomputed': the centers must be "
                "a subset of the inputs. Pass the inputs with a kernel name or callable."
            )
        candidates = np.flatnonzero(w_tr > 0)
        chosen = np.sort(rng.choice(candidates, min(n_centers, len(candidates)), replace=False))
        return chosen if sp.issparse(X_tr) else _distinct_rows(X_tr, chosen, candidates, rng)

    def _warm_start_centers(self, X_tr, n_centers):
        """A warm start's centers: the last fit's rows where this fit's inputs hold them at the same
        indices (the same data), so that its coefficients continue on the centers they were fitted on."""
        rows = getattr(self, "_center_rows", None)
        X_fit = getattr(self, "X_fit_", None)
        if not (self.warm_start and rows is not None and X_fit is not None and not sp.issparse(X_tr)
                and not sp.issparse(X_fit) and xp_of(X_tr) is xp_of(X_fit) and len(rows) == n_centers
                and rows.max() < X_tr.shape[0] and tuple(X_fit.shape) == (len(rows), X_tr.shape[1])):
            return None
        return rows if bool(xp_of(X_fit).all(take_rows(X_tr, rows) == X_fit)) else None

    def _warn_if_not_psd(self, kernel, X):
        if kernel is None:
            return
        if not kernel.psd:
            warn(
                f"The {kernel.name} kernel is not positive semi-definite: the "
                "objective may be non-convex and gradient descent may diverge. "
                "A positive alpha helps.",
                NonPSDKernelWarning,
            )
        elif not is_builtin(kernel.spec):  # a user's kernel declared PSD: a cheap probe
            found = probe_psd(kernel, X)
            if found is not None:
                what = "is not symmetric" if not found.symmetric else (
                    f"has {found.n_negative} clearly negative eigenvalue(s), the smallest "
                    f"{found.min_eigenvalue:.3g} (largest {found.max_eigenvalue:.3g})"
                )
                warn(
                    f"The {kernel.name} kernel is used as positive semi-definite, but its matrix "
                    f"on {found.n_samples} training points {what}. The fit may diverge or "
                    "return a poor model. Check it with kernelgd.check_psd, and register it "
                    "with register_kernel(..., psd=False) if it is not PSD.",
                    NonPSDKernelWarning,
                )

    # ---------------------------------------------------------- fit flow

    @with_callbacks
    def _fit(self, X, Y, sample_weight, y, stratify=None, ravel=False):
        """Fit on validated X and a 2-D float target Y; sets the attributes.

        ``y``: the targets as given, for callbacks. ``ravel``: a
        single-output regressor stores 1-D ``dual_coef_`` and a float
        ``intercept_``.
        """
        options = resolve_options(self.options)
        progress = _CallbackBridge.start(self, X, y, sample_weight)
        # One BLAS thread throughout: the operator's pool supplies the
        # parallelism, and idle OpenBLAS threads spin (module doc of _operator).
        with single_threaded_blas():
            _fit.fit(self, X, Y, sample_weight, stratify, options, progress, ravel)
        if progress is not None:
            progress.end(self)
        return self

    # Whether fits keep what predict(X, return_std=True) needs (the regressors).
    _predictive = False

    @staticmethod
    def _fit_posterior(operator, Y, coef, intercept, w, alpha, n_observations, centers, y_scale, psd, seed,
                       group_of=None, X=None):
        """The posterior's scale and factors (``_posterior``), in the units of y; None for a kernel that is not PSD.
        ``X``: the training rows in float64 (or the precomputed kernel), for the exact model."""
        if not psd:
            return None
        if centers:
            posterior = _posterior.fit_centers(operator, Y, coef, intercept, w, alpha, n_observations,
                                               np.random.RandomState(seed), group_of)
        else:
            posterior = _posterior.fit_exact(operator, X, Y, coef, intercept, w, alpha, n_observations, group_of)
        return replace(posterior, signal_std=posterior.signal_std * y_scale)

    def _decision(self, X, method):
        """``K(X, X_fit_) @ dual_coef_ + intercept_`` with 2-D coefficients; ``method`` names the caller."""
        check_is_fitted(self)
        _check_same_namespace(X, self, attribute="dual_coef_", method=method)
        xp, device = namespace(X) if not sp.issparse(X) else (np, None)
        X = validate_data(self, X, reset=False, accept_sparse="csr", dtype=xp.float64)
        if self._precomputed and sp.issparse(X):
            X = X.toarray()
        coef = xp.reshape(self.dual_coef_, (self.dual_coef_.shape[0], -1))
        options = resolve_options(self.options)
        # on the host float64: float32 GEMMs round a row by its place in the block (OpenBLAS's Haswell, Zen kernels)
        dtype = np.float64 if on_host(X) else getattr(
            self, "_compute_dtype", resolve_dtype(options["dtype"], X.shape[0], self.X_fit_.shape[0]))
        with single_threaded_blas():
            F = cross_kernel_dot(
                self._bound_kernel(), X, self.X_fit_, coef, memory_budget=self._device_budget(xp, device, options),
                dtype=dtype, threads=options["n_threads"],
            )
        return F + self.intercept_  # a float, or one per output

    def _device_budget(self, xp, device, options):
        """The memory budget on the arrays' device: ``memory_budget="auto"`` reads a GPU's free memory."""
        if (self.options or {}).get("memory_budget", "auto") != "auto":
            return options["memory_budget"]
        return memory_budget(xp, device, options["memory_budget"])
