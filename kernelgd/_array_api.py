"""The backend: where an array lives, and every primitive whose numpy body differs from the standard's.

The estimators follow scikit-learn's array API convention: under
``sklearn.config_context(array_api_dispatch=True)`` an input from torch, CuPy or any array API
library is computed on in its own namespace and device, and fitted attributes and outputs stay
there; otherwise everything is numpy, on the paths tuned for it (scipy's BLAS, the thread pool).

Each primitive has two bodies: ``_Host``'s for numpy arrays (and scipy.sparse matrices: scipy's
BLAS and LAPACK drivers, in place where that saves a copy) and ``_Generic``'s, with the standard's
functions only, chosen per call by one test on the first array argument. Outside this module code
asks at most ``on_host`` (the thread pool and worker processes exist only there). The standard's
missing triangular solve, pivoted Cholesky and scatter-add each get one small fallback here.
"""

import functools
from contextlib import contextmanager, nullcontext

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.linalg.lapack
import scipy.special
import scipy.sparse as sp
from sklearn import get_config
from sklearn.utils._array_api import _is_numpy_namespace, get_namespace_and_device
from sklearn.utils._array_api import device as array_device
from threadpoolctl import ThreadpoolController

try:  # scikit-learn >= 1.8, which also vendors array-api-compat and array-api-extra
    from sklearn.utils._array_api import move_to
except ImportError:  # pragma: no cover - older scikit-learn: numpy inputs only
    move_to = None


# ------------------------------------------------------------------ where an array lives


def _is_host(A):
    return isinstance(A, (np.ndarray, np.generic)) or sp.issparse(A)  # the one test of which body applies


def on_host(*arrays):
    """Whether the arrays are numpy's or scipy.sparse's: the primitives' tuned bodies apply."""
    return all(map(_is_host, arrays))


def namespace(*arrays):
    """``(xp, device)`` of the arrays; ``(numpy, None)`` for numpy inputs or without dispatch (the numpy module
    itself, so the numpy paths are those of a fit without dispatch).
    """
    arrays = [a for a in arrays if a is not None]
    kind = type(arrays[0]) if arrays and all(type(a) is type(arrays[0]) for a in arrays) else None
    if kind is not None and not _is_host(arrays[0]):
        # one type of array: its namespace once per type (scikit-learn's lookup parses version strings on every
        # call), its device on every call
        key = (kind, get_config()["array_api_dispatch"])
        if key not in _NAMESPACES:
            _NAMESPACES[key] = _lookup(arrays[:1])
        xp, device = _NAMESPACES[key]
        return (xp, array_device(*arrays)) if device is not None else (xp, device)
    return _lookup(arrays)


_NAMESPACES = {}  # (array type, array_api_dispatch) -> (xp, a device or None): namespace's cache


def _lookup(arrays):
    xp, _, device = get_namespace_and_device(*arrays)
    if _is_numpy_namespace(xp):
        return np, None
    if move_to is None:  # pragma: no cover - older scikit-learn
        raise ValueError(
            f"kernelgd computes on {xp.__name__} arrays with scikit-learn >= 1.8 only. Upgrade "
            "scikit-learn, or pass numpy arrays."
        )
    return xp, device


def follow(X, *arrays):
    """``(xp, device, *arrays)``: X's namespace and device, and the other arrays moved there (scikit-learn's
    rule: everything follows X). Without array API dispatch nothing moves.
    """
    if sp.issparse(X) or not get_config()["array_api_dispatch"]:
        return (np, None, *arrays)
    xp, device = namespace(X)
    if move_to is None:  # pragma: no cover - older scikit-learn: numpy X (namespace raised otherwise)
        return (xp, device, *arrays)
    from sklearn.externals.array_api_compat import is_array_api_obj

    # another namespace's arrays move to X's; numeric numpy arrays too where X has a device (not numpy's)
    # (string labels stay numpy: no other namespace holds them)
    moved = [
        move_to(a, xp=xp, device="cpu" if device is None else device)
        if is_array_api_obj(a) and (not _is_host(a) or device is not None and a.dtype.kind in "biufc")
        else a
        for a in arrays
    ]
    return (xp, device, *moved)


def to_numpy(array):
    """A numpy copy of an array of any namespace (host memory); numpy arrays and array-likes as they are."""
    if on_host(array) or move_to is None:
        return array
    from sklearn.externals.array_api_compat import is_array_api_obj

    return move_to(array, xp=np, device="cpu") if is_array_api_obj(array) else np.asarray(array)


def from_numpy(array, xp, device):
    """A numpy array as an array of ``xp`` on ``device`` (None: numpy's, as ``namespace`` gives it)."""
    if device is None:
        return xp.asarray(array)
    return xp.asarray(np.ascontiguousarray(array), device=device)


def like(array, other):
    """``array`` (numpy's, a float, or of ``other``'s namespace) in ``other``'s namespace and on its device."""
    if on_host(other):
        return np.asarray(array)
    if _is_host(array) or not hasattr(array, "shape"):
        return from_numpy(np.asarray(array), xp_of(other), other.device)
    return xp_of(other).asarray(array, device=other.device)


def xp_of(A):
    """The namespace of A: numpy itself for numpy arrays."""
    if _is_host(A):
        return np
    cached = _NAMESPACES.get((type(A), get_config()["array_api_dispatch"]))  # without reading the device
    return (cached or namespace(A))[0]


def input_namespace(*arrays):
    """The arrays' namespace: numpy for numpy arrays, scipy.sparse matrices and array-likes."""
    dense = [A for A in arrays if not sp.issparse(A)]
    if on_host(*dense) or not all(hasattr(A, "shape") for A in dense):
        return np
    return namespace(*dense)[0]


def float_dtype(xp, name):
    """``xp.float32`` or ``xp.float64`` from a numpy dtype, type or name."""
    return xp.float32 if np.dtype(name) == np.float32 else xp.float64


def eps(xp, dtype):
    return float(xp.finfo(dtype).eps)


def is_float32(A):
    """Whether A holds float32."""
    return str(A.dtype).endswith("float32")  # numpy's, torch's and the standard's dtypes alike


def scales_like(value, X):
    """A per-feature scale array in X's namespace and on its device (a float stays a float)."""
    if not np.ndim(value) or on_host(X):
        return value
    xp = input_namespace(X)
    return xp.asarray(value, dtype=xp.float64, device=X.device)


def common_float(X, Y, dtype=None):
    """X and Y in one float dtype: ``dtype``, or float32 if both are float32, else float64; sparse stays CSR."""
    if input_namespace(X, Y) is np:
        X, Y = (A if sp.issparse(A) else np.asarray(A) for A in (X, Y))
        common = np.result_type(X.dtype, Y.dtype, np.float32)  # float16 and small integers compute in float32
        dtype = dtype or (np.float32 if common == np.float32 else np.float64)
    dtype = dtype or (np.float32 if is_float32(X) and is_float32(Y) else np.float64)
    return tuple(sp.csr_matrix(A, dtype=dtype) if sp.issparse(A) else cast(A, dtype) for A in (X, Y))


# memory_budget="auto" on a CUDA device: this share of its free memory (the fit's arrays are alone there;
# the rest is the allocator's slack and the libraries' workspaces).
DEVICE_BUDGET_FRACTION = 0.75


def factors_in_place(like):
    """Whether ``factor_in_place`` factors in M's own memory for arrays like ``like`` (numpy, torch), rather
    than in a symmetrised copy."""
    return _is_host(like) or _library(xp_of(like)) is _Torch


def memory_budget(xp, device, default):
    """The memory budget for arrays on ``device``: ``DEVICE_BUDGET_FRACTION`` of a CUDA device's free
    memory, else ``default``."""
    return _library(xp).memory_budget(device, default)


# Triangular factors of at most this many rows are inverted once off the host (triangular_solver):
# 16,384 rows of float64 are 2 GiB.
EXPLICIT_INVERSE_ROWS = 16384


# Rows of an m x m matrix computed (or updated) at a time off the host: at most this many entries per block
# (128 MiB of float64), so that no m x m temporary stands beside the matrix.
BLOCK_ENTRIES = 1 << 24


def _row_blocks(m):
    step = max(1, BLOCK_ENTRIES // max(m, 1))
    return [slice(start, min(start + step, m)) for start in range(0, m, step)]


def keeps_inverses(m):
    """Whether ``triangular_solver`` keeps an m x m factor's explicit inverse off the host."""
    return m <= EXPLICIT_INVERSE_ROWS


# Iterations an iterative solver runs between reads of arrays off the host: a read waits for the
# device to finish its queue, and a convergence test every iteration would stall it each time.
DEVICE_READ_INTERVAL = 4


def read_interval(A):
    """Iterations between an iterative solver's host reads for arrays like ``A``: 1 on the host, where
    a read costs nothing, ``DEVICE_READ_INTERVAL`` elsewhere (a solver then runs up to that many - 1
    iterations past its stopping point)."""
    return 1 if _is_host(A) else DEVICE_READ_INTERVAL


# ------------------------------------------------------------------ threads


# Jitter (times the mean diagonal) a factorization that fails is retried with, in turn.
JITTER_LADDER = (0.0, 1e-12, 1e-10, 1e-8, 1e-6)
# numpy factorizations above this size run with single-threaded BLAS: scipy's OpenBLAS
# segfaults in multithreaded potrf from about 16,000 rows, and idle threads spin
THREADED_LAPACK_MAX = 4096


@functools.cache
def _controller():
    """One ThreadpoolController, made on first use (after numpy and scipy loaded
    their BLAS): finding the libraries costs milliseconds per call."""
    return ThreadpoolController()


@contextmanager
def single_threaded_blas():
    """Single-threaded BLAS, for work spread over threads or large factorizations."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


def pivoted_cholesky(G, tol=-1.0):
    """LAPACK's pivoted Cholesky (pstrf) of a small PSD block, on the host (the standard has none; the blocks
    are a randomly pivoted Cholesky round's, so the round trip costs microseconds). Returns
    ``(R, perm, rank)`` with ``perm`` 0-based; ``rank`` counts the pivots above ``tol`` (negative: LAPACK's
    default, the block's size times eps times its largest diagonal entry).
    """
    from scipy.linalg.lapack import dpstrf

    R, perm, rank, _ = dpstrf(np.asarray(to_numpy(G), dtype=np.float64), tol=tol, lower=0)
    return np.triu(R), perm - 1, int(rank)  # pstrf leaves the input below the diagonal


def _index(idx, A):
    """A numpy index array in A's namespace, on its device (array-api-strict indexes with its own arrays only)."""
    return namespace(A)[0].asarray(np.asarray(idx, dtype=np.int64), device=A.device)


def _shifted(F, axis):
    """numpy's ``F`` less its largest entry along ``axis`` (where finite: scipy's convention), and that entry."""
    top = F.max(axis=axis, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    return F - top, top


# ------------------------------------------------------------------ the primitives' numpy bodies


class _Host:
    """numpy arrays (and scipy.sparse where a primitive takes them)."""

    def solve_triangular(T, B, *, upper=True, trans=False):
        return scipy.linalg.solve_triangular(T, B, trans=1 if trans else 0, lower=not upper, check_finite=False)

    def factor_in_place(M, shift=0.0):
        M.flat[:: M.shape[0] + 1] += shift  # the diagonal, without an m x m identity
        guard = single_threaded_blas() if M.shape[0] > THREADED_LAPACK_MAX else nullcontext()
        with guard:
            try:
                if M.flags.f_contiguous:
                    return scipy.linalg.cholesky(M, lower=False, overwrite_a=True, check_finite=False)
                # C order: M.T is Fortran-ordered, and its lower triangle is M's upper
                return scipy.linalg.cholesky(M.T, lower=True, overwrite_a=True, check_finite=False).T
            except scipy.linalg.LinAlgError:
                return None

    def scale_in_place(M, s):
        M *= s[:, None]
        M *= s[None, :]
        return M

    def take_rows(A, idx):
        return A[idx]

    def take_columns(A, idx):
        return np.take(A, idx, axis=1)  # 2x faster than A[:, idx] on the rows of a stored K

    def add_at_rows(A, idx, V):
        A[idx] += V
        return A

    def coldot(R, Z):
        return np.einsum("ij,ij->j", R, Z)  # without the product's temporary

    def colnorm(R):
        return np.linalg.norm(R, axis=0)

    def sum_of(A, B=None, w=None):
        if w is None:
            return np.sum(A) if B is None else np.einsum("ij,ij->", A, B)  # without the product's temporary
        return np.einsum("i,ij,ij->", w, A, A if B is None else B)

    def to_floats(first, scalars):
        return [float(s) for s in scalars]

    def outer(u, v):
        return np.outer(u, v)

    def row_dot(A, B):
        return np.einsum("ij,ij->i", A, B)

    def weighted_sum(w, Y):
        return np.einsum("i,ij->j", w, Y)

    def zeros(like, shape):
        return np.zeros(shape)

    def block_of(A, rows, cols):
        return A[np.ix_(rows, cols)]

    def rows_of(A, idx):
        return A[idx]

    def copy(A):
        return A.copy()

    def expit(F):
        return scipy.special.expit(F)

    def log_expit(F):
        return scipy.special.log_expit(F)

    # numpy's own logsumexp and softmax: scipy's array-API wrappers cost three times the arithmetic
    # on a Newton step's arrays
    def logsumexp(F, axis, keepdims=False):
        shifted, top = _shifted(F, axis)
        with np.errstate(divide="ignore"):  # a row of -inf: log(0) = -inf, as scipy gives
            out = np.log(np.exp(shifted).sum(axis=axis, keepdims=True)) + top
        return out if keepdims else np.squeeze(out, axis=axis)

    def softmax(F, axis):
        E = np.exp(_shifted(F, axis)[0])
        return E / E.sum(axis=axis, keepdims=True)

    def exp_in_place(A):
        return np.exp(A, out=A)

    def diagonal(A):
        return np.diagonal(A)  # numpy < 2 has no linalg.diagonal

    def concat(first, arrays, axis=0):
        return np.concatenate(arrays, axis=axis)

    def clip_min(A, low):
        return np.maximum(A, low)

    def as_float64(A, copy=False):
        if sp.issparse(A):
            return A.astype(np.float64, copy=copy)
        return A.astype(np.float64) if copy else np.asarray(A, dtype=np.float64)

    def column_means(A):
        return np.mean(A, axis=0, dtype=np.float64)  # without a float64 copy of A

    def cast(A, dtype):
        return np.asarray(A, dtype=dtype)

    def sum_blocks(first, parts):
        return np.sum(parts, axis=0)

    def full(like, shape, value, dtype=None):
        return np.full(shape, value, dtype=np.float64 if dtype is None else dtype)

    def eye(like, k, dtype=None):
        return np.eye(k, dtype=like.dtype if dtype is None else dtype)

    def contiguous(A, dtype=None):
        return np.ascontiguousarray(A, dtype=dtype)

    def blas_dot(A, V):
        """``A @ V`` in A's dtype (numpy: through scipy's BLAS, without copying A).

        numpy and scipy ship separate OpenBLAS builds whose idle threads spin for
        a while after each call; alternating the two in a loop halves the speed
        of both (benchmarks/bench_operator.py). Every product in the solvers'
        loops therefore goes through scipy's BLAS, as symv must.
        """
        V = np.asarray(V, dtype=A.dtype)
        transposed = not A.flags.f_contiguous
        At = A.T if transposed else A  # Fortran order either way: no copy
        if not At.flags.f_contiguous:
            At, transposed = np.asfortranarray(A), False
        if V.ndim == 1:
            return scipy.linalg.get_blas_funcs("gemv", (At,))(1.0, At, V, trans=int(transposed))
        return scipy.linalg.get_blas_funcs("gemm", (At,))(1.0, At, V, trans_a=int(transposed))

    def dot64(block, V, dtype, gemv_max_columns=0):
        """``block @ V`` computed in the numpy ``dtype`` (V is cast to it), returned in float64."""
        # up to gemv_max_columns columns run one GEMV each: OpenBLAS's GEMM is slower on thin
        # right-hand sides (bench_operator.py)
        Vc = V.astype(dtype, copy=False)
        if Vc.ndim == 2 and Vc.shape[1] <= gemv_max_columns:
            return np.column_stack([blas_dot(block, Vc[:, j]) for j in range(Vc.shape[1])]).astype(np.float64)
        return np.asarray(blas_dot(block, Vc), dtype=np.float64)

    def eigh(M):
        return scipy.linalg.eigh(M)

    def top_eigenpairs(M, q):
        # LAPACK's MRRR driver can fail on clustered spectra (a kernel near the identity), where
        # bisection (evx) and then the full decomposition still succeed
        size = M.shape[0]
        subset = [size - q - 1, size - 1]
        attempts = [("evr", subset), ("evx", subset), ("evd", None), ("ev", None)]
        for driver, wanted in attempts:
            try:
                lam, U = scipy.linalg.eigh(M, subset_by_index=wanted, driver=driver)
            except (np.linalg.LinAlgError, ValueError):
                if driver == attempts[-1][0]:
                    raise
                continue
            if wanted is None:  # a full decomposition: keep the top q + 1
                lam, U = lam[size - q - 1 :], U[:, size - q - 1 :]
            return lam[::-1], U[:, ::-1]

    def add_to_diagonal(M, d):
        M[np.diag_indices_from(M)] += d
        return M

    def solve_psd(M, v):
        """``M^-1 v`` for a symmetric PSD M by Cholesky (numpy: M's upper triangle); a least-squares
        solution where M is singular (the softmax's intercepts: a class no row gives a probability)."""
        try:
            factor = scipy.linalg.cho_factor(M, lower=False, check_finite=False)
            return scipy.linalg.cho_solve(factor, v, check_finite=False)
        except scipy.linalg.LinAlgError:
            return scipy.linalg.lstsq(M, v, cond=np.finfo(float).eps * M.shape[0], check_finite=False)[0]

    def gram(A, alpha=1.0, trans=False):
        if A.flags.c_contiguous and not A.flags.f_contiguous:  # BLAS reads A' in place: no Fortran copy of A
            return scipy.linalg.blas.dsyrk(alpha, A.T, trans=int(not trans), lower=0)
        return scipy.linalg.blas.dsyrk(alpha, A, trans=int(trans), lower=0)  # half a product's flops

    def scaled_triangle_gram(T, s):
        """``T diag(s)^2 T'`` (upper T) in one new matrix's upper triangle, LAPACK's lauum in place."""
        G = np.ascontiguousarray(T * s[None, :])  # upper; G.T is Fortran-ordered and lower
        scipy.linalg.lapack.dlauum(G.T, lower=1, overwrite_c=1)  # L'L of L = G': G G' in G's upper triangle
        return G

    def minus_outer(M, v):
        if M.flags.c_contiguous:  # in place, on the upper triangle: M.T is Fortran-ordered and lower
            scipy.linalg.blas.dsyr(-1.0, v, lower=1, a=M.T, overwrite_a=1)
            return M
        return scipy.linalg.blas.dsyr(-1.0, v, lower=0, a=M.copy(order="F"), overwrite_a=1)

    def triangular_dot(T, V, trans=False):
        """``T V`` (``T' V`` with trans) for an upper triangular T (numpy: BLAS's trmm, half a product's flops)."""
        lower = not T.flags.f_contiguous  # a C-ordered T is read as its Fortran-ordered, lower transpose
        a = T.T if lower else np.asfortranarray(T)
        out = scipy.linalg.blas.dtrmm(1.0, a, np.asarray(V, dtype=np.float64).reshape(V.shape[0], -1),
                                      lower=int(lower), trans_a=int(trans != lower))
        return out.reshape(V.shape)

    def cho_solve(R, V):
        return scipy.linalg.cho_solve((R, False), V, check_finite=False)

    def fortran(A):
        return np.asfortranarray(A)

    def triangular_solver(T):
        """``V, trans -> T^-1 V`` (``T^-T V``) for an upper triangular T (numpy: LAPACK's trtrs per call)."""
        return lambda V, trans=False: _Host.solve_triangular(T, V, trans=trans)

    def gaussian_product(X):
        """A fused ``(A, B, |a|^2, |b|^2, V) -> exp(-|a_i - b_j|^2) @ V`` for arrays like X, or None (numpy:
        the operator's tuned blocks)."""
        return None

    def upper_inverse(T):
        """``T^-1`` of an upper triangular T (numpy: LAPACK's trtri)."""
        return scipy.linalg.lapack.dtrtri(T, lower=0)[0]

    def triangular_inverses(R, stack, c, k):
        """Column c's factor's triangular inverse, in ``stack`` (numpy: one (k, m, m) array)."""
        if stack is None or stack.shape != (k,) + R.shape:
            stack = np.empty((k,) + R.shape)
        stack[c] = _Host.upper_inverse(R)
        return stack

    def stacked_cho_solve(U, R_inv):
        """``R_c^-1 R_c^-T U[:, c]`` for every column c (numpy: two batched products)."""
        return np.matmul(R_inv, np.matmul(R_inv.transpose(0, 2, 1), U.T[:, :, None]))[:, :, 0].T

    class GrowingFactor:
        """One preallocated Fortran-ordered array that BLAS updates in place."""

        def __init__(self, diag, n, rank):
            self.k, self.store = 0, np.empty((n, rank), order="F")

        @property
        def F(self):
            return self.store[:, : self.k]

        def residual(self, G, S):
            if not self.k:
                return G
            F = self.F
            return scipy.linalg.blas.dgemm(-1.0, F, F[S], beta=1.0, c=G, trans_b=1, overwrite_c=1)

        def append(self, G, keep, R):
            r = len(keep)
            Fk = self.store[:, self.k : self.k + r]  # a Fortran-ordered view: trsm works in place
            Fk[...] = G.T[keep].T  # gather rows of the C-ordered transpose: fast
            scipy.linalg.blas.dtrsm(1.0, R, Fk, side=1, lower=0, overwrite_b=1)
            self.k += r
            return np.einsum("ij,ij->i", Fk, Fk)


# ------------------------------------------------------------------ the primitives' generic bodies


class _Generic:
    """Any other array API namespace: the standard's functions, on the arrays' device."""

    def solve_triangular(T, B, *, upper=True, trans=False):
        # the standard's general solve: O(m^3) rather than O(m^2 k), exact for a triangular T, and only
        # reached by namespaces (such as array-api-strict) that have nothing better
        return xp_of(T).linalg.solve(T.T if trans else T, B)

    def memory_budget(device, default):
        return default

    def gaussian_product(X):
        return None

    def factor_in_place(M, shift=0.0):
        xp = xp_of(M)
        S = M + M.T  # both triangles are read: (M + M') / 2 + shift I, one m x m temporary at a time
        S /= 2
        shifted = eye(S, S.shape[0])
        shifted *= shift
        S += shifted
        del shifted
        try:
            L = xp.linalg.cholesky(S)
        except Exception:  # noqa: BLE001 - LinAlgError, torch's RuntimeError subclass, ...
            return None
        return L.T if bool(xp.all(xp.isfinite(L))) else None

    def factor_stack(S):
        """``(U, ok)``: upper factors of a stack of SPD matrices (symmetrised), and which succeeded."""
        xp = xp_of(S)
        try:
            L = xp.linalg.cholesky((S + xp.permute_dims(S, (0, 2, 1))) / 2)
        except Exception:  # noqa: BLE001 - one failure fails the stack here: each takes the ladder
            return S, xp.zeros(S.shape[0], dtype=xp.bool, device=S.device)
        return xp.permute_dims(L, (0, 2, 1)), xp.all(xp.isfinite(xp.linalg.diagonal(L)), axis=-1)

    def scale_in_place(M, s):
        return s[:, None] * M * s[None, :]

    def take_rows(A, idx):
        return xp_of(A).take(A, _index(idx, A), axis=0)

    def take_columns(A, idx):
        return xp_of(A).take(A, _index(idx, A), axis=1)

    def add_at_rows(A, idx, V):
        # the standard has no integer-array assignment: array-api-extra's ``at`` does the scatter
        # in each namespace's own way
        from sklearn.externals.array_api_extra import at

        index = _index(idx, A)
        return at(A, (index, slice(None)) if A.ndim == 2 else index).add(V)

    def coldot(R, Z):
        return xp_of(R).sum(R * Z, axis=0)

    def colnorm(R):
        xp = xp_of(R)
        return xp.sqrt(xp.sum(R * R, axis=0))

    def sum_of(A, B=None, w=None):
        P = A if B is None else A * B
        return xp_of(A).sum(P if w is None else w[:, None] * P)

    def to_floats(first, scalars):
        xp = xp_of(first)
        return [float(v) for v in to_numpy(xp.stack([xp.reshape(s, ()) for s in scalars]))]

    def outer(u, v):
        return u[:, None] * v[None, :]

    def row_dot(A, B):
        return xp_of(A).sum(A * B, axis=1)

    def weighted_sum(w, Y):
        return w @ Y

    def zeros(like, shape):
        xp = xp_of(like)
        return xp.zeros(shape, dtype=xp.float64, device=like.device)

    def block_of(A, rows, cols):
        return take_columns(take_rows(A, rows), cols)

    def rows_of(A, idx):
        return A[idx, ...] if isinstance(idx, slice) else take_rows(A, idx)

    def copy(A):
        return xp_of(A).asarray(A, copy=True)

    def expit(F):
        xp = xp_of(F)
        E = xp.exp(-xp.abs(F))  # at most 1: no overflow (numpy-backed namespaces would warn of one)
        return xp.where(F >= 0, 1.0 / (1.0 + E), E / (1.0 + E))

    def log_expit(F):
        xp = xp_of(F)
        return -xp.logaddexp(xp.zeros_like(F), -F)

    def logsumexp(F, axis, keepdims=False):
        xp = xp_of(F)
        top = xp.max(F, axis=axis, keepdims=True)
        out = top + xp.log(xp.sum(xp.exp(F - top), axis=axis, keepdims=True))
        return out if keepdims else xp.squeeze(out, axis=axis)

    def softmax(F, axis):
        xp = xp_of(F)
        E = xp.exp(F - xp.max(F, axis=axis, keepdims=True))
        return E / xp.sum(E, axis=axis, keepdims=True)

    def exp_in_place(A):
        return xp_of(A).exp(A)

    def diagonal(A):
        return xp_of(A).linalg.diagonal(A)

    def concat(first, arrays, axis=0):
        return xp_of(first).concat(arrays, axis=axis)

    def clip_min(A, low):
        return xp_of(A).clip(A, min=float(low))

    def as_float64(A, copy=False):
        xp = xp_of(A)
        return xp.astype(A, xp.float64, copy=copy)

    def column_means(A):
        return xp_of(A).mean(as_float64(A), axis=0)

    def cast(A, dtype):
        xp = xp_of(A)
        return xp.astype(A, float_dtype(xp, dtype), copy=False)  # no copy where A has the dtype

    def sum_blocks(first, parts):
        return functools.reduce(lambda a, b: a + b, parts)

    def full(like, shape, value, dtype=None):
        xp = xp_of(like)
        return xp.full(shape, value, dtype=xp.float64 if dtype is None else dtype, device=like.device)

    def eye(like, k, dtype=None):
        return xp_of(like).eye(k, dtype=like.dtype if dtype is None else dtype, device=like.device)

    def contiguous(A, dtype=None):
        return A if dtype is None else cast(A, dtype)

    def blas_dot(A, V):
        return A @ xp_of(A).astype(V, A.dtype)

    def dot64(block, V, dtype, gemv_max_columns=0):
        xp = xp_of(block)
        return xp.astype(block @ xp.astype(V, float_dtype(xp, dtype)), xp.float64)

    def eigh(M):
        return xp_of(M).linalg.eigh(M)

    def top_eigenpairs(M, q):
        xp, size = xp_of(M), M.shape[0]
        lam, U = xp.linalg.eigh(M)
        lam, U = lam[size - q - 1 :], U[:, size - q - 1 :]
        return xp.flip(lam), xp.flip(U, axis=1)

    def add_to_diagonal(M, d):
        identity = eye(M, M.shape[0])
        return M + (identity * d[None, :] if getattr(d, "ndim", 0) else float(d) * identity)

    def solve_psd(M, v):
        xp = xp_of(M)
        try:  # a failed factorization raises in most namespaces and returns NaN in others (CuPy)
            U = xp.linalg.cholesky(M).T
            if bool(xp.all(xp.isfinite(U))):
                return solve_triangular(U, solve_triangular(U, v, upper=True, trans=True), upper=True)
        except Exception:  # noqa: BLE001 - LinAlgError, torch's RuntimeError subclass, ...
            pass
        return xp.linalg.pinv(M, rtol=float(np.finfo(float).eps) * M.shape[0]) @ v

    def gram(A, alpha=1.0, trans=False):
        product = A.T @ A if trans else A @ A.T
        return product if alpha == 1.0 else alpha * product

    def scaled_triangle_gram(T, s):
        # by row blocks: beside T and the result, one block (a scaled copy of T would be an m x m matrix more)
        xp, m, d = xp_of(T), T.shape[0], s * s
        M = xp.empty((m, m), dtype=T.dtype, device=T.device)
        for rows in _row_blocks(m):
            M[rows, :] = (T[rows, :] * d[None, :]) @ T.T
        return M

    def minus_outer(M, v):
        for rows in _row_blocks(M.shape[0]):  # in M (the caller's own), without an m x m outer product
            M[rows, :] -= v[rows, None] * v[None, :]
        return M

    def triangular_dot(T, V, trans=False):
        if not is_float32(T):
            return (T.T if trans else T) @ V
        # a float32 factor (many centers) read in float64 a row block at a time: the objective's and the
        # gradient's products keep float64's accuracy without a float64 copy of T
        V = as_float64(V)
        if trans:
            return sum_blocks([as_float64(T[rows, :]).T @ V[rows, ...] for rows in _row_blocks(T.shape[0])])
        return concat([as_float64(T[rows, :]) @ V for rows in _row_blocks(T.shape[0])], axis=0)

    def cho_solve(R, V):
        return solve_triangular(R, solve_triangular(R, V, upper=True, trans=True), upper=True)

    def fortran(A):
        return A

    def triangular_solver(T):
        # T's explicit inverse, once: each solve is then one product, not a latency-bound triangular solve. Past
        # EXPLICIT_INVERSE_ROWS a solve reads as many bytes as that product, and the inverse would double the memory.
        if not keeps_inverses(T.shape[0]):  # (a float32 T, of many centers, solves in float32)
            dtype = np.float32 if is_float32(T) else np.float64
            return lambda V, trans=False: as_float64(solve_triangular(T, cast(V, dtype), trans=trans))
        T_inv = upper_inverse(T)
        return lambda V, trans=False: (T_inv.T if trans else T_inv) @ V

    def upper_inverse(T):
        return solve_triangular(T, eye(T, T.shape[0]))

    def triangular_inverses(R, stack, c, k):
        if stack is None or tuple(stack.shape) != (k,) + tuple(R.shape):
            stack = xp_of(R).zeros((k,) + tuple(R.shape), dtype=R.dtype, device=R.device)
        stack[c, ...] = upper_inverse(R)
        return stack

    def stacked_cho_solve(U, R_inv):
        # two batched products for all columns: a product per column was two launches per class
        # (letter's 26 classes: 34,000 launches in a logistic fit on a GPU)
        xp = xp_of(U)
        inner = xp.matmul(xp.permute_dims(R_inv, (0, 2, 1)), U.T[:, :, None])
        return xp.matmul(R_inv, inner)[:, :, 0].T

    class GrowingFactor:
        """A list of column blocks."""

        def __init__(self, diag, n, rank):
            self.xp, self.k, self.n, self.store = xp_of(diag), 0, n, []
            self.device = getattr(diag, "device", None)

        @property
        def F(self):
            xp = self.xp
            return xp.concat(self.store, axis=1) if self.store else xp.zeros((self.n, 0), dtype=xp.float64,
                                                                               device=self.device)

        def residual(self, G, S):
            if not self.k:
                return G
            F = self.F
            return G - F @ take_rows(F, S).T

        def append(self, G, keep, R):
            R = self.xp.asarray(R, device=G.device)
            # Fk R = G[:, keep]: Fk' = R^-T G[:, keep]'
            Fk = solve_triangular(R, take_columns(G, keep).T, upper=True, trans=True).T
            self.store.append(Fk)
            self.k += len(keep)
            return np.asarray(to_numpy(self.xp.sum(Fk * Fk, axis=1)))


class _Torch(_Generic):
    def gaussian_product(X):
        # Triton's fused kernel, for float32 on CUDA only
        import torch

        if X.device.type != "cuda" or X.dtype != torch.float32:
            return None
        from . import _triton

        return _triton.gaussian_product if _triton.triton is not None and _triton.ENABLED else None

    def solve_triangular(T, B, *, upper=True, trans=False):
        import torch

        return torch.linalg.solve_triangular(T.T if trans else T, B, upper=upper != trans)

    def memory_budget(device, default):
        if getattr(device, "type", None) != "cuda":
            return default
        import torch

        return int(torch.cuda.mem_get_info(device)[0] * DEVICE_BUDGET_FRACTION)

    def factor_in_place(M, shift=0.0):
        # in M's own memory, as LAPACK's on the host: potrf on M' (column-major, torch's layout, no copy), whose
        # lower factor is M's upper one. A NaN or inf anywhere in a factor reaches a later diagonal entry.
        M = M if M.is_contiguous() else M.contiguous()
        M.diagonal().add_(shift)
        return M if bool(_Torch.factor_stack(M[None])[1][0]) else None  # a stack of one, in M: one read

    def factor_stack(S):
        import torch

        S = S.contiguous()  # each matrix factored in its own memory, as factor_in_place's
        info = torch.empty(S.shape[0], dtype=torch.int32, device=S.device)
        torch.linalg.cholesky_ex(S.mT, out=(S.mT, info))
        return S, (info == 0) & torch.isfinite(torch.diagonal(S, dim1=-2, dim2=-1)).all(dim=-1)

    def upper_inverse(T):
        # solved in the identity's own memory, column-major (torch's layout for it: no copy): one m x m
        # matrix beside T at the peak, not two
        import torch

        E = torch.eye(T.shape[0], dtype=T.dtype, device=T.device).mT
        return torch.linalg.solve_triangular(T, E, upper=True, out=E)


class _CuPy(_Generic):
    def solve_triangular(T, B, *, upper=True, trans=False):
        from cupyx.scipy.linalg import solve_triangular as cupy_solve_triangular

        return cupy_solve_triangular(T.T if trans else T, B, lower=upper == trans)

    def memory_budget(device, default):
        import cupy

        with cupy.cuda.Device(device.id if hasattr(device, "id") else device):
            return int(cupy.cuda.runtime.memGetInfo()[0] * DEVICE_BUDGET_FRACTION)


class _Strict(_Generic):
    def add_at_rows(A, idx, V):
        # array-api-strict allows no integer-array index beside a slice: a one-hot product
        # (n x len(idx)), for that testing namespace only
        xp, index = xp_of(A), _index(idx, A)
        return A + xp.astype(xp.arange(A.shape[0], device=A.device)[:, None] == index[None, :], A.dtype) @ V


def _library(xp):
    """The generic bodies for the namespace ``xp``, with its library's own where it has better."""
    from sklearn.externals.array_api_compat import (
        is_array_api_strict_namespace, is_cupy_namespace, is_torch_namespace,
    )

    for is_library, bodies in ((is_torch_namespace, _Torch), (is_cupy_namespace, _CuPy),
                               (is_array_api_strict_namespace, _Strict)):
        if is_library(xp):
            return bodies
    return _Generic


_BODIES = {}  # array type -> its library's bodies, found on the type's first call


def _dispatched(name):
    """The primitive ``name``: ``_Host``'s body where its first argument is on the host, else its library's."""
    host = getattr(_Host, name)

    def primitive(A, *args, **kwargs):
        if _is_host(A):
            return host(A, *args, **kwargs)
        bodies = _BODIES.get(type(A)) or _BODIES.setdefault(type(A), _library(namespace(A)[0]))
        return getattr(bodies, name)(A, *args, **kwargs)

    primitive.__name__ = primitive.__qualname__ = name
    primitive.__doc__ = host.__doc__ or getattr(_Generic, name).__doc__
    return primitive


solve_triangular = _dispatched("solve_triangular")  # T^-1 B (T^-T B with trans), T triangular
factor_in_place = _dispatched("factor_in_place")  # upper Cholesky factor of an SPD M, or None; may overwrite M
scale_in_place = _dispatched("scale_in_place")  # diag(s) M diag(s); numpy in place
take_rows = _dispatched("take_rows")  # A[idx] for a numpy index array
take_columns = _dispatched("take_columns")  # A[:, idx] for a numpy index array
add_at_rows = _dispatched("add_at_rows")  # A[idx] += V for distinct rows; returns A (in place where allowed)
coldot = _dispatched("coldot")  # sum_i R_ij Z_ij per column j
colnorm = _dispatched("colnorm")  # each column's Euclidean norm
sum_of = _dispatched("sum_of")  # sum_ij w_i A_ij B_ij (B and w optional), a 0-d array on A's device
outer_product = _dispatched("outer")
row_dot = _dispatched("row_dot")  # sum_j A_ij B_ij per row i
weighted_sum = _dispatched("weighted_sum")  # sum_i w_i Y_i
zeros_as = _dispatched("zeros")  # float64 zeros in like's namespace, on its device
block_of = _dispatched("block_of")  # A[np.ix_(rows, cols)] for numpy index arrays
rows_of = _dispatched("rows_of")  # A[idx] for a slice or a numpy index array (1-d or 2-d A; or sparse)
copy_array = _dispatched("copy")
expit = _dispatched("expit")  # the logistic function (numpy: scipy's)
log_expit = _dispatched("log_expit")  # log(expit(F)) without overflow (numpy: scipy's)
logsumexp = _dispatched("logsumexp")
softmax = _dispatched("softmax")
exp_in_place = _dispatched("exp_in_place")  # exp(A), written into A where the namespace allows
diagonal = _dispatched("diagonal")  # the main diagonal of a 2-d array
clip_min = _dispatched("clip_min")  # max(A, low) elementwise, for a float low
as_float64 = _dispatched("as_float64")  # A in float64: a copy where asked, else none where it already is
column_means = _dispatched("column_means")  # the float64 mean of each column
cast = _dispatched("cast")  # A in the numpy dtype (float32 or float64), or its namespace's equivalent
full_as = _dispatched("full")  # an array of value in like's namespace, on its device (float64 by default)
eye = _dispatched("eye")  # the k x k identity in like's namespace (like's dtype by default)
contiguous = _dispatched("contiguous")  # C order where the namespace has memory orders, cast where asked
eigh = _dispatched("eigh")  # all eigenpairs of a symmetric M, ascending
top_eigenpairs = _dispatched("top_eigenpairs")  # the q + 1 largest eigenpairs of a symmetric M, largest first
add_to_diagonal = _dispatched("add_to_diagonal")  # M + diag(d), d a vector or a scalar (numpy: in place)
gram = _dispatched("gram")  # alpha A A' (alpha A'A with trans), at least its upper triangle
scaled_triangle_gram = _dispatched("scaled_triangle_gram")  # T diag(s)^2 T', at least its upper triangle
minus_outer = _dispatched("minus_outer")  # M - v v', at least on the upper triangle, in M where the namespace allows
triangular_dot = _dispatched("triangular_dot")  # T V (T' V with trans), T upper triangular
cho_solve = _dispatched("cho_solve")  # (R'R)^-1 V for an upper Cholesky factor R
fortran = _dispatched("fortran")  # Fortran order where the namespace has memory orders
blas_dot = _dispatched("blas_dot")  # A @ V in A's dtype (numpy: scipy's BLAS, no copy of A)
dot64 = _dispatched("dot64")  # block @ V in a given dtype, returned in float64
solve_psd = _dispatched("solve_psd")  # M^-1 v for a symmetric PSD M (least squares where singular)
GrowingFactor = _dispatched("GrowingFactor")  # a pivoted Cholesky's factor F (n x up to rank), column blocks
gaussian_product = _dispatched("gaussian_product")  # a fused exp(-|a - b|^2) @ V for arrays like X, or None
triangular_solver = _dispatched("triangular_solver")  # V, trans -> T^-1 V (T^-T V), T upper triangular
upper_inverse = _dispatched("upper_inverse")  # T^-1 for an upper triangular T
_triangular_inverses, _stacked_cho_solve = _dispatched("triangular_inverses"), _dispatched("stacked_cho_solve")
_concat, _sum_blocks = _dispatched("concat"), _dispatched("sum_blocks")
_to_floats = _dispatched("to_floats")


def scalar_sum(A, B=None, w=None):
    """``sum_ij w_i A_ij B_ij`` (B and w optional) as a Python float: a read from A's device."""
    return float(sum_of(A, B, w))


def to_floats(*scalars):
    """0-d arrays (of one namespace) as Python floats, in one read from their device."""
    return _to_floats(scalars[0], scalars)


def concat(arrays, axis=0):
    return _concat(arrays[0], arrays, axis=axis)


def sum_blocks(parts):
    """The sum of partial products (one per row block), added in order."""
    return _sum_blocks(parts[0], parts)


def all_finite(A):
    """Whether no entry of A is inf or NaN."""
    xp = xp_of(A)
    return bool(xp.all(xp.isfinite(A)))


def cholesky(M, what="matrix", jitter=0.0):
    """Upper Cholesky factor of ``M + jitter I`` (M PSD), retried with ``JITTER_LADDER``'s extra jitter.

    numpy reads only M's upper triangle (LAPACK potrf, on a copy; single-threaded BLAS above
    ``THREADED_LAPACK_MAX``); other namespaces factor ``(M + M') / 2``, where a failed factorization
    raises in most and returns NaN in others (CuPy): both count as failure.
    """
    # where the factorization overwrites its input (numpy's potrf, torch's shift), it factors copies
    if on_host(M):
        return cholesky_in_place(lambda: np.array(M, dtype=np.float64, order="K"), what, jitter)[0]
    return cholesky_in_place(lambda: copy_array(M) if factors_in_place(M) else M, what, jitter)[0]


_TINY = float(np.finfo(float).tiny)


def cholesky_many(Ms, what="matrix"):
    """``[cholesky(M, what) for M in Ms]`` for equally shaped matrices; off the host, the stack's factorization
    and one read of which succeeded (each read waits for the device), the others along the jitter ladder."""
    if not Ms or on_host(Ms[0]):
        return [cholesky(M, what) for M in Ms]
    xp = xp_of(Ms[0])
    factors, ok = _library(xp).factor_stack(xp.stack(Ms))
    ok = np.asarray(to_numpy(ok), dtype=bool)
    return [factors[i, ...] if ok[i] else cholesky(M, what) for i, M in enumerate(Ms)]


def cholesky_in_place(build, what="matrix", jitter=0.0, M=None):
    """``(U, shift)``: the upper Cholesky factor of ``build() + shift I``, in build()'s memory where the
    namespace allows (numpy), and the shift that factored: ``jitter``, raised along ``JITTER_LADDER``.

    A failed factorization has overwritten the matrix: each retry builds it anew, so no copy is kept.
    ``M``: build()'s first result where the caller has it already.
    """
    M = build() if M is None else M
    trace = xp_of(M).sum(diagonal(M))  # before a factorization overwrites M; read (a wait) where a rung needs it
    for k, extra in enumerate(JITTER_LADDER):
        shift = float(jitter) + (extra * max(float(trace) / max(M.shape[0], 1), _TINY) if extra else 0.0)
        U = factor_in_place(M if k == 0 else build(), shift)
        if U is not None:
            return U, shift
    raise ValueError(
        f"The {what} is numerically singular even with jitter; the kernel may be "
        "degenerate on this data (duplicate points?). Increase alpha."
    )


class CholeskyStack:
    """One upper Cholesky factor per column, ``G_c = R_c' R_c``: ``solve(U)[:, c] = G_c^-1 U[:, c]``, each by
    two products with the factor's kept triangular inverse (numpy: batched).
    """

    def __init__(self, k):
        self.R, self.inverses = [None] * k, None

    def set(self, c, R):
        self.R[c] = R
        self.inverses = _triangular_inverses(R, self.inverses, c, len(self.R))

    def solve(self, U):
        return _stacked_cho_solve(U, self.inverses)
