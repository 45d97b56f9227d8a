"""AllSubsetsFeatures: the explicit feature map of the all_subsets kernel."""

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

MAX_FEATURES = 16  # 2**16 = 65,536 output columns, 512 KiB per row


class AllSubsetsFeatures(TransformerMixin, BaseEstimator):
    """Explicit feature map ``phi(x)`` of the ``all_subsets`` kernel.

    Maps ``x`` in R^d to the 2**d products of all subsets of its entries,
    ``phi(x)_S = prod_{k in S} x_k`` (the empty product is 1), so that
    ``phi(x)'phi(z) = prod_k (1 + x_k z_k)``, the all_subsets kernel. It
    lets you watch the kernel trick hold: a linear-kernel model on
    ``phi(X)`` equals the all_subsets model on ``X``. Only for small d: it
    raises a ValueError past ``d = 16`` (65,536 output features).

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import AllSubsetsFeatures
    >>> AllSubsetsFeatures().fit_transform(np.array([[2.0, 3.0]]))
    array([[1., 2., 3., 6.]])
    """

    _parameter_constraints: dict = {}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check X and remember its number of features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs, with n_features at most 16.
        y : None
            Ignored.

        Returns
        -------
        self : AllSubsetsFeatures
            The fitted transformer.
        """
        X = validate_data(self, X, dtype=np.float64)
        if X.shape[1] > MAX_FEATURES:
            raise ValueError(
                f"AllSubsetsFeatures builds 2**n_features columns and supports at "
                f"most {MAX_FEATURES} features; got {X.shape[1]}. Use the "
                "'all_subsets' kernel instead, which costs O(n_features)."
            )
        return self

    def transform(self, X):
        """Map X to its 2**n_features subset products.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        Phi : ndarray of shape (n_samples, 2**n_features)
            Column ``j`` is the product of the features whose bits are set
            in ``j`` (bit k for feature k).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        Phi = np.ones((X.shape[0], 1))
        with np.errstate(over="ignore"):
            for k in range(X.shape[1]):
                # Doubling: subsets without feature k, then the same with it.
                Phi = np.hstack([Phi, Phi * X[:, k : k + 1]])
        if not np.all(np.isfinite(Phi)):
            raise ValueError(
                "Some subset products overflow float64 (about 1.8e308). Scale the "
                "features down (for example with sklearn.preprocessing.StandardScaler)."
            )
        return Phi

    def get_feature_names_out(self, input_features=None):
        """Names of the output features, like ``"x0 x2"``, ``"1"`` for the empty set.

        Parameters
        ----------
        input_features : array-like of str, default=None
            Input names; by default ``feature_names_in_`` or ``x0, x1, ...``.

        Returns
        -------
        names : ndarray of str of shape (2**n_features,)
            The output feature names.
        """
        check_is_fitted(self)
        if input_features is None:
            input_features = getattr(
                self, "feature_names_in_", [f"x{k}" for k in range(self.n_features_in_)]
            )
        elif len(input_features) != self.n_features_in_:
            raise ValueError(
                f"input_features has {len(input_features)} names, but the transformer was "
                f"fitted on {self.n_features_in_} features; pass one name per feature."
            )
        names = []
        for j in range(2**self.n_features_in_):
            members = [input_features[k] for k in range(self.n_features_in_) if j >> k & 1]
            names.append(" ".join(members) if members else "1")
        return np.asarray(names, dtype=object)
