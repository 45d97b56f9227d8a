"""KernelGDClassifier: one-vs-rest squared loss against KernelRidge on +/-1 targets."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, make_moons
from sklearn.kernel_ridge import KernelRidge
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDClassifier

X_iris, y_iris = load_iris(return_X_y=True)
X_iris = StandardScaler().fit_transform(X_iris)
CONVERGED = dict(solver="gd", sigma=2.0, alpha=1e-2, max_iter=20_000, tol=0, fit_intercept=False)


def test_binary_decision_function_equals_kernel_ridge_on_pm1_targets():
    X, y = make_moons(80, noise=0.2, random_state=0)
    labels = np.where(y == 1, "yes", "no")
    clf = KernelGDClassifier(**CONVERGED).fit(X, labels)
    assert_array_equal(clf.classes_, ["no", "yes"])
    ref = KernelRidge(alpha=80 * 1e-2, kernel="rbf", gamma=1 / 4.0).fit(X, np.where(y == 1, 1.0, -1.0))
    assert clf.decision_function(X).shape == (80,)
    assert_allclose(clf.decision_function(X), ref.predict(X), rtol=1e-6, atol=1e-8)
    assert_array_equal(clf.predict(X), np.where(ref.predict(X) > 0, "yes", "no"))


def test_multiclass_one_vs_rest_equals_kernel_ridge():
    clf = KernelGDClassifier(**CONVERGED).fit(X_iris, y_iris)
    targets = np.where(y_iris[:, None] == np.arange(3), 1.0, -1.0)
    ref = KernelRidge(alpha=150 * 1e-2, kernel="rbf", gamma=1 / 4.0).fit(X_iris, targets)
    assert clf.decision_function(X_iris).shape == (150, 3)
    assert_allclose(clf.decision_function(X_iris), ref.predict(X_iris), rtol=1e-6, atol=1e-8)
    assert_array_equal(clf.predict(X_iris), np.argmax(ref.predict(X_iris), axis=1))
    assert clf.score(X_iris, y_iris) > 0.95


def test_label_types_round_trip():
    for labels in (y_iris + 10, np.array(["setosa", "versicolor", "virginica"])[y_iris], y_iris.astype(float)):
        clf = KernelGDClassifier(max_iter=200).fit(X_iris, labels)
        assert set(clf.predict(X_iris)) <= set(labels)
        assert clf.predict(X_iris).dtype == np.asarray(labels).dtype


def test_integer_weights_equal_repeated_rows():
    counts = np.random.RandomState(0).randint(0, 3, size=150)
    params = dict(solver="gd", max_iter=200, tol=0)
    a = KernelGDClassifier(**params).fit(X_iris, y_iris, sample_weight=counts)
    b = KernelGDClassifier(**params).fit(np.repeat(X_iris, counts, 0), np.repeat(y_iris, counts))
    assert_allclose(a.decision_function(X_iris), b.decision_function(X_iris), rtol=1e-7, atol=1e-9)


def test_one_class_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 2 classes.*only one class"):
        KernelGDClassifier().fit(X_iris[:10], np.zeros(10))


def test_warm_start_with_other_classes_restarts():
    clf = KernelGDClassifier(solver="gd", warm_start=True, max_iter=50, tol=0).fit(X_iris, y_iris)
    clf.fit(X_iris[:100], y_iris[:100])  # two classes now
    fresh = KernelGDClassifier(solver="gd", max_iter=50, tol=0).fit(X_iris[:100], y_iris[:100])
    assert_allclose(clf.decision_function(X_iris), fresh.decision_function(X_iris))
