"""Property-based tests: every fit is right or a clear error.

Over data scale and shift, dtype, kernel, solver, alpha, n_centers and the
intercept, a fit either raises a ValueError or returns finite predictions
whose training objective is no worse than the intercept-only model's. A fit
that does not warn of non-convergence must also agree with a dense solve of
the same objective, where the problem is well posed.
"""

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from kernelgd import KernelGDRegressor, kernel_matrix
from kernelgd._solvers._common import NonPSDKernelWarning

KERNELS = ["rbf", "laplacian", "linear", "polynomial"]


def dense_optimum(K, y, alpha, intercept):
    """min mean((K a + b - y)^2) + alpha a'K a by its optimality conditions (lstsq)."""
    n = len(y)
    M = np.zeros((n + 1, n + 1))
    M[:n, :n] = K + n * alpha * np.eye(n)
    M[:n, n] = 1.0 if intercept else 0.0
    M[n, :n] = 1.0 if intercept else 0.0
    M[n, n] = 0.0 if intercept else 1.0
    sol = np.linalg.lstsq(M, np.append(y, 0.0), rcond=None)[0]
    a, b = sol[:n], sol[n] if intercept else 0.0
    f = K @ a + b
    return np.mean((f - y) ** 2) + alpha * a @ K @ a


@st.composite
def problems(draw):
    n = draw(st.integers(3, 50))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    r = np.random.RandomState(seed)
    X = r.randn(n, d) * 10.0 ** draw(st.integers(-3, 6)) + draw(st.sampled_from([0.0, 1e3, -1e6]))
    y = np.sin(X[:, 0] / (np.std(X[:, 0]) + 1e-300)) + 0.1 * r.randn(n)
    y = y * 10.0 ** draw(st.integers(-8, 8)) + draw(st.sampled_from([0.0, 5.0]))
    if draw(st.booleans()):
        X = X.astype(np.float32)
    params = dict(
        kernel=draw(st.sampled_from(KERNELS)),
        solver=draw(st.sampled_from(["auto", "gd", "cg", "eigenpro", "newton"])),
        alpha=draw(st.sampled_from([0.0, 1e-6, 1e-3, 1e-1])),
        fit_intercept=draw(st.booleans()),
        n_centers=draw(st.sampled_from([None, None, max(1, n // 3)])),
        degree=2,
        random_state=0,
        options={"dtype": draw(st.sampled_from(["auto", "float32", "float64"]))},
    )
    if params["n_centers"] is not None:
        params["solver"] = draw(st.sampled_from(["auto", "cg", "newton"]))
    return X, y, params


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_a_fit_is_right_or_an_error(problem):
    X, y, params = problem
    model = KernelGDRegressor(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(X, y)
        except ValueError as exc:  # a clear error: it says what to change
            assert any(word in str(exc) for word in ("sigma", "Scale", "scale", "float", "degree"))
            return
    pred = model.predict(X)
    assert np.all(np.isfinite(pred)) and np.all(np.isfinite(model.loss_curve_))
    y64 = y.astype(np.float64)
    mse = np.mean((pred - y64) ** 2)
    base = np.var(y64) if params["fit_intercept"] else np.mean(y64**2)
    scale = np.mean(y64**2)
    # never worse than the intercept-only model (rounding in float32 kernels aside)
    slack = 1e-5 if model._compute_dtype == np.float32 else 1e-9
    assert mse <= base + slack * scale

    warned = any(issubclass(w.category, (ConvergenceWarning, NonPSDKernelWarning)) for w in caught)
    well_posed = (
        params["alpha"] >= 1e-3
        and params["n_centers"] is None
        and params["kernel"] in ("rbf", "laplacian")
        and model._compute_dtype == np.float64
    )
    if well_posed and not warned:
        K = kernel_matrix(X.astype(np.float64), kernel=params["kernel"], sigma=model.sigma_)
        best = dense_optimum(K, y64, params["alpha"], params["fit_intercept"])
        value = model.loss_curve_[-1]
        # a converged fit is within 1% of the optimum's gain over the baseline
        assert value - best <= 1e-2 * (base - best) + 1e-12 * scale


@st.composite
def classification_problems(draw):
    n = draw(st.integers(4, 40))
    d = draw(st.integers(1, 3))
    r = np.random.RandomState(draw(st.integers(0, 2**16)))
    X = r.randn(n, d) * 10.0 ** draw(st.integers(-3, 4)) + draw(st.sampled_from([0.0, 1e3]))
    n_classes = draw(st.sampled_from([2, 3]))
    y = r.randint(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)  # every class present
    params = dict(
        loss="logistic",
        kernel=draw(st.sampled_from(["rbf", "laplacian", "linear"])),
        alpha=draw(st.sampled_from(["auto", 1e-6, 1e-2])),
        fit_intercept=draw(st.booleans()),
        class_weight=draw(st.sampled_from([None, "balanced"])),
        solver=draw(st.sampled_from(["auto", "gd", "newton"])),
        n_centers=draw(st.sampled_from([None, None, max(2, n // 3)])),
        max_iter=500,
        options={"dtype": draw(st.sampled_from(["auto", "float32"]))},
    )
    if params["n_centers"] is not None:
        params["solver"] = draw(st.sampled_from(["auto", "newton"]))
    return X, y, params


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)) // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(classification_problems())
def test_a_logistic_fit_is_right_or_an_error(problem):
    from kernelgd import KernelGDClassifier
    from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss

    X, y, params = problem
    model = KernelGDClassifier(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.fit(X, y)
        except ValueError as exc:
            assert any(word in str(exc) for word in ("sigma", "Scale", "scale", "float"))
            return
    P = model.predict_proba(X)
    assert np.all(np.isfinite(P)) and np.allclose(P.sum(axis=1), 1.0)
    assert np.all(np.isfinite(model.loss_curve_))
    # never worse than the best constant model (or zero scores without intercept)
    binary = len(model.classes_) == 2
    loss = BinaryLogisticLoss if binary else MultinomialLoss
    Y = np.where(y == model.classes_[1], 1.0, -1.0)[:, None] if binary else np.eye(len(model.classes_))[y]
    w = np.ones(len(y)) if params["class_weight"] is None else \
        __import__("sklearn.utils.class_weight", fromlist=["x"]).compute_sample_weight("balanced", y)
    w = w / w.sum()
    _, base = loss.baseline(Y, w, params["fit_intercept"])
    assert model.loss_curve_[-1] <= base + 1e-6
