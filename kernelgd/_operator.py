"""KernelOperator: the only code that evaluates kernel matrices for fitting.

Solvers see the training kernel matrix K only through ``K @ V``, row blocks
``K[rows]`` and ``diag(K)``. The operator stores K whole when it fits in the
memory budget and otherwise recomputes row blocks on every product, so the
memory a fit needs stays bounded whatever n is.
"""

import numpy as np
from sklearn.utils import gen_batches

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes: 1 GiB


class KernelOperator:
    """The n x n training kernel matrix, as products and row blocks.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training inputs; for ``kernel=None`` the precomputed (n, n) matrix.
    kernel : BoundKernel or None
        The kernel with its parameters; None when X is precomputed.
    memory_budget : int
        Bytes that K (or one row block of it) may take.
    """

    def __init__(self, X, kernel, *, memory_budget=DEFAULT_MEMORY_BUDGET):
        self.X = X
        self.kernel = kernel
        self.n = X.shape[0]
        self.memory_budget = int(memory_budget)
        itemsize = 8
        # At least one row at a time, whatever the budget.
        self.block_rows = max(1, min(self.n, self.memory_budget // (itemsize * max(self.n, 1))))
        if kernel is None:
            self.K = X
        elif self.block_rows >= self.n:
            self.K = kernel(X, X)
        else:
            self.K = None

    @property
    def stored(self):
        """Whether K is held whole in memory."""
        return self.K is not None

    def rows(self, idx):
        """``K[idx, :]`` for a slice or an index array."""
        if self.K is not None:
            return self.K[idx]
        return self.kernel(self.X[idx], self.X)

    def matvec(self, V):
        """``K @ V`` for V of shape (n,) or (n, k)."""
        if self.K is not None:
            return self.K @ V
        out = np.empty((self.n,) + V.shape[1:])
        for batch in gen_batches(self.n, self.block_rows):
            out[batch] = self.rows(batch) @ V
        return out

    def diag(self):
        """``diag(K)`` without forming K."""
        if self.K is not None:
            return np.diagonal(self.K).copy()
        return self.kernel.diag(self.X)


def cross_kernel_dot(kernel, Z, X, coef, *, memory_budget=DEFAULT_MEMORY_BUDGET):
    """``K(Z, X) @ coef`` in row blocks of Z, under the memory budget.

    With ``kernel=None``, Z is a precomputed (n_Z, n_X) kernel matrix.
    """
    if kernel is None:
        return Z @ coef
    rows = max(1, memory_budget // (8 * max(len(X), 1)))
    out = np.empty((len(Z),) + coef.shape[1:])
    for batch in gen_batches(len(Z), rows):
        out[batch] = kernel(Z[batch], X) @ coef
    return out
