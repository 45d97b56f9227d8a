"""alpha="auto" for the squared loss: the leave-one-out rule on the landmarks' factor."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import (
    load_breast_cancer, load_digits, load_iris, load_wine, make_classification, make_friedman1, make_gaussian_quantiles,
    make_moons,
)
from sklearn.preprocessing import StandardScaler

import kernelgd._operator
from kernelgd import KernelGDClassifier, KernelGDRegressor, _auto_alpha, _loo_ridge, _replicates, kernel_matrix


def _brute_force_gcv(K, y, w, alpha, N):
    """GCV of weighted kernel ridge with intercept (``f = K a + b`` minimising ``sum_i w_i (y_i - f_i)^2
    + alpha ||f||^2``, w summing to 1) from its dense hat matrix, and its degrees of freedom."""
    n = len(y)
    # stationarity: (W K + alpha I) a + W 1 b = W y and w'K a + b = w'y
    M = np.block([[w[:, None] * K + alpha * np.eye(n), w[:, None]], [(w @ K)[None, :], np.ones((1, 1))]])
    H = np.hstack([K, np.ones((n, 1))]) @ np.linalg.solve(M, np.vstack([np.diag(w), w[None, :]]))
    return w @ (y - H @ y) ** 2 / (1.0 - np.trace(H) / N) ** 2, np.trace(H)


def _refit_without(A, Y, w, out, alpha, penalty):
    """The weighted ridge on features A (``min sum_i v_i |y_i - A_i c|^2 + alpha c' penalty c``, v = w with the
    rows ``out`` at zero), by a dense solve: its predictions on the rows ``out``."""
    v = np.where(out, 0.0, w)
    # least squares: copies of a row make K singular, and the minimiser's c with it (not its predictions)
    c = np.linalg.lstsq(A.T @ (v[:, None] * A) + alpha * penalty, A.T @ (v[:, None] * Y), rcond=None)[0]
    return A[out] @ c


def _brute_force_loo(K, y, w, alpha, group_of=None):
    """Leave-one-group-out squared error of weighted kernel ridge with intercept (``f = K a + b`` minimising
    ``sum_i w_i (y_i - f_i)^2 + alpha a'K a``, w summing to 1), each group of rows refitted without by a
    dense solve, its rows scored ``sum_i w_i (y_i - f_i)^2``."""
    n = len(y)
    groups = np.arange(n) if group_of is None else group_of
    A = np.hstack([np.ones((n, 1)), K])
    penalty = np.block([[np.zeros((1, 1)), np.zeros((1, n))], [np.zeros((n, 1)), K]])
    error = 0.0
    for g in np.unique(groups):
        out = groups == g
        error += w[out] @ (y[out] - _refit_without(A, y[:, None], w, out, alpha, penalty)[:, 0]) ** 2
    return error


def _repeated_rows_problem():
    """``(y, w, K, lam, kept, group_of, factor)``: 30 weighted rows, six of them repeats with noisy targets,
    and a factor of the centred, weighted rbf kernel matrix with every direction (the exact model)."""
    rng = np.random.RandomState(0)
    X = rng.randn(24, 2)
    copies = np.r_[np.arange(24), [0, 0, 3, 5, 5, 5]]
    X, counts = X[copies], rng.randint(1, 4, len(copies))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.randn(len(copies))
    w = counts / counts.sum()
    K = kernel_matrix(X, kernel="rbf", sigma=1.0)
    s = np.sqrt(w)
    Q = np.eye(len(w)) - np.outer(s, s)
    lam, V = np.linalg.eigh(Q @ (s[:, None] * K * s[None, :]) @ Q)
    kept = lam > 1e-12 * lam[-1]
    return y, w, K, lam, kept, _replicates.replicate_groups(X)[0], V[:, kept] * np.sqrt(lam[kept])


def _assert_the_grid_spans(alphas, top, floor):
    # Lattice points 10 ** (k / STEPS_PER_DECADE), one step apart, from the first at or above the
    # factor's largest eigenvalue to the first at or below the floor: the grid spans the spectrum
    k = np.log10(alphas) * _auto_alpha.STEPS_PER_DECADE
    assert_allclose(k, np.round(k), atol=1e-9)
    assert_allclose(np.diff(np.round(k)), -1.0)
    step = 10.0 ** (1.0 / _auto_alpha.STEPS_PER_DECADE)
    assert top <= alphas.max() < top * step * (1 + 1e-12)
    assert floor / step < alphas.min() * (1 + 1e-12) and alphas.min() <= floor


def test_the_ridges_do_not_move_with_the_smallest_eigenvalue():
    # Regression: the grid was spaced evenly down to a tenth of the smallest eigenvalue, which sits at
    # rounding; under OpenBLAS's Haswell kernels weights and repeated rows then chose ridges 0.13% apart
    lam = np.logspace(-9.1, -0.1, 50)
    for factor in (1.0 + 1e-6, 0.5, 2.0):  # the smallest eigenvalue's rounding, and more
        moved = lam.copy()
        moved[0] *= factor
        a, b = _auto_alpha.ridge_grid(lam), _auto_alpha.ridge_grid(moved)
        shared = min(len(a), len(b))
        assert_array_equal(a[:shared], b[:shared])  # the same ridges, only more or fewer of them
        assert abs(len(a) - len(b)) <= 2


def test_no_ridge_below_the_least_ridge_but_the_lattice_stays():
    lam = np.logspace(-14, 0, 30)
    full = _auto_alpha.ridge_grid(lam)
    step = 10.0 ** (1.0 / _auto_alpha.STEPS_PER_DECADE)
    for least in (3e-9, 1e-9, 1e-20):
        alphas = _auto_alpha.ridge_grid(lam, least)
        assert_array_equal(alphas, full[: len(alphas)])  # the same lattice points, fewer of them
        assert alphas.min() >= least and (alphas.min() < least * step * (1 + 1e-12) or len(alphas) == len(full))
    assert_array_equal(_auto_alpha.ridge_grid(lam, 10.0), full[:1])  # above the spectrum: its top alone


def test_separable_classes_take_no_ridge_below_the_solvers_least_squares_threshold():
    # Regression: on four separated blobs the codes' left-out error fell to the spectrum's floor (1e-10 at
    # 1,200 rows, 1.8e-10 at 3,000), below CG's LEAST_SQUARES_RIDGE, whose least-squares mode then took
    # an eigendecomposition of K (2,000 rows: 4 s) or hundreds of products (3,000 rows: 350) for the
    # same interpolant; at the least ridge CG takes about 10
    from sklearn.datasets import make_blobs

    from kernelgd._solvers.cg import LEAST_SQUARES_RIDGE

    X, y = make_blobs(1200, 5, centers=4, random_state=5)
    X = StandardScaler().fit_transform(X)
    for seed in range(3):
        model = KernelGDClassifier(random_state=seed).fit(X, y)
        assert model.alpha_ >= LEAST_SQUARES_RIDGE / len(y)  # rbf: k(x, x) = 1, and w sums to 1
        assert model.n_iter_ <= 20 and model.score(X, y) == 1.0


def test_a_smooth_loss_on_nearly_separable_classes_converges_at_its_defaults():
    # Regression: on circles the rule's ridge for the labels fell to the spectrum's floor, 4e-16 after
    # the curvature's scale, and Newton crept to max_iter=1000 with a ConvergenceWarning (9 s at 3,000
    # rows, test log-loss 0.26 against 0.04 at the least ridge)
    from sklearn.datasets import make_circles

    X, y = make_circles(3000, noise=0.1, factor=0.5, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert model.n_iter_ < 100 and model.score(X, y) > 0.98


@pytest.mark.parametrize("split", [False, True])
def test_rule_picks_the_least_brute_force_leave_one_out_error_of_the_groups_of_rows(split, monkeypatch):
    # Up to EXACT_MAX_ROWS rows the factor has every direction of the weighted kernel matrix, so the
    # Nystroem model is the exact one: its errors must be those of refits without each group of identical
    # rows, and the choice the grid's largest ridge within TIE of the least. split: the factor's products
    # on two uneven row batches (as on a thread pool), the left-out predictions one ridge per product.
    y, w, K, lam, kept, group_of, factor = _repeated_rows_problem()
    pool = None
    if split:
        monkeypatch.setattr(_auto_alpha, "LEFT_OUT_BLOCK", 1)
        n = factor.shape[0]
        pool = (lambda func, parts: [func(rows) for rows in parts]), [slice(0, n // 3), slice(n // 3, n)]
    alpha, errors, alphas = _auto_alpha.choose(factor, y[:, None], w, True, group_of, exact=True, pool=pool)[:3]
    brute = np.array([_brute_force_loo(K, y, w, a, group_of) for a in alphas])
    assert_allclose(errors, brute, rtol=1e-6)
    tied = np.flatnonzero(brute <= brute.min() * (1 + _auto_alpha.TIE))
    assert alpha == alphas[tied[0]] == alphas[tied].max()
    assert 0 < tied[0] < len(alphas) - 1  # an inner minimum: the grid brackets it
    _assert_the_grid_spans(alphas, lam.max(), lam[kept].min() / _auto_alpha.FLOOR_BELOW_SPECTRUM)


def test_beyond_the_exact_rows_the_rule_picks_the_least_brute_force_gcv_error_of_the_distinct_rows():
    # A factor of more rows than EXACT_MAX_ROWS (exact=False) is scored by GCV. With every direction
    # of the weighted kernel matrix in the factor the Nystroem model is the exact one: its errors must
    # be the dense GCV of the distinct rows (each with its copies' summed
    # weight and weighted mean target, N Kish's effective number of them) where df <= MAX_DF_SHARE * N
    # (beyond, inf), and the choice the grid's largest ridge within TIE of the least.
    y, w, K, lam, kept, group_of, factor = _repeated_rows_problem()
    alpha, errors, alphas = _auto_alpha.choose(factor, y[:, None], w, True, group_of)[:3]
    W = np.bincount(group_of, weights=w)
    y_bar = np.bincount(group_of, weights=w * y) / W
    first = np.unique(group_of, return_index=True)[1]
    N = 1.0 / np.sum(W**2)
    brute, df = np.array([_brute_force_gcv(K[np.ix_(first, first)], y_bar, W, a, N) for a in alphas]).T
    allowed = df <= _auto_alpha.MAX_DF_SHARE * N
    assert allowed.any() and not allowed.all()  # the cap binds on this grid
    assert_allclose(errors[allowed], brute[allowed], rtol=1e-6)
    assert np.all(np.isinf(errors[~allowed]))
    brute[~allowed] = np.inf
    tied = np.flatnonzero(brute <= brute.min() * (1 + _auto_alpha.TIE))
    assert alpha == alphas[tied[0]] == alphas[tied].max()
    _assert_the_grid_spans(alphas, lam.max(), lam[kept].min() / _auto_alpha.FLOOR_BELOW_SPECTRUM)


@pytest.mark.parametrize("n_centers", [None, 40])
def test_repeated_rows_and_scaled_weights_choose_the_ridge_of_the_rows_once(n_centers):
    # Regression: GCV counted each copy of a row as an observation of its own; the copies agree, so
    # every row given twice chose alpha 2e-14 and a test RMSE of 24.9 against 0.25 once, and weights
    # of 10 the same, while weights of 1 / n took the fallback ridge 1 (test RMSE 0.98)
    rng = np.random.RandomState(0)
    X = rng.normal(size=(250, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.randn(250)
    X_test = rng.normal(size=(1000, 3))
    y_test = np.sin(2 * X_test[:, 0]) + 0.5 * X_test[:, 1] ** 2

    def fit(X, y, w=None):
        return KernelGDRegressor(n_centers=n_centers, random_state=0).fit(X, y, sample_weight=w)

    once = fit(X, y)
    rmse = np.sqrt(np.mean((once.predict(X_test) - y_test) ** 2))
    assert rmse < 0.4
    twice = np.r_[np.arange(250), np.arange(250)]
    for model in (fit(X[twice], y[twice]), fit(X, y, np.full(250, 10.0)), fit(X, y, np.full(250, 1 / 250))):
        assert model.alpha_ == pytest.approx(once.alpha_, rel=1e-3)  # the landmarks may differ
        assert np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)) < 1.1 * rmse
    some = np.r_[np.arange(250), np.arange(125)]  # a third of the rows repeated
    assert np.sqrt(np.mean((fit(X[some], y[some]).predict(X_test) - y_test) ** 2)) < 1.1 * rmse


def test_replicate_groups_of_dense_sparse_and_float32_rows():
    rng = np.random.RandomState(0)
    X = rng.randn(6, 3)
    X = np.r_[X, X[[1, 4, 1]], np.zeros((1, 3)), -np.zeros((1, 3))]  # 0.0 and -0.0 rows are equal
    expected = [0, 1, 2, 3, 4, 5, 1, 4, 1, 6, 6]
    for A in (X, X.astype(np.float32), sp.csr_matrix(X), sp.csc_matrix(X)):
        group_of, n_groups = _replicates.replicate_groups(A)
        assert n_groups == 7 and list(group_of) == expected  # numbered in the order of first rows
    group_of, n_groups = _replicates.replicate_groups(rng.randn(20, 2))
    assert n_groups == 20 and list(group_of) == list(range(20))


def test_subset_groups_are_the_groups_of_the_rows_taken():
    rng = np.random.RandomState(0)
    X = rng.randn(8, 2)[[0, 1, 2, 1, 3, 0, 4, 1, 5, 6]]
    group_of = _replicates.distinct_groups(X)
    assert group_of is not None and _replicates.distinct_groups(rng.randn(5, 2)) is None
    for rows in ([9, 3, 0, 1, 5], [2, 4, 6], np.arange(10), [7, 3]):
        taken = _replicates.distinct_groups(X[rows])
        subset = _replicates.subset_groups(group_of, np.asarray(rows))
        assert (subset is None and taken is None) or list(subset) == list(taken)


def test_draws_take_groups_of_identical_rows_so_weights_and_the_rows_repeated_draw_alike():
    # Regression: the rules' random rows (the check's, the subsamples') were drawn as rows, so the rows repeated
    # drew other rows than their integer weights (and twins, which leave-one-out predicts by each other).
    rng = np.random.RandomState(0)
    X = np.round(rng.randn(300, 2))  # 40-odd distinct rows, most repeated
    counts = rng.randint(1, 4, len(X))
    w = counts.astype(float)
    w[::7] = 0.0  # rows of zero weight draw nothing
    repeated = np.repeat(X, counts, axis=0)
    drawn = {}
    for name, rows, weights in (("weighted", X, w), ("repeated", repeated, np.repeat(w, counts))):
        group_of = _replicates.distinct_groups(rows)
        drawn[name] = [_replicates.draw_groups(weights, group_of, n, np.random.RandomState(3)) for n in (5, 20, 500)]
        for idx in drawn[name]:
            assert np.all(weights[idx] > 0) and np.all(np.diff(idx) > 0)
            # every copy of a row drawn is drawn
            assert_array_equal(np.isin(group_of, group_of[idx]) & (weights > 0), np.isin(np.arange(len(rows)), idx))
        drawn[name] = [np.unique(rows[idx], axis=0) for idx in drawn[name]]
    for ours, theirs in zip(drawn["weighted"], drawn["repeated"]):
        assert_array_equal(ours, theirs)
    assert [len(d) for d in drawn["weighted"]] == [5, 20, len(np.unique(X[w > 0], axis=0))]
    # without repeated rows, rng.choice of the rows of positive weight
    Z = rng.randn(50, 2)
    assert_array_equal(_replicates.draw_groups(w[:50], None, 10, np.random.RandomState(3)),
                       np.sort(np.random.RandomState(3).choice(np.flatnonzero(w[:50] > 0), 10, replace=False)))
    assert_array_equal(_replicates.draw_groups(w[:50], _replicates.replicate_groups(Z)[0], 10,
                                               np.random.RandomState(3)),
                       _replicates.draw_groups(w[:50], None, 10, np.random.RandomState(3)))


def test_rows_of_few_significant_bits_hash_apart():
    # small integers (pixels) and float32 values read as float64 end in dozens of zero bits, which a
    # product of odd multipliers keeps: 34,000 of 200,000 distinct rows of 4 pixels shared a hash (13 of
    # 10^6 float32 rows of 20 features), and the groups then took three sorts instead of one
    rng = np.random.RandomState(0)
    pixels = np.unique(rng.randint(0, 256, size=(200_000, 4)).astype(np.float64), axis=0)
    wide = rng.randn(200_000, 20).astype(np.float32).astype(np.float64)
    for A in (pixels, wide, pixels.astype(np.float32)):
        assert len(np.unique(_replicates._row_hashes(A))) == A.shape[0]


def test_replicate_groups_never_merge_distinct_rows_that_share_a_hash(monkeypatch):
    # every row hashed alike: the contents alone must tell them apart
    monkeypatch.setattr(_replicates, "_column_multipliers", lambda n: np.zeros(n, dtype=np.uint64))
    X = np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 2.0], [0.0, 0.0]])
    for A in (X, sp.csr_matrix(X)):
        group_of, n_groups = _replicates.replicate_groups(A)
        assert n_groups == 3 and list(group_of) == [0, 1, 0, 2]


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
    # the same grid but for the rounding of its bottom, the factor's smallest eigenvalue (~1e-14)
    assert weighted.alpha_ == pytest.approx(repeated.alpha_, rel=1e-4)
    assert_allclose(weighted.predict(X), repeated.predict(X), atol=1e-3)  # solves at a small ridge


@pytest.mark.parametrize("seed", [108, 111, 113])
def test_the_least_ridge_counts_distinct_rows_of_positive_weight(seed):
    # nearly noiseless targets choose the grid's least ridge, which once counted every copy of a row
    # (and every row of weight zero): the rows repeated chose 1e-8 where their integer weights chose 1.8e-8
    rng = np.random.RandomState(seed)
    n = int(rng.randint(40, 90))
    X = rng.randn(n, 3)
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.001 * rng.randn(n)
    counts = rng.randint(1, 4, n)
    weights = np.append(counts, [0.0, 0.0])  # and two rows of weight zero, anywhere
    X_zero, y_zero = np.vstack([X, rng.randn(2, 3)]), np.append(y, [5.0, -5.0])
    weighted = KernelGDRegressor(kernel="rbf", random_state=0).fit(X_zero, y_zero, sample_weight=weights)
    repeated = KernelGDRegressor(kernel="rbf", random_state=0).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    assert weighted.alpha_ == pytest.approx(repeated.alpha_, rel=1e-6)
    assert_allclose(weighted.predict(X), repeated.predict(X), atol=1e-2)


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
def test_auto_kernel_is_the_one_of_least_brute_force_leave_one_out_error(rough):
    # 200 rows, under the factor's rank: each kernel's errors are the dense leave-one-out errors of
    # kernel ridge over the grid, so the choice must be the kernel whose least such error is smaller.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (200, 2))
    f = np.sign(X[:, 0]) + (X[:, 1] > 0.5) if rough else np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    y = f + 0.1 * rng.randn(200)
    reg = KernelGDRegressor().fit(X, y)
    best = {}
    for kernel in ("rbf", "laplacian"):
        single = KernelGDRegressor(kernel=kernel).fit(X, y)
        K = kernel_matrix(X, kernel=kernel, sigma=single.sigma_)
        best[kernel] = min(_left_out_errors(K, y, a).mean() for a in np.logspace(-8, 0, 17))
    assert reg.kernel_ == min(best, key=best.get) == ("laplacian" if rough else "rbf")
    given = KernelGDRegressor(kernel=reg.kernel_, sigma=reg.sigma_, alpha=reg.alpha_, tol=1e-8).fit(X, y)
    assert_allclose(reg.predict(X), given.predict(X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("smooth", [True, False])
def test_auto_kernel_widens_while_brute_force_leave_one_out_falls(smooth):
    # Under EXACT_MAX_ROWS the chosen kernel is refitted at 2 and then 4 times sigma="scale"'s width while
    # each lowers the leave-one-out error at its best ridge: a near-linear target takes the widest, a
    # checkerboard of signs keeps the scale.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (60, 3))
    f = X[:, 0] + 0.5 * X[:, 1] if smooth else np.sign(X[:, 0]) * np.sign(X[:, 1])
    y = f + 0.1 * rng.randn(60)
    reg = KernelGDRegressor().fit(X, y)
    scale = KernelGDRegressor(kernel=reg.kernel_).fit(X, y).sigma_
    errors = {}
    for width in (1.0, 2.0, 4.0):
        K = kernel_matrix(X, kernel=reg.kernel_, sigma=scale * width)
        errors[width] = min(_brute_force_loo(K, y, np.full(60, 1 / 60), a) for a in np.logspace(-8, 0, 33))
    walked = 1.0
    for width in (2.0, 4.0):
        if not errors[width] < errors[walked]:
            break
        walked = width
    assert walked == (4.0 if smooth else 1.0)
    assert reg.sigma_ == pytest.approx(scale * walked, rel=1e-12)
    # a given sigma, or a centers model (which the exact leave-one-out does not score), is not widened
    assert KernelGDRegressor(sigma=scale).fit(X, y).sigma_ == scale
    assert KernelGDRegressor(n_centers=30).fit(X, y).sigma_ == scale


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
def test_logistic_auto_alpha_is_the_squared_loss_ridge_scaled_by_the_curvature_and_does_not_underfit(load, beats_platt):
    # The logistic default starts from the squared-loss classifier's GCV ridge (same landmarks: same
    # seed) times curvature_share: on iris and breast cancer, whose Newton systems are small, a power of 4 of it
    # at the width _loo_ridge chose; on digits (ten classes) a power of 4 the whole set's held-out folds chose,
    # at most CHECK_REACH_UP above it. Its probabilities are not the
    # underfit of C=1. On iris and digits its held-out log-loss is below SVC(probability=True)'s
    # (Platt scaling), an independent reference; on breast cancer the two tie.
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC

    from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss

    X, y = load(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    logistic = KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    squared = KernelGDClassifier(sigma=logistic.sigma_, random_state=0).fit(X_tr, y_tr)  # at the width chosen
    classes = np.unique(y_tr)
    w = np.full(len(y_tr), 1.0 / len(y_tr))
    if len(classes) == 2:
        share = _auto_alpha.curvature_share(BinaryLogisticLoss, np.where(y_tr == classes[1], 1.0, -1.0)[:, None], w, True)
    else:
        share = _auto_alpha.curvature_share(MultinomialLoss, (y_tr[:, None] == classes).astype(float), w, True)
    multiple = logistic.alpha_ / (squared.alpha_ * share)
    power = np.log(multiple) / np.log(4.0)  # a power of 4, within the path's reach
    assert power == pytest.approx(np.round(power), abs=1e-9)
    if load is load_digits:
        assert power <= _loo_ridge.CHECK_REACH_UP
    else:
        assert abs(power) <= np.log(_loo_ridge.EXTEND_TO) / np.log(4.0)
    ours = log_loss(y_te, logistic.predict_proba(X_te))
    if beats_platt:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # probability=True, deprecated in scikit-learn 1.9
            platt = SVC(probability=True, random_state=0).fit(X_tr, y_tr)
        assert ours < log_loss(y_te, platt.predict_proba(X_te))
    C1 = KernelGDClassifier(loss="logistic", alpha=1 / (2 * len(y_tr))).fit(X_tr, y_tr)
    assert ours < log_loss(y_te, C1.predict_proba(X_te))


def test_balanced_class_weights_and_the_same_sample_weights_choose_the_same_ridge():
    from sklearn.utils.class_weight import compute_sample_weight

    X, y = load_wine(return_X_y=True)
    X, y = StandardScaler().fit_transform(X)[:150], y[:150]  # imbalanced: 59, 71 and 20 rows
    by_class = KernelGDClassifier(class_weight="balanced", random_state=0).fit(X, y)
    by_sample = KernelGDClassifier(random_state=0).fit(X, y, sample_weight=compute_sample_weight("balanced", y))
    assert by_class.alpha_ == by_sample.alpha_
    assert_allclose(by_class.decision_function(X), by_sample.decision_function(X), rtol=1e-8, atol=1e-10)


def _noiseless(n, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    return X, np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.5 * X[:, 2]


def test_a_float32_kernel_matrix_does_not_raise_the_ridge(monkeypatch):
    # the rule reads float64 kernel columns whatever dtype the fit stores K in: a float32 K's rounding
    # floor kept a near noiseless target from its small ridge (UCI naval: alpha 9e-7 and 28 times the
    # test RMSE of the same kernel chosen by kernel="auto")
    X, y = _noiseless(700)
    X_test, y_test = _noiseless(300, seed=1)
    exact = KernelGDRegressor(kernel="rbf", random_state=0, options={"dtype": "float64"}).fit(X, y)
    monkeypatch.setattr(kernelgd._operator, "AUTO_FLOAT64_MAX_ENTRIES", 100)  # "auto" stores K in float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = KernelGDRegressor(kernel="rbf", random_state=0).fit(X, y)
    assert auto.alpha_ == exact.alpha_ < 1e-8  # float32's floor is ~1e-5; the rule's least ridge here 1.4e-9
    rmse = np.sqrt(np.mean((auto.predict(X_test) - y_test) ** 2))
    assert rmse < 2 * np.sqrt(np.mean((exact.predict(X_test) - y_test) ** 2)) and rmse < 1e-3


@pytest.mark.parametrize("kernel", ["rbf", "auto"])
def test_a_float32_fit_asked_for_chooses_a_ridge_float32_resolves(kernel):
    # options={"dtype": "float32"} cannot go on in float64: below float32's floor its CG stopped on
    # rounding and returned the intercept-only model, with two warnings
    X, y = _noiseless(700)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDRegressor(kernel=kernel, random_state=0, options={"dtype": "float32"}).fit(X, y)
    assert model.alpha_ > 1e-9 and model.score(*_noiseless(300, seed=1)) > 0.999


def test_the_squared_loss_ridge_does_not_depend_on_how_the_kernel_matrix_is_stored(monkeypatch):
    # dtype "auto" stores K in float32 above a size; the rule reads float64 columns and cuts the
    # spectrum at float64's rounding (the fit goes on in float64 where float32 stops it short)
    X, y = make_moons(400, noise=0.05, random_state=0)
    given = KernelGDClassifier(random_state=0, options={"dtype": "float64"}).fit(X, y).alpha_
    monkeypatch.setattr(kernelgd._operator, "AUTO_FLOAT64_MAX_ENTRIES", 100)
    # far below float32's floor (ROUNDING_EPS eps32, about 8e-6 of the trace): float64's
    assert KernelGDClassifier(random_state=0).fit(X, y).alpha_ == given < 1e-8  # the rule's least ridge: 2.5e-9


def test_a_smooth_loss_on_a_float32_kernel_matrix_reads_the_spectrum_down_to_float32s_rounding(monkeypatch):
    # below it Newton's steps meet nearly separable problems: UCI power made binary took 86 s at
    # alpha 2e-9 (log-loss 0.133) against 3 s at 5e-7 (0.118)
    # (on this small set the leave-one-out choice then takes a multiple of the rule's ridge, from 16 to 1/16)
    X, y = make_moons(400, noise=0.05, random_state=0)
    assert KernelGDClassifier(loss="logistic", random_state=0).fit(X, y).alpha_ < 1e-10
    monkeypatch.setattr(kernelgd._operator, "AUTO_FLOAT64_MAX_ENTRIES", 100)
    assert KernelGDClassifier(loss="logistic", random_state=0).fit(X, y).alpha_ > 1e-10


@pytest.mark.parametrize("n_classes", [2, 3])
def test_left_out_predictions_are_those_of_refits_without_each_group_of_identical_rows(n_classes):
    # the closed form against brute force: the weighted ridge with intercept on features F (the
    # Nystroem model of K ~ F F'), refitted with each group's weight set to zero, predicting that group
    rng = np.random.RandomState(0)
    copies = np.r_[np.arange(30), [0, 0, 4, 7, 7]]  # repeated rows, one of them with other labels
    F = rng.normal(size=(30, 5))[copies]
    codes = rng.randint(0, n_classes, len(copies))
    codes[-1] = (codes[7] + 1) % n_classes
    from kernelgd._targets import encode_labels

    Y = encode_labels(codes, n_classes, one_hot=False)
    w = rng.uniform(0.5, 2.0, len(copies))
    w /= w.sum()
    group_of = _replicates.replicate_groups(F)[0]
    s = np.sqrt(w)
    B = s[:, None] * F
    B -= np.outer(s, s @ B)
    lam, W = np.linalg.eigh(B.T @ B)
    V = B @ W / np.sqrt(lam)
    alphas = np.array([1.0, 0.1, 0.01, 1e-3])
    A = np.hstack([np.ones((len(w), 1)), F])
    penalty = np.diag(np.r_[0.0, np.ones(5)])
    for alpha, (P, h) in zip(alphas, _auto_alpha._left_out(V, lam, Y, w, True, alphas, group_of)):
        assert np.all(h < 1)
        expected = np.empty_like(Y)
        for g in np.unique(group_of):
            out = group_of == g
            expected[out] = _refit_without(A, Y, w, out, alpha, penalty)
        assert_allclose(P, expected, rtol=1e-8, atol=1e-10)


def _hastie(n, seed):
    from sklearn.datasets import make_hastie_10_2

    X, y = make_hastie_10_2(n, random_state=seed)
    return StandardScaler().fit_transform(X), y


def test_a_classifier_takes_a_larger_ridge_where_it_classifies_left_out_rows_significantly_better():
    # Hastie's sphere in 10 dimensions: squared error's ridge fits the +-1 codes' values, a larger one
    # classifies better; the estimator's ridge is the larger, and it predicts held-out rows better
    X, y = _hastie(3000, 0)
    X_test, y_test = _hastie(3000, 1)
    model = KernelGDClassifier(random_state=0).fit(X, y)
    Y = np.where(y > 0, 1.0, -1.0)[:, None]
    w = np.full(len(y), 1.0 / len(y))
    squared = _auto_alpha.auto_alpha(X, model._bound_kernel(), Y, w, None, True, np.random.RandomState(0))[0]
    assert model.alpha_ > 3 * squared
    at_squared = KernelGDClassifier(alpha=squared, random_state=0).fit(X, y)
    assert model.score(X_test, y_test) > at_squared.score(X_test, y_test) + 0.005
    # the regressor on the same codes keeps squared error's ridge: that is what it is judged by
    assert KernelGDRegressor(kernel="rbf", random_state=0).fit(X, Y[:, 0]).alpha_ < model.alpha_ / 3


def _bands(n, seed):
    # three classes of |x_0| in bands, two Student-t features: no label noise
    rng = np.random.RandomState(seed)
    X = rng.standard_t(3, (n, 2))
    return X, np.searchsorted([0.43, 1.0], np.abs(X[:, 0]))


def test_up_to_the_exact_rules_rows_a_classifier_takes_a_smaller_ridge_where_it_classifies_significantly_better():
    # Regression: on 600 rows of noiseless bands squared error's ridge (1e-4) smoothed the class codes'
    # steps; its held-out accuracy was 0.81 where a ridge of 1e-8 or below classifies 0.89. Every ridge is
    # scored by the exact rule's one eigendecomposition, and the error rate takes the smaller one.
    X, y = _bands(600, 0)
    X_test, y_test = _bands(4000, 100)
    scale = KernelGDClassifier()._resolve_sigma(X, np.full(len(y), 1.0 / len(y)))  # a given width: no walk
    # the check reads the argmax's left-out errors: the argmax's accuracy shows its effect
    model = KernelGDClassifier(sigma=scale, combine="argmax", random_state=0).fit(X, y)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_auto_alpha, "significantly_fewer", lambda *args: False)
        by_squared_error = KernelGDClassifier(sigma=scale, combine="argmax", random_state=0).fit(X, y)
    assert model.alpha_ < by_squared_error.alpha_ / 100
    assert model.score(X_test, y_test) > by_squared_error.score(X_test, y_test) + 0.04


def test_the_classification_check_keeps_the_squared_errors_ridge_where_no_larger_one_is_significantly_better():
    # a tie, or a gain within two standard errors, keeps squared error's ridge (the last candidate)
    rng = np.random.RandomState(0)
    n = 200
    V = np.linalg.qr(rng.normal(size=(n, 4)))[0]
    lam = np.array([0.1, 0.2, 0.5, 1.0])
    Y = np.where(rng.rand(n) > 0.5, 1.0, -1.0)[:, None]  # labels independent of V: no ridge classifies better
    w = np.full(n, 1.0 / n)
    alphas = np.logspace(1, -3, 9)
    predictions = _auto_alpha._left_out(V, lam, Y, w, True, alphas, None)
    wrong = np.array([(P[:, 0] > 0) != (Y[:, 0] > 0) for P, _ in predictions], dtype=float)
    for first in (2, 4, len(alphas) - 1):  # either way: the largest ridges' left-out rows lean to one class
        assert _auto_alpha.classification_ridge(wrong, first, w, None, float(n)) == first


def test_a_truncated_factors_error_rate_moves_the_ridge_only_to_ridges_it_resolves():
    # Regression: on letter the rank-500 factor's left-out error rate moved the ridge from GCV's 5.6e-6
    # (471 of 500 degrees of freedom) to 1.8e-5 (427) on one seed in eight, test accuracy 0.968 -> 0.961.
    # That near its rank the Nystroem model's errors are the truncation's; on these 20 classes the move
    # went to 72% of the rank (10x GCV's ridge, no test accuracy gained). A move must land where the factor
    # resolves the model.
    X, y = make_classification(2500, 8, n_informative=8, n_redundant=0, n_classes=20, n_clusters_per_class=1,
                               flip_y=0.0, class_sep=3.0, random_state=22)
    X = StandardScaler().fit_transform(X)
    real, shares = _auto_alpha.choose, []

    def spy(factor, Y, *args, **kwargs):  # each truncated factor's chosen ridge's share of its rank
        result = real(factor, Y, *args, **kwargs)
        alpha, errors, alphas, wrong = result[:4]
        if wrong is not None and not kwargs.get("exact") and factor.shape[1] >= _auto_alpha.RANK:
            lam = kwargs["directions"].eigen[0]
            moved = alpha != alphas[_auto_alpha._first_tied(errors)]
            shares.append(float(np.sum(lam / (lam + alpha))) / len(lam) if moved else 0.0)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_auto_alpha, "choose", spy)
        KernelGDClassifier(random_state=0).fit(X, y)
    assert shares  # the truncated factor's check ran
    assert max(shares) <= _auto_alpha.RESOLVED_DF_SHARE


def test_significantly_fewer_is_a_paired_z_test_of_two_standard_errors():
    # unweighted, every row distinct: the mean paired gain against twice its standard error (ddof=0)
    rng = np.random.RandomState(0)
    for _ in range(200):
        n = rng.randint(5, 60)
        than = (rng.rand(n) < rng.rand()).astype(float)
        wrong = (rng.rand(n) < rng.rand()).astype(float)
        gain = than - wrong
        expected = gain.mean() > _auto_alpha.SIGNIFICANCE * gain.std() / np.sqrt(n)
        assert _auto_alpha.significantly_fewer(wrong, than, np.full(n, 1.0 / n), None, float(n)) == expected
    # integer weights decide as the rows repeated, read as groups of identical rows
    counts = rng.randint(1, 4, 30)
    than, wrong = (rng.rand(30) < 0.4).astype(float), (rng.rand(30) < 0.1).astype(float)
    groups = np.repeat(np.arange(30), counts)
    assert _auto_alpha.significantly_fewer(wrong, than, counts / counts.sum(), None, 30.0) == \
        _auto_alpha.significantly_fewer(wrong[groups], than[groups], np.full(len(groups), 1.0 / len(groups)),
                                        groups, 30.0)


def test_a_classifiers_auto_kernel_follows_the_left_out_error_rate():
    # Regression: on three classes in nested shells, squared error on the class codes ranked the laplacian
    # ahead, whose held-out accuracy is below the rbf's (0.05 with the largest output deciding, 0.015 with
    # the output layer); the error rate on the same left-out rows ranks them as the held-out rows do.
    from sklearn.datasets import make_gaussian_quantiles
    from sklearn.model_selection import train_test_split

    X, y = make_gaussian_quantiles(n_samples=8000, n_features=6, n_classes=3, random_state=0)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    auto = KernelGDClassifier(kernel="auto", random_state=0).fit(X_tr, y_tr)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_auto_alpha, "significantly_fewer", lambda *args: False)
        by_squared_error = KernelGDClassifier(kernel="auto", random_state=0).fit(X_tr, y_tr)
    assert (auto.kernel_, by_squared_error.kernel_) == ("rbf", "laplacian")
    laplacian = KernelGDClassifier(kernel="laplacian", random_state=0).fit(X_tr, y_tr)
    assert auto.score(X_te, y_te) > laplacian.score(X_te, y_te) + 0.01


def test_the_classification_check_with_integer_weights_equals_repeated_rows():
    # the check's left-out groups and standard errors read repeated rows as one: the same ridge either way
    X, y = _hastie(600, 2)
    counts = np.random.RandomState(1).randint(1, 4, len(y))
    weighted = KernelGDClassifier(random_state=0).fit(X, y, sample_weight=counts)
    repeated = KernelGDClassifier(random_state=0).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    assert weighted.alpha_ == pytest.approx(repeated.alpha_, rel=1e-4)
    Y = np.where(np.repeat(y, counts) > 0, 1.0, -1.0)[:, None]
    Xr = np.repeat(X, counts, axis=0)
    w = np.full(len(Xr), 1.0 / len(Xr))
    groups = _replicates.replicate_groups(Xr)[0]
    squared = _auto_alpha.auto_alpha(Xr, repeated._bound_kernel(), Y, w, groups, True, np.random.RandomState(0))[0]
    assert repeated.alpha_ > squared  # the check took a larger ridge here: the equality above is the check's


def _kink(seed, noise):
    rng = np.random.RandomState(seed)
    X = rng.randn(3000, 3)
    return X, np.abs(X[:, 0]) + noise * rng.randn(3000)


@pytest.mark.parametrize("seed", [3, 6])
def test_gcv_falling_to_its_least_ridge_is_bounded_by_a_subsample_s_leave_one_out(seed):
    # |x_0| in three Gaussian features with 1% noise: the rbf's GCV error fell down to its least ridge
    # (5.6e-10), where the exact model's test R^2 was 0.11 (seed 6) and 0.57 (seed 3); exact leave-one-out
    # of 500 rows bounds the ridge from below there
    X, y = _kink(seed, 0.01)
    model = KernelGDRegressor(kernel="rbf", random_state=0).fit(X[:2100], y[:2100])
    assert model.alpha_ > 1e-8
    assert model.score(X[2100:], y[2100:]) > 0.95


def test_a_noiseless_target_keeps_gcv_s_least_ridge(monkeypatch):
    # the check's own error still falls at its least ridge: it bounds nothing, and the smallest ridge stays
    bounds = []
    check = _auto_alpha.check_floor
    monkeypatch.setattr(_auto_alpha, "check_floor", lambda *args: bounds.append(check(*args)) or bounds[-1])
    rng = np.random.RandomState(0)
    X = rng.randn(2100, 3)
    model = KernelGDRegressor(kernel="rbf", random_state=0).fit(X, np.sin(X[:, 0]))
    assert bounds == [0.0]
    assert model.alpha_ < 1e-8


def test_the_check_overrules_only_a_ridge_that_doubles_its_rows_left_out_error():
    from kernelgd.kernels import bind_kernel

    X, y = _kink(6, 0.01)
    X, y = X[:2100], y[:2100]
    Y = ((y - y.mean()) / y.std())[:, None]
    w = np.full(len(y), 1.0 / len(y))
    kernel = bind_kernel("rbf", kernel_params={"sigma": float(np.sqrt(3 * X.var(axis=0).mean()))})

    def check(chosen):
        return _auto_alpha.check_floor(X, kernel, Y, w, None, True, np.random.RandomState(0), False, len(y),
                                       np.float64, False, chosen)

    bound = check(5.6e-10)  # GCV's choice here: the check's rows' left-out errors explode at it
    assert bound > 1e-8
    assert check(1e-9) == bound  # the bound is the larger draw's ridge, whatever choice it overrules
    assert check(1e-6) == 0.0  # short of twice the check's rows' least left-out error: kept


def test_the_checks_rows_are_groups_of_identical_rows_so_weights_and_the_rows_repeated_bound_alike():
    from kernelgd.kernels import bind_kernel

    X, y = _kink(6, 0.01)
    X, y = X[:2100], y[:2100]
    Y = ((y - y.mean()) / y.std())[:, None]
    counts = np.random.RandomState(1).randint(1, 4, len(y))
    kernel = bind_kernel("rbf", kernel_params={"sigma": float(np.sqrt(3 * X.var(axis=0).mean()))})
    bounds = []
    for rows, targets, w in ((X, Y, counts / counts.sum()), (np.repeat(X, counts, axis=0), np.repeat(Y, counts, axis=0),
                                                             np.full(counts.sum(), 1.0 / counts.sum()))):
        bounds.append(_auto_alpha.check_floor(rows, kernel, targets, w, _replicates.distinct_groups(rows), True,
                                              np.random.RandomState(0), False, len(y), np.float64, False, 5.6e-10))
    assert bounds[0] > 1e-8
    assert bounds[1] == pytest.approx(bounds[0], rel=1e-9)


@pytest.mark.parametrize("combine", ["argmax", "logistic"])
def test_a_kernel_too_wide_is_not_bounded_by_a_few_hundred_rows_ridge(combine):
    # 5,600 rows of three nested Gaussian shells in six features, with the rbf three times the default
    # width: GCV's choice explodes on the check's 500 rows, whose own best total ridge (0.3) is a hundred
    # times the whole set's; bounded by it, the classifier took alpha=0.03 and 0.74 of the test rows
    # (the largest output deciding: 6e-7 now; the output layer's left-out classes: 2e-3, 0.98)
    X, y = make_gaussian_quantiles(n_samples=8000, n_features=6, n_classes=3, random_state=0)
    X = StandardScaler().fit_transform(X)
    model = KernelGDClassifier(sigma=3 * np.sqrt(6), random_state=0, combine=combine).fit(X[:5600], y[:5600])
    assert model.alpha_ < 0.01
    assert model.score(X[5600:], y[5600:]) > 0.85


def test_heavy_tailed_features_do_not_let_gcv_interpolate():
    # 2,000 rows of |x_0| in Student-t features (3 degrees of freedom) with 0.3% noise: without the check,
    # kernel="auto" chose the rbf at 5.6e-10 (test R^2 -0.33); a few far rows' exploding left-out errors
    # are too few for a paired test of the check's rows (it passed a like case), not for their mean
    rng = np.random.RandomState(7)
    X = rng.standard_t(3, (3000, 3))
    X = (X - X[:2000].mean(axis=0)) / X[:2000].std(axis=0)
    y = np.abs(X[:, 0])
    y = y + 0.003 * y.std() * rng.randn(3000)
    model = KernelGDRegressor(random_state=0).fit(X[:2000], y[:2000])
    assert model.score(X[2000:], y[2000:]) > 0.9


def test_a_flat_gcv_minimum_at_a_tiny_ridge_is_checked_too():
    # 1,200 rows of tanh(3 x_0 x_1) in four Gaussian features with 0.3% noise: GCV's least error is not at
    # its least ridge, and without the check the rbf at 1e-7 had a test R^2 of 0.75
    rng = np.random.RandomState(11)
    X = rng.randn(2200, 4)
    y = np.tanh(3 * X[:, 0] * X[:, 1])
    y = y + 0.003 * y.std() * rng.randn(2200)
    model = KernelGDRegressor(random_state=0).fit(X[:1200], y[:1200])
    assert model.score(X[1200:], y[1200:]) > 0.9


def _left_out_errors(K, y, alpha):
    """Each row's left-out squared error of kernel ridge with intercept at ``alpha`` (equal weights 1/n), by a dense
    refit without it: the other rows' bordered system ``[[K + alpha n I, 1], [1', 0]] [a; b] = [y; 0]`` (its
    predictions are the weighted ridge's; it is better conditioned at a small ridge than the normal equations of
    ``_refit_without``, and a solve costs a fraction of a least-squares one)."""
    n = len(y)
    errors = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        system = np.ones((n, n))
        system[:-1, :-1] = K[np.ix_(keep, keep)] + alpha * n * np.eye(n - 1)
        system[-1, -1] = 0.0
        solution = np.linalg.solve(system, np.append(y[keep], 0.0))
        errors[i] = (y[i] - K[i, keep] @ solution[:-1] - solution[-1]) ** 2
    return errors


@pytest.mark.parametrize("classes, expected", [("ring", 0.25), ("stripes", 0.5), ("noisy line", 1.0)])
def test_a_classifier_walks_its_width_narrower_while_brute_force_leave_one_out_falls(classes, expected):
    # A squared-loss classifier at sigma="scale" is refitted at 1/2 and then 1/4 of that width while each
    # lowers the leave-one-out squared error of its class codes at its best ridge by one standard error of the
    # paired difference: a thin ring of one class takes a quarter of the width, stripes half of it, a straight
    # boundary blurred by noise keeps the scale's.
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (100, 2))
    y = {"ring": np.abs((X**2).sum(axis=1) - 2) < 0.7, "stripes": np.sin(3 * X[:, 0]) > 0,
         "noisy line": X[:, 0] + 0.5 * X[:, 1] + 0.8 * rng.randn(100) > 0}[classes]
    codes = np.where(y, 1.0, -1.0)
    scale = KernelGDClassifier()._resolve_sigma(X, np.full(100, 1 / 100))
    errors = {}
    for width in (1.0, 0.5, 0.25):
        K = kernel_matrix(X, kernel="rbf", sigma=scale * width)
        errors[width] = min((_left_out_errors(K, codes, a) for a in np.logspace(-8, 0, 33)), key=np.mean)
    walked = 1.0
    for width in (0.5, 0.25):
        gain = errors[walked] - errors[width]
        if not gain.mean() > gain.std() / np.sqrt(len(gain)):
            break
        walked = width
    assert walked == expected
    model = KernelGDClassifier().fit(X, y)
    assert model.sigma_ == pytest.approx(scale * walked, rel=1e-12)
    # a given sigma, a centers model, or the logistic loss is not walked
    assert KernelGDClassifier(sigma=scale).fit(X, y).sigma_ == scale
    assert KernelGDClassifier(n_centers=30).fit(X, y).sigma_ == pytest.approx(scale, rel=1e-12)
    assert KernelGDClassifier(loss="logistic").fit(X, y).sigma_ >= scale * (1 - 1e-12)


def test_a_classifier_walks_no_narrower_on_a_gain_within_chance():
    # Regression: on a random 70/30 split of iris (105 rows) the half width's leave-one-out squared error was
    # the smaller, by less than one standard error of the paired difference; it misclassified one more test row.
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split

    X, y = load_iris(return_X_y=True)
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=3)
    X_train = StandardScaler().fit_transform(X_train)
    scale = KernelGDClassifier()._resolve_sigma(X_train, np.full(len(y_train), 1.0 / len(y_train)))
    assert KernelGDClassifier().fit(X_train, y_train).sigma_ == pytest.approx(scale, rel=1e-12)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_auto_alpha, "WALK_SIGNIFICANCE", 0.0)  # any gain: the walk takes half the width
        assert KernelGDClassifier().fit(X_train, y_train).sigma_ == pytest.approx(scale / 2, rel=1e-12)


def test_a_classifiers_width_walk_chooses_alike_for_weights_the_rows_repeated_and_scaled_weights():
    # the walk's significance reads repeated rows as one (a group left out together, its weight summed)
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (100, 2))
    y = np.abs((X**2).sum(axis=1) - 2) < 0.7
    counts = rng.randint(1, 4, 100)
    rows = np.repeat(np.arange(100), counts)
    weighted = KernelGDClassifier().fit(X, y, sample_weight=counts.astype(float))
    repeated = KernelGDClassifier().fit(X[rows], y[rows])
    scaled = KernelGDClassifier().fit(X, y, sample_weight=7.5 * counts)
    scale = KernelGDClassifier()._resolve_sigma(X, counts / counts.sum())
    assert weighted.sigma_ < scale  # the walk went narrower
    for other in (repeated, scaled):
        assert other.sigma_ == pytest.approx(weighted.sigma_, rel=1e-9)
        assert other.alpha_ == pytest.approx(weighted.alpha_, rel=1e-9)


def test_a_classifier_walks_to_no_width_that_misclassifies_more_left_out_rows(monkeypatch):
    # Regression: on generated problems the walk took widths of lower squared error on the class codes but
    # more left-out errors, and classified fewer test rows (four of 36, by 0.008 to 0.013). Here half the width
    # has the lower squared error and misclassifies 28 left-out rows against 23: the scale's width stays (a
    # margin of one row, as on RandomState(2), turned with the BLAS threads' rounding).
    rng = np.random.RandomState(44)
    X = rng.standard_t(3, (400, 2))
    y = np.cos(X.sum(axis=1)) > 0
    y = np.where(rng.rand(400) < 0.1, rng.rand(400) < 0.5, y)
    scored, choose = [], _auto_alpha.choose

    def recording(factor, Y, w, *args, **kwargs):
        found = choose(factor, Y, w, *args, **kwargs)
        if factor.shape[0] == len(y):  # a width's rule on every row (not the floor check's)
            scored.append((float(np.min(found[1])), float(found[3] @ np.asarray(w))))
        return found

    monkeypatch.setattr(_auto_alpha, "choose", recording)
    model = KernelGDClassifier(options={"n_threads": 1}).fit(X, y)  # the widths in turn: records read in order
    (error, rate), (half_error, half_rate) = scored[:2]
    assert half_error < error and half_rate > rate
    assert model.sigma_ == pytest.approx(KernelGDClassifier()._resolve_sigma(X, np.full(400, 1 / 400)), rel=1e-12)


@pytest.mark.parametrize("Estimator", [KernelGDClassifier, KernelGDRegressor])
def test_the_rules_kernels_scored_side_by_side_score_as_in_turn(Estimator, monkeypatch):
    # the candidates, and a single candidate's first walked width, are scored side by side on the blocks'
    # pool: each score has its own random draws, so every score is the one the scores in turn make, to the
    # bit; options["n_threads"]=1 runs them on the calling thread alone
    X, y = make_classification(1500, 6, n_informative=4, random_state=0)
    if Estimator is KernelGDRegressor:
        y = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2])
    pooled, run_pooled, choose = [], kernelgd._operator.run_pooled, _auto_alpha.choose

    def recording(factor, *args, **kwargs):
        found = choose(factor, *args, **kwargs)
        scores[-1].append((factor.shape, found[0], None if found[1] is None else tuple(found[1])))
        return found

    monkeypatch.setattr(_auto_alpha, "choose", recording)
    fits, scores = [], []
    for in_turn in (False, True):
        scores.append([])
        monkeypatch.setattr(_auto_alpha, "run_pooled", lambda func, items, threads, in_turn=in_turn: (
            pooled.append(threads), [func(item) for item in items] if in_turn else run_pooled(func, items, threads))[1])
        fits.append(Estimator(random_state=0, options={"n_threads": 2}).fit(X, y))
    assert len(scores[0]) >= 4 and sorted(scores[0], key=repr) == sorted(scores[1], key=repr)
    assert (fits[0].kernel_, fits[0].sigma_, fits[0].alpha_) == (fits[1].kernel_, fits[1].sigma_, fits[1].alpha_)
    assert_array_equal(fits[0].dual_coef_, fits[1].dual_coef_)
    Estimator(random_state=0, options={"n_threads": 1}).fit(X, y)
    assert pooled == [2, 2, 1]


def test_auto_tol_is_a_share_of_the_rules_brute_force_leave_one_out_error():
    # tol="auto": the solve's share of the error the ridge rule measured at its ridge, here (300 rows, the
    # exact model's leave-one-out) that of refits without each row, relative to y's spread
    from kernelgd import _fit

    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (300, 2))
    y = 1e3 * (np.sin(2 * X[:, 0]) + 0.3 * rng.randn(300))  # y's units do not matter
    reg = KernelGDRegressor(kernel="rbf").fit(X, y)
    K = kernel_matrix(X, kernel="rbf", sigma=reg.sigma_)
    w = np.full(300, 1 / 300)
    loo = _brute_force_loo(K, y, w, reg.alpha_)
    assert reg.tol_ == pytest.approx(_fit.TOL_SHARE * np.sqrt(loo / y.var()), rel=1e-6)
    assert 2e-3 < reg.tol_ < _fit.TOL_SHARE  # a noisy target: looser than a fixed 1e-3
    assert KernelGDRegressor(kernel="rbf", tol=1e-4).fit(X, y).tol_ == 1e-4
    assert KernelGDRegressor(kernel="rbf", alpha=1e-4).fit(X, y).tol_ == _fit.DEFAULT_TOL  # no rule ran
    assert KernelGDClassifier(loss="logistic").fit(X, y > 0).tol_ == _fit.DEFAULT_TOL


@pytest.mark.parametrize("noise", [0.3, 1e-4])
def test_auto_tol_keeps_the_solves_error_below_its_share_of_the_models(noise):
    # The fit's training predictions are within tol_ times y's spread of the exact solve's at the same
    # kernel and ridge: a noisy target's solve stops early, a nearly noiseless one's goes on past 1e-3
    rng = np.random.RandomState(1)
    X = rng.uniform(-2, 2, (2500, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4 + noise * rng.randn(2500)
    reg = KernelGDRegressor(random_state=0).fit(X, y)
    tight = KernelGDRegressor(kernel=reg.kernel_, sigma=reg.sigma_, alpha=reg.alpha_, tol=1e-10,
                              random_state=0).fit(X, y)
    gap = np.sqrt(np.mean((reg.predict(X) - tight.predict(X)) ** 2))
    assert gap <= reg.tol_ * y.std()
    assert (reg.tol_ > 2e-3) if noise > 0.1 else (reg.tol_ < 1e-3)
    assert reg.n_iter_ < tight.n_iter_


def _binary_cloud():
    """2,500 rows of two Gaussian features (scaled apart) and a 0/1 target of a smooth function plus noise."""
    rng = np.random.RandomState(926)
    rng.choice(3), rng.choice(4)
    X = rng.normal(size=(2500, 2)) * rng.uniform(0.5, 2, size=2)
    y = np.sin(2 * X[:, 0] / X[:, 0].std()) + X[:, 1] + rng.uniform(0.05, 1) * rng.normal(size=2500)
    y = (y > np.median(y)).astype(float)
    return X, y


def test_the_rules_ridge_does_not_depend_on_the_units_of_x():
    # The rule's factor draws as many pivots as its rank, which rounding moves with X's units; the check's rows
    # were drawn after it from the same stream, so scaling or shifting X drew other check rows and the ridge
    # moved 3-fold (5.6e-6 for X, 1.8e-6 for 2 X)
    X, y = _binary_cloud()
    units = (X, 0.0099 * X, X - 15.7, 2 * X)
    ridges = [KernelGDRegressor(kernel="rbf", random_state=0).fit(Xu, y).alpha_ for Xu in units]
    assert_allclose(ridges, ridges[0], rtol=1e-9)


def _exact_loo_errors(K, y, alphas):
    """Each ridge's mean leave-one-out squared error of kernel ridge regression with an unpenalized intercept
    (``KernelRidge(alpha=n * alpha)`` on centred K): residuals over ``1 - h_ii`` from one eigendecomposition."""
    n = len(y)
    J = np.eye(n) - 1.0 / n
    lam, Q = np.linalg.eigh(J @ K @ J)
    centred = y - y.mean()
    projected = Q.T @ centred
    errors = []
    for alpha in alphas:
        shrink = lam / (lam + n * alpha)
        leverage = (Q**2) @ shrink + 1.0 / n
        errors.append(np.mean(((centred - Q @ (shrink * projected)) / (1.0 - leverage)) ** 2))
    return np.array(errors)


def test_a_ridge_gcv_takes_at_its_end_is_checked_against_the_rows_leverages():
    # GCV takes every leverage as the mean. Binary targets on a 2-D Gaussian cloud: its error fell to the least
    # ridge scored (5.6e-10), where a few far rows of leverage near 1 gave an exact leave-one-out error 2.7 times
    # the least and a test error 7 times the best ridge's; 500 random rows checked by exact leave-one-out
    # missed them. The factor's own leave-one-out errors now bound the ridge.
    X, y = _binary_cloud()
    reg = KernelGDRegressor(kernel="rbf", random_state=5).fit(X, y)
    K = kernel_matrix(X, kernel="rbf", sigma=reg.sigma_)
    errors = _exact_loo_errors(K, y, [reg.alpha_, *np.logspace(-10, -2, 17)])
    assert errors[0] <= 1.25 * errors.min()


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("repeated", [False, True])
def test_the_exact_rules_eigen_factor_spans_the_pivoted_cholesky_factor_of_every_row(fit_intercept, repeated):
    # Up to the exact rule's rows the factor comes from the eigendecomposition of Q S K S Q, not from randomly
    # pivoted Cholesky; both factor the whole matrix, so their eigenvalues and hat matrices must agree.
    from kernelgd.kernels import bind_kernel

    rng = np.random.RandomState(0)
    X = rng.standard_normal((80, 3))
    if repeated:
        X = np.vstack([X, X[:20]])
    w = rng.uniform(0.5, 2.0, len(X))
    w /= w.sum()
    group_of = _replicates.replicate_groups(X)[0] if repeated else None
    operator = _auto_alpha._operator(X, bind_kernel("rbf", kernel_params={"sigma": 1.5}), False, 1)
    floor = _auto_alpha.rounding_floor(operator, w)
    eigen = _auto_alpha.rule_factor(operator, w, fit_intercept, rng, group_of, floor=floor)
    factor, pivots = _auto_alpha._unstored_factor(operator, w, fit_intercept, np.random.RandomState(1), group_of)
    cholesky = _auto_alpha.Directions(factor, factor.T @ factor, floor)
    big = eigen[3].eigen[0] > 1e-8  # directions well above rounding, where the two must agree
    assert_allclose(eigen[3].eigen[0][big], cholesky.eigen[0][cholesky.eigen[0] > 1e-8], rtol=1e-8)
    assert_allclose(eigen[0] @ eigen[0].T, factor @ factor.T, atol=1e-10)  # the same matrix Q S K S Q
    V = eigen[3].V[:, big]
    assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-10)
    assert_allclose(eigen[0] @ eigen[1] @ eigen[0].T, factor @ factor.T @ factor @ factor.T, atol=1e-9)
    if repeated:  # copies of a row have the same factor row, each scaled by the root of its weight
        B = eigen[0] / np.sqrt(w)[:, None]
        assert_allclose(B[80:], B[:20], atol=1e-8)
