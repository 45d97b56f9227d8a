"""Read a learning curve: high variance, high bias, or fine."""

import textwrap
from dataclasses import dataclass, field
from numbers import Real

import numpy as np
from sklearn.base import is_classifier
from sklearn.metrics import check_scoring
from sklearn.model_selection import learning_curve
from sklearn.utils.validation import _num_samples

HIGH_VARIANCE, HIGH_BIAS, FINE = "high variance", "high bias", "fine"

# The usual remedies for each regime.
REMEDIES = {
    HIGH_VARIANCE: [
        "Add more training data.",
        "Reduce model complexity: a larger alpha, a wider kernel (larger sigma), or a lower degree.",
        "Bagging: average models fitted on bootstrap samples (sklearn.ensemble.BaggingRegressor "
        "or BaggingClassifier).",
    ],
    HIGH_BIAS: [
        "Use a more complex model: kernelize a linear model, a narrower kernel (smaller sigma), a "
        "higher degree, or a smaller alpha.",
        "Add features.",
        "Boosting (for example sklearn.ensemble.HistGradientBoostingRegressor or Classifier).",
    ],
    FINE: ["None needed: the test error is within the desired error epsilon."],
}


@dataclass(frozen=True)
class LearningCurveDiagnosis:
    """The result of :func:`diagnose_learning_curve`.

    Attributes
    ----------
    regime : {"high variance", "high bias", "fine"}
        The reading of the curves at the largest training size.
    symptoms : list of str
        The observations the verdict rests on, with their figures.
    remedies : list of str
        The usual remedies for the regime.
    epsilon : float
        The desired error.
    error_name : str
        What the errors are (for example "mean squared error").
    train_sizes : ndarray of shape (n_sizes,)
        Numbers of training samples.
    train_errors : ndarray of shape (n_sizes, n_splits)
        Training error of every split at every size.
    test_errors : ndarray of shape (n_sizes, n_splits)
        Test (validation) error of every split at every size.
    train_error : float
        Mean training error at the largest size.
    test_error : float
        Mean test error at the largest size.
    gap : float
        ``test_error - train_error``.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from kernelgd import KernelGDRegressor, diagnose_learning_curve
    >>> X, y = make_friedman1(150, noise=0.1, random_state=0)
    >>> diagnosis = diagnose_learning_curve(KernelGDRegressor(), X, y, epsilon=1.0, shuffle=True, random_state=0)
    >>> diagnosis.error_name, bool(diagnosis.gap == diagnosis.test_error - diagnosis.train_error)
    ('mean squared error', True)
    """

    regime: str
    symptoms: list
    remedies: list
    epsilon: float
    error_name: str
    train_sizes: np.ndarray = field(repr=False)
    train_errors: np.ndarray = field(repr=False)
    test_errors: np.ndarray = field(repr=False)
    train_error: float = 0.0
    test_error: float = 0.0
    gap: float = 0.0

    def __str__(self):
        def bullets(items):  # wrapped to 79 columns, as a report is read in a terminal
            return [textwrap.fill(item, 79, initial_indent="  - ", subsequent_indent="    ") for item in items]

        lines = [f"Regime: {self.regime}", "Symptoms:", *bullets(self.symptoms), "Remedies:", *bullets(self.remedies)]
        return "\n".join(lines)

    def plot(self, ax=None, **kwargs):
        """Plot both error curves and the desired error epsilon.

        Built on :class:`sklearn.model_selection.LearningCurveDisplay`
        (matplotlib is required).

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None creates a figure.
        **kwargs
            Passed on to :meth:`LearningCurveDisplay.plot`.

        Returns
        -------
        display : sklearn.model_selection.LearningCurveDisplay
            The display; ``display.ax_`` holds the axes.
        """
        from sklearn.model_selection import LearningCurveDisplay

        display = LearningCurveDisplay(
            train_sizes=self.train_sizes, train_scores=self.train_errors,
            test_scores=self.test_errors, score_name=self.error_name.capitalize(),
        )
        kwargs.setdefault("score_type", "both")
        display.plot(ax=ax, **kwargs)
        display.ax_.axhline(self.epsilon, color="k", linestyle="--", label=f"desired error $\\epsilon$ = {self.epsilon:.3g}")
        display.ax_.set_title(f"Diagnosis: {self.regime}")
        display.ax_.legend()
        return display


def _error_transform(estimator, scoring):
    """The scorer for learning_curve, a map from its scores to errors, and the errors' name."""
    if scoring is None:
        if is_classifier(estimator):
            return "accuracy", lambda s: 1.0 - s, "misclassification rate"
        return "neg_mean_squared_error", lambda s: -s, "mean squared error"
    if isinstance(scoring, str):
        if scoring.startswith("neg_"):
            return scoring, lambda s: -s, scoring[len("neg_"):].replace("_", " ")
        return scoring, lambda s: 1.0 - s, f"1 - {scoring}"
    scorer = check_scoring(estimator, scoring=scoring)
    if getattr(scorer, "_sign", 1) < 0:  # make_scorer(..., greater_is_better=False)
        return scorer, lambda s: -s, "error"
    return scorer, lambda s: 1.0 - s, "1 - score"


def diagnose_learning_curve(
    estimator, X, y, *, epsilon, scoring=None, cv=None, train_sizes=np.linspace(0.1, 1.0, 5),
    groups=None, n_jobs=None, shuffle=False, random_state=None, params=None,
):
    """Diagnose high variance or high bias from learning curves.

    Runs :func:`sklearn.model_selection.learning_curve` and reads the mean
    training and test errors at the largest training size against the
    desired error ``epsilon``:

    - **high bias**: the training error is above ``epsilon`` (the test
      error is then close to it or above it): the model cannot fit even
      the data it sees;
    - **high variance**: the training error is below ``epsilon`` but the
      test error is above it: the model fits its training data and does
      not generalise, the gap between the curves is large;
    - **fine**: both errors are within ``epsilon``.

    Parameters
    ----------
    estimator : estimator instance
        A scikit-learn regressor or classifier (fitted anew on each split).
    X : array-like of shape (n_samples, n_features)
        Inputs.
    y : array-like of shape (n_samples,)
        Targets.
    epsilon : float
        The desired error, in the units of the errors (see ``scoring``).
    scoring : str, callable or None, default=None
        None: mean squared error for regressors, misclassification rate
        (1 - accuracy) for classifiers. A scorer name: the error is
        ``-score`` for names that start with ``"neg_"`` and ``1 - score``
        otherwise (``"r2"`` gives ``1 - R^2``). A callable scorer: ``-score``
        if it was made with ``greater_is_better=False``, else ``1 - score``.
    cv : int, cross-validation generator or iterable, default=None
        As in :func:`~sklearn.model_selection.learning_curve` (5-fold).
    train_sizes : array-like, default=np.linspace(0.1, 1.0, 5)
        Fractions (floats) or numbers (ints) of training samples.
    groups : array-like of shape (n_samples,), default=None
        Group labels for a group splitter.
    n_jobs : int, default=None
        Parallel jobs of ``learning_curve``.
    shuffle : bool, default=False
        Shuffle the training data before taking prefixes of it.
    random_state : int, RandomState instance or None, default=None
        Used when ``shuffle=True``.
    params : dict, default=None
        Parameters passed to the estimator's ``fit`` and the scorer.

    Returns
    -------
    diagnosis : LearningCurveDiagnosis
        ``regime``, ``symptoms``, ``remedies``, the curves, and ``plot()``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import KernelGDRegressor, diagnose_learning_curve
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(200, 1))
    >>> y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> linear = KernelGDRegressor(kernel="linear", alpha=1e-3)
    >>> diagnose_learning_curve(linear, X, y, epsilon=0.05).regime
    'high bias'
    >>> rbf = KernelGDRegressor(kernel="rbf", sigma=0.5, alpha=1e-4)
    >>> diagnose_learning_curve(rbf, X, y, epsilon=0.05, shuffle=True, random_state=0).regime
    'fine'
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, Real) or not np.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(
            f"epsilon must be a positive finite number (the desired error, in the units of the "
            f"errors), got {epsilon!r}."
        )
    scorer, to_error, error_name = _error_transform(estimator, scoring)
    try:
        sizes, train_scores, test_scores = learning_curve(
            estimator, X, y, groups=groups, train_sizes=train_sizes, cv=cv, scoring=scorer, n_jobs=n_jobs,
            shuffle=shuffle, random_state=random_state, params=params, error_score="raise",
        )
    except ValueError as exc:  # most often too few samples for the smallest training size
        raise ValueError(
            f"diagnose_learning_curve could not fit {type(estimator).__name__} on every training size "
            f"of {_num_samples(X)} samples: {exc} Pass more data, larger train_sizes (for example "
            "np.linspace(0.5, 1.0, 3)), fewer folds (cv=3), or shuffle=True for classes in every prefix."
        ) from exc
    train_errors, test_errors = to_error(np.asarray(train_scores)), to_error(np.asarray(test_scores))
    train_error, test_error = float(train_errors[-1].mean()), float(test_errors[-1].mean())
    regime, symptoms = _read_curves(train_error, test_error, float(epsilon), error_name, train_errors, test_errors)
    return LearningCurveDiagnosis(
        regime=regime, symptoms=symptoms, remedies=list(REMEDIES[regime]), epsilon=float(epsilon),
        error_name=error_name, train_sizes=np.asarray(sizes), train_errors=train_errors,
        test_errors=test_errors, train_error=train_error, test_error=test_error,
        gap=test_error - train_error,
    )


def _read_curves(train, test, epsilon, name, train_errors, test_errors):
    """The regime and its symptoms at the largest training size."""
    where = f"at the largest training size ({name})"
    symptoms = []
    if train > epsilon:
        regime = HIGH_BIAS
        symptoms.append(f"Training error {train:.4g} is higher than epsilon = {epsilon:.4g} {where}.")
        closeness = "close to" if test - train <= max(train, epsilon) else "well above"
        symptoms.append(f"Test error {test:.4g} is {closeness} the training error.")
    elif test > epsilon:
        regime = HIGH_VARIANCE
        symptoms.append(f"Training error {train:.4g} is lower than epsilon = {epsilon:.4g} {where}.")
        symptoms.append(f"Test error {test:.4g} is above epsilon.")
        symptoms.append(f"Training error is much lower than test error: the gap is {test - train:.4g}.")
        if len(test_errors) > 1 and test_errors[-1].mean() < test_errors[-2].mean():
            symptoms.append("The test error is still falling as training data are added.")
    else:
        regime = FINE
        symptoms.append(
            f"Training error {train:.4g} and test error {test:.4g} are both within "
            f"epsilon = {epsilon:.4g} {where}."
        )
    return regime, symptoms
