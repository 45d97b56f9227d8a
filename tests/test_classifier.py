"""KernelGDClassifier: one-vs-rest squared loss against KernelRidge on +/-1 targets."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, make_moons
from sklearn.kernel_ridge import KernelRidge
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDClassifier, KernelGDClassifierCV
from kernelgd._auto_alpha import largest_output

X_iris, y_iris = load_iris(return_X_y=True)
X_iris = StandardScaler().fit_transform(X_iris)
# combine="argmax": the one-vs-rest outputs themselves decide (no output layer)
CONVERGED = dict(solver="gd", sigma=2.0, alpha=1e-2, max_iter=20_000, tol=0, fit_intercept=False, combine="argmax")


def test_binary_decision_function_equals_kernel_ridge_on_pm1_targets():
    X, y = make_moons(80, noise=0.2, random_state=0)
    labels = np.where(y == 1, "yes", "no")
    clf = KernelGDClassifier(**CONVERGED).fit(X, labels)
    assert_array_equal(clf.classes_, ["no", "yes"])
    ref = KernelRidge(alpha=80 * 1e-2, kernel="rbf", gamma=1 / 4.0).fit(X, np.where(y == 1, 1.0, -1.0))
    assert clf.decision_function(X).shape == (80,)
    assert_allclose(clf.decision_function(X), ref.predict(X), rtol=1e-6, atol=1e-8)
    assert_array_equal(clf.predict(X), np.where(ref.predict(X) > 0, "yes", "no"))


def test_multiclass_one_vs_rest_equals_kernel_ridge():
    clf = KernelGDClassifier(**CONVERGED).fit(X_iris, y_iris)
    targets = np.where(y_iris[:, None] == np.arange(3), 1.0, -1.0)
    ref = KernelRidge(alpha=150 * 1e-2, kernel="rbf", gamma=1 / 4.0).fit(X_iris, targets)
    assert clf.decision_function(X_iris).shape == (150, 3)
    assert_allclose(clf.decision_function(X_iris), ref.predict(X_iris), rtol=1e-6, atol=1e-8)
    assert_array_equal(clf.predict(X_iris), np.argmax(ref.predict(X_iris), axis=1))
    assert clf.score(X_iris, y_iris) > 0.95


def test_label_types_round_trip():
    for labels in (y_iris + 10, np.array(["setosa", "versicolor", "virginica"])[y_iris], y_iris.astype(float)):
        clf = KernelGDClassifier(max_iter=200).fit(X_iris, labels)
        assert set(clf.predict(X_iris)) <= set(labels)
        assert clf.predict(X_iris).dtype == np.asarray(labels).dtype


def test_integer_weights_equal_repeated_rows():
    counts = np.random.RandomState(0).randint(0, 3, size=150)
    params = dict(solver="gd", max_iter=200, tol=0, random_state=0)  # (one seed: the output layer's folds)
    a = KernelGDClassifier(**params).fit(X_iris, y_iris, sample_weight=counts)
    b = KernelGDClassifier(**params).fit(np.repeat(X_iris, counts, 0), np.repeat(y_iris, counts))
    assert_allclose(a.decision_function(X_iris), b.decision_function(X_iris), rtol=1e-7, atol=1e-9)


def test_one_class_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 2 classes.*only one class"):
        KernelGDClassifier().fit(X_iris[:10], np.zeros(10))


def test_warm_start_with_other_classes_restarts():
    clf = KernelGDClassifier(solver="gd", warm_start=True, max_iter=50, tol=0).fit(X_iris, y_iris)
    clf.fit(X_iris[:100], y_iris[:100])  # two classes now
    fresh = KernelGDClassifier(solver="gd", max_iter=50, tol=0).fit(X_iris[:100], y_iris[:100])
    assert_allclose(clf.decision_function(X_iris), fresh.decision_function(X_iris))


@pytest.mark.parametrize("n_classes, n_centers", [(2, None), (3, None), (3, 40)])
def test_output_layer_is_a_logistic_regression_on_the_left_out_outputs(n_classes, n_centers):
    from sklearn.datasets import make_gaussian_quantiles
    from sklearn.linear_model import LogisticRegression

    X, y = make_gaussian_quantiles(n_samples=250, n_features=3, n_classes=n_classes, random_state=0)
    X_fit, X_test, y_fit = X[:150], X[150:], y[:150]
    params = dict(sigma=1.5, alpha=1e-3, tol=1e-10, random_state=0, options={"dtype": "float64"})
    plain = KernelGDClassifier(combine="argmax", n_centers=n_centers, **params).fit(X_fit, y_fit)
    clf = KernelGDClassifier(n_centers=n_centers, **params).fit(X_fit, y_fit)
    assert plain.combiner_ is None
    assert_allclose(clf.dual_coef_, plain.dual_coef_)
    # up to 1,000 rows the layer reads each row's output from the exact model fitted without it, at the same
    # ridge per row of the full set: refits (without a row the weights are 1 / (n - 1): alpha n / (n - 1))
    refit = {**params, "alpha": 1e-3 * 150 / 149}
    left_out = np.vstack([
        KernelGDClassifier(combine="argmax", **refit).fit(np.delete(X_fit, i, 0), np.delete(y_fit, i))
        .decision_function(X_fit[i : i + 1]).reshape(1, -1)
        for i in range(len(y_fit))
    ])
    ref = LogisticRegression(tol=1e-12, max_iter=10_000).fit(left_out, y_fit)  # its L-BFGS run to the optimum
    outputs = plain.decision_function(X_test).reshape(100, -1)
    assert clf.decision_function(X_test).shape == ((100,) if n_classes == 2 else (100, n_classes))
    assert_allclose(clf.decision_function(X_test), ref.decision_function(outputs), rtol=1e-5, atol=1e-6)
    assert_array_equal(clf.predict(X_test), ref.predict(outputs))
    # its probabilities are the layer's: Platt scaling on left-out outputs
    assert_allclose(clf.predict_proba(X_test), ref.predict_proba(outputs), rtol=1e-5, atol=1e-7)
    assert_allclose(clf.predict_log_proba(X_test), ref.predict_log_proba(outputs), rtol=1e-5, atol=1e-7)


def test_a_fixed_ridge_fit_draws_one_factor_for_its_preconditioner_and_its_output_layer(monkeypatch):
    # The output layer's left-out outputs come from the ridge rule's factor of every row; at a fixed ridge it is
    # drawn before the solve and CG's preconditioner reuses it: one factor of K, not two (hastie, 7,000 rows at
    # its default's width and ridge: two factors of rank 500 before).
    from sklearn.datasets import make_gaussian_quantiles

    from kernelgd import _auto_alpha
    from kernelgd._solvers import _preconditioners

    calls, original = [], _preconditioners.landmark_factor

    def counted(operator, *args, **kwargs):
        calls.append(operator.n)
        return original(operator, *args, **kwargs)

    monkeypatch.setattr(_preconditioners, "landmark_factor", counted)
    monkeypatch.setattr(_auto_alpha, "landmark_factor", counted)
    X, y = make_gaussian_quantiles(n_samples=1500, n_features=4, n_classes=3, random_state=0)
    params = dict(sigma=2.0, alpha=1e-4, tol=1e-8, random_state=0)
    clf = KernelGDClassifier(**params).fit(X, y)
    assert calls == [len(y)]
    calls.clear()
    plain = KernelGDClassifier(combine="argmax", **params).fit(X, y)  # no layer: the preconditioner's own factor
    assert calls == [len(y)]
    assert_allclose(clf.dual_coef_, plain.dual_coef_, rtol=1e-6, atol=1e-6 * np.abs(plain.dual_coef_).max())


def test_output_layer_ranks_nested_shells_that_the_argmax_cannot():
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=4000, n_features=4, n_classes=3, random_state=1)
    argmax = KernelGDClassifier(combine="argmax", random_state=0).fit(X[:2000], y[:2000])
    clf = KernelGDClassifier(random_state=0).fit(X[:2000], y[:2000])
    assert clf.score(X[2000:], y[2000:]) >= argmax.score(X[2000:], y[2000:]) + 0.01


def test_output_layer_reads_weights_as_relative():
    w = np.random.RandomState(0).uniform(0.5, 2.0, size=150)
    a = KernelGDClassifier(sigma=2.0, alpha=1e-3, random_state=0).fit(X_iris, y_iris, sample_weight=w)
    b = KernelGDClassifier(sigma=2.0, alpha=1e-3, random_state=0).fit(X_iris, y_iris, sample_weight=7 * w)
    assert_allclose(a.decision_function(X_iris), b.decision_function(X_iris), rtol=1e-6, atol=1e-8)


def test_no_output_layer_without_a_weighted_row_of_every_class_or_with_the_logistic_loss():
    w = np.where(y_iris == 2, 0.0, 1.0)
    clf = KernelGDClassifier(sigma=2.0, alpha=1e-3).fit(X_iris, y_iris, sample_weight=w)
    assert clf.combiner_ is None
    assert_array_equal(clf.predict(X_iris), np.argmax(clf.decision_function(X_iris), axis=1))
    with pytest.raises(AttributeError) as excinfo:  # no layer, no probabilities: said, not a crash
        clf.predict_proba(X_iris)
    assert "no training row of positive weight" in str(excinfo.value.__cause__)
    assert KernelGDClassifier(loss="logistic", sigma=2.0, alpha=1e-3).fit(X_iris, y_iris).combiner_ is None


def test_output_layer_rows_beyond_its_limit_are_a_seeded_draw(monkeypatch):
    from sklearn.metrics.pairwise import rbf_kernel

    from kernelgd import _combiner
    from kernelgd._operator import KernelOperator
    from kernelgd.kernels import bind_kernel

    limit = _combiner.COMBINER_ROWS
    assert _combiner.combiner_rows(np.ones(limit), 0) is None
    rows = _combiner.combiner_rows(np.ones(limit + 5), 3)
    assert_array_equal(rows, _combiner.combiner_rows(np.ones(limit + 5), 3))
    assert len(np.unique(rows)) == limit and np.all(np.diff(rows) > 0)
    # rows of zero weight are never drawn, nor change the draw: a row of zero weight once took a weighted
    # row's place, and 5 of them beside 20,000 weighted rows changed which rows the layer read
    w = np.ones(limit + 10)
    w[::5] = 0.0
    assert _combiner.combiner_rows(w, 3) is None
    w = np.r_[np.ones(limit + 5), np.zeros(5)]
    assert_array_equal(_combiner.combiner_rows(w, 3), rows)
    # the rows' outputs, a block of kernel rows at a time, are those of the whole product
    operator = KernelOperator(X_iris, bind_kernel("rbf", kernel_params={"sigma": 2.0}), dtype="float64")
    coef = np.random.RandomState(0).randn(150, 3)
    monkeypatch.setattr(_combiner, "BLOCK_FLOATS", 7 * 150)
    picked = np.array([3, 17, 18, 40, 99, 100, 149, 0][::-1])
    expected = rbf_kernel(X_iris, gamma=1 / 4.0) @ coef + 0.5
    assert_allclose(_combiner.training_outputs(operator, coef, 0.5, picked), expected[picked])


def test_the_ridge_rule_reads_left_out_classes_as_the_output_layer_decides(monkeypatch):
    # The rule's classification check read the largest left-out output, and chose a ridge under which a
    # middle shell's output is nowhere the largest: held out 0.899 against 0.957 at the layer's choice.
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=3000, n_features=6, n_classes=3, random_state=1)
    layer = KernelGDClassifier(random_state=0).fit(X[:1500], y[:1500])
    monkeypatch.setattr(KernelGDClassifier, "_left_out_classes", lambda self, loss: largest_output)
    by_largest = KernelGDClassifier(random_state=0).fit(X[:1500], y[:1500])
    assert layer.alpha_ > 10 * by_largest.alpha_
    assert layer.score(X[1500:], y[1500:]) > by_largest.score(X[1500:], y[1500:]) + 0.02


@pytest.mark.parametrize("n_classes", [2, 3])
def test_left_out_classes_of_the_layer_are_a_weighted_logistic_regressions(n_classes):
    from sklearn.linear_model import LogisticRegression

    from kernelgd._combiner import layer_classes

    rng = np.random.RandomState(0)
    labels = rng.randint(0, n_classes, 300)
    codes = labels[:, None] if n_classes == 2 else (labels[:, None] == np.arange(n_classes))
    F = rng.randn(*codes.shape) + codes  # outputs that lean to each row's class
    w = rng.uniform(0.5, 2.0, 300)
    ref = LogisticRegression(tol=1e-2, max_iter=1000).fit(F, labels, sample_weight=w / w.sum() * 300).predict(F)
    assert_array_equal(layer_classes(F, labels.astype(bool) if n_classes == 2 else labels, w), ref)
    assert_array_equal(layer_classes(F, labels, 3 * w), ref)  # weights are relative


@pytest.mark.parametrize("n_classes", [2, 3, 10])
def test_the_checks_layer_fit_is_logistic_regressions_to_rounding(n_classes):
    # the check fits LogisticRegression's objective with its L-BFGS-B options, without its validation
    from sklearn.linear_model import LogisticRegression

    from kernelgd._combiner import CHECK_TOL, _logistic_layer

    rng = np.random.RandomState(n_classes)
    labels = rng.randint(0, n_classes, 400)
    codes = labels[:, None] if n_classes == 2 else (labels[:, None] == np.arange(n_classes))
    F = rng.randn(*codes.shape) + codes
    w = rng.uniform(0.5, 2.0, 400)
    w /= w.sum()
    ref = LogisticRegression(tol=CHECK_TOL, max_iter=1000).fit(F, labels, sample_weight=w * 400)
    coef, intercept = _logistic_layer(F, labels, w, n_classes)
    assert_allclose(coef, ref.coef_.T, atol=1e-10)
    assert_allclose(intercept, ref.intercept_, atol=1e-10)


def test_the_checks_stratified_draw_gives_each_class_its_share():
    from kernelgd._combiner import _stratified_draw

    labels = np.random.RandomState(0).choice(4, 5000, p=[0.6, 0.3, 0.0999, 0.0001])
    rows = _stratified_draw(labels, 1000)
    assert len(np.unique(rows)) == 1000 and np.all(np.diff(rows) > 0)
    share = np.bincount(labels, minlength=4) * 1000 / 5000
    assert np.all(np.abs(np.bincount(labels[rows], minlength=4) - share) < 1)
    assert_array_equal(_stratified_draw(labels, 1000), rows)  # a fixed draw


def _repeated_outputs(n, seed):
    """``(rng, labels, F, counts)``: n rows' classes, left-out outputs leaning to them, and each row's count of
    copies (1 to 3)."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 3, n)
    F = 0.1 * rng.randn(n, 3) + 0.05 * (labels[:, None] == np.arange(3))
    return rng, labels, F, rng.randint(1, 4, n)


@pytest.mark.parametrize("n", [200, 900])
def test_left_out_classes_of_the_layer_with_integer_weights_equal_repeated_rows(n):
    # Regression: the check's layer weighed rows to sum to their count, so repeated rows weakened its
    # penalty against one weighted row (scikit-learn's sample-weight equivalence check failed). With
    # more repeated rows than the layer reads (n=900), it drew rows before merging copies, and the
    # repeated rows' draw differed from the weighted ones' (the classification check chose another ridge).
    from kernelgd._combiner import CHECK_ROWS, layer_classes

    rng, labels, F, counts = _repeated_outputs(n, 1)
    assert n < CHECK_ROWS < counts.sum() or counts.sum() < CHECK_ROWS
    weighted = layer_classes(F, labels, counts.astype(float))
    repeated = layer_classes(np.repeat(F, counts, axis=0), np.repeat(labels, counts), np.ones(counts.sum()))
    assert_array_equal(np.repeat(weighted, counts), repeated)


@pytest.mark.parametrize("n", [300, 900])
def test_left_out_classes_merge_a_groups_rows_whatever_the_rounding_of_their_outputs(n):
    # Rows of a group of identical rows share one left-out output; computed, their copies differ in rounding.
    # The check merged rows of bitwise equal outputs only: a copy off by 1e-16 became a row of its own, which
    # changed the layer's rows (past CHECK_ROWS its draw) and so the left-out classes of other rows
    from kernelgd._combiner import layer_classes

    rng, labels, F, counts = _repeated_outputs(n, 2)
    groups = np.repeat(np.arange(n), counts)
    exact = np.repeat(F, counts, axis=0)
    rounded = exact * (1 + 1e-15 * rng.choice([-1, 0, 1], size=exact.shape))
    w = rng.uniform(0.5, 2.0, len(groups))
    reference = layer_classes(exact, labels[groups], w)
    assert_array_equal(layer_classes(rounded, labels[groups], w, groups=groups), reference)


def test_scaling_the_weights_keeps_the_classification_ridge():
    # 200 repeated rows: the ridge rule's left-out classes changed with the rounding of their outputs, and the
    # ridge chosen with it (1.8e-5 for weights w, 1e-3 for 3 w)
    rng = np.random.RandomState(5)
    X = rng.randn(1100, 8)
    f = np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] ** 2 + 0.5 * rng.randn(1100)
    y = (f > np.median(f)).astype(int) + (f > np.quantile(f, 0.8))
    X, y = np.vstack([X[:900], X[:200]]), np.r_[y[:900], y[:200]]
    w = rng.uniform(0.2, 3.0, len(y))
    alphas = [KernelGDClassifier(random_state=0).fit(X, y, sample_weight=c * w).alpha_ for c in (1.0, 3.0, 0.7)]
    assert alphas[0] == alphas[1] == alphas[2]


@pytest.mark.parametrize("n", [300, 3000])
def test_left_out_classes_of_the_layer_do_not_read_the_left_out_rows_absence(n):
    # Regression: an intercept-only model's left-out outputs are each class's share without the row, a
    # little lower for the row's own class; a layer on whitened outputs read every class from that
    # (KernelGDClassifierCV took sigma=124, alpha=1 on digits, 0.10 accuracy). As the fit's layer, on
    # the outputs as they are, the check reads no better than the majority class.
    from kernelgd._combiner import layer_classes

    labels = np.random.RandomState(0).choice(3, n, p=[0.5, 0.3, 0.2])
    onehot = labels[:, None] == np.arange(3)
    F = 2 * (onehot.sum(axis=0) - onehot) / (n - 1) - 1  # each row's left-out mean of the +-1 codes
    assert np.mean(layer_classes(F, labels, np.ones(n)) == labels) < 0.6


def test_left_out_classes_of_the_layer_without_two_classes_or_spread_are_the_majoritys():
    from kernelgd._combiner import layer_classes

    labels, w = np.array([0, 1, 1, 2, 1]), np.array([1.0, 1.0, 1.0, 5.0, 1.0])
    assert_array_equal(layer_classes(np.ones((5, 3)), labels, w), np.full(5, 2))
    assert_array_equal(layer_classes(np.arange(5.0)[:, None], np.ones(5), w), np.ones(5))



def test_a_layer_reads_own_class_by_its_slope_or_its_classes_centred_own_coefficients():
    from kernelgd._combiner import reads_own_class

    assert reads_own_class([[0.5]], [0]) and not reads_own_class([[-0.5]], [0]) and not reads_own_class([[0.0]], [0])
    W = np.array([[2.0, -1.0, -1.0], [-1.0, 2.0, -1.0], [-1.0, -1.0, 2.0]])
    assert reads_own_class(W, [0, 1, 2]) and not reads_own_class(-W, [0, 1, 2])
    # adding a constant to every class's score changes no probability, nor the reading
    assert reads_own_class(W + 5.0, [0, 1, 2]) and not reads_own_class(-W + 5.0, [0, 1, 2])
    # a middle class read from the others' outputs (nested shells) may have its own coefficient negative
    assert reads_own_class(np.array([[3.0, -1.0, -2.0], [1.0, -0.5, -0.5], [-2.0, -1.0, 3.0]]), [0, 1, 2])
    # two classes (2 and 0) of three outputs: one decision column, class 2's score over class 0's
    assert reads_own_class(np.array([[-1.0], [0.0], [1.0]]), [0, 2])
    assert not reads_own_class(np.array([[1.0], [0.0], [-1.0]]), [0, 2])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_output_layer_does_not_invert_outputs_that_carry_no_signal(n_classes):
    # Regression: on labels independent of X, each row's left-out output leans away from its own class, and
    # the layer fitted to them read the outputs inverted: the training rows, whose own outputs follow their
    # labels, were all assigned wrong classes (accuracy 0.0 on 30 rows of 40 features, 3 classes, where the
    # majority class has 0.5). The layer is then the classes' weighted shares: the intercept-only model.
    from kernelgd._combiner import fit_combiner

    for seed in range(3):
        rng = np.random.RandomState(seed)
        X = rng.normal(size=(60, 10))
        y = rng.choice(n_classes, 60, p=[0.5, 0.5] if n_classes == 2 else [0.5, 0.3, 0.2])
        clf = KernelGDClassifier(random_state=0).fit(X, y)
        shares = np.bincount(y, minlength=n_classes) / len(y)
        assert clf.score(X, y) >= shares.max() - 1e-12
        assert_allclose(clf.combiner_.coef_, 0.0)
        assert_allclose(clf.combiner_.predict_proba(clf.decision_function(X).reshape(60, -1)),
                        np.tile(shares, (60, 1)), atol=1e-4)
    # the left-out means of the codes, the purest case: every row's output leans away from its class
    labels = np.random.RandomState(0).choice(3, 300, p=[0.5, 0.3, 0.2])
    Y = 2.0 * (labels[:, None] == np.arange(3)) - 1
    F = (Y.sum(axis=0) - Y) / 299
    layer = fit_combiner(F, Y, np.ones(300), F)
    assert_allclose(layer.coef_, 0.0)
    assert_allclose(layer.predict_proba(F)[0], np.bincount(labels) / 300, atol=1e-4)

@pytest.mark.parametrize("X", [np.full((3, 1), 3.0), 1e-7 * np.random.RandomState(285).normal(size=(3, 5))],
                         ids=["identical rows", "tiny scale"])
def test_output_layer_on_one_row_per_class_fits_without_a_warning(X):
    # Regression: three rows of three classes gave every row the same left-out outputs, where the output layer's
    # Newton line search gives up at its start (already the optimum to rounding) and scikit-learn warned before
    # falling back to L-BFGS: a default fit warned. The layer is the classes' shares.
    y = np.array([1, 3, 6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = KernelGDClassifier().fit(X, y)
    assert_allclose(clf.predict_proba(X), np.full((3, 3), 1 / 3), atol=1e-6)


@pytest.mark.parametrize("n, flip, seed", [(600, 0.1, 0), (1500, 0.1, 1)])
def test_output_layer_fitted_to_left_out_outputs_reads_classes_between_others(n, flip, seed):
    # five classes that are bands of one smooth function: the middle classes' one-vs-rest outputs are bumps,
    # which the training rows' own outputs overstate; a layer fitted to them misreads unseen rows
    from sklearn.linear_model import LogisticRegression

    rng = np.random.RandomState(seed)
    X = rng.uniform(-1, 1, (n + 2000, 5))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4
    y = np.searchsorted(np.quantile(f[:n], [0.2, 0.4, 0.6, 0.8]), f)
    y = np.where(rng.rand(len(y)) < flip, rng.randint(0, 5, len(y)), y)
    X_fit, y_fit, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    clf = KernelGDClassifier(random_state=0).fit(X_fit, y_fit)
    plain = KernelGDClassifier(combine="argmax", kernel=clf.kernel_, sigma=clf.sigma_, alpha=clf.alpha_,
                               random_state=0).fit(X_fit, y_fit)
    in_sample = LogisticRegression(max_iter=1000).fit(plain.decision_function(X_fit), y_fit)
    assert clf.score(X_test, y_test) >= in_sample.score(plain.decision_function(X_test), y_test) + 0.02


def test_left_out_outputs_leave_copies_of_a_row_out_together_and_landmarks_out_of_the_layer():
    from kernelgd._combiner import left_out_outputs
    from kernelgd.kernels import bind_kernel

    rng = np.random.RandomState(0)
    kernel = bind_kernel("rbf", sigma=2.0)
    X, Y = rng.randn(80, 3), np.where(rng.rand(80, 1) < 0.5, 1.0, -1.0)
    F, w_layer = left_out_outputs(X, None, kernel, Y, np.full(80, 2.0), 1e-3, True, False, 1, 0)
    assert_allclose(w_layer, 1 / 80)  # every row left out exactly: every row trains the layer
    # a copy left in would predict its twin: copies are left out together, as one row of their summed weight
    F2, _ = left_out_outputs(np.repeat(X, 2, 0), None, kernel, np.repeat(Y, 2, 0), np.ones(160), 1e-3, True, False,
                             1, 0)
    assert_allclose(F2, np.repeat(F, 2, 0), rtol=1e-8, atol=1e-10)
    # beyond 1,000 distinct rows: a Nystroem model's, whose landmarks do not train the layer
    X, Y = rng.randn(1200, 3), np.where(rng.rand(1200, 1) < 0.5, 1.0, -1.0)
    F, w_layer = left_out_outputs(X, None, kernel, Y, np.ones(1200), 1e-3, True, False, 1, 0)
    assert np.all(np.isfinite(F)) and 0 < np.count_nonzero(w_layer == 0) <= 500


def test_output_layer_with_many_classes_for_its_rows_shares_one_slope(monkeypatch):
    # Regression: the layer's k (k + 1) numbers overfit many classes' left-out outputs: on 40 classes of 1,400 rows
    # its accuracy was 0.283 against 0.340 for the largest output (SVC(): 0.338). A slope shared by the classes
    # replaces it where its cross-validated log-loss is lower.
    from sklearn.datasets import make_classification
    from sklearn.metrics import log_loss

    from kernelgd import _combiner

    X, y = make_classification(2000, 20, n_informative=10, n_redundant=0, n_classes=40, n_clusters_per_class=1,
                               random_state=0)
    X = StandardScaler().fit_transform(X)
    X_fit, y_fit, X_test, y_test = X[:1400], y[:1400], X[1400:], y[1400:]
    clf = KernelGDClassifier(random_state=0).fit(X_fit, y_fit)
    coef = clf.combiner_.coef_
    assert coef[0, 0] > 0
    assert_allclose(coef, coef[0, 0] * np.eye(40), atol=1e-12)
    plain = KernelGDClassifier(random_state=0, combine="argmax").fit(X_fit, y_fit)
    assert clf.score(X_test, y_test) >= plain.score(X_test, y_test) - 0.02  # (0.327 against 0.340 on 600 rows)
    monkeypatch.setattr(_combiner, "SHARED_ROWS_PER_NUMBER", 0)  # the full layer, as before
    full = KernelGDClassifier(random_state=0).fit(X_fit, y_fit)
    assert log_loss(y_test, clf.predict_proba(X_test)) < log_loss(y_test, full.predict_proba(X_test)) - 0.2
    assert clf.score(X_test, y_test) > full.score(X_test, y_test) + 0.04  # (0.327 against 0.258)


def _outputs_of_classes(n, k, signal, seed):
    """``(rng, labels, Y, F)``: random labels of k classes, their +-1 codes, and noisy outputs ``signal`` Y off zero."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, k, n)
    Y = np.where(labels[:, None] == np.arange(k), 1.0, -1.0)
    return rng, labels, Y, signal * Y + rng.normal(size=(n, k))


def test_shared_slope_layer_minimizes_its_objective():
    # against a generic optimizer on the objective written out: weighted mean log-loss of softmax(a F + b) plus
    # (a s)^2 / (2 N), s the outputs' weighted spread, N the distinct rows; and whatever the outputs' scale
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    from kernelgd._combiner import fit_shared

    n, k = 300, 4
    rng, labels, Y, F = _outputs_of_classes(n, k, 0.3, 0)
    w = rng.uniform(0.5, 2.0, n)
    W = w / w.sum()
    spread = np.sqrt(W @ np.mean((F - W @ F.mean(axis=1)) ** 2, axis=1))

    def objective(theta):
        log_p = log_softmax(theta[0] * F + theta[1:], axis=1)
        return -W @ log_p[np.arange(n), labels] + (theta[0] * spread) ** 2 / (2 * n)

    ref = minimize(objective, np.zeros(k + 1), method="BFGS", options={"gtol": 1e-10}).x
    P_ref = np.exp(log_softmax(ref[0] * F + ref[1:], axis=1))
    layer = fit_shared(F, Y, w, F)
    assert_allclose(layer.predict_proba(F), P_ref, atol=1e-6)
    assert_allclose(layer.coef_, ref[0] * np.eye(k), rtol=1e-5)
    assert_allclose(fit_shared(1e-3 * F, Y, w, F).predict_proba(1e-3 * F), P_ref, atol=1e-6)
    # no signal (each output leans away from its class): the classes' weighted shares
    inverted = fit_shared(-Y + 0.01 * rng.normal(size=(n, k)), Y, w, F)
    assert_allclose(inverted.coef_, 0.0)
    assert_allclose(inverted.predict_proba(F[:1])[0], np.bincount(labels, weights=W, minlength=k), rtol=1e-12)


def test_output_layer_choice_reads_integer_weights_as_rows_repeated():
    from kernelgd._combiner import fit_output_layer

    n, k = 200, 12
    rng, _, Y, F = _outputs_of_classes(n, k, 0.4, 1)
    counts = rng.randint(0, 3, n)
    weighted = fit_output_layer(F, Y, counts.astype(float), F, 0)
    repeated = fit_output_layer(*(np.repeat(A, counts, axis=0) for A in (F, Y)), np.ones(counts.sum()),
                                np.repeat(F, counts, axis=0), 0)
    assert weighted.coef_[0, 1] == 0.0  # the shared slope: 156 numbers on about 130 distinct rows
    assert_allclose(repeated.coef_, weighted.coef_, rtol=1e-6)
    assert_allclose(repeated.intercept_, weighted.intercept_, atol=1e-6)


def test_many_classes_for_the_rows_warn_once():
    # Regression: scikit-learn's warning that the classes are more than half the rows came from the fit's check of
    # the labels, and again from the output layer's LogisticRegression
    X = np.random.RandomState(0).normal(size=(25, 2))
    y = np.r_[np.arange(15), np.arange(10)]
    from kernelgd import KernelGDClassifierCV

    for model in (KernelGDClassifier(random_state=0), KernelGDClassifierCV(random_state=0)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y)
        assert [str(w.message)[:30] for w in caught] == ["The number of unique classes i"]


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_classes_of_half_the_rows_warn_from_no_inner_fit(loss):
    # Regression: with 30 classes of 2 rows (not more classes than half the rows: scikit-learn's check is quiet)
    # the logistic search's fold fits, of 48 rows each, raised scikit-learn's warning 42 times
    X = np.random.RandomState(0).normal(size=(60, 4))
    y = np.repeat(np.arange(30), 2)
    from kernelgd import KernelGDClassifierCV

    for model in (KernelGDClassifier(loss=loss, random_state=0), KernelGDClassifierCV(loss=loss, random_state=0)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y)
        assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("estimator", [KernelGDClassifier, KernelGDClassifierCV])
def test_a_layer_without_signal_breaks_tied_class_shares_by_the_outputs(estimator):
    # one row per class: the left-out outputs carry no signal, so the output layer is the classes' shares
    # (equal), and every row, training rows too, got the first class
    X, y = np.array([[0.0], [1.0], [2.0]]), np.array([5, 7, 9])
    model = estimator().fit(X, y)
    assert_allclose(model.predict_proba(X), 1 / 3)  # what the layer says: no signal
    assert_array_equal(model.predict(X), y)  # the model's own outputs break the tie
    assert_array_equal(estimator().fit(X[:2], ["a", "b"]).predict(X[:2]), ["a", "b"])
    if estimator is KernelGDClassifier:  # unequal shares in a layer without signal: the largest class, as before
        unequal = estimator().fit(np.arange(4.0)[:, None], [0, 1, 1, 2])
        assert not np.any(unequal.combiner_.coef_)
        assert_array_equal(unequal.predict(X), [1, 1, 1])
