"""Pipelines, grid search, clone and pickle."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.datasets import make_friedman1, make_moons
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix

X, y = make_friedman1(120, noise=0.1, random_state=0)


def test_pipeline_with_scaler():
    pipe = make_pipeline(StandardScaler(), KernelGDRegressor(alpha=1e-3, max_iter=300))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.mean() > 0.6


def test_grid_search_over_sigma_degree_step():
    grid = GridSearchCV(
        KernelGDRegressor(max_iter=200, alpha=1e-3),
        {"sigma": [0.5, 2.0, 8.0], "step_size": ["auto", 0.05]},
        cv=3,
    ).fit(X, y)
    assert grid.best_params_["sigma"] in (0.5, 2.0, 8.0)
    poly = GridSearchCV(
        KernelGDClassifier(kernel="poly", max_iter=200),
        {"degree": [1, 2, 3]},
        cv=3,
    ).fit(*make_moons(90, noise=0.1, random_state=0))
    assert poly.best_params_["degree"] in (1, 2, 3)
    assert poly.best_score_ > 0.8


def test_clone_copies_parameters_only():
    model = KernelGDRegressor(kernel="sigmoid", alpha=1.0, kernel_params={"a": 0.1}).fit(X, y)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not hasattr(copy, "dual_coef_")


@pytest.mark.parametrize("Est", [KernelGDRegressor, KernelGDClassifier])
def test_pickle_round_trip(Est):
    target = y if Est is KernelGDRegressor else (y > y.mean())
    model = Est(max_iter=100).fit(X, target)
    again = pickle.loads(pickle.dumps(model))
    assert_allclose(again.predict(X[:10]) * 1.0, model.predict(X[:10]) * 1.0)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "exponential"])
def test_sigma_scale_is_unchanged_by_a_shift_of_a_feature(kernel):
    # Regression: sigma="scale" read the variance of every entry of X together, so that a feature's offset (a
    # constant column of 3 beside features of spread 1e-6, a year beside a fraction) widened the kernel far past
    # the rows' distances: a shift-invariant kernel's width now ignores it, as the kernel does.
    rng = np.random.RandomState(0)
    Xs = rng.uniform(-3, 3, size=(300, 2)) * [1.0, 1e-6]
    ys = np.sin(2 * Xs[:, 0]) + np.cos(Xs[:, 1] * 1e6)
    plain = KernelGDRegressor(kernel=kernel).fit(Xs, ys)
    shifted = KernelGDRegressor(kernel=kernel).fit(Xs + [100.0, 3.0], ys)
    assert shifted.sigma_ == pytest.approx(plain.sigma_, rel=1e-9)
    assert_allclose(shifted.predict(Xs + [100.0, 3.0]), plain.predict(Xs), rtol=1e-6, atol=1e-6)


def test_precomputed_equals_named_kernel():
    params = dict(solver="gd", alpha=1e-3, max_iter=100, tol=0)
    named = KernelGDRegressor(kernel="rbf", sigma=3.0, **params).fit(X[:80], y[:80])
    pre = KernelGDRegressor(kernel="precomputed", **params)
    pre.fit(kernel_matrix(X[:80], sigma=3.0), y[:80])
    assert_allclose(pre.predict(kernel_matrix(X[80:], X[:80], sigma=3.0)), named.predict(X[80:]))


def test_sigma_scale_matches_svc_gamma_scale():
    # sigma^2 is the sum of the features' variances, each about its own mean: on centred features d Var(X), SVC's
    # gamma="scale", so that rbf at sigma="scale" is KernelRidge's rbf with gamma = 1/(d Var(X))
    model = KernelGDRegressor(kernel="rbf", max_iter=1).fit(X, y)  # kernel="auto" may widen it
    assert_allclose(model.sigma_**2, np.sum(X.var(axis=0)), rtol=1e-12)
    Xc = X - X.mean(axis=0)
    centred = KernelGDRegressor(kernel="rbf", max_iter=1).fit(Xc, y)
    assert_allclose(centred.sigma_, model.sigma_, rtol=1e-12)
    ref = KernelRidge(kernel="rbf", gamma=1 / (X.shape[1] * Xc.var()), alpha=1.0)
    assert_allclose(kernel_matrix(Xc, sigma=centred.sigma_), ref._get_kernel(Xc), rtol=1e-12)
    # the polynomial kernel's x'z / sigma^2 at sigma="scale": X's mean square about 0, which on
    # centred X is SVC(kernel="poly")'s gamma="scale"
    poly = KernelGDRegressor(kernel="poly", max_iter=1).fit(X + 3.0, y)
    assert_allclose(poly.sigma_**2, X.shape[1] * np.mean((X + 3.0) ** 2))
    poly = KernelGDRegressor(kernel="poly", max_iter=1).fit(Xc, y)
    ref = KernelRidge(kernel="poly", gamma=1 / (X.shape[1] * Xc.var()), degree=3, coef0=1.0)
    assert_allclose(kernel_matrix(Xc, kernel="poly", sigma=poly.sigma_), ref._get_kernel(Xc), rtol=1e-12)
