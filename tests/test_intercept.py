"""The intercept of the full model when it is eliminated ("cg", "eigenpro").

References: the ridge optimum with an unpenalised intercept solved densely,
and, without ridge, its limit: the interpolant with the generalised least
squares intercept ``b = 1'K^-1 y / 1'K^-1 1``.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kernelgd import KernelGDRegressor, kernel_matrix
from kernelgd._solvers import _preconditioners

rng = np.random.RandomState(3)
X = rng.uniform(-2, 2, size=(50, 2))
y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 4.0  # a clear offset
SIGMA = 0.6  # narrow: K well conditioned, so the interpolant is stable


def ridge_with_intercept(K, y, alpha):
    """min mean((K a + b - y)^2) + alpha a'K a, from its optimality conditions."""
    n = len(y)
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = K + n * alpha * np.eye(n)
    M[:n, n] = M[n, :n] = 1.0  # (K + n alpha) a + b 1 = y and sum(a) = 0
    sol = np.linalg.solve(M, np.append(y, 0.0))
    return sol[:n], sol[n]


@pytest.mark.parametrize("solver", ["cg", "eigenpro"])
def test_without_ridge_the_intercept_is_the_gls_limit(solver):
    K = kernel_matrix(X, kernel="rbf", sigma=SIGMA)
    Ki1, Kiy = np.linalg.solve(K, np.ones(len(y))), np.linalg.solve(K, y)
    b = Ki1 @ y / Ki1.sum()
    model = KernelGDRegressor(
        sigma=SIGMA, alpha=0.0, solver=solver, max_iter=20_000, tol=1e-14 if solver == "cg" else 0,
        random_state=0,
    ).fit(X, y)
    assert_allclose(model.intercept_, b, rtol=1e-6)
    assert_allclose(model.dual_coef_, Kiy - b * Ki1, rtol=1e-5, atol=1e-6 * np.abs(Kiy).max())
    # and it is the limit of ridge: alpha -> 0
    _, b_small = ridge_with_intercept(K, y, 1e-12)
    assert_allclose(b, b_small, rtol=1e-5)


def test_eigenpro_without_ridge_mini_batch_intercept_is_sane():
    # Mini-batch EigenPro fits the constant within the first epoch; an
    # intercept computed from the vanishing residual of that fit was float32
    # rounding noise (|b| of tens on a target of mean 4). The intercept must stay near the
    # data's level, and predictions near those of the same fit on the
    # centred target.
    r = np.random.RandomState(0)
    Xb = r.normal(size=(3000, 4))
    yb = np.sin(Xb[:, 0]) * np.cos(Xb[:, 1]) + 0.3 * Xb[:, 2] + 0.1 * r.normal(size=3000) + 4.0
    Xt = r.normal(size=(500, 4))
    params = dict(sigma=1.0, alpha=0.0, max_iter=10, tol=0, random_state=0, options={"dtype": "float32"})
    model = KernelGDRegressor(**params).fit(Xb, yb)
    assert model.solver_ == "eigenpro"
    centred = KernelGDRegressor(fit_intercept=False, **params).fit(Xb, yb - yb.mean())
    assert abs(model.intercept_ - yb.mean()) < 1.0
    gap = model.predict(Xt) - (centred.predict(Xt) + yb.mean())
    assert np.sqrt(np.mean(gap**2)) < 0.05 * yb.std()


def test_cg_intercept_with_tiny_ridge_at_default_tol(monkeypatch):
    # Few landmarks make cg iterate; at tol=1e-3 the intercept of the
    # unconverged iterate must still be close to the optimum's.
    monkeypatch.setattr(_preconditioners, "N_LANDMARKS", 20)
    r = np.random.RandomState(1)
    Xc = r.normal(size=(600, 3))
    yc = np.sin(Xc[:, 0]) + 0.5 * np.tanh(Xc[:, 1] * Xc[:, 2]) + 3.0
    alpha = 1e-6
    _, b = ridge_with_intercept(kernel_matrix(Xc, kernel="rbf", sigma=2.0), yc, alpha)
    model = KernelGDRegressor(kernel="rbf", sigma=2.0, alpha=alpha, solver="cg", tol=1e-3, random_state=0,
                              options={"dtype": "float64"}).fit(Xc, yc)
    assert model.n_iter_ > 3
    assert abs(model.intercept_ - b) < 1e-2 * abs(b)
