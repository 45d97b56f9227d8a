"""check_psd against matrices of known spectrum, and the fit-time PSD probe."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import ortho_group

from kernelgd import KernelGDRegressor, check_psd, kernel_matrix
from kernelgd._solvers._common import NonPSDKernelWarning


def known_spectrum(eigenvalues, seed=0):
    Q = ortho_group.rvs(len(eigenvalues), random_state=seed)
    K = (Q * eigenvalues) @ Q.T
    return (K + K.T) / 2


@pytest.mark.parametrize("method", ["dense", "lanczos"])
def test_known_spectrum_with_negative_eigenvalues(method):
    eigenvalues = np.r_[-3.0, -0.5, np.zeros(20), np.linspace(0.1, 10.0, 57)]
    K = known_spectrum(eigenvalues)
    result = check_psd(K, kernel="precomputed", method=method)
    assert result.method == method
    assert not result.is_psd and result.symmetric
    np.testing.assert_allclose(result.min_eigenvalue, -3.0, rtol=1e-8)
    np.testing.assert_allclose(result.max_eigenvalue, 10.0, rtol=1e-8)
    # n = 79 < LANCZOS_STEPS, so Lanczos spans the whole space and is exact too.
    assert result.n_negative == 2


def test_lanczos_counts_a_lower_bound_and_finds_the_extremes():
    rng = np.random.RandomState(1)
    eigenvalues = np.r_[-np.linspace(0.5, 2.0, 30), np.zeros(200), rng.uniform(0.1, 5.0, 270)]
    K = known_spectrum(eigenvalues, seed=2)
    dense = check_psd(K, kernel="precomputed", method="dense")
    lanczos = check_psd(K, kernel="precomputed", method="lanczos")
    assert dense.n_negative == 30
    assert 1 <= lanczos.n_negative <= 30
    # Ritz values lie inside the spectrum (interlacing) and the extremes converge.
    assert lanczos.min_eigenvalue >= dense.min_eigenvalue - 1e-10
    np.testing.assert_allclose(lanczos.min_eigenvalue, -2.0, rtol=1e-6)
    np.testing.assert_allclose(lanczos.max_eigenvalue, dense.max_eigenvalue, rtol=1e-6)


def test_linear_kernel_is_psd_with_exact_spectrum():
    # K = X X' has eigenvalues s**2 (the singular values of X) and zeros.
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 4))
    s = np.linalg.svd(X, compute_uv=False)
    result = check_psd(X, kernel="linear")
    assert result.is_psd and result.n_negative == 0
    np.testing.assert_allclose(result.max_eigenvalue, s[0] ** 2, rtol=1e-10)
    assert abs(result.min_eigenvalue) <= result.threshold


def test_sigmoid_is_not_psd_and_rbf_is():
    X = np.random.RandomState(0).normal(size=(200, 3))
    assert check_psd(X, kernel="rbf", sigma=2.0).is_psd
    assert check_psd(X, kernel="laplacian", sigma=2.0).is_psd
    assert check_psd(X, kernel="polynomial", degree=3).is_psd
    sigmoid = check_psd(X, kernel="sigmoid", a=1.0, coef0=1.0)
    assert not sigmoid.is_psd and sigmoid.n_negative > 0
    K = kernel_matrix(X, kernel="sigmoid", a=1.0, coef0=1.0)
    np.testing.assert_allclose(sigmoid.min_eigenvalue, np.linalg.eigvalsh(K)[0], rtol=1e-10)


def test_auto_uses_lanczos_for_large_n_and_is_deterministic():
    X = np.random.RandomState(0).normal(size=(2100, 2))
    first = check_psd(X, kernel="rbf", sigma=1.0)
    assert first.method == "lanczos" and first.is_psd
    assert check_psd(X, kernel="rbf", sigma=1.0) == first
    top = np.linalg.eigvalsh(kernel_matrix(X, kernel="rbf", sigma=1.0))[-1]
    np.testing.assert_allclose(first.max_eigenvalue, top, rtol=1e-8)
    bad = check_psd(X, kernel="sigmoid", a=2.0, coef0=0.5)
    assert bad.method == "lanczos" and not bad.is_psd


def test_sparse_input_equals_dense():
    X = sp.random(80, 10, density=0.3, format="csr", random_state=0)
    dense = check_psd(X.toarray(), kernel="sigmoid", a=0.5)
    sparse = check_psd(X, kernel="sigmoid", a=0.5)
    np.testing.assert_allclose(sparse.min_eigenvalue, dense.min_eigenvalue, rtol=1e-10)
    assert sparse.n_negative == dense.n_negative


def test_asymmetric_matrix_is_not_psd():
    K = known_spectrum(np.linspace(1.0, 2.0, 10))
    K[0, 1] += 0.5
    result = check_psd(K, kernel="precomputed")
    assert not result.symmetric and not result.is_psd


def test_tol_decides_what_counts_as_rounding():
    K = known_spectrum(np.r_[-1e-6, np.linspace(1.0, 2.0, 9)])
    assert not check_psd(K, kernel="precomputed").is_psd
    assert check_psd(K, kernel="precomputed", tol=1e-5).is_psd


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"method": "eig"}, "method must be"),
        ({"tol": -1.0}, "tol must be"),
        ({"tol": np.nan}, "tol must be"),
        ({"kernel": "nope"}, "Unknown kernel"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_psd(np.eye(3), **kwargs)


def test_precomputed_must_be_square():
    with pytest.raises(ValueError, match="square"):
        check_psd(np.ones((3, 4)), kernel="precomputed")


def tanh_kernel(X, Y):
    # positive diagonal, so only the probe's eigenvalues can tell it is not PSD
    return np.tanh(X @ Y.T + 1.0)


def test_fit_warns_for_a_callable_that_is_not_psd():
    X = np.random.RandomState(0).normal(size=(300, 3))
    with pytest.warns(NonPSDKernelWarning, match="clearly negative eigenvalue"):
        KernelGDRegressor(kernel=tanh_kernel, alpha=1e-2, max_iter=3).fit(X, X[:, 0])


def test_fit_does_not_warn_for_a_psd_callable():
    X = np.random.RandomState(0).normal(size=(300, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonPSDKernelWarning)
        KernelGDRegressor(kernel=lambda A, B: (A @ B.T + 1) ** 2, alpha=1e-2).fit(X, X[:, 0])
