"""The estimators on other array namespaces (array-api-strict, torch on the CPU).

scikit-learn's array API support needs SCIPY_ARRAY_API=1 before scipy is
imported, which would change scipy for the whole suite: these tests run in a
subprocess that sets it (tests/test_array_api_env.py) and are skipped here
otherwise. Every fit is compared with the same fit on numpy arrays, which
runs the numpy code paths (scipy's BLAS and LAPACK): an independent
implementation of the same algorithm.
"""

import os
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

pytestmark = pytest.mark.skipif(
    os.environ.get("SCIPY_ARRAY_API") != "1",
    reason="needs SCIPY_ARRAY_API=1 before scipy is imported (run by test_array_api_env.py)",
)

from sklearn import clone, config_context  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402

from kernelgd import (  # noqa: E402
    KernelGDClassifier,
    KernelGDClassifierCV,
    KernelGDRegressor,
    KernelGDRegressorCV,
)
from kernelgd._array_api import (  # noqa: E402
    CholeskyStack,
    add_at_rows,
    cholesky,
    namespace,
    pivoted_cholesky,
    solve_triangular,
    to_numpy,
    triangular_solver,
)
from kernelgd._operator import KernelOperator  # noqa: E402
from kernelgd.kernels import bind_kernel  # noqa: E402


def _namespaces():
    out = []
    for name in ("array_api_strict", "torch"):
        try:
            out.append(pytest.param(__import__(name), id=name))
        except ImportError:
            out.append(pytest.param(None, id=name, marks=pytest.mark.skip(reason=f"{name} is not installed")))
    return out


NAMESPACES = _namespaces()


def _xp(module):
    """The array API namespace of a module's arrays (torch through array-api-compat)."""
    with config_context(array_api_dispatch=True):
        return namespace(module.asarray(np.zeros(1)))[0]


def _fit_both(estimator, module, X, y, **fit_params):
    """The estimator fitted on numpy arrays and on ``module``'s, under array API dispatch."""
    ref = clone(estimator).fit(X, y, **fit_params)
    with config_context(array_api_dispatch=True):
        params = {k: module.asarray(v) for k, v in fit_params.items()}
        est = clone(estimator).fit(module.asarray(X), module.asarray(y), **params)
    return ref, est


def _assert_in_namespace(array, module):
    assert type(array).__module__.split(".")[0] == module.__name__.split(".")[0], type(array)


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(300, 5, noise=5.0, random_state=0)
    return X / X.std(axis=0), y / y.std()


REGRESSORS = {
    "defaults (eigenpro)": KernelGDRegressor(),
    "ridge (cg)": KernelGDRegressor(alpha=1e-3),
    "no ridge (cg least squares)": KernelGDRegressor(solver="cg", max_iter=40),
    "centers (cg, FALKON)": KernelGDRegressor(alpha=1e-2, n_centers=40),
    "centers, no intercept": KernelGDRegressor(alpha=1e-2, n_centers=40, fit_intercept=False),
    "gd": KernelGDRegressor(solver="gd", max_iter=50, tol=0),
    "newton": KernelGDRegressor(solver="newton", alpha=1e-3),
    "laplacian": KernelGDRegressor(kernel="laplacian", alpha=1e-3),
    "polynomial": KernelGDRegressor(kernel="polynomial", degree=2, alpha=1e-2),
    "per-feature sigma": KernelGDRegressor(sigma=[1.0, 2.0, 3.0, 4.0, 5.0], alpha=1e-3),
    "exponential": KernelGDRegressor(kernel="exponential", alpha=1e-3),
    "early stopping": KernelGDRegressor(alpha=1e-4, early_stopping=True),
    "streamed blocks": KernelGDRegressor(alpha=1e-3, options={"memory_budget": 1 << 18}),
    "streamed eigenpro": KernelGDRegressor(max_iter=5, options={"memory_budget": 1 << 18}),
    # the rbf at sigma="scale": kernel="auto" widens it fourfold on this linear target, where float32's
    # rounding moves CG's stop by an iteration between namespaces
    "float32 compute": KernelGDRegressor(kernel="rbf", alpha=1e-3, options={"dtype": "float32"}),
}


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("name", list(REGRESSORS))
def test_regressor_matches_numpy(module, name, regression):
    X, y = regression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the same convergence warnings in both fits
        ref, est = _fit_both(REGRESSORS[name].set_params(random_state=0), module, X, y)
        with config_context(array_api_dispatch=True):
            pred = est.predict(module.asarray(X))
    _assert_in_namespace(pred, module)
    for attribute in ("dual_coef_", "X_fit_"):
        _assert_in_namespace(getattr(est, attribute), module)
    assert est.solver_ == ref.solver_ and est.n_iter_ == ref.n_iter_ and est.n_centers_ == ref.n_centers_
    atol = 1e-4 if "float32" in name else 1e-9
    assert_allclose(to_numpy(pred), ref.predict(X), rtol=1e-6, atol=atol)
    # objectives near an interpolant's 0 differ in rounding: absolute against the targets' scale (1)
    assert_allclose(est.loss_curve_, ref.loss_curve_, rtol=1e-6 if "float32" not in name else 1e-3, atol=1e-10)


@pytest.mark.parametrize("module", NAMESPACES)
def test_regressor_weights_and_targets(module, regression):
    X, y = regression
    Y = np.column_stack([y, np.sin(y)])
    sw = np.random.RandomState(1).uniform(0, 2, len(y))
    sw[:10] = 0
    ref, est = _fit_both(KernelGDRegressor(alpha=1e-3), module, X, Y, sample_weight=sw)
    with config_context(array_api_dispatch=True):
        pred = est.predict(module.asarray(X))
    assert tuple(pred.shape) == (len(y), 2)
    _assert_in_namespace(est.intercept_, module)
    assert_allclose(to_numpy(pred), ref.predict(X), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("module", NAMESPACES)
def test_precomputed_kernel(module, regression):
    X, y = regression
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 10.0)
    ref, est = _fit_both(KernelGDRegressor(kernel="precomputed", alpha=1e-3), module, K, y)
    with config_context(array_api_dispatch=True):
        pred = est.predict(module.asarray(K[:20]))
    assert_allclose(to_numpy(pred), ref.predict(K[:20]), rtol=1e-6, atol=1e-9)


CLASSIFIERS = {
    "squared defaults": KernelGDClassifier(),
    "squared centers": KernelGDClassifier(alpha=1e-3, n_centers=50),
    "logistic defaults": KernelGDClassifier(loss="logistic"),
    "logistic centers": KernelGDClassifier(loss="logistic", n_centers=50),
    "logistic balanced": KernelGDClassifier(loss="logistic", class_weight="balanced"),
    "logistic gd": KernelGDClassifier(loss="logistic", solver="gd", max_iter=50, tol=0),
}


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_classifier_matches_numpy(module, n_classes, name):
    X, y = make_classification(300, 5, n_informative=3, n_redundant=0, n_classes=n_classes, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, est = _fit_both(CLASSIFIERS[name].set_params(random_state=0), module, X, y)
    Xm = module.asarray(X)
    with config_context(array_api_dispatch=True):
        scores, labels = est.decision_function(Xm), est.predict(Xm)
        # (the squared loss's probabilities: its output layer's)
        proba = est.predict_proba(Xm) if hasattr(est, "predict_proba") else None
        log_proba = est.predict_log_proba(Xm) if hasattr(est, "predict_log_proba") else None
    for out in (scores, labels):
        _assert_in_namespace(out, module)
    assert isinstance(est.classes_, np.ndarray)  # as scikit-learn keeps it
    assert est.n_iter_ == ref.n_iter_
    assert_allclose(to_numpy(scores), ref.decision_function(X), rtol=1e-6, atol=1e-7)
    assert_allclose(to_numpy(labels), ref.predict(X))
    if proba is not None:
        _assert_in_namespace(proba, module)
        assert_allclose(to_numpy(proba), ref.predict_proba(X), rtol=1e-6, atol=1e-9)
        assert_allclose(to_numpy(log_proba), ref.predict_log_proba(X), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_probabilities_with_labels_drawn_at_random_match_numpy(module, loss, monkeypatch):
    # any share of labels drawn at random is kept: the mixed probabilities in the array's namespace equal numpy's
    from kernelgd import _combiner

    monkeypatch.setattr(_combiner, "SIGNIFICANCE", -np.inf)
    X, y = make_classification(300, 5, n_informative=3, n_redundant=0, n_classes=3, flip_y=0.2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, est = _fit_both(KernelGDClassifier(loss=loss, random_state=0), module, X, y)
    assert ref.label_noise_ > 0 and est.label_noise_ == pytest.approx(ref.label_noise_, rel=1e-6)
    Xm = module.asarray(X)
    with config_context(array_api_dispatch=True):
        proba, log_proba = est.predict_proba(Xm), est.predict_log_proba(Xm)
    _assert_in_namespace(proba, module)
    _assert_in_namespace(log_proba, module)
    assert_allclose(to_numpy(proba), ref.predict_proba(X), rtol=1e-6, atol=1e-9)
    assert_allclose(to_numpy(log_proba), ref.predict_log_proba(X), rtol=1e-6, atol=1e-8)


# (where, the preconditioner a softmax fit must use, its estimator, rows and classes of make_blobs)
SOFTMAX_PRECONDITIONERS = {
    # the exact steps' coupled factor of the rows' Hessian blocks (of rank 28 here)
    "coupled": ("_full", "coupled_preconditioner",
                dict(loss="logistic", alpha=1e-6, solver="newton", random_state=0), 400, 8),
    # the centers softmax's per-class FALKON factors (2,400 unknowns: CG steps)
    "per-class centers": ("_centers", "class_preconditioner",
                          dict(loss="logistic", n_centers=400, alpha=1e-5, random_state=0), 1500, 6),
}


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("case", list(SOFTMAX_PRECONDITIONERS))
def test_softmax_preconditioners_match_numpy(module, case, monkeypatch):
    import importlib

    from sklearn.datasets import make_blobs

    where, name, params, n, k = SOFTMAX_PRECONDITIONERS[case]
    home = importlib.import_module(f"kernelgd._solvers.newton.{where}")
    Xb, yb = make_blobs(n, 4, centers=k, cluster_std=2.0, random_state=0)
    used, original = [], getattr(home, name)
    monkeypatch.setattr(home, name, lambda *args: used.append(1) or original(*args))
    ref, est = _fit_both(KernelGDClassifier(**params), module, Xb, yb)
    assert used and est.n_iter_ == ref.n_iter_
    with config_context(array_api_dispatch=True):
        proba = est.predict_proba(module.asarray(Xb))
    assert_allclose(to_numpy(proba), ref.predict_proba(Xb), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("module", NAMESPACES)
def test_softmax_with_a_class_without_weight_matches_numpy(module):
    # the class without weight is left out of the fit and put back with the floor's intercept
    X, y = make_classification(200, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=0)
    weights = np.where(y == 1, 0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref, est = _fit_both(KernelGDClassifier(loss="logistic", alpha=1e-3, random_state=0), module, X, y,
                             sample_weight=weights)
    with config_context(array_api_dispatch=True):
        proba = est.predict_proba(module.asarray(X))
    _assert_in_namespace(est.intercept_, module)
    assert_allclose(to_numpy(est.intercept_), ref.intercept_, rtol=1e-6)
    assert_allclose(to_numpy(proba), ref.predict_proba(X), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("module", NAMESPACES)
def test_string_labels_stay_numpy(module):
    X, y = make_classification(120, 4, random_state=0)
    labels = np.array(["no", "yes"])[y]
    with config_context(array_api_dispatch=True):
        est = KernelGDClassifier(loss="logistic").fit(module.asarray(X), labels)
        pred = est.predict(module.asarray(X))
    assert isinstance(pred, np.ndarray) and set(pred) <= {"no", "yes"}
    assert_allclose(np.mean(pred == labels), KernelGDClassifier(loss="logistic").fit(X, labels).score(X, labels))


@pytest.mark.parametrize("module", NAMESPACES)
def test_y_and_weights_follow_x(module, regression):
    """scikit-learn's rule: y and sample_weight of another namespace are moved to X's."""
    X, y = regression
    with config_context(array_api_dispatch=True):
        est = KernelGDRegressor(alpha=1e-3).fit(module.asarray(X), y, sample_weight=np.ones(len(y)))
        pred = est.predict(module.asarray(X))
    assert_allclose(to_numpy(pred), KernelGDRegressor(alpha=1e-3).fit(X, y).predict(X), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("module", NAMESPACES)
def test_predict_on_another_namespace_is_an_error(module, regression):
    X, y = regression
    with config_context(array_api_dispatch=True):
        est = KernelGDRegressor(alpha=1e-3).fit(module.asarray(X), module.asarray(y))
        with pytest.raises(ValueError, match="same namespace"):
            est.predict(X)


CLASSIFIER_CVS = {
    "squared, leave-one-out": (KernelGDClassifierCV(alphas=[1e-3, 1e-1]), {}),
    "squared, balanced, weighted": (KernelGDClassifierCV(alphas=[1e-3, 1e-1], class_weight="balanced"),
                                    {"weights": True}),
    "logistic, 3 folds": (KernelGDClassifierCV(loss="logistic", sigmas=[1.0, 3.0], alphas=[1e-2, 1e-4], cv=3), {}),
    "logistic, string labels": (KernelGDClassifierCV(loss="logistic", sigmas=[2.0], alphas=[1e-2, 1e-3], cv=3),
                                {"labels": "strings"}),
    "squared, 3 folds, accuracy": (KernelGDClassifierCV(kernel="laplacian", alphas=[1e-3, 1e-1], cv=3), {}),
}


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("name", list(CLASSIFIER_CVS))
def test_classifier_cv_matches_numpy(module, name):
    estimator, case = CLASSIFIER_CVS[name]
    X, y = make_classification(150, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=0)
    fit_params = {}
    if case.get("weights"):
        fit_params["sample_weight"] = np.random.RandomState(0).uniform(0.5, 2.0, len(X))
    ref = clone(estimator).set_params(random_state=0).fit(
        X, np.array(["a", "b", "c"])[y] if case.get("labels") else y, **fit_params)
    with config_context(array_api_dispatch=True):
        params = {k: module.asarray(v) for k, v in fit_params.items()}
        labels = np.array(["a", "b", "c"])[y] if case.get("labels") else module.asarray(y)
        est = clone(estimator).set_params(random_state=0).fit(module.asarray(X), labels, **params)
        scores = est.decision_function(module.asarray(X))
        predicted = est.predict(module.asarray(X))
    _assert_in_namespace(scores, module)
    assert est.alpha_ == ref.alpha_
    assert_allclose(est.sigma_, ref.sigma_, rtol=1e-12)
    assert_allclose(est.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], rtol=1e-6, atol=1e-9)
    assert_allclose(to_numpy(scores), ref.decision_function(X), rtol=1e-5, atol=1e-7)
    assert_array_equal(np.asarray(to_numpy(predicted)), ref.predict(X))


REGRESSOR_CVS = {
    "defaults (rbf, laplacian, ARD)": (KernelGDRegressorCV(), {}),
    "no ARD, weighted": (KernelGDRegressorCV(ard=False), {"weights": True}),
    "many weights": (KernelGDRegressorCV(ard=False, alphas=[1e-4, 1e-2]), {"weights": "many"}),
    "scoring": (KernelGDRegressorCV(ard=False, scoring="neg_mean_absolute_error"), {}),
    "two targets": (KernelGDRegressorCV(alphas=[1e-4, 1e-2]), {"targets": 2}),
    "low-rank leave-one-out": (KernelGDRegressorCV(ard=False, alphas=[1e-6, 1e-4, 1e-2]), {"low_rank": True}),
    "held-out search": (KernelGDRegressorCV(), {"low_rank": True}),
}


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("name", list(REGRESSOR_CVS))
def test_regressor_cv_matches_numpy(module, name, regression, monkeypatch):
    import kernelgd._loo as loo
    import kernelgd._search as search

    estimator, case = REGRESSOR_CVS[name]
    X, y = regression
    if case.get("targets"):
        y = np.column_stack([y, np.cos(y)])
    fit_params = {}
    if case.get("weights") is True:
        fit_params["sample_weight"] = np.repeat([1.0, 2.0, 0.5], 100)
    elif case.get("weights") == "many":
        fit_params["sample_weight"] = np.random.RandomState(0).uniform(0.5, 2.0, len(X))
        monkeypatch.setattr(loo, "LOO_WEIGHT_GROUPS", 4)  # a shift per row
    if case.get("low_rank"):
        monkeypatch.setattr(search, "LOO_MAX_SAMPLES", 100)
        monkeypatch.setattr(search, "LOW_RANK_LOO_RANK", 60)
    ref, est = _fit_both(estimator.set_params(random_state=0), module, X, y, **fit_params)
    with config_context(array_api_dispatch=True):
        pred = est.predict(module.asarray(X))
    _assert_in_namespace(pred, module)
    assert (est.kernel_, est.alpha_) == (ref.kernel_, ref.alpha_)
    assert_allclose(to_numpy(est.sigma_) if not np.isscalar(est.sigma_) else est.sigma_, ref.sigma_, rtol=1e-6)
    # below alpha ~ 1e-6 the scores rest on eigenvalues at K's rounding level, which the two kernels' own
    # (equally valid) rounding moves: compared where they are determined
    alphas = np.array([p["alpha"] for p in ref.cv_results_["params"]])
    determined = alphas >= 1e-6
    assert_allclose(est.cv_results_["mean_test_score"][determined], ref.cv_results_["mean_test_score"][determined],
                    rtol=1e-6, atol=1e-12)
    # the refits reach the same objective; at a ridge of 1e-9 (the defaults' choice here) models within
    # 1e-6 of it differ by up to 1e-4 in their predictions, which the kernels' rounding moves
    assert_allclose(est.loss_curve_[-1], ref.loss_curve_[-1], rtol=1e-5)
    tight = ref.alpha_ >= 1e-6
    assert_allclose(to_numpy(pred), ref.predict(X), rtol=1e-5 if tight else 0.0, atol=1e-8 if tight else 5e-4)  # y: std 1


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("ard", [False, True])
def test_regressor_cv_with_folds_matches_numpy(module, ard, regression):
    X, y = regression
    weights = np.random.RandomState(0).uniform(0.5, 2.0, len(X))
    estimator = KernelGDRegressorCV(cv=3, ard=ard, alphas=[1e-4, 1e-2], random_state=0)
    ref, est = _fit_both(estimator, module, X, y, sample_weight=weights)
    with config_context(array_api_dispatch=True):
        pred = est.predict(module.asarray(X))
    _assert_in_namespace(pred, module)
    assert (est.kernel_, est.alpha_, est.ard_) == (ref.kernel_, ref.alpha_, ref.ard_)
    assert_allclose(np.asarray(to_numpy(est.sigma_)) if not np.isscalar(est.sigma_) else est.sigma_, ref.sigma_,
                    rtol=1e-6)
    # (atol: a score near 0, -0.0022, moves by 4e-9 with the distance expansion's order of operations)
    assert_allclose(est.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], rtol=1e-6, atol=1e-8)
    assert_allclose(to_numpy(pred), ref.predict(X), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "exponential", "linear", "polynomial", "sigmoid", "all_subsets"])
def test_kernels_match_numpy(module, kernel):
    rng = np.random.RandomState(0)
    X, Z = rng.normal(size=(7, 3)) + 100.0, rng.normal(size=(5, 3)) + 100.0  # far from 0: the centring matters
    if kernel in ("linear", "polynomial", "sigmoid", "all_subsets"):
        X, Z = X - 100.0, Z - 100.0
    bound = bind_kernel(kernel, sigma=1.5)
    with config_context(array_api_dispatch=True):
        K = bound(module.asarray(X), module.asarray(Z))
        diag = bound.diag(module.asarray(X))
    _assert_in_namespace(K, module)
    assert_allclose(to_numpy(K), bound(X, Z), rtol=1e-10, atol=1e-12)
    assert_allclose(to_numpy(diag), bound.diag(X), rtol=1e-10)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("swap", [False, True])
def test_float32_rbf_of_a_far_outlier_and_its_near_duplicate(module, swap):
    # The expansion |x|^2 - 2 x'z + |z|^2 rounds by eps (|x|^2 + |z|^2): for rows 60 widths from the
    # data's mean float32 loses the distance of a near-duplicate pair.
    # Such distances are recomputed directly, as numpy's path does. Reference: scikit-learn's float64 kernel.
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.RandomState(0)
    X = rng.normal(size=(30, 4))
    X[-2] = 60.0
    X[-1] = X[-2] + 0.01
    A, B = (X[::-1], X) if swap else (X, X[::-1])
    with config_context(array_api_dispatch=True):
        K = bind_kernel("rbf", sigma=1.0)(module.asarray(A.astype(np.float32)), module.asarray(B.astype(np.float32)))
    assert K.dtype == _xp(module).float32
    assert_allclose(to_numpy(K), rbf_kernel(A, B, gamma=1.0), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("centers", [False, True])
@pytest.mark.parametrize("store", [True, False])
def test_operator_products_match_numpy(module, centers, store):
    rng = np.random.RandomState(0)
    X, V, U = rng.normal(size=(50, 3)), rng.normal(size=(50, 2)), rng.normal(size=(50, 2))
    C = X[:12] if centers else None
    kernel = bind_kernel("rbf", sigma=2.0)
    ref = KernelOperator(X, kernel, centers=C, dtype="float64", store=store, memory_budget=4096)
    with config_context(array_api_dispatch=True):
        op = KernelOperator(module.asarray(X), kernel, centers=None if C is None else module.asarray(C),
                            dtype="float64", store=store, memory_budget=4096)
        m = op.m
        w = module.asarray(np.abs(U[:, 0]))
        gram, KV = op.gram_matvec(module.asarray(V[:m]), w)
        ref_gram, ref_KV = ref.gram_matvec(V[:m], np.abs(U[:, 0]))
        pairs = [
            (op.matvec(module.asarray(V[:m])), ref.matvec(V[:m])),
            (op.rmatvec(module.asarray(U)), ref.rmatvec(U)),
            (gram, ref_gram), (KV, ref_KV),
            (op.columns(np.array([3, 1])), ref.columns(np.array([3, 1]))),
            (op.diag(), ref.diag()), (op.center_diag(), ref.center_diag()),
            (op.center_matrix(), ref.center_matrix()),
        ]
    assert op.stored == store
    for got, expected in pairs:
        assert_allclose(to_numpy(got), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("module", NAMESPACES)
def test_linear_algebra_fallbacks(module):
    xp = _xp(module)
    rng = np.random.RandomState(0)
    A = rng.normal(size=(6, 6))
    M = A @ A.T + 1e-3 * np.eye(6)
    with config_context(array_api_dispatch=True):
        T = cholesky(module.asarray(M))
        assert_allclose(to_numpy(T.T @ T), M, atol=1e-10)
        assert_allclose(np.tril(to_numpy(T), -1), 0.0)
        B = rng.normal(size=(6, 2))
        for trans in (False, True):
            X = to_numpy(solve_triangular(T, module.asarray(B), upper=True, trans=trans))
            T_np = to_numpy(T)
            assert_allclose((T_np.T if trans else T_np) @ X, B, atol=1e-9)
            # the solver made once per factor (other namespaces: its explicit inverse)
            Y = to_numpy(triangular_solver(T)(module.asarray(B), trans=trans))
            assert_allclose((T_np.T if trans else T_np) @ Y, B, atol=1e-9)
        # one Cholesky factor per column: each column solved with its own G_c = R_c' R_c
        stack, G = CholeskyStack(2), [M, M + np.eye(6)]
        for c in range(2):
            stack.set(c, cholesky(module.asarray(G[c])))
        X = to_numpy(stack.solve(module.asarray(B)))
        assert_allclose([G[c] @ X[:, c] for c in range(2)], B.T, atol=1e-9)
        # a singular matrix gets a jitter, a hopeless one a clear error
        assert np.all(np.isfinite(to_numpy(cholesky(module.asarray(np.ones((3, 3)))))))
        with pytest.raises(ValueError, match="numerically singular"):
            cholesky(module.asarray(-np.eye(3)), what="test matrix")
        Z = add_at_rows(xp.zeros((4, 2), dtype=xp.float64), np.array([3, 1]), module.asarray(np.ones((2, 2))))
        assert_allclose(to_numpy(Z), [[0, 0], [1, 1], [0, 0], [1, 1]])
    R, perm, rank = pivoted_cholesky(M)
    assert rank == 6 and np.all(np.tril(R, -1) == 0)  # LAPACK leaves the input below the diagonal
    assert_allclose(R.T @ R, M[np.ix_(perm, perm)], atol=1e-10)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("estimator", [KernelGDRegressor(), KernelGDClassifier(loss="logistic")], ids=repr)
def test_sklearn_array_api_check_with_values(module, estimator):
    from sklearn.utils.estimator_checks import check_array_api_input

    device = "CPU_DEVICE" if module.__name__ == "array_api_strict" else "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_array_api_input(
            type(estimator).__name__, estimator, module.__name__, device_name=device, dtype_name="float64",
            check_values=True, check_sample_weight=True,
        )


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("solver", ["newton", "cg"])
def test_dense_steps_on_few_rank_deficient_centers_match_numpy(module, n_classes, solver, monkeypatch):
    # On few centers where CG's residual is not to be trusted (one feature: K_mm rank-deficient),
    # the steps are formed and factored densely in every namespace, as on numpy
    from kernelgd._solvers import _dense_newton

    if solver == "cg" and n_classes == 3:
        pytest.skip("solver 'cg' fits the squared loss: one system per column either way")
    calls = []
    direction = _dense_newton.direction
    monkeypatch.setattr(_dense_newton, "direction", lambda dense, *a: calls.append(type(dense[0])) or direction(dense, *a))
    r = np.random.RandomState(0)
    X = r.randn(600, 1) * 3
    y = np.digitize(np.sin(X[:, 0]) + 0.3 * r.randn(600), [-0.5, 0.5] if n_classes == 3 else [0.0])
    loss = "logistic" if solver == "newton" else "squared"
    estimator = KernelGDClassifier(loss=loss, solver=solver, alpha=1e-6, n_centers=80, random_state=0,
                                   options={"dtype": "float64"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the fits reach the optimum
        ref, est = _fit_both(estimator, module, X, y)
    assert {t.__module__.split(".")[0] for t in calls} == {"numpy", module.__name__.split(".")[0]}
    with config_context(array_api_dispatch=True):
        scores = to_numpy(est.decision_function(module.asarray(X)))
    # (K_mm's near-null eigenvectors, which the two eigensolvers pick differently, leave the objective
    # flat to rounding along them: torch 2.14's decision values differ by 1.1e-4 on scores near 5)
    assert_allclose(est.loss_curve_[-1], ref.loss_curve_[-1], rtol=1e-6)
    assert_allclose(scores, ref.decision_function(X), atol=1e-3)


@pytest.mark.parametrize("module", NAMESPACES)
def test_logistic_functions_of_extreme_predictions(module):
    # Regression: expit's exp(-F) overflowed at F < -709, a RuntimeWarning on numpy-backed namespaces
    from scipy.special import expit, log_expit

    from kernelgd import _array_api

    F = np.array([-1e4, -745.0, -710.0, -30.0, -1.0, 0.0, 1.0, 30.0, 710.0, 1e4])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = to_numpy(_array_api.expit(module.asarray(F)))
        log_out = to_numpy(_array_api.log_expit(module.asarray(F)))
    assert_allclose(out, expit(F), rtol=1e-12, atol=1e-300)  # (subnormal where scipy gives 0)
    assert_allclose(log_out, log_expit(F), rtol=1e-12)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("n_centers, dense", [(None, True), (None, False), (None, "local"), (40, False)])
def test_predictive_std_matches_numpy(module, n_centers, dense, regression, monkeypatch):
    from kernelgd import _posterior

    # the exact model's variance from one dense factor, by block CG, or from each point's nearest rows
    monkeypatch.setattr(_posterior, "DENSE_BREAK_EVEN", 10**9 if dense else 0)
    if dense == "local":
        monkeypatch.setattr(_posterior, "EXACT_COST_RATIO", 0.0)
        monkeypatch.setattr(_posterior, "LOCAL_ROWS", 30)
    X, y = regression
    estimator = KernelGDRegressor(kernel="rbf", alpha=1e-3, n_centers=n_centers, random_state=0, tol=1e-10)
    ref, est = _fit_both(estimator, module, X, y)
    with config_context(array_api_dispatch=True):
        mean, std = est.predict(module.asarray(X[:20]), return_std=True)
        _, cov = est.predict(module.asarray(X[:5]), return_cov=True)
    _assert_in_namespace(std, module)
    assert_allclose(est.noise_variance_, ref.noise_variance_, rtol=1e-6)
    assert_allclose(to_numpy(std), ref.predict(X[:20], return_std=True)[1], rtol=1e-5)
    assert_allclose(to_numpy(cov), ref.predict(X[:5], return_cov=True)[1], rtol=1e-5, atol=1e-10)


def _count_reads(patch, array_type):
    """A list that grows by one at each read of an ``array_type`` to a Python scalar (a wait for the device)."""
    reads = []
    for name in ("__bool__", "__float__", "__int__", "__index__", "item"):
        if hasattr(array_type, name):
            original = getattr(array_type, name)
            patch.setattr(array_type, name, lambda self, *a, _f=original, **k: reads.append(1) or _f(self, *a, **k))
    return reads


@pytest.mark.parametrize("module", NAMESPACES)
def test_cholesky_many_factors_a_stack_with_one_read(module, monkeypatch):
    # Newton's per-class preconditioner factors (letter: 26 per step) in one factorization of their stack and
    # one read of which succeeded; a failed one takes cholesky's jitter ladder, as alone
    from kernelgd._array_api import cholesky_many

    rng = np.random.RandomState(0)
    mats = [G @ G.T + 1e-3 * np.eye(5) for G in rng.normal(size=(3, 5, 5))] + [np.ones((5, 5))]
    with config_context(array_api_dispatch=True):
        Ms = [module.asarray(M) for M in mats]
        reads = _count_reads(monkeypatch, type(Ms[0]))
        factors = cholesky_many(Ms[:3], "test matrix")
        assert len(reads) <= 1
        factors += cholesky_many(Ms[2:], "test matrix")[1:]  # the singular one: jitter
        monkeypatch.undo()
        for M, U, alone in zip(mats, factors, [cholesky(M, "test matrix") for M in Ms]):
            assert_allclose(np.triu(to_numpy(U)), to_numpy(U), atol=0)
            assert_allclose(to_numpy(U), to_numpy(alone), atol=1e-12)
        assert_allclose(to_numpy(Ms[0]), mats[0])  # the inputs stay as they were
        with pytest.raises(ValueError, match="numerically singular"):
            cholesky_many([Ms[0], module.asarray(-np.eye(5))], "test matrix")
    assert cholesky_many([], "test matrix") == []


@pytest.mark.parametrize("module", NAMESPACES)
def test_cg_reads_the_device_once_per_read_interval(module, monkeypatch):
    # a host read waits for the device: block_pcg's only one is its convergence test, every
    # read_interval iterations (its residual stays on the device until a caller asks the tracker for it)
    from kernelgd._array_api import read_interval
    from kernelgd._solvers._krylov import ProductTracker, block_pcg

    rng = np.random.RandomState(0)
    G = rng.normal(size=(60, 60))
    with config_context(array_api_dispatch=True):
        A, B = module.asarray(G @ G.T + 60 * np.eye(60)), module.asarray(rng.normal(size=(60, 3)))
        tracker = ProductTracker(A @ B * 0.0)
        reads = _count_reads(monkeypatch, type(B))

        def apply_A(V):
            tracker.record(A @ V)
            return tracker.last

        X, n_iter, status = block_pcg(apply_A, B, lambda V: V, max_iter=100, tol=1e-10,
                                      on_iter=lambda X, step: tracker.advance(step), tracker=tracker)
        monkeypatch.undo()
    every = read_interval(B)
    assert status == "converged" and n_iter > 5 and every > 1
    assert len(reads) <= n_iter // every + 4  # the tests (one past the last), the count and the status
    assert_allclose(to_numpy(A) @ to_numpy(X), to_numpy(B), atol=1e-6)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("n_centers", [None, 40])
def test_cg_reads_the_device_twice_per_read_interval(module, n_centers, monkeypatch):
    # per read_interval CG iterations: the convergence test, and the monitor's scalars of those
    # iterations (objective, CG's quadratic, residual) in one transfer; counted as the difference
    # between fits of 12 and 6 iterations
    from kernelgd import _array_api
    from kernelgd._solvers import _dense_newton

    monkeypatch.setattr(_dense_newton, "MAX_UNKNOWNS", 0)  # CG's steps, not one dense solve
    rng = np.random.RandomState(0)
    X = rng.normal(size=(800, 5))
    y = np.sin(X[:, 0]) + rng.normal(size=800)

    def reads(max_iter):
        with monkeypatch.context() as patch:
            count = _count_reads(patch, type(module.asarray(np.zeros(1))))
            to_numpy = _array_api.to_numpy
            patch.setattr(_array_api, "to_numpy", lambda A: count.append(1) or to_numpy(A))
            model = KernelGDRegressor(solver="cg", alpha=1e-8, tol=0.0, max_iter=max_iter, n_centers=n_centers,
                                      random_state=0)
            with config_context(array_api_dispatch=True), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tol=0 runs every iteration
                model.fit(module.asarray(X), module.asarray(y))
        assert model.n_iter_ == max_iter
        return len(count)

    every = _array_api.DEVICE_READ_INTERVAL
    assert every > 1 and reads(12) - reads(6) <= 2 * (6 // every + 1)


@pytest.mark.parametrize("module", NAMESPACES)
@pytest.mark.parametrize("n_centers", [None, 40])
def test_reading_the_device_less_often_changes_no_result(module, n_centers, monkeypatch):
    # converged columns take zero steps until the next read: the same model and iteration count
    from kernelgd import _array_api
    from kernelgd._solvers import _dense_newton

    monkeypatch.setattr(_dense_newton, "MAX_UNKNOWNS", 0)  # CG's steps, not one dense solve
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 4))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2]) + 0.1 * rng.normal(size=(300, 2))
    fits = {}
    for every in (1, 3):
        monkeypatch.setattr(_array_api, "DEVICE_READ_INTERVAL", every)
        model = KernelGDRegressor(solver="cg", alpha=1e-4, n_centers=n_centers, random_state=0)
        with config_context(array_api_dispatch=True):
            model.fit(module.asarray(X), module.asarray(Y))
        fits[every] = model
    assert_allclose(to_numpy(fits[3].dual_coef_), to_numpy(fits[1].dual_coef_), rtol=0, atol=0)
    assert_allclose(to_numpy(fits[3].intercept_), to_numpy(fits[1].intercept_), rtol=0, atol=0)
    assert fits[3].n_iter_ == fits[1].n_iter_ and len(fits[3].loss_curve_) == fits[3].n_iter_


@pytest.mark.parametrize("inverses", [True, False])
def test_center_memory_check_counts_what_the_factors_hold_off_the_host(inverses, monkeypatch):
    # other namespaces keep both triangular factors' inverses up to EXPLICIT_INVERSE_ROWS, and factor a
    # symmetrised copy (array-api-strict wraps numpy arrays, which tracemalloc sees)
    from kernelgd import _array_api
    from kernelgd._solvers import _preconditioners
    from test_preconditioner import center_factors_peak

    xps = pytest.importorskip("array_api_strict")
    m = 500
    if not inverses:
        monkeypatch.setattr(_array_api, "EXPLICIT_INVERSE_ROWS", m - 1)
    with config_context(array_api_dispatch=True):
        X = xps.asarray(np.random.RandomState(0).normal(size=(2 * m, 4)))
        peak = center_factors_peak(X, m)
        count = _preconditioners.center_matrix_count(m, X)
        assert count == (6 if inverses else 5)
        assert (count - 1) * 8 * m * m < peak <= 1.02 * count * 8 * m * m
        with pytest.raises(ValueError, match=f"n_centers={m} \\({count} m x m"):
            _preconditioners.check_center_memory(m, count * 8 * m * m - 1, X)
        _preconditioners.check_center_memory(m, count * 8 * m * m, X)


@pytest.mark.parametrize("inverses, center_dtype", [(True, "float64"), (False, "float64"), (False, "float32")])
def test_torch_center_memory_count_holds_on_cuda(inverses, center_dtype, monkeypatch):
    # torch factors in place, forms A's matrix by row blocks and inverts into an identity's memory: the
    # device's own peak (tracemalloc cannot see it) stays within the matrices the check counts
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from kernelgd import _array_api
    from kernelgd._operator import KernelOperator
    from kernelgd._solvers import _preconditioners
    from kernelgd.kernels import bind_kernel

    m = 3000
    monkeypatch.setattr(_array_api, "BLOCK_ENTRIES", 100 * m)
    if not inverses:
        monkeypatch.setattr(_array_api, "EXPLICIT_INVERSE_ROWS", m - 1)
    rng = np.random.RandomState(0)
    with config_context(array_api_dispatch=True):
        X = torch.asarray(rng.normal(size=(2 * m, 4)), device="cuda")
        operator = KernelOperator(X, bind_kernel("rbf", sigma=2.0), centers=X[:m], dtype="float64", store=False,
                                  center_rows=np.arange(m), center_dtype=center_dtype)
        d = torch.asarray(rng.uniform(0.5, 1.5, m), device="cuda")
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        factors = _preconditioners.center_factors(operator)
        _preconditioners.FalkonPreconditioner(factors, d, 1e-6, True)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        count = _preconditioners.center_matrix_count(m, X)
    assert count == (4 if inverses else 2)
    assert peak <= 1.1 * count * np.dtype(center_dtype).itemsize * m * m


@pytest.mark.parametrize("module", NAMESPACES)
def test_centers_past_the_float64_budget_keep_float32_matrices(module, monkeypatch):
    # a float32 fit off the host whose float64 m x m matrices would pass the budget keeps them in float32
    # (past the kept inverses): the same objective as numpy's to float32's reach; less budget: a clear error
    from kernelgd import _array_api
    from kernelgd._solvers import _dense_newton, _preconditioners, cg
    from kernelgd._solvers.newton import _run

    m = 40
    monkeypatch.setattr(_dense_newton, "MAX_UNKNOWNS", 0)  # CG's steps on centers, not a dense solve
    monkeypatch.setattr(_array_api, "EXPLICIT_INVERSE_ROWS", m - 1)
    dtypes = []

    def spy(operator):
        factors = _preconditioners.center_factors(operator)
        dtypes.append(_array_api.is_float32(factors.T))
        return factors

    monkeypatch.setattr(cg, "center_factors", spy)
    monkeypatch.setattr(_run, "center_factors", spy)
    rng = np.random.RandomState(0)
    # few rows: a budget of just the m x m matrices leaves the kernel one row per block, each a namespace call
    X = rng.normal(size=(100, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=100)
    for est, target in [(KernelGDRegressor(alpha=1e-4, n_centers=m, random_state=0), y),
                        (KernelGDClassifier(loss="logistic", alpha=1e-4, n_centers=m, random_state=0), (y > 0) * 1)]:
        ref = clone(est).set_params(options={"dtype": "float32"}).fit(X, target)
        with config_context(array_api_dispatch=True):
            Xm, ym = module.asarray(X), module.asarray(target)
            full = _preconditioners.center_matrix_count(m, Xm) * m * m * 8
            for budget, float32 in ((full, False), (full - 1, True)):
                dtypes.clear()
                fitted = clone(est).set_params(options={"dtype": "float32", "memory_budget": budget}).fit(Xm, ym)
                assert dtypes and set(dtypes) == {float32}
                assert float(fitted.loss_curve_[-1]) <= ref.loss_curve_[-1] * (1 + 1e-4)
            with pytest.raises(ValueError, match=f"n_centers={m} .* m x m matrices of float32"):
                clone(est).set_params(options={"dtype": "float32", "memory_budget": full // 2 - 1}).fit(Xm, ym)
    # float64 wherever float64 fits, on the host, computing in float64, or keeping the inverses
    from kernelgd._solvers._preconditioners import center_dtype

    with config_context(array_api_dispatch=True):
        Xm = module.asarray(X)
        assert center_dtype(m, full - 1, Xm, "float32") == np.float32
        assert center_dtype(m, full, Xm, "float32") == center_dtype(m, full - 1, X, "float32") == np.float64
        assert center_dtype(m, full - 1, Xm, "float64") == center_dtype(m + 1, full - 1, None, "float32") == np.float64
    monkeypatch.setattr(_array_api, "EXPLICIT_INVERSE_ROWS", m)
    with config_context(array_api_dispatch=True):
        assert center_dtype(m, full - 1, module.asarray(X), "float32") == np.float64


def test_torch_factors_in_place_and_past_the_inverses_solves_triangles():
    # torch shifts M's diagonal in place and factors its lower triangle; past EXPLICIT_INVERSE_ROWS the
    # centers' factors are applied by triangular solves: the fit (cg, and newton for the logistic loss)
    # is numpy's either way
    torch = pytest.importorskip("torch")
    from kernelgd import _array_api

    rng = np.random.RandomState(0)
    A = rng.normal(size=(6, 6))
    M = A @ A.T + 1e-3 * np.eye(6)
    with config_context(array_api_dispatch=True):
        Mt = torch.asarray(M)
        T = cholesky(Mt)
        assert_allclose(to_numpy(T.T @ T), M, atol=1e-10)
        assert_allclose(to_numpy(Mt), M)  # cholesky factors a copy
        # a failed factorization, or one that met a NaN, is None (the jitter ladder's cue), from one read
        for bad in ([[1.0, 2.0], [2.0, 1.0]], [[1.0, np.nan], [np.nan, 1.0]]):
            assert _array_api._Torch.factor_in_place(torch.asarray(bad, dtype=torch.float64)) is None
    X = rng.normal(size=(300, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    labels = (y > 0).astype(int)
    for est, target in [(KernelGDRegressor(alpha=1e-4, n_centers=40, random_state=0), y),
                        (KernelGDClassifier(loss="logistic", alpha=1e-4, n_centers=40, random_state=0), labels)]:
        method = "predict_proba" if target is labels else "predict"
        ref = getattr(clone(est).fit(X, target), method)(X)
        for rows in (40, 39):
            _array_api.EXPLICIT_INVERSE_ROWS, saved = rows, _array_api.EXPLICIT_INVERSE_ROWS
            try:
                with config_context(array_api_dispatch=True):
                    fitted = clone(est).fit(torch.asarray(X), torch.asarray(target))
                    pred = to_numpy(getattr(fitted, method)(torch.asarray(X)))
            finally:
                _array_api.EXPLICIT_INVERSE_ROWS = saved
            assert_allclose(pred, ref, rtol=1e-6, atol=1e-6)


def _reference_gaussian_product(calls):
    """A fused product's contract, by brute force: ``exp(-|a_i - b_j|^2) @ V`` in float64."""

    def product(A, B, a_norms, b_norms, V):
        xp = _xp_of(A)
        calls.append((A.shape[0], B.shape[0]))
        A64, B64 = xp.astype(A, xp.float64), xp.astype(B, xp.float64)
        sq = xp.astype(a_norms, xp.float64)[:, None] + xp.astype(b_norms, xp.float64)[None, :] - 2 * A64 @ B64.T
        return xp.exp(-xp.clip(sq, 0.0, None)) @ xp.astype(V, xp.float64)

    return product


def _xp_of(A):
    from kernelgd._array_api import xp_of

    return xp_of(A)


@pytest.mark.parametrize("centers", [False, True])
@pytest.mark.parametrize("sigma", [2.0, np.array([1.0, 2.0, 4.0])], ids=["scalar", "per-feature"])
def test_fused_gaussian_product_replaces_recomputed_blocks(centers, sigma, monkeypatch):
    # where a namespace offers a fused rbf product (torch on CUDA: Triton), a recomputed K's products go
    # through it with the features scaled by 1 / sigma and K.T @ U as k(C, X) @ U; the contract stood
    # in by brute force on array-api-strict, against numpy's blocks
    from kernelgd import _array_api

    xps = pytest.importorskip("array_api_strict")
    calls = []
    monkeypatch.setattr(_array_api._Strict, "gaussian_product", lambda X: _reference_gaussian_product(calls))
    rng = np.random.RandomState(0)
    X, V, U = 10 + rng.normal(size=(60, 3)), rng.normal(size=(60, 2)), rng.normal(size=(60, 2))
    C = X[:15] if centers else None
    kernel = bind_kernel("rbf", sigma=sigma)
    ref = KernelOperator(X, kernel, centers=C, dtype="float32", store=False, memory_budget=4096)
    with config_context(array_api_dispatch=True):
        op = KernelOperator(xps.asarray(X), kernel, centers=None if C is None else xps.asarray(C), dtype="float32",
                            store=False, memory_budget=4096)
        m, w = op.m, np.abs(U[:, 0])
        gram, KV = op.gram_matvec(xps.asarray(V[:m]), xps.asarray(w))
        ref_gram, ref_KV = ref.gram_matvec(V[:m], w)
        pairs = [(op.matvec(xps.asarray(V[:m, 0])), ref.matvec(V[:m, 0])), (op.rmatvec(xps.asarray(U)), ref.rmatvec(U)),
                 (gram, ref_gram), (KV, ref_KV)]
    assert len(calls) == 4 and (calls[-1] == (m, 60) if centers else True)
    for got, expected in pairs:
        assert_allclose(to_numpy(got), expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    # stored, in float64, another kernel, or squared norms past float32's range once divided by sigma
    # (where the fused expansion would give NaN): the generic blocks
    with config_context(array_api_dispatch=True):
        tiny = KernelOperator(xps.asarray(X), bind_kernel("rbf", sigma=1e-20), store=False, dtype="float32")
        assert_allclose(to_numpy(tiny.matvec(xps.asarray(V))), V)  # K = I: every point far from the others
        for options in [dict(store=True, dtype="float32"), dict(store=False, dtype="float64")]:
            KernelOperator(xps.asarray(X), kernel, memory_budget=4096, **options).matvec(xps.asarray(V))
        KernelOperator(xps.asarray(X), bind_kernel("laplacian"), store=False, dtype="float32").matvec(xps.asarray(V))
        # predictions' products sum in float64 (the fused product's float32 sums split by the rows' count)
        summed = KernelOperator(xps.asarray(X), kernel, dtype="float32", store=False, product_dtype=np.float64)
        assert_allclose(to_numpy(summed.matvec(xps.asarray(V))), ref.kernel(X, X) @ V, rtol=1e-5, atol=1e-5)
    assert len(calls) == 4


@pytest.mark.parametrize("n_centers", [None, 40])
def test_fused_gaussian_product_fits_as_the_blocks_do(n_centers, monkeypatch):
    from kernelgd import _array_api

    xps = pytest.importorskip("array_api_strict")
    calls = []
    monkeypatch.setattr(_array_api._Strict, "gaussian_product", lambda X: _reference_gaussian_product(calls))
    X, y = make_regression(300 if n_centers is None else 3000, 5, noise=5.0, random_state=0)
    X, y = X / X.std(axis=0), y / y.std()
    # K (300 x 300, or 3,000 x 40, in float32) exceeds the budget: recomputed
    est = KernelGDRegressor(kernel="rbf", alpha=1e-3, n_centers=n_centers, random_state=0,
                            options={"dtype": "float32", "memory_budget": 1 << 18})
    ref, fused = _fit_both(est, xps, X, y)
    assert len(calls) >= fused.n_iter_ and ref.n_iter_ == fused.n_iter_
    with config_context(array_api_dispatch=True):
        pred = to_numpy(fused.predict(xps.asarray(X)))
    assert_allclose(pred, ref.predict(X), rtol=1e-4, atol=1e-4)


def _cuda_triton():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch


@pytest.mark.parametrize("d", [3, 20, 40])
@pytest.mark.parametrize("k", [1, 3, 26])
def test_triton_gaussian_product_matches_the_blocks_on_cuda(d, k):
    # the fused kernel against float64 brute force, at float32's accuracy: both orientations, with and
    # without splits of the summed dimension, features past one tile
    torch = _cuda_triton()
    from kernelgd import _triton

    rng = np.random.RandomState(d + k)
    for n_a, n_b in [(3000, 700), (200, 6000), (1, 65)]:  # the second splits the sum
        A, B = rng.normal(size=(n_a, d)) / np.sqrt(d), rng.normal(size=(n_b, d)) / np.sqrt(d)
        V = rng.normal(size=(n_b, k)) if k > 1 else rng.normal(size=n_b)
        expected = np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)) @ V
        At, Bt = (torch.asarray(Z, dtype=torch.float32, device="cuda") for Z in (A, B))
        got = _triton.gaussian_product(At, Bt, (At * At).sum(1), (Bt * Bt).sum(1), torch.asarray(V, device="cuda"))
        assert got.dtype == torch.float64 and tuple(got.shape) == expected.shape
        sq = (A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2 * A @ B.T
        bound = (np.exp(-np.maximum(sq, 0)) @ np.abs(V).reshape(n_b, -1)).reshape(expected.shape)
        assert np.all(np.abs(got.cpu().numpy() - expected) <= 1e-5 * bound + 1e-7)


def test_triton_fit_matches_numpy_on_cuda(regression):
    torch = _cuda_triton()
    X, y = regression
    est = KernelGDRegressor(alpha=1e-3, n_centers=40, random_state=0,
                            options={"dtype": "float32", "memory_budget": 1 << 18})
    ref = clone(est).fit(X, y)
    with config_context(array_api_dispatch=True):
        Xt = torch.asarray(X, device="cuda")
        fitted = clone(est).fit(Xt, torch.asarray(y, device="cuda"))
        pred = fitted.predict(Xt).cpu().numpy()
    assert fitted.n_iter_ == ref.n_iter_
    assert_allclose(pred, ref.predict(X), rtol=1e-4, atol=1e-4)

