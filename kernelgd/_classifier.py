"""KernelGDClassifier: one-vs-rest squared-loss kernel classification."""

import numpy as np
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from . import _docs
from ._base import BaseKernelGD


class KernelGDClassifier(ClassifierMixin, BaseKernelGD):
    """Kernel classifier trained by gradient descent on the dual coefficients.

    Each class gets a +1/-1 target (one-vs-rest; a single column for two
    classes) fitted with the squared loss of :class:`KernelGDRegressor`;
    ``predict`` returns the class of the largest decision value. Labels may
    be of any type, strings included.

    Parameters
    ----------
%(parameters)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_classes)
        The coefficients: one column for two classes (positive class
        ``classes_[1]``), one per class otherwise.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The intercepts.
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training inputs (the training kernel matrix when precomputed).
    sigma_ : float or None
        The bandwidth used, None for kernels without one.
    step_size_ : float
        The step size used.
    n_iter_ : int
        The number of iterations run.
    loss_curve_ : list of float
        The objective after each iteration (summed over the class columns),
        up to the returned model (the best iterate seen).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    KernelGDRegressor : The same model for regression.
    sklearn.svm.SVC : Kernel support vector classification.

    Notes
    -----
%(notes)s

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from kernelgd import KernelGDClassifier
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> clf = KernelGDClassifier(sigma=0.5).fit(X, y)
    >>> clf.score(X, y)
    1.0
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the one-vs-rest model by gradient descent.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training inputs, or the (n_samples, n_samples) kernel matrix if
            ``kernel="precomputed"``.
        y : array-like of shape (n_samples,)
            Class labels, at least two distinct.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, normalised to sum to one.

        Returns
        -------
        self : KernelGDClassifier
            The fitted estimator.
        """
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        binarizer = LabelBinarizer(neg_label=-1, pos_label=1)
        Y = binarizer.fit_transform(y).astype(np.float64)
        if len(binarizer.classes_) < 2:
            raise ValueError(
                "KernelGDClassifier needs samples of at least 2 classes, but the "
                f"data contains only one class: {binarizer.classes_[0]!r}."
            )
        if (
            self.warm_start
            and hasattr(self, "classes_")
            and not np.array_equal(self.classes_, binarizer.classes_)
        ):
            del self.dual_coef_  # other classes: the old coefficients do not apply
        self.classes_ = binarizer.classes_
        # a stratified validation split where every class can be split
        return self._fit(X, Y, sample_weight, stratify=y)

    def decision_function(self, X):
        """Decision values ``f(x)`` of the one-vs-rest models.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"``.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, positive values vote for ``classes_[1]``.
        """
        F = self._decision(X)
        return F.ravel() if F.shape[1] == 1 else F

    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The predicted labels.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]


KernelGDClassifier.__doc__ = KernelGDClassifier.__doc__ % {
    "parameters": _docs.PARAMETERS,
    "notes": _docs.NOTES,
}
