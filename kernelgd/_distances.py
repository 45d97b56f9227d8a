"""The kernels' backend: distance blocks and products of factors, for numpy and for any array API namespace.

:mod:`kernelgd.kernels` writes each kernel once, from these primitives. Their
numpy bodies are tuned (one augmented GEMM by cache-sized chunks with the
kernel's elementwise step in place; exact recomputation of the few entries the
expansion cannot resolve; overflow-free products through ``frexp``; sparse
inputs). The array API bodies use the standard's functions only, so that a
block is computed on the device its inputs live on.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances
from sklearn.utils.extmath import row_norms, safe_sparse_dot

from ._array_api import as_float64, common_float, input_namespace, on_host, take_rows, to_numpy, xp_of

# Rows of a distance GEMM per chunk, by the chunk's bytes: the clip and the kernel's exp then find it in cache.
DISTANCE_CHUNK_BYTES = 16 << 20
# Rows of an L1 distance block per chunk, by the chunk's bytes: each feature's pass over the chunk (and its
# scratch) then stays in cache.
L1_CHUNK_BYTES = 1 << 19
# Bytes of the (rows, m, n_features) temporary of an L1 block in another namespace.
DEVICE_L1_CHUNK_BYTES = 64 << 20


def _sparse_dtype(X, Y):
    """float32 where both sparse-side inputs are, else float64."""
    return np.float32 if X.dtype == Y.dtype == np.float32 else np.float64


def raise_not_representable(name, what):
    raise ValueError(
        f"The {name} kernel is not representable in float64 for this data: "
        f"{what}. Standardize or scale down the features (for example with "
        "sklearn.preprocessing.StandardScaler), or choose a smaller degree."
    )


# ------------------------------------------------------------------ squared distances


def neg_sq_distances(X, Y, out=None, then=None):
    """``then(-||x - z||^2)`` (then defaults to the identity), in the inputs' precision.

    ``out`` (numpy only) receives the block. Entries the expansion
    ``|x|^2 - 2 x'z + |z|^2`` cannot resolve from 0 are recomputed directly.
    """
    if sp.issparse(X) or sp.issparse(Y):
        D = _sparse_neg_sq_distances(X, Y, out)
        D = D if out is not None else D.astype(_sparse_dtype(X, Y), copy=False)
        return D if then is None else then(D)
    if on_host(X, Y):
        return _numpy_neg_sq_distances(X, Y, out, then)
    xp = xp_of(X)
    D = _exact_far_rows(xp, _neg_sq_expansion(xp, X, Y), X, Y)
    return D if then is None else then(D)


def _numpy_neg_sq_distances(X, Y, out=None, then=None):
    """By one GEMM on augmented inputs, clipped at 0, by chunks of rows.

    ``[x, |x|^2, 1] . [2 z, -1, -|z|^2] = -(|x|^2 - 2 x'z + |z|^2)``: a GEMM
    plus an in-place clip. Each chunk is followed by ``then(chunk)`` (the
    kernel's own elementwise step, in place) while it is still in cache.
    """
    xx = np.einsum("ij,ij->i", X, X)[:, None]
    yy = np.einsum("ij,ij->i", Y, Y)[:, None]
    A = np.hstack([X, xx, np.ones_like(xx)])
    Bt = np.hstack([2 * Y, -np.ones_like(yy), -yy]).T
    D = np.empty((A.shape[0], Bt.shape[1]), dtype=np.result_type(A, Bt)) if out is None else out
    rows = max(1, DISTANCE_CHUNK_BYTES // max(1, D.shape[1] * D.itemsize))
    for start in range(0, D.shape[0], rows):
        chunk = D[start : start + rows]
        with np.errstate(invalid="ignore", over="ignore"):
            np.matmul(A[start : start + rows], Bt, out=chunk)
        np.minimum(chunk, 0, out=chunk)
        if chunk.size:
            _exact_near_zero(chunk, X[start : start + rows], Y, xx[start : start + rows, 0], yy[:, 0])
        if then is not None:
            then(chunk)
    return D


def _exact_near_zero(chunk, X, Y, xx, yy):
    """Recompute ``-||x - z||^2`` directly (in float64) where the expansion cannot resolve it from 0: entry
    (i, j) is rounded by about ``eps (|x_i|^2 + |z_j|^2)``, and is recomputed where it lies within 8 times
    that of 0 and that bound exceeds ``sqrt(eps)``. Only rows and columns of large norm can reach it, so only
    they are scanned (a scan of the whole block costs as much as its GEMM for few features).
    """
    eps = np.finfo(chunk.dtype).eps
    big = np.sqrt(eps) / (8 * eps)  # |x_i|^2 + |z_j|^2 above this can move a kernel value by sqrt(eps)
    rows = np.flatnonzero(xx > big / 2)
    cols = np.flatnonzero(yy > big / 2)
    other = np.setdiff1d(np.arange(len(xx)), rows, assume_unique=True)  # the columns' scan skips rows scanned whole
    for r, c in ((rows, np.arange(chunk.shape[1])), (other, cols)):
        if not (len(r) and len(c)):
            continue
        bound = 8 * eps * (xx[r, None] + yy[None, c])
        i, j = np.nonzero((chunk[np.ix_(r, c)] >= -bound) & (bound > np.sqrt(eps)))
        if len(i):
            i, j = r[i], c[j]
            diff = X[i].astype(np.float64) - Y[j]
            chunk[i, j] = -np.einsum("ij,ij->i", diff, diff)


def _sparse_neg_sq_distances(X, Y, out=None):
    """For sparse X or Y, in float64 (sparse data is not centred)."""
    X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    Y = sp.csr_matrix(Y, dtype=np.float64) if sp.issparse(Y) else np.asarray(Y, dtype=np.float64)
    D = safe_sparse_dot(X, Y.T, dense_output=True)
    D *= 2.0
    D -= row_norms(X, squared=True)[:, None]
    D -= row_norms(Y, squared=True)[None, :]
    np.minimum(D, 0, out=D)
    if out is None:
        return D
    out[...] = D
    return out


def _neg_sq_expansion(xp, X, Y):
    """``-||x - z||^2`` by the expansion ``2 x'z - |x|^2 - |z|^2``, clipped at 0.

    The norms are taken off the product in place (the standard's in-place
    operators): one product and three passes over the block, no block-sized
    temporaries but the clip's.
    """
    D = (2.0 * X) @ Y.T  # doubling is exact: the same product as 2 (X Y')
    D -= xp.sum(X * X, axis=1)[:, None]
    D -= xp.sum(Y * Y, axis=1)[None, :]
    return xp.clip(D, max=0.0)


def _exact_far_rows(xp, D, X, Y):
    """D (negated squared distances) with the rows and columns of far points recomputed directly, in float64:
    where a row's own rounding term ``8 eps |x_i|^2`` exceeds sqrt(eps) / 2 a near-duplicate pair's kernel
    value moves by more than sqrt(eps). Those few rows are recomputed whole (numpy's body only their entries
    near 0, with fancy indexing the standard lacks); finding them reads the n + m norms on the host.
    """
    eps = float(xp.finfo(D.dtype).eps)
    far = np.sqrt(eps) / (16 * eps)
    rows = np.flatnonzero(np.asarray(to_numpy(xp.sum(X * X, axis=1))) > far)
    cols = np.flatnonzero(np.asarray(to_numpy(xp.sum(Y * Y, axis=1))) > far)
    if rows.size:
        D = _replace_rows(xp, D, rows, -_direct_sq_distances(xp, take_rows(X, rows), Y))
    if cols.size:
        D = _replace_rows(xp, D.T, cols, -_direct_sq_distances(xp, take_rows(Y, cols), X)).T
    return D


def _direct_sq_distances(xp, X, Y):
    """``||x - z||^2`` summed feature by feature, in float64, cast to X's dtype."""
    X64, Y64 = as_float64(X), as_float64(Y)
    D = xp.zeros((X.shape[0], Y.shape[0]), dtype=xp.float64, device=X.device)
    for f in range(X.shape[1]):  # (rows, m) temporaries: no (rows, m, n_features) block
        diff = X64[:, f : f + 1] - Y64[None, :, f]
        D = D + diff * diff
    return xp.astype(D, X.dtype)


def _replace_rows(xp, D, rows, E):
    """D with ``D[rows[k]] = E[k]`` (the standard has no assignment by an index array)."""
    position = np.zeros(D.shape[0], dtype=np.int64)
    position[rows] = np.arange(len(rows))
    mask = np.zeros(D.shape[0], dtype=bool)
    mask[rows] = True
    mask = xp.asarray(mask, device=D.device)
    return xp.where(mask[:, None], take_rows(E, position), D)


def euclidean(X, Y, same):
    """``||x - z||`` in float64; ``same`` (Y is X) keeps the diagonal exactly 0."""
    if on_host(X, Y):
        return np.asarray(euclidean_distances(X, None if same else Y))
    xp = xp_of(X)
    return xp.sqrt(-_neg_sq_expansion(xp, as_float64(X), as_float64(Y)))


# ------------------------------------------------------------------ L1 distances


def neg_l1_distances(X, Y, out=None, then=None):
    """``then(-||x - z||_1)`` (then defaults to the identity), in the inputs' precision.

    Every term is exact up to one rounding, so the sum's relative error is at
    most about ``n_features`` units of the precision (no cancellation, unlike
    the squared distances' expansion). ``out`` (numpy only) receives the block.
    """
    if sp.issparse(X) or sp.issparse(Y):
        D = np.asarray(manhattan_distances(X, Y)).astype(_sparse_dtype(X, Y), copy=False)
        D *= -1
        if out is not None:
            out[...] = D
            D = out
        return D if then is None else then(D)
    if on_host(X, Y):
        return _numpy_neg_l1_distances(X, Y, out, then)
    xp = xp_of(X)
    n, m, d = X.shape[0], Y.shape[0], max(X.shape[1], 1)
    rows = max(1, DEVICE_L1_CHUNK_BYTES // max(1, m * d * 8))
    blocks = [
        xp.sum(xp.abs(X[start : min(start + rows, n), None, :] - Y[None, :, :]), axis=2)
        for start in range(0, n, rows)
    ]
    D = -(blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0))
    return D if then is None else then(D)


def _numpy_neg_l1_distances(X, Y, out=None, then=None):
    """Feature by feature, rows by chunks of ``L1_CHUNK_BYTES``, each followed by ``then(chunk)`` in place."""
    D = np.empty((X.shape[0], Y.shape[0]), dtype=np.result_type(X, Y)) if out is None else out
    Yt = np.ascontiguousarray(Y.T, dtype=D.dtype)
    rows = max(1, L1_CHUNK_BYTES // max(1, D.shape[1] * D.itemsize))
    scratch = np.empty((min(rows, D.shape[0]), D.shape[1]), dtype=D.dtype)
    for start in range(0, D.shape[0], rows):
        chunk, x = D[start : start + rows], X[start : start + rows]
        chunk[...] = 0.0
        for j in range(X.shape[1]):
            term = scratch[: len(chunk)]
            np.subtract(x[:, j : j + 1], Yt[j], out=term)
            np.abs(term, out=term)
            chunk -= term
        if then is not None:
            then(chunk)
    return D


# ------------------------------------------------------------------ products of factors


def subset_products(X, Y):
    """``prod_k (1 + x_k z_k)`` in float64, without spurious overflow, or a clear error: numpy keeps the running
    product as mantissa * 2**exponent (``frexp``) and multiplies sparse inputs' factors that differ from 1;
    other namespaces (the standard has no frexp) multiply directly and raise on overflow.
    """
    if sp.issparse(X) or sp.issparse(Y):
        return _sparse_subset_products(sp.csc_matrix(X), sp.csc_matrix(Y))
    if on_host(X, Y):

        def factor(k):
            f = np.multiply.outer(X[:, k], Y[:, k])
            f += 1.0
            return f

        return _safe_product(factor, X.shape[1], (X.shape[0], Y.shape[0]))
    xp = xp_of(X)
    K = xp.ones((X.shape[0], Y.shape[0]), dtype=X.dtype, device=X.device)
    for k in range(X.shape[1]):
        K = K * (1.0 + X[:, k : k + 1] * Y[:, k][None, :])
    if not bool(xp.all(xp.isfinite(K))):
        raise_not_representable("all_subsets", "a product of factors (1 + x_k z_k) overflows")
    return K


def subset_products_diag(X):
    """``prod_k (1 + x_k^2)`` per row of float64 X (the all_subsets kernel's diagonal)."""
    if sp.issparse(X):  # a product over the nonzero features, as a sum of logs
        logs = X.multiply(X).tocsr()
        logs.data = np.log1p(logs.data)
        log_total = np.asarray(logs.sum(axis=1)).ravel()
        if np.any(log_total > np.log(np.finfo(np.float64).max)):
            raise_not_representable("all_subsets", "some values exceed the largest float64 (about 1.8e308)")
        return np.exp(log_total)
    if on_host(X):
        return _safe_product(lambda k: 1.0 + X[:, k] ** 2, X.shape[1], len(X))
    return xp_of(X).prod(1.0 + X**2, axis=1)


def _safe_product(factor, n_factors, shape):
    """Product of ``factor(k)`` for k < n_factors, as mantissa * 2**exponent until the end."""
    mantissa = np.ones(shape)
    exponent = np.zeros(shape, dtype=np.int64)
    for k in range(n_factors):
        mantissa *= factor(k)
        mantissa, e = np.frexp(mantissa)
        exponent += e
    return _from_frexp(mantissa, exponent)


def _sparse_subset_products(X, Y):
    """For CSC X and Y: factor k differs from 1 only where x_k z_k != 0."""
    mantissa = np.ones((X.shape[0], Y.shape[0]))
    exponent = np.zeros(mantissa.shape, dtype=np.int64)
    for k in range(X.shape[1]):
        rx, vx = X.indices[X.indptr[k] : X.indptr[k + 1]], X.data[X.indptr[k] : X.indptr[k + 1]]
        rz, vz = Y.indices[Y.indptr[k] : Y.indptr[k + 1]], Y.data[Y.indptr[k] : Y.indptr[k + 1]]
        if len(rx) == 0 or len(rz) == 0:
            continue
        block = np.ix_(rx, rz)
        m, e = np.frexp(mantissa[block] * (1.0 + np.outer(vx, vz)))
        mantissa[block] = m
        exponent[block] += e
    return _from_frexp(mantissa, exponent)


def _from_frexp(mantissa, exponent):
    """``mantissa * 2**exponent``, or a clear error where it is not finite."""
    if not np.all(np.isfinite(mantissa)):
        raise_not_representable("all_subsets", "a factor (1 + x_k z_k) overflows")
    # ldexp takes int32 exponents; clip far beyond float64's range first.
    np.clip(exponent, -2000, 2000, out=exponent)
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(mantissa, exponent.astype(np.int32))
    if not np.all(np.isfinite(out)):
        raise_not_representable("all_subsets", "some values exceed the largest float64 (about 1.8e308)")
    return out


def sq_norms(X):
    """Each row's squared norm, in float64."""
    X = common_float(X, X, np.float64)[0]
    if on_host(X):
        return row_norms(X, squared=True)
    return input_namespace(X).sum(X * X, axis=1)
