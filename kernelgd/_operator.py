"""KernelOperator: the only code that evaluates kernel matrices for fitting.

Solvers see the training kernel matrix ``K = k(X, C)`` (n rows, m centers; ``C = X`` without centers)
only through products (``K @ V``, ``K.T @ U``, ``K.T W K @ V``), row blocks and the diagonal. K is
stored whole where it fits the memory budget, else its row blocks are recomputed on every product.

Fits run with single-threaded BLAS and the operator supplies the parallelism: kernel blocks (thin
GEMMs and single-threaded exp) are evaluated on a small thread pool whose threads wait without
spinning, where idle OpenBLAS threads spin and slow a loaded machine (bench_operator.py,
bench_threads.py). Products of a stored K with a few columns are memory-bound and run on one thread
(symv over the stored triangle); with many columns they are split by rows over the pool.
"""

import ctypes
import functools
import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy.linalg import get_blas_funcs
from sklearn.utils import gen_batches

from ._array_api import (
    all_finite, as_float64, cast, column_means, contiguous, diagonal, dot64, float_dtype, gaussian_product, namespace,
    on_host, row_dot, rows_of, scales_like, sum_blocks, take_columns,
)
from ._array_api import single_threaded_blas  # noqa: F401 (the operator's callers import it from here)

GiB = 1 << 30
DEFAULT_MEMORY_BUDGET = 2 * GiB  # where the available memory cannot be read
# memory_budget="auto": this share of the memory available when the fit starts.
AUTO_BUDGET_FRACTION = 0.5
# Largest evaluated block: bigger blocks are no faster and raise the peak.
MAX_BLOCK_BYTES = 32 << 20
# ... on a device, where each block is one parallel launch (and a wait for the host's norms of the far rows).
DEVICE_BLOCK_BYTES = 2 * GiB
# ... and at most this fraction of the budget: a block's distances and values take about three blocks.
DEVICE_BLOCKS_IN_BUDGET = 16
# Blocks written straight into a stored K need no buffer: larger ones prepare the centers fewer times.
STORE_BLOCK_BYTES = 256 << 20
# ... but at least this many blocks per pool thread, so that every core evaluates K.
STORE_BLOCKS_PER_THREAD = 8
# Sparse inputs are made dense where a dense GEMM is cheaper (bench_sparse.py): per kernel entry n_features
# multiply-adds, against SPARSE_OP_COST times (SPARSE_ENTRY_WORK + sum_k d_X(k) d_C(k)) for scipy's product.
SPARSE_OP_COST = 100
SPARSE_ENTRY_WORK = 3
# ... and where the dense copies take at most this share of the memory budget.
DENSE_COPY_SHARE = 0.25
# Stored-K products up to this many columns run a GEMV per column (OpenBLAS's GEMM is slower on thin sides).
GEMV_MAX_COLUMNS = 3
# From this many columns a stored K's product is split by rows over the pool, one GEMM per thread: it reads K
# once where a symv per column reads the triangle per column (bench_operator.py --wide-only).
POOLED_MIN_COLUMNS = 4
FLOAT32_POOLED_MIN_COLUMNS = 3
# Rows of a stored K_nm that gram_matvec multiplies twice while in cache (bench_operator.py --gram-only).
GRAM_CHUNK_BYTES = 2 << 20
# Smaller stored matrices are never split over the pool: the hand-off costs more than the product.
POOLED_MIN_BYTES = 4 << 20
# On one thread, from this many columns one symm over the triangle beats a symv per column.
SYMM_MIN_COLUMNS = 12
# "auto" computes in float64 up to this many kernel entries, float32 above.
AUTO_FLOAT64_MAX_ENTRIES = 4096**2
# A stored triangle at least this large is advised against huge pages (_triangle_buffer).
TRIANGLE_MADVISE_MIN_BYTES = 64 << 20
# The side of the square tiles mirror_lower copies (a copy by row strips misses the cache per entry).
MIRROR_TILE = 256


def n_threads(requested="auto"):
    """Threads for the operator's pool: ``requested``, or the cores this process may use."""
    if requested != "auto":
        return int(requested)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _read_int(path):
    try:
        with open(path) as fh:
            text = fh.read().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def available_memory():
    """Bytes this process can still allocate: /proc/meminfo's MemAvailable within the cgroup v2 (``memory.max``)
    or v1 (``memory.limit_in_bytes``) limit less its usage; None where none can be read (not Linux).
    """
    candidates = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    candidates.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and limit < 1 << 60:  # "max" or a huge v1 value: no limit
            candidates.append(max(limit - (usage or 0), 0))
            break
    return min(candidates) if candidates else None


def resolve_memory_budget(budget):
    """Bytes for a memory_budget option: "auto" is a share of the available memory."""
    if budget != "auto":
        return int(budget)
    free = available_memory()
    if free is None:
        return DEFAULT_MEMORY_BUDGET
    return max(int(AUTO_BUDGET_FRACTION * free), 64 << 20)


def resolve_dtype(dtype, n_rows, n_cols):
    """The compute dtype: "auto" is float64 for small problems, float32 above."""
    if dtype == "auto":
        return np.float64 if n_rows * n_cols <= AUTO_FLOAT64_MAX_ENTRIES else np.float32
    return np.dtype(dtype).type


def _triangle_buffer(shape, dtype):
    """An uninitialised array for a K of which only the upper triangle may be written: advised against
    transparent huge pages, whose 2 MiB pages would map (and touch) the lower triangle too. It stays numpy's
    own array (tracemalloc counts it).
    """
    K = np.empty(shape, dtype=dtype)
    madvise = _libc_madvise()
    if K.nbytes >= TRIANGLE_MADVISE_MIN_BYTES and madvise is not None:
        page = mmap.PAGESIZE
        first = -(-K.ctypes.data // page) * page  # whole pages inside K only
        last = (K.ctypes.data + K.nbytes) // page * page
        if last > first:
            madvise(first, last - first, mmap.MADV_NOHUGEPAGE)  # advice only: a failure changes nothing
    return K


@functools.cache
def _libc_madvise():
    """libc's ``madvise``, or None where it or MADV_NOHUGEPAGE is missing (not Linux)."""
    if not hasattr(mmap, "MADV_NOHUGEPAGE"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


def _column_density(X):
    """Each column's share of nonzero rows (1 for a dense array)."""
    if not sp.issparse(X):
        return np.ones(X.shape[1])
    X = sp.csr_matrix(X)
    return np.bincount(X.indices, minlength=X.shape[1]) / max(X.shape[0], 1)


def densify_if_faster(X, centers, memory_budget):
    """X and the centers as dense arrays where the dense kernel products are cheaper: the sparse product
    ``X C'`` costs about ``n m sum_k d_X(k) d_C(k)`` slow scalar operations (column densities d), the dense
    one ``n m n_features`` BLAS multiply-adds.
    """
    if not (sp.issparse(X) or sp.issparse(centers)):
        return X, centers
    other = X if centers is None else centers
    cost = SPARSE_OP_COST * (SPARSE_ENTRY_WORK + float(_column_density(X) @ _column_density(other)))
    rows = X.shape[0] + (0 if centers is None else centers.shape[0])
    if cost < X.shape[1] or rows * X.shape[1] * 8 > DENSE_COPY_SHARE * memory_budget:
        return X, centers
    dense = [Z.toarray() if sp.issparse(Z) else Z for Z in (X, centers) if Z is not None]
    return dense[0], (None if centers is None else dense[1])


def _compute_array(X, dtype):
    """X as a C-contiguous array (or CSR matrix) of the compute dtype; a clear error where float32 overflows."""
    with np.errstate(over="ignore"):
        out = sp.csr_matrix(X, dtype=dtype) if sp.issparse(X) else contiguous(X, dtype)
    values = out.data if sp.issparse(out) else out
    if dtype == np.float32 and not all_finite(values):
        raise ValueError(
            "Some features exceed the float32 range (about 3.4e38) in which this fit "
            "computes the kernel. Scale the features (for example with "
            "sklearn.preprocessing.StandardScaler) or use options={'dtype': 'float64'}."
        )
    return out


class MemoryBudgetError(ValueError):
    """A fit would need more memory than the budget allows.

    A subclass of ValueError, raised before any large allocation, whose
    message names the option that avoids it (fewer ``n_centers``, or a
    larger ``options={"memory_budget": ...}``).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import KernelGDRegressor, MemoryBudgetError
    >>> X, y = np.random.RandomState(0).randn(300, 2), np.arange(300.0)
    >>> reg = KernelGDRegressor(n_centers=200, options={"memory_budget": 100_000})
    >>> try:
    ...     reg.fit(X, y)
    ... except MemoryBudgetError as error:
    ...     print(str(error).split(" more")[0])
    n_centers=200 (2 m x m matrices of float64) needs 625 KiB,
    """


def check_budget(n_bytes, what, budget, fix):
    """Raise a MemoryBudgetError naming the option that avoids it."""
    if n_bytes > budget:
        raise MemoryBudgetError(
            f"{what} needs {format_bytes(n_bytes)}, more than the memory budget of "
            f"{format_bytes(budget)}. {fix}"
        )


def format_bytes(n_bytes):
    """``"1.50 GiB"``, ``"12.0 MiB"``, ``"300 bytes"``."""
    for unit, size in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return f"{int(n_bytes)} bytes"


_POOLS = {}
_POOLS_LOCK = threading.Lock()
_POOL_PREFIX = "kernelgd-blocks"


def _pool(n_threads):
    """The process's pool of ``n_threads`` threads, made once (per process, for forks): starting
    threads for every product cost a third of a small multi-class fit's time."""
    with _POOLS_LOCK:
        key = (os.getpid(), n_threads)
        if key not in _POOLS:
            _POOLS[key] = ThreadPoolExecutor(n_threads, thread_name_prefix=_POOL_PREFIX)
        return _POOLS[key]


def run_pooled(func, items, threads):
    """``[func(item) for item in items]``, in order, on the pool of ``threads`` threads with one BLAS thread each.

    A task of the pool itself runs its items in place: waiting on its own pool could deadlock.
    """
    if len(items) <= 1 or threads == 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        return [func(item) for item in items]
    with single_threaded_blas():
        return list(_pool(threads).map(func, items))


class KernelOperator:
    """The n x m training kernel matrix ``K = k(X, C)``, as products and rows.

    One body for every array namespace: K and its products live in X's namespace and device. numpy arrays
    get the tuned paths (blocks on a thread pool, a symmetric K stored as its upper triangle, scipy's BLAS);
    other namespaces evaluate and multiply in larger blocks, each run in parallel by the device.

    Parameters
    ----------
    X : array of shape (n, n_features), or a scipy.sparse matrix
        Training inputs; for ``kernel=None`` the precomputed (n, n) matrix. Sparse X (CSR) is copied dense
        only where that is faster and small (``densify_if_faster``).
    kernel : BoundKernel or None
        The kernel with its parameters; None when X is precomputed.
    centers : ndarray of shape (m, n_features), default=None
        The centers C; None means ``C = X`` (K square and symmetric).
    memory_budget : int
        Bytes that K, or the blocks being streamed, may take.
    dtype : {"auto", "float32", "float64"}
        Precision of the kernel values; products are returned as float64.
    store : bool, default=None
        Whether to store K; None stores it when it fits in the budget.
    threads : int or "auto", default="auto"
        The host's thread pool for kernel blocks; "auto": every core this process may use.
    center_rows : ndarray of shape (m,), default=None
        Where the centers are rows of X, their indices (solver "cg" weighs FALKON's preconditioner by them).
    center_dtype : {"float64", "float32"}, default="float64"
        The dtype of ``center_matrix()`` and of its factors (``_preconditioners.center_dtype``).
    product_dtype : {None, "float64"}, default=None
        The precision the recomputed blocks' products are summed in; None: ``dtype``'s.
    """

    def __init__(
        self, X, kernel, *, centers=None, memory_budget=DEFAULT_MEMORY_BUDGET, dtype="auto", store=None,
        threads="auto", center_rows=None, center_dtype="float64", product_dtype=None,
    ):
        self.center_dtype = np.dtype(center_dtype).type
        self.kernel = kernel
        self.xp, self.device = (np, None) if sp.issparse(X) else namespace(X)
        self.host = on_host(X)  # the thread pool, the stored triangle and scipy's BLAS
        self.center_rows = None if centers is None or center_rows is None else np.asarray(center_rows)
        self.symmetric = centers is None
        self.n = X.shape[0]
        self.m = self.n if centers is None else centers.shape[0]
        self.dtype = resolve_dtype(dtype, self.n, self.m)
        self.product_dtype = self.dtype if product_dtype is None else np.dtype(product_dtype).type
        self.itemsize = np.dtype(self.dtype).itemsize
        self.memory_budget = int(memory_budget)
        self.n_threads = n_threads(threads) if self.host else 1
        row_bytes = self.m * self.itemsize
        block_bytes = (
            min(MAX_BLOCK_BYTES, self.memory_budget // (2 * self.n_threads)) if self.host
            else min(DEVICE_BLOCK_BYTES, self.memory_budget // DEVICE_BLOCKS_IN_BUDGET)
        )
        self.block_rows = int(max(1, min(self.n, block_bytes // row_bytes)))
        # A stored symmetric K on the host holds only its upper triangle until a solver needs whole rows
        # (mirror_lower): half the kernel evaluations, and symv reads half of gemv's memory.
        self.upper_only = False
        self._fused = None
        if kernel is None:  # precomputed: K is given
            self.X = self.C = None
            self.K = cast(X, self.dtype)
            return
        X, centers = densify_if_faster(X, centers, self.memory_budget)
        if kernel.spec.stationary and not (sp.issparse(X) or sp.issparse(centers)):
            # A common shift leaves the kernel unchanged and, taken before the cast, keeps float32 distances accurate.
            shift = column_means(X if centers is None else centers)
            X = as_float64(X) - shift
            centers = None if centers is None else as_float64(centers) - shift
        self.X = _compute_array(X, self.dtype)
        self.C = self.X if centers is None else _compute_array(centers, self.dtype)
        if store is None:
            store = self.n * row_bytes <= self.memory_budget
        self.K = self._evaluate_all() if store else None
        # the fused product sums in float32, split by the rows' count: not where the sums are float64's
        self._fused = None if store or self.product_dtype != self.dtype else self._gaussian()

    def _gaussian(self):
        """The device's fused product (``_GaussianProduct``) for a recomputed rbf K, where it has one."""
        scale = None if self.host or sp.issparse(self.X) else self.kernel.gaussian_scale()
        product = None if scale is None or self.dtype != np.float32 else gaussian_product(self.X)
        if product is None:
            return None
        fused = _GaussianProduct(product, self.X, None if self.symmetric else self.C, scale)
        # squared norms past float32's range once divided by sigma (the expansion would give NaN): the generic blocks
        return fused if all_finite(fused.x_norms) and all_finite(fused.c_norms) else None

    # ------------------------------------------------------------ blocks

    @property
    def stored(self):
        """Whether K is held whole in memory."""
        return self.K is not None

    def _map_blocks(self, func, n_rows):
        """``func(batch)`` for row batches of K, on the thread pool, in order."""
        return self._run(func, list(gen_batches(n_rows, self.block_rows)))

    def _run(self, func, batches):
        return run_pooled(func, batches, self.n_threads)

    def _evaluate_all(self):
        if not self.host:
            K = self.xp.empty((self.n, self.m), dtype=float_dtype(self.xp, self.dtype), device=self.device)

            def fill(batch):
                K[batch, ...] = self.kernel(self.X[batch, ...], self.C)

            self._run(fill, list(gen_batches(self.n, self.block_rows)))
            return K
        K = (_triangle_buffer if self.symmetric else np.empty)((self.n, self.m), dtype=self.dtype)
        if self.symmetric:

            def fill(batch):  # upper triangle: columns from the block's first row on
                self.kernel.fill(K[batch, batch.start :], self.X[batch], self.X[batch.start :])

            self.upper_only = True
        else:

            def fill(batch):
                self.kernel.fill(K[batch], self.X[batch], self.C)

        rows = self.block_rows
        if self.kernel.writes_out and not sp.issparse(self.X):  # sparse products make a dense buffer
            rows = max(rows, min(self.n, STORE_BLOCK_BYTES // (self.m * self.itemsize)))
        if self.n * self.m * self.itemsize >= POOLED_MIN_BYTES:  # (smaller: the pool's hand-off costs more)
            rows = min(rows, -(-self.n // (STORE_BLOCKS_PER_THREAD * self.n_threads)))
        self._run(fill, list(gen_batches(self.n, rows)))
        return K

    def mirror_lower(self):
        """Fill the lower triangle of a stored symmetric K (for row access)."""
        if not self.upper_only:
            return
        K, tile = self.K, MIRROR_TILE

        # Square tiles: a transposed copy of whole row strips reads K's columns, a cache miss per entry.
        def fill(batch):  # each tile row of the batch: the tiles left of its diagonal tile, then that tile's lower part
            for start in range(batch.start, batch.stop, tile):
                rows = slice(start, min(start + tile, batch.stop))
                for left in range(0, start, tile):
                    cols = slice(left, min(left + tile, start))
                    K[rows, cols] = K[cols, rows].T
                # the evaluation's row batches may differ from these: nothing below the diagonal is assumed written
                block = K[rows, rows]
                lower = np.tril_indices(block.shape[0], -1)
                block[lower] = block.T[lower]

        self._map_blocks(fill, self.n)
        self.upper_only = False

    def rows(self, idx):
        """``K[idx, :]`` for a slice or an index array."""
        if self.K is not None and not self.upper_only:
            return rows_of(self.K, idx)
        return self.kernel(rows_of(self.X, idx), self.C)

    def columns(self, idx):
        """``K[:, idx]`` as float64, for an index array of centers."""
        if self.symmetric:  # contiguous rows: gather and convert, then transpose
            return as_float64(self.rows(idx), copy=True).T
        if self.K is not None:
            return as_float64(take_columns(self.K, idx))
        return as_float64(self.kernel(self.X, rows_of(self.C, idx)))

    def center_matrix(self):
        """``k(C, C)`` (m x m) in ``center_dtype``: float64, or evaluated in float32 (``center_dtype``)."""
        if self.center_dtype != np.float64:
            if self.kernel is None:
                return cast(self.K, np.float32)
            C = cast(self.C, np.float32)
            return cast(self.kernel(C, C), np.float32)
        if self.kernel is None:
            return as_float64(self.K)
        C = as_float64(self.C, copy=True)
        return as_float64(self.kernel(C, C))

    def diag(self):
        """``diag(K)`` for a square K, without forming K."""
        if self.K is not None and self.symmetric:  # the diagonal is in both triangles
            return as_float64(diagonal(self.K), copy=True)
        return self.kernel.diag(as_float64(self.X, copy=True))

    def center_diag(self):
        """``k(c, c)`` for every center (``diag`` for a square K)."""
        if self.symmetric:
            return self.diag()
        return self.kernel.diag(as_float64(self.C, copy=True))

    # ---------------------------------------------------------- products

    def dot(self, block, V):
        """``block @ V`` in the product dtype, returned as float64."""
        if self.product_dtype != self.dtype:  # float32 blocks summed in float64: no rounding of the sums or of V
            block = as_float64(block)
        return dot64(block, V, self.product_dtype, GEMV_MAX_COLUMNS)

    def _empty(self, shape):
        return self.xp.empty(shape, dtype=self.xp.float64, device=self.device)

    def _symv(self, V):
        """``K @ V`` from the upper triangle of a stored symmetric K (symv per column, or one symm)."""
        symv = get_blas_funcs("symv", (self.K,))
        # K.T of the C-ordered K is Fortran-ordered: its lower triangle is K's upper.
        columns = V.astype(self.dtype, copy=False).reshape(self.n, -1)
        if columns.shape[1] >= SYMM_MIN_COLUMNS:  # compute-bound, and no pool to split it: one level-3 call
            symm = get_blas_funcs("symm", (self.K,))
            return symm(1.0, self.K.T, columns, side=0, lower=1).astype(np.float64).reshape(V.shape)
        # one BLAS thread, as the whole fit: a threaded symv beside a busy job is several times slower
        # (bench_threads.py)
        out = np.column_stack([symv(1.0, self.K.T, columns[:, j], lower=1) for j in range(columns.shape[1])])
        return out.astype(np.float64).reshape(V.shape)

    def _pooled(self, V):
        """Whether a product of the stored K with V is split by rows over the pool: never below
        ``POOLED_MIN_BYTES``, always above it for a stored K_nm (bench_operator.py).
        """
        if self.K is None or self.n_threads == 1 or self.K.nbytes < POOLED_MIN_BYTES:  # (1 off the host)
            return False
        least = FLOAT32_POOLED_MIN_COLUMNS if self.K.dtype == np.float32 else POOLED_MIN_COLUMNS
        return not self.symmetric or (V.ndim == 2 and V.shape[1] >= least)

    def _row_batches(self):
        """One contiguous row batch of K per pool thread."""
        return list(gen_batches(self.n, -(-self.n // self.n_threads)))

    def matvec(self, V):
        """``K @ V`` for V of shape (m,) or (m, k); float64 result."""
        if self._fused is not None:
            return self._fused(V)
        if self._pooled(V):
            self.mirror_lower()  # once: whole rows, so that each thread multiplies a row block
            Vc, out = V.astype(self.dtype, copy=False), np.empty((self.n,) + V.shape[1:])
            # OpenBLAS's dgemm runs (V' K_b')' 1.3-1.7x as fast as K_b V on thin V, its sgemm slower
            # (bench_operator.py); K_b' is a Fortran view of K_b, not a copy
            Vt = np.ascontiguousarray(Vc.T) if Vc.ndim == 2 and self.K.dtype == np.float64 else None

            def product(batch):  # numpy's matmul: scipy's BLAS wrappers hold the GIL
                out[batch] = self.K[batch] @ Vc if Vt is None else (Vt @ self.K[batch].T).T

            self._run(product, self._row_batches())
            return out
        if self.K is not None and self.symmetric and self.kernel is not None and self.host:  # symv reads half of K
            return self._symv(V)
        if self.K is not None:
            return self.dot(self.K, V)
        out = self._empty((self.n,) + tuple(V.shape[1:]))

        def product(batch):
            out[batch, ...] = self.dot(self.rows(batch), V)

        self._map_blocks(product, self.n)
        return out

    def rmatvec(self, U):
        """``K.T @ U`` for U of shape (n,) or (n, k); float64 result."""
        if self.symmetric:
            return self.matvec(U)
        if self._fused is not None:
            return self._fused(U, transpose=True)
        if self._pooled(U):
            Uc = U.astype(self.dtype, copy=False)
            # U'K rather than K'U, as in _fused_gram: 2x as fast in float64 at 7 to 26 columns (16,000 x 1,000)
            parts = self._run(lambda batch: (Uc[batch].T @ self.K[batch]).T.astype(np.float64), self._row_batches())
            return sum_blocks(parts)
        if self.K is not None:
            return self.dot(self.K.T, U)
        return sum_blocks(self._map_blocks(lambda batch: self.dot(self.rows(batch).T, U[batch, ...]), self.n))

    def gram_matvec(self, V, w):
        """``(K.T W(K @ V), K @ V)`` in one pass over K; V of shape (m, k). ``W`` multiplies rows by w of shape (n,),
        or (n, k) for one weight vector per column of V; or w is a callable ``w(rows, KV_rows)`` mapping a slice
        of rows and their ``K @ V`` rows to the weighted rows (a Hessian that couples the columns).
        """
        if not callable(w):
            weights = w[:, None] if w.ndim == 1 else w
            w = lambda rows, KV: weights[rows, ...] * KV  # noqa: E731
        if self._fused is not None or (self.K is not None and (self.symmetric or not self.host)):
            KV = self.matvec(V)
            return self.rmatvec(w(slice(None), KV)), KV
        if self.K is not None:
            return self._fused_gram(V, w)
        KV = self._empty((self.n, V.shape[1]))

        def product(batch):
            block = self.rows(batch)
            KV[batch, ...] = self.dot(block, V)
            return self.dot(block.T, w(batch, KV[batch, ...]))

        return sum_blocks(self._map_blocks(product, self.n)), KV

    def _fused_gram(self, V, w):
        """``gram_matvec`` of a stored K_nm: each thread reads its rows once, in cache-sized chunks, so that the
        product with K.T finds them in cache (bench_operator.py).
        """
        Vc = V.astype(self.dtype, copy=False)
        KV = np.empty((self.n, V.shape[1]))
        chunk = max(1, GRAM_CHUNK_BYTES // (self.m * self.itemsize))

        def product(batch):  # numpy's matmul: scipy's BLAS wrappers hold the GIL
            out = np.zeros((self.m, V.shape[1]))
            for rows in gen_batches(batch.stop - batch.start, chunk, min_batch_size=0):
                rows = slice(batch.start + rows.start, batch.start + rows.stop)
                block = self.K[rows]
                KV[rows] = block @ Vc
                # W'K rather than K'W: OpenBLAS packs the thin W' instead of the block (bench_operator.py)
                Wt = np.ascontiguousarray(w(rows, KV[rows]).T, dtype=self.dtype)
                out += (Wt @ block).T
            return out

        return np.sum(self._run(product, self._row_batches()), axis=0), KV


class _GaussianProduct:
    """``K @ V`` and ``K.T @ U`` of an rbf K by a fused device kernel (``_triton``): K is never formed.

    The features, shifted already, are scaled once by ``1 / sigma``, so that ``K = exp(-|a - b|^2)``;
    each product evaluates K's entries where it uses them, and ``K.T @ U`` is ``k(C, X) @ U``.
    """

    def __init__(self, product, X, C, scale):
        self.product = product
        self.X = contiguous(X * scales_like(scale, X), np.float32)
        self.C = self.X if C is None else contiguous(C * scales_like(scale, C), np.float32)
        self.x_norms = row_dot(self.X, self.X)
        self.c_norms = self.x_norms if C is None else row_dot(self.C, self.C)

    def __call__(self, V, transpose=False):
        if transpose:
            return self.product(self.C, self.X, self.c_norms, self.x_norms, V)
        return self.product(self.X, self.C, self.x_norms, self.c_norms, V)


def cross_kernel_dot(
    kernel, Z, C, coef, *, memory_budget=DEFAULT_MEMORY_BUDGET, dtype=np.float64, threads="auto"
):
    """``k(Z, C) @ coef`` in row blocks of Z, under the memory budget, its sums in float64 whatever ``dtype``
    (the kernel values'): each row's product then depends on that row alone, not on the rows beside it in a
    block (float32 sums of thousands of terms round differently with the block's shape, by far more than
    float32's resolution where the coefficients cancel).

    With ``kernel=None``, Z is a precomputed (n_Z, n_C) kernel matrix.
    """
    if kernel is None:
        return as_float64(Z) @ coef
    op = KernelOperator(
        Z, kernel, centers=C, memory_budget=memory_budget, dtype=dtype, store=False, threads=threads,
        product_dtype=np.float64,
    )
    return op.matvec(coef)
