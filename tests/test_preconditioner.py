"""The cg solver's Nystroem preconditioner and its randomly pivoted Cholesky.

References: the Nystroem approximation ``K[:, P] K[P, P]^+ K[P, :]`` on the
pivots P formed densely, and scikit-learn's KernelRidge.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.kernel_ridge import KernelRidge

from kernelgd import KernelGDRegressor, kernel_matrix
from kernelgd._operator import KernelOperator
from kernelgd._solvers import _krylov, _preconditioners, cg
from kernelgd.kernels import bind_kernel


def clustered(n=400, seed=0):
    """One large cluster and a few small, far ones: uneven leverage."""
    rng = np.random.RandomState(seed)
    centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0], [8.0, 8.0], [-8.0, 4.0]])
    sizes = [n - 4 * (n // 40)] + [n // 40] * 4
    return np.vstack([c + 0.7 * rng.normal(size=(k, 2)) for c, k in zip(centers, sizes)])


def rpc(K, rank, block, seed=0, diag=None):
    columns = lambda idx: np.asfortranarray(K[:, idx])  # noqa: E731
    d = np.diag(K).copy() if diag is None else diag
    return _krylov.rp_cholesky(columns, d, rank, np.random.RandomState(seed), block=block)


def nystroem(K, pivots):
    return K[:, pivots] @ np.linalg.pinv(K[np.ix_(pivots, pivots)], rcond=1e-12) @ K[pivots]


@pytest.mark.parametrize("block", [1, 7, 30])
def test_rp_cholesky_is_the_nystroem_approximation_on_its_pivots(block):
    K = kernel_matrix(clustered(300), kernel="rbf", sigma=0.5)  # K[P, P] well conditioned
    F, pivots = rpc(K, 30, block)
    assert F.shape == (300, 30) and len(np.unique(pivots)) == 30
    assert_allclose(F @ F.T, nystroem(K, pivots), atol=1e-9)


def test_rp_cholesky_recovers_a_low_rank_matrix_and_stops():
    X = np.random.RandomState(0).normal(size=(200, 4))
    K = kernel_matrix(X, kernel="linear")  # rank 4
    F, pivots = rpc(K, 50, 10)
    assert F.shape[1] == 4
    assert_allclose(F @ F.T, K, atol=1e-9)


@pytest.mark.parametrize("seed", [2, 5])
def test_rp_cholesky_leaves_a_psd_residual_on_a_numerically_low_rank_kernel(seed):
    # A - F F' is PSD. An rbf kernel of two rounded features has eigenvalues decaying to rounding: pivots on
    # residual entries at rounding level divided their errors by a tiny square root (entries 1e-5 off, the
    # residual's least eigenvalue -2e-5); such pivots are now declined.
    X = np.round(np.random.RandomState(seed).normal(size=(600, 2)), 1)
    K = kernel_matrix(X, kernel="rbf", sigma=2.0)
    F, _ = rpc(K, 300, 100, seed)
    residual = K - F @ F.T
    assert np.abs(residual).max() < 1e-9
    assert np.linalg.eigvalsh(residual)[0] > -1e-9
    assert np.trace(residual) < 1e-7  # the rank it declined was rounding


def test_landmarks_of_a_float32_kernel_decline_its_rounding():
    # Columns computed in float32 carry rounding of 1e-7 whatever dtype they are returned in: pivots whose
    # residual was that rounding made n F F' miss K by 1.03 in an entry (K's are at most 1), the residual's
    # least eigenvalue -6 (on 3,000 rows its trace exceeded K's by half).
    n = 2000
    X = np.round(np.random.RandomState(0).normal(size=(n, 3)), 1)
    op = KernelOperator(X, bind_kernel("rbf", sigma=3.0), dtype="float32")
    F, _ = _preconditioners.landmark_factor(op, np.full(n, 1 / np.sqrt(n)), 500, np.random.RandomState(0))
    residual = kernel_matrix(X, kernel="rbf", sigma=3.0) - n * F @ F.T
    assert np.abs(residual).max() < 1e-3
    assert np.linalg.eigvalsh(residual)[0] > -1e-3
    assert np.trace(residual) > -1e-3


def test_rp_cholesky_duplicate_points():
    X = np.repeat(np.random.RandomState(1).normal(size=(15, 2)), 20, axis=0)  # 15 distinct
    K = kernel_matrix(X, kernel="rbf", sigma=1.0)
    F, pivots = rpc(K, 40, 40)
    assert F.shape[1] <= 15
    assert len(np.unique(X[pivots], axis=0)) == len(pivots)  # one pivot per distinct point
    assert_allclose(F @ F.T, nystroem(K, pivots), atol=1e-8)


def test_rp_cholesky_never_pivots_on_a_zero_diagonal():
    K = kernel_matrix(clustered(200), kernel="rbf", sigma=1.5)
    d = np.diag(K).copy()
    d[::2] = 0.0  # as for zero sample weights
    _, pivots = rpc(K, 60, 10, diag=d)
    assert np.all(pivots % 2 == 1)


def test_rp_cholesky_beats_uniform_landmarks_on_uneven_data():
    # The point of the pivoting: for the same rank, a much smaller residual
    # trace where some points have high leverage (averaged over seeds).
    K = kernel_matrix(clustered(400), kernel="rbf", sigma=1.0)
    trace = {
        name: np.mean([np.trace(K) - np.sum(rpc(K, 40, block, seed)[0] ** 2) for seed in range(5)])
        for name, block in [("pivoted", 5), ("uniform", 40)]  # one round of 40 = uniform
    }
    assert trace["pivoted"] < 0.75 * trace["uniform"]


def _system(X, alpha, sigma, threads="auto"):
    op = KernelOperator(X, bind_kernel("rbf", sigma=sigma), threads=threads)
    s = np.full(len(X), 1 / np.sqrt(len(X)))
    return op, s, lambda V: s[:, None] * op.matvec(s[:, None] * V) + alpha * V


@pytest.mark.parametrize("pooled", [False, True])
@pytest.mark.parametrize("block", [10, 40])
def test_preconditioner_is_the_inverse_of_nystroem_plus_shift(block, pooled, monkeypatch):
    # pooled: F's products split by rows over the operator's threads, as for a large F
    monkeypatch.setattr(_preconditioners, "POOLED_MIN_BYTES", 0 if pooled else np.inf)
    X = clustered(250)
    op, s, _ = _system(X, 1e-3, 1.0, threads=2)
    P = cg.NystroemPreconditioner(op, s, 1e-3, 40, np.random.RandomState(0), block=block)
    assert (P._pool is not None) == pooled
    A = kernel_matrix(X, kernel="rbf", sigma=1.0) / len(X)
    dense = nystroem(A, P.pivots) + 1e-3 * np.eye(len(X))
    V = np.random.RandomState(1).normal(size=(len(X), 2))
    assert_allclose(P(V), np.linalg.solve(dense, V), rtol=1e-6, atol=1e-8 * np.abs(P(V)).max())


def test_landmarks_drawn_already_precondition_as_the_nystroem_model_of_their_pivots():
    # alpha="auto" hands the preconditioner its factor and F'F, summed over the operator's row batches:
    # the preconditioner must be the same dense inverse, and must not change the Gram matrix it was given
    from kernelgd._auto_alpha import factor_gram

    X = clustered(250)
    op, s, _ = _system(X, 1e-3, 1.0, threads=2)
    F, pivots = _preconditioners.landmark_factor(op, s, 40, np.random.RandomState(0))
    gram = factor_gram(F, (op._run, op._row_batches()))
    assert_allclose(gram, F.T @ F, rtol=1e-12, atol=1e-14)
    given = gram.copy()
    P = cg.NystroemPreconditioner(op, s, 1e-3, 40, None, factor=_preconditioners.Landmarks(F, gram))
    assert_allclose(gram, given, rtol=0, atol=0)
    A = kernel_matrix(X, kernel="rbf", sigma=1.0) / len(X)
    dense = nystroem(A, pivots) + 1e-3 * np.eye(len(X))
    V = np.random.RandomState(1).normal(size=(len(X), 2))
    assert_allclose(P(V), np.linalg.solve(dense, V), rtol=1e-6, atol=1e-8 * np.abs(P(V)).max())


def test_pivoted_preconditioner_needs_fewer_cg_iterations():
    X = clustered(600)
    y = np.sin(X[:, 0]) + np.cos(X[:, 1])
    op, s, apply_A = _system(X, 1e-6, 1.0)
    B = (s * y)[:, None]
    iterations = {}
    for name, block in [("pivoted", 10), ("uniform", 60)]:
        P = cg.NystroemPreconditioner(op, s, 1e-6, 60, np.random.RandomState(0), block=block)
        _, iterations[name], converged = cg.block_pcg(apply_A, B, P, max_iter=500, tol=1e-8)
        assert converged
    assert iterations["pivoted"] < iterations["uniform"]


def test_cg_with_few_landmarks_iterates_to_kernel_ridge(monkeypatch):
    # With fewer landmarks than points the preconditioner is inexact, so cg
    # must do the work (the other solver tests have n < N_LANDMARKS).
    monkeypatch.setattr(_preconditioners, "N_LANDMARKS", 15)
    X = clustered(300)
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    model = KernelGDRegressor(
        kernel="rbf", sigma=1.0, alpha=1e-4, solver="cg", tol=1e-12, max_iter=500, fit_intercept=False,
        random_state=0,
    ).fit(X, y)
    ref = KernelRidge(alpha=1e-4 * len(X), kernel="rbf", gamma=1.0).fit(X, y)
    assert model.n_iter_ > 3
    assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-6 * np.abs(ref.dual_coef_).max())


def test_cg_on_a_zero_kernel():
    # No pivots at all: the preconditioner is 1 / mu and the fit is exact.
    X = np.zeros((30, 2))
    model = KernelGDRegressor(kernel="linear", alpha=1e-2, solver="cg", fit_intercept=True).fit(
        X, np.arange(30.0)
    )
    assert_allclose(model.predict(X), np.full(30, 14.5))


def test_block_pcg_tolerance_from_the_start_solves_the_correction():
    # Regression: Newton's warm-started inner solves measured tol against the right-hand side,
    # so near the optimum a "converged" solve could return a correction that was no descent
    # direction. Measured from the initial residual, tol bounds the correction's own error.
    rs = np.random.RandomState(0)
    M = rs.randn(50, 50)
    A = M @ M.T + 1e-3 * np.eye(50)
    B = rs.randn(50, 2)
    x0 = np.linalg.solve(A, B) + 1e-6 * rs.randn(50, 2)
    R0 = B - A @ x0
    assert np.all(np.linalg.norm(R0, axis=0) < 1e-3 * np.linalg.norm(B, axis=0))

    def solve(**kwargs):
        return cg.block_pcg(lambda V: A @ V, B, lambda V: V, max_iter=500, tol=1e-3, x0=x0, **kwargs)

    assert solve()[1] == 0  # against B: nothing to do
    X, n_iter, status = solve(tol_from_start=True)
    assert status == "converged" and n_iter > 0
    assert np.all(np.linalg.norm(B - A @ X, axis=0) <= 1e-3 * np.linalg.norm(R0, axis=0))
    # tol_b: a loose solve also stops where a solve against B would (Newton's inexact steps
    # near the optimum need no more iterations than its exact ones)
    assert solve(tol_from_start=True, tol_b=1e-3)[1] == 0
    assert solve(tol_from_start=True, tol_b=1e-12)[1] == n_iter
    # a known A x0 spends no product and gives the same solve
    products = []

    def counted(V):
        products.append(1)
        return A @ V

    X_known, n_known, _ = cg.block_pcg(counted, B, lambda V: V, max_iter=500, tol=1e-3, x0=x0,
                                       tol_from_start=True, Ax0=A @ x0)
    assert n_known == n_iter and len(products) == n_iter
    assert_allclose(X_known, X, rtol=1e-10, atol=1e-12)



def center_factors_peak(X, m, center_dtype="float64"):
    """The peak bytes tracemalloc sees while K_mm, its factors and FALKON's preconditioner are made and
    applied, on the centers X[:m] (X's namespace, numpy-backed), the matrices in ``center_dtype``."""
    import tracemalloc

    from kernelgd._array_api import namespace

    xp = namespace(X)[0]
    rng = np.random.RandomState(0)
    operator = KernelOperator(X, bind_kernel("rbf", sigma=2.0), centers=X[:m, ...], dtype="float64", store=False,
                              center_rows=np.arange(m), center_dtype=center_dtype)
    tracemalloc.start()
    try:
        factors = _preconditioners.center_factors(operator)
        falkon = _preconditioners.FalkonPreconditioner(factors, xp.asarray(rng.uniform(0.5, 1.5, m)), 1e-6, True)
        falkon.apply_t(falkon.apply(xp.asarray(rng.normal(size=(m, 2)))))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_center_memory_check_counts_what_the_factors_hold():
    # check_center_memory's count of m x m float64 matrices against the measured peak (m-vectors aside)
    m = 500
    X = np.random.RandomState(0).normal(size=(2 * m, 4))
    peak, count = center_factors_peak(X, m), _preconditioners.center_matrix_count(m)
    assert (count - 1) * 8 * m * m < peak <= 1.02 * count * 8 * m * m
    with pytest.raises(ValueError, match=f"n_centers={m} \\({count} m x m"):
        _preconditioners.check_center_memory(m, count * 8 * m * m - 1, X)
    _preconditioners.check_center_memory(m, count * 8 * m * m, X)


@pytest.mark.parametrize("center", [False, True])
def test_center_factors_and_falkon_factor_against_their_formulas(center):
    # K_mm is kept only as its factor: products through it equal K_mm's own, and FALKON's second
    # factor is that of T D T' / m (less the centring's rank one) + alpha I, by brute force
    m = 60
    rng = np.random.RandomState(0)
    X = rng.normal(size=(3 * m, 3))
    operator = KernelOperator(X, bind_kernel("rbf", sigma=1.5), centers=X[:m], dtype="float64", store=False)
    K_mm = operator.center_matrix()
    factors = _preconditioners.center_factors(operator)
    T = factors.T
    assert factors.jitter == _preconditioners.center_jitter(operator, K_mm)
    assert_allclose(T.T @ T, K_mm + factors.jitter * np.eye(m), rtol=0, atol=1e-13)
    V = rng.normal(size=(m, 3))
    assert_allclose(factors.kmm_dot(V), K_mm @ V, rtol=0, atol=1e-12)
    assert_allclose(factors.kmm_dot(V[:, 0]), K_mm @ V[:, 0], rtol=0, atol=1e-12)
    assert_allclose(factors.solve_T(V), np.linalg.solve(T, V), rtol=1e-10)
    d, alpha = rng.uniform(0.2, 3.0, m), 1e-3
    M = T @ np.diag(d) @ T.T / m + alpha * np.eye(m)
    if center:
        v = T @ d / np.sqrt(m * d.sum())
        M -= np.outer(v, v)
    A = _preconditioners.FalkonPreconditioner(factors, d, alpha, center).A
    assert_allclose(A.T @ A, M, rtol=0, atol=1e-12)
    assert_allclose(np.tril(A, -1), 0.0)


def test_a_factorization_in_place_that_fails_is_rebuilt_for_each_jitter():
    # potrf overwrote the singular matrix it failed on: each rung of the ladder factors a new build
    from kernelgd._array_api import JITTER_LADDER, cholesky_in_place

    B = np.random.RandomState(0).normal(size=(40, 3))
    builds = []

    def build():
        builds.append(1)
        return B @ B.T

    U, shift = cholesky_in_place(build, "test matrix", 0.0)
    scale = np.trace(B @ B.T) / 40
    assert shift in [extra * scale for extra in JITTER_LADDER[1:]] and len(builds) >= 2
    assert_allclose(U.T @ U, B @ B.T + shift * np.eye(40), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="test matrix is numerically singular"):
        cholesky_in_place(lambda: -np.eye(3), "test matrix")


def test_many_right_hand_sides_take_a_preconditioner_of_higher_rank(monkeypatch):
    # a factor of rank r costs about n r^2 flops, a product with K 2 n^2 per column: with many columns a
    # higher rank pays for itself in CG iterations; the fit is the same kernel ridge either way
    monkeypatch.setattr(_preconditioners, "N_LANDMARKS", 20)
    X = clustered(400)
    Y = np.column_stack([np.sin((k + 1) * X[:, 0] / 4) + np.cos((k % 3 + 1) * X[:, 1] / 3) for k in range(12)])
    assert _preconditioners.full_landmarks(400, 1)[0] == 28  # sqrt(2 * 400)
    assert _preconditioners.full_landmarks(400, 12)[0] == 97  # sqrt(2 * 400 * 12)
    assert _preconditioners.full_landmarks(10**6, 12)[0] == _preconditioners.MAX_LANDMARKS
    ref = KernelRidge(alpha=1e-5 * len(X), kernel="rbf", gamma=1.0).fit(X, Y)
    iterations = {}
    for products in [0, 1]:
        monkeypatch.setattr(_preconditioners, "FACTOR_PRODUCTS", products)
        model = KernelGDRegressor(kernel="rbf", sigma=1.0, alpha=1e-5, solver="cg", tol=1e-10, max_iter=1000,
                                  fit_intercept=False, random_state=0).fit(X, Y)
        assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-5, atol=1e-6 * np.abs(ref.dual_coef_).max())
        iterations[products] = model.n_iter_
    assert iterations[1] < iterations[0]


def test_a_factor_drawn_already_serves_where_it_has_the_rank_wanted():
    F = np.ones((5000, _preconditioners.N_LANDMARKS))
    given = _preconditioners.Landmarks(F, F.T @ F)
    assert _preconditioners.full_landmarks(5000, 1, given)[1] is given
    assert _preconditioners.full_landmarks(5000, 200, given)[1] is None  # a higher rank is drawn
    low = _preconditioners.Landmarks(F[:, :30], None)  # a kernel of rank 30: its factor is whole
    assert _preconditioners.full_landmarks(5000, 1, low)[1] is low
