"""The kernel registry against brute-force formulas and scikit-learn."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.metrics import pairwise

from kernelgd import KernelGDRegressor, kernel_matrix, register_kernel
from kernelgd.kernels import available_kernels, bind_kernel

rng = np.random.RandomState(0)
X = rng.normal(size=(7, 3))
Y = rng.normal(size=(5, 3))
SIGMA, DEGREE, COEF0 = 1.3, 3, 0.7

# One brute-force formula per pair: the table of the issue, word for word.
BRUTE = {
    "linear": lambda x, z: x @ z,
    "polynomial": lambda x, z: (COEF0 + x @ z / SIGMA**2) ** DEGREE,
    "rbf": lambda x, z: np.exp(-np.sum((x - z) ** 2) / SIGMA**2),
    "exponential": lambda x, z: np.exp(-np.sqrt(np.sum((x - z) ** 2)) / (2 * SIGMA**2)),
    "laplacian": lambda x, z: np.exp(-np.sum(np.abs(x - z)) / SIGMA),
    "sigmoid": lambda x, z: np.tanh(x @ z / 3 + COEF0),
    "all_subsets": lambda x, z: np.prod(1 + x * z),
}
ALIASES = {"poly": "polynomial", "gaussian": "rbf"}


def brute_matrix(name, A, B):
    return np.array([[BRUTE[name](a, b) for b in B] for a in A])


@pytest.mark.parametrize("name", list(BRUTE) + list(ALIASES))
def test_builtin_matches_brute_force_formula(name):
    K = kernel_matrix(X, Y, kernel=name, sigma=SIGMA, degree=DEGREE, coef0=COEF0)
    assert_allclose(K, brute_matrix(ALIASES.get(name, name), X, Y), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(BRUTE))
def test_diagonal_matches_matrix(name):
    bound = bind_kernel(name, sigma=SIGMA, degree=DEGREE, coef0=COEF0)
    assert_allclose(bound.diag(X), np.diagonal(bound(X, X)), rtol=1e-12)


def test_agrees_with_scikit_learn_pairwise():
    gamma = 1 / SIGMA**2
    assert_allclose(kernel_matrix(X, Y, sigma=SIGMA), pairwise.rbf_kernel(X, Y, gamma=gamma))
    assert_allclose(
        kernel_matrix(X, Y, kernel="laplacian", sigma=SIGMA),
        pairwise.laplacian_kernel(X, Y, gamma=1 / SIGMA),
    )
    assert_allclose(
        kernel_matrix(X, Y, kernel="poly", degree=4, coef0=2.0),
        pairwise.polynomial_kernel(X, Y, degree=4, gamma=1.0, coef0=2.0),
    )
    assert_allclose(
        kernel_matrix(X, Y, kernel="poly", degree=4, coef0=2.0, sigma=SIGMA),
        pairwise.polynomial_kernel(X, Y, degree=4, gamma=gamma, coef0=2.0),
    )
    assert_allclose(
        kernel_matrix(X, Y, kernel="sigmoid", coef0=0.5, a=0.2),
        pairwise.sigmoid_kernel(X, Y, gamma=0.2, coef0=0.5),
    )


def test_y_none_means_x():
    assert_allclose(kernel_matrix(X), kernel_matrix(X, X))


@pytest.mark.parametrize("name", [n for n in BRUTE if n != "sigmoid"])
def test_psd_kernels_give_psd_matrices(name):
    Z = np.random.RandomState(1).uniform(-1, 1, size=(40, 3))
    K = kernel_matrix(Z, kernel=name, sigma=SIGMA, degree=DEGREE, coef0=COEF0)
    assert np.linalg.eigvalsh(K).min() > -1e-9 * np.abs(K).max()
    assert bind_kernel(name).psd


def test_sigmoid_is_flagged_and_can_be_indefinite():
    assert not bind_kernel("sigmoid").psd
    Z = np.random.RandomState(2).normal(size=(30, 2))
    K = kernel_matrix(Z, kernel="sigmoid", coef0=-1.0, a=2.0)
    assert np.linalg.eigvalsh(K).min() < -1e-3


def test_all_subsets_survives_intermediate_overflow():
    # 200 factors of 101 then 200 factors of about 1/101: the running product
    # passes 1e400 (inf in float64) but the kernel value is about 1.
    x = np.concatenate([np.full(200, 10.0), np.full(200, 10.0)])[None, :]
    z = np.concatenate([np.full(200, 10.0), np.full(200, -0.1 + 0.1 / 101)])[None, :]
    factors = 1 + x[0] * z[0]
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.prod(factors))  # the naive product overflows
    reference = np.exp(np.sum(np.log(factors)))
    assert_allclose(kernel_matrix(x, z, kernel="all_subsets"), [[reference]], rtol=1e-10)


def test_all_subsets_unrepresentable_raises():
    x = np.full((2, 400), 3.0)  # 10**400 > float64 max
    with pytest.raises(ValueError, match="not representable.*Standardize"):
        kernel_matrix(x, kernel="all_subsets")
    with pytest.raises(ValueError, match="not representable"):
        KernelGDRegressor(kernel="all_subsets").fit(x, [0.0, 1.0])


def test_polynomial_overflow_and_bad_degree_raise():
    with pytest.raises(ValueError, match="not representable"):
        kernel_matrix(np.full((2, 3), 10.0), kernel="polynomial", degree=200)
    Z = np.array([[1.0], [-3.0]])
    with pytest.raises(ValueError, match="non-integer degree"):
        kernel_matrix(Z, kernel="polynomial", degree=2.5)
    # an integer degree is fine with a negative base
    assert_allclose(kernel_matrix(Z, kernel="polynomial", degree=2), [[4.0, 4.0], [4.0, 100.0]])


def test_unknown_kernel_name():
    with pytest.raises(ValueError, match="Unknown kernel 'nope'.*register_kernel"):
        kernel_matrix(X, kernel="nope")


def test_feature_mismatch():
    with pytest.raises(ValueError, match="features"):
        kernel_matrix(X, Y[:, :2])


def _scaled_cosine(X, Y, sigma=1.0, power=1):
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    Yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    return (Xn @ Yn.T / sigma) ** power


def test_register_kernel_everywhere():
    register_kernel("test_scaled_cosine", _scaled_cosine, params=("sigma",))
    assert "test_scaled_cosine" in available_kernels()
    expected = brute_matrix_custom(X, Y, sigma=2.0, power=3)
    got = kernel_matrix(X, Y, kernel="test_scaled_cosine", sigma=2.0, power=3)
    assert_allclose(got, expected)
    model = KernelGDRegressor(
        kernel="test_scaled_cosine", sigma=2.0, kernel_params={"power": 3}, max_iter=20
    ).fit(X, X[:, 0])
    clone = pickle.loads(pickle.dumps(model))
    assert_allclose(clone.predict(Y), model.predict(Y))


def brute_matrix_custom(A, B, sigma, power):
    def k(a, b):
        return (a @ b / np.linalg.norm(a) / np.linalg.norm(b) / sigma) ** power

    return np.array([[k(a, b) for b in B] for a in A])


def test_register_kernel_rejects_bad_input():
    with pytest.raises(ValueError, match="built-in"):
        register_kernel("rbf", _scaled_cosine)
    with pytest.raises(ValueError, match="built-in"):
        register_kernel("gaussian", _scaled_cosine)
    with pytest.raises(ValueError, match="unknown"):
        register_kernel("x", _scaled_cosine, params=("gamma",))
    with pytest.raises(ValueError, match="callable"):
        register_kernel("x", 3)


def test_bad_kernel_params_are_clear():
    with pytest.raises(ValueError, match="does not accept.*kernel_params"):
        kernel_matrix(X, kernel="rbf", gamma=2.0)


def test_callable_kernel_and_its_validation():
    K = kernel_matrix(X, Y, kernel=lambda A, B: A @ B.T)
    assert_allclose(K, X @ Y.T)
    with pytest.raises(ValueError, match="returned shape"):
        kernel_matrix(X, Y, kernel=lambda A, B: A @ A.T)
    with pytest.raises(ValueError, match="inf or NaN"):
        kernel_matrix(X, Y, kernel=lambda A, B: np.full((len(A), len(B)), np.nan))


# ------------------------------------------- registered kernels in other processes

def _cauchy(X, Y, sigma=1.0):
    d2 = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return 1.0 / (1.0 + d2 / sigma**2)


def test_register_kernel_returns_a_spec_usable_as_kernel():
    spec = register_kernel("test_cauchy", _cauchy, params="sigma")  # a single name is fine
    assert spec.params == ("sigma",)
    assert_allclose(kernel_matrix(X, Y, kernel=spec, sigma=2.0), _cauchy(X, Y, 2.0), rtol=1e-12)
    import pickle

    model = KernelGDRegressor(kernel=spec, sigma=2.0, alpha=1e-2).fit(X, X[:, 0])
    again = pickle.loads(pickle.dumps(model))
    assert_allclose(again.predict(Y), model.predict(Y))


def test_registered_spec_works_in_loky_workers():
    from sklearn.model_selection import GridSearchCV

    spec = register_kernel("test_cauchy_loky", _cauchy, params=("sigma",))
    r = np.random.RandomState(0)
    Xg = r.normal(size=(60, 2))
    yg = np.sin(Xg[:, 0])
    search = GridSearchCV(
        KernelGDRegressor(kernel=spec, alpha=1e-3), {"sigma": [0.5, 2.0]}, cv=3, n_jobs=2
    ).fit(Xg, yg)
    serial = GridSearchCV(
        KernelGDRegressor(kernel=spec, alpha=1e-3), {"sigma": [0.5, 2.0]}, cv=3, n_jobs=1
    ).fit(Xg, yg)
    assert_allclose(search.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"])


def test_registered_spec_works_in_dask_workers():
    distributed = pytest.importorskip("distributed")
    import joblib
    from sklearn.model_selection import GridSearchCV

    spec = register_kernel("test_cauchy_dask", _cauchy, params=("sigma",))
    Xg = np.random.RandomState(0).normal(size=(40, 2))
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1) as cluster:
        with distributed.Client(cluster), joblib.parallel_backend("dask"):
            search = GridSearchCV(KernelGDRegressor(kernel=spec, alpha=1e-3), {"sigma": [0.5, 2.0]}, cv=2)
            search.fit(Xg, Xg[:, 0])
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_entry_point_kernels_resolve_by_name(monkeypatch, tmp_path):
    import importlib.metadata
    import sys

    (tmp_path / "kgd_plugin_demo.py").write_text(
        "from kernelgd.kernels import KernelSpec\n"
        "def double_linear(X, Y):\n    return 2.0 * X @ Y.T\n"
        "spec = KernelSpec('plugin_double_linear', double_linear)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(
        name="plugin_double_linear", value="kgd_plugin_demo:spec", group="kernelgd.kernels"
    )
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [ep] if group == "kernelgd.kernels" else [])
    assert_allclose(kernel_matrix(X, Y, kernel="plugin_double_linear"), 2.0 * X @ Y.T)
    sys.modules.pop("kgd_plugin_demo", None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rbf_by_chunks_of_rows_equals_scikit_learn(monkeypatch, dtype):
    # The distance GEMM, its clip and the exp run by chunks of rows: here 3 rows a chunk, the
    # last one partial, written into a strided block of a larger matrix as the operator does.
    from kernelgd import _distances, kernels

    rs = np.random.RandomState(0)
    X, Y = rs.randn(11, 4).astype(dtype), rs.randn(7, 4).astype(dtype)
    monkeypatch.setattr(_distances, "DISTANCE_CHUNK_BYTES", 3 * 7 * np.dtype(dtype).itemsize)
    expected = pairwise.rbf_kernel(X.astype(np.float64), Y.astype(np.float64), gamma=1 / 1.5**2)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    assert_allclose(kernels.rbf(X, Y, sigma=1.5), expected, rtol=rtol)
    big = np.full((11, 9), np.nan, dtype=dtype)
    out = kernels.rbf(X, Y, sigma=1.5, out=big[:, 2:])
    assert np.shares_memory(out, big)
    assert_allclose(big[:, 2:], expected, rtol=rtol)
    assert np.isnan(big[:, :2]).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sigma", [1.5, np.array([0.5, 1.0, 2.0, 4.0])])
def test_laplacian_by_chunks_of_rows_equals_scikit_learn(monkeypatch, dtype, sigma):
    # The L1 distances run feature by feature over chunks of 3 rows (the last partial), written into a
    # strided block of a larger matrix as the operator does; features far from 0 (the common shift).
    from kernelgd import _distances, kernels

    rs = np.random.RandomState(0)
    X, Y = (rs.randn(11, 4) * 3 + 1e3).astype(dtype), (rs.randn(7, 4) * 3 + 1e3).astype(dtype)
    monkeypatch.setattr(_distances, "L1_CHUNK_BYTES", 3 * 7 * np.dtype(dtype).itemsize)
    expected = pairwise.laplacian_kernel(X.astype(np.float64) / sigma, Y.astype(np.float64) / sigma, gamma=1.0)
    rtol = 1e-12 if dtype == np.float64 else 1e-5  # float32: centred first, so the shift costs no digits
    assert_allclose(kernels.laplacian(X, Y, sigma=sigma), expected, rtol=rtol)
    big = np.full((11, 9), np.nan, dtype=dtype)
    out = kernels.laplacian(X, Y, sigma=sigma, out=big[:, 2:])
    assert np.shares_memory(out, big)
    assert_allclose(big[:, 2:], expected, rtol=rtol)
    assert np.isnan(big[:, :2]).all()


@pytest.mark.parametrize("swap", [False, True])
def test_float32_rbf_recomputes_near_zero_distances_of_outliers_only_where_needed(swap):
    # A point far out (|x|^2 = 1e6 in units of sigma) and its near-duplicate among ordinary
    # points: their distance must be exact (the GEMM expansion rounds it by ~0.1) although only
    # the outliers' rows and columns are scanned, and every other entry stays accurate.
    from sklearn.metrics.pairwise import rbf_kernel

    r = np.random.RandomState(0)
    A = r.randn(300, 3)
    B = r.randn(200, 3)
    far = np.full(3, 1e3 / np.sqrt(3))
    A[7], B[5] = far, far + 0.05
    if swap:
        A, B = B, A
    from kernelgd.kernels import rbf

    K = rbf(A.astype(np.float32), B.astype(np.float32), sigma=1.0)
    assert K.dtype == np.float32
    ref = rbf_kernel(A.astype(np.float32).astype(np.float64), B.astype(np.float32).astype(np.float64), gamma=1.0)
    assert_allclose(K, ref, atol=1e-5)
