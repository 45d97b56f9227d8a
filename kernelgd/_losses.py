"""Losses of the prediction ``F`` against the targets ``Y`` with weights ``w``.

A loss gives its weighted value and its gradient with respect to the
predictions ``F = f(x_i)``; solvers combine these with the ridge term.
"""

import numpy as np


class SquaredLoss:
    """``sum_i w_i (F_i - Y_i)^2``, summed over target columns."""

    @staticmethod
    def value(F, Y, w):
        R = F - Y
        return float(np.einsum("i,ij,ij->", w, R, R))

    @staticmethod
    def gradient(F, Y, w):
        """d value / d F = 2 w_i (F_i - Y_i)."""
        return 2.0 * w[:, None] * (F - Y)
