"""What newton's steps share: CG's caps and tolerances, the damping, the preconditioners' factors."""

from dataclasses import dataclass
from typing import NamedTuple

from ..._array_api import xp_of

# Levenberg-Marquardt damping (relative to the weighted kernel's trace) where 2 alpha is below
# LM_ALPHA of it: its start, and its range.
LM_ALPHA = 1e-10
LM_START = 1e-3
LM_MIN = 1e-9
LM_MAX = 1e3
# A damped step's CG run is truncated here: any of its iterates is a descent direction.
LM_INNER = 50
# A preconditioner factor made for some Hessian weights is remade where they moved by REFACTOR_CHANGE (L1
# share), or its shift by REFACTOR_RATIO, since: a stale factor costs CG iterations, a new one flops.
REFACTOR_CHANGE = 0.05
REFACTOR_RATIO = 1.25


class Step(NamedTuple):
    """A direction's outcome: the new coefficients, intercepts, K (or K_nm) times the coefficients,
    and the CG iterations it took."""

    A: object
    b: object
    KA: object
    n_inner: int


@dataclass
class Steps:
    """The state the directions share across a fit (and a search path's fits, through ``reuse``)."""

    inner_cap: int  # CG's iteration cap (shortened after a failed direction, grown back after a step)
    exact_tol: float = 0.0  # an exact step's tolerance, relative to the right-hand side
    inner_tol: float = 0.0  # this step's tolerance
    loose: bool = False  # whether this step is inexact
    status: str = None  # the last CG run's status
    damping: float = 0.0  # Levenberg-Marquardt damping of the full model (0: none)
    lm: float = LM_START  # that damping relative to the weighted kernel's trace
    centers: object = None  # center_factors' CenterFactors of a model on centers (None for dense steps)
    L: object = None  # the full model's Nystroem factor of K
    rank: int = None  # the leading columns of L the preconditioner uses (None: all)
    factors: object = None  # the full model's per-column preconditioner factors (FullFactors)
    floored: bool = False  # whether the last centers step's ridge was CENTERS_MIN_RIDGE's floor, not 2 alpha
    unfloored: bool = False  # centers steps solve with 2 alpha itself (the floor then only preconditions)
    dense: object = None  # few centers where CG is not to be trusted: _dense_newton's features (dense steps)
    class_factors: list = None  # the softmax's per-class FALKON factors on centers (ClassFactor), where kept


def damping(steps, operator, H, alpha):
    """The Levenberg-Marquardt damping of the full model's Newton step (0 where the ridge suffices): without
    ridge (alpha below ``LM_ALPHA`` times the weighted kernel's trace) the diagonal model is singular, and
    ``damping * |x - x0|^2`` added to it makes its minimiser a descent direction. The damping shrinks after
    full steps and grows after damped ones.
    """
    scale = float(xp_of(H).max(operator.diag() @ H))
    if not 2.0 * alpha < LM_ALPHA * scale:
        return 0.0
    lm = steps.lm
    return max(lm * scale, 2.0 * alpha)


def shorten(steps, n_inner):
    """After a failed direction: whether to retry, with more damping (up to ``LM_MAX``) or a shorter CG run (an
    unconverged run's earlier iterates are descent directions: truncated Newton). A converged run's failure is
    rounding at the optimum.
    """
    if steps.damping and steps.lm < LM_MAX:
        steps.lm = min(LM_MAX, 16 * steps.lm)
        return True
    if n_inner <= 1 or steps.status == "converged":
        return False
    steps.inner_cap = max(1, n_inner // 4)
    return True
