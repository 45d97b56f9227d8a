"""diagnose_learning_curve on problems built to sit in each of the notes' regimes."""

import numpy as np
import pytest
from sklearn.datasets import make_circles
from sklearn.metrics import make_scorer, mean_absolute_error
from sklearn.model_selection import KFold, learning_curve

from kernelgd import KernelGDClassifier, KernelGDRegressor, diagnose_learning_curve

CV = KFold(5, shuffle=True, random_state=0)


def sine(n=200, noise=0.1, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    return X, np.sin(3 * X[:, 0]) + noise * rng.normal(size=n)


def test_regimes_of_regressors():
    X, y = sine()
    # A line cannot follow sin(3x): training error ~0.5 (the sine's variance).
    bias = diagnose_learning_curve(KernelGDRegressor(kernel="linear", alpha=1e-3), X, y, epsilon=0.05, cv=CV)
    assert bias.regime == "high bias"
    assert bias.train_error > 0.4 and abs(bias.gap) < 0.1
    # A very narrow kernel with no ridge interpolates the noise.
    narrow = KernelGDRegressor(kernel="rbf", sigma=0.02, alpha=0.0, max_iter=3000)
    variance = diagnose_learning_curve(narrow, X, y, epsilon=0.05, cv=CV)
    assert variance.regime == "high variance"
    assert variance.train_error < 0.01 < 0.1 < variance.test_error
    assert any("much lower than test error" in s for s in variance.symptoms)
    assert "Add more training data." in variance.remedies
    # The right width: both errors near the noise level 0.01.
    fine = diagnose_learning_curve(KernelGDRegressor(kernel="rbf", sigma=0.5, alpha=1e-4), X, y, epsilon=0.05, cv=CV)
    assert fine.regime == "fine"
    assert fine.test_error < 0.05


def test_regimes_of_classifiers():
    X, y = make_circles(300, noise=0.05, factor=0.5, random_state=0)
    bias = diagnose_learning_curve(KernelGDClassifier(kernel="linear", alpha=1e-3), X, y, epsilon=0.1, cv=CV)
    assert bias.regime == "high bias" and bias.error_name == "misclassification rate"
    assert bias.train_error > 0.3
    fine = diagnose_learning_curve(KernelGDClassifier(kernel="rbf", sigma=0.5, alpha=1e-4), X, y, epsilon=0.1, cv=CV)
    assert fine.regime == "fine"
    # 25% of the labels flipped: a narrow kernel memorises them.
    rng = np.random.RandomState(0)
    noisy = np.where(rng.uniform(size=len(y)) < 0.25, 1 - y, y)
    narrow = KernelGDClassifier(kernel="rbf", sigma=0.01, alpha=0.0, max_iter=2000)
    variance = diagnose_learning_curve(narrow, X, noisy, epsilon=0.1, cv=CV)
    assert variance.regime == "high variance"
    assert variance.train_error == 0.0 and variance.test_error > 0.2


def test_curves_equal_scikit_learns_learning_curve():
    X, y = sine(120)
    model = KernelGDRegressor(kernel="rbf", sigma=0.5, alpha=1e-3, random_state=0)
    sizes = [0.3, 0.6, 1.0]
    result = diagnose_learning_curve(model, X, y, epsilon=0.05, cv=CV, train_sizes=sizes)
    ref_sizes, train, test = learning_curve(model, X, y, cv=CV, train_sizes=sizes, scoring="neg_mean_squared_error")
    np.testing.assert_array_equal(result.train_sizes, ref_sizes)
    np.testing.assert_allclose(result.train_errors, -train)
    np.testing.assert_allclose(result.test_errors, -test)
    assert result.train_error == pytest.approx(-train[-1].mean())
    assert result.gap == pytest.approx(result.test_error - result.train_error)


@pytest.mark.parametrize(
    "scoring, sign, offset, name",
    [
        ("neg_mean_absolute_error", -1, 0, "mean absolute error"),
        ("r2", -1, 1, "1 - r2"),
        (make_scorer(mean_absolute_error, greater_is_better=False), -1, 0, "error"),
    ],
)
def test_scoring_sets_the_error_units(scoring, sign, offset, name):
    X, y = sine(100)
    model = KernelGDRegressor(kernel="rbf", sigma=0.5, alpha=1e-3, random_state=0)
    result = diagnose_learning_curve(model, X, y, epsilon=0.5, cv=CV, train_sizes=[1.0], scoring=scoring)
    _, _, test = learning_curve(model, X, y, cv=CV, train_sizes=[1.0], scoring=scoring)
    np.testing.assert_allclose(result.test_errors, offset + sign * test)
    assert result.error_name == name


@pytest.mark.parametrize("epsilon", [0, -1.0, np.inf, np.nan, "0.1", True])
def test_epsilon_must_be_positive(epsilon):
    X, y = sine(50)
    with pytest.raises(ValueError, match="epsilon must be a positive finite number"):
        diagnose_learning_curve(KernelGDRegressor(), X, y, epsilon=epsilon)


def test_plot_draws_both_curves_and_epsilon():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    X, y = sine(100)
    result = diagnose_learning_curve(KernelGDRegressor(kernel="linear"), X, y, epsilon=0.05, cv=CV)
    display = result.plot()
    lines = display.ax_.get_lines()
    assert any(np.allclose(line.get_ydata(), 0.05) for line in lines)
    assert "high bias" in display.ax_.get_title()
    assert "Regime: high bias" in str(result)
    matplotlib.pyplot.close("all")
