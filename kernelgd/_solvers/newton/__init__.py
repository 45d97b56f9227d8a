"""Solver "newton": damped Newton steps for smooth losses, each solved by conjugate gradient.

For a loss with gradient ``G`` and Hessian diagonal ``h`` in the predictions ``F``, the second-order
model ``1/2 sum_i h_i (f'_i - z_i)^2 + alpha ||f'||_H^2`` (``z = F - G / h``) is a weighted kernel
ridge problem (iteratively reweighted least squares), solved by preconditioned CG for every class at
once. For the binary logistic and the squared loss this is Newton's method. The softmax's Hessian
couples the classes: on centers, and for the full model where the ridge conditions it, its steps are
exact Newton steps on the coupled Hessian; elsewhere the diagonal model's step is taken in the plane
of the previous steps that minimises the exact second-order model there. One direction is chosen
per fit (``_directions``); a backtracking line search on the true objective makes every step a decrease.

Invariants (``_run``):

* every accepted iterate decreases the objective, is logged, and reaches the callback; the model
  returned is the best logged iterate whose predictions are not the kernel's rounding;
* convergence (the Newton decrement at most ``tol**2`` times the intercept-only objective) is only
  declared on a step whose second-order model is the objective's own, whose CG run was exact, and on
  the exactly recomputed ``K A``;
* a stop for any other reason (``Stop``) warns, saying why and what to change.

Steps are inexact far from the optimum, exact near it. Without ridge the full model's diagonal model
is singular: its steps are damped (Levenberg-Marquardt, ``_steps``). A large full model starts from a
subsample's fit (``_start``).
"""

from ._run import Stop, solve

# What this solver minimises: its losses, and its models (all points as centers, or n_centers).
LOSSES = {"squared", "logistic"}
MODELS = {"full", "centers"}

__all__ = ["LOSSES", "MODELS", "Stop", "solve"]
