"""Shared estimator machinery: parameters, validation and the fit flow.

fit: validate -> weights -> bound kernel -> KernelOperator -> solver -> store.
"""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._operator import KernelOperator, cross_kernel_dot
from ._solvers import SOLVERS, SolverSettings
from ._solvers._common import NonPSDKernelWarning
from .kernels import bind_kernel, get_spec


class BaseKernelGD(BaseEstimator):
    """Base class of the kernelgd estimators; not for direct use."""

    _parameter_constraints: dict = {
        "kernel": [str, callable],
        "sigma": [Interval(Real, 0, None, closed="neither"), StrOptions({"scale"})],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "step_size": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions(set(SOLVERS))],
        "fit_intercept": ["boolean"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        kernel="rbf",
        sigma="scale",
        degree=3,
        coef0=1.0,
        kernel_params=None,
        alpha=0.0,
        step_size="auto",
        max_iter=1000,
        tol=1e-6,
        solver="gd",
        fit_intercept=True,
        warm_start=False,
        verbose=0,
    ):
        self.kernel = kernel
        self.sigma = sigma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.step_size = step_size
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.warm_start = warm_start
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags

    # ------------------------------------------------------------ helpers

    @property
    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _resolve_sigma(self, X, w):
        """sigma as a float; "scale" means sigma^2 = n_features * Var(X).

        The variance is weighted by the sample weights, so integer weights
        and repeated rows give the same sigma.
        """
        if self._precomputed or "sigma" not in get_spec(self.kernel).params:
            return None
        if self.sigma != "scale":
            return float(self.sigma)
        mean = np.average(X.mean(axis=1), weights=w)
        var = np.average(((X - mean) ** 2).mean(axis=1), weights=w)
        sigma2 = X.shape[1] * var
        return float(np.sqrt(sigma2)) if sigma2 > 0 else 1.0

    def _bound_kernel(self):
        if self._precomputed:
            return None
        return bind_kernel(
            self.kernel,
            sigma=self.sigma_ if self.sigma_ is not None else 1.0,
            degree=self.degree,
            coef0=self.coef0,
            kernel_params=self.kernel_params,
        )

    def _validate_precomputed(self, X, fitting):
        if self._precomputed and fitting and X.shape[0] != X.shape[1]:
            raise ValueError(
                "With kernel='precomputed', X must be the square training kernel "
                f"matrix of shape (n_samples, n_samples); got shape {X.shape}."
            )

    def _warm_start_init(self, n_samples, n_targets):
        if not (self.warm_start and hasattr(self, "dual_coef_")):
            return None, None
        coef = self.dual_coef_.reshape(len(self.dual_coef_), -1)
        if coef.shape != (n_samples, n_targets):
            return None, None
        return coef, np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64)).copy()

    # ---------------------------------------------------------- fit flow

    def _fit(self, X, Y, sample_weight):
        """Fit on validated X and a 2-D float target Y; sets the attributes."""
        self._validate_precomputed(X, fitting=True)
        n_samples = X.shape[0]
        if sample_weight is None:
            w = np.full(n_samples, 1.0 / n_samples)
        else:
            w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            total = w.sum()
            if not total > 0:
                raise ValueError(
                    "sample_weight must have a positive sum; got all zero weights."
                )
            w = w / total

        self.sigma_ = self._resolve_sigma(X, w)
        kernel = self._bound_kernel()
        if kernel is not None and not kernel.psd:
            warnings.warn(
                f"The {kernel.name} kernel is not positive semi-definite: the "
                "objective may be non-convex and gradient descent may diverge. "
                "A positive alpha helps.",
                NonPSDKernelWarning,
            )
        operator = KernelOperator(X, kernel)
        coef_init, intercept_init = self._warm_start_init(n_samples, Y.shape[1])
        settings = SolverSettings(
            alpha=float(self.alpha),
            step_size=self.step_size,
            max_iter=self.max_iter,
            tol=float(self.tol),
            fit_intercept=self.fit_intercept,
            coef_init=coef_init,
            intercept_init=intercept_init,
            verbose=self.verbose,
            psd=True if kernel is None else kernel.psd,
            kernel_name="precomputed" if kernel is None else kernel.name,
        )
        result = SOLVERS[self.solver](operator, Y, w, settings)

        self.X_fit_ = X
        self.dual_coef_ = result.dual_coef
        self.intercept_ = result.intercept
        self.n_iter_ = result.n_iter
        self.loss_curve_ = list(result.loss_curve)
        self.step_size_ = result.step_size
        return self

    def _decision(self, X):
        """``K(X, X_fit_) @ dual_coef_ + intercept_`` with 2-D coefficients."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        coef = self.dual_coef_.reshape(len(self.dual_coef_), -1)
        intercept = np.atleast_1d(self.intercept_)
        return cross_kernel_dot(self._bound_kernel(), X, self.X_fit_, coef) + intercept
