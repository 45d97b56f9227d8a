"""The kernel registry.

Every kernel is one small function ``function(X, Y, **params)`` that returns
the block ``K[i, j] = k(X[i], Y[j])``, plus one registry entry that says
which estimator parameters it takes, whether it is positive semi-definite
(PSD) and how to compute its diagonal ``k(x, x)`` cheaply.

The formulas are those of the kernelgd documentation (texts differ on
some constants; these are ours):

==============  ==============================================  =====
name            k(x, z)                                         PSD
==============  ==============================================  =====
linear          x'z                                             yes
polynomial      (coef0 + x'z / sigma^2) ** degree               yes*
rbf             exp(-||x - z||^2 / sigma^2)                     yes
exponential     exp(-||x - z|| / (2 sigma^2))                   yes
laplacian       exp(-||x - z||_1 / sigma)                       yes
sigmoid         tanh(a x'z + coef0)                             no
all_subsets     prod_k (1 + x_k z_k)                            yes
==============  ==============================================  =====

(*) for an integer degree and coef0 >= 0. ``poly`` is an alias of
``polynomial`` and ``gaussian`` one of ``rbf``.

Per-feature scales: for rbf, laplacian and exponential, ``sigma`` may also
be an array of shape (n_features,). Feature j is then divided by its own
scale, ``sigma_j`` for rbf and laplacian and ``sigma_j**2`` for exponential,
and the kernel with ``sigma=1`` is applied to the rescaled features; a
constant array gives the scalar kernel.
"""

import inspect
from dataclasses import dataclass
from numbers import Real
from typing import Callable

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances
from sklearn.utils import check_array
from sklearn.utils.extmath import row_norms, safe_sparse_dot

__all__ = [
    "KernelSpec",
    "kernel_matrix",
    "register_kernel",
    "available_kernels",
    "linear",
    "polynomial",
    "rbf",
    "exponential",
    "laplacian",
    "sigmoid",
    "all_subsets",
]

# Estimator parameters that a kernel may ask for through ``params``.
ESTIMATOR_PARAMS = ("sigma", "degree", "coef0")
# Rows of a distance GEMM per chunk, by the chunk's bytes: the clip and the kernel's exp then
# find it in cache (adult's triangle on one thread: 3.9 s against 6.1 s for whole blocks).
DISTANCE_CHUNK_BYTES = 16 << 20
# Rows of an L1 distance block per chunk, by the chunk's bytes: each feature's pass over the chunk
# (and its scratch) then stays in cache. 4,000 x 16,000 blocks of 8 features, exp included: 0.44 s in
# float32 and 0.89 s in float64, against 1.9 s by scikit-learn's manhattan_distances (float64 only).
L1_CHUNK_BYTES = 1 << 19


def _as_dtype(X, dtype):
    """X in ``dtype``; scipy.sparse inputs stay sparse (CSR)."""
    if sp.issparse(X):
        return sp.csr_matrix(X, dtype=dtype)
    return np.asarray(X, dtype=dtype)


def _as_float64(X):
    return _as_dtype(X, np.float64)


def _dtype_of(X):
    return X.dtype if sp.issparse(X) else np.asarray(X).dtype


def _as_float(X, Y):
    """X and Y as one float dtype: float32 if both are float32, else float64."""
    dtype = np.result_type(_dtype_of(X), _dtype_of(Y), np.float32)
    dtype = np.float32 if dtype == np.float32 else np.float64
    return _as_dtype(X, dtype), _as_dtype(Y, dtype)


def _raise_not_representable(name, what):
    raise ValueError(
        f"The {name} kernel is not representable in float64 for this data: "
        f"{what}. Standardize or scale down the features (for example with "
        "sklearn.preprocessing.StandardScaler), or choose a smaller degree."
    )


def _safe_product(factor, n_factors, shape, name):
    """Product of ``factor(k)`` for k < n_factors without spurious overflow.

    The running product is kept as mantissa * 2**exponent (``np.frexp``), so
    partial products may leave float64's range as long as the result fits.
    """
    mantissa = np.ones(shape)
    exponent = np.zeros(shape, dtype=np.int64)
    for k in range(n_factors):
        mantissa *= factor(k)
        mantissa, e = np.frexp(mantissa)
        exponent += e
    return _from_frexp(mantissa, exponent, name)


def _from_frexp(mantissa, exponent, name):
    """``mantissa * 2**exponent``, or a clear error where it is not finite."""
    if not np.all(np.isfinite(mantissa)):
        _raise_not_representable(name, "a factor (1 + x_k z_k) overflows")
    # ldexp takes int32 exponents; clip far beyond float64's range first.
    np.clip(exponent, -2000, 2000, out=exponent)
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(mantissa, exponent.astype(np.int32))
    if not np.all(np.isfinite(out)):
        _raise_not_representable(
            name, "some values exceed the largest float64 (about 1.8e308)"
        )
    return out


# ---------------------------------------------------------------- built-ins


def linear(X, Y):
    """Linear kernel ``k(x, z) = x'z``.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import linear
    >>> linear(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]))
    array([[11.]])
    """
    X, Y = _as_float(X, Y)
    return safe_sparse_dot(X, Y.T, dense_output=True)


def polynomial(X, Y, degree=3, coef0=1.0, sigma=1.0):
    """Polynomial kernel ``k(x, z) = (coef0 + x'z / sigma**2) ** degree``.

    ``1 / sigma**2`` is scikit-learn's ``gamma``. The estimators' default
    ``sigma="scale"`` sets ``sigma**2`` to n_features times X's mean square,
    so that ``x'x / sigma**2`` is 1 on average (on centred X, this is
    ``SVC(kernel="poly")``'s ``gamma="scale"``) and the model does not
    change when X is multiplied by a constant.
    Values that do not fit in float64 raise a ValueError instead of
    becoming inf.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    degree : float, default=3
        The exponent; a non-integer degree needs ``coef0 + x'z / sigma**2 >= 0``.
    coef0 : float, default=1.0
        The constant added to the scaled inner product.
    sigma : float, default=1.0
        The inner product is divided by ``sigma**2``.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import polynomial
    >>> polynomial(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), degree=2)
    array([[144.]])
    >>> polynomial(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), degree=2, sigma=np.sqrt(11.0))
    array([[4.]])
    """
    K = linear(X, Y)
    if sigma != 1.0:
        K *= 1.0 / sigma**2
    K += coef0
    with np.errstate(over="ignore", invalid="ignore"):
        np.power(K, degree, out=K)
    if not np.all(np.isfinite(K)):
        if np.any(np.isnan(K)):
            raise ValueError(
                f"The polynomial kernel with non-integer degree={degree} is "
                "undefined where coef0 + x'z / sigma**2 < 0. Use an integer degree or a "
                "larger coef0."
            )
        limit = "3.4e38 in float32; options={'dtype': 'float64'} goes to 1.8e308" if K.dtype == np.float32 else "1.8e308"
        _raise_not_representable("polynomial", f"(coef0 + x'z / sigma**2) ** degree exceeds about {limit}")
    return K


def _centred_scaled(X, Y, scale):
    """``(X - c) * scale`` and ``(Y - c) * scale`` with c the mean of Y, in the inputs' precision.

    Distances do not change under a common shift, but their expansion
    ``|x|^2 - 2 x'z + |z|^2`` cancels catastrophically for features far from
    zero (a time stamp of 1.7e9 leaves no digit of a float32 distance), and
    ``|x|^2`` can overflow where ``|x - z| / sigma`` does not. The shift and
    scale are applied in float64. Sparse inputs are only scaled: a shift
    would make them dense.
    """
    _check_scales(scale, X)
    if sp.issparse(X) or sp.issparse(Y):
        if np.ndim(scale):  # a column scaling keeps the sparsity
            D = sp.diags(scale)
            return (X @ D).tocsr() if sp.issparse(X) else X * scale, (Y @ D).tocsr() if sp.issparse(Y) else Y * scale
        return X * scale, Y * scale
    dtype = X.dtype
    c = np.mean(Y, axis=0, dtype=np.float64)
    with np.errstate(over="ignore"):
        Xs = ((X - c) * scale).astype(dtype, copy=False)
        Ys = ((Y - c) * scale).astype(dtype, copy=False)
    return Xs, Ys


def _neg_sq_distances(X, Y, out=None, then=None):
    """``-||x - z||^2`` by one GEMM on augmented inputs, clipped at 0.

    ``[x, |x|^2, 1] . [2 z, -1, -|z|^2] = -(|x|^2 - 2 x'z + |z|^2)``: a GEMM
    plus an in-place clip, in the inputs' precision. Both run by chunks of
    rows, each followed by ``then(chunk)`` (the kernel's own elementwise
    step, in place) while the chunk is still in cache.
    """
    xx = np.einsum("ij,ij->i", X, X)[:, None]
    yy = np.einsum("ij,ij->i", Y, Y)[:, None]
    A = np.hstack([X, xx, np.ones_like(xx)])
    Bt = np.hstack([2 * Y, -np.ones_like(yy), -yy]).T
    D = np.empty((A.shape[0], Bt.shape[1]), dtype=np.result_type(A, Bt)) if out is None else out
    rows = max(1, DISTANCE_CHUNK_BYTES // max(1, D.shape[1] * D.itemsize))
    # The expansion's rounding is about eps (|x|^2 + |z|^2): where that is large (features far
    # from 0 in units of sigma), entries within it of 0 (a row against itself) are recomputed.
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
    """Recompute ``-||x - z||^2`` directly (in float64) where the expansion cannot resolve it from 0.

    Entry (i, j) is rounded by about ``eps (|x_i|^2 + |z_j|^2)``; it is
    recomputed where it lies within 8 times that of 0 and that bound exceeds
    ``sqrt(eps)`` (a kernel value moved by more). Only rows and columns of
    large norm can reach that bound, so only they are scanned: a scan of the
    whole block costs as much as its GEMM for few features, and one outlier
    row (California housing's) would otherwise make every block pay it.
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
    """``-||x - z||^2`` for sparse X or Y, in float64 (sparse data is not centred)."""
    X, Y = _as_float64(X), _as_float64(Y)
    D = safe_sparse_dot(X, Y.T, dense_output=True)
    D *= 2.0
    D -= row_norms(X, squared=True)[:, None]
    D -= row_norms(Y, squared=True)[None, :]
    np.minimum(D, 0, out=D)
    if out is None:
        return D
    out[...] = D
    return out


def _inverse_scale(sigma, power, name):
    """``1 / sigma**power`` as float64 (per feature for an array), or a clear error where it is not representable."""
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        value = 1.0 / np.asarray(sigma, dtype=np.float64) ** power
    if not np.all(np.isfinite(value)):
        raise ValueError(
            f"sigma={sigma!r} is too small for the {name} kernel: 1 / sigma**{power} "
            "overflows float64. Use a larger sigma, or scale the features up."
        )
    return float(value) if value.ndim == 0 else value


def _check_scales(scale, X):
    """Per-feature scales must match the features."""
    if np.ndim(scale) and np.shape(scale) != (X.shape[1],):
        raise ValueError(
            f"sigma has shape {np.shape(scale)} but X has {X.shape[1]} features: per-feature "
            "scales need one entry per feature."
        )


def rbf(X, Y, sigma=1.0, out=None):
    """Gaussian (RBF) kernel ``k(x, z) = exp(-||x - z||^2 / sigma^2)``.

    This is scikit-learn's ``rbf_kernel`` with ``gamma = 1 / sigma**2``.
    The inputs are shifted by a common point and divided by sigma before the
    distances are expanded, so float32 blocks stay accurate for features far
    from zero.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    sigma : float or ndarray of shape (n_features,), default=1.0
        The bandwidth, > 0; an array gives each feature its own.
    out : ndarray of shape (n_X, n_Y), default=None
        Where to write K (its dtype must be that of X and Y).

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import rbf
    >>> rbf(np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]), sigma=1.0)
    array([[0.13533528]])
    """
    X, Y = _as_float(X, Y)
    Xs, Ys = _centred_scaled(X, Y, _inverse_scale(sigma, 1, "rbf"))
    if not (sp.issparse(Xs) or sp.issparse(Ys)):
        return _neg_sq_distances(Xs, Ys, out=out, then=lambda chunk: np.exp(chunk, out=chunk))
    D = _sparse_neg_sq_distances(Xs, Ys, out=out)
    if out is None:
        D = D.astype(X.dtype, copy=False)
    return np.exp(D, out=D)


def exponential(X, Y, sigma=1.0):
    """Exponential kernel ``k(x, z) = exp(-||x - z|| / (2 sigma^2))``.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    sigma : float or ndarray of shape (n_features,), default=1.0
        The bandwidth, > 0; an array gives each feature its own.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import exponential
    >>> exponential(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]]), sigma=1.0)
    array([[0.082085]])
    """
    # Distances (not squared) need float64: the square root would amplify
    # the rounding of the GEMM expansion to about sqrt(eps).
    X, Y = _as_float(X, Y)
    per_feature = np.ndim(sigma) > 0
    # ||x - z|| / (2 sigma^2) = ||x/sigma - z/sigma|| / (2 sigma); per feature, x_j / sigma_j^2 and sigma = 1
    scale = _inverse_scale(sigma, 2 if per_feature else 1, "exponential")
    Xs, Ys = _centred_scaled(_as_float64(X), _as_float64(Y), scale)
    D = euclidean_distances(Xs, None if Y is X else Ys)  # None: an exact zero diagonal
    if sp.issparse(Xs) or sp.issparse(Ys):
        D = np.asarray(D)
    D *= -0.5 if per_feature else -1.0 / (2.0 * sigma)
    return np.exp(D, out=D).astype(X.dtype, copy=False)


def laplacian(X, Y, sigma=1.0, out=None):
    """Laplacian kernel ``k(x, z) = exp(-||x - z||_1 / sigma)``.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    sigma : float or ndarray of shape (n_features,), default=1.0
        The bandwidth, > 0; an array gives each feature its own.
    out : ndarray of shape (n_X, n_Y), default=None
        Where to write K (its dtype must be that of X and Y).

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import laplacian
    >>> laplacian(np.array([[0.0, 0.0]]), np.array([[1.0, -1.0]]), sigma=2.0)
    array([[0.36787944]])
    """
    X, Y = _as_float(X, Y)
    scale = _inverse_scale(sigma, 1, "laplacian")
    Xs, Ys = _centred_scaled(X, Y, scale)  # |x - z| directly: the shift only keeps |x/sigma| finite
    if not (sp.issparse(Xs) or sp.issparse(Ys)):
        return _neg_l1_distances(Xs, Ys, out=out, then=lambda chunk: np.exp(chunk, out=chunk))
    D = np.asarray(manhattan_distances(Xs, Ys)).astype(X.dtype, copy=False)
    D *= -1
    if out is None:
        return np.exp(D, out=D)
    return np.exp(D, out=out)


def _neg_l1_distances(X, Y, out=None, then=None):
    """``-||x - z||_1`` of dense inputs, feature by feature, in their precision.

    Rows go by chunks of ``L1_CHUNK_BYTES``, each followed by ``then(chunk)``
    (the kernel's elementwise step, in place) while it is in cache. Every
    term is exact up to one rounding, so the sum's relative error is at most
    about ``n_features`` units of the precision (no cancellation, unlike the
    squared distances' expansion).
    """
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


def sigmoid(X, Y, coef0=1.0, a=None):
    """Sigmoid kernel ``k(x, z) = tanh(a x'z + coef0)``; not PSD.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    coef0 : float, default=1.0
        The offset.
    a : float, default=None
        The slope; ``None`` means ``1 / n_features``. Pass it through the
        estimators' ``kernel_params={"a": ...}``.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import sigmoid
    >>> sigmoid(np.array([[1.0, 1.0]]), np.array([[1.0, 1.0]]), coef0=0.0)
    array([[0.76159416]])
    """
    a = 1.0 / X.shape[1] if a is None else a
    K = linear(X, Y)
    K *= a
    K += coef0
    return np.tanh(K, out=K)


def all_subsets(X, Y):
    """All-subsets kernel ``k(x, z) = prod_k (1 + x_k z_k)``.

    It is the inner product of the 2**d features "all products of subsets
    of the inputs" (see :class:`kernelgd.AllSubsetsFeatures`), computed in
    O(d) per pair. The product is formed without overflow wherever the
    result fits in float64, and a ValueError is raised where it does not.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import all_subsets
    >>> all_subsets(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]))
    array([[36.]])
    """
    X, Y = _as_float64(X), _as_float64(Y)
    if sp.issparse(X) or sp.issparse(Y):
        return _sparse_all_subsets(sp.csc_matrix(X), sp.csc_matrix(Y))

    def factor(k):
        f = np.multiply.outer(X[:, k], Y[:, k])
        f += 1.0
        return f

    return _safe_product(factor, X.shape[1], (X.shape[0], Y.shape[0]), "all_subsets")


def _sparse_all_subsets(X, Y):
    """all_subsets for CSC X and Y: factor k differs from 1 only where x_k z_k != 0."""
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
    return _from_frexp(mantissa, exponent, "all_subsets")


# ------------------------------------------------------------- diagonals


def _sq_norms(X):
    return row_norms(_as_float64(X), squared=True)


def _ones_diag(X, **params):
    return np.ones(X.shape[0])


def _linear_diag(X):
    return _sq_norms(X)


def _polynomial_diag(X, degree=3, coef0=1.0, sigma=1.0):
    with np.errstate(over="ignore", invalid="ignore"):
        d = (_sq_norms(X) / sigma**2 + coef0) ** degree
    if not np.all(np.isfinite(d)):
        polynomial(X, X, degree=degree, coef0=coef0, sigma=sigma)  # raises the clear error
    return d


def _sigmoid_diag(X, coef0=1.0, a=None):
    a = 1.0 / X.shape[1] if a is None else a
    return np.tanh(a * _sq_norms(X) + coef0)


def _all_subsets_diag(X):
    X = _as_float64(X)
    if sp.issparse(X):  # a product over the nonzero features, as a sum of logs
        logs = X.multiply(X).tocsr()
        logs.data = np.log1p(logs.data)
        total = np.asarray(logs.sum(axis=1)).ravel()
        if np.any(total > np.log(np.finfo(np.float64).max)):
            _raise_not_representable("all_subsets", "some values exceed the largest float64 (about 1.8e308)")
        return np.exp(total)
    return _safe_product(lambda k: 1.0 + X[:, k] ** 2, X.shape[1], len(X), "all_subsets")


# ---------------------------------------------------------------- registry


@dataclass(frozen=True)
class KernelSpec:
    """A registered kernel: its function and what is known about it.

    :func:`register_kernel` returns one. It can be passed as ``kernel=`` to
    the estimators and :func:`kernel_matrix`, and it pickles with its
    function by reference, so it works in joblib/loky and Dask workers that
    never ran the registration. Calling it evaluates the kernel function.
    """

    name: str
    function: Callable
    params: tuple = ()
    psd: bool = True
    diag: Callable = None
    # Translation invariant (k(x + c, z + c) = k(x, z)): the operator may
    # shift the data to keep float32 distances accurate.
    stationary: bool = False
    # The function takes scipy.sparse CSR X and Y.
    sparse: bool = False
    # sigma may be an array of per-feature scales.
    per_feature: bool = False
    # The kernel divides distances by sigma**sigma_power: sigma="scale" takes that root of the
    # data's scale, so that scaling X by c scales sigma**sigma_power by c.
    sigma_power: int = 1
    # sigma="scale" measures X's spread about its mean (a kernel of differences ignores the mean)
    # or, False, about 0 (a kernel of inner products sees the mean: x'z / sigma^2 then stays O(1)).
    centred_scale: bool = True

    def __call__(self, X, Y, **params):
        return self.function(X, Y, **params)


_REGISTRY = {}
_ALIASES = {"poly": "polynomial", "gaussian": "rbf"}
_BUILTINS = set()


def _add(spec, builtin=False):
    _REGISTRY[spec.name] = spec
    if builtin:
        _BUILTINS.add(spec.name)


_add(KernelSpec("linear", linear, (), True, _linear_diag, sparse=True), True)
_add(KernelSpec("polynomial", polynomial, ("degree", "coef0", "sigma"), True, _polynomial_diag, sparse=True,
                centred_scale=False), True)
_add(KernelSpec("rbf", rbf, ("sigma",), True, _ones_diag, stationary=True, sparse=True, per_feature=True), True)
_add(KernelSpec("exponential", exponential, ("sigma",), True, _ones_diag, stationary=True, sparse=True, per_feature=True,
                sigma_power=2), True)
_add(KernelSpec("laplacian", laplacian, ("sigma",), True, _ones_diag, stationary=True, sparse=True, per_feature=True), True)
_add(KernelSpec("sigmoid", sigmoid, ("coef0",), False, _sigmoid_diag, sparse=True), True)
_add(KernelSpec("all_subsets", all_subsets, (), True, _all_subsets_diag, sparse=True), True)


def is_builtin(spec):
    """Whether ``spec`` is one of kernelgd's own kernels (private helper)."""
    return _REGISTRY.get(spec.name) is spec and spec.name in _BUILTINS


def available_kernels():
    """Names of the registered kernels, aliases included.

    Returns
    -------
    names : list of str
        Sorted names usable as ``kernel=`` in the estimators.

    Examples
    --------
    >>> from kernelgd.kernels import available_kernels
    >>> "rbf" in available_kernels()
    True
    """
    return sorted(set(_REGISTRY) | set(_ALIASES))


def register_kernel(name, function, *, params=(), psd=True, diag=None, sparse=False, per_feature=False):
    """Register a kernel under a name usable everywhere a built-in is.

    After registration ``kernel=name`` works in the estimators and in
    :func:`kernel_matrix` in this process, and an estimator pickled with
    ``kernel=name`` carries the kernel with it, so grid searches with
    ``n_jobs`` (joblib/loky) and Dask workers find the name too (the
    function must pickle: loky and Dask pickle a function of ``__main__``
    or a closure by value). The returned :class:`KernelSpec` works
    everywhere as ``kernel=spec``, also in :func:`kernel_matrix` calls in
    other processes. Installed packages can also register kernels by name through
    the entry-point group ``"kernelgd.kernels"`` (each entry point names a
    ``KernelSpec``, for example the result of ``register_kernel`` in the
    package's module); such names resolve in any process.

    Parameters
    ----------
    name : str
        The new kernel's name. Built-in names and aliases cannot be reused;
        registering a user name again replaces the earlier entry.
    function : callable
        ``function(X, Y, **p)`` returning the block of shape
        ``(len(X), len(Y))`` with ``K[i, j] = k(X[i], Y[j])``.
    params : str or tuple of str, default=()
        The estimator parameters passed on to ``function`` (any of
        ``"sigma"``, ``"degree"``, ``"coef0"``). ``p`` also holds the
        estimator's ``kernel_params``.
    psd : bool, default=True
        Whether the kernel is positive semi-definite; fitting with a kernel
        registered with ``psd=False`` warns.
    diag : callable, default=None
        ``diag(X, **p)`` returning ``k(X[i], X[i])``; by default it is
        computed from ``function`` in small blocks.
    sparse : bool, default=False
        Whether ``function`` (and ``diag``) accept scipy.sparse CSR inputs.
        Fitting a kernel registered without it on sparse X raises a
        ValueError.
    per_feature : bool, default=False
        Whether ``function`` accepts ``sigma`` as an array of shape
        (n_features,), one scale per feature (as the built-in rbf does).

    Returns
    -------
    spec : KernelSpec
        The registered kernel, usable as ``kernel=spec``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import kernel_matrix, register_kernel
    >>> def cosine(X, Y):
    ...     Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    ...     Yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    ...     return Xn @ Yn.T
    >>> spec = register_kernel("cosine", cosine)
    >>> kernel_matrix([[1.0, 0.0]], [[1.0, 1.0]], kernel="cosine")
    array([[0.70710678]])
    >>> kernel_matrix([[1.0, 0.0]], [[1.0, 1.0]], kernel=spec)
    array([[0.70710678]])
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"A kernel name must be a non-empty string, got {name!r}.")
    if name in _BUILTINS or name in _ALIASES or name == "precomputed":
        raise ValueError(f"{name!r} is a built-in kernel name; choose another name.")
    if not callable(function):
        raise ValueError(f"function must be callable, got {type(function).__name__}.")
    params = (params,) if isinstance(params, str) else tuple(params)
    unknown = set(params) - set(ESTIMATOR_PARAMS)
    if unknown:
        raise ValueError(
            f"params may only name {ESTIMATOR_PARAMS}; got unknown {sorted(unknown)}."
        )
    spec = KernelSpec(name, function, params, bool(psd), diag, sparse=bool(sparse), per_feature=bool(per_feature))
    _add(spec)
    return spec


ENTRY_POINT_GROUP = "kernelgd.kernels"


def _from_entry_points(name):
    """The KernelSpec an installed package registers under ``name``, or None."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            spec = ep.load()
            if not isinstance(spec, KernelSpec):
                raise ValueError(
                    f"The entry point {ep.value!r} of group {ENTRY_POINT_GROUP!r} must name "
                    f"a kernelgd.kernels.KernelSpec (from register_kernel), got {type(spec).__name__}."
                )
            _add(spec)
            return spec
    return None


def _user_specs(kernel):
    """The user-registered specs that ``kernel`` (a name, or a list of kernels) refers to by name."""
    kernels = kernel if isinstance(kernel, (list, tuple)) else [kernel]
    names = {_ALIASES.get(k, k) for k in kernels if isinstance(k, str)}
    return [_REGISTRY[k] for k in sorted(names) if k in _REGISTRY and k not in _BUILTINS]


class _CarriesRegisteredKernels:
    """Pickles the specs of user-registered kernel names with the estimator.

    A name registered with :func:`register_kernel` lives in one process's
    registry; joblib (loky) and Dask workers unpickle the estimator in
    another, where the name alone would be unknown. The spec travels with
    the estimator (its function pickled as the pickler can: by value with
    cloudpickle, which loky and Dask use) and is registered on arrival where
    the name is still free.
    """

    def __getstate__(self):
        state = super().__getstate__()
        specs = _user_specs(getattr(self, "kernel", None))
        if specs:
            state = dict(state, _kernelgd_registered=specs)
        return state

    def __setstate__(self, state):
        for spec in state.pop("_kernelgd_registered", ()):
            _REGISTRY.setdefault(spec.name, spec)
        super().__setstate__(state)


def get_spec(kernel):
    """The registry entry of a kernel name, KernelSpec or callable (private helper)."""
    if isinstance(kernel, KernelSpec):
        return kernel
    if callable(kernel):
        name = getattr(kernel, "__name__", "callable")
        return KernelSpec(name, kernel, (), True, None)
    if isinstance(kernel, str):
        key = _ALIASES.get(kernel, kernel)
        if key in _REGISTRY:
            return _REGISTRY[key]
        spec = _from_entry_points(key)
        if spec is not None:
            return spec
    raise ValueError(
        f"Unknown kernel {kernel!r}. Use one of {available_kernels()}, "
        "'precomputed', a callable f(X, Y) -> matrix, or register a new one "
        "with kernelgd.register_kernel. A registered name exists only in the process that "
        "registered it (and in estimators pickled from there): in other processes pass the "
        "KernelSpec that register_kernel returns as kernel=, or register the kernel through "
        f"the {ENTRY_POINT_GROUP!r} entry point."
    )


class BoundKernel:
    """A kernel with its parameters fixed: ``K = bound(X, Y)``.

    Validates what the kernel function returns, so no solver ever sees a
    wrongly shaped, infinite or NaN block.
    """

    def __init__(self, spec, params):
        self.spec = spec
        self.params = dict(params)
        self.name = spec.name
        self.psd = spec.psd
        self.writes_out = False
        try:
            sig = inspect.signature(spec.function)
        except (TypeError, ValueError):  # some builtins have no signature
            return
        self.writes_out = "out" in sig.parameters
        if "out" in self.params:
            raise ValueError(
                f"kernel_params may not set 'out' (the {spec.name} kernel's output "
                "buffer, managed by kernelgd). Remove it from kernel_params."
            )
        try:
            sig.bind(None, None, **self.params)
        except TypeError as exc:
            raise ValueError(
                f"The {spec.name} kernel does not accept the parameters "
                f"{sorted(self.params)}: {exc}. Check kernel_params."
            ) from None

    def fill(self, out, X, Y):
        """Write ``K(X, Y)`` into ``out`` (in place when the kernel supports it)."""
        if self.writes_out and out.dtype == X.dtype == Y.dtype:
            self.spec.function(X, Y, out=out, **self.params)
            self._check(out)
        else:
            out[...] = self(X, Y)

    def __call__(self, X, Y):
        """The block ``K(X, Y)``, in float32 if X and Y are float32."""
        if not isinstance(X, np.ndarray) and not sp.issparse(X):
            return self._call_array_api(X, Y)
        dtype = np.float32 if X.dtype == Y.dtype == np.float32 else np.float64
        try:
            K = np.asarray(self.spec.function(X, Y, **self.params), dtype=dtype)
        except TypeError as exc:  # numpy's ufunc type errors too: a kernel_params value of the wrong type
            if not self.params:
                raise
            raise ValueError(
                f"The {self.name} kernel failed with the parameters {self.params}: {exc}. "
                "Check the types of kernel_params."
            ) from exc
        expected = (X.shape[0], Y.shape[0])
        if K.shape != expected:
            raise ValueError(
                f"The {self.name} kernel returned shape {K.shape}; expected "
                f"{expected}, one row per X sample and one column per Y sample."
            )
        self._check(K)
        return K

    def _call_array_api(self, X, Y):
        """The block in X's array namespace and device (see kernelgd._array_api)."""
        from ._array_api import namespace
        from ._kernels_xp import KERNELS

        xp, _ = namespace(X, Y)
        if is_builtin(self.spec) and self.spec.name in KERNELS:
            K = KERNELS[self.spec.name](xp, X, Y, **self.params)
        else:  # a user's kernel gets the arrays as they are: it must support their namespace
            K = self.spec.function(X, Y, **self.params)
        expected = (X.shape[0], Y.shape[0])
        if tuple(K.shape) != expected:
            raise ValueError(
                f"The {self.name} kernel returned shape {tuple(K.shape)}; expected "
                f"{expected}, one row per X sample and one column per Y sample."
            )
        if not bool(xp.all(xp.isfinite(K))):
            params = f" with {self.params}" if self.params else ""
            raise ValueError(
                f"The {self.name} kernel{params} returned inf or NaN values for this "
                "data. Scale the features or change the kernel parameters."
            )
        return xp.astype(K, X.dtype)

    def _check(self, K):
        # One reduction finds any inf or NaN; the full test only if it fails
        # (a finite sum can overflow).
        with np.errstate(over="ignore", invalid="ignore"):
            total_finite = np.isfinite(K.sum())
        if not total_finite and not np.all(np.isfinite(K)):
            hint = (
                " In float32 the range ends at 3.4e38: options={'dtype': 'float64'} "
                "computes in float64." if K.dtype == np.float32 else ""
            )
            params = f" with {self.params}" if self.params else ""
            raise ValueError(
                f"The {self.name} kernel{params} returned inf or NaN values for this "
                "data. Scale the features or change the kernel parameters." + hint
            )

    def diag(self, X):
        """``k(X[i], X[i])`` for every row."""
        if not isinstance(X, np.ndarray) and not sp.issparse(X):
            from ._array_api import namespace
            from ._kernels_xp import DIAGONALS

            xp, _ = namespace(X)
            if is_builtin(self.spec) and self.spec.name in DIAGONALS:
                return DIAGONALS[self.spec.name](xp, X, **self.params)
            return xp.concat([
                xp.astype(xp.linalg.diagonal(self(X[i : i + 256], X[i : i + 256])), xp.float64)
                for i in range(0, X.shape[0], 256)
            ])
        if self.spec.diag is not None:
            return np.asarray(self.spec.diag(X, **self.params), dtype=np.float64)
        out = np.empty(X.shape[0])
        for start in range(0, X.shape[0], 256):
            block = X[start : start + 256]
            out[start : start + block.shape[0]] = np.diagonal(self(block, block))
        return out


def check_sigma(sigma, spec):
    """sigma as a float > 0, or as a 1-d float64 array of them where the kernel takes per-feature scales."""
    if isinstance(sigma, Real) and not isinstance(sigma, bool):
        if sigma > 0:
            return sigma
        raise ValueError(f"sigma must be a float > 0, got {sigma!r}.")
    if isinstance(sigma, str) or not np.ndim(sigma):
        raise ValueError(f"sigma must be a float > 0, got {sigma!r}.")
    if not spec.per_feature:
        raise ValueError(
            f"The {spec.name} kernel takes one scalar sigma, got an array: per-feature scales work with "
            "rbf, laplacian and exponential, and kernels registered with per_feature=True."
        )
    if not isinstance(sigma, (np.ndarray, list, tuple)) and hasattr(sigma, "shape"):  # another array namespace
        from ._array_api import to_numpy

        sigma = to_numpy(sigma)
    try:
        values = np.asarray(sigma, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a float > 0 or an array of them, got {sigma!r}.") from None
    if values.ndim != 1 or not values.size or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(
            f"Per-feature sigma must be a 1-d array of finite floats > 0, one per feature; got {sigma!r}."
        )
    return values


def bind_kernel(kernel, *, sigma=1.0, degree=3, coef0=1.0, kernel_params=None):
    """A :class:`BoundKernel` from a name or callable and the estimator params."""
    spec = get_spec(kernel)
    values = {"sigma": sigma, "degree": degree, "coef0": coef0}
    params = {p: values[p] for p in spec.params}
    params.update(kernel_params or {})
    if "sigma" in params:
        params["sigma"] = check_sigma(params["sigma"], spec)
    return BoundKernel(spec, params)


def kernel_matrix(X, Y=None, *, kernel="rbf", sigma=1.0, degree=3, coef0=1.0, **kernel_params):
    """The kernel matrix ``K[i, j] = k(X[i], Y[j])``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_X, n_features)
        Sparse X works with every built-in kernel and with kernels
        registered with ``sparse=True``.
    Y : {array-like, sparse matrix} of shape (n_Y, n_features), default=None
        ``None`` means ``Y = X``.
    kernel : str or callable, default="rbf"
        A registered name (see :func:`available_kernels`) or a callable
        ``f(X, Y, **kernel_params)`` returning the block.
    sigma : float or array-like of shape (n_features,), default=1.0
        Bandwidth of ``rbf``, ``exponential`` and ``laplacian``, and the
        scale of ``polynomial``'s inner product; an array gives each feature
        its own scale (see the module docstring).
    degree : float, default=3
        Degree of ``polynomial``.
    coef0 : float, default=1.0
        Constant of ``polynomial`` and ``sigmoid``.
    **kernel_params
        Further keyword arguments of the kernel function (``a`` of
        ``sigmoid``, the parameters of a registered or callable kernel).

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> from kernelgd import kernel_matrix
    >>> kernel_matrix([[0.0], [1.0]], kernel="rbf", sigma=1.0)
    array([[1.        , 0.36787944],
           [0.36787944, 1.        ]])
    """
    X = check_array(X, accept_sparse="csr", dtype=np.float64)
    Y = X if Y is None else check_array(Y, accept_sparse="csr", dtype=np.float64)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X has {X.shape[1]} features but Y has {Y.shape[1]}; they must match."
        )
    bound = bind_kernel(
        kernel, sigma=sigma, degree=degree, coef0=coef0, kernel_params=kernel_params
    )
    check_sparse_support(bound.spec, X, Y)
    return bound(X, Y)


def check_sparse_support(spec, *arrays):
    """A clear error where sparse input meets a kernel that does not declare it."""
    if not spec.sparse and any(sp.issparse(A) for A in arrays):
        raise ValueError(
            f"The {spec.name} kernel does not accept sparse input. Convert X with "
            "X.toarray(), use a built-in kernel, or register the kernel with "
            "register_kernel(..., sparse=True) if its function handles scipy.sparse."
        )
