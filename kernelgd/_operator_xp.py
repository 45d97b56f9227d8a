"""ArrayKernelOperator: KernelOperator's products for arrays of any array API namespace.

The same interface as :class:`kernelgd._operator.KernelOperator` (products,
rows, columns, diagonals), computed in the inputs' namespace and on their
device: K is stored whole when it fits in the memory budget, otherwise row
blocks are recomputed on every product. There is no thread pool: a GPU runs
each block's products in parallel itself.
"""

import numpy as np
from sklearn.utils import gen_batches

from ._array_api import float_dtype, namespace, take_columns, take_rows
from ._operator import MAX_BLOCK_BYTES, resolve_dtype


class ArrayKernelOperator:
    """The n x m training kernel matrix ``K = k(X, C)`` for arrays of an array API namespace.

    Parameters are those of :class:`kernelgd._operator.KernelOperator` but
    ``threads``; ``center_rows`` is a numpy index array. ``dtype`` is a
    numpy type (``np.float32`` or ``np.float64``) as for the numpy operator,
    so the solvers read one kind of dtype; the arrays use ``xp_dtype``.
    """

    def __init__(self, X, kernel, *, centers=None, memory_budget, dtype="auto", store=None, center_rows=None):
        xp, self.device = namespace(X)
        self.xp = xp
        self.kernel = kernel
        self.center_rows = None if centers is None or center_rows is None else np.asarray(center_rows)
        self.symmetric = centers is None
        self.n = X.shape[0]
        self.m = self.n if centers is None else centers.shape[0]
        self.dtype = resolve_dtype(dtype, self.n, self.m)
        self.xp_dtype = float_dtype(xp, self.dtype)
        self.itemsize = np.dtype(self.dtype).itemsize
        self.memory_budget = int(memory_budget)
        self.upper_only = False
        row_bytes = self.m * self.itemsize
        self.block_rows = int(max(1, min(self.n, min(MAX_BLOCK_BYTES * 8, self.memory_budget // 2) // row_bytes)))
        if kernel is None:  # precomputed: K is given
            self.X = self.C = None
            self.K = xp.astype(X, self.xp_dtype)
            return
        if kernel.spec.stationary:  # a common shift, taken before the cast, keeps float32 distances accurate
            X64 = xp.astype(X, xp.float64)
            shift = xp.mean(X64 if centers is None else xp.astype(centers, xp.float64), axis=0)
            X = X64 - shift
            centers = None if centers is None else xp.astype(centers, xp.float64) - shift
        self.X = self._compute_array(X)
        self.C = self.X if centers is None else self._compute_array(centers)
        if store is None:
            store = self.n * row_bytes <= self.memory_budget
        self.K = self.kernel(self.X, self.C) if store else None

    def _compute_array(self, X):
        xp = self.xp
        out = xp.astype(X, self.xp_dtype)
        if self.dtype == np.float32 and not bool(xp.all(xp.isfinite(out))):
            raise ValueError(
                "Some features exceed the float32 range (about 3.4e38) in which this fit "
                "computes the kernel. Scale the features (for example with "
                "sklearn.preprocessing.StandardScaler) or use options={'dtype': 'float64'}."
            )
        return out

    @property
    def stored(self):
        return self.K is not None

    def mirror_lower(self):
        """Nothing to do: a stored K is held whole."""

    def _f64(self, A):
        return self.xp.astype(A, self.xp.float64)

    def rows(self, idx):
        """``K[idx, :]`` for a slice or a numpy index array."""
        if self.K is not None:
            return self.K[idx, ...] if isinstance(idx, slice) else take_rows(self.xp, self.K, idx)
        X = self.X[idx, ...] if isinstance(idx, slice) else take_rows(self.xp, self.X, idx)
        return self.kernel(X, self.C)

    def columns(self, idx):
        """``K[:, idx]`` as float64, for a numpy index array of centers."""
        if self.symmetric:
            return self._f64(self.rows(idx)).T
        if self.K is not None:
            return self._f64(take_columns(self.xp, self.K, idx))
        return self._f64(self.kernel(self.X, take_rows(self.xp, self.C, idx)))

    def center_matrix(self):
        """``k(C, C)`` (m x m) in float64."""
        if self.kernel is None:
            return self._f64(self.K)
        C = self._f64(self.C)
        return self._f64(self.kernel(C, C))

    def diag(self):
        if self.K is not None and self.symmetric:
            return self._f64(self.xp.linalg.diagonal(self.K))
        return self.kernel.diag(self._f64(self.X))

    def center_diag(self):
        if self.symmetric:
            return self.diag()
        return self.kernel.diag(self._f64(self.C))

    def dot(self, block, V):
        """``block @ V`` in the compute dtype, returned as float64."""
        return self._f64(block @ self.xp.astype(V, self.xp_dtype))

    def _blocks(self):
        return list(gen_batches(self.n, self.block_rows))

    def matvec(self, V):
        """``K @ V`` for V of shape (m,) or (m, k); float64 result."""
        if self.K is not None:
            return self.dot(self.K, V)
        parts = [self.dot(self.rows(batch), V) for batch in self._blocks()]
        return parts[0] if len(parts) == 1 else self.xp.concat(parts, axis=0)

    def rmatvec(self, U):
        """``K.T @ U`` for U of shape (n,) or (n, k); float64 result."""
        if self.symmetric:
            return self.matvec(U)
        if self.K is not None:
            return self.dot(self.K.T, U)
        total = None
        for batch in self._blocks():
            part = self.dot(self.rows(batch).T, U[batch, ...])
            total = part if total is None else total + part
        return total

    def gram_matvec(self, V, w):
        """``(K.T W(K @ V), K @ V)``, as :meth:`kernelgd._operator.KernelOperator.gram_matvec`."""
        if not callable(w):
            weights = w[:, None] if w.ndim == 1 else w
            w = lambda rows, KV: weights[rows, ...] * KV  # noqa: E731
        if self.K is not None:
            KV = self.matvec(V)
            return self.rmatvec(w(slice(None), KV)), KV
        total, parts = None, []
        for batch in self._blocks():
            block = self.rows(batch)
            KV = self.dot(block, V)
            part = self.dot(block.T, w(batch, KV))
            total = part if total is None else total + part
            parts.append(KV)
        return total, parts[0] if len(parts) == 1 else self.xp.concat(parts, axis=0)


def array_cross_kernel_dot(kernel, Z, C, coef, *, memory_budget, dtype):
    """``k(Z, C) @ coef`` in row blocks of Z, for arrays of an array API namespace."""
    if kernel is None:
        xp, _ = namespace(Z)
        return xp.astype(Z, xp.float64) @ coef
    op = ArrayKernelOperator(Z, kernel, centers=C, memory_budget=memory_budget, dtype=dtype, store=False)
    return op.matvec(coef)
