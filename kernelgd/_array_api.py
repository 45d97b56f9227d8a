"""Array namespaces: which one an input lives in, and the few functions the standard lacks.

The estimators follow scikit-learn's array API convention: under
``sklearn.config_context(array_api_dispatch=True)`` an input from torch, CuPy
or any array API library is computed on in its own namespace and device, and
fitted attributes and outputs stay there. Otherwise (and for numpy inputs)
everything is numpy, on the code paths tuned for it (scipy's BLAS, the thread
pool of :mod:`kernelgd._operator`).

The array API standard has no triangular solve, no pivoted Cholesky and no
scatter-add; each gets one small fallback here, documented where it is.
"""

import functools
from contextlib import contextmanager, nullcontext

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.linalg.lapack
import scipy.special
import scipy.sparse as sp
from sklearn.utils._array_api import _is_numpy_namespace, get_namespace_and_device
from threadpoolctl import ThreadpoolController

try:  # scikit-learn >= 1.8, which also vendors array-api-compat and array-api-extra
    from sklearn.utils._array_api import move_to
except ImportError:  # pragma: no cover - older scikit-learn: numpy inputs only
    move_to = None


def namespace(*arrays):
    """``(xp, device)`` of the arrays; ``(numpy, None)`` for numpy inputs or without dispatch.

    numpy inputs get the numpy module itself, so the numpy code paths are
    exactly those of a fit without array API dispatch.
    """
    arrays = [a for a in arrays if a is not None]
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
    """``(xp, device, *arrays)``: X's namespace and device, and the other arrays moved there.

    scikit-learn's rule for array API inputs: everything follows X (y or
    sample_weight of another namespace or device are moved to X's). Without
    array API dispatch nothing moves: the inputs are converted to numpy as usual.
    """
    from sklearn import get_config

    if sp.issparse(X) or not get_config()["array_api_dispatch"]:
        return (np, None, *arrays)
    xp, device = namespace(X)
    if move_to is None:  # pragma: no cover - older scikit-learn: numpy X (namespace raised otherwise)
        return (xp, device, *arrays)
    from sklearn.externals.array_api_compat import is_array_api_obj

    moved = [
        move_to(a, xp=xp, device=device if xp is not np else "cpu")
        if not isinstance(a, np.ndarray) and is_array_api_obj(a) or _numeric(a) and xp is not np
        else a
        for a in arrays
    ]
    return (xp, device, *moved)


def _numeric(a):
    """A numpy array of numbers (string labels stay numpy: no other namespace holds them)."""
    return isinstance(a, np.ndarray) and a.dtype.kind in "biufc"


def is_numpy(xp):
    return xp is np


def to_numpy(array):
    """A numpy copy of an array of any namespace (host memory)."""
    if isinstance(array, np.ndarray):
        return array
    return move_to(array, xp=np, device="cpu")


def from_numpy(array, xp, device):
    """A numpy array as an array of ``xp`` on ``device``."""
    if is_numpy(xp):
        return np.asarray(array)
    return xp.asarray(np.ascontiguousarray(array), device=device)


def float_dtype(xp, name):
    """``xp.float32`` or ``xp.float64`` from a numpy dtype, type or name."""
    return xp.float32 if np.dtype(name) == np.float32 else xp.float64


def eps(xp, dtype):
    return float(xp.finfo(dtype).eps)


def _torch(xp):
    from sklearn.externals.array_api_compat import is_torch_namespace

    if is_torch_namespace(xp):
        import torch

        return torch
    return None


def _cupy(xp):
    from sklearn.externals.array_api_compat import is_cupy_namespace

    return is_cupy_namespace(xp)


def solve_triangular(xp, T, B, *, upper=True, trans=False):
    """``T^-1 B`` (``T^-T B`` with trans) for a triangular T, in T's namespace.

    numpy (scipy's LAPACK trtrs), torch and CuPy have their own triangular
    solvers. Elsewhere the fallback is the standard's general ``linalg.solve``:
    O(m^3) rather than O(m^2 k), exact for a triangular T, and only reached
    by namespaces (such as array-api-strict) that have nothing better.
    """
    if xp is np:
        from scipy.linalg import solve_triangular as scipy_solve_triangular

        return scipy_solve_triangular(T, B, trans=1 if trans else 0, lower=not upper, check_finite=False)
    if trans:
        T, upper = T.T, not upper
    torch = _torch(xp)
    if torch is not None:
        return torch.linalg.solve_triangular(T, B, upper=upper)
    if _cupy(xp):
        from cupyx.scipy.linalg import solve_triangular as cupy_solve_triangular

        return cupy_solve_triangular(T, B, lower=not upper)
    return xp.linalg.solve(T, B)


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


def cholesky(M, what="matrix", jitter=0.0):
    """Upper Cholesky factor of ``M + jitter I`` (M PSD), retried with ``JITTER_LADDER``'s extra jitter.

    numpy reads only M's upper triangle (LAPACK potrf "U", on a copy; single-threaded BLAS above
    ``THREADED_LAPACK_MAX``); other namespaces factor ``(M + M') / 2``, where a failed factorization
    raises in most and returns NaN in others (CuPy): both count as failure.
    """
    m, jitter = M.shape[0], float(jitter)  # a 0-d array of another namespace would not add to M's
    if isinstance(M, np.ndarray):
        scale = max(np.trace(M) / max(m, 1), np.finfo(float).tiny)
        attempt = _numpy_upper_factor
    else:
        xp = xp_of(M)
        M = (M + M.T) / 2
        scale = max(float(xp.sum(xp.linalg.diagonal(M))) / max(m, 1), float(np.finfo(np.float64).tiny))
        attempt = _array_api_upper_factor
    guard = single_threaded_blas() if isinstance(M, np.ndarray) and m > THREADED_LAPACK_MAX else nullcontext()
    with guard:
        for extra in JITTER_LADDER:
            U = attempt(M, jitter + extra * scale)
            if U is not None:
                return U
    raise ValueError(
        f"The {what} is numerically singular even with jitter; the kernel may be "
        "degenerate on this data (duplicate points?). Increase alpha."
    )


def _numpy_upper_factor(M, shift):
    A = np.array(M, dtype=np.float64, order="K")  # potrf works in place on this copy
    A.flat[:: A.shape[0] + 1] += shift  # the diagonal, without an m x m identity
    try:
        if A.flags.f_contiguous:
            return scipy.linalg.cholesky(A, lower=False, overwrite_a=True, check_finite=False)
        # C order: A.T is Fortran-ordered, and its lower triangle is A's upper
        return scipy.linalg.cholesky(A.T, lower=True, overwrite_a=True, check_finite=False).T
    except scipy.linalg.LinAlgError:
        return None


def _array_api_upper_factor(M, shift):
    xp = xp_of(M)
    try:
        L = xp.linalg.cholesky(M + shift * xp.eye(M.shape[0], dtype=M.dtype, device=M.device))
    except Exception:  # noqa: BLE001 - LinAlgError, torch's RuntimeError subclass, ...
        return None
    return L.T if bool(xp.all(xp.isfinite(L))) else None


def factor_in_place(M):
    """Upper Cholesky factor of the symmetric positive definite M (no jitter), or None where it fails;
    numpy overwrites M (LAPACK potrf, single-threaded: one n x n array, at any n)."""
    if not isinstance(M, np.ndarray):
        return _array_api_upper_factor((M + M.T) / 2, 0.0)
    with single_threaded_blas():
        try:  # M' = M in C order is M in Fortran order: potrf's lower factor of M.T is U'
            return scipy.linalg.cholesky(M.T, lower=True, overwrite_a=True, check_finite=False).T
        except scipy.linalg.LinAlgError:
            return None


def scale_in_place(M, s):
    """``diag(s) M diag(s)`` (numpy: in place)."""
    if isinstance(M, np.ndarray):
        M *= s[:, None]
        M *= s[None, :]
        return M
    return s[:, None] * M * s[None, :]


def pivoted_cholesky(G):
    """LAPACK's pivoted Cholesky (pstrf) of a small PSD block, on the host.

    The standard has no pivoted factorization; the blocks are at most a
    randomly pivoted Cholesky round's size (100 x 100), so the host round
    trip costs microseconds. Returns ``(R, perm, rank)`` with ``perm`` 0-based.
    """
    from scipy.linalg.lapack import dpstrf

    R, perm, rank, _ = dpstrf(np.asarray(to_numpy(G), dtype=np.float64), lower=0)
    return np.triu(R), perm - 1, int(rank)  # pstrf leaves the input below the diagonal


def take_rows(xp, A, idx):
    """``A[idx]`` for a numpy index array (array-api-strict indexes with its own arrays only)."""
    if is_numpy(xp):
        return A[idx]
    return xp.take(A, xp.asarray(np.asarray(idx, dtype=np.int64), device=A.device), axis=0)


def take_columns(xp, A, idx):
    """``A[:, idx]`` for a numpy index array."""
    if is_numpy(xp):
        return np.take(A, idx, axis=1)  # 2x faster than A[:, idx] on the rows of a stored K
    return xp.take(A, xp.asarray(np.asarray(idx, dtype=np.int64), device=A.device), axis=1)


def add_at_rows(xp, A, idx, V):
    """``A[idx] += V`` for distinct rows idx, returning A (in place where the namespace allows).

    The standard has no integer-array assignment: array-api-extra's ``at``
    does the scatter in each namespace's own way.
    """
    if is_numpy(xp):
        A[idx] += V
        return A
    from sklearn.externals.array_api_compat import is_array_api_strict_namespace
    from sklearn.externals.array_api_extra import at

    index = xp.asarray(np.asarray(idx, dtype=np.int64), device=A.device)
    if is_array_api_strict_namespace(xp):
        # array-api-strict allows no integer-array index beside a slice: a one-hot product
        # (n x len(idx)), for that testing namespace only
        onehot = xp.astype(xp.arange(A.shape[0], device=A.device)[:, None] == index[None, :], A.dtype)
        return A + onehot @ V
    return at(A, (index, slice(None)) if A.ndim == 2 else index).add(V)


def memory_budget(xp, device, default):
    """The memory budget for arrays on ``device``: half the free GPU memory for CUDA arrays."""
    torch = _torch(xp)
    if torch is not None and getattr(device, "type", None) == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // 2)
    if _cupy(xp):
        import cupy

        with cupy.cuda.Device(device.id if hasattr(device, "id") else device):
            free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free // 2)
    return default


def coldot(R, Z):
    """``sum_i R_ij Z_ij`` per column j (numpy: einsum, without the product's temporary)."""
    if isinstance(R, np.ndarray):
        return np.einsum("ij,ij->j", R, Z)
    return namespace(R)[0].sum(R * Z, axis=0)


def colnorm(R):
    """The Euclidean norm of every column."""
    if isinstance(R, np.ndarray):
        return np.linalg.norm(R, axis=0)
    xp = namespace(R)[0]
    return xp.sqrt(xp.sum(R * R, axis=0))


def total(A, B=None, w=None):
    """``sum_ij w_i A_ij B_ij`` (B and w optional) as a Python float."""
    if isinstance(A, np.ndarray):
        if w is None:
            return float(np.sum(A) if B is None else np.einsum("ij,ij->", A, B))
        return float(np.einsum("i,ij,ij->", w, A, A if B is None else B))
    xp = namespace(A)[0]
    P = A if B is None else A * B
    return float(xp.sum(P if w is None else w[:, None] * P))


def outer(u, v):
    if isinstance(u, np.ndarray):
        return np.outer(u, v)
    return u[:, None] * v[None, :]


def xp_of(A):
    """The namespace of A: numpy itself for numpy arrays."""
    return np if isinstance(A, np.ndarray) else namespace(A)[0]


def row_dot(A, B):
    """Each row's inner product ``sum_j A_ij B_ij`` (numpy: einsum, without the product's temporary)."""
    if isinstance(A, np.ndarray):
        return np.einsum("ij,ij->i", A, B)
    return xp_of(A).sum(A * B, axis=1)


def weighted_sum(w, Y):
    """``sum_i w_i Y_i`` (a row vector of Y's columns)."""
    if isinstance(Y, np.ndarray):
        return np.einsum("i,ij->j", w, Y)
    return w @ Y


def zeros(like, shape):
    """float64 zeros in the namespace and on the device of ``like``."""
    if isinstance(like, np.ndarray):
        return np.zeros(shape)
    xp = namespace(like)[0]
    return xp.zeros(shape, dtype=xp.float64, device=like.device)


def block_of(A, rows, cols):
    """``A[np.ix_(rows, cols)]`` for numpy index arrays, in A's namespace (a kernel matrix's sub-block)."""
    if isinstance(A, np.ndarray):
        return A[np.ix_(rows, cols)]
    xp = namespace(A)[0]
    return take_columns(xp, take_rows(xp, A, rows), cols)


def rows_of(A, idx):
    """``A[idx]`` for a slice or a numpy index array, in A's namespace (1-d or 2-d A; or scipy.sparse)."""
    if isinstance(A, np.ndarray) or sp.issparse(A):
        return A[idx]
    if isinstance(idx, slice):
        return A[idx, ...]
    return take_rows(namespace(A)[0], A, idx)


def copy(A):
    if isinstance(A, np.ndarray):
        return A.copy()
    return xp_of(A).asarray(A, copy=True)


# The logistic functions for arrays of another namespace (numpy's use scipy.special).
def expit(F):
    """The logistic function (numpy: scipy's)."""
    if isinstance(F, np.ndarray):
        return scipy.special.expit(F)
    xp = xp_of(F)
    E = xp.exp(-xp.abs(F))  # at most 1: no overflow (numpy-backed namespaces would warn of one)
    return xp.where(F >= 0, 1.0 / (1.0 + E), E / (1.0 + E))


def log_expit(F):
    """``log(expit(F))`` without overflow (numpy: scipy's)."""
    if isinstance(F, np.ndarray):
        return scipy.special.log_expit(F)
    xp = xp_of(F)
    return -xp.logaddexp(xp.zeros_like(F), -F)


def _shifted(F, axis):
    """numpy's ``F`` less its largest entry along ``axis`` (where finite: scipy's convention), and that entry."""
    top = F.max(axis=axis, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    return F - top, top


# numpy's own logsumexp and softmax: scipy's array-API wrappers cost three times the arithmetic
# on a Newton step's arrays
def logsumexp(F, axis, keepdims=False):
    if isinstance(F, np.ndarray):
        shifted, top = _shifted(F, axis)
        with np.errstate(divide="ignore"):  # a row of -inf: log(0) = -inf, as scipy gives
            out = np.log(np.exp(shifted).sum(axis=axis, keepdims=True)) + top
        return out if keepdims else np.squeeze(out, axis=axis)
    xp = xp_of(F)
    top = xp.max(F, axis=axis, keepdims=True)
    out = top + xp.log(xp.sum(xp.exp(F - top), axis=axis, keepdims=True))
    return out if keepdims else xp.squeeze(out, axis=axis)


def softmax(F, axis):
    if isinstance(F, np.ndarray):
        E = np.exp(_shifted(F, axis)[0])
        return E / E.sum(axis=axis, keepdims=True)
    xp = xp_of(F)
    E = xp.exp(F - xp.max(F, axis=axis, keepdims=True))
    return E / xp.sum(E, axis=axis, keepdims=True)


def diagonal(A):
    """The main diagonal of a 2-d array (numpy < 2 has no ``linalg.diagonal``)."""
    if isinstance(A, np.ndarray):
        return np.diagonal(A)
    return xp_of(A).linalg.diagonal(A)


# Spellings that numpy 1.x has too, for code that runs on numpy arrays as well.
def concat(arrays, axis=0):
    if isinstance(arrays[0], np.ndarray):
        return np.concatenate(arrays, axis=axis)
    return xp_of(arrays[0]).concat(arrays, axis=axis)


def clip_min(A, low):
    """``max(A, low)`` elementwise, for a float ``low``."""
    if isinstance(A, np.ndarray):
        return np.maximum(A, low)
    return xp_of(A).clip(A, min=float(low))


def as_float64(A, copy=False):
    """A in float64 in its namespace: a copy where asked, else without one where it already is."""
    if sp.issparse(A):
        return A.astype(np.float64, copy=copy)
    if isinstance(A, np.ndarray):
        return A.astype(np.float64) if copy else np.asarray(A, dtype=np.float64)
    xp = xp_of(A)
    return xp.astype(A, xp.float64, copy=copy)


def column_means(A):
    """The float64 mean of each column of A (numpy: without a float64 copy of A)."""
    if isinstance(A, np.ndarray):
        return np.mean(A, axis=0, dtype=np.float64)
    return xp_of(A).mean(as_float64(A), axis=0)


def cast(A, dtype):
    """A in the numpy ``dtype`` (float32 or float64), or its namespace's equivalent."""
    if isinstance(A, np.ndarray):
        return np.asarray(A, dtype=dtype)
    xp = xp_of(A)
    return xp.astype(A, float_dtype(xp, dtype))


def sum_blocks(parts):
    """The sum of partial products (one per row block), added in order."""
    if isinstance(parts[0], np.ndarray):
        return np.sum(parts, axis=0)
    return functools.reduce(lambda a, b: a + b, parts)


def full(like, shape, value, dtype=None):
    """An array of ``value`` in ``like``'s namespace, on its device (float64 by default)."""
    if isinstance(like, np.ndarray):
        return np.full(shape, value, dtype=np.float64 if dtype is None else dtype)
    xp = xp_of(like)
    return xp.full(shape, value, dtype=xp.float64 if dtype is None else dtype, device=like.device)


def eye(like, k, dtype=None):
    """The k x k identity in ``like``'s namespace, on its device (``like``'s dtype by default)."""
    if isinstance(like, np.ndarray):
        return np.eye(k, dtype=like.dtype if dtype is None else dtype)
    xp = xp_of(like)
    return xp.eye(k, dtype=like.dtype if dtype is None else dtype, device=like.device)


def contiguous(A, dtype=None):
    """A in C order where the namespace has memory orders (numpy: BLAS then reads it without a copy),
    cast to the numpy ``dtype`` (its namespace's equivalent) where given."""
    if isinstance(A, np.ndarray):
        return np.ascontiguousarray(A, dtype=dtype)
    xp = xp_of(A)
    return A if dtype is None else xp.astype(A, float_dtype(xp, dtype))


def all_finite(A):
    """Whether no entry of A is inf or NaN."""
    xp = xp_of(A)
    return bool(xp.all(xp.isfinite(A)))


def blas_dot(A, V):
    """``A @ V`` in A's dtype (numpy: through scipy's BLAS, without copying A).

    numpy and scipy ship separate OpenBLAS builds whose idle threads spin for
    a while after each call; alternating the two in a loop halves the speed
    of both (benchmarks/bench_operator.py). Every product in the solvers'
    loops therefore goes through scipy's BLAS, as symv must.
    """
    if not isinstance(A, np.ndarray):  # another array namespace: its own matmul
        return A @ xp_of(A).astype(V, A.dtype)
    V = np.asarray(V, dtype=A.dtype)
    transposed = not A.flags.f_contiguous
    At = A.T if transposed else A  # Fortran order either way: no copy
    if not At.flags.f_contiguous:
        At, transposed = np.asfortranarray(A), False
    if V.ndim == 1:
        return scipy.linalg.get_blas_funcs("gemv", (At,))(1.0, At, V, trans=int(transposed))
    return scipy.linalg.get_blas_funcs("gemm", (At,))(1.0, At, V, trans_a=int(transposed))


def dot64(block, V, dtype, gemv_max_columns=0):
    """``block @ V`` computed in the numpy ``dtype`` (V is cast to it), returned in float64.

    numpy: up to ``gemv_max_columns`` columns of V run one GEMV each, as
    OpenBLAS's GEMM is slower on thin right-hand sides (bench_operator.py).
    """
    if isinstance(block, np.ndarray):
        Vc = V.astype(dtype, copy=False)
        if Vc.ndim == 2 and Vc.shape[1] <= gemv_max_columns:
            return np.column_stack([blas_dot(block, Vc[:, j]) for j in range(Vc.shape[1])]).astype(np.float64)
        return np.asarray(blas_dot(block, Vc), dtype=np.float64)
    xp = xp_of(block)
    return xp.astype(block @ xp.astype(V, float_dtype(xp, dtype)), xp.float64)


def eigh(M):
    """All eigenpairs of the symmetric M, ascending (numpy: scipy's LAPACK driver)."""
    if isinstance(M, np.ndarray):
        return scipy.linalg.eigh(M)
    return xp_of(M).linalg.eigh(M)


def top_eigenpairs(M, q):
    """The q + 1 largest eigenpairs of the symmetric M, largest first.

    numpy: LAPACK's MRRR driver can fail on clustered spectra (a kernel near the identity), where
    bisection (evx) and then the full decomposition still succeed. Other namespaces: the standard's eigh.
    """
    size = M.shape[0]
    if not isinstance(M, np.ndarray):
        xp = xp_of(M)
        lam, U = xp.linalg.eigh(M)
        lam, U = lam[size - q - 1 :], U[:, size - q - 1 :]
        return xp.flip(lam), xp.flip(U, axis=1)
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
    """``M + diag(d)``, d a vector or a scalar (numpy: in place)."""
    if isinstance(M, np.ndarray):
        M[np.diag_indices_from(M)] += d
        return M
    xp = xp_of(M)
    identity = xp.eye(M.shape[0], dtype=M.dtype, device=M.device)
    return M + (identity * d[None, :] if getattr(d, "ndim", 0) else float(d) * identity)


def solve_psd(M, v):
    """``M^-1 v`` for a symmetric PSD M by Cholesky (numpy: M's upper triangle); a least-squares
    solution where M is singular (the softmax's intercepts: a class no row gives a probability)."""
    if isinstance(M, np.ndarray):
        try:
            factor = scipy.linalg.cho_factor(M, lower=False, check_finite=False)
            return scipy.linalg.cho_solve(factor, v, check_finite=False)
        except scipy.linalg.LinAlgError:
            return scipy.linalg.lstsq(M, v, cond=np.finfo(float).eps * M.shape[0], check_finite=False)[0]
    xp = xp_of(M)
    try:  # a failed factorization raises in most namespaces and returns NaN in others (CuPy)
        U = xp.linalg.cholesky(M).T
        if bool(xp.all(xp.isfinite(U))):
            return solve_triangular(xp, U, solve_triangular(xp, U, v, upper=True, trans=True), upper=True)
    except Exception:  # noqa: BLE001 - LinAlgError, torch's RuntimeError subclass, ...
        pass
    return xp.linalg.pinv(M, rtol=float(np.finfo(float).eps) * M.shape[0]) @ v


def gram(A, alpha=1.0, trans=False):
    """``alpha A A'`` (``alpha A'A`` with trans) for a factorization that reads the upper triangle
    (numpy: the upper triangle only, by BLAS syrk at half a product's flops)."""
    if isinstance(A, np.ndarray):
        return scipy.linalg.blas.dsyrk(alpha, A, trans=int(trans), lower=0)
    product = A.T @ A if trans else A @ A.T
    return product if alpha == 1.0 else alpha * product


def triangle_gram(T):
    """``T T'`` of an upper triangular T (numpy: its upper triangle only, by LAPACK lauum, m^3/3 flops)."""
    if isinstance(T, np.ndarray):
        return scipy.linalg.lapack.dlauum(T, lower=0)[0]
    return T @ T.T


def minus_outer(M, v):
    """``M - v v'`` on the upper triangle the factorizations read (numpy: BLAS syr on a copy)."""
    if isinstance(M, np.ndarray):
        return scipy.linalg.blas.dsyr(-1.0, v, lower=0, a=M.copy(order="F"), overwrite_a=1)
    return M - v[:, None] * v[None, :]


def cho_solve(R, V):
    """``(R'R)^-1 V`` for an upper Cholesky factor R (numpy: LAPACK's potrs)."""
    if isinstance(R, np.ndarray):
        return scipy.linalg.cho_solve((R, False), V, check_finite=False)
    xp = xp_of(R)
    return solve_triangular(xp, R, solve_triangular(xp, R, V, upper=True, trans=True), upper=True)


def fortran(A):
    """A in Fortran order where the namespace has memory orders (BLAS updates it in place)."""
    return np.asfortranarray(A) if isinstance(A, np.ndarray) else A


class CholeskyStack:
    """One upper Cholesky factor per column, ``G_c = R_c' R_c``: ``solve(U)[:, c] = G_c^-1 U[:, c]``.

    numpy keeps each factor's triangular inverse, so that every column's
    solve is two batched products; other namespaces take two triangular
    solves per column.
    """

    def __init__(self, k):
        self.R, self.inverses = [None] * k, None

    def set(self, c, R):
        self.R[c] = R
        if isinstance(R, np.ndarray):
            shape = (len(self.R),) + R.shape
            if self.inverses is None or self.inverses.shape != shape:
                self.inverses = np.empty(shape)
            self.inverses[c] = scipy.linalg.lapack.dtrtri(R, lower=0)[0]

    def solve(self, U):
        if self.inverses is not None:
            R_inv = self.inverses
            return np.matmul(R_inv, np.matmul(R_inv.transpose(0, 2, 1), U.T[:, :, None]))[:, :, 0].T
        return xp_of(U).concat([cho_solve(R, U[:, c : c + 1]) for c, R in enumerate(self.R)], axis=1)


class GrowingFactor:
    """The columns of a factor ``F`` (n x up to ``rank``) as a pivoted Cholesky finds them.

    numpy: one preallocated Fortran-ordered array that BLAS updates in
    place; another namespace: a list of column blocks.
    """

    def __init__(self, diag, n, rank):
        self.xp, self.k, self.n = xp_of(diag), 0, n
        self.numpy = isinstance(diag, np.ndarray)
        self.store = np.empty((n, rank), order="F") if self.numpy else []
        self.device = getattr(diag, "device", None)

    @property
    def F(self):
        if self.numpy:
            return self.store[:, : self.k]
        xp = self.xp
        return xp.concat(self.store, axis=1) if self.store else xp.zeros((self.n, 0), dtype=xp.float64,
                                                                           device=self.device)

    def residual(self, G, S):
        """The columns G = A[:, S] less their part in F: ``G - F F[S]'``."""
        if not self.k:
            return G
        if self.numpy:
            F = self.store[:, : self.k]
            return scipy.linalg.blas.dgemm(-1.0, F, F[S], beta=1.0, c=G, trans_b=1, overwrite_c=1)
        F = self.F
        return G - F @ take_rows(self.xp, F, S).T

    def append(self, G, keep, R):
        """Add the columns Fk solving ``Fk R = G[:, keep]`` (R upper triangular); returns their rows'
        squared norms on the host (the residual diagonal's decrease)."""
        r = len(keep)
        if self.numpy:
            Fk = self.store[:, self.k : self.k + r]  # a Fortran-ordered view: trsm works in place
            Fk[...] = G.T[keep].T  # gather rows of the C-ordered transpose: fast
            scipy.linalg.blas.dtrsm(1.0, R, Fk, side=1, lower=0, overwrite_b=1)
            self.k += r
            return np.einsum("ij,ij->i", Fk, Fk)
        xp = self.xp
        R = xp.asarray(R, device=G.device)
        # Fk R = G[:, keep]: Fk' = R^-T G[:, keep]'
        Fk = solve_triangular(xp, R, take_columns(xp, G, keep).T, upper=True, trans=True).T
        self.store.append(Fk)
        self.k += r
        return np.asarray(to_numpy(xp.sum(Fk * Fk, axis=1)))


def input_namespace(*arrays):
    """The arrays' namespace: numpy for numpy arrays, scipy.sparse matrices and array-likes."""
    dense = [A for A in arrays if not sp.issparse(A)]
    if all(isinstance(A, np.ndarray) for A in dense) or not all(hasattr(A, "shape") for A in dense):
        return np
    return namespace(*dense)[0]


def common_float(X, Y, dtype=None):
    """X and Y in one float dtype: ``dtype``, or float32 if both are float32, else float64; sparse stays CSR."""
    if input_namespace(X, Y) is np:
        X, Y = (A if sp.issparse(A) else np.asarray(A) for A in (X, Y))
        common = np.result_type(X.dtype, Y.dtype, np.float32)  # float16 and small integers compute in float32
        dtype = dtype or (np.float32 if common == np.float32 else np.float64)
    dtype = dtype or (np.float32 if is_float32(X) and is_float32(Y) else np.float64)
    return tuple(sp.csr_matrix(A, dtype=dtype) if sp.issparse(A) else cast(A, dtype) for A in (X, Y))


def is_float32(A):
    """Whether A holds float32."""
    return str(A.dtype).endswith("float32")  # numpy's, torch's and the standard's dtypes alike


def scales_like(value, X):
    """A per-feature scale array in X's namespace and on its device (a float stays a float)."""
    if not np.ndim(value) or isinstance(X, np.ndarray) or sp.issparse(X):
        return value
    xp = input_namespace(X)
    return xp.asarray(value, dtype=xp.float64, device=X.device)
