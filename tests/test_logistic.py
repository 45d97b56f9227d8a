"""loss="logistic": kernel logistic regression against independent references."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import minimize
from scipy.special import log_expit, logsumexp, softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import cross_val_score
from sklearn.utils.class_weight import compute_class_weight, compute_sample_weight

from kernelgd import KernelGDClassifier, kernel_matrix
from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss

rng = np.random.RandomState(0)
X = rng.randn(120, 4)
y2 = (X[:, 0] + 0.5 * X[:, 1] + 0.7 * rng.randn(120) > 0).astype(int)
y3 = np.digitize(X[:, 0] + 0.4 * rng.randn(120), [-0.5, 0.5])
TIGHT = dict(tol=1e-10, max_iter=200_000, random_state=0)  # the same preconditioner landmarks in every fit
# Newton's test is on the decrement (objective units): tol**2 * the baseline objective
TIGHT_NEWTON = dict(tol=1e-7, max_iter=500)


def tight(solver):
    return dict(TIGHT_NEWTON if solver == "newton" else TIGHT, solver=solver)


@pytest.mark.parametrize("solver", ["gd", "newton"])
@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
@pytest.mark.parametrize("weighted", [False, True])
def test_linear_kernel_equals_logistic_regression(labels, weighted, solver):
    C = 0.3
    sw = np.random.RandomState(1).uniform(0.5, 2.0, len(labels)) if weighted else np.ones(len(labels))
    ref = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(X, labels, sample_weight=sw)
    alpha = 1.0 / (2.0 * C * sw.sum())
    model = KernelGDClassifier(loss="logistic", kernel="linear", alpha=alpha, **tight(solver))
    model.fit(X, labels, sample_weight=sw if weighted else None)
    assert_allclose(model.predict_proba(X), ref.predict_proba(X), atol=1e-6)
    beta = (X.T @ model.dual_coef_.reshape(len(X), -1)).T  # beta = X' dual_coef
    assert_allclose(beta, ref.coef_, atol=1e-5)
    if labels is y2:
        assert_allclose(model.intercept_, ref.intercept_, atol=1e-5)
    else:  # softmax intercepts are defined up to a common shift
        assert_allclose(model.intercept_ - model.intercept_.mean(), ref.intercept_ - ref.intercept_.mean(), atol=1e-5)


def _dense_reference(K, Y, w, alpha, multinomial):
    """Minimise sum_i w_i l(f_i) + alpha ||f||_H^2 over f = L c + b, K = L L' (so ||f||_H^2 = c'c)."""
    L = np.linalg.cholesky(K + 1e-10 * np.eye(len(K)))
    n, k = Y.shape

    def unpack(theta):
        c, b = theta[: n * k].reshape(n, k), theta[n * k :]
        return c, b, L @ c + b

    def fun(theta):
        c, b, F = unpack(theta)
        if multinomial:
            value = np.dot(w, logsumexp(F, axis=1) - np.sum(Y * F, axis=1))
            G = w[:, None] * (softmax(F, axis=1) - Y)
        else:
            value = -np.dot(w, log_expit(Y[:, 0] * F[:, 0]))
            G = BinaryLogisticLoss.gradient(F, Y, w)
        value += alpha * np.sum(c * c)
        grad = np.concatenate([(L.T @ G + 2 * alpha * c).ravel(), G.sum(axis=0)])
        return value, grad

    res = minimize(fun, np.zeros(n * k + k), jac=True, method="L-BFGS-B",
                   options={"maxiter": 100_000, "gtol": 1e-12, "ftol": 1e-15})
    return unpack(res.x)[2]


@pytest.mark.parametrize("solver", ["gd", "newton"])
@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
@pytest.mark.parametrize("class_weight", [None, "balanced"])
def test_rbf_kernel_equals_dense_reference(labels, class_weight, solver):
    sw = np.random.RandomState(2).uniform(0.5, 2.0, len(labels))
    alpha = 1e-2
    model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=alpha, class_weight=class_weight,
                               **tight(solver))
    model.fit(X, labels, sample_weight=sw)
    w = sw * (compute_class_weight(class_weight, classes=np.unique(labels), y=labels, sample_weight=sw)[labels]
              if class_weight else 1.0)
    w = w / w.sum()
    K = kernel_matrix(X, sigma=2.0)
    multinomial = labels is y3
    Y = np.eye(3)[labels] if multinomial else np.where(labels == 1, 1.0, -1.0)[:, None]
    F_ref = _dense_reference(K, Y, w, alpha, multinomial)
    loss = MultinomialLoss if multinomial else BinaryLogisticLoss
    assert_allclose(model.predict_proba(X), loss.probabilities(F_ref), atol=1e-5)


@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
def test_gd_iterates_are_primal_gradient_descent(labels):
    alpha, eta, steps = 0.05, 0.3, 7
    model = KernelGDClassifier(loss="logistic", kernel="linear", alpha=alpha, solver="gd",
                               step_size=eta, max_iter=steps, tol=0).fit(X, labels)
    multinomial = labels is y3
    Y = np.eye(3)[labels] if multinomial else np.where(labels == 1, 1.0, -1.0)[:, None]
    loss = MultinomialLoss if multinomial else BinaryLogisticLoss
    w = np.full(len(X), 1.0 / len(X))
    beta, b = np.zeros((X.shape[1], Y.shape[1])), loss.baseline(Y, w, True)[0]  # the intercept-only optimum
    for _ in range(steps):  # gradient descent on sum_i w_i l(x_i'beta + b) + alpha |beta|^2
        G = loss.gradient(X @ beta + b, Y, w)
        beta, b = beta - eta * (X.T @ G + 2 * alpha * beta), b - eta * G.sum(axis=0)
    assert_allclose(X.T @ model.dual_coef_.reshape(len(X), -1), beta, rtol=1e-10, atol=1e-12)
    assert_allclose(model.intercept_, b, rtol=1e-10, atol=1e-12)


def test_probabilities_follow_classes_and_sum_to_one():
    labels = np.array(["cat", "dog", "emu"])[y3]
    model = KernelGDClassifier(loss="logistic", sigma=2.0).fit(X, labels)
    P = model.predict_proba(X)
    assert P.shape == (len(X), 3)
    assert_allclose(P.sum(axis=1), 1.0)
    assert_allclose(np.exp(model.predict_log_proba(X)), P, rtol=1e-12)
    assert np.array_equal(model.classes_[P.argmax(axis=1)], model.predict(X))
    assert (model.predict(X) == labels).mean() > 0.8


def test_predict_proba_exists_with_the_logistic_loss_or_the_output_layer():
    argmax = KernelGDClassifier(combine="argmax").fit(X, y2)
    assert not hasattr(argmax, "predict_proba")
    assert not hasattr(argmax, "predict_log_proba")
    with pytest.raises(AttributeError) as excinfo:
        argmax.predict_proba(X)
    assert "combine='argmax'" in str(excinfo.value.__cause__)  # the reason, chained by available_if
    assert hasattr(KernelGDClassifier(loss="logistic"), "predict_proba")
    squared = KernelGDClassifier().fit(X, y3)  # the output layer's probabilities
    P = squared.predict_proba(X)
    assert_allclose(P.sum(axis=1), 1.0)
    assert_allclose(np.exp(squared.predict_log_proba(X)), P, rtol=1e-12)
    assert_array_equal(squared.classes_[P.argmax(axis=1)], squared.predict(X))


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_scorers_that_need_probabilities(loss):
    model = KernelGDClassifier(loss=loss, sigma=2.0)
    scores = cross_val_score(model, X, y3, cv=3, scoring="neg_log_loss")
    assert np.all(np.isfinite(scores)) and np.all(scores < 0)
    auc = cross_val_score(model, X, y3, cv=3, scoring="roc_auc_ovr")
    assert np.all(auc > 0.7)


def test_alpha_auto_gives_a_minimiser_on_separable_data():
    Xs = np.r_[rng.randn(30, 2) + 4, rng.randn(30, 2) - 4]
    ys = np.r_[np.ones(30), np.zeros(30)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # the defaults converge
        model = KernelGDClassifier(loss="logistic", kernel="linear").fit(Xs, ys)
    assert model.alpha_ > 0
    assert model.score(Xs, ys) == 1.0
    tight = KernelGDClassifier(loss="logistic", kernel="linear", **TIGHT_NEWTON).fit(Xs, ys)
    assert tight.solver_ == "newton"
    # regression: an unreachable tol stops at rounding instead of running max_iter Newton steps
    at_rounding = KernelGDClassifier(loss="logistic", kernel="linear", tol=1e-12, max_iter=100_000).fit(Xs, ys)
    assert at_rounding.n_iter_ < 100
    ref = LogisticRegression(C=1.0 / (2.0 * tight.alpha_ * 60), tol=1e-12, max_iter=10_000).fit(Xs, ys)
    assert_allclose(tight.predict_proba(Xs), ref.predict_proba(Xs), atol=1e-6)
    assert KernelGDClassifier().fit(Xs, ys).alpha_ > 0  # squared loss: the leave-one-out rule's ridge


def test_class_weight_equals_sample_weight():
    cw = {0: 3.0, 1: 1.0, 2: 0.5}
    for loss in ("squared", "logistic"):
        a = KernelGDClassifier(loss=loss, class_weight=cw, sigma=2.0, alpha=1e-2, **TIGHT).fit(X, y3)
        b = KernelGDClassifier(loss=loss, sigma=2.0, alpha=1e-2, **TIGHT).fit(
            X, y3, sample_weight=compute_sample_weight(cw, y3)
        )
        assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-6, atol=1e-8)


def test_balanced_class_weight_matches_logistic_regression():
    labels = (X[:, 0] > 0.8).astype(int)  # imbalanced
    ref = LogisticRegression(C=1.0, class_weight="balanced", tol=1e-12, max_iter=10_000).fit(X, labels)
    model = KernelGDClassifier(loss="logistic", kernel="linear", class_weight="balanced",
                               alpha=1 / (2 * len(X)), **TIGHT).fit(X, labels)
    assert_allclose(model.predict_proba(X), ref.predict_proba(X), atol=1e-5)


def test_softmax_on_centers_preconditioned_per_class_reaches_the_same_optimum_in_fewer_iterations(monkeypatch):
    # each class's block preconditioned by a FALKON factor of its own Hessian weights, against one factor of the
    # classes' mean weights: the same optimum, in fewer CG iterations (8 classes whose weights lie apart)
    from sklearn.datasets import make_blobs

    from kernelgd._solvers.newton import _centers

    X8, y8 = make_blobs(3000, 4, centers=8, cluster_std=2.5, random_state=0)
    iterations, run = {}, _centers.block_pcg

    def counted(*args, **kwargs):
        out = run(*args, **kwargs)
        iterations[passes] = iterations.get(passes, 0) + out[1]
        return out

    monkeypatch.setattr(_centers, "block_pcg", counted)
    fits, default = {}, _centers.CLASS_FACTOR_PASSES
    for passes in (default, 0):  # 0: the per-class factors never pay
        monkeypatch.setattr(_centers, "CLASS_FACTOR_PASSES", passes)
        fits[passes] = KernelGDClassifier(loss="logistic", n_centers=300, alpha=1e-6, sigma=2.0, tol=1e-6,
                                          random_state=0).fit(X8, y8)
    by_class, mean = fits[default], fits[0]
    assert by_class.loss_curve_[-1] == pytest.approx(mean.loss_curve_[-1], rel=1e-9)
    assert_allclose(by_class.predict_proba(X8), mean.predict_proba(X8), atol=1e-7)
    assert iterations[default] < 0.7 * iterations[0]


@pytest.mark.parametrize("n_centers", [None, 40])
def test_a_class_without_weight_is_left_out_as_logistic_regression_leaves_it(n_centers):
    # class 0 weighs nothing: its intercept has no optimum (it runs to -inf). The fit is the other classes'
    # softmax, as LogisticRegression's, without a warning; class 0 gets no coefficients and the floor's probability
    cw = {0: 0.0, 1: 1.0, 2: 1.0}
    ref = LogisticRegression(C=0.3, class_weight=cw, tol=1e-12, max_iter=10_000).fit(X, y3)
    alpha = 1.0 / (2.0 * 0.3 * np.count_nonzero(y3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", kernel="linear", alpha=alpha, class_weight=cw,
                                   n_centers=n_centers, **TIGHT_NEWTON).fit(X, y3)
    P = model.predict_proba(X)
    assert_allclose(P, ref.predict_proba(X), atol=1e-6)
    assert np.all(model.dual_coef_[:, 0] == 0) and 0 < P[:, 0].max() <= 1.001e-12
    assert np.all(np.isfinite(model.predict_log_proba(X)))


@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
def test_labels_of_one_weighted_class_are_the_intercept_only_model(labels):
    # every other class weighs nothing: the intercept-only model, at the baseline's floor, is the fit at once
    cw = {c: float(c == 1) for c in np.unique(labels)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", alpha=1e-3, class_weight=cw, random_state=0).fit(X, labels)
    assert model.n_iter_ == 0 and np.all(model.dual_coef_ == 0)
    P = model.predict_proba(X)
    assert_allclose(P[:, 1], 1.0, atol=1e-11)
    assert np.all(np.isfinite(model.predict_log_proba(X)))


def test_default_fit_with_a_class_without_weight_does_not_warn():
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import scale

    Xw, yw = load_wine(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", class_weight={0: 0.0}, random_state=0).fit(scale(Xw), yw)
    keep = yw > 0
    assert model.score(scale(Xw)[keep], yw[keep]) > 0.95
    assert model.predict_proba(scale(Xw))[:, 0].max() < 1e-6


@pytest.mark.parametrize("solver", ["cg", "eigenpro"])
def test_squared_only_solvers_refuse_logistic(solver):
    with pytest.raises(ValueError, match="squared loss only"):
        KernelGDClassifier(loss="logistic", solver=solver).fit(X, y2)


@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
@pytest.mark.parametrize("intercept", [True, False])
def test_centers_equal_dense_reference(labels, intercept):
    # f = K_nm beta + b with ||f||_H^2 = beta' K_mm beta; K_mm = T'T, c = T beta
    sw = np.random.RandomState(3).uniform(0.5, 2.0, len(labels))
    alpha = 1e-2
    model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=alpha, n_centers=30, random_state=0,
                               fit_intercept=intercept, **tight("newton")).fit(X, labels, sample_weight=sw)
    assert model.solver_ == "newton"
    multinomial = labels is y3
    loss = MultinomialLoss if multinomial else BinaryLogisticLoss
    F_ref = _centers_reference(model, labels, sw, alpha, intercept)
    assert_allclose(model.predict_proba(X), loss.probabilities(F_ref), atol=1e-5)


def _centers_reference(model, labels, sw, alpha, intercept):
    """The centers model's optimal scores on X, by L-BFGS on its explicit features."""
    # f = K_nm beta + b with ||f||_H^2 = beta' K_mm beta; K_mm = T'T, c = T beta
    C = model.X_fit_
    Knm, Kmm = kernel_matrix(X, C, sigma=2.0), kernel_matrix(C, sigma=2.0)
    T = np.linalg.cholesky(Kmm + 1e-10 * np.eye(len(C))).T
    Phi = np.linalg.solve(T.T, Knm.T).T  # K_nm T^-1: f = Phi c
    n_classes = len(np.unique(labels))
    multinomial = n_classes > 2
    Y = np.eye(n_classes)[labels] if multinomial else np.where(labels == 1, 1.0, -1.0)[:, None]
    loss = MultinomialLoss if multinomial else BinaryLogisticLoss
    w = sw / sw.sum()
    k = Y.shape[1]

    def fun(theta):
        c = theta[: Phi.shape[1] * k].reshape(-1, k)
        b = theta[Phi.shape[1] * k :] if intercept else np.zeros(k)
        F = Phi @ c + b
        G = loss.gradient(F, Y, w)
        grad = [(Phi.T @ G + 2 * alpha * c).ravel()] + ([G.sum(axis=0)] if intercept else [])
        return loss.value(F, Y, w) + alpha * np.sum(c * c), np.concatenate(grad)

    size = Phi.shape[1] * k + (k if intercept else 0)
    res = minimize(fun, np.zeros(size), jac=True, method="L-BFGS-B",
                   options={"maxiter": 100_000, "gtol": 1e-12, "ftol": 1e-15})
    c = res.x[: Phi.shape[1] * k].reshape(-1, k)
    return Phi @ c + (res.x[Phi.shape[1] * k :] if intercept else 0.0)


@pytest.mark.parametrize("intercept", [True, False])
def test_newton_softmax_on_centers_takes_exact_newton_steps(intercept):
    # Regression: with the Hessian's diagonal as its model, the softmax on centers converged
    # linearly (alpha=1e-6 on 400 points: no convergence in 200 iterations); exact steps on the
    # coupled Hessian converge in a few, to the same optimum.
    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.randn(120), [-1.5, -0.8, -0.2, 0.4, 1.0])
    sw = np.random.RandomState(4).uniform(0.5, 2.0, len(labels))
    alpha = 1e-4
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=alpha, n_centers=40, random_state=0,
                                   solver="newton", tol=1e-6, max_iter=30, fit_intercept=intercept,
                                   ).fit(X, labels, sample_weight=sw)
    assert model.n_iter_ <= 12
    F_ref = _centers_reference(model, labels, sw, alpha, intercept)
    assert_allclose(model.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-4)


def test_newton_softmax_on_centers_with_many_classes_eliminates_the_intercepts_per_product(monkeypatch):
    # Past PAIR_COLUMNS_MAX_CLASSES classes the intercepts are eliminated in each CG product (two
    # passes over K_nm) instead of through K'H 1's k (k + 1) / 2 columns per step (letter, 26 classes,
    # 2,000 centers: 15.7 s against 19.8 s): the same steps, the reference's optimum.
    from kernelgd._operator import KernelOperator
    from kernelgd._solvers import _dense_newton
    from kernelgd._solvers.newton import _centers

    monkeypatch.setattr(_dense_newton, "MAX_FLOPS", 0)  # CG's steps: these few centers would be solved densely
    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.randn(120), np.linspace(-1.6, 1.6, 9))
    assert len(np.unique(labels)) == 10 > _centers.PAIR_COLUMNS_MAX_CLASSES
    sw = np.random.RandomState(7).uniform(0.5, 2.0, len(labels))
    widths = []
    original = KernelOperator.rmatvec

    def recording(self, V):
        widths.append(V.shape[1])
        return original(self, V)

    params = dict(loss="logistic", sigma=2.0, alpha=1e-3, n_centers=40, random_state=0, solver="newton", tol=1e-8,
                  max_iter=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        monkeypatch.setattr(KernelOperator, "rmatvec", recording)
        projected = KernelGDClassifier(**params).fit(X, labels, sample_weight=sw)
        assert max(widths) == 10  # no pair columns
        monkeypatch.setattr(_centers, "PAIR_COLUMNS_MAX_CLASSES", 100)
        paired = KernelGDClassifier(**params).fit(X, labels, sample_weight=sw)
    # the same steps to the objective's rounding; whether one more step resolves a decrease there
    # depends on the BLAS kernel's rounding (OPENBLAS_CORETYPE=Haswell: 6 against 7)
    assert abs(projected.n_iter_ - paired.n_iter_) <= 1
    assert_allclose(projected.predict_proba(X), paired.predict_proba(X), atol=1e-8)
    F_ref = _centers_reference(projected, labels, sw, 1e-3, True)
    assert_allclose(projected.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-4)


def test_auto_picks_newton_for_the_logistic_loss():
    assert KernelGDClassifier(loss="logistic").fit(X, y2).solver_ == "newton"
    assert KernelGDClassifier(loss="logistic").fit(X, y3).solver_ == "newton"
    assert KernelGDClassifier(loss="logistic", n_centers=30).fit(X, y3).solver_ == "newton"


def test_newton_with_centers_reads_k_nm_once_per_iteration_for_every_class(monkeypatch):
    # Regression: each class had its own CG run, one pass over K_nm per class per iteration
    # (26 classes: 6x slower). Now every pass serves all classes, and the fit still converges.
    from kernelgd._operator import KernelOperator
    from kernelgd._solvers import _dense_newton

    monkeypatch.setattr(_dense_newton, "MAX_FLOPS", 0)  # CG's steps: these few centers would be solved densely
    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.randn(120), [-1.5, -0.8, -0.2, 0.4, 1.0])
    widths = []
    original = KernelOperator.gram_matvec

    def recording(self, V, w):
        widths.append(V.shape[1])
        return original(self, V, w)

    monkeypatch.setattr(KernelOperator, "gram_matvec", recording)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=1e-3, n_centers=40, random_state=0,
                                   solver="newton", tol=1e-6, max_iter=100).fit(X, labels)
    assert model.n_iter_ < 100
    assert widths and set(widths) == {6}


@pytest.mark.parametrize("alpha", [1e-4, 1e-2], ids=["diagonal-model", "exact-steps"])
@pytest.mark.parametrize("labels", ["binary", "multinomial"])
@pytest.mark.parametrize("intercept", [True, False])
def test_newton_full_model_warm_starts_without_a_product(monkeypatch, capsys, labels, intercept, alpha):
    # Each Newton step's CG run starts from the current coefficients, whose product with K the
    # solver already has: every product is a CG iteration, but the final objective's one.
    import re

    from kernelgd._operator import KernelOperator

    products = []
    original = KernelOperator.matvec

    def recording(self, V):
        products.append(V.shape)
        return original(self, V)

    monkeypatch.setattr(KernelOperator, "matvec", recording)
    model = KernelGDClassifier(loss="logistic", alpha=alpha, solver="newton", fit_intercept=intercept,
                               tol=1e-6, verbose=1).fit(X, y2 if labels == "binary" else y3)
    cg_iterations = sum(int(n) for n in re.findall(r"cg iterations (\d+)", capsys.readouterr().out))
    # (a warm start that cost a product would add one per step: n_iter_ > 1 of them)
    assert model.n_iter_ > 1 and cg_iterations >= model.n_iter_
    assert len(products) == cg_iterations + 1
    reference = KernelGDClassifier(loss="logistic", alpha=alpha, solver="newton", fit_intercept=intercept,
                                   tol=1e-10).fit(X, y2 if labels == "binary" else y3)
    assert_allclose(model.predict_proba(X), reference.predict_proba(X), atol=1e-5)


def test_newton_warm_start_whose_coefficients_do_not_sum_to_zero():
    # Coefficients fitted without an intercept do not sum to 0: the intercept's projection then
    # changes the warm start, whose product with K must be computed, not taken from K A.
    params = dict(loss="logistic", alpha=1e-3, solver="newton", tol=1e-8)
    model = KernelGDClassifier(fit_intercept=False, warm_start=True, **params).fit(X, y3)
    assert np.abs(model.dual_coef_.sum(axis=0)).max() > 1e-3
    model.set_params(fit_intercept=True).fit(X, y3)
    cold = KernelGDClassifier(fit_intercept=True, **params).fit(X, y3)
    assert_allclose(model.predict_proba(X), cold.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize("alpha", [1e-2, 1e-3])
def test_newton_softmax_with_many_classes_equals_dense_reference(alpha):
    # six classes: the batched solve, per-class refactoring and the plane step
    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.randn(120), [-1.5, -0.8, -0.2, 0.4, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # must converge, not stop for lack of progress
        model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=alpha, solver="newton", tol=1e-6,
                                   max_iter=100).fit(X, labels)
    assert model.n_iter_ < 100
    w = np.full(120, 1 / 120)
    F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), np.eye(6)[labels], w, alpha, True)
    assert_allclose(model.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-5)


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weights", ["uniform", "with-zeros"])
def test_newton_softmax_full_model_takes_exact_newton_steps(monkeypatch, intercept, weights):
    # With a ridge large against K's largest eigenvalue, the full model's softmax steps solve the
    # coupled Hessian's Newton system (the diagonal model converged linearly: 18 steps on letter at
    # C=1, against 9 now). Both reach
    # the dense reference's optimum; the exact steps in fewer iterations, quadratically at the end.
    from kernelgd._solvers.newton import _directions

    labels = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.randn(120), [-1.5, -0.8, -0.2, 0.4, 1.0])
    sw = np.random.RandomState(5).uniform(0.5, 2.0, len(labels))
    if weights == "with-zeros":
        sw[::7] = 0.0  # rows that weigh nothing: their g and coefficients are 0
    alpha = 1.0 / (2.0 * 4.0 * np.count_nonzero(sw))  # C = 4
    params = dict(loss="logistic", sigma=2.0, alpha=alpha, solver="newton", tol=1e-6, max_iter=100,
                  fit_intercept=intercept, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exact = KernelGDClassifier(**params).fit(X, labels, sample_weight=sw)
        monkeypatch.setattr(_directions, "COUPLED_MAX_CONDITION", 0.0)
        diagonal = KernelGDClassifier(**params).fit(X, labels, sample_weight=sw)
    assert exact.n_iter_ < diagonal.n_iter_
    # as low, to what the stopping test resolves: tol**2 of the intercept-only objective (at most log 6)
    assert exact.loss_curve_[-1] <= diagonal.loss_curve_[-1] + params["tol"] ** 2 * np.log(6)
    w = sw / sw.sum()
    if intercept:
        F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), np.eye(6)[labels], w, alpha, True)
        assert_allclose(exact.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-5)
    assert_allclose(exact.predict_proba(X), diagonal.predict_proba(X), atol=1e-4)
    assert_allclose(exact.dual_coef_[sw == 0], 0.0, atol=1e-12)


def _cg_iterations(model, X, y):
    """Fit with verbose output; the CG iterations of its Newton steps, summed."""
    import contextlib
    import io
    import re

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model.set_params(verbose=1).fit(X, y)
    return sum(int(v) for v in re.findall(r"cg iterations (\d+)", out.getvalue()))


def test_newton_softmax_exact_steps_solve_the_null_space_exactly(monkeypatch):
    # The coupled system is exactly 2 alpha I along each row's sqrt(p) (the softmax's null direction),
    # where the diagonal model's factors see a confident row's curvature p (1 - p): preconditioned by
    # them alone, CG took 1,697 iterations on these 8 blobs at alpha=1e-6 (25x the diagonal route's 69;
    # with the null space solved, 180: exact steps from the start pay a longer damped phase). Both routes with
    # the per-class factors (the diagonal route's exact steps would take the coupled factor: 43).
    from sklearn.datasets import make_blobs

    from kernelgd._solvers.newton import _directions, _full

    monkeypatch.setattr(_full, "coupled_rank", lambda n, k: 0)
    X8, y8 = make_blobs(400, 4, centers=8, cluster_std=2.0, random_state=0)
    params = dict(loss="logistic", alpha=1e-6, solver="newton", random_state=0)
    routed = KernelGDClassifier(**params)
    routed_cg = _cg_iterations(routed, X8, y8)
    monkeypatch.setattr(_directions, "COUPLED_MAX_CONDITION", np.inf)
    exact = KernelGDClassifier(**params)
    exact_cg = _cg_iterations(exact, X8, y8)
    assert exact_cg <= 3 * routed_cg
    assert abs(exact.loss_curve_[-1] - routed.loss_curve_[-1]) <= 1e-6 * np.log(8)  # tol**2 of log(k)


@pytest.mark.parametrize("sharpness", [0.5, 4.0])
def test_newton_softmax_coupled_factor_is_woodbury_of_the_hessian_blocks(sharpness):
    # The exact steps' coupled factor applies (M'(I_k (x) L L')M + mu I)^-1, M_i the rows' Hessian factors,
    # by Woodbury: (V - U G^-1 U'V) / mu, U = M'(I_k (x) L), G = mu I + sum_i H~_i (x) L_i'L_i. Where every
    # probability is above COUPLING_FLOOR, H~_i is the row's Hessian block and the apply is that inverse (against a
    # dense solve of the matrix formed column by column); where some are below it (sharp rows), H~_i is the block
    # with each such pair's coupling moved onto the diagonals (formed row by row here), H~_i - H_i is PSD and so
    # is the apply.
    from kernelgd._operator import KernelOperator
    from kernelgd._solvers.newton._full import COUPLING_FLOOR, coupled_preconditioner
    from kernelgd._solvers.newton._steps import Steps

    r = np.random.RandomState(1)
    n, k, rank, ridge = 40, 4, 6, 1e-3
    Xs = r.randn(n, 2)
    K = kernel_matrix(Xs, sigma=1.0)
    P, w = softmax(sharpness * r.randn(n, k) ** 3, axis=1), r.uniform(0.5, 2.0, n)
    assert (P.min() > COUPLING_FLOOR) == (sharpness < 1)
    w /= w.sum()
    steps = Steps(inner_cap=10)
    steps.L = r.randn(n, rank)
    H = w[:, None] * P * (1 - P)
    root_p, root_w = np.sqrt(P), np.sqrt(w)[:, None]

    def M(X_):
        return root_w * (root_p * X_ - P * np.sum(root_p * X_, axis=1, keepdims=True))

    def Mt(V):
        return root_w * root_p * (V - np.sum(P * V, axis=1, keepdims=True))

    apply = coupled_preconditioner(KernelOperator(K, None, dtype="float64"), P, H, w, ridge, None, steps, rank, M, Mt)
    U = np.column_stack([Mt(steps.L @ e.reshape(k, rank).T).ravel() for e in np.eye(k * rank)])
    mu = max(1e-6 * np.max(np.diag(K) @ H) / n, ridge)
    G, G_bound = mu * np.eye(k * rank), mu * np.eye(k * rank)
    for i in range(n):
        block = w[i] * (np.diag(P[i]) - np.outer(P[i], P[i]))
        bound = block.copy()
        for c in range(k):
            for d in range(c + 1, k):
                if min(P[i, c], P[i, d]) < COUPLING_FLOOR:
                    e = np.eye(k)[c] + np.eye(k)[d]
                    bound += w[i] * P[i, c] * P[i, d] * np.outer(e, e)
        assert np.linalg.eigvalsh(bound - block)[0] >= -1e-15
        G += np.kron(block, np.outer(steps.L[i], steps.L[i]))
        G_bound += np.kron(bound, np.outer(steps.L[i], steps.L[i]))
    assert_allclose(G, U.T @ U + mu * np.eye(k * rank), rtol=1e-10, atol=1e-14)
    V = r.randn(n, k)
    expected = (V.ravel() - U @ np.linalg.solve(G_bound, U.T @ V.ravel())) / mu
    assert_allclose(apply(V).ravel(), expected, rtol=1e-8)
    if sharpness < 1:
        assert_allclose(apply(V), np.linalg.solve(U @ U.T + mu * np.eye(n * k), V.ravel()).reshape(n, k), rtol=1e-8)
    else:
        assert not np.allclose(G_bound, G)
        dense = np.column_stack([apply(e.reshape(n, k)).ravel() for e in np.eye(n * k)])
        assert np.linalg.eigvalsh((dense + dense.T) / 2)[0] > 0


def test_newton_softmax_coupled_factor_reaches_the_optimum(monkeypatch):
    # The exact steps that follow the diagonal model's precondition with the rows' k x k Hessian blocks
    # (coupled_rank: 28 on these 400 rows of 8 classes; gaussian quantiles, 5,600 rows at alpha=2.2e-7: 284
    # CG iterations against the per-class factors' 698). The fit reaches the dense reference's optimum, in
    # fewer CG iterations than with the per-class factors.
    from sklearn.datasets import make_blobs

    from kernelgd._solvers.newton import _full

    X8, y8 = make_blobs(400, 4, centers=8, cluster_std=2.0, random_state=0)
    params = dict(loss="logistic", alpha=1e-6, solver="newton", tol=1e-6, max_iter=300, random_state=0)
    used, original, rank = [], _full.coupled_preconditioner, _full.coupled_rank
    monkeypatch.setattr(_full, "coupled_preconditioner", lambda *args: used.append(1) or original(*args))
    monkeypatch.setattr(_full, "coupled_rank", lambda n, k: 0)  # the per-class factors
    per_class = _cg_iterations(KernelGDClassifier(**params), X8, y8)
    assert not used
    monkeypatch.setattr(_full, "coupled_rank", rank)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(**params)
        coupled = _cg_iterations(model, X8, y8)
    assert used and coupled < per_class
    K = kernel_matrix(X8, sigma=model.sigma_)
    F_ref = _dense_reference(K, np.eye(8)[y8], np.full(len(y8), 1 / len(y8)), 1e-6, True)
    assert_allclose(model.predict_proba(X8), MultinomialLoss.probabilities(F_ref), atol=1e-5)


def test_newton_softmax_diagonal_steps_are_loose_after_a_shortened_step(monkeypatch):
    # The diagonal model's steps converge linearly however exactly they are solved: after one of its
    # steps the line search shortened, its next CG run is held to FORCING_MAX only (letter, 16,000 rows: 2,585
    # CG iterations with every step after the first full one solved tightly, 601 with this and the
    # exact steps' null-space preconditioning); after a full step, to the exact steps' tolerance.
    from sklearn.datasets import make_blobs

    from kernelgd._solvers.newton import _full, _run

    record = []
    original_call, original_take = _full.FullDiagonal.__call__, _run._NewtonRun._take

    def call(self, *args):
        record.append(("tol", self.steps.inner_tol))
        return original_call(self, *args)

    def take(self, step, *args):
        record.append(("step" if not self.exact_model else "exact step", step))
        return original_take(self, step, *args)

    monkeypatch.setattr(_full.FullDiagonal, "__call__", call)
    monkeypatch.setattr(_run._NewtonRun, "_take", take)
    X8, y8 = make_blobs(400, 4, centers=8, cluster_std=2.0, random_state=0)
    KernelGDClassifier(loss="logistic", alpha=1e-6, solver="newton", random_state=0).fit(X8, y8)
    after = [(record[i - 1][1], record[i][1]) for i in range(1, len(record))
             if record[i][0] == "tol" and record[i - 1][0] == "step"]
    assert any(step < 1 for step, _ in after) and any(step == 1 for step, _ in after)
    for step, tol in after:
        assert tol >= _run.FORCING_MAX if step < 1 else tol <= 1e-3


@pytest.mark.parametrize("alpha", [1e-6, 1e-2])
def test_newton_softmax_preconditioner_follows_the_hessian_weights(monkeypatch, alpha):
    # Each CG run is preconditioned with factors made from Hessian weights within 5% of the current
    # ones (L1 share) and 1.25x row by row (h_i K_ii + mu). Factors kept until the weights had moved
    # by 25% or some row by 8x tripled the CG iterations of letter's softmax (16,000 rows: 600
    # against 209). The row ratio alone misses a large ridge, whose mu exceeds every h_i K_ii
    # (MNIST at C=1, the diagonal model: 21 CG iterations against 84 with it alone).
    from sklearn.datasets import make_blobs

    from kernelgd._solvers.newton import _directions, _full

    original, ratios, changes = _full.preconditioner, [], []

    def preconditioner(operator, H, ridge, settings, steps):
        apply = original(operator, H, ridge, settings, steps)
        factors, diag = steps.factors, np.asarray(operator.diag())
        for c in range(H.shape[1]):
            made_with, h = np.asarray(factors.weights[c]), np.asarray(H[:, c])
            made, now = made_with * diag + factors.shifts[c], h * diag + factors.shifts[c]
            ratios.append(float(np.max(np.maximum(now / made, made / now))))
            changes.append(float(np.sum(np.abs(h - made_with)) / np.sum(made_with)))
        return apply

    monkeypatch.setattr(_full, "preconditioner", preconditioner)
    monkeypatch.setattr(_directions, "COUPLED_MAX_CONDITION", 0.0)  # the diagonal model's steps throughout
    monkeypatch.setattr(_directions, "STARTED_MAX_CONDITION", 0.0)
    X8, y8 = make_blobs(400, 4, centers=8, cluster_std=2.0, random_state=0)
    KernelGDClassifier(loss="logistic", alpha=alpha, solver="newton", random_state=0).fit(X8, y8)
    assert len(ratios) > 8 * 3
    assert max(ratios) <= 1.25 * (1 + 1e-12) and max(changes) <= 0.05 * (1 + 1e-12)


def _record_exact_steps(monkeypatch):
    """The softmax steps taken on all of X, in order: "e" an exact one, "d" one of the diagonal model."""
    from kernelgd._solvers.newton import _full

    calls = []

    def record(direction, kind):
        original = direction.__call__

        def step(self, *args, **kwargs):
            if self.operator.n == len(X):  # not a subsample start's
                calls.append(kind)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(direction, "__call__", step)

    record(_full.FullCoupled, "e")
    record(_full.FullDiagonal, "d")
    return calls


def _exact_from_the_start(calls):
    """Whether the steps were exact throughout; otherwise exact ones only confirm the diagonal model's stop."""
    steps = "".join(calls)
    assert steps.startswith("e") or steps.rstrip("e") == steps.rstrip("e").replace("e", "")
    return steps.startswith("e")


def test_newton_softmax_full_model_exact_steps_only_where_the_ridge_conditions_them(monkeypatch):
    # The coupled system's CG is preconditioned by the diagonal model's factors, which fit it only
    # while K's largest eigenvalue is within COUPLED_MAX_CONDITION times 2 alpha n.
    from kernelgd._solvers.newton import _directions

    calls = _record_exact_steps(monkeypatch)
    top = np.linalg.eigvalsh(kernel_matrix(X, sigma=2.0))[-1]
    for ratio, expected in [(0.5, True), (2.0, False)]:
        calls.clear()
        alpha = top / (ratio * _directions.COUPLED_MAX_CONDITION * 2.0 * len(X))
        model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=alpha, solver="newton", tol=1e-6,
                                   max_iter=200).fit(X, y3)
        assert _exact_from_the_start(calls) is expected
        F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), np.eye(3)[y3], np.full(len(X), 1 / len(X)), alpha, True)
        assert_allclose(model.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-4)


@pytest.mark.parametrize("solver, n_centers", [("newton", None), ("newton", 40), ("gd", None)])
def test_softmax_intercepts_sum_to_zero(solver, n_centers):
    """A constant added to every class's score changes nothing: the intercepts are returned centred,
    so the model does not depend on the solver's path (its random preconditioner landmarks)."""
    fits = [KernelGDClassifier(loss="logistic", solver=solver, n_centers=n_centers, alpha=1e-3,
                               random_state=seed, **(TIGHT_NEWTON if solver == "newton" else {"max_iter": 2000}))
            .fit(X, y3)
            for seed in (0, 1)]
    for model in fits:
        assert abs(model.intercept_.sum()) < 1e-12 * np.abs(model.intercept_).max()
    if solver == "newton" and n_centers is None:
        assert_allclose(fits[0].decision_function(X), fits[1].decision_function(X), atol=1e-5)


@pytest.mark.parametrize("counts", [[47, 45, 58], [10, 1, 300, 7], [5] * 26])
def test_softmax_intercept_hessian_pseudo_inverse(counts):
    # Regression: np.linalg.pinv of S = sum_i w_i (diag(p_i) - p_i p_i') took the rounding of its
    # null eigenvalue for a real one at the first Newton step on centers (equal rows p_i; labels
    # [47, 45, 58]: |S^+| of 1e15, a first step of 171 CG iterations at half length). Reference:
    # the eigendecomposition with the null vector 1 / sqrt(k) dropped by hand.
    from kernelgd._solvers.newton._centers import intercept_pinv

    counts = np.asarray(counts, dtype=float)
    b = np.log(counts / counts.sum())
    p = softmax(b - b.mean())
    n, k = int(counts.sum()), len(counts)
    P, w = np.tile(p, (n, 1)), np.full(n, 1 / n)
    S = np.diag(p) - np.outer(p, p)
    null = np.full(k, 1 / np.sqrt(k))
    # S restricted to the complement of its null vector: an orthonormal basis U of it
    U = np.linalg.svd(np.eye(k) - np.outer(null, null))[0][:, : k - 1]
    values, vectors = np.linalg.eigh(U.T @ S @ U)
    reference = U @ vectors @ np.diag(1 / values) @ vectors.T @ U.T
    assert_allclose(intercept_pinv(w[:, None] * P, P), reference, atol=1e-9 * np.abs(reference).max())


def test_softmax_intercept_hessian_without_a_class():
    # Regression (found by hypothesis): a class whose probability underflows to 0 in every row leaves
    # S singular beyond the softmax's invariance; solving with S + 1 1' / k raised LinAlgError. The
    # pseudo-inverse gives that class's intercept no step, and matches S's pseudo-inverse elsewhere.
    from kernelgd._solvers.newton._centers import intercept_pinv

    P = softmax(np.random.RandomState(6).randn(30, 3), axis=1)
    P = np.hstack([P, np.zeros((30, 1))])
    w = np.full(30, 1 / 30)
    S = np.diag((w[:, None] * P).sum(axis=0)) - (w[:, None] * P).T @ P
    S_pinv = intercept_pinv(w[:, None] * P, P)
    assert_allclose(S_pinv, np.linalg.pinv(S, hermitian=True), atol=1e-9 * np.abs(S_pinv).max())
    X4 = np.array([[1000.01764052, 1000.00400157, 1000.00978738], [1000.02240893, 1000.01867558, 999.99022722],
                   [1000.00950088, 999.99848643, 999.99896781], [1000.01764097, 1000.00400191, 1000.00978887]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # no ridge: no minimiser to converge to
        model = KernelGDClassifier(loss="logistic", alpha=1e-16, n_centers=2, max_iter=50).fit(X4, [0, 1, 2, 1])
    assert np.all(np.isfinite(model.predict_proba(X4)))


@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
def test_a_search_path_keeps_its_preconditioner_and_reaches_the_same_models(monkeypatch, labels):
    # The K-fold search's solves share one preconditioner along a fold's alpha path
    # (SolverSettings.reuse): each fit still converges to the model a fit of its own reaches.
    from kernelgd._solvers.newton import _full

    drawn = []
    original = _full.rp_cholesky
    monkeypatch.setattr(_full, "rp_cholesky", lambda *a, **k: drawn.append(1) or original(*a, **k))
    K = kernel_matrix(X, X, sigma=2.0)
    path = KernelGDClassifier(kernel="precomputed", loss="logistic", warm_start=True, **TIGHT_NEWTON)
    path._path_state = {}
    # (the softmax's last alpha takes the diagonal model's steps, on all the landmarks: the exact
    # steps' factors, on half of them, are remade)
    alphas = (1e-1, 1e-2, 1e-3, 1e-4) + ((1e-6,) if labels is y3 else ())
    for alpha in alphas:
        path.set_params(alpha=alpha).fit(K, labels)
        alone = KernelGDClassifier(kernel="precomputed", loss="logistic", alpha=alpha, tol=1e-10).fit(K, labels)
        assert_allclose(path.predict_proba(K), alone.predict_proba(K), atol=1e-6)
    assert len(drawn) == 1 + len(alphas)  # the path's Nystroem factor once, each lone fit its own


@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
@pytest.mark.parametrize("weights", ["uniform", "with-zeros"])
def test_newton_full_model_starts_from_a_subsample_fit_and_reaches_the_optimum(monkeypatch, labels, weights):
    # A large full model starts from the fit on a subsample of its rows (weighted rows only): the
    # same optimum as the dense reference, in fewer Newton steps than from the intercept-only model.
    from kernelgd._solvers.newton import _start

    sw = np.random.RandomState(5).uniform(0.5, 2.0, len(labels))
    if weights == "with-zeros":
        sw[::7] = 0.0
    drawn = []
    original = _start.subsample_start

    def recording(*args):
        start = original(*args)
        drawn.append(start)
        return start

    monkeypatch.setattr(_start, "subsample_start", recording)
    monkeypatch.setattr(_start, "SUBSAMPLE_MIN", 40)
    monkeypatch.setattr(_start, "SUBSAMPLE_SHARE", 2)
    # a fixed draw of the subsample: on other draws the start saves no step on these 120 rows (one took 9
    # steps against the intercept-only start's 7 in a full-suite run)
    params = dict(loss="logistic", sigma=2.0, alpha=1e-3, solver="newton", tol=1e-6, max_iter=100, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        monkeypatch.setattr(_start, "SUBSAMPLE_MIN_ROWS", 10**9)
        cold = KernelGDClassifier(**params).fit(X, labels, sample_weight=sw)
        monkeypatch.setattr(_start, "SUBSAMPLE_MIN_ROWS", 50)
        started = KernelGDClassifier(**params).fit(X, labels, sample_weight=sw)
    A, b, KA = drawn[-1]
    used = np.flatnonzero(np.any(A != 0, axis=1))
    assert 40 <= len(used) <= np.count_nonzero(sw) // 2 and np.all(sw[used] > 0)
    assert_allclose(KA, kernel_matrix(X, sigma=2.0) @ A, rtol=1e-10, atol=1e-12)
    Y = np.eye(3)[labels] if labels is y3 else 2.0 * labels[:, None] - 1.0
    loss, w = (MultinomialLoss if labels is y3 else BinaryLogisticLoss), sw / sw.sum()
    start_value = loss.value(KA + b, Y, w) + 1e-3 * np.sum(A * KA)
    assert start_value < loss.baseline(Y, w, True)[1]  # better than the intercept-only start
    # one step of slack: whether the last, confirming step's CG run iterates depends on rounding
    # (7 against 6 here, 7 against 8 in one full-suite run)
    assert started.n_iter_ <= cold.n_iter_ + 1
    F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), Y, w, 1e-3, labels is y3)
    assert_allclose(started.predict_proba(X), loss.probabilities(F_ref), atol=1e-5)
    assert_allclose(started.dual_coef_[sw == 0], 0.0, atol=1e-12)


def test_newton_falls_back_to_the_intercept_only_start_where_a_subsample_fit_is_worse(monkeypatch):
    from kernelgd._solvers.newton import _start

    def harmful(operator, Y, w, settings, solve):  # a start far worse than the intercept-only model
        A = np.random.RandomState(0).normal(scale=50.0, size=(operator.n, Y.shape[1]))
        return A, np.zeros(Y.shape[1]), operator.matvec(A)

    used = []
    monkeypatch.setattr(_start, "subsample_start", lambda *args: used.append(1) or harmful(*args))
    monkeypatch.setattr(_start, "SUBSAMPLE_MIN_ROWS", 50)  # this fit is large enough to start from one
    params = dict(loss="logistic", sigma=2.0, alpha=1e-3, solver="newton", tol=1e-6, max_iter=100)
    model = KernelGDClassifier(**params).fit(X, y3)
    assert used
    assert model.loss_curve_[0] < MultinomialLoss.value(np.zeros((len(X), 3)), np.eye(3)[y3], np.full(len(X), 1 / len(X)))
    F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), np.eye(3)[y3], np.full(len(X), 1 / len(X)), 1e-3, True)
    assert_allclose(model.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-5)


@pytest.mark.parametrize("started", [True, False])
def test_newton_softmax_exact_steps_reach_further_from_a_subsample_start(monkeypatch, started):
    # Starting near the optimum, the exact steps skip their damped phase and pay up to
    # STARTED_MAX_CONDITION; from the intercept-only model only up to COUPLED_MAX_CONDITION.
    from kernelgd._solvers.newton import _directions, _start

    calls = _record_exact_steps(monkeypatch)
    monkeypatch.setattr(_start, "SUBSAMPLE_MIN_ROWS", 50 if started else 10**9)
    monkeypatch.setattr(_start, "SUBSAMPLE_MIN", 40)
    monkeypatch.setattr(_start, "SUBSAMPLE_SHARE", 2)
    coupled, started_max = _directions.COUPLED_MAX_CONDITION, _directions.STARTED_MAX_CONDITION
    assert coupled < 1.5 * coupled < started_max
    top = np.linalg.eigvalsh(kernel_matrix(X, sigma=2.0))[-1]
    alpha = top / (1.5 * coupled * 2.0 * len(X))
    model = KernelGDClassifier(loss="logistic", sigma=2.0, alpha=alpha, solver="newton", tol=1e-6,
                               max_iter=300).fit(X, y3)
    assert _exact_from_the_start(calls) is started
    F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), np.eye(3)[y3], np.full(len(X), 1 / len(X)), alpha, True)
    assert_allclose(model.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-4)


def _three_bands(n):
    """Three classes in bands of sin(3 x_0): separable, so that alpha=1e-12 lets the coefficients grow."""
    X = np.random.RandomState(0).randn(n, 2)
    return X, np.digitize(np.sin(3 * X[:, 0]), [-0.5, 0.5])


def test_newton_stops_where_every_iterate_is_rounding(monkeypatch):
    # Regression: in float32 on 60 centers at alpha=1e-12, every Newton iterate's predictions were
    # dominated by rounding; the fit crept on for max_iter=1000 steps (94 s), then returned the
    # intercept-only model
    from kernelgd._solvers import _dense_newton
    from kernelgd._solvers.newton._run import NOISY_PATIENCE

    monkeypatch.setattr(_dense_newton, "MAX_FLOPS", 0)  # CG's steps (the dense ones: the test below)

    # intercept-only model. How many iterates are valid before the streak depends on the
    # CPU's float32 rounding (none on one machine, 33 on another); the streak's stop does not.
    X, y = _three_bands(600)
    with pytest.warns(ConvergenceWarning, match=f"last {NOISY_PATIENCE} iterates are dominated by the rounding"):
        model = KernelGDClassifier(loss="logistic", alpha=1e-12, n_centers=60, random_state=0, max_iter=300,
                                   options={"dtype": "float32"}).fit(X, y)
    assert NOISY_PATIENCE <= model.n_iter_ < 300
    assert np.all(np.isfinite(model.predict_proba(X)))
    Y = np.eye(3)[y]
    _, intercept_only = MultinomialLoss.baseline(Y, np.full(len(y), 1.0 / len(y)), True)
    assert log_loss(y, model.predict_proba(X)) <= intercept_only + 1e-9  # never worse than it


def test_newton_dense_steps_on_few_centers_fit_where_cg_steps_were_rounding():
    # The same fit with the few centers' steps formed densely, in coordinates where the penalty is
    # |B|^2: it converges (31 steps) to a training log-loss of 4e-6, where CG's steps stalled at
    # 0.55 with the rounding warning above
    X, y = _three_bands(600)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", alpha=1e-12, n_centers=60, random_state=0, max_iter=300,
                                   options={"dtype": "float32"}).fit(X, y)
    assert model.n_iter_ < 100
    assert log_loss(y, model.predict_proba(X)) < 1e-4


def _logistic_objective(F, labels, alpha, penalty):
    """Mean log-loss of decision values F (one column: binary) plus alpha times the penalty."""
    if F.ndim == 1 or F.shape[1] == 1:
        loss = np.logaddexp(0, -(2 * labels - 1) * F.ravel())
    else:
        loss = logsumexp(F, axis=1) - F[np.arange(len(labels)), labels]
    return np.mean(loss) + alpha * penalty


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("seed, alpha", [(0, 4e-6), (1, 5e-7)])
def test_newton_on_few_rank_deficient_centers_reaches_the_optimum(seed, alpha, n_classes):
    # Regression: on 100 centers of one feature, K_mm's eigenvalues spanning 1e-16 of its largest,
    # CG's steps stopped 6e-5 to 4.2e-4 above the optimum of the objective the solver minimises (its
    # penalty carries K_mm's jitter), some silently, some with a no-descent warning. Such small
    # systems are now formed and solved densely.
    r = np.random.RandomState(seed)
    X1 = r.randn(1200, 1) * 3
    labels = np.digitize(np.sin(X1[:, 0]) + 0.3 * r.randn(1200), [-0.5, 0.5] if n_classes == 3 else [0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", alpha=alpha, n_centers=100, solver="newton", random_state=0,
                                   options={"dtype": "float64"}).fit(X1, labels)
    C = model.X_fit_
    Kmm, Knm = kernel_matrix(C, sigma=model.sigma_), kernel_matrix(X1, C, sigma=model.sigma_)
    lam, V = np.linalg.eigh(Kmm)

    def reference(Z):  # LogisticRegression on the features Knm Z: the objective with penalty |B|^2, A = Z B
        Phi = Knm @ Z
        lr = LogisticRegression(C=1 / (2 * alpha * len(labels)), solver="newton-cholesky", tol=1e-12,
                                max_iter=1000).fit(Phi, labels)
        return _logistic_objective(lr.decision_function(Phi), labels, alpha, np.sum(lr.coef_**2))

    # the solver's objective, penalty A'(K_mm + jitter I) A: K_mm's whole eigenbasis. Coefficients
    # reach 1e7 here, where that penalty rounds by about 1e-5 (K_mm's rounding times |A|^2 alpha)
    jitter = len(C) * np.finfo(float).eps * np.mean(np.diag(Kmm))
    assert model.loss_curve_[-1] <= reference(V / np.sqrt(np.maximum(lam, 0) + jitter)) + 2e-5
    # and the model's own objective (no jitter) beats the best model on K_mm's well-resolved eigenfeatures
    A = model.dual_coef_.reshape(len(C), -1)
    ours = _logistic_objective(Knm @ A + model.intercept_, labels, alpha, np.sum(A * (Kmm @ A)))
    keep = lam > 1e-11 * lam[-1]
    assert ours <= reference(V[:, keep] / np.sqrt(lam[keep])) + 1e-6


def test_newton_returns_the_best_iterate_whose_predictions_are_not_rounding():
    # Regression: a float32 fit stopped while its iterates' predictions were rounding (here by
    # max_iter) returned the intercept-only model, although earlier iterates were valid and better
    from kernelgd._solvers._common import RoundingCheck
    from kernelgd._operator import KernelOperator
    from kernelgd.kernels import bind_kernel

    X, y = _three_bands(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", alpha=1e-12, max_iter=15, random_state=0,
                                   options={"dtype": "float32"}).fit(X, y)
    Y = np.eye(3)[y]
    w = np.full(len(y), 1.0 / len(y))
    _, intercept_only = MultinomialLoss.baseline(Y, w, True)
    assert model.loss_curve_[-1] < 0.5 * intercept_only
    assert model.score(X, y) > 0.9
    operator = KernelOperator(X, bind_kernel("rbf", sigma=model.sigma_), dtype="float32")
    assert not RoundingCheck(operator, w, MultinomialLoss, intercept_only).dominated(model.dual_coef_)


@pytest.mark.parametrize("labels", [y2, y3], ids=["binary", "multinomial"])
@pytest.mark.parametrize("n_centers, alpha", [(None, 1e-2), (None, 1e-6), (20, 1e-4)])
@pytest.mark.parametrize("scale", [1e2, 1e4, 1e8])
def test_newton_warm_start_from_saturated_predictions_reaches_the_optimum(labels, n_centers, alpha, scale):
    # Regression: from a warm start whose coefficients were scaled up (predictions saturated, the
    # Hessian's weights at underflow) the fit gave up with the intercept-only model and a no-descent
    # warning, leaking numpy's overflow warnings; on few centers a dense step "converged" at an
    # objective of 4e3. Such a start is now left for the intercept-only model.
    params = dict(loss="logistic", sigma=2.0, alpha=alpha, n_centers=n_centers, solver="newton", tol=1e-5)
    model = KernelGDClassifier(warm_start=True, random_state=0, **params).fit(X, labels)
    model.dual_coef_ = model.dual_coef_ * scale
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither numpy's RuntimeWarnings nor a ConvergenceWarning
        # rows reordered: other inputs, centers drawn anew, a start far from their optimum
        perm = np.random.RandomState(1).permutation(len(labels))
        model.set_params(random_state=1).fit(X[perm], labels[perm])
    multinomial = labels is y3
    w = np.full(len(labels), 1.0 / len(labels))
    if n_centers is None:
        Y = np.eye(3)[labels] if multinomial else np.where(labels == 1, 1.0, -1.0)[:, None]
        F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), Y, w, alpha, multinomial)
    else:
        F_ref = _centers_reference(model, labels, np.ones(len(labels)), alpha, True)
    loss = MultinomialLoss if multinomial else BinaryLogisticLoss
    assert_allclose(model.predict_proba(X), loss.probabilities(F_ref), atol=1e-4)


def test_warm_start_on_the_same_inputs_keeps_the_centers():
    # Regression: with random_state=None each fit drew new centers, and a warm start continued the
    # last centers' coefficients on others: a warm-started path over alpha was no path
    params = dict(loss="logistic", n_centers=30, sigma=2.0, tol=1e-7)
    model = KernelGDClassifier(warm_start=True, alpha=1e-3, **params).fit(X, y3)
    centers, coef = model.X_fit_.copy(), model.dual_coef_.copy()
    model.fit(X, y3)  # the same problem: its optimum stays
    assert_array_equal(model.X_fit_, centers)
    assert_allclose(model.dual_coef_, coef, atol=1e-6)
    model.set_params(alpha=1e-4).fit(X, y3)  # down the path, on the same centers
    assert_array_equal(model.X_fit_, centers)
    F_ref = _centers_reference(model, y3, np.ones(len(y3)), 1e-4, True)
    assert_allclose(model.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-4)
    model.fit(X[::-1], y3[::-1])  # other inputs (rows reordered): centers drawn among them
    assert model.X_fit_.shape == centers.shape


def test_dense_steps_keep_the_centers_kernel_directions_below_its_rounding_that_carry_functions():
    # Regression: K_mm's eigenvectors were cut at eigenvalues of eps times the largest. An rbf
    # kernel's below that are real functions (values up to sqrt(lambda), the penalty's jitter
    # scaling them to O(1) features): a softmax on one feature without intercept stopped 5e-4
    # above its optimum, silently
    r = np.random.RandomState(0)
    X1 = r.randn(200, 1) * 0.5
    f = np.sin(2 * X1[:, 0] / X1[:, 0].std())
    labels = np.digitize(f + 0.4 * r.randn(200), np.quantile(f, [0.25, 0.5, 0.75]))
    alpha = 4.25e-5
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", alpha=alpha, n_centers=20, fit_intercept=False,
                                   random_state=0, options={"dtype": "float64"}).fit(X1, labels)
    C = model.X_fit_
    Kmm, Knm = kernel_matrix(C, sigma=model.sigma_), kernel_matrix(X1, C, sigma=model.sigma_)
    lam, V = np.linalg.eigh(Kmm)
    jitter = len(C) * np.finfo(float).eps * np.mean(np.diag(Kmm))  # the solver's penalty A'(K_mm + jitter I) A
    Phi = Knm @ (V / np.sqrt(np.maximum(lam, 0) + jitter))
    lr = LogisticRegression(C=1 / (2 * alpha * len(labels)), fit_intercept=False, solver="newton-cholesky",
                            tol=1e-12, max_iter=1000).fit(Phi, labels)
    optimum = _logistic_objective(lr.decision_function(Phi), labels, alpha, np.sum(lr.coef_**2))
    assert model.loss_curve_[-1] <= optimum + 1e-6


def test_newton_softmax_switches_to_exact_steps_where_the_diagonal_model_slows(monkeypatch):
    # Past its damped phase the diagonal model converges linearly (MNIST at its default ridge: 20
    # steps of a few CG iterations each for the last 0.05% of the objective); once a full step's
    # decrement falls by less than LINEAR_SWITCH, exact steps finish quadratically.
    from kernelgd._solvers import _dense_newton
    from kernelgd._solvers.newton import _directions, _run

    monkeypatch.setattr(_dense_newton, "MAX_FLOPS", 0)  # CG's exact steps, as on any but a tiny model
    calls = _record_exact_steps(monkeypatch)
    top = np.linalg.eigvalsh(kernel_matrix(X, sigma=2.0))[-1]
    alpha = top / (20 * _directions.STARTED_MAX_CONDITION * 2.0 * len(X))  # the diagonal model's ridges
    params = dict(loss="logistic", sigma=2.0, alpha=alpha, solver="newton", tol=1e-6, max_iter=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        switched = KernelGDClassifier(**params).fit(X, y3)
        steps = "".join(calls)
        calls.clear()
        monkeypatch.setattr(_run, "LINEAR_SWITCH", np.inf)
        linear = KernelGDClassifier(**params).fit(X, y3)
    assert steps.startswith("d") and "de" in steps, steps
    assert switched.n_iter_ < linear.n_iter_
    assert switched.loss_curve_[-1] <= linear.loss_curve_[-1] + 1e-12
    F_ref = _dense_reference(kernel_matrix(X, sigma=2.0), np.eye(3)[y3], np.full(len(X), 1 / len(X)), alpha, True)
    assert_allclose(switched.predict_proba(X), MultinomialLoss.probabilities(F_ref), atol=1e-4)


@pytest.mark.parametrize("labels", [np.array([0, 1, 0]), np.arange(40) % 3], ids=["three rows", "three classes"])
@pytest.mark.parametrize("n_centers", [None, 2])
def test_newton_from_a_stationary_start_converges_quietly(labels, n_centers):
    # A kernel constant on the data: the intercept-only start is the optimum. Its Newton directions
    # are flat to rounding (slope 0), which stopped the fit with a "no longer decreases" warning
    rng = np.random.RandomState(0)
    Xc = np.full((len(labels), 2), 3.0)
    w = rng.uniform(0.5, 2.0, len(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", n_centers=n_centers, random_state=0).fit(Xc, labels, sample_weight=w)
    shares = np.array([w[labels == k].sum() for k in np.unique(labels)]) / w.sum()
    assert_allclose(model.predict_proba(Xc[:1])[0], shares, rtol=1e-10)


def test_newton_on_centers_converges_where_rounding_cut_its_last_exact_step_short():
    # A fuzzed problem: the last exact Newton step's decrement (1.6e-10) was far below the threshold (1e-6), but
    # the line search took a quarter step (the objective's rounding), which stopped counting the decrement, and
    # the next direction's failure to descend ended the fit with a "rounding" warning
    r = np.random.RandomState(5)
    r.choice(3), r.choice(3)  # the draws that sized the fuzzed problem
    X = r.normal(size=(4000, 3)) * 10.0 ** r.uniform(-2, 2)
    f = np.sin(2 * X[:, 0] / X[:, 0].std()) + r.uniform(0.05, 1) * r.normal(size=4000)
    r.rand()
    w = r.uniform(0.2, 3, size=4000)
    w[r.rand(4000) < 0.1] = 0
    labels = np.digitize(f, np.quantile(f, [0.3, 0.7]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KernelGDClassifier(loss="logistic", n_centers=400, random_state=0).fit(X, labels, sample_weight=w)
    assert model.n_iter_ < 20
