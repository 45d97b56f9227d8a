"""AllSubsetsFeatures: the kernel trick, checked on the explicit feature map."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kernelgd import AllSubsetsFeatures, KernelGDClassifier, KernelGDRegressor, kernel_matrix

rng = np.random.RandomState(0)
X = rng.uniform(-1, 1, size=(30, 4))
y = X[:, 0] * X[:, 1] - X[:, 2] * X[:, 3] * X[:, 0]


def test_columns_are_products_of_subsets():
    Phi = AllSubsetsFeatures().fit_transform(X)
    assert Phi.shape == (30, 16)
    for j in range(16):
        members = [k for k in range(4) if j >> k & 1]
        assert_allclose(Phi[:, j], np.prod(X[:, members], axis=1))
    # every subset appears exactly once
    subsets = {tuple(c) for r in range(5) for c in itertools.combinations(range(4), r)}
    assert len(subsets) == Phi.shape[1]


def test_inner_products_equal_the_kernel():
    Phi = AllSubsetsFeatures().fit_transform(X)
    assert_allclose(Phi @ Phi.T, kernel_matrix(X, kernel="all_subsets"), rtol=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 1e-2])
def test_linear_model_on_phi_equals_all_subsets_model(alpha):
    params = dict(solver="gd", alpha=alpha, step_size=0.01, max_iter=300, tol=0)
    Phi = AllSubsetsFeatures().fit_transform(X)
    explicit = KernelGDRegressor(kernel="linear", **params).fit(Phi, y)
    trick = KernelGDRegressor(kernel="all_subsets", **params).fit(X, y)
    Z = rng.uniform(-1, 1, size=(10, 4))
    assert_allclose(
        explicit.predict(AllSubsetsFeatures().fit_transform(Z)), trick.predict(Z), rtol=1e-9
    )
    clf_e = KernelGDClassifier(kernel="linear", **params).fit(Phi, y > 0)
    clf_t = KernelGDClassifier(kernel="all_subsets", **params).fit(X, y > 0)
    assert_allclose(clf_e.dual_coef_, clf_t.dual_coef_, rtol=1e-9, atol=1e-12)


def test_feature_names():
    t = AllSubsetsFeatures().fit(X[:, :2])
    assert list(t.get_feature_names_out()) == ["1", "x0", "x1", "x0 x1"]
    assert list(t.get_feature_names_out(["a", "b"])) == ["1", "a", "b", "a b"]


def test_too_many_features_is_a_clear_error():
    with pytest.raises(ValueError, match="at most 16 features.*all_subsets"):
        AllSubsetsFeatures().fit(np.ones((2, 17)))
