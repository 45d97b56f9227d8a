"""KernelOperator against dense kernel matrices, and the memory guarantees."""

import tracemalloc

import numpy as np
import pytest
from numpy.testing import assert_allclose

import kernelgd._operator as operator_module
from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix
from kernelgd._array_api import blas_dot
from kernelgd._operator import KernelOperator, MemoryBudgetError, cross_kernel_dot
from kernelgd._array_api import cholesky
from kernelgd.kernels import bind_kernel

rng = np.random.RandomState(0)
X = rng.normal(size=(300, 4))
C = X[::7]
V = rng.normal(size=(300, 3))
w = rng.uniform(size=300)
RBF = bind_kernel("rbf", sigma=2.0)


@pytest.mark.parametrize("store", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_symmetric_operator_products(store, dtype):
    op = KernelOperator(X, RBF, dtype=dtype, store=store, memory_budget=1 << 20)
    K = kernel_matrix(X, sigma=2.0)
    rtol = 1e-12 if dtype == "float64" else 1e-5
    assert op.stored == store and op.upper_only == store
    assert_allclose(op.matvec(V), K @ V, rtol=rtol, atol=rtol)
    assert_allclose(op.matvec(V[:, 0]), K @ V[:, 0], rtol=rtol, atol=rtol)
    assert_allclose(op.rows(np.array([5, 2, 7])), K[[5, 2, 7]], rtol=rtol, atol=rtol)
    assert_allclose(op.columns(np.array([1, 9])), K[:, [1, 9]], rtol=rtol, atol=rtol)
    assert_allclose(op.diag(), np.ones(300), rtol=rtol)
    op.mirror_lower()
    assert_allclose(op.rows(slice(0, 300)), K, rtol=rtol, atol=rtol)
    assert_allclose(op.matvec(V), K @ V, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("store", [True, False])
def test_center_operator_products(store):
    op = KernelOperator(X, RBF, centers=C, dtype="float64", store=store, memory_budget=1 << 16)
    Knm = kernel_matrix(X, C, sigma=2.0)
    U = rng.normal(size=(len(C), 2))
    assert_allclose(op.matvec(U), Knm @ U, rtol=1e-12)
    assert_allclose(op.rmatvec(V), Knm.T @ V, rtol=1e-12)
    gram, inner = op.gram_matvec(U, w)
    assert_allclose(gram, Knm.T @ (w[:, None] * (Knm @ U)), rtol=1e-12)
    assert_allclose(inner, Knm @ U, rtol=1e-12)
    assert_allclose(op.center_matrix(), kernel_matrix(C, sigma=2.0), rtol=1e-12)


def test_streaming_uses_small_blocks():
    op = KernelOperator(X, RBF, dtype="float64", memory_budget=64 << 10)
    assert not op.stored
    assert op.block_rows * 300 * 8 <= (64 << 10) // 2


def test_cross_kernel_dot_in_blocks():
    coef = rng.normal(size=(len(C), 2))
    Z = rng.normal(size=(50, 4))
    out = cross_kernel_dot(RBF, Z, C, coef, memory_budget=4096)
    assert_allclose(out, kernel_matrix(Z, C, sigma=2.0) @ coef, rtol=1e-12)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(7,), (7, 1), (7, 4)])
def test_blas_dot(order, shape):
    A = np.asarray(rng.normal(size=(5, 7)), order=order)
    B = rng.normal(size=shape)
    assert_allclose(blas_dot(A, B), A @ B, rtol=1e-12)
    assert_allclose(blas_dot(A.T.copy(order=order).T, B), A @ B, rtol=1e-12)


def test_precomputed_operator():
    K = kernel_matrix(X, sigma=2.0)
    op = KernelOperator(K, None, dtype="float64")
    assert_allclose(op.matvec(V), K @ V)
    assert_allclose(op.diag(), np.diagonal(K))


def test_streaming_fit_stays_within_its_memory_budget():
    # K of 3000 points is 72 MB in float64; with a 4 MiB budget the fit must
    # stream it and allocate no more than the budget plus O(n m) vectors
    # (m: the preconditioner's landmarks).
    Xb = np.random.RandomState(1).normal(size=(3000, 5))
    yb = np.sin(Xb[:, 0])
    budget = 4 << 20
    model = KernelGDRegressor(alpha=1e-3, options={"memory_budget": budget, "dtype": "float64"}, max_iter=5)
    tracemalloc.start()
    model.fit(Xb, yb)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    from kernelgd._solvers._preconditioners import N_LANDMARKS

    allowance = budget + 3000 * (N_LANDMARKS + 50) * 8 * 2
    assert peak < allowance < 3000**2 * 8
    # the same fit with K stored allocates the whole matrix
    tracemalloc.start()
    KernelGDRegressor(alpha=1e-3, options={"dtype": "float64"}, max_iter=5).fit(Xb, yb)
    _, peak_stored = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak_stored > 3000**2 * 8 / 2


@pytest.mark.parametrize("model", [
    KernelGDRegressor(n_centers=200, alpha=1e-3),
    KernelGDRegressor(n_centers=200, solver="newton", alpha=1e-3),
    KernelGDClassifier(n_centers=200, loss="logistic"),
])
def test_too_many_centers_for_the_budget_is_a_clear_error(model, monkeypatch):
    # every centers fit checks before K_nm and K_mm are allocated (newton allocated its m x m matrices
    # unchecked; the check came after K_nm was stored)
    import kernelgd._fit

    def unexpected(*args, **kwargs):
        raise AssertionError("K evaluated before the centers' memory was checked")

    target = (w > np.median(w)).astype(int) if isinstance(model, KernelGDClassifier) else w
    monkeypatch.setattr(kernelgd._fit, "KernelOperator", unexpected)
    with pytest.raises(MemoryBudgetError, match="n_centers.*memory_budget"):
        model.set_params(options={"memory_budget": 100_000}).fit(X, target)


def test_the_kernel_matrix_is_stored_in_what_the_centers_matrices_leave(monkeypatch):
    import kernelgd._fit

    stored = []

    def recording(*args, **kwargs):
        operator = KernelOperator(*args, **kwargs)
        stored.append(operator.stored)
        return operator

    monkeypatch.setattr(kernelgd._fit, "KernelOperator", recording)
    rng = np.random.RandomState(0)
    Xc, yc = rng.normal(size=(400, 3)), rng.normal(size=400)
    m = 50
    needed = 2 * m * m * 8 + 400 * m * 8  # numpy's two m x m float64 matrices, then K_nm
    for budget in (needed, needed - 1):
        KernelGDRegressor(n_centers=m, alpha=1e-3, options={"memory_budget": budget, "dtype": "float64"}).fit(Xc, yc)
    assert stored == [True, False]


def test_large_factorizations_run_single_threaded(monkeypatch):
    import kernelgd._array_api as backend

    entered = []
    original = backend.single_threaded_blas

    def spy():
        entered.append(True)
        return original()

    monkeypatch.setattr(backend, "single_threaded_blas", spy)
    n = 4100  # just above the threaded limit
    A = np.random.RandomState(0).normal(size=(n, 50))
    M = A @ A.T + n * np.eye(n)
    T = cholesky(M)
    assert entered
    assert_allclose(T.T @ T, M, rtol=1e-10)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_stored_triangle_times_many_columns(dtype, threads, monkeypatch):
    # few columns: a symv per column over the stored triangle; from POOLED_MIN_COLUMNS (float32:
    # FLOAT32_POOLED_MIN_COLUMNS) on two threads, whole rows (mirrored once) split over the pool (of any size here)
    monkeypatch.setattr(operator_module, "POOLED_MIN_BYTES", 0)
    op = KernelOperator(X, RBF, dtype=dtype, store=True, threads=threads)
    assert op.upper_only
    K = kernel_matrix(X, sigma=2.0)
    rtol = 1e-12 if dtype == "float64" else 1e-5
    least = operator_module.POOLED_MIN_COLUMNS if dtype == "float64" else operator_module.FLOAT32_POOLED_MIN_COLUMNS
    narrow = rng.normal(size=(300, least - 1))
    assert_allclose(op.matvec(narrow), K @ narrow, rtol=rtol, atol=rtol)
    assert op.upper_only
    wide = rng.normal(size=(300, least))
    assert_allclose(op.matvec(wide), K @ wide, rtol=rtol, atol=rtol)
    assert op.upper_only == (threads == 1)
    assert_allclose(op.matvec(narrow), K @ narrow, rtol=rtol, atol=rtol)  # symv on the mirrored K
    assert_allclose(op.matvec(narrow[:, 0]), K @ narrow[:, 0], rtol=rtol, atol=rtol)
    widest = rng.normal(size=(300, operator_module.SYMM_MIN_COLUMNS))  # one symm on a single thread
    assert_allclose(op.matvec(widest), K @ widest, rtol=rtol, atol=rtol)


def test_a_small_stored_k_is_never_split_over_the_pool():
    # below POOLED_MIN_BYTES one BLAS call beats the pool's hand-off, at any width
    op = KernelOperator(X, RBF, dtype="float64", store=True, threads=2)
    assert op.K.nbytes < operator_module.POOLED_MIN_BYTES
    wide = rng.normal(size=(300, operator_module.POOLED_MIN_COLUMNS + 1))
    assert_allclose(op.matvec(wide), kernel_matrix(X, sigma=2.0) @ wide, rtol=1e-12, atol=1e-12)
    assert op.upper_only  # symv or symm over the triangle, never the mirrored rows


def test_the_stored_triangle_is_numpys_own_array_with_only_whole_pages_advised():
    # the buffer stays a numpy allocation (tracemalloc counts it), writable, of the asked shape
    K = operator_module._triangle_buffer((3000, 3000), np.float64)
    assert K.flags.owndata and K.flags.writeable and K.flags.c_contiguous
    assert K.shape == (3000, 3000) and K.dtype == np.float64
    K[...] = 1.0
    assert K.sum() == 3000 * 3000


@pytest.mark.parametrize("chunk_rows", [7, 1000])
@pytest.mark.parametrize("threads", [1, 2])
def test_stored_centers_products_split_over_the_pool(threads, chunk_rows, monkeypatch):
    # gram_matvec's fused pass: chunks that do not divide a thread's rows, and one chunk per thread
    monkeypatch.setattr(operator_module, "GRAM_CHUNK_BYTES", chunk_rows * 40 * 8)
    monkeypatch.setattr(operator_module, "POOLED_MIN_BYTES", 0)  # row halves over the pool at this size too
    C = X[:40] + 0.1
    op = KernelOperator(X, RBF, centers=C, dtype="float64", store=True, threads=threads)
    K = kernel_matrix(X, C, sigma=2.0)
    for k in [1, operator_module.POOLED_MIN_COLUMNS + 2]:
        V, U = rng.normal(size=(40, k)), rng.normal(size=(300, k))
        assert_allclose(op.matvec(V), K @ V, rtol=1e-10, atol=1e-10)
        assert_allclose(op.rmatvec(U), K.T @ U, rtol=1e-10, atol=1e-10)
        w = rng.uniform(size=300)
        KtWKV, KV = op.gram_matvec(V, w)
        assert_allclose(KtWKV, K.T @ (w[:, None] * (K @ V)), rtol=1e-10, atol=1e-10)
        assert_allclose(KV, K @ V, rtol=1e-10, atol=1e-10)
        W = rng.uniform(size=(300, k))  # a weight per column
        assert_allclose(op.gram_matvec(V, W)[0], K.T @ (W * (K @ V)), rtol=1e-10, atol=1e-10)
    v, u = rng.normal(size=40), rng.normal(size=300)  # single vectors
    assert_allclose(op.matvec(v), K @ v, rtol=1e-10, atol=1e-10)
    assert_allclose(op.rmatvec(u), K.T @ u, rtol=1e-10, atol=1e-10)


def test_precomputed_square_kernel_is_used_whole():
    # a precomputed K is not assumed symmetric: no product reads only its triangle
    K = rng.normal(size=(50, 50))
    op = KernelOperator(K, None, dtype="float64")
    for k in [1, 3, operator_module.POOLED_MIN_COLUMNS + 1]:
        V = rng.normal(size=(50, k))
        assert_allclose(op.matvec(V), K @ V, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mirrored_triangle_is_the_whole_kernel_whatever_the_batches(monkeypatch, dtype):
    # regression: the triangle is evaluated in large row batches and mirrored in
    # small ones; where they did not align, entries just below the diagonal were
    # never written (np.empty), and letter's logistic fits at wide widths failed
    itemsize = np.dtype(dtype).itemsize
    monkeypatch.setattr(operator_module, "MAX_BLOCK_BYTES", 300 * itemsize * 7)
    monkeypatch.setattr(operator_module, "STORE_BLOCK_BYTES", 300 * itemsize * 20)
    op = KernelOperator(X, RBF, dtype=dtype, store=True, threads=2)
    assert op.block_rows == 7 and op.upper_only
    op.K[np.tril_indices(300, -1)] = np.nan  # what np.empty may hold
    op.mirror_lower()
    rtol = 1e-12 if dtype == "float64" else 1e-5
    assert_allclose(op.K, kernel_matrix(X, sigma=2.0), rtol=rtol, atol=rtol)
    wide = rng.normal(size=(300, operator_module.POOLED_MIN_COLUMNS))
    assert_allclose(op.matvec(wide), kernel_matrix(X, sigma=2.0) @ wide, rtol=rtol, atol=rtol)


def test_the_block_pool_is_made_once(monkeypatch):
    """Products split over threads reuse one pool: no thread is started per product or per fit."""
    made = []

    class Counted(operator_module.ThreadPoolExecutor):
        def __init__(self, *args, **kwargs):
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(operator_module, "ThreadPoolExecutor", Counted)
    monkeypatch.setattr(operator_module, "_POOLS", {})
    monkeypatch.setattr(operator_module, "POOLED_MIN_BYTES", 0)
    op = KernelOperator(X, RBF, memory_budget=1 << 30, threads=2)
    V6 = rng.normal(size=(300, 6))  # enough columns (and bytes) for a pooled product
    for _ in range(20):
        assert_allclose(op.matvec(V6), kernel_matrix(X, sigma=2.0) @ V6, rtol=1e-12, atol=1e-12)
    assert len(made) == 1


def test_a_stored_kernel_matrix_is_evaluated_in_blocks_for_every_thread(monkeypatch):
    # Regression: a K within one STORE_BLOCK_BYTES block (7,000 rows in float32) was evaluated as one
    # task, on one core while the pool's other thread idled
    X = np.random.RandomState(0).normal(size=(800, 3))  # K of 5 MB: above POOLED_MIN_BYTES
    tasks = []
    run = KernelOperator._run

    def counted(self, func, batches):
        tasks.append(len(batches))
        return run(self, func, batches)

    monkeypatch.setattr(KernelOperator, "_run", counted)
    op = KernelOperator(X, bind_kernel("rbf", sigma=1.0), threads=2)
    assert op.stored and op.upper_only
    assert tasks == [2 * operator_module.STORE_BLOCKS_PER_THREAD]
    reference = kernel_matrix(X, kernel="rbf", sigma=1.0)
    assert_allclose(np.triu(op.K), np.triu(reference), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("estimator", [KernelGDRegressor, KernelGDClassifier])
def test_a_float32_models_prediction_of_a_row_does_not_depend_on_the_rows_beside_it(estimator):
    # a float32 model predicts from float64 kernel values and sums on the host: in float32 a tiny ridge's cancelling
    # coefficients made predict(X[:1]) differ from predict(X)[0] by 0.4% of y's spread (6,000 rows) where the sums
    # were float32, and by 5e-4 under OpenBLAS's Haswell, Zen and Sandybridge kernels (run the suite with
    # OPENBLAS_CORETYPE=Haswell) where the values were: their sgemm rounds a row by its place in the block
    rng = np.random.RandomState(0)
    X = rng.normal(size=(1500, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=1500)
    target = y if estimator is KernelGDRegressor else (y > 0).astype(int) + (y > 0.7)
    model = estimator(alpha=1e-7, sigma=0.5, random_state=0, options={"dtype": "float32"}).fit(X, target)
    assert np.abs(model.dual_coef_).max() > 10  # cancelling coefficients: float32 sums would round far
    predict = model.predict if estimator is KernelGDRegressor else model.decision_function
    X_new = rng.normal(size=(400, 3))
    together = predict(X_new)
    alone = np.concatenate([predict(X_new[i : i + 1]) for i in range(20)])
    assert_allclose(alone, together[:20], rtol=0, atol=1e-9)
    assert_allclose(predict(X_new[::-1])[::-1], together, rtol=0, atol=1e-9)
