"""The objective every solver minimises, written once.

``loss(F) + alpha * ||f||_H^2`` with ``F = K A + b``: for the full model the
penalty is ``sum_t A_t' K A_t``, read off the product ``K A`` the solver
already has; for a model on centers it is ``beta' K_mm beta``, computed as
``|T beta|^2`` (``K_mm + jitter = T'T``) so that rounding cannot make it
negative. The loss (kernelgd._losses) supplies values, gradients and
Hessians in F; solvers ask this object, never write the sum out.
"""

from .._array_api import blas_dot, is_float32, sum_of, triangular_dot


class Objective:
    """``loss.value(K A + b, Y, w) + alpha * penalty``, full model (``T=None``) or centers.

    Parameters
    ----------
    loss : a loss class of kernelgd._losses
    Y : array of shape (n, k)
    w : array of shape (n,)
        Sample weights summing to one.
    alpha : float
    T : array of shape (m, m), default=None
        The upper Cholesky factor of the centers' kernel matrix; None for the full model.
    """

    def __init__(self, loss, Y, w, alpha, T=None):
        self.loss, self.Y, self.w, self.alpha, self.T = loss, Y, w, alpha, T

    @property
    def centers(self):
        return self.T is not None

    def penalty(self, A, KA=None):
        """``||f||_H^2``: ``sum A * KA`` for the full model, ``|T A|^2`` on centers (a 0-d array)."""
        if self.T is not None:  # (a float32 T, of many centers: its product sums in float64)
            return sum_of((triangular_dot(self.T, A) if is_float32(self.T) else blas_dot(self.T, A)) ** 2)
        return sum_of(A, KA)

    def value(self, A, KA, b):
        """The objective of coefficients A (with ``KA = K A``) and intercepts b, as a float."""
        return float(self.value_sum(A, KA, b))

    def value_sum(self, A, KA, b):
        """The objective as a 0-d array on the arrays' device: no read from it."""
        value = self.loss.value(KA + b, self.Y, self.w)
        if self.alpha:
            value = value + self.alpha * self.penalty(A, KA)
        return value

    def baseline(self, fit_intercept):
        """The intercept-only model (the best constant, or zero) and its objective."""
        return self.loss.baseline(self.Y, self.w, fit_intercept)
