"""alpha="auto" for the squared loss: the generalized cross-validation rule on the landmarks' factor."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine, make_friedman1
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix
from kernelgd import _auto_alpha


def _brute_force_gcv(K, y, alpha):
    """GCV of kernel ridge with intercept on unweighted rows, and its degrees of freedom,
    from its dense hat matrix ``H = 1 1' / N + Q K Q (Q K Q + N alpha I)^-1`` (Q the centring)."""
    N = len(y)
    Q = np.eye(N) - 1.0 / N
    H = 1.0 / N + Q @ K @ Q @ np.linalg.inv(Q @ K @ Q + N * alpha * np.eye(N))
    return np.mean((y - H @ y) ** 2) / (1.0 - np.trace(H) / N) ** 2, np.trace(H)


def test_rule_picks_the_least_brute_force_gcv_error_of_its_grid_and_weights_are_repeats():
    # With every direction of the weighted kernel matrix in the factor the Nystroem model is the
    # exact one: its errors must be the dense GCV of the problem with each row repeated by its
    # integer weight (where df <= MAX_DF_SHARE * N; beyond, inf), and the choice the grid's largest
    # ridge within TIE of the least.
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.randn(30)
    counts = rng.randint(1, 4, 30)
    w = counts / counts.sum()
    K = kernel_matrix(X, kernel="rbf", sigma=1.0)
    s = np.sqrt(w)
    Q = np.eye(30) - np.outer(s, s)
    lam, V = np.linalg.eigh(Q @ (s[:, None] * K * s[None, :]) @ Q)
    kept = lam > 1e-12 * lam[-1]
    alpha, errors, alphas = _auto_alpha.choose(V[:, kept] * np.sqrt(lam[kept]), y[:, None], w, True, counts.sum())
    rows = np.repeat(np.arange(30), counts)
    brute, df = np.array([_brute_force_gcv(K[np.ix_(rows, rows)], y[rows], a) for a in alphas]).T
    allowed = df <= _auto_alpha.MAX_DF_SHARE * counts.sum()
    assert allowed.any() and not allowed.all()  # the cap binds on this grid
    assert_allclose(errors[allowed], brute[allowed], rtol=1e-6)
    assert np.all(np.isinf(errors[~allowed]))
    brute[~allowed] = np.inf
    tied = np.flatnonzero(brute <= brute.min() * (1 + _auto_alpha.TIE))
    assert alpha == alphas[tied[0]] == alphas[tied].max()
    assert alphas.max() == pytest.approx(lam.max())  # the grid spans the factor's spectrum
    assert alphas.min() == pytest.approx(lam[kept].min() / _auto_alpha.FLOOR_BELOW_SPECTRUM)


def test_auto_fits_the_same_model_as_its_ridge_given():
    X, y = make_friedman1(600, noise=0.5, random_state=0)
    auto = KernelGDRegressor(random_state=0, tol=1e-8).fit(X, y)
    assert auto.solver_ == "cg" and 0 < auto.alpha_ < 1
    given = KernelGDRegressor(alpha=auto.alpha_, random_state=0, tol=1e-8).fit(X, y)
    assert_allclose(auto.predict(X), given.predict(X), rtol=1e-6, atol=1e-6)


def test_auto_beats_the_interpolating_and_the_heavy_ridge_on_held_out_rows():
    X, y = make_friedman1(1500, noise=1.0, random_state=1)
    X_test, y_test = X[1000:], y[1000:]
    X, y = X[:1000], y[:1000]
    auto = KernelGDRegressor().fit(X, y).score(X_test, y_test)
    for alpha in (1e-9, 1e-1):
        assert auto > KernelGDRegressor(alpha=alpha, solver="cg", tol=1e-8).fit(X, y).score(X_test, y_test)


def test_auto_does_not_interpolate_small_sets_with_near_duplicate_rows():
    # Regression: on iris (105 training rows) GCV's least error was at df ~ N (alpha ~ 1e-10),
    # 0.867 test accuracy against SVC's 0.978 on this split.
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC

    X, y = load_iris(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    est = KernelGDClassifier().fit(X_tr, y_tr)
    assert est.alpha_ > 1e-5
    assert est.score(X_te, y_te) >= SVC().fit(X_tr, y_tr).score(X_te, y_te)


@pytest.mark.parametrize("load", [load_iris, load_wine, load_breast_cancer])
def test_default_classifier_and_regressor_fit_without_warnings(load):
    X, y = load(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = KernelGDClassifier(random_state=0).fit(X, y)
        reg = KernelGDRegressor(random_state=0).fit(X, y.astype(float))
    assert clf.alpha_ > 0 and reg.alpha_ > 0
    assert clf.score(X, y) > 0.9


def test_auto_with_integer_weights_equals_repeated_rows():
    rng = np.random.RandomState(0)
    X = rng.randn(50, 2)
    y = X[:, 0] ** 2 + 0.1 * rng.randn(50)
    counts = rng.randint(1, 4, 50)
    weighted = KernelGDRegressor(random_state=0, tol=1e-10).fit(X, y, sample_weight=counts)
    repeated = KernelGDRegressor(random_state=0, tol=1e-10).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    assert weighted.alpha_ == pytest.approx(repeated.alpha_, rel=1e-9)
    assert_allclose(weighted.predict(X), repeated.predict(X), atol=1e-3)  # solves at a small ridge


@pytest.mark.parametrize("y_kind", ["constant", "two rows"])
def test_auto_at_the_edges_is_finite(y_kind):
    X = np.arange(6.0)[:, None] if y_kind == "constant" else np.array([[0.0], [1.0]])
    y = np.ones(len(X)) if y_kind == "constant" else np.array([0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = KernelGDRegressor().fit(X, y)
    assert np.isfinite(reg.alpha_) and reg.alpha_ > 0
    assert np.all(np.isfinite(reg.predict(X)))


@pytest.mark.parametrize("n_centers", [None, 10])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(40, 2), (80, 3)])
def test_auto_on_a_kernel_constant_on_the_data_is_the_fallback_without_warnings(shape, n_centers, dtype):
    # Centred, a constant kernel is zero but for rounding: its factor's eigenvalues (~1e-32 to a few
    # eps) once made the rule choose alpha ~3e-32 to ~2e-16, and CG then warned of lost conjugacy
    rng = np.random.RandomState(0)
    X = np.full(shape, 3.0, dtype=dtype)
    y = rng.randn(shape[0])
    w = rng.uniform(0.5, 2.0, shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = KernelGDRegressor(n_centers=n_centers, random_state=0).fit(X, y, sample_weight=w)
        clf = KernelGDClassifier(n_centers=n_centers, random_state=0).fit(X, np.digitize(y, [-0.5, 0.5]))
    assert reg.alpha_ == _auto_alpha.FALLBACK_ALPHA and clf.alpha_ == _auto_alpha.FALLBACK_ALPHA
    assert_allclose(reg.predict(X), np.average(y, weights=w), rtol=1e-6)  # the intercept-only model


def test_auto_on_centers_reads_a_subsample(monkeypatch):
    monkeypatch.setattr(_auto_alpha, "MAX_ROWS", 300)
    X, y = make_friedman1(1000, noise=0.5, random_state=0)
    reg = KernelGDRegressor(n_centers=200, random_state=0).fit(X, y)
    assert reg.n_centers_ == 200 and 0 < reg.alpha_ < 1
    assert reg.score(X, y) > 0.8


def test_non_psd_kernel_auto_is_zero():
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    with pytest.warns(Warning):
        reg = KernelGDRegressor(kernel="sigmoid", max_iter=20).fit(X, X[:, 0])
    assert reg.alpha_ == 0.0 and reg.solver_ == "gd"


@pytest.mark.parametrize("rough", [False, True])
def test_auto_kernel_is_the_one_of_least_brute_force_gcv_error(rough):
    # 200 rows, under the factor's rank: each kernel's errors are the dense GCV of kernel ridge
    # over the grid, so the choice must be the kernel whose least dense GCV error is smaller.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (200, 2))
    f = np.sign(X[:, 0]) + (X[:, 1] > 0.5) if rough else np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    y = f + 0.1 * rng.randn(200)
    reg = KernelGDRegressor().fit(X, y)
    best = {}
    for kernel in ("rbf", "laplacian"):
        single = KernelGDRegressor(kernel=kernel).fit(X, y)
        K = kernel_matrix(X, kernel=kernel, sigma=single.sigma_)
        alphas = np.logspace(-9, 0, 37)
        brute = [(e, df) for e, df in (_brute_force_gcv(K, y, a) for a in alphas) if df <= 100]
        best[kernel] = min(e for e, _ in brute)
    assert reg.kernel_ == min(best, key=best.get) == ("laplacian" if rough else "rbf")
    given = KernelGDRegressor(kernel=reg.kernel_, alpha=reg.alpha_, tol=1e-8).fit(X, y)
    assert_allclose(reg.predict(X), given.predict(X), rtol=1e-5, atol=1e-5)


def test_auto_kernel_takes_the_rbf_for_the_logistic_loss_and_names_a_given_kernel():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    assert KernelGDClassifier(loss="logistic", kernel="auto").fit(X, y).kernel_ == "rbf"
    assert KernelGDClassifier().fit(X, y).kernel_ == "rbf"
    assert KernelGDRegressor(kernel="laplacian").fit(X, y).kernel_ == "laplacian"
    assert KernelGDRegressor(kernel="auto", alpha=1e-3).fit(X, y).alpha_ == 1e-3


@pytest.mark.parametrize("labels", [np.r_[np.zeros(30), np.ones(10)], np.repeat(np.arange(4), [5, 10, 10, 15])])
def test_curvature_share_is_the_logistic_hessian_at_the_class_shares_over_two(labels):
    # At the intercept-only model every row's probabilities are the class shares p_c, and the
    # softmax's (or sigmoid's) Hessian diagonal p_c (1 - p_c): the share is its class mean over
    # the squared loss's curvature, 2; weights count as repeated rows.
    from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss, SquaredLoss

    counts = np.random.RandomState(0).randint(1, 4, len(labels))
    w = counts / counts.sum()
    classes = np.unique(labels)
    shares = np.array([counts[labels == c].sum() for c in classes]) / counts.sum()
    if len(classes) == 2:
        loss, Y = BinaryLogisticLoss, np.where(labels == 1, 1.0, -1.0)[:, None]
        expected = shares[1] * (1 - shares[1]) / 2
    else:
        loss, Y = MultinomialLoss, (labels[:, None] == classes).astype(float)
        expected = np.mean(shares * (1 - shares)) / 2
    assert _auto_alpha.curvature_share(loss, Y, w, True) == pytest.approx(expected, rel=1e-12)
    # without an intercept the baseline is f = 0: probabilities 1/2, or 1/k per class
    k = len(classes)
    p0 = 0.5 if k == 2 else 1.0 / k
    assert _auto_alpha.curvature_share(loss, Y, w, False) == pytest.approx(p0 * (1 - p0) / 2, rel=1e-12)
    assert _auto_alpha.curvature_share(SquaredLoss, Y, w, True) == 1.0


@pytest.mark.parametrize("load, beats_platt", [(load_iris, True), (load_digits, True), (load_breast_cancer, False)])
def test_logistic_auto_alpha_is_gcvs_ridge_scaled_by_the_curvature_and_does_not_underfit(load, beats_platt):
    # The logistic default is the squared-loss classifier's GCV ridge (same landmarks: same seed)
    # times curvature_share, and its probabilities are not the underfit of C=1. On iris and digits
    # its held-out log-loss is below SVC(probability=True)'s (Platt scaling), an independent
    # reference; on breast cancer the two tie (0.1104 against 0.1102).
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC

    from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss

    X, y = load(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    logistic = KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    squared = KernelGDClassifier(random_state=0).fit(X_tr, y_tr)
    classes = np.unique(y_tr)
    w = np.full(len(y_tr), 1.0 / len(y_tr))
    if len(classes) == 2:
        share = _auto_alpha.curvature_share(BinaryLogisticLoss, np.where(y_tr == classes[1], 1.0, -1.0)[:, None], w, True)
    else:
        share = _auto_alpha.curvature_share(MultinomialLoss, (y_tr[:, None] == classes).astype(float), w, True)
    assert logistic.alpha_ == pytest.approx(squared.alpha_ * share, rel=1e-9)
    ours = log_loss(y_te, logistic.predict_proba(X_te))
    if beats_platt:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # probability=True, deprecated in scikit-learn 1.9
            platt = SVC(probability=True, random_state=0).fit(X_tr, y_tr)
        assert ours < log_loss(y_te, platt.predict_proba(X_te))
    C1 = KernelGDClassifier(loss="logistic", alpha=1 / (2 * len(y_tr))).fit(X_tr, y_tr)
    assert ours < log_loss(y_te, C1.predict_proba(X_te))
