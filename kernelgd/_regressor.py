"""KernelGDRegressor: kernel regression trained by gradient descent."""

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _dask, _docs, _posterior
from ._dask import is_dask_collection
from ._array_api import follow, to_numpy, xp_of
from ._base import BaseKernelGD, _check_same_namespace, resolve_options
from ._operator import KernelOperator, single_threaded_blas
from ._warnings import warn


class KernelGDRegressor(MultiOutputMixin, RegressorMixin, BaseKernelGD):
    """Kernel ridge regression, fitted on the dual coefficients by a gradient-based solver.

    Learns ``f(x) = sum_i dual_coef_[i] k(X_fit_[i], x) + intercept_`` by
    minimising the squared loss plus ``alpha`` times the model's squared norm:
    by default with preconditioned conjugate gradient, on request with
    EigenPro, Newton or plain gradient descent on the same objective (see
    Notes). With ``alpha > 0`` it converges to the kernel ridge solution.

    Read more in the :ref:`User Guide <ug-model>`.

    Parameters
    ----------
%(parameters)s

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The coefficients ``a`` of the training points.
    intercept_ : float or ndarray of shape (n_targets,)
        The intercept ``b`` (0 when ``fit_intercept=False``).
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training inputs (the training kernel matrix when precomputed).
    kernel_ : str or callable
        The kernel used: ``kernel``, or the one ``"auto"`` chose.
    alpha_ : float
        The ridge strength used (``alpha``, or the value ``"auto"`` chose).
    tol_ : float
        The stopping tolerance used (``tol``, or its value for ``"auto"``).
    n_centers_ : int
        The number of centers f is restricted to: the number of training
        rows for the exact model (``n_centers=None``, or ``"auto"`` where the
        kernel matrix fits), else the rows of ``X_fit_``.
    sigma_ : float, ndarray of shape (n_features,) or None
        The bandwidth used, None for kernels without one.
    step_size_ : float
        The step size used.
    solver_ : str
        The solver used: ``solver``, or the one ``"auto"`` chose.
    n_iter_ : int
        The number of iterations run (Newton steps for ``"newton"``).
    loss_curve_ : list of float
        The objective after each iteration, up to the returned model (the
        best iterate seen); the last value is that model's objective.
    validation_loss_curve_ : list of float or None
        With ``early_stopping=True``, the loss on the validation rows after
        each iteration; None otherwise.
    signal_variance_ : float, ndarray of shape (n_targets,) or None
        The Gaussian process's scale ``s^2``: the prior covariance is
        ``s^2 k``. Chosen by the leave-one-out predictive likelihood, and
        enlarged where its 95%% intervals hold clearly fewer than 95%% of the
        held-out training targets (see :meth:`predict`); None for a kernel
        that is not positive semi-definite.
    noise_variance_ : float, ndarray of shape (n_targets,) or None
        The noise variance of a new observation, ``s^2 * alpha_ * N`` (N
        Kish's effective number of distinct training rows, ``(sum W)^2 /
        sum W^2`` over their summed weights W: their number where they weigh
        alike). Both overflow to inf only for targets beyond about 1e154.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    KernelGDClassifier : The same model for classification.
    sklearn.kernel_ridge.KernelRidge : Closed-form kernel ridge regression.

    Notes
    -----
%(notes)s

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import KernelGDRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(100, 1))
    >>> y = np.sin(X).ravel()
    >>> model = KernelGDRegressor().fit(X, y)  # kernel, width and ridge chosen from the data
    >>> model.score(X, y) > 0.99
    True
    >>> model.kernel_
    'rbf'
    >>> mean, std = model.predict([[0.0], [10.0]], return_std=True)
    >>> bool(std[0] < std[1])  # less sure far from the data
    True
    """

    _predictive = True

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model by gradient descent.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask DataFrame} of shape (n_samples, n_features)
            Training inputs, or the (n_samples, n_samples) kernel matrix if
            ``kernel="precomputed"``. Dask collections, chunked by rows, fit
            the centers model on the cluster, the rows staying on the workers
            (the "Scaling out" page of the documentation). Under
            ``sklearn.config_context(array_api_dispatch=True)``, arrays of
            torch, CuPy or another array API library are computed on in
            their own namespace and on their device, and the fitted
            attributes stay there (the "GPUs" page).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets; a 2-D y fits every column at once.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, normalised to sum to one.

        Returns
        -------
        self : KernelGDRegressor
            The fitted estimator.
        """
        self.__dict__.pop("_deferred_posterior", None)  # a previous fit's
        self._posterior = None
        if any(map(is_dask_collection, (X, y, sample_weight))):
            _dask.fit(self, X, y, sample_weight, classifier=False)
        else:
            xp, _, y, sample_weight = follow(X, y, sample_weight)
            X, y = validate_data(
                self, X, y, accept_sparse="csr", multi_output=True, y_numeric=True, dtype=xp.float64
            )
            y = xp.asarray(y, dtype=xp.float64)
            self._fit(X, xp.reshape(y, (y.shape[0], -1)), sample_weight, y, ravel=y.ndim == 1)
        return self

    def _fitted_posterior(self):
        """The fit's posterior (``_posterior``), computed from what the fit kept when first asked for; None
        for a kernel that is not PSD."""
        deferred = self.__dict__.get("_deferred_posterior")
        if deferred is not None:
            with single_threaded_blas():
                self._posterior = deferred.compute(self)
            del self._deferred_posterior
        return getattr(self, "_posterior", None)

    def _variances(self):
        if "_posterior" not in self.__dict__:  # fit sets it first (None until the posterior is computed)
            raise AttributeError("signal_variance_ and noise_variance_ are set by fit: the model is not fitted.")
        posterior = self._fitted_posterior()
        if posterior is None:
            return None, None
        signal, noise = posterior.variances()
        return _posterior.per_target(signal), _posterior.per_target(noise)

    @property
    def signal_variance_(self):
        """The Gaussian process's scale ``s^2`` (computed when first read)."""
        return self._variances()[0]

    @property
    def noise_variance_(self):
        """The noise variance of a new observation (computed when first read)."""
        return self._variances()[1]

    def predict(self, X, return_std=False, return_cov=False):
        """Predict with the fitted model, and how sure it is.

        The model is the posterior mean of a Gaussian process whose scale
        maximises the leave-one-out predictive likelihood (see
        ``signal_variance_`` and ``noise_variance_``); ``return_std`` and
        ``return_cov`` give the predictive distribution of a new observation
        at X, noise included, as ``GaussianProcessRegressor`` with a
        ``WhiteKernel`` does. The exact model solves a linear system per test
        point: for at least n/100 test points whose n x n factor fits the
        memory budget, one dense Cholesky factorization (n^3/3 flops, then
        O(n^2) per point), otherwise preconditioned conjugate gradient (O(n^2)
        per point and iteration). Where that would cost more than four times
        as much as a local approximation (large n, or few points beyond a few
        thousand rows), each point's variance is conditioned on its 512
        training rows of largest kernel value instead: never below the exact
        variance, at O(512^3) per point; a standard deviation can therefore be
        larger when its point is predicted alone than among many (by up to
        6.5% on UCI kin8nm's 7,373 rows; more where the kernel is far wider
        than the data, every training row about equally correlated with the
        point).
        The centers model (``n_centers``) uses the DTC posterior from two
        m x m factors formed at fit time, O(m^2) per point.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"`` (the mean only).
        return_std : bool, default=False
            Whether to return the predictive standard deviation.
        return_cov : bool, default=False
            Whether to return the predictive covariance of the rows of X
            (n_samples x n_samples: for small X).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            The predictions (the posterior mean).
        y_std : ndarray of the shape of y_pred
            The predictive standard deviation, only with ``return_std``.
        y_cov : ndarray of shape (n_samples, n_samples) or (n_samples, n_samples, n_targets)
            The predictive covariance, only with ``return_cov``.
        """
        if return_std and return_cov:
            raise ValueError("At most one of return_std and return_cov can be requested; pass one of them.")
        check_is_fitted(self)
        ravel = self.dual_coef_.ndim == 1
        if is_dask_collection(X):  # lazily, block by block
            if return_cov:
                raise ValueError(
                    "return_cov on a dask X would be an n x n matrix; compute X first (X.compute()) "
                    "or ask for return_std, which stays lazy."
                )
            n_columns = None if ravel else self.dual_coef_.shape[1]
            mean = _dask.map_rows(self.predict, X, n_columns, np.float64)
            if return_std:
                return mean, _dask.map_rows(self._predictive_std, X, n_columns, np.float64)
            return mean
        F = self._decision(X, "predict")
        mean = xp_of(F).reshape(F, (-1,)) if ravel else F
        if return_std:
            return mean, self._predictive_std(X)
        if return_cov:
            return mean, self._predictive_cov(X)
        return mean

    def _checked_posterior(self):
        """The fit's posterior, or a clear error where the model has none."""
        posterior = self._fitted_posterior()
        if self._precomputed:
            raise ValueError(
                "return_std, return_cov and sample_y need k(x, x) at the new points, which a precomputed "
                "kernel does not give. Fit with the kernel's name or callable instead of 'precomputed'."
            )
        if posterior is None:
            raise ValueError(
                f"return_std, return_cov and sample_y need a positive semi-definite kernel (a Gaussian "
                f"process's covariance); the {self.kernel_} kernel is not. Use a PSD kernel such as 'rbf'."
            )
        return posterior

    def _latent(self, X, full):
        """The latent posterior variance at X in units of s^2 (diagonal, or with ``full`` the matrix)."""
        posterior = self._checked_posterior()
        _check_same_namespace(X, self, attribute="dual_coef_", method="predict")
        xp = xp_of(self.dual_coef_)
        X = validate_data(self, X, reset=False, accept_sparse="csr", dtype=xp.float64)
        kernel = self._bound_kernel()
        options = resolve_options(self.options)
        budget = self._device_budget(xp, getattr(self.dual_coef_, "device", None), options)
        with single_threaded_blas():
            system = None
            if posterior.weights is not None:
                system = _posterior.local_system(posterior, self.X_fit_.shape[0], X.shape[0], budget, full)
            if posterior.weights is not None and system is None:
                operator = KernelOperator(self.X_fit_, kernel, memory_budget=budget, dtype=self._compute_dtype,
                                          threads=options["n_threads"])
                system = _posterior.exact_system(operator, posterior, self._seed(), X.shape[0], budget,
                                                     self.X_fit_)
            rows = X.shape[0] if full else _posterior.block_rows(self.X_fit_.shape[0], budget)
            parts, unresolved = [], False
            for batch in gen_batches(X.shape[0], rows):
                Z = X[batch].toarray() if sp.issparse(X) else X[batch, ...]
                explained, status = _posterior.reduction(kernel, self.X_fit_, Z, posterior, system=system, full=full)
                unresolved |= status == "max_iter"
                prior = kernel(Z, Z) if full else kernel.diag(Z)
                parts.append(xp.astype(prior, xp.float64) - explained)
        if unresolved:
            warn(
                f"The predictive variance's solves did not reach their tolerance in "
                f"{_posterior.VARIANCE_MAX_ITER} iterations: the standard deviations are overestimated. "
                "A larger alpha conditions the system better.",
                ConvergenceWarning,
            )
        latent = parts[0] if len(parts) == 1 else xp.concat(parts)
        if full:
            return (latent + latent.T) / 2
        return xp.where(latent > 0, latent, 0.0)

    def _seed(self):
        return check_random_state(self.random_state).randint(np.iinfo(np.int32).max)

    def _scales(self):
        """``(s per target as a 1-D array, noise of a new observation in units of s^2)``."""
        posterior = self._checked_posterior()
        xp = xp_of(self.dual_coef_)
        return xp.reshape(xp.asarray(posterior.signal_std), (-1,)), posterior.noise_unit

    def _predictive_std(self, X):
        s, noise = self._scales()
        xp = xp_of(s)
        std = xp.sqrt(self._latent(X, full=False) + noise)[:, None] * s[None, :]
        return xp.reshape(std, (-1,)) if self.dual_coef_.ndim == 1 else std

    def _predictive_cov(self, X):
        s, noise = self._scales()
        xp = xp_of(s)
        latent = self._latent(X, full=True)
        latent = latent + noise * xp.eye(latent.shape[0], dtype=latent.dtype)
        cov = latent[:, :, None] * (s * s)[None, None, :]
        return cov[:, :, 0] if self.dual_coef_.ndim == 1 else cov

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw functions from the predictive distribution at X, as ``GaussianProcessRegressor`` does.

        Each draw is a sample of new observations at the rows of X (noise
        included), from the mean and covariance of :meth:`predict`: X's
        covariance matrix is formed, so X should be small (thousands of rows).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            Inputs.
        n_samples : int, default=1
            Number of draws.
        random_state : int, RandomState instance or None, default=0
            Seed of the draws.

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
            The draws.

        Examples
        --------
        >>> import numpy as np
        >>> from kernelgd import KernelGDRegressor
        >>> X = np.linspace(0, 5, 40)[:, None]
        >>> model = KernelGDRegressor().fit(X, np.sin(X).ravel())
        >>> model.sample_y(X[:3], n_samples=5).shape
        (3, 5)
        """
        if isinstance(n_samples, (bool, np.bool_)) or not isinstance(n_samples, Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}.")
        rng = check_random_state(random_state)
        mean, cov = self.predict(X, return_cov=True)
        mean, cov = np.asarray(to_numpy(mean)), np.asarray(to_numpy(cov))
        if mean.ndim == 1:
            return _draw(rng, mean, cov, n_samples)
        return np.stack([_draw(rng, mean[:, t], cov[:, :, t], n_samples) for t in range(mean.shape[1])], axis=1)


def _draw(rng, mean, cov, n_samples):
    """``n_samples`` draws of N(mean, cov) as columns; cov's rounding below zero (a nearly
    interpolating model's latent covariance) is clipped, not warned about."""
    lam, V = np.linalg.eigh(cov)
    root = V * np.sqrt(np.clip(lam, 0.0, None))
    return mean[:, None] + root @ rng.standard_normal((len(mean), n_samples))


KernelGDRegressor.__doc__ = KernelGDRegressor.__doc__ % {
    "parameters": _docs.PARAMETERS.replace("{kernel_default}", '"auto"').replace("{alpha}", _docs.REGRESSOR_ALPHA),
    "notes": _docs.NOTES,
}
