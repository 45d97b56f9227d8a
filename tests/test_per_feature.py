"""Per-feature scales: sigma as an array of shape (n_features,)."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix, register_kernel

rng = np.random.RandomState(0)
X = rng.normal(size=(40, 3)) * [1.0, 10.0, 0.1]
Z = rng.normal(size=(7, 3))
y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
SIGMA = np.array([0.7, 5.0, 0.2])


@pytest.mark.parametrize("kernel, divide_by", [("rbf", SIGMA), ("laplacian", SIGMA), ("exponential", SIGMA**2)])
def test_array_sigma_is_the_unit_kernel_on_rescaled_features(kernel, divide_by):
    K = kernel_matrix(X, Z, kernel=kernel, sigma=SIGMA)
    assert_allclose(K, kernel_matrix(X / divide_by, Z / divide_by, kernel=kernel, sigma=1.0), rtol=1e-12)


def test_array_sigma_against_scikit_learn():
    Xs, Zs = X / SIGMA, Z / SIGMA
    assert_allclose(kernel_matrix(X, Z, sigma=SIGMA), rbf_kernel(Xs, Zs, gamma=1.0), rtol=1e-10)
    assert_allclose(kernel_matrix(X, Z, kernel="laplacian", sigma=SIGMA), laplacian_kernel(Xs, Zs, gamma=1.0),
                    rtol=1e-10)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "exponential"])
def test_constant_array_equals_scalar_sigma(kernel):
    assert_allclose(kernel_matrix(X, Z, kernel=kernel, sigma=np.full(3, 1.7)),
                    kernel_matrix(X, Z, kernel=kernel, sigma=1.7), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "exponential"])
def test_sparse_input_with_array_sigma(kernel):
    Xsp = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    assert_allclose(kernel_matrix(Xsp, Xsp[:5], kernel=kernel, sigma=SIGMA),
                    kernel_matrix(Xsp.toarray(), Xsp[:5].toarray(), kernel=kernel, sigma=SIGMA), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("solver", ["cg", "gd"])
def test_estimator_with_array_sigma_equals_rescaled_features(solver):
    params = dict(alpha=1e-3, solver=solver, tol=1e-10, max_iter=20_000, random_state=0)
    model = KernelGDRegressor(sigma=SIGMA, **params).fit(X, y)
    reference = KernelGDRegressor(sigma=1.0, **params).fit(X / SIGMA, y)
    assert_allclose(model.sigma_, SIGMA)
    assert_allclose(model.predict(Z), reference.predict(Z / SIGMA), rtol=1e-6, atol=1e-8)


def test_classifier_accepts_a_list_of_scales():
    labels = (y > 0).astype(int)
    model = KernelGDClassifier(sigma=list(SIGMA), loss="logistic", alpha=1e-3).fit(X, labels)
    assert model.sigma_.shape == (3,)
    assert model.score(X, labels) > 0.8


@pytest.mark.parametrize(
    "sigma, kernel, match",
    [
        (np.ones(2), "rbf", "2 per-feature scales but X has 3 features"),
        (np.array([1.0, -1.0, 1.0]), "rbf", "finite floats > 0"),
        (np.array([1.0, np.nan, 1.0]), "rbf", "finite floats > 0"),
        (np.ones((3, 1)), "rbf", "1-d array"),
    ],
)
def test_bad_per_feature_sigma_is_a_clear_error(sigma, kernel, match):
    with pytest.raises(ValueError, match=match):
        KernelGDRegressor(kernel=kernel, sigma=sigma).fit(X, y)


def test_kernels_without_sigma_ignore_it():
    model = KernelGDRegressor(kernel="linear", sigma=np.ones(3), alpha=1e-3).fit(X, y)
    assert model.sigma_ is None


def test_registered_kernels_opt_in():
    def scaled_rbf(A, B, sigma=1.0):
        return rbf_kernel(A / sigma, B / sigma, gamma=1.0)

    register_kernel("scaled_rbf_no", scaled_rbf, params="sigma")
    with pytest.raises(ValueError, match="takes one scalar sigma"):
        KernelGDRegressor(kernel="scaled_rbf_no", sigma=SIGMA).fit(X, y)
    register_kernel("scaled_rbf_yes", scaled_rbf, params="sigma", per_feature=True)
    model = KernelGDRegressor(kernel="scaled_rbf_yes", sigma=SIGMA, alpha=1e-3).fit(X, y)
    reference = KernelGDRegressor(sigma=SIGMA, alpha=1e-3).fit(X, y)
    assert_allclose(model.predict(Z), reference.predict(Z), rtol=1e-6, atol=1e-8)


def test_a_string_other_than_scale_is_an_error():
    with pytest.raises(ValueError, match="sigma"):
        kernel_matrix(X, kernel="rbf", sigma="wide")
