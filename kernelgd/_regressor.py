"""KernelGDRegressor: kernel regression trained by gradient descent."""

import numpy as np
from sklearn.base import MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _dask, _docs
from ._dask import is_dask_collection
from ._array_api import follow, xp_of
from ._base import BaseKernelGD


class KernelGDRegressor(MultiOutputMixin, RegressorMixin, BaseKernelGD):
    """Kernel regression trained by gradient descent on the dual coefficients.

    Learns ``f(x) = sum_i dual_coef_[i] k(X_fit_[i], x) + intercept_`` by
    gradient descent on the dual coefficients or a faster solver of the
    same objective (see Notes). With ``alpha > 0`` it
    converges to the kernel ridge solution.

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
    >>> model = KernelGDRegressor(sigma=1.0, max_iter=500).fit(X, y)
    >>> model.score(X, y) > 0.99
    True
    """

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
        if any(map(is_dask_collection, (X, y, sample_weight))):
            return _dask.fit(self, X, y, sample_weight, classifier=False)
        xp, _, y, sample_weight = follow(X, y, sample_weight)
        X, y = validate_data(
            self, X, y, accept_sparse="csr", multi_output=True, y_numeric=True, dtype=xp.float64
        )
        y = xp.asarray(y, dtype=xp.float64)
        return self._fit(X, xp.reshape(y, (y.shape[0], -1)), sample_weight, y, ravel=y.ndim == 1)

    def predict(self, X):
        """Predict with the fitted model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            The predictions.
        """
        if is_dask_collection(X):  # lazily, block by block
            check_is_fitted(self)
            n_columns = None if self.dual_coef_.ndim == 1 else self.dual_coef_.shape[1]
            return _dask.map_rows(self.predict, X, n_columns, np.float64)
        F = self._decision(X, "predict")
        return xp_of(F).reshape(F, (-1,)) if self.dual_coef_.ndim == 1 else F


KernelGDRegressor.__doc__ = KernelGDRegressor.__doc__ % {
    "parameters": _docs.PARAMETERS.replace("{kernel_default}", '"auto"').replace("{alpha}", _docs.REGRESSOR_ALPHA),
    "notes": _docs.NOTES,
}
