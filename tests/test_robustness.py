"""A fit is right or it is an error: regression tests for the defects of issue 7.

Each test is a reproducer that once returned a silently wrong model (worse
than the intercept-only one, NaN, or a loss curve that does not describe the
model). References: the intercept-only model's objective, dense solves of
the same objective, and scikit-learn's KernelRidge.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge

from kernelgd import KernelGDClassifier, KernelGDRegressor, KernelGDRegressorCV, kernel_matrix
from kernelgd._solvers._common import NonPSDKernelWarning

rng = np.random.RandomState(0)
X = rng.randn(80, 3)
y = np.sin(X[:, 0]) + 0.1 * rng.randn(80)


def objective(model, X, y, alpha, K=None, Kmm=None):
    """The training objective of a fitted regressor, by brute force."""
    a = model.dual_coef_
    f = model.predict(X)
    if K is not None:
        penalty = a @ K @ a
    else:
        penalty = a @ Kmm @ a
    return np.mean((f - y) ** 2) + alpha * penalty


def quiet_fit(model, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y, **kw)


# ------------------------------------------------- the centers path of "cg"


def test_centers_more_iterations_never_make_the_model_worse():
    # Regression: b = w'(y - F_y) / (1 - w'F_1) swung to -353 as the
    # denominator fell to 1e-6; the loss curve reached -501.
    r = np.random.RandomState(0)
    Xc = r.rand(4000, 3)
    yc = (np.sin(6 * Xc[:, 0]) + np.cos(6 * Xc[:, 1]) + Xc[:, 2] > 0.5).astype(int)
    scores, finals = [], []
    for it in (10, 30, 100, 300):
        m = quiet_fit(
            KernelGDClassifier(sigma=1.0, n_centers=500, alpha=1e-6, max_iter=it, tol=0, random_state=0),
            Xc[:2000], yc[:2000],
        )
        assert min(m.loss_curve_) >= 0
        finals.append(m.loss_curve_[-1])
        scores.append(m.score(Xc[2000:], yc[2000:]))
    # never worse than a shorter run, up to the rounding slack solvers.finish allows (1e-12 of
    # the objective's scale; the products' summation order moves it by about that much)
    assert np.all(np.diff(finals) <= 1e-10 * finals[0])
    assert min(scores) > 0.95


def test_a_float64_rounding_stop_does_not_advise_float64(monkeypatch):
    # Centers always compute in float64: their rounding stop advised options={'dtype': 'float64'}.
    from kernelgd._solvers import _dense_newton

    monkeypatch.setattr(_dense_newton, "MAX_FLOPS", 0)  # CG's run (500 centers would be solved densely)
    r = np.random.RandomState(0)
    Xc = r.rand(2000, 3)
    yc = (np.sin(6 * Xc[:, 0]) + np.cos(6 * Xc[:, 1]) + Xc[:, 2] > 0.5).astype(int)
    with pytest.warns(ConvergenceWarning, match="lack of progress") as record:
        KernelGDClassifier(sigma=1.0, n_centers=500, alpha=1e-6, max_iter=300, tol=0, random_state=0).fit(Xc, yc)
    message = " ".join(str(w.message) for w in record if "lack of progress" in str(w.message))
    assert "raise tol" in message and "float64" not in message


def test_centers_at_the_floor_ridge_converge_while_the_residual_still_falls():
    # Regression: the squared-loss classifier's former default alpha=0 on centers (n_centers="auto" above
    # 20,000 rows) stopped "for lack of progress (rounding)" with a warning: the objective was flat
    # to float64's resolution for 20 iterations while CG was still reducing the residual its
    # stopping test reads. A new smallest residual now counts as progress.
    r = np.random.RandomState(0)
    Xc = r.randn(8000, 3)
    yc = (Xc[:, 0] + Xc[:, 1] ** 2 > 1).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(alpha=0.0, n_centers=500, random_state=0).fit(Xc, yc)
    tight = quiet_fit(KernelGDClassifier(alpha=0.0, n_centers=500, tol=1e-5, max_iter=3000, random_state=0), Xc, yc)
    # at most tol (1e-3) of the decrease from the intercept-only model (the codes' variance) to the tight
    # fit is left: the tight fit's own rounding floor moves with the BLAS kernel (1e-4 of it on SkylakeX)
    codes = np.where(yc == 1, 1.0, -1.0)
    assert model.loss_curve_[-1] - tight.loss_curve_[-1] <= 1e-3 * (codes.var() - tight.loss_curve_[-1])


def test_centers_objective_matches_a_dense_solve():
    # The centred elimination gives the optimum of
    # mean((K_nm beta + b - y)^2) + alpha beta' K_mm beta.
    alpha = 1e-3
    m = KernelGDRegressor(sigma=1.5, n_centers=30, alpha=alpha, tol=1e-12, max_iter=500, random_state=0)
    m.fit(X, y + 3.0)
    C = m.X_fit_
    Knm, Kmm = kernel_matrix(X, C, sigma=1.5), kernel_matrix(C, sigma=1.5)
    n = len(y)
    J = np.column_stack([Knm, np.ones(n)])
    H = J.T @ J / n
    H[:-1, :-1] += alpha * Kmm
    sol = np.linalg.solve(H, J.T @ (y + 3.0) / n)
    assert_allclose(m.dual_coef_, sol[:-1], rtol=1e-5, atol=1e-6)
    assert_allclose(m.intercept_, sol[-1], rtol=1e-7)
    assert_allclose(m.loss_curve_[-1], objective(m, X, y + 3.0, alpha, Kmm=Kmm), rtol=1e-9)


@pytest.mark.parametrize(
    "params, data",
    [
        (dict(kernel="linear", n_centers=20), "randn"),
        (dict(n_centers=400), "rand2"),
    ],
)
def test_centers_without_ridge_are_sound(params, data):
    # Regression: MSE 8e7 and R^2 = -2840 with alpha=0 and centers.
    r = np.random.RandomState(0)
    if data == "rand2":
        Xd = r.rand(1000, 2)
        yd = np.sin(4 * Xd[:, 0]) + 0.1 * r.randn(1000)
    else:
        Xd, yd = X, y
    m = quiet_fit(KernelGDRegressor(random_state=0, **params), Xd, yd)
    assert m.score(Xd, yd) > 0.5


# ----------------------------------------------- ill-conditioned problems


@pytest.mark.parametrize(
    "params, scale",
    [
        (dict(kernel="poly", degree=20, alpha=1e-2), 1.0),
        (dict(kernel="linear", alpha=1e-2), 1e10),
        (dict(solver="cg"), 0.0),  # constant X
    ],
)
def test_ill_conditioned_fits_are_never_worse_than_the_mean(params, scale):
    Xs = X * scale if scale else np.ones_like(X)
    m = quiet_fit(KernelGDRegressor(**params), Xs, y)
    pred = m.predict(Xs)
    assert np.all(np.isfinite(pred))
    assert np.mean((pred - y) ** 2) <= np.var(y) * (1 + 1e-9) + 1e-12


def test_ill_conditioned_linear_fit_is_ridges():
    # Was the intercept-only model with a warning: a ridge this far below
    # k(x, x) ~ 1e20 takes cg's least-squares mode, which finds Ridge's fit.
    from sklearn.linear_model import Ridge

    Xb = X * 1e10
    m = KernelGDRegressor(kernel="linear", alpha=1e-2).fit(Xb, y)
    ref = Ridge(alpha=len(y) * 1e-2).fit(Xb, y).predict(Xb)
    assert_allclose(m.predict(Xb), ref, atol=1e-6 * np.std(y))


# ----------------------------------------------- eigenpro and indefinite kernels


def test_eigenpro_on_a_non_psd_kernel_returns_its_best_iterate():
    # Regression: loss_curve_ showed 0.44 while the model's MSE was 1551.
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        m = KernelGDRegressor(kernel="sigmoid", solver="eigenpro").fit(X, y)
    pred = m.predict(X)
    assert np.mean((pred - y) ** 2) <= np.var(y) + 1e-12
    assert_allclose(m.loss_curve_[-1], np.mean((pred - y) ** 2), rtol=1e-9)


def test_negative_definite_callable_is_not_trusted():
    # Regression: predicted -3e306.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = KernelGDRegressor(kernel=lambda A, B: -A @ B.T - 1.0, solver="eigenpro").fit(X, y)
    pred = m.predict(X)
    assert np.all(np.isfinite(pred))
    assert np.mean((pred - y) ** 2) <= np.var(y) + 1e-12
    assert any(issubclass(w.category, (NonPSDKernelWarning, ConvergenceWarning)) for w in caught)


@pytest.mark.parametrize("solver", ["gd", "cg", "eigenpro"])
def test_loss_curve_ends_at_the_returned_model(solver):
    alpha = 1e-3
    m = KernelGDRegressor(sigma=1.5, alpha=alpha, solver=solver, max_iter=7, tol=0, random_state=0).fit(X, y)
    K = kernel_matrix(X, sigma=1.5)
    assert_allclose(m.loss_curve_[-1], objective(m, X, y, alpha, K=K), rtol=1e-9)


def test_eigenpro_near_identity_kernel():
    # Regression: LinAlgError "Internal Error." from eigh's MRRR driver.
    r = np.random.RandomState(0)
    Xi, yi = r.randn(150, 10), r.randn(150)
    m = quiet_fit(KernelGDRegressor(sigma=0.3, alpha=0.0), Xi, yi)
    assert m.solver_ == "eigenpro" and np.all(np.isfinite(m.predict(Xi)))


def test_eigenpro_when_every_subset_driver_fails():
    # Regression: on these near-identity matrices evr, evx and the full evr
    # decomposition all raised "Internal Error."; evd succeeds.
    from sklearn.datasets import make_circles

    from kernelgd._array_api import top_eigenpairs

    X, y = make_circles(300, noise=0.05, factor=0.5, random_state=0)
    X, y = X[:132], np.where(np.random.RandomState(0).uniform(size=132) < 0.25, 1 - y[:132], y[:132])
    M = kernel_matrix(X, kernel="rbf", sigma=0.01) / len(X)
    lam, U = top_eigenpairs(M, 100)
    assert_allclose(lam, np.linalg.eigvalsh(M)[::-1][:101], atol=1e-12)
    assert_allclose(np.abs(np.sum(U * (M @ U), axis=0)), lam, atol=1e-12)
    m = quiet_fit(KernelGDClassifier(sigma=0.01, alpha=0.0, max_iter=50), X, y)
    assert m.solver_ == "eigenpro" and m.score(X, y) == 1.0


# ----------------------------------------------- scale, precision, degenerate data


@pytest.mark.parametrize("factor", [1e160, 1e-170, 1e300])
@pytest.mark.parametrize("solver", ["gd", "cg", "eigenpro"])
def test_targets_of_any_scale(factor, solver):
    # Regression: cg predicted zeros, the others a constant with a "not PSD" warning.
    alpha = 1e-3
    ref = KernelRidge(alpha=alpha * 80, kernel="rbf", gamma=1 / 1.5**2).fit(X, y)
    m = KernelGDRegressor(sigma=1.5, alpha=alpha, solver=solver, fit_intercept=False, random_state=0,
                          max_iter=20_000, tol=1e-10)
    m = quiet_fit(m, X, y * factor)
    assert_allclose(m.predict(X) / factor, ref.predict(X), rtol=1e-4, atol=1e-6)
    assert all(np.isfinite(m.loss_curve_))


@pytest.mark.parametrize("params", [dict(), dict(n_centers=20), dict(solver="gd", alpha=1e-2),
                                    dict(solver="eigenpro", alpha=1e-2)], ids=["cg", "centers", "gd", "eigenpro"])
@pytest.mark.parametrize("value", [2.5, -1e6, 1e-8])
def test_a_constant_target_fits_its_intercept_quietly(params, value):
    # Regression: centred, a constant target is rounding, which cg chased for 20 iterations and
    # gd / eigenpro until no progress, each with a ConvergenceWarning
    target = np.full(len(y), value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDRegressor(random_state=0, **params).fit(X, target)
    assert_allclose(model.predict(X), value, rtol=1e-12)
    assert model.n_iter_ <= 1


def test_cv_regressor_says_when_squared_errors_overflow():
    # Regression: y * 1e300 raised "Input contains NaN" from inside the per-feature scales' likelihood
    with pytest.raises(ValueError, match="overflows them in float64"):
        KernelGDRegressorCV().fit(X, y * 1e300)
    big = KernelGDRegressorCV(ard=False, random_state=0).fit(X, y * 1e150)  # squares of 1e300 still fit
    plain = KernelGDRegressorCV(ard=False, random_state=0).fit(X, y)
    assert (big.sigma_, big.alpha_) == (plain.sigma_, plain.alpha_)
    assert_allclose(big.predict(X) / 1e150, plain.predict(X), rtol=1e-6, atol=1e-9)


def test_float32_kernel_far_from_zero():
    # Regression: a time stamp feature (1.7e9 + seconds) gave test MSE 3.78
    # in float32 against 0.01 in float64.
    r = np.random.RandomState(0)
    t = 1.7e9 + r.rand(5000, 1) * 3e7
    yt = np.sin(t[:, 0] / 3e6)
    m32 = KernelGDRegressor(alpha=1e-6, options={"dtype": "float32"}).fit(t[:4500], yt[:4500])
    assert m32._compute_dtype == np.float32
    assert np.mean((m32.predict(t[4500:]) - yt[4500:]) ** 2) < 1e-4


def test_auto_dtype_redoes_a_float32_rounding_stop_in_float64(monkeypatch):
    # Regression (naval, 10,741 rows, alpha=1e-10): float32 cg lost conjugacy
    # after 5 iterations and returned a model no better than the mean (test
    # RMSE 0.0149 against 1.8e-5 in float64).
    import kernelgd._operator

    import kernelgd._solvers.cg

    monkeypatch.setattr(kernelgd._operator, "AUTO_FLOAT64_MAX_ENTRIES", 100)  # auto -> float32 here
    monkeypatch.setattr(kernelgd._solvers.cg, "DENSE_LEAST_SQUARES_MAX", 0)  # CG's way, as above 2,000 rows
    r = np.random.RandomState(0)
    X = r.uniform(size=(800, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    params = dict(sigma=1.0, alpha=1e-10, solver="cg", random_state=0)
    with pytest.warns(ConvergenceWarning, match="lost conjugacy|lack of progress"):
        m32 = KernelGDRegressor(**params, options={"dtype": "float32"}).fit(X, y)
    assert np.sqrt(np.mean((m32.predict(X) - y) ** 2)) > 1e-2  # the failure is real
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auto = KernelGDRegressor(**params).fit(X, y)
    ref = KernelGDRegressor(**params, options={"dtype": "float64"}).fit(X, y)
    assert auto._compute_dtype == np.float64
    # both stop at the solver's tol, from different starts: close, not equal
    assert np.sqrt(np.mean((auto.predict(X) - y) ** 2)) < 1e-3
    assert_allclose(auto.predict(X), ref.predict(X), atol=2e-3)
    # the float64 run starts where float32 stopped: the curve goes on down
    assert auto.loss_curve_[-1] <= min(auto.loss_curve_) * (1 + 1e-9)


def test_float32_rbf_block_is_accurate_far_from_zero():
    from sklearn.metrics.pairwise import rbf_kernel

    r = np.random.RandomState(1)
    A = (1.7e9 + r.rand(50, 2) * 3e7).astype(np.float32)
    B = (1.7e9 + r.rand(40, 2) * 3e7).astype(np.float32)
    K = kernel_matrix(A, B, sigma=1e7)
    ref = rbf_kernel(A.astype(np.float64), B.astype(np.float64), gamma=1e-14)
    assert_allclose(K, ref, atol=1e-6)


@pytest.mark.parametrize("solver", ["auto", "gd", "cg", "eigenpro"])
@pytest.mark.parametrize("n", [1, 80])
def test_zero_kernel_gives_the_intercept_only_model(solver, n):
    # Regression: NaN predictions, ZeroDivisionError (n=1), a DSYRK error.
    Z = np.zeros((n, 3))
    m = KernelGDRegressor(kernel="linear", solver=solver).fit(Z, y[:n])
    assert_allclose(m.predict(X[:5]), np.full(5, y[:n].mean()))


def test_non_symmetric_precomputed_kernel_is_symmetrised_with_a_warning():
    # Regression: predictions of 35 or 6e17 for targets in +-1.2.
    K = rng.randn(80, 80)
    with pytest.warns(UserWarning, match="symmetric"):
        m = KernelGDRegressor(kernel="precomputed", alpha=1e-2).fit(K, y)
    pred = m.predict(K)
    assert np.all(np.isfinite(pred))


@pytest.mark.parametrize("sigma", [1e-160, 1e-300, 1e-320])
def test_tiny_sigma_is_a_clear_error(sigma):
    # Regression: NaN predictions, ZeroDivisionError.
    with pytest.raises(ValueError, match="sigma"):
        KernelGDRegressor(sigma=sigma).fit(X, y)
    with pytest.raises(ValueError, match="sigma"):
        kernel_matrix(X, sigma=sigma)


def test_huge_sigma_and_huge_features():
    # Regression: OverflowError for sigma=1e160; "scale" on X * 1e300.
    m = KernelGDRegressor(sigma=1e160).fit(X, y)
    assert np.all(np.isfinite(m.predict(X)))
    m = quiet_fit(KernelGDRegressor(alpha=1e-3), X * 1e300, y)
    assert np.isfinite(m.sigma_)
    assert m.score(X * 1e300, y) > 0.5


@pytest.mark.parametrize("factor", [1e160, 1e-160])
def test_polynomial_kernel_scales_its_features_not_their_products(factor):
    # Regression: sigma="scale" of features of 1e160 raised OverflowError from sigma**2 (and x'z overflowed
    # where x'z / sigma**2 is 1)
    plain = KernelGDRegressor(kernel="polynomial").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled = KernelGDRegressor(kernel="polynomial").fit(X * factor, y)
        assert_allclose(scaled.predict(X * factor), plain.predict(X), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kernel", ["linear", "sigmoid", "all_subsets"])
def test_kernel_overflow_is_a_clear_error_without_numpy_warnings(kernel):
    # Regression: numpy's "overflow encountered in matmul" leaked before the clear error
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="kernel"):
            KernelGDRegressor(kernel=kernel).fit(X * 1e160, y)


def test_cv_regressor_reads_huge_weights_as_relative():
    # Regression: the leave-one-out scores' weighted sum of squared errors overflowed with weights of 1e100
    # (numpy's warning leaked; the scores were -inf)
    plain = KernelGDRegressorCV(random_state=0).fit(X, y * 1e150)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        heavy = KernelGDRegressorCV(random_state=0).fit(X, y * 1e150, sample_weight=np.full(len(y), 1e100))
    assert (heavy.alpha_, heavy.kernel_) == (plain.alpha_, plain.kernel_)
    assert_allclose(heavy.predict(X), plain.predict(X), rtol=1e-6)


def test_cv_regressor_ranks_overflowing_leave_one_out_errors_last_quietly():
    # Regression: on 30 rows of targets of 1e150 a near-interpolating ridge's leave-one-out errors passed
    # float64's range when squared: numpy's "overflow encountered in square" leaked (the score, -inf, ranks last)
    rng = np.random.RandomState(3)
    X_ = rng.normal(size=(30, 6))
    y_ = (np.sin(X_[:, -1]) + 0.3 * rng.normal(size=30)) * 1e150
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = KernelGDRegressorCV(random_state=0).fit(X_, y_)
    assert np.all(np.isfinite(model.predict(X_)))


def test_features_beyond_float32_choose_a_clear_error():
    Xb = X * 1e39
    with pytest.raises(ValueError, match="float32"):
        KernelGDRegressor(kernel="linear", options={"dtype": "float32"}).fit(Xb, y)


# ----------------------------------------------------------------- stopping


@pytest.mark.parametrize("solver", ["gd", "eigenpro", "cg"])
def test_max_iter_warns(solver):
    # more rows than cg's 500 landmarks: its preconditioner is not exact
    Xl = np.random.RandomState(1).randn(700, 8)
    with pytest.warns(ConvergenceWarning):
        KernelGDRegressor(sigma=1.5, alpha=1e-6, solver=solver, max_iter=2, tol=1e-12).fit(Xl, np.sin(Xl[:, 0]))


@pytest.mark.parametrize("solver", ["gd", "cg", "eigenpro"])
def test_warm_start_from_a_converged_model(solver):
    params = dict(sigma=1.5, alpha=1e-2, solver=solver, tol=1e-5, random_state=0, max_iter=5000)
    m = KernelGDRegressor(warm_start=True, **params).fit(X, y)
    first = m.n_iter_
    m.fit(X, y)
    assert m.n_iter_ <= max(1, first // 5)


def test_sample_weight_sum_overflow_is_fine():
    # Regression: IndexError / ZeroDivisionError.
    sw = np.full(80, 1e308)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # nor numpy's overflow warning (the weights' sum)
        a = KernelGDRegressor(kernel="rbf", alpha=1e-3).fit(X, y, sample_weight=sw)
    b = KernelGDRegressor(kernel="rbf", alpha=1e-3).fit(X, y)
    assert_allclose(a.predict(X), b.predict(X), rtol=1e-6)


def test_fitted_model_pickles():
    m = KernelGDRegressor(alpha=1e-3).fit(X, y)
    assert_allclose(pickle.loads(pickle.dumps(m)).predict(X), m.predict(X))


# --------------------------------------------------------------- threads (build 6)


def test_fit_and_predict_run_blas_on_one_thread():
    from threadpoolctl import threadpool_info

    seen = []

    def probe(A, B):  # a kernel that records the BLAS threads it runs under
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return A @ B.T

    X, y = np.random.RandomState(0).randn(50, 3), np.arange(50.0)
    model = KernelGDRegressor(kernel=probe, alpha=1e-2, max_iter=5).fit(X, y)
    model.predict(X)
    assert seen and set(seen) == {1}


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_n_threads_option_same_model(n_threads):
    rng = np.random.RandomState(0)
    X, y = rng.randn(300, 4), rng.randn(300)
    opts = {"memory_budget": 1 << 16, "dtype": "float64"}  # streamed: many blocks on the pool
    ref = KernelGDRegressor(alpha=1e-2, options=opts).fit(X, y)
    model = KernelGDRegressor(alpha=1e-2, options={**opts, "n_threads": n_threads}).fit(X, y)
    np.testing.assert_allclose(model.predict(X), ref.predict(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "many"])
def test_n_threads_option_clear_error(bad):
    X, y = np.random.RandomState(0).randn(20, 2), np.arange(20.0)
    with pytest.raises(ValueError, match=r"options\['n_threads'\] must be 'auto'"):
        KernelGDRegressor(options={"n_threads": bad}).fit(X, y)


def test_cg_judges_progress_by_its_own_quadratic_not_the_objective():
    # Regression: with a tiny ridge the objective (a different norm of CG's error) rose and fell for
    # 20 iterations, which the full model's CG took for rounding: it stopped at iteration 26 with a
    # training RMSE of 1.23, where 113 iterations reach 1.4e-3.
    r = np.random.RandomState(0)
    X = r.randn(2000, 6)
    y = np.sin(X).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDRegressor(sigma=1.0, alpha=1e-9, fit_intercept=False, solver="cg",
                                  options={"dtype": "float64"}, random_state=0).fit(X, y)
    assert np.sqrt(np.mean((model.predict(X) - y) ** 2)) < 1e-2


@pytest.mark.parametrize("case", ["flat after", "worse after"])
def test_least_squares_mode_at_the_rounding_floor_in_few_iterations_converges_quietly(case):
    # A few distinct rows, each repeated, at a ridge below cg's least-squares threshold. "flat after":
    # CG meets the optimum in 2 iterations, then loses conjugacy in rounding; its gradient was below
    # tol^2 and its last step flat, yet the stop compared the best objective with the first iterate's
    # (the whole SETTLE_WINDOW) and warned of a stall. "worse after": the first iterate is the optimum
    # (gradient 1e-16), the next ones rounding's; the stall warned, and then that the last iterate
    # was not the best.
    if case == "flat after":
        X3 = np.repeat([[-1.70627019, 1.9507754], [-0.50965218, -0.4380743], [-1.25279536, 0.77749036]], 3, axis=0)
        y3 = np.repeat([-1.61389785, -0.21274028, -0.89546656], 3)
        sigma, alpha, tol = np.array([58773.84744327, 218.86035454]), 1e-7, "auto"
    else:
        X3 = np.repeat(np.random.RandomState(0).randn(20)[14:].reshape(2, 3), 4, axis=0)
        y3, sigma, alpha, tol = X3[:, 0], 0.6146526747197377, 3.1622776601683795e-10, 0.02  # the search's refit
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = KernelGDRegressor(alpha=alpha, sigma=sigma, tol=tol, random_state=seed).fit(X3, y3)
    K = kernel_matrix(X3, sigma=sigma)
    n = len(y3)
    J = np.column_stack([K, np.ones(n)])  # the exact minimiser, by a dense least-squares solve
    H = J.T @ J / n
    H[:-1, :-1] += alpha * K
    sol = np.linalg.lstsq(H, J.T @ y3 / n, rcond=None)[0]
    exact = np.mean((J @ sol - y3) ** 2) + alpha * sol[:-1] @ K @ sol[:-1]
    assert objective(model, X3, y3, alpha, K=K) <= exact * (1 + 1e-9)


def test_default_classifier_far_from_the_origin_converges_quietly():
    # five rows with one feature near 1e4: the default's ridge took least-squares mode, and a third of the
    # random states warned of an iterate "dominated by rounding" although the last steps were flat
    X5 = np.array([[9998.52028, 0.294701978], [10000.6155, 1.13759060], [10001.3764, 0.0697598531],
                   [9999.06317, -0.367633789], [10000.0710, 0.0417643784]])
    y5 = np.array([0, 1, 1, 1, 1])
    for seed in range(12):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = KernelGDClassifier(random_state=seed).fit(X5, y5)
        assert np.all(np.isfinite(model.predict_proba(X5)))


def test_auto_dtype_redoes_a_float32_fit_that_rounding_broke_in_float64():
    # Regression (fuzzing KernelGDClassifierCV's refit: six classes of rounded features, 4,460 distinct rows,
    # alpha=3.2e-9): float32 cg computed a negative objective, and the default fit warned instead of going on
    # in float64 as it does after a float32 rounding stop
    r = np.random.RandomState(0)
    X = np.round(r.normal(size=(5000, 3)) * [0.4, 1.1, 0.9], 1)
    y = np.sin(X[:, 0]) + 0.3 * X[:, 2] + 0.5 * r.normal(size=5000)
    y = np.digitize(y, np.quantile(y, np.linspace(0, 1, 7)[1:-1]))
    params = dict(alpha=3e-9, sigma=10.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="negative objective"):  # the break is real
        KernelGDClassifier(**params, options={"dtype": "float32"}).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auto = KernelGDClassifier(**params).fit(X, y)
    ref = KernelGDClassifier(**params, options={"dtype": "float64"}).fit(X, y)
    assert auto._compute_dtype == np.float64
    assert auto.loss_curve_[-1] <= ref.loss_curve_[-1] * (1 + 1e-3)
    assert np.mean(auto.predict(X) == ref.predict(X)) > 0.99
