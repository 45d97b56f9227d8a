"""predict(X, return_std=True): the Gaussian-process posterior of the squared-loss model.

References: dense solves of the exact GP formulas, the DTC formula from dense m x m
algebra, and scikit-learn's GaussianProcessRegressor with the same fixed kernel.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.stats import norm
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from kernelgd import KernelGDRegressor, KernelGDRegressorCV
from kernelgd.kernels import rbf


def _data(n=150, d=2, seed=0, t=None):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2
    if t is None:
        return X, f + 0.3 * rng.randn(n) + 3.0
    return X, np.column_stack([f * (j + 1) + 0.3 * rng.randn(n) for j in range(t)])


def _scale_reference(q, w):
    """The likelihood's s^2 (weighted mean of q); where its 95% intervals hold less than 95% of the
    held-out rows' weight by more than two binomial standard errors, the s^2 whose intervals hold 95%:
    the weighted 0.95 quantile of the squared standardized residuals over 1.96^2."""
    s2 = np.sum(w * q) / np.sum(w)
    covered = np.sum(w * (np.abs(np.sqrt(q / s2)) <= norm.ppf(0.975))) / np.sum(w)
    if covered >= 0.95 - 2 * np.sqrt(0.95 * 0.05 * np.sum(w**2)) / np.sum(w):
        return s2
    order = np.argsort(q)
    held = np.cumsum(w[order]) / np.sum(w)
    quantile = q[order][np.argmax(held >= 0.95 - 1e-9)]
    return max(s2, quantile / norm.ppf(0.975) ** 2)


def _exact_reference(X, y, Xt, sigma, alpha, w, intercept, counts):
    """s^2, noise and the predictive variance from the inverse of C = K + alpha W^-1 (w > 0 summing to one).

    Row i held out has the residual ``e_i = a_i / c_ii`` and the variance ``s^2 / c_ii``
    (a = C^-1 (y - b), c = diag(C^-1)); s^2 as ``_scale_reference`` of ``e_i^2 c_ii``.
    """
    K, Kt = rbf(X, X, sigma), rbf(X, Xt, sigma)
    C = K + alpha * np.diag(1.0 / w)
    C_inv = np.linalg.inv(C)
    a, c = C_inv @ (y - intercept), np.diag(C_inv)
    s2 = _scale_reference((a / c) ** 2 * c, w)
    noise = s2 * alpha * counts
    latent = s2 * (1.0 - np.sum(Kt * np.linalg.solve(C, Kt), axis=0))
    return s2, noise, latent + noise


@pytest.fixture(params=["dense", "cg", "local"])
def variance_path(request, monkeypatch):
    """The exact model's variance from one dense factor, by block CG, or conditioned per test point on
    its nearest rows (here all of them: exact), whatever the test size."""
    from kernelgd import _posterior

    monkeypatch.setattr(_posterior, "DENSE_BREAK_EVEN", 10**9 if request.param == "dense" else 0)
    if request.param == "local":
        monkeypatch.setattr(_posterior, "EXACT_COST_RATIO", 0.0)
        monkeypatch.setattr(_posterior, "LOCAL_ROWS", 10**9)
    return request.param


@pytest.mark.parametrize("rows", [20, 60, 120])
def test_local_std_is_never_below_the_exact_one(monkeypatch, rows):
    # Conditioning on fewer observations explains less: each point's std from its nearest rows is at
    # least the exact one, and approaches it as the rows grow. A zero-weight row is never among them.
    from kernelgd import _posterior

    X, y = _data(n=300, seed=3)
    w = np.ones(len(y))
    w[7] = 0.0
    Xt = np.vstack([_data(n=40, seed=4)[0], [[4.0, 4.0]]])
    model = KernelGDRegressor(sigma=0.8, alpha=1e-4, tol=1e-12, max_iter=10_000).fit(X, y, sample_weight=w)
    exact = model.predict(Xt, return_std=True)[1]
    monkeypatch.setattr(_posterior, "EXACT_COST_RATIO", 0.0)
    monkeypatch.setattr(_posterior, "LOCAL_ROWS", rows)
    local = model.predict(Xt, return_std=True)[1]
    assert np.all(local >= exact * (1 - 1e-10))
    assert_allclose(local[-1], exact[-1], rtol=1e-6)  # far away: the prior's band either way
    assert np.median(local / exact) < {20: 1.1, 60: 1.02, 120: 1.005}[rows]
    monkeypatch.setattr(_posterior, "LOCAL_ROWS", 299)  # every row of positive weight
    assert_allclose(model.predict(Xt, return_std=True)[1], exact, rtol=1e-8)


def test_exact_std_is_the_dense_gaussian_process_formula(variance_path):
    X, y = _data()
    Xt = np.vstack([X[:5], [[5.0, 5.0], [0.1, -0.3]]])
    model = KernelGDRegressor(kernel="rbf", sigma=1.3, alpha=1e-3, tol=1e-12, max_iter=10_000).fit(X, y)
    w = np.full(len(y), 1.0 / len(y))
    s2, noise, var = _exact_reference(X, y, Xt, 1.3, 1e-3, w, model.intercept_, len(y))
    mean, std = model.predict(Xt, return_std=True)
    assert_allclose(model.signal_variance_, s2, rtol=1e-8)
    assert_allclose(model.noise_variance_, noise, rtol=1e-8)
    assert_allclose(std, np.sqrt(var), rtol=1e-6)
    assert_allclose(mean, model.predict(Xt))
    # far from the data the band is the prior's: s^2 k(x, x) plus the noise
    assert_allclose(std[5], np.sqrt(s2 + noise), rtol=1e-6)
    assert np.all(std[:5] < std[5])


def test_sample_weights_are_relative_and_a_new_observation_has_the_rows_mean_weight():
    # the noise of a new observation is that of a row of the weighted mean weight, sum_i w_i^2 (w
    # summing to one): N = 1 / sum_i w_i^2, Kish's effective number of rows
    X, y = _data(n=80)
    counts = np.random.RandomState(1).randint(0, 4, size=len(y)).astype(float)
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-2, tol=1e-12, max_iter=10_000)
    model.fit(X, y, sample_weight=counts)
    w = counts / counts.sum()
    Xt = X[:6] + 0.05
    keep = w > 0  # a zero-weight row has infinite noise: it drops out of the GP
    s2, noise, var = _exact_reference(X[keep], y[keep], Xt, 1.0, 1e-2, w[keep], model.intercept_, 1 / np.sum(w**2))
    assert_allclose(model.signal_variance_, s2, rtol=1e-6)
    assert_allclose(model.noise_variance_, noise, rtol=1e-6)
    std = model.predict(Xt, return_std=True)[1]
    assert_allclose(std, np.sqrt(var), rtol=1e-6)
    scaled = clone(model).fit(X, y, sample_weight=1e3 * counts)
    assert_allclose(scaled.predict(Xt, return_std=True)[1], std, rtol=1e-6)


@pytest.mark.parametrize("n_centers", [None, 30])
def test_repeated_rows_are_their_integer_weights_and_scaled_weights_change_nothing(n_centers):
    # Regression: weights of 10 made the noise of a new observation 10 times larger (std 0.67 against
    # 0.22 unweighted, on noise of std 0.2) and weights of 1 / n 200 times smaller (std 0.067); every
    # row twice halved the leave-one-out scale, its copies predicting each other
    X, y = _data(n=80)
    counts = np.random.RandomState(1).randint(1, 4, size=len(y))
    Xt = np.vstack([X[:4] + 0.05, [[3.0, -2.0]]])
    params = dict(kernel="rbf", sigma=1.0, alpha=1e-2, tol=1e-12, max_iter=10_000, n_centers=n_centers,
                  random_state=0)
    weighted = KernelGDRegressor(**params).fit(X, y, sample_weight=counts.astype(float))
    rows = np.repeat(np.arange(len(y)), counts)
    repeated = KernelGDRegressor(**params).fit(X[rows], y[rows])
    if n_centers is None:  # (centers drawn from the repeated rows differ)
        assert_allclose(repeated.predict(Xt, return_std=True)[1], weighted.predict(Xt, return_std=True)[1], rtol=1e-5)
    for scale in (1e-3, 10.0):
        model = KernelGDRegressor(**params).fit(X, y, sample_weight=scale * counts)
        assert_allclose(model.predict(Xt, return_std=True)[1], weighted.predict(Xt, return_std=True)[1], rtol=1e-6)
    if n_centers is None:
        once = KernelGDRegressor(**params).fit(X, y)
        twice = KernelGDRegressor(**params).fit(np.vstack([X, X]), np.r_[y, y])
        assert twice.signal_variance_ == pytest.approx(once.signal_variance_, rel=1e-3)
        assert_allclose(twice.predict(Xt, return_std=True)[1], once.predict(Xt, return_std=True)[1], rtol=1e-3)


def test_matches_gaussian_process_regressor_with_the_same_kernel(variance_path):
    X, y = _data(n=120, seed=3)
    y = y - y.mean()
    model = KernelGDRegressor(kernel="rbf", sigma=0.9, alpha=5e-3, fit_intercept=False, tol=1e-12,
                              max_iter=10_000).fit(X, y)
    s2, noise = model.signal_variance_, model.noise_variance_
    kernel = ConstantKernel(s2, "fixed") * RBF(0.9 / np.sqrt(2), "fixed") + WhiteKernel(noise, "fixed")
    gpr = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-12).fit(X, y)
    Xt = np.random.RandomState(4).uniform(-3, 3, size=(20, 2))
    mean, std = model.predict(Xt, return_std=True)
    gmean, gstd = gpr.predict(Xt, return_std=True)
    assert_allclose(mean, gmean, atol=1e-8 * np.abs(gmean).max())
    # the fitted noise is part of GPR's training covariance and of its predictive std, as ours
    assert_allclose(std, gstd, rtol=1e-6)
    _, cov = model.predict(Xt, return_cov=True)
    _, gcov = gpr.predict(Xt, return_cov=True)
    assert_allclose(cov, gcov, rtol=1e-6, atol=1e-9 * gcov.max())


def test_centers_std_is_the_dtc_formula():
    X, y = _data(n=300, seed=5)
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3, n_centers=40, tol=1e-12,
                              max_iter=10_000, random_state=0).fit(X, y)
    C = model.X_fit_
    n, alpha = len(y), 1e-3
    Knm, Kmm = rbf(X, C, 1.0), rbf(C, C, 1.0)
    H = Knm.T @ Knm / n + alpha * Kmm
    # leave-one-out of the subset-of-regressors GP (C = Knm Kmm^-1 Kmn + n alpha I, densely), with the
    # variance DTC gives a new point: s^2 (1 / c_ii + k(x_i, x_i) - q(x_i, x_i)) for row i held out
    jitter = len(C) * np.finfo(float).eps
    Q = Knm @ np.linalg.solve(Kmm + jitter * np.eye(len(C)), Knm.T)
    C_inv = np.linalg.inv(Q + n * alpha * np.eye(n))
    a, c = C_inv @ (y - model.intercept_), np.diag(C_inv)
    s2 = _scale_reference((a / c) ** 2 / (1 / c + 1.0 - np.diag(Q)), np.ones(n))
    Xt = np.array([[0.0, 0.0], [1.0, -1.0], [6.0, 6.0]])
    Ktm = rbf(Xt, C, 1.0)
    q = np.sum(Ktm * np.linalg.solve(Kmm + jitter * np.eye(len(C)), Ktm.T).T, axis=1)
    v = 1.0 - q + alpha * np.sum(Ktm * np.linalg.solve(H, Ktm.T).T, axis=1)
    assert_allclose(model.signal_variance_, s2, rtol=1e-6)
    assert_allclose(model.predict(Xt, return_std=True)[1], np.sqrt(s2 * (v + alpha * n)), rtol=1e-5)


def test_multi_output_shapes_and_per_target_scales():
    X, Y = _data(n=100, t=3)
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3).fit(X, Y)
    Xt = X[:7]
    mean, std = model.predict(Xt, return_std=True)
    assert mean.shape == std.shape == (7, 3)
    assert model.signal_variance_.shape == model.noise_variance_.shape == (3,)
    # target j is (j + 1) times the first's signal: its scale grows with it
    assert model.signal_variance_[0] < model.signal_variance_[1] < model.signal_variance_[2]
    _, cov = model.predict(Xt, return_cov=True)
    assert cov.shape == (7, 7, 3)
    assert_allclose(np.sqrt(np.einsum("iit->it", cov)), std, rtol=1e-6)
    for j in range(3):  # each column is the single-target fit of that column
        single = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3).fit(X, Y[:, j])
        assert_allclose(single.predict(Xt, return_std=True)[1], std[:, j], rtol=1e-5)


def test_covariance_and_samples():
    X, y = _data(n=60)
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-2).fit(X, y)
    Xt = np.random.RandomState(2).uniform(-2, 2, size=(5, 2))
    mean, cov = model.predict(Xt, return_cov=True)
    assert_allclose(cov, cov.T)
    assert np.linalg.eigvalsh(cov).min() > 0
    assert_allclose(np.sqrt(np.diag(cov)), model.predict(Xt, return_std=True)[1], rtol=1e-8)
    draws = model.sample_y(Xt, n_samples=20_000, random_state=0)
    assert draws.shape == (5, 20_000)
    assert_allclose(draws.mean(axis=1), mean, atol=5 * np.sqrt(np.diag(cov).max() / 20_000))
    assert_allclose(np.cov(draws), cov, atol=0.05 * np.diag(cov).max())
    assert_allclose(model.sample_y(Xt, 3, random_state=7), model.sample_y(Xt, 3, random_state=7))
    Y = np.column_stack([y, 2 * y])
    assert KernelGDRegressor(kernel="rbf", alpha=1e-2).fit(X, Y).sample_y(Xt, 4).shape == (5, 2, 4)


def test_std_scales_with_the_targets(variance_path):
    X, y = _data(n=90)
    Xt = X[:10] + 0.1
    base = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3).fit(X, y).predict(Xt, return_std=True)[1]
    for scale in (1e-170, 1e-6, 1e6, 1e160):  # s^2 leaves float64's range before y does; std does not
        scaled = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3).fit(X, scale * y)
        assert_allclose(scaled.predict(Xt, return_std=True)[1] / scale, base, rtol=1e-6)


def test_default_fit_covers_held_out_targets():
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(1500, 3))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.randn(1500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDRegressor().fit(X[:1000], y[:1000])
        mean, std = model.predict(X[1000:], return_std=True)
    inside = np.mean(np.abs(y[1000:] - mean) <= 1.96 * std)
    assert 0.9 <= inside <= 0.99
    assert_allclose(np.sqrt(model.noise_variance_), 0.2, rtol=0.2)


def test_cv_estimator_delegates_to_its_refit():
    X, y = _data(n=120)
    model = KernelGDRegressorCV().fit(X, y)
    mean, std = model.predict(X[:4], return_std=True)
    ref_mean, ref_std = model.best_estimator_.predict(X[:4], return_std=True)
    assert_allclose(mean, ref_mean)
    assert_allclose(std, ref_std, rtol=1e-6)  # CG's sums on the thread pool, in either order
    assert model.noise_variance_ == model.best_estimator_.noise_variance_
    assert model.sample_y(X[:3], 2).shape == (3, 2)


def test_errors():
    X, y = _data(n=40)
    model = KernelGDRegressor(kernel="rbf", alpha=1e-2).fit(X, y)
    with pytest.raises(ValueError, match="At most one"):
        model.predict(X, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="n_samples"):
        model.sample_y(X, n_samples=0)
    K = rbf(X, X, 1.0)
    pre = KernelGDRegressor(kernel="precomputed", alpha=1e-2).fit(K, y)
    assert pre.noise_variance_ > 0
    with pytest.raises(ValueError, match="precomputed"):
        pre.predict(K, return_std=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sigmoid kernel's non-PSD warning
        sigmoid = KernelGDRegressor(kernel="sigmoid", alpha=1e-2, max_iter=20).fit(X, y)
    assert sigmoid.noise_variance_ is None
    with pytest.raises(ValueError, match="positive semi-definite"):
        sigmoid.predict(X, return_std=True)


def test_dask_std_is_lazy_and_matches_memory():
    da = pytest.importorskip("dask.array")
    X, y = _data(n=600, seed=6)
    memory = KernelGDRegressor(kernel="rbf", alpha=1e-3, n_centers=50, random_state=0).fit(X, y)
    lazy = KernelGDRegressor(kernel="rbf", alpha=1e-3, n_centers=50, random_state=0)
    lazy.fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200))
    assert_allclose(lazy.signal_variance_, memory.signal_variance_, rtol=1e-3)  # two solvers, to tol
    Xt = da.from_array(X[:30] + 0.1, chunks=10)
    mean, std = lazy.predict(Xt, return_std=True)
    assert isinstance(std, da.Array)
    assert_allclose(std.compute(), memory.predict(X[:30] + 0.1, return_std=True)[1], rtol=1e-3)
    with pytest.raises(ValueError, match="return_cov"):
        lazy.predict(Xt, return_cov=True)


def test_dask_std_reads_repeated_rows_as_in_memory():
    # Regression: the fit on Dask left out one copy of a repeated row, which its other copies then predicted, and
    # counted copies in N: every row 1 to 3 times gave a signal variance of 0.093 against 0.217 in memory (std 22%
    # apart). It also drew copies of one row as centers where the in-memory fit draws distinct rows (predictions
    # 0.76 apart here). The workers now hash the rows: a group of copies is one row of its summed weight
    da = pytest.importorskip("dask.array")
    X, y = _data(n=300, seed=6)
    rows = np.repeat(np.arange(len(y)), np.random.RandomState(0).randint(1, 4, size=len(y)))
    params = dict(kernel="rbf", sigma=1.0, alpha=1e-3, n_centers=30, random_state=0, tol=1e-10)
    memory = KernelGDRegressor(**params).fit(X[rows], y[rows])
    lazy = KernelGDRegressor(**params).fit(da.from_array(X[rows], chunks=(250, 2)), da.from_array(y[rows], chunks=250))
    assert lazy.signal_variance_ == pytest.approx(memory.signal_variance_, rel=1e-6)
    assert lazy.noise_variance_ == pytest.approx(memory.noise_variance_, rel=1e-6)
    Xt = X[:20] + 0.1
    assert_allclose(lazy.predict(Xt, return_std=True)[1], memory.predict(Xt, return_std=True)[1], rtol=1e-6)


def test_exact_model_above_the_dense_limit_takes_the_marginal_likelihood_scale(monkeypatch):
    import kernelgd._posterior as posterior

    monkeypatch.setattr(posterior, "LOO_DENSE_MAX", 10)
    X, y = _data(n=100)
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3, tol=1e-12, max_iter=10_000).fit(X, y)
    C = rbf(X, X, 1.0) + 1e-3 * len(y) * np.eye(len(y))
    centred = y - model.intercept_
    assert_allclose(model.signal_variance_, centred @ np.linalg.solve(C, centred) / len(y), rtol=1e-8)


@pytest.mark.parametrize("variant", ["repeated", "zero weights", "precomputed"])
def test_dense_limit_counts_distinct_rows_of_positive_weight(monkeypatch, variant):
    # Regression: the leave-one-out scale's limit counted every row, so 1,200 rows weighted 1 to 3 took the
    # leave-one-out scale and the same rows repeated (2,442) the marginal likelihood's: std 8.6% apart
    import kernelgd._posterior as posterior

    monkeypatch.setattr(posterior, "LOO_DENSE_MAX", 100)
    X, y = _data(n=80)
    counts = np.random.RandomState(1).randint(1, 4, size=len(y))
    Xt = np.vstack([X[:4] + 0.05, [[3.0, -2.0]]])
    params = dict(sigma=1.0, alpha=1e-2, tol=1e-12, max_iter=10_000)
    weighted = KernelGDRegressor(**params).fit(X, y, sample_weight=counts.astype(float))
    rows = np.repeat(np.arange(len(y)), counts)  # 160 rows: each row its count of times
    if variant == "zero weights":  # 60 more rows, of weight zero
        extra = np.random.RandomState(2).uniform(-2, 2, size=(60, 2))
        model = KernelGDRegressor(**params).fit(np.vstack([X, extra]), np.r_[y, np.zeros(60)],
                                                sample_weight=np.r_[counts, np.zeros(60)])
    elif variant == "precomputed":  # (no std at new points without k(x, x): the scale and noise)
        model = KernelGDRegressor(kernel="precomputed", **params).fit(rbf(X[rows], X[rows], 1.0), y[rows])
    else:
        model = KernelGDRegressor(**params).fit(X[rows], y[rows])
    assert model.signal_variance_ == pytest.approx(weighted.signal_variance_, rel=1e-8)
    assert model.noise_variance_ == pytest.approx(weighted.noise_variance_, rel=1e-8)
    if variant != "precomputed":
        assert_allclose(model.predict(Xt, return_std=True)[1], weighted.predict(Xt, return_std=True)[1], rtol=1e-6)


@pytest.mark.parametrize("alpha", [1e-9, 1e-11, 1e-14])
def test_near_interpolating_exact_model_solves_the_marginal_likelihood_scale_anew(monkeypatch, alpha):
    # At a tiny ridge the fit's coefficients leave (y - b)'a far below (y - b)' C^-1 (y - b) (20% at
    # 1e-14 here; UCI naval's default fit: 1,800-fold, and its 95% intervals held 17% of test targets).
    # The scale is then solved anew, at the least ridge float64 resolves, which the posterior takes.
    import kernelgd._posterior as posterior

    monkeypatch.setattr(posterior, "LOO_DENSE_MAX", 10)
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=alpha).fit(X, y)
    n = len(y)
    ridge = max(alpha, posterior.LOO_MIN_RIDGE)  # the trace of S K S is 1 for the rbf
    centred = y - model.intercept_
    s2 = centred @ np.linalg.solve(rbf(X, X, 1.0) + ridge * n * np.eye(n), centred) / n
    assert_allclose(model.signal_variance_, s2, rtol=posterior.QUADRATIC_RTOL)
    assert_allclose(model.noise_variance_, model.signal_variance_ * ridge * n, rtol=1e-12)


@pytest.mark.parametrize("variant", ["weights", "zero weights", "replicates", "two targets", "precomputed", "sparse"])
def test_marginal_likelihood_scale_solved_anew_reads_weights_copies_and_inputs(monkeypatch, variant):
    import scipy.sparse as sp

    import kernelgd._posterior as posterior

    monkeypatch.setattr(posterior, "LOO_DENSE_MAX", 10)
    rng = np.random.RandomState(1)
    X = rng.uniform(-2, 2, size=(200, 2))
    Y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, 1] ** 2, np.cos(X[:, 1]) - X[:, 0]])
    w = rng.uniform(0.5, 2.0, len(X)) if variant in ("weights", "zero weights") else np.ones(len(X))
    if variant == "zero weights":
        w[:30] = 0.0
    X_fit, y_fit, w_fit = X, Y[:, :2] if variant == "two targets" else Y[:, 0], w
    if variant == "replicates":  # the first 40 rows twice: read as one row of twice the weight
        X_fit, y_fit, w_fit = np.vstack([X, X[:40]]), np.concatenate([Y[:, 0], Y[:40, 0]]), np.ones(len(X) + 40)
        w[:40] = 2.0
    K = rbf(X_fit, X_fit, 1.0)
    given = {"precomputed": K, "sparse": sp.csr_matrix(X_fit)}.get(variant, X_fit)
    kernel = "precomputed" if variant == "precomputed" else "rbf"
    model = KernelGDRegressor(kernel=kernel, sigma=1.0, alpha=1e-13).fit(given, y_fit, sample_weight=w_fit)
    keep = w > 0
    w_keep = w[keep] / w[keep].sum()
    ridge = posterior.LOO_MIN_RIDGE  # above alpha: the trace of S K S is 1 for the rbf
    C = rbf(X[keep], X[keep], 1.0) + ridge * np.diag(1.0 / w_keep)
    centred = np.atleast_2d((Y[keep, :2] if variant == "two targets" else Y[keep, :1]) - model.intercept_)
    s2 = np.einsum("ij,ij->j", centred, np.linalg.solve(C, centred)) / keep.sum()
    assert_allclose(np.atleast_1d(model.signal_variance_), s2, rtol=posterior.QUADRATIC_RTOL)


@pytest.mark.parametrize("alpha", [1e-12, 1e-9, 1e-6])
def test_dense_variance_of_a_float32_model_evaluates_its_kernel_in_float64(alpha):
    # The dense factor of S K S + alpha I was formed from the operator's float32 rows: at alpha 1e-12
    # its standard deviations were 93% off, at 1e-9 76%.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2
    Z = rng.uniform(-2, 2, size=(40, 2))
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=alpha, options={"dtype": "float32"}).fit(X, y)
    n = len(y)
    K_z = rbf(X, Z, 1.0)
    latent = 1.0 - np.sum(K_z * np.linalg.solve(rbf(X, X, 1.0) + alpha * n * np.eye(n), K_z), axis=0)
    assert_allclose(model.predict(Z, return_std=True)[1], np.sqrt(model.signal_variance_ * (latent + alpha * n)),
                    rtol=1e-5)


def test_centers_scale_from_a_sample_of_rows(monkeypatch):
    import kernelgd._posterior as posterior

    X, y = _data(n=6000, seed=8)
    params = dict(kernel="rbf", sigma=1.0, alpha=1e-4, n_centers=100, random_state=0)
    sampled = KernelGDRegressor(**params).fit(X, y).signal_variance_  # 4,096 of the 6,000 rows
    monkeypatch.setattr(posterior, "LOO_SAMPLE", 10**6)
    every_row = KernelGDRegressor(**params).fit(X, y).signal_variance_
    assert_allclose(sampled, every_row, rtol=0.05)
    assert sampled != every_row


@pytest.mark.parametrize("n_centers", [None, 40])
def test_sparse_inputs_give_the_dense_inputs_std(n_centers):
    sparse = pytest.importorskip("scipy.sparse")
    X, y = _data(n=200, d=3, seed=9)
    X[np.abs(X) < 1.0] = 0.0
    params = dict(kernel="rbf", sigma=2.0, alpha=1e-3, n_centers=n_centers, random_state=0, tol=1e-10)
    csr = KernelGDRegressor(**params).fit(sparse.csr_matrix(X), y)
    Xt = X[:8] + 0.1
    std = csr.predict(sparse.csr_matrix(Xt), return_std=True)[1]
    assert_allclose(std, csr.predict(Xt, return_std=True)[1], rtol=1e-6)
    if n_centers is None:  # (sparse and dense rows draw different centers)
        assert_allclose(std, KernelGDRegressor(**params).fit(X, y).predict(Xt, return_std=True)[1], rtol=1e-6)


def test_heavy_tailed_residuals_widen_the_scale_to_hold_95_percent():
    # Noise mostly 0, else +-0.5 (as rounding integer targets makes it): a Gaussian of the same variance
    # puts its 95% interval inside +-0.5, holding about 80% of the held-out rows, so the scale grows
    # until 95% of them fall inside; both against the dense leave-one-out reference.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(400, 2))
    noise = 0.5 * rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.8, 0.1], size=400) + 0.02 * rng.randn(400)
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + noise
    model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-3, tol=1e-12, max_iter=10_000).fit(X, y)
    w = np.full(len(y), 1.0 / len(y))
    s2, _, _ = _exact_reference(X, y, X[:3], 1.0, 1e-3, w, model.intercept_, len(y))
    C_inv = np.linalg.inv(rbf(X, X, 1.0) + 1e-3 * len(y) * np.eye(len(y)))
    a, c = C_inv @ (y - model.intercept_), np.diag(C_inv)
    q = (a / c) ** 2 * c
    assert s2 > 1.05 * np.mean(q)  # the rule widened the likelihood's scale
    assert_allclose(model.signal_variance_, s2, rtol=1e-6)
    assert np.mean(q <= norm.ppf(0.975) ** 2 * model.signal_variance_ * (1 + 1e-9)) >= 0.95


@pytest.mark.parametrize("n_centers", [None, 50])
def test_the_posterior_is_computed_when_first_asked_for(n_centers, monkeypatch):
    # a fit pays nothing for the Gaussian-process view until it is asked for: its factors cost more
    # than many fits (a centers model's K_nm' W K_nm, a small exact model's dense inverse)
    import pickle

    import kernelgd._posterior as posterior

    name = "fit_exact" if n_centers is None else "fit_centers"
    calls, original = [], getattr(posterior, name)
    monkeypatch.setattr(posterior, name, lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    X, y = _data(n=400, seed=3)
    assert not hasattr(KernelGDRegressor(), "signal_variance_")
    model = KernelGDRegressor(alpha=1e-3, n_centers=n_centers, random_state=0).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))  # the deferred state travels
    assert calls == []
    std = model.predict(X[:5], return_std=True)[1]
    scale = model.signal_variance_
    assert calls == [1]
    assert_allclose(restored.predict(X[:5], return_std=True)[1], std, rtol=1e-12)
    assert restored.signal_variance_ == scale and len(calls) == 2
    # a refit's posterior is its own: targets twice as large, a scale four times as large
    model.fit(X, 2 * y)
    assert_allclose(model.signal_variance_, 4 * scale, rtol=1e-9)
    cv = KernelGDRegressorCV(alphas=[1e-3], sigmas=[1.0]).fit(X, y)
    assert cv.noise_variance_ == cv.best_estimator_.noise_variance_ > 0


def test_weighted_gram_holds_one_sum_per_thread():
    # K_nm' W K_nm summed block by block into one m x m matrix per thread: holding one per block took
    # 25 GB at 200,000 rows on 4,000 centers (the process was killed)
    import tracemalloc

    from kernelgd._operator import KernelOperator
    from kernelgd._posterior import weighted_gram
    from kernelgd.kernels import bind_kernel

    rng = np.random.RandomState(0)
    X, w = rng.normal(size=(4000, 3)), rng.uniform(size=4000)
    operator = KernelOperator(X, bind_kernel("rbf"), centers=X[:200], dtype="float64", threads=2)
    operator.block_rows = 100  # 40 blocks of 200 x 200 sums, 12.8 MB if each were kept
    tracemalloc.start()
    G = weighted_gram(operator, w)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    K = rbf(X, X[:200], 1.0)
    assert_allclose(G, K.T @ (w[:, None] * K), rtol=1e-10)
    assert peak < 4 << 20, peak


def test_a_tiny_ridges_std_is_the_same_from_the_dense_factor_and_from_cg():
    # Regression: the exact model's variance solves stopped at CG's relative residual 1e-6, whose error (up to
    # tol^2 |k_x|^2 / alpha) at alpha=1e-10 left single points' std (CG) up to 13% above the batch's (one dense
    # factor for many points); the solves now tighten with the ridge
    rng = np.random.RandomState(0)
    X = rng.normal(size=(1200, 1))
    y = np.sin(2 * X[:, 0]) + X[:, 0] + 0.3 * rng.normal(size=1200)
    model = KernelGDRegressor(alpha=1e-10, sigma=4.0, random_state=0).fit(X, y)
    X_test = np.linspace(-4, 4, 30)[:, None]
    std = model.predict(X_test, return_std=True)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one_by_one = np.array([model.predict(X_test[i : i + 1], return_std=True)[1][0] for i in range(30)])
    assert_allclose(one_by_one, std, rtol=1e-4)
