"""The blockwise centers solver (the Dask fit's, on in-memory blocks here).

References: a dense solve of the squared loss's normal equations, and
scikit-learn's LogisticRegression on the explicit features ``K_nm T^-1``
(``K_mm = T'T``), whose L2 penalty is then ``beta' K_mm beta``.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numpy.testing import assert_allclose
from scipy.linalg import cholesky
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from kernelgd import KernelGDClassifier
from kernelgd._losses import BinaryLogisticLoss, MultinomialLoss, SquaredLoss
from kernelgd._solvers import SolverSettings, blockwise
from kernelgd.kernels import bind_kernel

rng = np.random.RandomState(0)
N, M = 300, 40
X = rng.normal(size=(N, 3))
y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=N)
C = X[rng.choice(N, M, replace=False)]
KERNEL = bind_kernel("rbf", sigma=1.5)


class LocalBlocks:
    """A problem whose blocks are in-memory arrays, summed one after the other.

    Parameters
    ----------
    kernel : BoundKernel
    centers : ndarray of shape (m, n_features)
    blocks : list of (X, Y, w)
        Rows, targets (n_j, k) and weights (normalised over all blocks).
    center_weights : ndarray of shape (m,)
        The weights of the centers' rows.
    loss : loss class
    """

    def __init__(self, kernel, centers, blocks, center_weights, loss):
        self.kernel, self.C, self.blocks, self.loss = kernel, centers, blocks, loss
        self.center_weights = center_weights
        self.n = sum(X.shape[0] for X, _, _ in blocks)
        self.m = centers.shape[0]
        self.dtype = np.float64
        self.weighted_targets = sum(w @ Y for _, Y, w in blocks)
        self.n_passes = 0

    def center_matrix(self):
        return np.asarray(self.kernel(self.C, self.C), dtype=np.float64)

    def evaluate(self, beta, b, hessian):
        self.n_passes += 1
        terms = {}
        for X, Y, w in self.blocks:
            part = blockwise.block_terms(self.kernel, self.C, X, Y, w, self.loss, beta, b, hessian)
            terms = blockwise.add_terms(terms, part)
        return terms

    def hessp(self, beta, b, D):
        self.n_passes += 1
        terms = {}
        for X, Y, w in self.blocks:
            part = blockwise.block_hessp(self.kernel, self.C, X, Y, w, self.loss, beta, b, D)
            terms = blockwise.add_terms(terms, part)
        return terms


def problem(Y, w, loss, n_blocks=3, X=X, C=C, kernel=KERNEL):
    parts = np.array_split(np.arange(len(Y)), n_blocks)
    blocks = [(X[p], Y[p], w[p]) for p in parts]
    rows = [np.flatnonzero((X == c).all(axis=1))[0] for c in C]
    return LocalBlocks(kernel, C, blocks, w[rows], loss)


def fit(Y, w, loss, alpha, tol=1e-10, **kwargs):
    settings = SolverSettings(alpha=alpha, tol=tol, max_iter=1000, loss=loss, fit_intercept=True)
    return blockwise.solve(problem(Y, w, loss, **kwargs), settings)


def test_squared_loss_matches_the_dense_normal_equations():
    w = rng.uniform(0.2, 2.0, N)
    w /= w.sum()
    alpha = 1e-3
    result = fit(y[:, None], w, SquaredLoss, alpha)
    # minimise sum w (K beta + b - y)^2 + alpha beta' K_mm beta: stationarity in (beta, b)
    K, Kmm = KERNEL(X, C), KERNEL(C, C)
    Phi = np.hstack([K, np.ones((N, 1))])
    P = np.zeros((M + 1, M + 1))
    P[:M, :M] = alpha * Kmm
    coef = np.linalg.lstsq(Phi.T @ (w[:, None] * Phi) + P, Phi.T @ (w * y), rcond=None)[0]
    assert_allclose(K @ result.dual_coef[:, 0] + result.intercept[0], Phi @ coef, atol=1e-7)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_losses_match_logistic_regression_on_explicit_features(n_classes):
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    if n_classes == 2:
        Y, loss = np.where(labels == 1, 1.0, -1.0)[:, None], BinaryLogisticLoss
    else:
        Y, loss = np.eye(n_classes)[labels], MultinomialLoss
    alpha = 1e-3
    result = fit(Y, np.full(N, 1.0 / N), loss, alpha)
    T = cholesky(KERNEL(C, C) + 1e-12 * np.eye(M))  # upper: K_mm = T'T
    features = KERNEL(X, C) @ np.linalg.inv(T)
    # sum_i l_i / N + alpha |gamma|^2  ==  (|gamma|^2 / 2 + C sum_i l_i) * 2 alpha, C = 1 / (2 alpha N)
    ref = LogisticRegression(C=1 / (2 * alpha * N), tol=1e-12, max_iter=10_000).fit(features, labels)
    F = KERNEL(X, C) @ result.dual_coef + result.intercept
    ref_F = ref.decision_function(features)
    if n_classes == 2:
        assert_allclose(F[:, 0], ref_F, atol=1e-5)
    else:  # the softmax's scores are defined up to a constant per row
        assert_allclose(F - F.mean(axis=1, keepdims=True), ref_F - ref_F.mean(axis=1, keepdims=True), atol=1e-5)


@pytest.mark.parametrize("loss", [SquaredLoss, BinaryLogisticLoss])
def test_the_split_into_blocks_does_not_change_the_model(loss):
    Y = y[:, None] if loss is SquaredLoss else np.sign(y - np.median(y))[:, None]
    w = np.full(N, 1.0 / N)
    one, many = fit(Y, w, loss, 1e-4, n_blocks=1), fit(Y, w, loss, 1e-4, n_blocks=7)
    K = KERNEL(X, C)
    assert_allclose(K @ one.dual_coef + one.intercept, K @ many.dual_coef + many.intercept, atol=1e-8)


def test_matches_the_in_memory_fit_on_the_same_centers():
    est = KernelGDClassifier(loss="logistic", n_centers=M, alpha=1e-4, tol=1e-8, random_state=0)
    labels = np.digitize(y, np.quantile(y, [0.3, 0.7]))
    est.fit(X, labels)
    kernel = est._bound_kernel()
    result = blockwise.solve(
        problem(np.eye(3)[labels], np.full(N, 1.0 / N), MultinomialLoss, C=est.X_fit_, kernel=kernel),
        SolverSettings(alpha=1e-4, tol=1e-8, max_iter=1000, loss=MultinomialLoss),
    )
    assert_allclose(kernel(X, est.X_fit_) @ result.dual_coef + result.intercept, est.decision_function(X), atol=1e-6)
    assert result.loss_curve[-1] <= est.loss_curve_[-1] + 1e-10


def test_squared_loss_counts_cg_iterations_and_one_pass_each():
    w = np.full(N, 1.0 / N)
    prob = problem(y[:, None], w, SquaredLoss)
    result = blockwise.solve(prob, SolverSettings(alpha=1e-3, tol=1e-6, max_iter=1000, loss=SquaredLoss))
    # the start's pass, one per CG iteration, and the line search's single full step
    assert result.n_iter > 1 and prob.n_passes == result.n_iter + 2


def test_warm_start_from_the_solution_takes_no_real_step():
    w = np.full(N, 1.0 / N)
    Y = np.sign(y - np.median(y))[:, None]
    first = fit(Y, w, BinaryLogisticLoss, 1e-3, tol=1e-8)
    settings = SolverSettings(alpha=1e-3, tol=1e-4, max_iter=1000, loss=BinaryLogisticLoss,
                              coef_init=first.dual_coef, intercept_init=first.intercept)
    again = blockwise.solve(problem(Y, w, BinaryLogisticLoss), settings)
    assert again.n_iter <= 1
    assert again.loss_curve[-1] <= first.loss_curve[-1] + 1e-12


@settings(max_examples=25, deadline=None)
@given(
    scale=st.sampled_from([1e-6, 1.0, 1e4]),
    alpha=st.sampled_from([0.0, 1e-8, 1e-2, 10.0]),
    loss=st.sampled_from([SquaredLoss, BinaryLogisticLoss, MultinomialLoss]),
    seed=st.integers(0, 2**16),
)
def test_never_worse_than_the_intercept_only_model_and_always_finite(scale, alpha, loss, seed):
    r = np.random.RandomState(seed)
    n = 80
    Xs = r.normal(size=(n, 2)) * scale
    Cs = Xs[r.choice(n, 15, replace=False)]
    kernel = bind_kernel("rbf", sigma=scale)
    if loss is SquaredLoss:
        Y = (Xs[:, :1] / scale) ** 2 + r.normal(size=(n, 1))
    elif loss is BinaryLogisticLoss:
        Y = np.where(r.rand(n, 1) < 0.5, 1.0, -1.0)
    else:
        Y = np.eye(3)[r.randint(0, 3, n)]
    w = r.uniform(0, 1, n)
    w /= w.sum()
    prob = problem(Y, w, loss, X=Xs, C=Cs, kernel=kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tiny ridge: a warned stop is allowed
        result = blockwise.solve(prob, SolverSettings(alpha=alpha, tol=1e-4, max_iter=200, loss=loss))
    assert np.all(np.isfinite(result.dual_coef)) and np.all(np.isfinite(result.intercept))
    b0 = blockwise.baseline_intercept(loss, prob.weighted_targets, True)
    value0 = float(prob.evaluate(np.zeros_like(result.dual_coef), b0, False)["value"])
    F = kernel(Xs, Cs) @ result.dual_coef + result.intercept
    T2 = float(np.einsum("ij,ij->", result.dual_coef, kernel(Cs, Cs) @ result.dual_coef))
    value = loss.value(F, Y, w) + alpha * T2
    assert value <= value0 * (1 + 1e-9) + 1e-12
    assert np.all(np.diff(result.loss_curve) <= 1e-12 * value0)  # every accepted step decreases it



def test_importing_kernelgd_leaves_dask_unimported():
    """dask is optional: kernelgd touches it only for inputs that are dask collections."""
    import subprocess
    import sys

    code = "import sys, numpy as np, kernelgd; kernelgd.KernelGDRegressor(n_centers=5).fit(np.eye(9), np.arange(9.0)); " \
           "print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
