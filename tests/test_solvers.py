"""Solvers "cg", "eigenpro" and "auto": all minimise the same objective.

References: scikit-learn's KernelRidge, and the optimality conditions of the
objective solved directly by dense linear algebra.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.kernel_ridge import KernelRidge

from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix

rng = np.random.RandomState(0)
X = rng.normal(size=(60, 3))
y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=60)
Z = rng.normal(size=(12, 3))
SIGMA, ALPHA = 1.5, 1e-2
CONVERGED = {
    "gd": dict(solver="gd", max_iter=20_000, tol=0),
    "cg": dict(solver="cg", max_iter=500, tol=1e-12),
    "eigenpro": dict(solver="eigenpro", max_iter=3000, tol=0),
}


def krr(alpha=ALPHA, sw=None, kernel="rbf"):
    gamma = {"rbf": 1 / SIGMA**2, "laplacian": 1 / SIGMA}[kernel]
    total = len(y) if sw is None else sw.sum()
    return KernelRidge(alpha=alpha * total, kernel=kernel, gamma=gamma).fit(X, y, sample_weight=sw)


@pytest.mark.parametrize("solver", ["gd", "cg", "eigenpro"])
def test_all_solvers_converge_to_kernel_ridge(solver):
    model = KernelGDRegressor(
        sigma=SIGMA, alpha=ALPHA, fit_intercept=False, random_state=0, **CONVERGED[solver]
    ).fit(X, y)
    ref = krr()
    assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-8)
    assert_allclose(model.predict(Z), ref.predict(Z), rtol=1e-6, atol=1e-8)
    assert model.solver_ == solver


@pytest.mark.parametrize("solver", ["cg", "eigenpro"])
def test_weighted_solvers_converge_to_weighted_kernel_ridge(solver):
    sw = rng.uniform(0.2, 3.0, size=len(y))
    model = KernelGDRegressor(
        sigma=SIGMA, alpha=ALPHA, fit_intercept=False, random_state=0, **CONVERGED[solver]
    ).fit(X, y, sample_weight=sw)
    assert_allclose(model.predict(Z), krr(sw=sw).predict(Z), rtol=1e-6, atol=1e-8)


def stationary_point(K, y, w, alpha):
    """Solve W (K a + b - y) + alpha a = 0, sum_i w_i (K a + b - y)_i = 0 directly."""
    n = len(y)
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = w[:, None] * K + alpha * np.eye(n)
    M[:n, n] = w
    M[n, :n] = w @ K
    M[n, n] = w.sum()
    sol = np.linalg.solve(M, np.concatenate([w * y, [w @ y]]))
    return sol[:n], sol[n]


@pytest.mark.parametrize("solver", ["gd", "cg", "eigenpro"])
def test_all_solvers_agree_with_intercept(solver):
    target = y + 5.0
    a, b = stationary_point(kernel_matrix(X, sigma=SIGMA), target, np.full(60, 1 / 60), ALPHA)
    model = KernelGDRegressor(sigma=SIGMA, alpha=ALPHA, random_state=0, **CONVERGED[solver])
    model.fit(X, target)
    assert_allclose(model.intercept_, b, rtol=1e-6)
    assert_allclose(model.dual_coef_, a, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("solver", ["cg", "eigenpro"])
def test_multi_output_and_classifier(solver):
    Y = np.column_stack([y, X[:, 2] ** 2])
    params = dict(sigma=SIGMA, alpha=ALPHA, fit_intercept=False, random_state=0, **CONVERGED[solver])
    multi = KernelGDRegressor(**params).fit(X, Y)
    ref = KernelRidge(alpha=ALPHA * 60, kernel="rbf", gamma=1 / SIGMA**2).fit(X, Y)
    assert_allclose(multi.predict(Z), ref.predict(Z), rtol=1e-6, atol=1e-7)
    labels = np.array(["a", "b", "c"])[np.digitize(y, [-0.5, 0.5])]
    clf = KernelGDClassifier(combine="argmax", **params).fit(X, labels)
    pm1 = np.where(labels[:, None] == np.array(["a", "b", "c"]), 1.0, -1.0)
    ref = KernelRidge(alpha=ALPHA * 60, kernel="rbf", gamma=1 / SIGMA**2).fit(X, pm1)
    assert_allclose(clf.decision_function(Z), ref.predict(Z), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("alpha", [1e-2, 1.0, 100.0])
def test_eigenpro_with_ridge_converges_at_its_step(alpha):
    # Regression: the preconditioner flattened the top of K, not of K + alpha, so each flattened
    # direction had eigenvalue tau (1 + alpha / lambda_j), far below the step's tau + alpha: at
    # alpha = 1 the fit ran 1,000 epochs and warned, at alpha = 100 it returned the intercept-only model
    target = y + 5.0
    w = np.full(60, 1 / 60)
    K = kernel_matrix(X, sigma=SIGMA)
    a, b = stationary_point(K, target, w, alpha)
    optimum = w @ (K @ a + b - target) ** 2 + alpha * a @ K @ a
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDRegressor(sigma=SIGMA, alpha=alpha, solver="eigenpro", random_state=0).fit(X, target)
    assert model.n_iter_ <= 60  # every direction contracts by 1 - 1.8 (lambda + alpha) / (tau + alpha) per epoch
    assert_allclose(model.loss_curve_[-1], optimum, rtol=1e-5)  # tol=1e-3 bounds the gradient, not the gap
    assert_allclose(model.intercept_, b, rtol=1e-4)


def test_eigenpro_without_ridge_interpolates():
    # A well-conditioned kernel (laplacian, small sigma): the minimiser
    # without ridge is the interpolant K^-1 y.
    K = kernel_matrix(X, kernel="laplacian", sigma=0.5)
    model = KernelGDRegressor(
        kernel="laplacian", sigma=0.5, alpha=0.0, solver="eigenpro", max_iter=500, tol=0, fit_intercept=False
    ).fit(X, y)
    assert_allclose(model.dual_coef_, np.linalg.solve(K, y), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("options", [None, {"memory_budget": 8 << 20}], ids=["stored", "streamed"])
def test_eigenpro_minibatch_on_a_larger_problem(options):
    # n above the subsample size: EigenPro's stochastic regime. A stored K
    # evaluates each epoch with one product over K, a streamed K inside the
    # batches' products: both curves are exact objectives.
    Xl = np.random.RandomState(1).normal(size=(3000, 4))
    yl = np.sin(Xl[:, 0]) * np.cos(Xl[:, 1])
    model = KernelGDRegressor(sigma=2.0, alpha=0.0, solver="eigenpro", max_iter=20, random_state=0, options=options)
    model.fit(Xl, yl)
    assert model.score(Xl, yl) > 0.99
    assert np.all(np.diff(model.loss_curve_[:5]) < 0)
    mse = np.mean((model.predict(Xl) - yl) ** 2)
    assert model.loss_curve_[-1] == pytest.approx(mse, rel=1e-6)  # alpha=0: the objective is the MSE


def test_auto_picks_by_problem():
    assert KernelGDRegressor(alpha=1e-3).fit(X, y).solver_ == "cg"
    assert KernelGDRegressor(alpha=0.0).fit(X, y).solver_ == "eigenpro"
    assert KernelGDRegressor(alpha=1e-3, n_centers=20).fit(X, y).solver_ == "cg"
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        sig = KernelGDRegressor(kernel="sigmoid", alpha=1.0).fit(X, y)
    assert sig.solver_ == "gd"


def centers_reference(X, y, C, w, alpha, intercept):
    """Minimise sum_i w_i (K_nm beta + b - y)^2 + alpha beta' K_mm beta directly."""
    Knm, Kmm = kernel_matrix(X, C, sigma=SIGMA), kernel_matrix(C, sigma=SIGMA)
    if not intercept:
        return np.linalg.solve(Knm.T @ (w[:, None] * Knm) + alpha * Kmm, Knm.T @ (w * y)), 0.0
    F = np.column_stack([Knm, np.ones(len(y))])
    R = np.zeros((F.shape[1], F.shape[1]))
    R[:-1, :-1] = alpha * Kmm
    sol = np.linalg.solve(F.T @ (w[:, None] * F) + R, F.T @ (w * y))
    return sol[:-1], sol[-1]


@pytest.mark.parametrize("intercept", [False, True])
def test_centers_solve_the_restricted_problem(intercept):
    target = y + (2.0 if intercept else 0.0)
    sw = rng.uniform(0.5, 2.0, size=60)
    model = KernelGDRegressor(
        sigma=SIGMA, alpha=ALPHA, n_centers=15, fit_intercept=intercept, tol=1e-12, max_iter=500,
        random_state=0,
    ).fit(X, target, sample_weight=sw)
    assert model.X_fit_.shape == (15, 3) and model.dual_coef_.shape == (15,)
    beta, b = centers_reference(X, target, model.X_fit_, sw / sw.sum(), ALPHA, intercept)
    assert_allclose(model.dual_coef_, beta, rtol=1e-6, atol=1e-8)
    assert_allclose(model.intercept_, b, atol=1e-8)
    assert_allclose(model.predict(Z), kernel_matrix(Z, model.X_fit_, sigma=SIGMA) @ beta + b, rtol=1e-6, atol=1e-8)
    # the centers are training points
    assert all(any(np.array_equal(c, x) for x in X) for c in model.X_fit_)


@pytest.mark.parametrize("intercept", [False, True])
def test_centers_preconditioner_is_weighted_by_the_centers_weights(monkeypatch, intercept):
    # Weights varying smoothly over four orders of magnitude (as Newton's Hessian weights do:
    # tiny where the model is confident): the FALKON preconditioner weighted at the centers
    # needs fewer iterations than the unweighted one, and both reach the dense solution.
    from kernelgd import _fit
    from kernelgd._solvers import _dense_newton

    monkeypatch.setattr(_dense_newton, "MAX_FLOPS", 0)  # CG's runs: 80 centers would be solved densely
    rs = np.random.RandomState(3)
    Xw = rs.normal(size=(400, 3))
    yw = np.sin(2 * Xw[:, 0]) + Xw[:, 1] ** 2
    sw = 10.0 ** (-2.0 * (1.0 + np.tanh(2.0 * Xw[:, 0])))
    params = dict(sigma=SIGMA, alpha=1e-4, n_centers=80, fit_intercept=intercept, tol=1e-10,
                  max_iter=2000, random_state=0)
    weighted = KernelGDRegressor(**params).fit(Xw, yw, sample_weight=sw)
    operator = _fit.KernelOperator
    monkeypatch.setattr(_fit, "KernelOperator", lambda *a, center_rows=None, **k: operator(*a, **k))
    unweighted = KernelGDRegressor(**params).fit(Xw, yw, sample_weight=sw)
    beta, b = centers_reference(Xw, yw, weighted.X_fit_, sw / sw.sum(), 1e-4, intercept)
    for model in (weighted, unweighted):
        assert_allclose(model.predict(Z), kernel_matrix(Z, weighted.X_fit_, sigma=SIGMA) @ beta + b,
                        rtol=1e-5, atol=1e-6)
    assert weighted.n_iter_ < 0.5 * unweighted.n_iter_


def test_centers_need_a_center_solver():
    with pytest.raises(ValueError, match="n_centers is supported by the solvers"):
        KernelGDRegressor(solver="gd", n_centers=10).fit(X, y)
    with pytest.raises(ValueError, match="precomputed"):
        KernelGDRegressor(kernel="precomputed", n_centers=10).fit(kernel_matrix(X), y)


def test_n_centers_at_least_n_is_the_full_model():
    full = KernelGDRegressor(alpha=ALPHA, tol=1e-12, max_iter=500).fit(X, y)
    many = KernelGDRegressor(alpha=ALPHA, tol=1e-12, max_iter=500, n_centers=1000).fit(X, y)
    assert_allclose(many.predict(Z), full.predict(Z), rtol=1e-8)


def test_auto_centers_rule():
    from kernelgd._base import AUTO_EXACT_MAX_ROWS, auto_centers

    assert auto_centers(100) is None and auto_centers(AUTO_EXACT_MAX_ROWS) is None
    assert auto_centers(AUTO_EXACT_MAX_ROWS + 1) == 1000 and auto_centers(200_000) == 1000
    assert auto_centers(10**6) == 2000 and auto_centers(10**8) == 20_000
    # the squared loss: at least twice the Nystroem(2000) features a user would fit instead
    assert auto_centers(AUTO_EXACT_MAX_ROWS + 1, squared=True) == 4000 and auto_centers(10**6, squared=True) == 4000
    assert auto_centers(10**8, squared=True) == 20_000
    # with a budget, the exact model wherever its float32 kernel matrix fits it
    assert auto_centers(40_000, memory_budget=4 * 40_000**2, squared=True) is None
    assert auto_centers(40_000, memory_budget=4 * 40_000**2 - 1, squared=True) == 4000


def test_n_centers_auto_is_exact_up_to_the_threshold_and_centers_above(monkeypatch):
    from kernelgd import _base

    params = dict(alpha=ALPHA, tol=1e-10, max_iter=500, random_state=0)
    exact = KernelGDRegressor(**params).fit(X, y)  # the default is "auto"
    assert exact.n_centers_ == len(X) and exact.X_fit_.shape == X.shape
    assert_allclose(exact.predict(Z), KernelGDRegressor(n_centers=None, **params).fit(X, y).predict(Z))
    monkeypatch.setattr(_base, "AUTO_EXACT_MAX_ROWS", 50)
    monkeypatch.setattr(_base, "AUTO_EXACT_BUDGET_SHARE", 0.0)
    monkeypatch.setattr(_base, "AUTO_MIN_CENTERS", 20)
    monkeypatch.setattr(_base, "AUTO_MIN_CENTERS_SQUARED", 20)
    auto = KernelGDRegressor(**params).fit(X, y)
    assert auto.n_centers_ == 20 and auto.X_fit_.shape == (20, X.shape[1])
    explicit = KernelGDRegressor(n_centers=20, **params).fit(X, y)
    assert_allclose(auto.predict(Z), explicit.predict(Z))
    labels = (y > 0).astype(int)
    assert KernelGDClassifier(loss="logistic", random_state=0).fit(X, labels).n_centers_ == 20
    # where centers cannot be used, "auto" is the exact model, never an error
    for model in [KernelGDRegressor(solver="gd", max_iter=5, tol=0), KernelGDRegressor(solver="eigenpro", max_iter=2),
                  KernelGDRegressor(kernel="sigmoid", max_iter=5, tol=0)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert model.fit(X, y).n_centers_ == len(X)
    assert KernelGDRegressor(kernel="precomputed", alpha=ALPHA).fit(kernel_matrix(X), y).n_centers_ == len(X)


def test_n_centers_auto_keeps_the_exact_model_where_its_kernel_matrix_fits_the_budget(monkeypatch):
    from kernelgd import _base

    monkeypatch.setattr(_base, "AUTO_EXACT_MAX_ROWS", 50)
    monkeypatch.setattr(_base, "AUTO_MIN_CENTERS", 15)
    monkeypatch.setattr(_base, "AUTO_MIN_CENTERS_SQUARED", 15)
    m = _base.auto_centers(len(X))  # 16: their m x m matrices fit the budgets below
    params = dict(alpha=ALPHA, tol=1e-10, max_iter=500, random_state=0)
    fits = KernelGDRegressor(options={"memory_budget": 4 * len(X) ** 2}, **params).fit(X, y)
    assert fits.n_centers_ == len(X)
    assert KernelGDRegressor(options={"memory_budget": 4 * len(X) ** 2 - 1}, **params).fit(X, y).n_centers_ == m
    # the logistic loss fits centers above the threshold whatever the budget (its Newton steps
    # take many products with K), the squared-loss classifier keeps the exact model
    labels = (y > 0).astype(int)
    budget = {"memory_budget": 4 * len(X) ** 2}
    assert KernelGDClassifier(loss="logistic", options=budget, random_state=0).fit(X, labels).n_centers_ == m
    assert KernelGDClassifier(options=budget, random_state=0).fit(X, labels).n_centers_ == len(X)


def test_n_centers_auto_counts_the_rows_that_carry_weight(monkeypatch):
    # Regression: 20,001 rows of which 500 had weight drew those 500 as centers; with the
    # default alpha=0 the model interpolated their noise (held-out R^2 -5.2, against 0.90 for
    # the exact model on the same weights). Below the threshold in weighted rows, "auto" is exact.
    from kernelgd import _base

    monkeypatch.setattr(_base, "AUTO_EXACT_MAX_ROWS", 100)
    monkeypatch.setattr(_base, "AUTO_EXACT_BUDGET_SHARE", 0.0)
    monkeypatch.setattr(_base, "AUTO_MIN_CENTERS", 60)
    monkeypatch.setattr(_base, "AUTO_MIN_CENTERS_SQUARED", 60)
    r = np.random.RandomState(0)
    Xw = r.randn(400, 2)
    yw = np.sin(Xw[:, 0]) + 0.3 * r.randn(400)
    w = np.zeros(400)
    w[:50] = 1.0
    def quiet_fit(model, *args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.fit(*args, **kwargs)

    model = quiet_fit(KernelGDRegressor(random_state=0), Xw, yw, sample_weight=w)
    assert model.n_centers_ == 400  # the exact model (zero-weight rows get zero coefficients)
    reference = quiet_fit(KernelGDRegressor(n_centers=None, random_state=0), Xw, yw, sample_weight=w)
    assert_allclose(model.predict(Xw[50:]), reference.predict(Xw[50:]))
    w[:200] = 1.0  # 200 weighted rows: centers
    assert quiet_fit(KernelGDRegressor(random_state=0), Xw, yw, sample_weight=w).n_centers_ == 60


@pytest.mark.parametrize("solver", ["cg", "eigenpro"])
def test_float32_close_to_float64(solver):
    params = dict(sigma=SIGMA, alpha=ALPHA, random_state=0, **CONVERGED[solver])
    if solver == "cg":
        params["tol"] = 1e-6
    f64 = KernelGDRegressor(options={"dtype": "float64"}, **params).fit(X, y)
    f32 = KernelGDRegressor(options={"dtype": "float32"}, **params).fit(X, y)
    assert_allclose(f32.predict(Z), f64.predict(Z), rtol=1e-3, atol=1e-3)


def test_bad_options():
    with pytest.raises(ValueError, match="Unknown options"):
        KernelGDRegressor(options={"memory": 1}).fit(X, y)
    with pytest.raises(ValueError, match="memory_budget"):
        KernelGDRegressor(options={"memory_budget": -1}).fit(X, y)
    with pytest.raises(ValueError, match="dtype"):
        KernelGDRegressor(options={"dtype": "float16"}).fit(X, y)


def test_early_stopping_keeps_the_best_iterate():
    Xn = np.random.RandomState(3).uniform(-2, 2, size=(300, 2))
    yn = np.sin(2 * Xn[:, 0]) + 0.5 * np.random.RandomState(4).normal(size=300)
    model = KernelGDRegressor(
        sigma=0.3, solver="gd", step_size="auto", early_stopping=True, n_iter_no_change=3,
        validation_fraction=0.2, max_iter=5000, tol=0, random_state=0,
    ).fit(Xn, yn)
    curve = np.asarray(model.validation_loss_curve_)
    assert len(curve) == model.n_iter_
    best = int(np.argmin(curve))
    assert model.n_iter_ == best + 1 + 3  # stopped by patience
    assert len(model.loss_curve_) == best + 1  # the curve ends at the returned model
    assert model.X_fit_.shape[0] == 240  # the training part only
    # the stored model is the best iterate, not the last one: refitting
    # exactly best + 1 updates without early stopping on the same 240 rows
    # gives the same coefficients
    same = KernelGDRegressor(
        sigma=0.3, solver="gd", max_iter=best + 1, tol=0, random_state=0,
    ).fit(model.X_fit_, yn[[np.flatnonzero((Xn == r).all(1))[0] for r in model.X_fit_]])
    assert_allclose(same.dual_coef_, model.dual_coef_, rtol=1e-10)


@pytest.mark.parametrize("solver", ["cg", "eigenpro"])
def test_early_stopping_runs_with_each_solver(solver):
    model = KernelGDRegressor(
        solver=solver, alpha=0.0 if solver == "eigenpro" else 1e-6, early_stopping=True,
        random_state=0,
    ).fit(X, y)
    assert model.validation_loss_curve_ and len(model.validation_loss_curve_) == model.n_iter_


def test_early_stopping_precomputed_and_classifier():
    K = kernel_matrix(X, sigma=SIGMA)
    model = KernelGDRegressor(kernel="precomputed", early_stopping=True, random_state=0).fit(K, y)
    assert model.dual_coef_.shape == (60,)
    assert np.sum(model.dual_coef_ == 0) == 6  # the validation rows
    clf = KernelGDClassifier(early_stopping=True, random_state=0).fit(X, y > 0)
    assert clf.score(X, y > 0) > 0.8


def test_early_stopping_needs_data():
    with pytest.raises(ValueError, match="validation"):
        KernelGDRegressor(early_stopping=True, validation_fraction=0.5).fit(X[:3], y[:3])


def test_least_squares_regime_on_few_rows_reaches_the_dense_optimum():
    # Regression: below cg's least-squares ridge, CG on the normal equations stopped silently after
    # 385 iterations at 77 times the optimum (700 rows, laplacian kernel, alpha=3e-10); on UCI energy
    # KernelGDRegressorCV's refit at such a ridge warned and had 16 times the test RMSE. Up to 2,000 rows
    # that regime is now one dense eigendecomposition.
    from kernelgd.kernels import laplacian

    rng = np.random.RandomState(0)
    n, alpha = 700, 3e-10
    X = rng.randint(0, 4, size=(n, 8)).astype(float) + 0.01 * rng.randn(n, 8)
    X = (X - X.mean(0)) / X.std(0)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * np.abs(X[:, 3]) + 0.01 * rng.randn(n)
    K = laplacian(X, X, 16.0)
    bordered = np.block([[K + n * alpha * np.eye(n), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    dense = np.linalg.lstsq(bordered, np.r_[y, 0.0], rcond=None)[0]

    def objective(coef, b):
        return np.mean((K @ coef + b - y) ** 2) + alpha * coef @ K @ coef

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDRegressor(kernel="laplacian", sigma=16.0, alpha=alpha).fit(X, y)
    assert model.solver_ == "cg"
    assert objective(model.dual_coef_, model.intercept_) <= objective(dense[:n], dense[n]) * (1 + 1e-6)


def test_least_squares_regime_keeps_cg_where_it_beats_the_eigendecomposition():
    # Regression (found by the fit property): 20 points of one feature, rbf, alpha=1e-16. The
    # eigendecomposition's cuts stopped at 3.3 times the optimum's objective, silently (a cut below
    # 1e-8 of the largest eigenvalue puts rounding into K a); CG reaches those directions.
    rng = np.random.RandomState(6)
    X = rng.randn(20, 1)
    y = np.sin(X[:, 0] / np.std(X[:, 0])) + 0.1 * rng.randn(20)
    model = KernelGDRegressor(kernel="rbf", alpha=1e-16, random_state=0).fit(X, y)
    K = kernel_matrix(X, kernel="rbf", sigma=model.sigma_)
    n = len(y)
    bordered = np.block([[K + n * 1e-16 * np.eye(n), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    dense = np.linalg.lstsq(bordered, np.r_[y, 0.0], rcond=None)[0]
    optimum, base = np.mean((K @ dense[:n] + dense[n] - y) ** 2), np.var(y)
    assert model.solver_ == "cg"
    # as the fit property asks of a converged fit: within 1% of the optimum's gain over the intercept-only
    # model (the cuts stopped at 1.2%; CG's stop moves with the BLAS, from 0.0% to 0.4%)
    assert model.loss_curve_[-1] - optimum <= 1e-2 * (base - optimum)
