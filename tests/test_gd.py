"""Solver "gd" against primal gradient descent, KernelRidge and linear algebra."""

import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.kernel_ridge import KernelRidge

from functools import partial

from kernelgd import KernelGDRegressor, kernel_matrix
from kernelgd._solvers._common import NonPSDKernelWarning

# The notes' update: these tests pin solver="gd".
GD = partial(KernelGDRegressor, solver="gd", alpha=0.0)  # the notes' update: no ridge unless given
rng = np.random.RandomState(0)
X = rng.normal(size=(40, 3))
y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=40)


def primal_gd(X, y, step, n_iter, alpha=0.0, intercept=False, w=None):
    """Textbook gradient descent on (w, b) for sum_i w_i (x_i'beta + b - y_i)^2 + alpha |beta|^2,
    from the intercept-only optimum (b the weighted mean of y)."""
    n, d = X.shape
    w = np.full(n, 1 / n) if w is None else w / w.sum()
    beta, b = np.zeros(d), float(w @ y) if intercept else 0.0
    for _ in range(n_iter):
        r = X @ beta + b - y
        grad_beta = 2 * X.T @ (w * r) + 2 * alpha * beta
        grad_b = 2 * np.sum(w * r)
        beta = beta - step * grad_beta
        if intercept:
            b = b - step * grad_b
    return beta, b


@pytest.mark.parametrize("n_iter", [1, 2, 17, 200])
@pytest.mark.parametrize("alpha, intercept", [(0.0, False), (0.05, False), (0.05, True)])
def test_linear_kernel_iterates_equal_primal_gradient_descent(n_iter, alpha, intercept):
    step = 0.1
    model = GD(
        kernel="linear", alpha=alpha, step_size=step, max_iter=n_iter, tol=0,
        fit_intercept=intercept,
    ).fit(X, y)
    beta, b = primal_gd(X, y, step, n_iter, alpha, intercept)
    assert model.n_iter_ == n_iter
    assert_allclose(X.T @ model.dual_coef_, beta, rtol=1e-10, atol=1e-12)
    assert_allclose(model.intercept_, b, atol=1e-12)


def test_notes_update_by_hand():
    # Two updates of a_i <- a_i - 2 s (sum_j a_j K_ij - y_i) of the notes, with w_i = 1/n.
    K = kernel_matrix(X, kernel="rbf", sigma=1.5)
    s, n = 0.3, len(y)
    a = np.zeros(n)
    for _ in range(2):
        a = a - s * 2 / n * (K @ a - y)
    model = GD(sigma=1.5, step_size=s, max_iter=2, tol=0, fit_intercept=False)
    assert_allclose(model.fit(X, y).dual_coef_, a, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "polynomial"])
def test_converges_to_kernel_ridge(kernel):
    alpha, sigma = 1e-2, 1.5
    model = GD(
        kernel=kernel, sigma=sigma, degree=2, alpha=alpha, max_iter=20_000, tol=0,
        fit_intercept=False,
    ).fit(X, y)
    gamma = {"rbf": 1 / sigma**2, "laplacian": 1 / sigma, "polynomial": 1 / sigma**2}[kernel]
    ref = KernelRidge(alpha=len(y) * alpha, kernel=kernel, gamma=gamma, degree=2, coef0=1)
    ref.fit(X, y)
    assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-8)
    Z = rng.normal(size=(10, 3))
    assert_allclose(model.predict(Z), ref.predict(Z), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("alpha", [1.0, 100.0, 1000.0])
def test_a_heavy_ridge_with_an_intercept_converges_quietly(alpha):
    # Regression: from b = 0 the intercept's steps, limited by the ridge (eta ~ 1 / alpha), left it
    # unconverged: alpha = 1000 ran 1,000 iterations and returned the intercept-only model, warning
    target = y + 5.0
    n = len(y)
    K, w = kernel_matrix(X, sigma=1.5), np.full(n, 1 / n)
    M = np.block([[w[:, None] * K + alpha * np.eye(n), w[:, None]], [(w @ K)[None, :], np.ones((1, 1))]])
    solution = np.linalg.solve(M, np.append(w * target, w @ target))  # the stationarity conditions
    a, b = solution[:n], solution[n]
    optimum = w @ (K @ a + b - target) ** 2 + alpha * a @ K @ a
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDRegressor(sigma=1.5, alpha=alpha, solver="gd", random_state=0).fit(X, target)
    assert model.n_iter_ < 100
    assert_allclose(model.loss_curve_[-1], optimum, rtol=1e-6)
    assert_allclose(model.intercept_, b, rtol=1e-4)  # tol=1e-3 bounds the gradient


def test_weighted_fit_converges_to_weighted_kernel_ridge():
    alpha, sw = 1e-2, rng.uniform(0.5, 3.0, size=len(y))
    model = GD(
        sigma=1.5, alpha=alpha, max_iter=20_000, tol=0, fit_intercept=False
    ).fit(X, y, sample_weight=sw)
    # Our weights are normalised to sum 1: KernelRidge's alpha scales by sum(sw).
    ref = KernelRidge(alpha=alpha * sw.sum(), kernel="rbf", gamma=1 / 1.5**2)
    ref.fit(X, y, sample_weight=sw)
    assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-8)


def test_intercept_converges_to_stationary_point():
    # Solve the optimality conditions of the objective directly:
    # W (K a + b - y) + alpha a = 0 and sum_i w_i (K a + b - y)_i = 0.
    alpha, n = 1e-2, len(y)
    K = kernel_matrix(X, sigma=1.5)
    w = np.full(n, 1 / n)
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = w[:, None] * K + alpha * np.eye(n)
    M[:n, n] = w
    M[n, :n] = w @ K
    M[n, n] = w.sum()
    sol = np.linalg.solve(M, np.concatenate([w * (y + 3.0), [w @ (y + 3.0)]]))
    model = GD(sigma=1.5, alpha=alpha, max_iter=20_000, tol=0)
    model.fit(X, y + 3.0)
    assert_allclose(model.dual_coef_, sol[:n], rtol=1e-6, atol=1e-8)
    assert_allclose(model.intercept_, sol[n], rtol=1e-8)


def test_integer_weights_equal_repeated_rows():
    counts = rng.randint(0, 4, size=len(y))
    params = dict(alpha=1e-3, max_iter=300, tol=0)
    weighted = GD(**params).fit(X, y, sample_weight=counts)
    repeated = GD(**params).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
    Z = rng.normal(size=(15, 3))
    assert_allclose(weighted.predict(Z), repeated.predict(Z), rtol=1e-7, atol=1e-9)
    assert_allclose(weighted.sigma_, repeated.sigma_, rtol=1e-12)
    assert_allclose(weighted.step_size_, repeated.step_size_, rtol=1e-7)


def test_loss_curve_is_the_objective_and_decreases():
    alpha = 1e-3
    model = GD(sigma=1.5, alpha=alpha, max_iter=50, tol=0).fit(X, y)
    K = kernel_matrix(X, sigma=1.5)
    a, b = model.dual_coef_, model.intercept_
    brute = np.mean((K @ a + b - y) ** 2) + alpha * a @ K @ a
    assert len(model.loss_curve_) == 50
    assert_allclose(model.loss_curve_[-1], brute, rtol=1e-10)
    assert np.all(np.diff(model.loss_curve_) <= 0)


def primal_gradient_norm(K, a, b, y, alpha, intercept):
    """||grad L|| of the primal objective, by brute force: g'Kg + (sum g)^2."""
    g = 2 * (K @ a + b - y) / len(y)
    gb = g.sum() if intercept else 0.0
    g = g + 2 * alpha * a
    return np.sqrt(g @ K @ g + gb**2)


@pytest.mark.parametrize("intercept", [False, True])
def test_tol_bounds_the_relative_gradient_norm(intercept):
    # gd stops after the first update whose starting point has a primal
    # gradient norm at most tol times that of the intercept-only model.
    alpha, tol, sigma = 1e-2, 1e-4, 1.5
    K = kernel_matrix(X, sigma=sigma)
    b0 = y.mean() if intercept else 0.0
    ref = primal_gradient_norm(K, np.zeros(40), b0, y, alpha, intercept)
    params = dict(sigma=sigma, alpha=alpha, fit_intercept=intercept)
    early = GD(max_iter=10_000, tol=tol, **params).fit(X, y)
    n = early.n_iter_
    assert 2 < n < 10_000
    before = [GD(max_iter=k, tol=0, **params).fit(X, y) for k in (n - 2, n - 1)]
    norms = [primal_gradient_norm(K, m.dual_coef_, m.intercept_, y, alpha, intercept) for m in before]
    assert norms[0] > tol * ref >= norms[1]
    assert GD(alpha=1e-1, max_iter=123, tol=0).fit(X, y).n_iter_ == 123


def test_warm_start_from_a_converged_model_stops_at_once():
    model = GD(alpha=1e-2, tol=1e-4, warm_start=True).fit(X, y)
    assert model.n_iter_ > 10
    assert model.fit(X, y).n_iter_ == 1


def test_tiny_step_runs_to_max_iter_and_warns():
    # A step far below the stable bound makes slow progress: no silent stop
    # after one update (regression: the old objective-decrease test stopped
    # at once with R^2 < 0 and no warning).
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="did not converge"):
        model = GD(step_size=1e-6, max_iter=50).fit(X, y)
    assert model.n_iter_ == 50
    assert model.score(X, y) >= 0.0  # never worse than the intercept-only model


def exact_bound(X, kernel, sigma, alpha, intercept, w=None):
    n = len(X)
    w = np.full(n, 1 / n) if w is None else w / w.sum()
    K = kernel_matrix(X, kernel=kernel, sigma=sigma) + (1.0 if intercept else 0.0)
    s = np.sqrt(w)
    return 1 / (np.linalg.eigvalsh(s[:, None] * K * s[None, :]).max() + alpha)


@pytest.mark.parametrize("n", [40, 500])  # dense and Lanczos estimates
@pytest.mark.parametrize("kernel, intercept", [("rbf", True), ("linear", False), ("laplacian", True)])
def test_auto_step_is_below_the_exact_stable_bound(n, kernel, intercept):
    Z = np.random.RandomState(n).normal(size=(n, 4))
    Z -= Z.mean(axis=0)  # centred data: K @ 1 = 0 for the linear kernel
    target = Z[:, 0] ** 2
    model = GD(kernel=kernel, sigma=2.0, alpha=1e-3, fit_intercept=intercept, max_iter=5)
    model.fit(Z, target)
    bound = exact_bound(Z, kernel, 2.0, 1e-3, intercept)
    assert 0.85 * bound < model.step_size_ < bound


@pytest.mark.parametrize("factor, n_iter", [(3.0, 100), (1.05, 3000)])
def test_too_large_step_raises_with_the_bound(factor, n_iter):
    bound = exact_bound(X, "rbf", 1.5, 0.0, True)
    model = GD(sigma=1.5, step_size=factor * bound, max_iter=n_iter, tol=0)
    with pytest.raises(ValueError, match="too large") as info:
        model.fit(X, y)
    stated = float(re.search(r"step_size < ([0-9.e+-]+)", str(info.value)).group(1))
    assert_allclose(stated, bound, rtol=1e-5)
    assert not hasattr(model, "dual_coef_")


def test_step_just_below_bound_is_stable():
    bound = exact_bound(X, "rbf", 1.5, 0.0, True)
    model = GD(sigma=1.5, step_size=0.99 * bound, max_iter=3000, tol=0).fit(X, y)
    assert np.all(np.isfinite(model.dual_coef_))


def test_non_psd_kernel_warns_and_stays_finite():
    Z = np.random.RandomState(2).normal(size=(30, 2))
    model = GD(kernel="sigmoid", coef0=-1.0, kernel_params={"a": 2.0})
    with pytest.warns(NonPSDKernelWarning):
        model.fit(Z, Z[:, 0])
    assert np.all(np.isfinite(model.dual_coef_)) and np.isfinite(model.intercept_)


def test_warm_start_continues_the_iterations():
    params = dict(step_size=0.2, tol=0, alpha=1e-3)
    once = GD(max_iter=60, **params).fit(X, y)
    twice = GD(max_iter=30, warm_start=True, **params).fit(X, y)
    twice.fit(X, y)
    assert_allclose(twice.dual_coef_, once.dual_coef_, rtol=1e-10)
    assert_allclose(twice.intercept_, once.intercept_, rtol=1e-10)
    # a training set of another size starts from zero again
    fresh = GD(max_iter=30, **params).fit(X[:20], y[:20])
    twice.fit(X[:20], y[:20])
    assert_allclose(twice.dual_coef_, fresh.dual_coef_)


def test_multi_output_columns_equal_single_fits():
    Y = np.column_stack([y, X[:, 2] ** 2, -y])
    params = dict(alpha=1e-3, step_size=0.3, max_iter=200, tol=0)
    multi = GD(**params).fit(X, Y)
    assert multi.dual_coef_.shape == (40, 3) and multi.intercept_.shape == (3,)
    for j in range(3):
        single = GD(**params).fit(X, Y[:, j])
        assert_allclose(multi.dual_coef_[:, j], single.dual_coef_, rtol=1e-12, atol=1e-14)
        assert_allclose(multi.intercept_[j], single.intercept_, rtol=1e-12)
    assert multi.predict(X).shape == (40, 3)


def test_verbose_prints_progress(capsys):
    GD(max_iter=20, tol=0, verbose=1).fit(X, y)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[gd]")]
    assert len(lines) == 10
    assert "objective" in lines[0] and "gradient" in lines[0]
