"""The built-in kernels on any array API namespace (torch, CuPy, array-api-strict, ...).

The same formulas as :mod:`kernelgd.kernels`, written with the standard's
functions only, so that a kernel block is computed on the device its inputs
live on. numpy inputs never come here: their kernels keep the tuned numpy code.
"""

import numpy as np

from ._array_api import take_rows, to_numpy

# Bytes of the (rows, m, n_features) temporary of an L1 distance block.
L1_CHUNK_BYTES = 64 << 20


def _scale(xp, X, sigma, power):
    """``1 / sigma**power`` as a Python float or a (n_features,) array of X's namespace."""
    value = 1.0 / np.asarray(sigma, dtype=np.float64) ** power
    if not np.all(np.isfinite(value)):
        raise ValueError(
            f"sigma={sigma!r} is too small: 1 / sigma**{power} overflows float64. Use a larger sigma, "
            "or scale the features up."
        )
    if value.ndim == 0:
        return float(value)
    if value.shape != (X.shape[1],):
        raise ValueError(
            f"sigma has shape {value.shape} but X has {X.shape[1]} features: per-feature "
            "scales need one entry per feature."
        )
    return xp.asarray(value, dtype=X.dtype, device=X.device)


def _centred_scaled(xp, X, Y, scale):
    """``(X - c) * scale`` and ``(Y - c) * scale``, c the mean of Y: distances are shift-invariant,
    and their expansion loses digits for features far from zero."""
    c = xp.mean(Y, axis=0) if Y.shape[0] else xp.zeros(Y.shape[1], dtype=Y.dtype, device=Y.device)
    return (X - c) * scale, (Y - c) * scale


def _sq_distances(xp, X, Y):
    """``||x - z||^2`` by the expansion ``|x|^2 - 2 x'z + |z|^2``, clipped at 0."""
    xx = xp.sum(X * X, axis=1)
    yy = xp.sum(Y * Y, axis=1)
    D = xx[:, None] + yy[None, :] - 2.0 * (X @ Y.T)
    return xp.clip(D, min=0.0)


def rbf(xp, X, Y, sigma=1.0):
    Xs, Ys = _centred_scaled(xp, X, Y, _scale(xp, X, sigma, 1))
    return xp.exp(-_exact_far_rows(xp, _sq_distances(xp, Xs, Ys), Xs, Ys))


def _exact_far_rows(xp, D, X, Y):
    """D with the rows and columns of far points recomputed directly, in float64.

    The expansion rounds entry (i, j) by up to ``8 eps (|x_i|^2 + |z_j|^2)``:
    where a row's own term exceeds sqrt(eps) / 2 (in float32, points
    13.5 widths from the data's mean) a near-duplicate pair's kernel value
    moves by more than sqrt(eps). Those rows and columns, few, are
    recomputed whole (numpy's path recomputes only their entries near 0,
    with fancy indexing the standard lacks); finding them reads the n + m
    norms on the host. In float64 no row of ordinary data gets there.
    """
    eps = float(np.finfo(np.float32 if D.dtype == xp.float32 else np.float64).eps)
    far = np.sqrt(eps) / (16 * eps)
    rows = np.flatnonzero(np.asarray(to_numpy(xp.sum(X * X, axis=1))) > far)
    cols = np.flatnonzero(np.asarray(to_numpy(xp.sum(Y * Y, axis=1))) > far)
    if rows.size:
        D = _replace_rows(xp, D, rows, _direct_sq_distances(xp, take_rows(xp, X, rows), Y))
    if cols.size:
        D = _replace_rows(xp, D.T, cols, _direct_sq_distances(xp, take_rows(xp, Y, cols), X)).T
    return D


def _direct_sq_distances(xp, X, Y):
    """``||x - z||^2`` summed feature by feature, in float64, cast to X's dtype."""
    X64, Y64 = xp.astype(X, xp.float64), xp.astype(Y, xp.float64)
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
    return xp.where(mask[:, None], take_rows(xp, E, position), D)


def exponential(xp, X, Y, sigma=1.0):
    per_feature = np.ndim(sigma) > 0
    dtype = X.dtype
    # distances (not squared) in float64: the square root would amplify the expansion's rounding
    X64, Y64 = xp.astype(X, xp.float64), xp.astype(Y, xp.float64)
    Xs, Ys = _centred_scaled(xp, X64, Y64, _scale(xp, X64, sigma, 2 if per_feature else 1))
    D = xp.sqrt(_sq_distances(xp, Xs, Ys))
    factor = 0.5 if per_feature else 1.0 / (2.0 * float(sigma))
    return xp.astype(xp.exp(-factor * D), dtype)


def laplacian(xp, X, Y, sigma=1.0):
    Xs, Ys = _centred_scaled(xp, X, Y, _scale(xp, X, sigma, 1))
    n, m, d = Xs.shape[0], Ys.shape[0], max(Xs.shape[1], 1)
    rows = max(1, L1_CHUNK_BYTES // max(1, m * d * 8))
    blocks = [
        xp.sum(xp.abs(Xs[start : min(start + rows, n), None, :] - Ys[None, :, :]), axis=2)
        for start in range(0, n, rows)
    ]
    D = blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)
    return xp.exp(-D)


def linear(xp, X, Y):
    return X @ Y.T


def polynomial(xp, X, Y, degree=3, coef0=1.0, sigma=1.0):
    K = ((X @ Y.T) / sigma**2 + coef0) ** degree
    if not bool(xp.all(xp.isfinite(K))):
        if bool(xp.any(xp.isnan(K))):
            raise ValueError(
                f"The polynomial kernel with non-integer degree={degree} is "
                "undefined where coef0 + x'z / sigma**2 < 0. Use an integer degree or a larger coef0."
            )
        raise ValueError(
            "The polynomial kernel is not representable in this precision for this data: "
            "(coef0 + x'z) ** degree overflows. Standardize or scale down the features, or "
            "choose a smaller degree."
        )
    return K


def sigmoid(xp, X, Y, coef0=1.0, a=None):
    a = 1.0 / X.shape[1] if a is None else a
    return xp.tanh(a * (X @ Y.T) + coef0)


def all_subsets(xp, X, Y):
    K = xp.ones((X.shape[0], Y.shape[0]), dtype=X.dtype, device=X.device)
    for k in range(X.shape[1]):
        K = K * (1.0 + X[:, k : k + 1] * Y[:, k][None, :])
    if not bool(xp.all(xp.isfinite(K))):
        raise ValueError(
            "The all_subsets kernel is not representable in this precision for this data: a "
            "product of factors (1 + x_k z_k) overflows. Standardize or scale down the features."
        )
    return K


KERNELS = {
    "rbf": rbf, "exponential": exponential, "laplacian": laplacian, "linear": linear,
    "polynomial": polynomial, "sigmoid": sigmoid, "all_subsets": all_subsets,
}


def _ones(xp, X, **_):
    return xp.ones(X.shape[0], dtype=xp.float64, device=X.device)


def _sq_norms(xp, X):
    X = xp.astype(X, xp.float64)
    return xp.sum(X * X, axis=1)


DIAGONALS = {
    "rbf": _ones, "exponential": _ones, "laplacian": _ones,
    "linear": lambda xp, X: _sq_norms(xp, X),
    "polynomial": lambda xp, X, degree=3, coef0=1.0, sigma=1.0: (_sq_norms(xp, X) / sigma**2 + coef0) ** degree,
    "sigmoid": lambda xp, X, coef0=1.0, a=None: xp.tanh(
        (1.0 / X.shape[1] if a is None else a) * _sq_norms(xp, X) + coef0),
    "all_subsets": lambda xp, X: xp.prod(1.0 + xp.astype(X, xp.float64) ** 2, axis=1),
}
