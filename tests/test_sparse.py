"""scipy.sparse inputs: every built-in kernel, fit and predict; X made dense only where it pays."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix, register_kernel
from kernelgd.kernels import available_kernels

BUILTINS = ["linear", "polynomial", "rbf", "exponential", "laplacian", "sigmoid", "all_subsets"]
PARAMS = {
    "polynomial": dict(degree=2, coef0=1.0),
    "rbf": dict(sigma=2.0),
    "exponential": dict(sigma=1.5),
    "laplacian": dict(sigma=3.0),
    "sigmoid": dict(coef0=0.5),
}


def sparse_data(n=60, d=12, density=0.2, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng, data_rvs=rng.randn)
    y = np.sin(X @ rng.randn(d)) + 0.1 * rng.randn(n)
    return X, np.asarray(y).ravel()


@pytest.mark.parametrize("kernel", BUILTINS)
@pytest.mark.parametrize("which", ["both", "X", "Y"])
def test_kernel_matrix_sparse_equals_dense(kernel, which):
    X, _ = sparse_data(30)
    Y, _ = sparse_data(20, seed=1)
    Xa = X if which in ("both", "X") else X.toarray()
    Ya = Y if which in ("both", "Y") else Y.toarray()
    params = dict(PARAMS.get(kernel, {}))
    expected = kernel_matrix(X.toarray(), Y.toarray(), kernel=kernel, **params)
    got = kernel_matrix(Xa, Ya, kernel=kernel, **params)
    assert isinstance(got, np.ndarray) and got.shape == (30, 20)
    # exponential: a square root of an expanded distance is only sqrt(eps) accurate near 0
    rtol = 1e-7 if kernel == "exponential" else 1e-10
    assert_allclose(got, expected, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("kernel", BUILTINS)
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_fit_predict_sparse_equals_dense(kernel, fmt):
    X, y = sparse_data()
    params = dict(PARAMS.get(kernel, {}), kernel=kernel, alpha=1e-2, max_iter=2000, random_state=0)
    if kernel == "sigmoid":
        params["solver"] = "gd"
    if kernel == "all_subsets":
        X = X * 0.5  # keep the product of 12 factors moderate
    dense = KernelGDRegressor(**params).fit(X.toarray(), y)
    sparse = KernelGDRegressor(**params).fit(X.asformat(fmt), y)
    assert_allclose(sparse.predict(X.asformat(fmt)), dense.predict(X.toarray()), rtol=1e-6, atol=1e-8)
    assert_allclose(sparse.predict(X.toarray()), dense.predict(X.toarray()), rtol=1e-6, atol=1e-8)


def test_sigma_scale_sparse_equals_dense():
    X, y = sparse_data()
    w = np.random.RandomState(3).rand(X.shape[0])
    dense = KernelGDRegressor(sigma="scale").fit(X.toarray(), y, sample_weight=w)
    sparse = KernelGDRegressor(sigma="scale").fit(X, y, sample_weight=w)
    assert_allclose(sparse.sigma_, dense.sigma_, rtol=1e-10)


# 128 KiB: K_nm (400 x 50 in float64, 156 KiB) is streamed, the centers' matrices (98 KiB) fit
@pytest.mark.parametrize("options", [{"memory_budget": 128 << 10}, {"dtype": "float32"}, {}])
def test_centers_streaming_and_classifier_sparse(options):
    X, y = sparse_data(400, 20)
    labels = (y > np.median(y)).astype(int)
    params = dict(sigma=2.0, alpha=1e-3, n_centers=50, tol=1e-10, random_state=0, options=options)
    dense = KernelGDClassifier(**params).fit(X.toarray(), labels)
    sparse = KernelGDClassifier(**params).fit(X, labels)
    tol = 1e-4 if options.get("dtype") == "float32" else 1e-6
    assert_allclose(sparse.decision_function(X), dense.decision_function(X.toarray()), rtol=tol, atol=tol)


def test_sparse_x_is_never_densified_whole(monkeypatch):
    X, y = sparse_data(400, 30)
    n, d = X.shape
    original = sp.csr_matrix.toarray

    def guarded(self, *args, **kwargs):
        assert self.shape != (n, d), "the whole of X was made dense"
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sp.csr_matrix, "toarray", guarded)
    monkeypatch.setattr(sp.csc_matrix, "toarray", guarded)
    for kernel in BUILTINS:
        params = dict(PARAMS.get(kernel, {}), kernel=kernel, max_iter=50, alpha=1e-2)
        if kernel == "sigmoid":
            params["solver"] = "gd"
        model = KernelGDRegressor(options={"memory_budget": 64 << 10}, **params).fit(X * 0.3, y)
        assert np.all(np.isfinite(model.predict(X * 0.3)))


def test_precomputed_sparse_kernel_matrix():
    X, y = sparse_data()
    K = kernel_matrix(X, kernel="linear")
    dense = KernelGDRegressor(kernel="precomputed", alpha=1e-2).fit(K, y)
    sparse = KernelGDRegressor(kernel="precomputed", alpha=1e-2).fit(sp.csr_matrix(K), y)
    assert_allclose(sparse.predict(sp.csr_matrix(K)), dense.predict(K), rtol=1e-8, atol=1e-10)


def test_registered_kernel_sparse_flag():
    X, y = sparse_data()

    def dense_only(A, B):
        return np.asarray(A) @ np.asarray(B).T

    spec = register_kernel("test_sparse_dense_only", dense_only)
    with pytest.raises(ValueError, match="does not accept sparse input"):
        KernelGDRegressor(kernel=spec).fit(X, y)
    with pytest.raises(ValueError, match="does not accept sparse input"):
        kernel_matrix(X, kernel=spec)
    with pytest.raises(ValueError, match="does not accept sparse input"):
        KernelGDRegressor(kernel=lambda A, B: A @ B.T).fit(X, y)

    def sparse_linear(A, B):
        return (A @ B.T).toarray() if sp.issparse(A) else A @ B.T

    spec = register_kernel("test_sparse_linear", sparse_linear, sparse=True)
    got = KernelGDRegressor(kernel=spec, alpha=1e-2).fit(X, y).predict(X)
    ref = KernelGDRegressor(kernel="linear", alpha=1e-2).fit(X, y).predict(X)
    assert_allclose(got, ref, rtol=1e-8, atol=1e-10)
    assert "test_sparse_linear" in available_kernels()


def one_hot_beside_numeric(n=300, seed=0):
    """adult's shape: dense numeric columns beside one-hot categories."""
    rng = np.random.RandomState(seed)
    numeric = rng.randn(n, 3)
    codes = rng.randint(0, 8, size=(n, 4))
    one_hot = sp.hstack([sp.csr_matrix((np.ones(n), (np.arange(n), c), ), shape=(n, 8)) for c in codes.T])
    X = sp.hstack([sp.csr_matrix(numeric), one_hot]).tocsr()
    y = (numeric[:, 0] + (codes[:, 0] < 4) + 0.3 * rng.randn(n) > 0.5).astype(int)
    return X, y


def test_dense_copy_only_where_it_pays():
    from kernelgd._operator import densify_if_faster

    X, _ = one_hot_beside_numeric()
    dense, centers = densify_if_faster(X, None, 1 << 30)
    assert isinstance(dense, np.ndarray) and centers is None
    assert_allclose(dense, X.toarray())
    # thousands of features at 0.3%: the sparse product is ten times faster (bench_sparse.py)
    wide = sp.random(300, 5000, density=0.003, format="csr", random_state=0)
    assert sp.issparse(densify_if_faster(wide, None, 1 << 30)[0])
    # a dense copy beyond a quarter of the memory budget is never made
    assert sp.issparse(densify_if_faster(X, None, X.shape[0] * X.shape[1] * 8)[0])
    # dense test rows against sparse centers: both dense, or neither changed
    Z, C = densify_if_faster(X.toarray()[:5], X, 1 << 30)
    assert isinstance(Z, np.ndarray) and isinstance(C, np.ndarray)
    assert_allclose(C, X.toarray())


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("cost", [0.0, 1e9])  # never densify, always densify
def test_both_sparse_paths_equal_the_dense_fit(monkeypatch, loss, cost):
    from kernelgd import _operator

    X, y = one_hot_beside_numeric()
    params = dict(loss=loss, sigma=3.0, alpha=1e-3, tol=1e-10, random_state=0)
    dense = KernelGDClassifier(**params).fit(X.toarray(), y)
    monkeypatch.setattr(_operator, "SPARSE_OP_COST", cost)
    sparse = KernelGDClassifier(**params).fit(X, y)
    assert_allclose(sparse.decision_function(X), dense.decision_function(X.toarray()), rtol=1e-6, atol=1e-7)
    assert_allclose(sparse.decision_function(X.toarray()[:20]), dense.decision_function(X[:20]), rtol=1e-6,
                    atol=1e-7)


def test_cv_estimators_take_sparse_x_as_its_dense_copy():
    # Regression: KernelGDClassifierCV() after a OneHotEncoder (sparse output) raised scikit-learn's
    # "Sparse data was passed for X, but dense data is required".
    from kernelgd import KernelGDClassifierCV, KernelGDRegressorCV

    r = np.random.RandomState(0)
    Xd = r.randn(200, 5)
    Xd[Xd < 0.5] = 0.0
    y_class = (Xd[:, 0] + Xd[:, 1] > 0.8).astype(int)
    y_value = 2 * Xd[:, 0] + Xd[:, 1]
    for make, target in ((lambda: KernelGDClassifierCV(random_state=0), y_class),
                         (lambda: KernelGDClassifierCV(loss="logistic", random_state=0), y_class),
                         (lambda: KernelGDRegressorCV(random_state=0), y_value)):
        sparse, dense = make().fit(sp.csr_matrix(Xd), target), make().fit(Xd, target)
        # (the regressor may choose per-feature widths: sigma_ is then an array)
        assert_allclose(sparse.sigma_, dense.sigma_, rtol=0)
        assert sparse.alpha_ == dense.alpha_
        method = "predict_proba" if hasattr(sparse, "predict_proba") else "predict"
        # the refits agree to the solvers' tolerance: sparse and dense kernel products round differently
        assert_allclose(getattr(sparse, method)(sp.csr_matrix(Xd)), getattr(dense, method)(Xd), atol=1e-3)
    # wider than long and past 64 MiB dense: refused before any copy; a small wide X is copied
    with pytest.raises(ValueError, match="dense copy of sparse X"):
        KernelGDRegressorCV().fit(sp.random(100, 100_000, density=1e-4, format="csr", random_state=0), np.arange(100.0))
    wide = sp.random(20, 50, density=0.3, format="csr", random_state=0)
    assert_allclose(KernelGDRegressorCV().fit(wide, np.arange(20.0)).predict(wide[:3]),
                    KernelGDRegressorCV().fit(wide.toarray(), np.arange(20.0)).predict(wide[:3].toarray()), atol=1e-6)
