"""Property-based tests: every fit is right or a clear error.

Over data scale (features from 1e-6 to 1e7) and shift, dtype, kernel,
solver, alpha (0 to 1e3), n_centers and the intercept, a fit either raises a
ValueError or returns finite predictions whose training objective is no
worse than the intercept-only model's. A fit that does not warn of
non-convergence must also agree with an independent reference: a dense
solve of the same objective (squared loss), or scikit-learn's
LogisticRegression on the kernel's explicit feature expansion (logistic).
Kernels with a width have k(x, x) = 1 at every width and offset, and
sigma="scale" makes them invariant to the units of X.
"""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from kernelgd import KernelGDClassifier, KernelGDClassifierCV, KernelGDRegressor, KernelGDRegressorCV, kernel_matrix
from kernelgd._solvers._common import NonPSDKernelWarning

KERNELS = ["rbf", "laplacian", "exponential", "linear", "polynomial"]
WIDTH_KERNELS = ["rbf", "laplacian", "exponential"]
ALPHAS = [0.0, 1e-16, 1e-10, 1e-6, 1e-3, 1e-1, 10.0, 1e3]


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
    X = r.randn(n, d) * 10.0 ** draw(st.integers(-6, 7)) + draw(st.sampled_from([0.0, 1e3, -1e6]))
    y = np.sin(X[:, 0] / (np.std(X[:, 0]) + 1e-300)) + 0.1 * r.randn(n)
    y = y * 10.0 ** draw(st.integers(-8, 8)) + draw(st.sampled_from([0.0, 5.0]))
    if draw(st.booleans()):
        X = X.astype(np.float32)
    params = dict(
        kernel=draw(st.sampled_from(KERNELS + ["auto"])),
        solver=draw(st.sampled_from(["auto", "gd", "cg", "eigenpro", "newton"])),
        alpha=draw(st.sampled_from(ALPHAS + ["auto"])),
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
        # cg without ridge solves the objective's normal equations: its least-squares fit counts too
        (model.alpha_ >= 1e-3 or model.solver_ == "cg")
        and params["n_centers"] is None
        and model.kernel_ in WIDTH_KERNELS
        and model._compute_dtype == np.float64
    )
    if well_posed and not warned:
        K = kernel_matrix(X.astype(np.float64), kernel=model.kernel_, sigma=model.sigma_)
        best = dense_optimum(K, y64, model.alpha_, params["fit_intercept"])
        value = model.loss_curve_[-1]
        # a converged fit is within 1% of the optimum's gain over the baseline
        assert value - best <= 1e-2 * (base - best) + 1e-12 * scale


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)), deadline=None)
@given(
    kernel=st.sampled_from(WIDTH_KERNELS),
    scale=st.integers(-6, 7),
    offset=st.sampled_from([0.0, 1.0, 50.0, 1e6]),
    width=st.integers(-8, 4),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_a_row_is_at_distance_zero_from_itself(kernel, scale, offset, width, dtype, seed):
    X = (np.random.RandomState(seed).randn(20, 3) * 10.0**scale + offset * 10.0**scale).astype(dtype)
    sigma = 10.0 ** (scale + width)
    K = kernel_matrix(X, kernel=kernel, sigma=sigma)
    # exact where rounding of |x|^2 - 2x'z + |z|^2 could matter; within sqrt(eps) elsewhere
    np.testing.assert_allclose(np.diagonal(K), 1.0, atol=np.sqrt(np.finfo(K.dtype).eps))


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)) // 3, deadline=None)
@given(
    kernel=st.sampled_from(WIDTH_KERNELS + ["poly"]),
    scale=st.integers(-6, 7),
    alpha=st.sampled_from([1e-6, 1e-3, 1e-1]),
    seed=st.integers(0, 2**16),
)
def test_sigma_scale_is_invariant_to_the_units_of_x(kernel, scale, alpha, seed):
    r = np.random.RandomState(seed)
    X = r.randn(40, 3)
    y = np.sin(X[:, 0]) + X[:, 1] + 0.1 * r.randn(40)
    params = dict(kernel=kernel, alpha=alpha, solver="cg", random_state=0, options={"dtype": "float64"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = KernelGDRegressor(**params).fit(X, y).predict(X)
        scaled = KernelGDRegressor(**params).fit(X * 10.0**scale, y).predict(X * 10.0**scale)
    np.testing.assert_allclose(scaled, ref, atol=1e-4 * np.std(y))


@st.composite
def classification_problems(draw):
    n = draw(st.integers(4, 40))
    d = draw(st.integers(1, 3))
    r = np.random.RandomState(draw(st.integers(0, 2**16)))
    X = r.randn(n, d) * 10.0 ** draw(st.integers(-6, 7)) + draw(st.sampled_from([0.0, 1e3]))
    n_classes = draw(st.sampled_from([2, 3, 4]))
    y = r.randint(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)  # every class present
    if draw(st.booleans()):  # a class of one row
        y[n_classes:] = np.where(y[n_classes:] == n_classes - 1, 0, y[n_classes:])
    if draw(st.booleans()):  # near-duplicate rows (and centers), with other labels
        k = max(1, n // 4)
        X[-k:] = X[:k] * (1 + 1e-9 * r.randn(k, d))
    params = dict(
        loss="logistic",
        kernel=draw(st.sampled_from(WIDTH_KERNELS + ["linear"])),
        alpha=draw(st.sampled_from(["auto"] + ALPHAS)),
        fit_intercept=draw(st.booleans()),
        class_weight=draw(st.sampled_from([None, "balanced"])),
        solver=draw(st.sampled_from(["auto", "gd", "newton"])),
        n_centers=draw(st.sampled_from([None, None, max(2, n // 3), n])),
        max_iter=500,
        options={"dtype": draw(st.sampled_from(["auto", "float32", "float64"]))},
    )
    if params["n_centers"] is not None:
        params["solver"] = draw(st.sampled_from(["auto", "newton"]))
    return X, y, params


def logistic_reference(K, y, classes, w, alpha, fit_intercept):
    """The logistic objective at LogisticRegression's fit on K's feature expansion.

    ``K = Phi Phi'`` with ``f = Phi z + b`` and ``|f|_H^2 = |z|^2``; scaled
    by 1 / (2 alpha), the objective is LogisticRegression's with
    C = 1 / (2 alpha) and sample weights w. Without ridge the reference takes
    alpha = 1e-8, an upper bound on the infimum: at C = inf LogisticRegression
    tells identical rows apart by the rounding in Phi. Eigenvalues within K's rounding (n eps times the
    largest) are no directions of K: a linear kernel on four rows near 1e3 (rank one) let the reference
    fit 7e-6 below the exact optimum along them.
    """
    lam, V = np.linalg.eigh(K)
    lam = np.where(lam > len(K) * np.finfo(float).eps * lam.max(), lam, 0.0)
    return features_logistic_reference(V * np.sqrt(lam), y, classes, w, alpha, fit_intercept)


def features_logistic_reference(Phi, y, classes, w, alpha, fit_intercept):
    """As ``logistic_reference``, on the features Phi (``f = Phi z + b``, ``|f|_H^2 = |z|^2``)."""
    from scipy.special import log_expit, logsumexp
    from sklearn.linear_model import LogisticRegression

    alpha = max(alpha, 1e-8)
    lr = LogisticRegression(C=1.0 / (2 * alpha), fit_intercept=fit_intercept, tol=1e-12, max_iter=20000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr.fit(Phi, y, sample_weight=w)
    F = lr.decision_function(Phi)
    if len(classes) == 2:
        Y = np.where(y == classes[1], 1.0, -1.0)
        value = -np.dot(w, log_expit(Y * F))
    else:
        value = np.dot(w, logsumexp(F, axis=1) - F[np.arange(len(y)), np.searchsorted(classes, y)])
    return value + alpha * np.sum(lr.coef_**2)


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)) // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(classification_problems())
@example(  # a rank-one linear kernel near 1e3: the reference fitted along K's rounding, below the optimum
    problem=(np.array([[1000.05056171], [1000.49995133], [999.00409107], [1000.69359851]]), np.array([0, 1, 0, 1]),
             {"loss": "logistic", "kernel": "linear", "alpha": 1e-6, "fit_intercept": False, "class_weight": None,
              "solver": "auto", "n_centers": None, "max_iter": 500, "options": {"dtype": "auto"}}),
)
@example(  # regression: without ridge, Newton's decrements grew fourfold a step along a flat direction and the fit
    # stopped as converged at a log-loss of 0.562 where the optimum is 0.545; it now goes on (here to max_iter, warned)
    problem=(np.array([[1000.00016243, 999.99993882], [999.99994718, 999.9998927], [1000.00008654, 999.99976985],
                       [1000.0001639, 999.99993676]]), np.array([0, 1, 0, 0]),
             {"loss": "logistic", "kernel": "linear", "alpha": 0.0, "fit_intercept": False, "class_weight": None,
              "solver": "auto", "n_centers": None, "max_iter": 500, "options": {"dtype": "auto"}}),
)
@example(  # a linear kernel on 2 centers near 1e3 varying by 1e-3: the one direction orthogonal to the offset,
    # values near 4e-6, was cut as the product's rounding (bounded by K_nm's Frobenius norm, not its spectral
    # one): 0.687 against the optimum's 0.588, silently
    problem=(np.array([[1000.00176405, 1000.00040016], [1000.00097874, 1000.00224089],
                       [1000.00186756, 999.99902272], [1000.00095009, 999.99984864]]), np.array([0, 1, 0, 1]),
             {"loss": "logistic", "kernel": "linear", "alpha": "auto", "fit_intercept": True, "class_weight": None,
              "solver": "auto", "n_centers": 2, "max_iter": 500, "options": {"dtype": "auto"}}),
)
def test_a_logistic_fit_is_right_or_an_error(problem):
    from sklearn.utils.class_weight import compute_sample_weight

    from kernelgd import KernelGDClassifier
    from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss

    X, y, params = problem
    model = KernelGDClassifier(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(X, y)
        except ValueError as exc:
            assert any(word in str(exc) for word in ("sigma", "Scale", "scale", "float"))
            return
    P = model.predict_proba(X)
    assert np.all(np.isfinite(P)) and np.allclose(P.sum(axis=1), 1.0)
    curve = np.asarray(model.loss_curve_)
    # a log-loss plus a squared norm: never negative, never inf
    assert np.all(np.isfinite(curve)) and np.all(curve >= 0)
    # never worse than the best constant model (or zero scores without intercept)
    binary = len(model.classes_) == 2
    loss = BinaryLogisticLoss if binary else MultinomialLoss
    Y = np.where(y == model.classes_[1], 1.0, -1.0)[:, None] if binary else np.eye(len(model.classes_))[y]
    w = np.ones(len(y)) if params["class_weight"] is None else compute_sample_weight("balanced", y)
    w = w / w.sum()
    _, base = loss.baseline(Y, w, params["fit_intercept"])
    assert curve[-1] <= base + 1e-6

    # a fit that does not warn is at the optimum, as LogisticRegression finds it
    warned = any(issubclass(c.category, (ConvergenceWarning, NonPSDKernelWarning)) for c in caught)
    # (gd's tol bounds the gradient's norm, which on an ill-conditioned kernel does not bound
    # the objective's error: a linear kernel on features ~1e3 stops at a gradient 1e-3 of its
    # initial one with the objective 25% above the optimum's)
    if warned or model._compute_dtype != np.float64 or model.solver_ == "gd":
        return
    X64 = X.astype(np.float64)
    if params["kernel"] == "linear" and np.abs(X64).max() > 1e4:
        return  # the reference's own eigendecomposition of K loses the centred part
    kernel = dict(kernel=params["kernel"], sigma=getattr(model, "sigma_", None))
    if model.n_centers_ < len(X):
        if not model.alpha_ > 0:
            return  # without ridge, centers fit at their floor's ridge (the user guide's "Large n: centers")
        # on centers the penalty is A'(K_mm + jitter I) A, FALKON's jitter: the features K_nm Z with
        # Z'(K_mm + jitter I) Z = I
        C = np.asarray(model.X_fit_, dtype=np.float64)
        K_mm = kernel_matrix(C, **kernel)
        lam, V = np.linalg.eigh(K_mm)
        jitter = len(C) * np.finfo(float).eps * np.mean(np.diag(K_mm))
        Phi = kernel_matrix(X64, C, **kernel) @ (V / np.sqrt(np.clip(lam, 0.0, None) + jitter))
        ref = features_logistic_reference(Phi, y, model.classes_, w, model.alpha_, params["fit_intercept"])
    else:
        K = kernel_matrix(X64, **kernel)
        ref = logistic_reference(K, y, model.classes_, w, model.alpha_, params["fit_intercept"])
    # Without ridge (below the reference's 1e-8) the infimum is not attained: near-duplicate
    # rows with other labels make directions of eigenvalue ~1e-9 (laplacian, exponential)
    # whose gain no stopping test sees; the check there is that the fit went most of the
    # way, not the class prior.
    slack = 1e-3 * max(base - ref, 0.0) if model.alpha_ >= 1e-8 else 1e-2 * base
    assert curve[-1] <= ref + slack + 1e-6, (curve[-1], ref, base)


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)) // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(classification_problems(), st.sampled_from(["scale", "noise"]), st.integers(1, 8))
@example(  # the small logistic default's leave-one-out ridge was skipped on a warm start: another alpha_
    problem=(np.array([[1.76405235], [0.40015721], [0.97873798], [2.2408932]]), np.array([0, 1, 1, 0]),
             {"loss": "logistic", "kernel": "rbf", "alpha": "auto", "fit_intercept": False, "class_weight": None,
              "solver": "auto", "n_centers": None, "max_iter": 500, "options": {"dtype": "auto"}}),
    perturbation="scale", exponent=1,
)
def test_a_warm_start_from_any_coefficients_is_right_or_says_so(problem, perturbation, exponent):
    """A warm start from perturbed coefficients (predictions saturated at large scales) ends where a
    cold fit does, or warns; it never leaks numpy's floating-point warnings."""
    from kernelgd import KernelGDClassifier

    X, y, params = problem
    params = dict(params, solver="newton", options={"dtype": "float64"}, random_state=0)
    with warnings.catch_warnings(record=True) as caught_cold:
        warnings.simplefilter("always")
        try:
            cold = KernelGDClassifier(**params).fit(X, y)
        except ValueError:
            return
    model = KernelGDClassifier(warm_start=True, **params).fit(X, y)
    coef = model.dual_coef_
    if perturbation == "scale":
        model.dual_coef_ = coef * 10.0**exponent
    else:
        noise = np.random.RandomState(exponent).randn(*coef.shape)
        model.dual_coef_ = coef + noise * 10.0**exponent * (np.abs(coef).mean() + 1e-12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    assert not [c for c in caught if issubclass(c.category, RuntimeWarning)], [str(c.message) for c in caught]
    assert np.all(np.isfinite(model.predict_proba(X)))
    warned = any(issubclass(c.category, (ConvergenceWarning, NonPSDKernelWarning)) for c in caught + caught_cold)
    if warned or not cold.alpha_ >= 1e-8:
        return  # without ridge the infimum is not attained: cold and warm fits stop at other points
    value, reference = model.loss_curve_[-1], cold.loss_curve_[-1]
    assert value <= reference + 1e-3 * abs(reference) + 1e-6, (value, reference)


ZERO_WEIGHT_CASES = {
    "regressor": (KernelGDRegressor, {}, 1e-6),
    "centers": (KernelGDRegressor, {"n_centers": 15}, 1e-6),
    "laplacian": (KernelGDRegressor, {"kernel": "laplacian"}, 1e-6),
    "classifier": (KernelGDClassifier, {}, 1e-6),
    "logistic": (KernelGDClassifier, {"loss": "logistic"}, 1e-3),  # Newton stops within tol of the optimum
    # the searches' grids stop at 1e-6: at tinier ridges their scores carry the eigensolver's rounding
    # (1e-5 of a score at alpha=1e-10), which the rows of weight zero change, and near-ties may flip
    "regressor-cv": (KernelGDRegressorCV, {"kernel": "rbf", "alphas": np.logspace(-6, 0, 7)}, 1e-5),
    "classifier-cv": (KernelGDClassifierCV, {"loss": "logistic", "alphas": np.logspace(-6, 0, 7)}, 1e-3),
}


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)) // 5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(ZERO_WEIGHT_CASES)), st.integers(0, 2**16), st.integers(40, 90),
       st.sampled_from([1e-3, 1.0, 1e3]))
# the ridge rule's least ridge and CG's least-squares threshold once counted the rows of weight zero:
# 40 rows chose 3.2e-8, the 28 without them 5.6e-8
@example(case="regressor", seed=241, n=40, scale=1.0)
def test_zero_weight_rows_are_the_fit_without_them(case, seed, n, scale):
    # A row of weight zero neither trains, scores a fold, judges a scale nor sets a ridge's floor: the fit
    # with it is the fit without it (the CV estimators once judged ARD scales, and drew K-fold test folds,
    # on such rows)
    Estimator, params, rtol = ZERO_WEIGHT_CASES[case]
    r = np.random.RandomState(seed)
    X = r.randn(n, 3) * scale
    f = np.sin(2 * X[:, 0] / scale) + X[:, 1] / scale
    target = f + 0.1 * r.randn(n) if Estimator in (KernelGDRegressor, KernelGDRegressorCV) else np.digitize(f, [-0.5, 0.5])
    w = r.uniform(0.5, 2.0, n)
    zero = r.rand(n) < 0.3
    w[zero] = 0.0
    if Estimator in (KernelGDClassifier, KernelGDClassifierCV) and np.min(np.bincount(target[~zero], minlength=3)) < 5:
        return  # too few rows of a class to split or to fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the property holds for what each fit reaches
        weighted = Estimator(random_state=0, **params).fit(X, target, sample_weight=w)
        dropped = Estimator(random_state=0, **params).fit(X[~zero], target[~zero], sample_weight=w[~zero])
    out = (lambda m: m.decision_function(X)) if hasattr(weighted, "decision_function") else (lambda m: m.predict(X))
    a, b = out(weighted), out(dropped)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.max(np.abs(b)))


def _three_classes(n, d, seed):
    r = np.random.RandomState(seed)
    X = r.randn(n, d)
    f = np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] ** 2 + 0.5 * r.randn(n)
    return X, (f > np.median(f)).astype(int) + (f > np.quantile(f, 0.8)), r


@pytest.mark.parametrize("case", ["rule's factor", "repeated rows", "centers"])
def test_zero_weight_rows_change_no_output_layer(case):
    # The squared loss's output layer reads left-out outputs from a factor of K, which rows of weight zero once
    # changed (probabilities moved by 0.03 to 0.6): past 1,000 rows the ridge rule's factor of the weighted rows
    # was not reused and the layer drew landmarks of its own; the distinct rows that make the factor exact were
    # counted with the rows of weight zero; a centers model's layer drew its factor on every row
    X, y, r = _three_classes(1100, 8, 5)
    params, n_zero = {}, 5
    if case == "repeated rows":  # 900 distinct rows of positive weight, 1,040 with the rows of weight zero
        X, y, r = _three_classes(1100, 8, 2)
        X, y, n_zero = np.vstack([X[:900], X[:200]]), np.r_[y[:900], y[:200]], 140
    elif case == "centers":  # a few distinct values per feature: the factor's last pivots follow rounding
        X, y, r = _three_classes(1500, 3, 4)
        X[r.rand(*X.shape) < 0.5] = 0.0
        params = {"n_centers": 200}
    w = r.uniform(0.2, 3.0, len(y))
    Xz = r.randn(n_zero, X.shape[1])
    weighted = KernelGDClassifier(random_state=0, **params).fit(
        np.vstack([X, Xz]), np.r_[y, r.randint(0, 3, n_zero)], sample_weight=np.r_[w, np.zeros(n_zero)])
    dropped = KernelGDClassifier(random_state=0, **params).fit(X, y, sample_weight=w)
    X_test = r.randn(50, X.shape[1])
    # the ridge is exactly the same only where the rule's choice is no tie within rounding: then weights scaled
    # (other rounding) choose it too
    assert KernelGDClassifier(random_state=0, **params).fit(X, y, sample_weight=3 * w).alpha_ == dropped.alpha_
    assert weighted.alpha_ == dropped.alpha_
    np.testing.assert_allclose(weighted.predict_proba(X_test), dropped.predict_proba(X_test), atol=1e-5)


def test_zero_weight_rows_change_no_output_layer_past_its_rows(monkeypatch):
    # Past COMBINER_ROWS rows the output layer reads a seeded draw of them, which once counted the rows of
    # weight zero: drawn among them, such rows took weighted rows' places
    from kernelgd import _combiner

    monkeypatch.setattr(_combiner, "COMBINER_ROWS", 300)
    X, y, r = _three_classes(500, 5, 2)
    w = r.uniform(0.2, 3.0, len(y))
    zero = np.zeros(len(y) + 60, dtype=bool)
    zero[r.choice(len(zero), 60, replace=False)] = True  # interleaved
    X_all, y_all, w_all = np.empty((len(zero), X.shape[1])), np.empty(len(zero), dtype=int), np.zeros(len(zero))
    X_all[~zero], y_all[~zero], w_all[~zero] = X, y, w
    X_all[zero], y_all[zero] = r.randn(60, X.shape[1]), r.randint(0, 3, 60)
    params = dict(random_state=0, alpha=1e-3, sigma=2.0)
    weighted = KernelGDClassifier(**params).fit(X_all, y_all, sample_weight=w_all)
    dropped = KernelGDClassifier(**params).fit(X, y, sample_weight=w)
    X_test = r.randn(50, X.shape[1])
    np.testing.assert_allclose(weighted.predict_proba(X_test), dropped.predict_proba(X_test), atol=1e-5)


def test_interleaved_zero_weight_rows_change_no_held_out_fold():
    # The logistic rule's held-out folds drew one number per group of identical rows by group number, which rows
    # of weight zero among the others shifted: other folds, another output layer (probabilities 0.085 apart)
    X, y, r = _three_classes(600, 5, 0)
    w = r.uniform(0.2, 3.0, len(y))
    zero = np.zeros(len(y) + 60, dtype=bool)
    zero[r.choice(len(zero), 60, replace=False)] = True
    X_all, y_all, w_all = np.empty((len(zero), X.shape[1])), np.empty(len(zero), dtype=int), np.zeros(len(zero))
    X_all[~zero], y_all[~zero], w_all[~zero] = X, y, w
    X_all[zero], y_all[zero] = r.randn(60, X.shape[1]), r.randint(0, 3, 60)
    weighted = KernelGDClassifier(loss="logistic", random_state=0).fit(X_all, y_all, sample_weight=w_all)
    dropped = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=w)
    X_test = r.randn(100, X.shape[1])
    assert weighted.alpha_ == pytest.approx(dropped.alpha_, rel=1e-12)
    # Newton stops within tol of the optimum: probabilities agree to about 1e-3
    np.testing.assert_allclose(weighted.predict_proba(X_test), dropped.predict_proba(X_test), atol=1e-2)


def test_rows_of_zero_weight_and_copies_do_not_set_the_kernel_matrixs_precision():
    # Regression: dtype="auto" stored K in float32 above 4,096 rows, counting rows of weight zero and copies: 4,000
    # rows and 200 of weight zero were fitted in float32 (and a smooth loss's rule read float32's floor), without
    # them in float64; the rows repeated took another ridge than their integer weights (probabilities 0.03 apart)
    r = np.random.RandomState(0)
    X = r.randn(4000, 3)
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * r.randn(4000)
    X_test = r.randn(100, 3)
    dropped = KernelGDRegressor(random_state=0).fit(X, y)
    weighted = KernelGDRegressor(random_state=0).fit(np.r_[X, r.randn(200, 3)], np.r_[y, r.randn(200)],
                                                    sample_weight=np.r_[np.ones(4000), np.zeros(200)])
    counts = np.r_[np.full(100, 2), np.ones(3900, dtype=int)]
    repeated = KernelGDRegressor(random_state=0).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    twice = KernelGDRegressor(random_state=0).fit(X, y, sample_weight=counts)
    for model in (dropped, weighted, repeated, twice):
        assert model._compute_dtype == np.float64
    assert weighted.alpha_ == pytest.approx(dropped.alpha_, rel=1e-9)
    assert repeated.alpha_ == pytest.approx(twice.alpha_, rel=1e-9)
    np.testing.assert_allclose(weighted.predict(X_test), dropped.predict(X_test), atol=1e-3 * y.std())
    np.testing.assert_allclose(repeated.predict(X_test), twice.predict(X_test), atol=1e-3 * y.std())


@pytest.mark.parametrize("n_zero, seed", [(50, 3), (1000, 0)])
def test_zero_weight_rows_do_not_size_the_logistic_ridge_path(n_zero, seed):
    # The logistic rule's leave-one-out path on a small set counted rows of weight zero: 50 of them beside 150
    # rows took it past the size that compares widths (another width and ridge), 1,000 past the size of its
    # dense system (the rule's ridge unchecked); probabilities moved by 0.2 and 0.4
    X, y, r = _three_classes(150, 4, seed)
    Xz, yz = r.randn(n_zero, X.shape[1]), r.randint(0, 3, n_zero)
    weighted = KernelGDClassifier(loss="logistic", random_state=0).fit(
        np.vstack([X, Xz]), np.r_[y, yz], sample_weight=np.r_[np.ones(len(y)), np.zeros(n_zero)])
    dropped = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    X_test = r.randn(50, X.shape[1])
    assert weighted.sigma_ == pytest.approx(dropped.sigma_, rel=1e-12)
    assert weighted.alpha_ == pytest.approx(dropped.alpha_, rel=1e-12)
    np.testing.assert_allclose(weighted.predict_proba(X_test), dropped.predict_proba(X_test), atol=1e-4)


@settings(max_examples=int(__import__("os").environ.get("KGD_EXAMPLES", 150)) // 5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(ZERO_WEIGHT_CASES)), st.integers(0, 2**16), st.integers(40, 90),
       st.sampled_from([1e-3, 1e-1, 10.0, 1e4]))
@example(  # ARD's ridge, learned by L-BFGS to its default tolerances, moved 1.3e-6 with the weights' last bits
    case="regressor-cv", seed=88, n=73, factor=0.1)
def test_scaling_every_weight_changes_nothing(case, seed, n, factor):
    # Weights are relative: the rules that choose a ridge, a width or the noise once read them as
    # counts of observations (weights of 10 then chose alpha 2e-14, and 1 / n the fallback ridge)
    Estimator, params, rtol = ZERO_WEIGHT_CASES[case]
    r = np.random.RandomState(seed)
    X = r.randn(n, 3)
    f = np.sin(2 * X[:, 0]) + X[:, 1]
    regression = Estimator in (KernelGDRegressor, KernelGDRegressorCV)
    target = f + 0.1 * r.randn(n) if regression else np.digitize(f, [-0.5, 0.5])
    if not regression and np.min(np.bincount(target, minlength=3)) < 5:
        return  # too few rows of a class to split or to fit
    w = r.uniform(0.5, 2.0, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the property holds for what each fit reaches
        given = Estimator(random_state=0, **params).fit(X, target, sample_weight=w)
        scaled = Estimator(random_state=0, **params).fit(X, target, sample_weight=factor * w)
    # a ridge the grid or a closed form chooses is the same to rounding; one an optimizer learns (ARD's), to its
    # tolerance, as the predictions are
    learned = np.ndim(getattr(given, "sigma_", None)) > 0  # ARD's scales kept: alpha_ is L-BFGS's too
    assert scaled.alpha_ == pytest.approx(given.alpha_, rel=rtol if learned else 1e-6)
    out = (lambda m: m.decision_function(X)) if hasattr(given, "decision_function") else (lambda m: m.predict(X))
    a, b = out(scaled), out(given)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.max(np.abs(b)))
    if regression and not isinstance(given, KernelGDRegressorCV):
        np.testing.assert_allclose(scaled.predict(X[:5], return_std=True)[1], given.predict(X[:5], return_std=True)[1],
                                   rtol=1e-4)
