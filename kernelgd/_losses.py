"""Losses of the predictions ``F`` against the targets ``Y`` with weights ``w``.

A loss is one small class: its weighted value, its gradient and Hessian-vector
product with respect to the predictions ``F = f(x_i)`` (one column per
target or class), the best constant model (the intercept-only baseline), and
the bounds solvers need (the curvature for a stable step). Solvers combine
these with the ridge term and never hard-code a loss.

=================  ==================================  =======================
loss               l(f, y) per sample                   targets Y
=================  ==================================  =======================
squared            sum_c (f_c - y_c)^2                  any real columns
binary logistic    log(1 + exp(-y f))                   one column of +-1
multinomial        logsumexp(f) - sum_c y_c f_c         one-hot rows (0 / 1)
=================  ==================================  =======================
"""

import numpy as np

from ._array_api import (
    cast, clip_min, expit, log_expit, logsumexp, row_dot, scalar_sum, softmax, sum_of, weighted_sum, xp_of, zeros_as,
)

# Probabilities of the baseline are kept this far from 0 and 1, so that a
# class without weight gives a large finite intercept instead of inf.
P_MIN = 1e-12


def baseline_fits(loss, value0, n_columns):
    """Whether the intercept-only model is the fit already (``value0`` its objective, weights summing to 1): a
    logistic loss whose labels of positive weight are all of one class, which the baseline predicts with every
    other class at ``P_MIN``. No finite model reaches the infimum 0; steps would only chase an intercept."""
    return loss is not SquaredLoss and value0 <= (n_columns + 1) * P_MIN


class SquaredLoss:
    """``sum_i w_i (F_i - Y_i)^2``, summed over target columns."""

    name = "squared"
    # sup of d^2 l / d f^2: the stable gradient step scales with its inverse
    curvature = 2.0
    # whether the Hessian in F is diagonal (no coupling between columns)
    diagonal_hessian = True

    @staticmethod
    def value(F, Y, w):
        R = F - Y
        return sum_of(R, R, w)

    @staticmethod
    def gradient(F, Y, w):
        """d value / d F = 2 w_i (F_i - Y_i)."""
        return 2.0 * w[:, None] * (F - Y)

    @staticmethod
    def hessp(F, Y, w, V):
        """The Hessian of value in F times V: 2 w_i V_i."""
        return 2.0 * w[:, None] * V

    @staticmethod
    def hessian_diagonal(F, w):
        """The diagonal of the Hessian in F, one column per target: 2 w_i."""
        return xp_of(F).broadcast_to(2.0 * w[:, None], F.shape)

    @staticmethod
    def baseline(Y, w, fit_intercept):
        """The best constant model (the weighted mean, or zero) and its value."""
        b = weighted_sum(w, Y) if fit_intercept else zeros_as(Y, Y.shape[1])
        R = Y - b
        return b, scalar_sum(R, R, w)

    @staticmethod
    def prediction_scale(value0):
        """The size of predictions that matter, for the rounding check: the targets' spread."""
        return np.sqrt(value0)

    @staticmethod
    def noise_effect(value0, noise):
        """How much prediction noise of this root mean square can lower the value at most."""
        return 2.0 * np.sqrt(value0) * noise


class BinaryLogisticLoss:
    """``sum_i w_i log(1 + exp(-y_i f_i))`` for one column of +-1 targets."""

    name = "logistic"
    curvature = 0.25
    diagonal_hessian = True

    @staticmethod
    def value(F, Y, w):
        xp = xp_of(F)
        return -(w @ xp.sum(log_expit(Y * F), axis=1))

    @staticmethod
    def gradient(F, Y, w):
        """d value / d F = -w_i y_i sigmoid(-y_i f_i)."""
        return -w[:, None] * Y * expit(-Y * F)

    @staticmethod
    def hessian_diagonal(F, w):
        """The (diagonal) Hessian in F: w_i p_i (1 - p_i)."""
        p = expit(F)
        return w[:, None] * p * (1.0 - p)

    @classmethod
    def hessp(cls, F, Y, w, V):
        return cls.hessian_diagonal(F, w) * V

    @classmethod
    def baseline(cls, Y, w, fit_intercept):
        """The log-odds of the weighted positive share (or zero) and its value."""
        xp = xp_of(Y)
        if fit_intercept:
            positive = float(w @ cast(Y[:, 0] > 0, np.float64))
            p = float(np.clip(positive / float(xp.sum(w)), P_MIN, 1 - P_MIN))
            b = zeros_as(Y, 1) + float(np.log(p) - np.log1p(-p))
        else:
            b = zeros_as(Y, 1)
        return b, float(cls.value(xp.broadcast_to(b, Y.shape), Y, w))

    @staticmethod
    def probabilities(F):
        """Rows of class probabilities ``[1 - p, p]`` from one column of scores."""
        p = expit(F[:, 0])
        return xp_of(F).stack([1.0 - p, p], axis=1)

    @staticmethod
    def log_probabilities(F):
        return xp_of(F).stack([log_expit(-F[:, 0]), log_expit(F[:, 0])], axis=1)

    @staticmethod
    def prediction_scale(value0):
        return 1.0  # scores are log-odds: noise is compared with one unit

    @staticmethod
    def noise_effect(value0, noise):
        return noise  # |d l / d f| <= 1 and the weights sum to one


class MultinomialLoss:
    """``sum_i w_i (logsumexp(F_i) - Y_i . F_i)`` for one-hot rows Y (softmax cross-entropy)."""

    name = "logistic"
    # the largest eigenvalue of diag(p) - p p' is at most 1/2
    curvature = 0.5
    diagonal_hessian = False
    # a constant added to every class's score changes nothing: the unpenalised intercepts
    # are determined up to it, and are returned summing to zero
    shift_invariant = True

    @staticmethod
    def value(F, Y, w):
        return w @ (logsumexp(F, axis=1) - row_dot(Y, F))

    @staticmethod
    def gradient(F, Y, w):
        """d value / d F = w_i (softmax(F_i) - Y_i)."""
        return w[:, None] * (softmax(F, axis=1) - Y)

    @staticmethod
    def hessp(F, Y, w, V):
        """w_i (diag(p_i) - p_i p_i') V_i, row by row."""
        P = softmax(F, axis=1)
        PV = P * V
        return w[:, None] * (PV - P * xp_of(PV).sum(PV, axis=1, keepdims=True))

    @staticmethod
    def hessian_diagonal(F, w):
        """The diagonal of the Hessian in F: w_i p_ic (1 - p_ic) (the classes also couple)."""
        P = softmax(F, axis=1)
        return w[:, None] * P * (1.0 - P)

    @classmethod
    def baseline(cls, Y, w, fit_intercept):
        """The log of the weighted class shares, centred (or zero), and its value."""
        xp = xp_of(Y)
        if fit_intercept:
            logp = xp.log(clip_min(w @ Y / xp.sum(w), P_MIN))
            b = logp - xp.mean(logp)
        else:
            b = zeros_as(Y, Y.shape[1])
        return b, float(cls.value(xp.broadcast_to(b, Y.shape), Y, w))

    @staticmethod
    def probabilities(F):
        return softmax(F, axis=1)

    @staticmethod
    def log_probabilities(F):
        return F - logsumexp(F, axis=1, keepdims=True)

    @staticmethod
    def prediction_scale(value0):
        return 1.0

    @staticmethod
    def noise_effect(value0, noise):
        return np.sqrt(2.0) * noise  # |grad_f l| <= sqrt(2)
