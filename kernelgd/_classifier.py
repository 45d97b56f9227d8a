"""KernelGDClassifier: kernel classification with the squared or the logistic loss."""

import math

import numpy as np
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from . import _dask, _docs
from ._dask import is_dask_collection
from ._array_api import follow, from_numpy, like, to_numpy, xp_of
from ._base import BaseKernelGD
from ._auto_alpha import largest_output
from ._combiner import layer_classes
from ._logistic_layer import layer_inputs
from ._losses import BinaryLogisticLoss, MultinomialLoss, SquaredLoss
from ._targets import class_weights, encode_labels
from .kernels import get_spec, is_builtin

# The squared loss's sigma="scale": the multiples of that width walked to while each lowers the rule's left-out
# error without misclassifying more left-out rows: the scale's width is a smoother's, a class boundary sharper.
WIDTHS = (0.5, 0.25)
# Class shares whose log-odds differ by less than this tie (the no-signal layer's exact ties: balanced classes).
SHARE_TIE = 1e-9


def _has_probabilities(estimator):
    """predict_proba exists with the logistic loss, and with the squared loss's output layer (``combiner_``)."""
    if estimator.loss == "logistic":
        return True
    if estimator.combine != "logistic":
        raise AttributeError(
            "predict_proba needs loss='logistic' or the squared loss's output layer (combine='logistic'): "
            "combine='argmax' gives scores, not probabilities."
        )
    if hasattr(estimator, "classes_") and getattr(estimator, "combiner_", None) is None:
        raise AttributeError(
            "predict_proba reads the output layer (combiner_), which this fit has none of: a class had no "
            "training row of positive weight. Refit with every class weighing, or with loss='logistic'."
        )
    return True


class KernelGDClassifier(ClassifierMixin, BaseKernelGD):
    """Kernel classifier (kernel ridge or kernel logistic regression), fitted by a gradient-based solver.

    With ``loss="squared"`` (the default) each class gets a +1/-1 target
    (one-vs-rest; a single column for two classes) fitted with the squared
    loss of :class:`KernelGDRegressor`, and a multinomial logistic
    regression on those outputs (``combine``) makes the decision. With
    ``loss="logistic"`` it is kernel logistic regression: binary (one
    column) or multinomial (softmax, one column per class). Both have
    ``predict_proba``: the output layer's (``combine``), fitted to left-out
    outputs as Platt scaling is to held-out ones, where the fit has one,
    else the logistic model's own probabilities. ``predict`` returns the
    class of the largest decision value. Labels may be of any type, strings
    included.

    Read more in the :ref:`User Guide <ug-classification>`.

    Parameters
    ----------
    loss : {"squared", "logistic"}, default="squared"
        ``"squared"``: the squared loss on +-1 targets, one-vs-rest.
        ``"logistic"``: ``log(1 + exp(-y f))`` for two classes, the softmax
        cross-entropy for more. ``predict_proba`` and ``predict_log_proba``
        exist with this loss and with the squared loss's output layer
        (``combine="logistic"``).
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying the sample weights, with
        scikit-learn's meaning: ``"balanced"`` weights each class by
        ``n_samples / (n_classes * n_samples_of_class)``; a dict maps labels
        to weights (missing labels weigh 1). ``class_weight="balanced"``
        and ``sample_weight=compute_sample_weight("balanced", y)`` are the
        same fit, ``alpha="auto"``'s ridge included (its rule reads weights
        as relative, through Kish's effective number of rows).
    combine : {"logistic", "argmax"}, default="logistic"
        How the per-class outputs decide. With the squared loss,
        ``"logistic"``: scikit-learn's
        ``LogisticRegression()`` (by Newton-Cholesky where it fits at most
        128 numbers) fitted to the training rows' left-out
        outputs (each row's output from the fit without it: exact up to
        1,000 distinct rows, of a 500-landmark Nystroem model beyond; at
        most 20,000 rows, drawn at random beyond), weighted as the fit,
        decides from the outputs (``combiner_``): one least-squares output
        per class ranks a class lying between others poorly (nested shells,
        bands of one feature), and for two classes the layer places the
        threshold. Its probabilities are ``predict_proba``'s. With the
        logistic loss and ``alpha="auto"``, ``"logistic"``: the same layer
        on the model's log-probabilities (its log-odds for two classes) of
        rows held out of fits at the chosen ``sigma_`` and ``alpha_``: the
        ridge rule's held-out folds, and more folds of a fifth of the rows
        each up to 1,000 held-out rows (every row once on smaller sets)
        where their fits are small (``n**2 * k`` at most ``2e8``, k the
        score columns), with at least 10 held-out rows per number it fits
        (``k (k + 1)``), kept where its own cross-validated log-loss on those
        rows is lower than the model's by a standard error of the
        difference: one ridge shrinks every class's scores alike, which a
        class between others or labels drawn at random leave miscalibrated.
        With either loss the probabilities are then read as those of labels
        drawn at random (from the classes' shares of the training weight)
        with probability ``label_noise_``, where that share,
        fitted by maximum likelihood to the same left-out or held-out rows,
        lowers their five-fold cross-validated log-loss by a standard error:
        a model certain far from its boundaries pays tens of nats for each
        such label. ``"argmax"``: the largest
        output (its sign for two classes), as scikit-learn's
        ``RidgeClassifier``, without probabilities for the squared loss; the
        logistic model's own probabilities for the logistic loss.
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
    combiner_ : LogisticRegression or None
        The output layer (``combine="logistic"``). With the squared loss,
        fitted to the training rows' left-out outputs at ``alpha_`` and
        applied to those of ``dual_coef_`` and ``intercept_`` (their own
        where ``alpha_`` is 0 or the kernel is not positive semi-definite);
        where those rows are fewer than the numbers the layer fits (``k (k
        + 1)`` for k classes) and a layer of one slope shared by the classes
        (``coef_`` a multiple of the identity) has a lower cross-validated
        log-loss by one standard error, that layer; None where a class has
        no training row of positive weight. With the
        logistic loss, fitted to held-out log-probabilities where
        ``alpha="auto"`` chose the ridge and the layer lowers their
        cross-validated log-loss; None otherwise.
    label_noise_ : float
        The share of labels the probabilities take as drawn at random from
        the classes' shares q of the training weight (``combine="logistic"``):
        ``predict_proba`` is ``(1 - label_noise_) p + label_noise_ q`` of the
        layer's or model's own ``p``, at 1.0 the intercept-only model's q;
        0.0 where it does not lower the held-out log-loss (a fixed ridge of
        the logistic loss, or ``combine="argmax"``). Classes, and
        ``decision_function``, are those of ``p``.
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training inputs (the training kernel matrix when precomputed).
    kernel_ : str or callable
        The kernel used: ``kernel``, or the one ``"auto"`` chose.
    alpha_ : float
        The ridge strength used (``alpha``, or its value for ``"auto"``).
    tol_ : float
        The stopping tolerance used (``tol``, or its value for ``"auto"``).
    n_centers_ : int
        The number of centers f is restricted to: the number of training
        rows for the exact model (``n_centers=None``, or ``"auto"`` where the
        kernel matrix fits), else the rows of ``X_fit_``.
    sigma_ : float, ndarray of shape (n_features,) or None
        The bandwidth used, None for kernels without one. With the logistic
        loss, ``alpha="auto"`` and ``sigma="scale"``, the width the
        leave-one-out path (a small set) or the held-out rows chose (see
        ``alpha``).
    step_size_ : float
        The step size used.
    solver_ : str
        The solver used: ``solver``, or the one ``"auto"`` chose.
    n_iter_ : int
        The number of iterations run (Newton steps for ``"newton"``).
    loss_curve_ : list of float
        The objective after each iteration (summed over the class columns),
        up to the returned model (the best iterate seen).
    validation_loss_curve_ : list of float or None
        With ``early_stopping=True``, the loss on the validation rows after
        each iteration; None otherwise.
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
    >>> clf = KernelGDClassifier().fit(X, y)  # width and ridge chosen from the data
    >>> clf.score(X, y)
    1.0
    """

    _parameter_constraints: dict = {
        **BaseKernelGD._parameter_constraints,
        "loss": [StrOptions({"squared", "logistic"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "combine": [StrOptions({"logistic", "argmax"})],
    }

    def __init__(
        self,
        *,
        loss="squared",
        class_weight=None,
        combine="logistic",
        kernel="rbf",
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
        super().__init__(
            kernel=kernel, sigma=sigma, degree=degree, coef0=coef0, kernel_params=kernel_params,
            alpha=alpha, solver=solver, step_size=step_size, max_iter=max_iter, tol=tol,
            n_centers=n_centers, fit_intercept=fit_intercept, early_stopping=early_stopping,
            validation_fraction=validation_fraction, n_iter_no_change=n_iter_no_change,
            warm_start=warm_start, random_state=random_state, options=options, verbose=verbose,
        )
        self.loss = loss
        self.class_weight = class_weight
        self.combine = combine

    def _loss(self, n_columns):
        if self.loss == "squared":
            return SquaredLoss
        return BinaryLogisticLoss if n_columns == 1 else MultinomialLoss

    def _chooses_kernel(self, loss):
        # the squared loss walks a built-in distance kernel's sigma="scale" width (``WIDTHS``); a given sigma
        # takes the plain rule (a search's fits at its own widths pay no rule pass of their own)
        scale = isinstance(self.sigma, str) and self.sigma == "scale"
        spec = None if self._precomputed or self._auto_kernel or not scale else get_spec(self.kernel)
        walks = spec is not None and is_builtin(spec) and spec.centred_scale and "sigma" in spec.params
        return self._auto_kernel or (loss is SquaredLoss and walks)

    def _walk_widths(self, exact):
        """Narrower multiples of sigma="scale"'s width (``WIDTHS``), whether the rule is exact or not."""
        return WIDTHS

    def _combines(self, loss):
        """Whether the fit ends with the output layer (``_combiner``): the squared loss, ``combine="logistic"``."""
        return loss is SquaredLoss and self.combine == "logistic"

    def _layers(self, problem, monitor):
        """Whether a fit of the logistic loss ends with its output layer (``_logistic_layer``): ``combine="logistic"``
        where the ridge rule chose the ridge of the full model (alpha="auto", no early stopping), or a search's
        refit of the ridge it chose (``_calibrates``: a one-off fit, where a user's fixed ridge may be one of many)."""
        chosen = isinstance(self.alpha, str) or getattr(self, "_calibrates", False)
        return (problem.loss is not SquaredLoss and self.combine == "logistic" and chosen
                and problem.centers is None and (problem.kernel is None or problem.kernel.psd) and monitor is None)

    def _layer_inputs(self, F):
        """What the output layer reads of the model's scores F (2-D): the outputs themselves for the squared loss,
        ``_logistic_layer.layer_inputs`` for the logistic loss, on the host."""
        F = np.asarray(to_numpy(F))
        return layer_inputs(self._fitted_loss(), F) if self.loss == "logistic" else F

    def _left_out_classes(self, loss):
        """How the ridge rule reads a left-out row's class from its outputs: as the fit will decide."""
        return layer_classes if self._combines(loss) else largest_output

    def _fitted_loss(self):
        """The loss of the fitted model: one column for two classes, one per class otherwise."""
        return self._loss(1 if len(self.classes_) == 2 else len(self.classes_))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model by gradient descent (or the solver chosen).

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
        y : array-like of shape (n_samples,)
            Class labels, at least two distinct.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, normalised to sum to one.

        Returns
        -------
        self : KernelGDClassifier
            The fitted estimator.
        """
        if any(map(is_dask_collection, (X, y, sample_weight))):
            return _dask.fit(self, X, y, sample_weight, classifier=True)
        xp, device, y, sample_weight = follow(X, y, sample_weight)
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=xp.float64)
        # labels are encoded on the host (classes_ stays numpy, as in scikit-learn)
        y = np.asarray(to_numpy(y))
        sample_weight = None if sample_weight is None else to_numpy(sample_weight)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                "KernelGDClassifier needs samples of at least 2 classes, but the "
                f"data contains only one class: {classes[0]!r}."
            )
        Y = encode_labels(codes, len(classes), one_hot=self.loss == "logistic")
        if (
            self.warm_start
            and hasattr(self, "classes_")
            and not np.array_equal(self.classes_, classes)
        ):
            del self.dual_coef_  # other classes: the old coefficients do not apply
        self.classes_ = classes
        if self.class_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, y, dtype=np.float64)
            sample_weight = sample_weight * class_weights(self.class_weight, self.classes_, y, sample_weight)
        Y = from_numpy(Y, xp, device)
        sample_weight = None if sample_weight is None else like(sample_weight, Y)
        # a layer fitted before reads other outputs: none yet
        self.combiner_, self.label_noise_, self._noise_shares = None, 0.0, None
        # a stratified validation split where every class can be split
        return self._fit(X, Y, sample_weight, y, stratify=y)

    def decision_function(self, X):
        """Decision values: the output layer's (``combiner_``) on ``f(x)``, else ``f(x)`` itself.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"``.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, positive values vote for ``classes_[1]``.

        Examples
        --------
        >>> from sklearn.datasets import make_gaussian_quantiles
        >>> from kernelgd import KernelGDClassifier
        >>> X, y = make_gaussian_quantiles(n_samples=600, n_classes=3, random_state=0)
        >>> clf = KernelGDClassifier(random_state=0).fit(X, y)
        >>> clf.decision_function(X[:2]).shape
        (2, 3)
        """
        if is_dask_collection(X):  # lazily, block by block
            check_is_fitted(self)
            n_columns = None if self.dual_coef_.shape[1] == 1 else self.dual_coef_.shape[1]
            return _dask.map_rows(self.decision_function, X, n_columns, np.float64)
        return self._scores(X, "decision_function")

    def _scores(self, X, method):
        F = self._decision(X, method)
        if getattr(self, "combiner_", None) is not None:  # the output layer's scores, in F's namespace
            return like(self.combiner_.decision_function(self._layer_inputs(F)), F)
        return xp_of(F).reshape(F, (-1,)) if F.shape[1] == 1 else F

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
        if is_dask_collection(X):
            check_is_fitted(self)
            return _dask.map_rows(self.predict, X, None, self.classes_.dtype)
        scores = self._scores(X, "predict")
        index = (scores > 0) if scores.ndim == 1 else xp_of(scores).argmax(scores, axis=1)
        index = np.asarray(to_numpy(index), dtype=np.intp)
        tied = self._tied_shares()
        if tied is not None:  # a layer without signal whose largest class shares tie: the outputs break the tie
            F = np.asarray(to_numpy(self._decision(X, "predict")))
            index = (F[:, 0] > 0).astype(np.intp) if F.shape[1] == 1 else tied[np.argmax(F[:, tied], axis=1)]
        labels = self.classes_[index]
        # in the scores' namespace for numeric classes, numpy for others (no other namespace holds them)
        return like(labels, scores) if labels.dtype.kind in "biuf" else labels

    def _tied_shares(self):
        """The classes whose shares tie for the largest (within ``SHARE_TIE`` in log-odds) in an output layer
        without slope (no signal in the left-out outputs: the classes' weighted shares), where more than one
        does; else None. Without a tie-break every row would get the first of them, even a training row."""
        layer = getattr(self, "combiner_", None)
        if layer is None or np.any(layer.coef_):
            return None
        b = np.ravel(layer.intercept_)
        b = np.array([0.0, b[0]]) if b.size == 1 else b  # two classes: class 1's log-odds against class 0's
        tied = np.flatnonzero(b >= b.max() - SHARE_TIE)
        return tied if tied.size > 1 else None

    @available_if(_has_probabilities)
    def predict_proba(self, X):
        """Class probabilities: the output layer's (``combiner_``) where the fit has one, else the logistic model's.

        The output layer is a logistic regression fitted to the training rows' left-out outputs, so its
        probabilities are calibrated on outputs the model had not seen, as Platt scaling's are on held-out
        ones (``SVC(probability=True)``): for the squared loss at no extra fit, for the logistic loss from
        the held-out fits that chose its ridge and a few more. Where the fit found labels drawn at random
        (``label_noise_``), each probability ``p`` is ``(1 - label_noise_) p + label_noise_ q``, q the
        classes' shares of the training weight.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Rows sum to one; columns follow ``classes_``.

        Examples
        --------
        >>> from sklearn.datasets import make_moons
        >>> from kernelgd import KernelGDClassifier
        >>> X, y = make_moons(200, noise=0.2, random_state=0)
        >>> clf = KernelGDClassifier(loss="logistic", sigma=0.5, random_state=0).fit(X, y)
        >>> clf.predict_proba(X[:2]).round(2)
        array([[0.99, 0.01],
               [0.02, 0.98]])
        >>> KernelGDClassifier(random_state=0).fit(X, y).predict_proba(X[:2]).round(2)  # the output layer's
        array([[0.99, 0.01],
               [0.02, 0.98]])
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            return _dask.map_rows(self.predict_proba, X, len(self.classes_), np.float64)
        loss, F = self._log_odds(X, "predict_proba")
        P, eps = loss.probabilities(F), getattr(self, "label_noise_", 0.0)
        return P if not eps else (1.0 - eps) * P + eps * xp_of(P).astype(like(self._noise_shares, P), P.dtype)

    @available_if(_has_probabilities)
    def predict_log_proba(self, X):
        """Logarithms of the class probabilities (``predict_proba``'s).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Inputs, or the (n_samples, n_train) kernel matrix against the
            training points if ``kernel="precomputed"``.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Computed stably (no log of a rounded probability); columns
            follow ``classes_``.

        Examples
        --------
        >>> from sklearn.datasets import make_moons
        >>> from kernelgd import KernelGDClassifier
        >>> X, y = make_moons(200, noise=0.2, random_state=0)
        >>> clf = KernelGDClassifier(loss="logistic", sigma=0.5, random_state=0).fit(X, y)
        >>> clf.predict_log_proba(X[:1]).round(2)
        array([[-0.01, -4.63]])
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            return _dask.map_rows(self.predict_log_proba, X, len(self.classes_), np.float64)
        loss, F = self._log_odds(X, "predict_log_proba")
        L, eps = loss.log_probabilities(F), getattr(self, "label_noise_", 0.0)
        if not eps:
            return L
        xp = xp_of(L)
        with np.errstate(divide="ignore"):  # a class without weight: log(0), whose term drops out
            log_shares = xp.log(xp.astype(like(self._noise_shares, L), L.dtype)) + math.log(eps)
        return xp.logaddexp(L + math.log1p(-eps), log_shares)

    def _log_odds(self, X, method):
        """``(loss, F)``: the logistic loss component and the scores its probabilities are read from, ``f(x)``
        for the logistic loss, the output layer's decision values (its log-odds) for the squared loss's."""
        F = self._decision(X, method)
        if self.loss == "logistic" and getattr(self, "combiner_", None) is None:
            return self._fitted_loss(), F
        S = like(self.combiner_.decision_function(self._layer_inputs(F)), F)
        S = xp_of(S).reshape(S, (-1, 1)) if S.ndim == 1 else S
        return BinaryLogisticLoss if S.shape[1] == 1 else MultinomialLoss, S


KernelGDClassifier.__doc__ = KernelGDClassifier.__doc__ % {
    "parameters": _docs.PARAMETERS.replace("{kernel_default}", '"rbf"').replace("{alpha}", _docs.CLASSIFIER_ALPHA),
    "notes": _docs.NOTES,
}
