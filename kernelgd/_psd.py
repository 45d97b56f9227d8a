"""Is a kernel positive semi-definite on given data? (``check_psd``)

A kernel ``k(x, z) = phi(x)' phi(z)`` gives matrices ``K = Phi Phi'``, and
``a' K a = ||Phi' a||^2 >= 0`` for every ``a``: every eigenvalue of ``K`` is
non-negative. A function that is not such an inner product (the sigmoid
kernel, a hand-written similarity) can give negative eigenvalues, and then
the ridge objective is no longer convex.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh_tridiagonal
from sklearn.utils.validation import check_array

from ._array_api import rows_of, to_numpy
from ._operator import KernelOperator, single_threaded_blas
from .kernels import bind_kernel, check_sparse_support

# Dense eigenvalues up to this size: exact, and about a second on 2 cores.
DENSE_MAX_SAMPLES = 2000
# Lanczos steps for larger n: the extreme Ritz values converge first.
LANCZOS_STEPS = 120
# Eigenvalues below -tol * max|eigenvalue| are "clearly negative"; the default tol is this many eps per sample,
# far above a PSD matrix's rounding (about n eps) and far below a real violation.
TOL_EPS_PER_SAMPLE = 100
# The probe a fit runs on a declared-PSD user kernel uses at most this many rows.
PROBE_SAMPLES = 200


@dataclass(frozen=True)
class PSDResult:
    """The verdict of :func:`check_psd`.

    Attributes
    ----------
    min_eigenvalue : float
        Smallest eigenvalue of the kernel matrix (with ``method="lanczos"``
        an upper bound on it: a Ritz value).
    max_eigenvalue : float
        Largest eigenvalue.
    is_psd : bool
        True when no eigenvalue is below ``-threshold`` and the matrix is
        symmetric.
    n_negative : int
        Number of eigenvalues below ``-threshold`` (with
        ``method="lanczos"`` a lower bound: the Ritz values below it).
    threshold : float
        ``tol * max(|min_eigenvalue|, |max_eigenvalue|)``, the size under
        which a negative eigenvalue counts as rounding.
    symmetric : bool
        Whether ``K == K.T`` up to ``threshold``; a kernel must be symmetric.
    method : {"dense", "lanczos"}
        How the eigenvalues were computed.
    n_samples : int
        Size of the kernel matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import check_psd
    >>> result = check_psd(np.random.RandomState(0).normal(size=(50, 2)), kernel="rbf", sigma=1.0)
    >>> result.is_psd, result.method, result.n_samples
    (True, 'dense', 50)
    """

    min_eigenvalue: float
    max_eigenvalue: float
    is_psd: bool
    n_negative: int
    threshold: float
    symmetric: bool
    method: str
    n_samples: int


def check_psd(X, *, kernel="rbf", sigma=1.0, degree=3, coef0=1.0, tol=None, method="auto", **kernel_params):
    """Check whether a kernel's matrix on X is positive semi-definite.

    A valid kernel is an inner product of feature maps, ``k(x, z) =
    phi(x)' phi(z)``, so its matrix is ``K = Phi Phi'`` and ``a' K a =
    ||Phi' a||^2 >= 0``: no eigenvalue is negative. A function that is not an
    inner product of feature maps can break this, as the sigmoid kernel
    ``tanh(a x'z + c)`` does for most ``a`` and ``c``; the ridge objective
    is then not convex and gradient descent may diverge.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features) or (n_samples, n_samples)
        Inputs, or the kernel matrix itself with ``kernel="precomputed"``.
    kernel : str, callable or KernelSpec, default="rbf"
        A registered kernel name, a callable ``f(X, Y, **kernel_params)``, a
        :class:`~kernelgd.kernels.KernelSpec`, or ``"precomputed"``.
    sigma : float or array-like of shape (n_features,), default=1.0
        Bandwidth of rbf, exponential and laplacian; the polynomial kernel's scale.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial and sigmoid kernels.
    tol : float, default=None
        Relative tolerance: eigenvalues below ``-tol`` times the largest
        eigenvalue magnitude count as negative. None means ``100 *
        n_samples * eps`` (eps of float64), well above the rounding error of
        a computed PSD matrix.
    method : {"auto", "dense", "lanczos"}, default="auto"
        ``"dense"`` computes every eigenvalue (O(n^2) memory, O(n^3) time);
        ``"lanczos"`` runs a fixed number of Lanczos steps on products with
        the kernel operator (memory in blocks), from a fixed start vector,
        so the result is deterministic. ``"auto"``: dense up to 2000
        samples.
    **kernel_params
        Further keyword arguments of the kernel function (``a`` of sigmoid).

    Returns
    -------
    result : PSDResult
        ``min_eigenvalue``, ``max_eigenvalue``, ``is_psd``, ``n_negative``
        and how they were obtained.

    Notes
    -----
    With ``method="lanczos"`` each reported eigenvalue is a Ritz value: by
    Cauchy interlacing the k-th smallest Ritz value is at least the k-th
    smallest eigenvalue. A negative verdict is therefore certain, while a
    positive one means that the Lanczos steps found no negative direction.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import check_psd
    >>> X = np.random.RandomState(0).normal(size=(100, 3))
    >>> check_psd(X, kernel="rbf", sigma=1.0).is_psd
    True
    >>> result = check_psd(X, kernel="sigmoid", a=1.0, coef0=1.0)
    >>> result.is_psd, result.min_eigenvalue < 0
    (False, True)
    """
    if method not in ("auto", "dense", "lanczos"):
        raise ValueError(f"method must be 'auto', 'dense' or 'lanczos', got {method!r}.")
    if tol is not None and not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a non-negative number or None, got {tol!r}.")
    X = check_array(X, accept_sparse="csr", dtype=np.float64)
    n = X.shape[0]
    if kernel == "precomputed":
        if X.shape[0] != X.shape[1]:
            raise ValueError(
                f"With kernel='precomputed' X must be the square kernel matrix; got shape {X.shape}."
            )
        bound = None
    else:
        bound = bind_kernel(kernel, sigma=sigma, degree=degree, coef0=coef0, kernel_params=kernel_params)
        check_sparse_support(bound.spec, X)
    tol = TOL_EPS_PER_SAMPLE * n * np.finfo(np.float64).eps if tol is None else float(tol)
    if method == "auto":
        method = "dense" if n <= DENSE_MAX_SAMPLES else "lanczos"
    with single_threaded_blas():  # multithreaded LAPACK is hazardous here; see _operator
        if method == "dense":
            K = X.toarray() if bound is None and sp.issparse(X) else X if bound is None else bound(X, X)
            asymmetry = float(np.max(np.abs(K - K.T))) if n else 0.0
            eigenvalues = np.linalg.eigvalsh((K + K.T) / 2)
        else:
            operator = KernelOperator(X.toarray() if bound is None and sp.issparse(X) else X, bound, dtype="float64")
            eigenvalues, asymmetry = _lanczos_ritz_values(operator), _asymmetry_probe(operator)
    return _verdict(eigenvalues, asymmetry, tol, method, n)


def _verdict(eigenvalues, asymmetry, tol, method, n):
    low, high = (float(eigenvalues[0]), float(eigenvalues[-1])) if len(eigenvalues) else (0.0, 0.0)
    threshold = tol * max(abs(low), abs(high))
    n_negative = int(np.sum(eigenvalues < -threshold))
    symmetric = asymmetry <= threshold
    return PSDResult(
        min_eigenvalue=low, max_eigenvalue=high, is_psd=bool(n_negative == 0 and symmetric),
        n_negative=n_negative, threshold=float(threshold), symmetric=bool(symmetric), method=method,
        n_samples=n,
    )


def _lanczos_ritz_values(operator, steps=LANCZOS_STEPS):
    """Ritz values of ``K`` after ``steps`` Lanczos steps, fully reorthogonalised."""
    n = operator.n
    steps = min(steps, n)
    V = np.zeros((steps, n))
    v = np.random.RandomState(0).normal(size=n)  # fixed start: deterministic
    V[0] = v / np.linalg.norm(v)
    diag, off = np.zeros(steps), np.zeros(max(steps - 1, 0))
    for j in range(steps):
        u = operator.matvec(V[j])
        diag[j] = V[j] @ u
        # Two passes of Gram-Schmidt against every earlier vector keep the
        # basis orthogonal, so no spurious copies of converged Ritz values.
        for _ in range(2):
            u -= V[: j + 1].T @ (V[: j + 1] @ u)
        if j == steps - 1:
            break
        beta = np.linalg.norm(u)
        if beta <= 1e-12 * max(abs(diag[: j + 1]).max(), 1e-300):  # an invariant subspace: exact
            diag, off = diag[: j + 1], off[:j]
            break
        off[j] = beta
        V[j + 1] = u / beta
    return eigh_tridiagonal(diag, off, eigvals_only=True)


def _asymmetry_probe(operator):
    """``max |K - K'|`` over a deterministic sample of rows (the whole K is never formed)."""
    idx = np.unique(np.linspace(0, operator.n - 1, min(operator.n, 64)).astype(int))
    if operator.kernel is None:
        rows, columns = operator.K[idx], operator.K[:, idx].T
    else:
        rows = operator.kernel(operator.X[idx], operator.X)
        columns = operator.kernel(operator.X, operator.X[idx]).T
    return float(np.max(np.abs(rows - columns)))


def probe_psd(kernel, X):
    """The smallest and largest eigenvalues of ``kernel`` on a fixed subsample of X if clearly not PSD, else None.

    Used by ``fit`` for user kernels declared PSD: a few milliseconds on
    :data:`PROBE_SAMPLES` evenly spaced rows.
    """
    idx = np.unique(np.linspace(0, X.shape[0] - 1, min(X.shape[0], PROBE_SAMPLES)).astype(int))
    rows = rows_of(X, idx)
    K = np.asarray(to_numpy(kernel(rows, rows)), dtype=np.float64)
    asymmetry = float(np.max(np.abs(K - K.T))) if len(idx) else 0.0
    eigenvalues = np.linalg.eigvalsh((K + K.T) / 2)
    result = _verdict(eigenvalues, asymmetry, TOL_EPS_PER_SAMPLE * len(idx) * np.finfo(np.float64).eps, "dense", len(idx))
    return None if result.is_psd else result
