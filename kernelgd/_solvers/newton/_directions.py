"""Which direction a fit's Newton steps take, chosen once per fit (``choose``).

Every direction is called as ``direction(F, G, H, A, KA, b)`` (predictions, the loss's gradient and
Hessian diagonal in them, the iterate) and returns a ``Step``; its ``exact`` says whether its
second-order model is the objective's own (the softmax's diagonal model's is not).

* ``Dense``: few centers, or a tiny full model: the exact step, formed and factored (``_dense_newton``);
* ``CentersDiagonal`` / ``CentersCoupled``: a model on centers, for a diagonal / the softmax's Hessian;
* ``FullDiagonal`` / ``FullCoupled``: the full model; the softmax takes the coupled, exact steps only
  where the ridge is large against K's largest eigenvalue (``COUPLED_MAX_CONDITION``, or
  ``STARTED_MAX_CONDITION`` from a subsample's fit): undamped exact steps need ever more steps and CG
  iterations as that ratio grows (bench_softmax_steps.py).
"""

from .. import _dense_newton
from . import _centers, _full
from ._steps import Step

COUPLED_MAX_CONDITION = 10_000.0
STARTED_MAX_CONDITION = 20_000.0
# Up to this ratio the exact steps precondition with the Nystroem factor's leading half (at least
# MIN_LANDMARKS columns): a large ridge hides K's smaller eigenvalues.
HALF_RANK_MAX_CONDITION = COUPLED_MAX_CONDITION / 2


class Dense:
    """The exact Newton step from ``steps.dense``'s features, formed and factored densely."""

    exact = True
    tight = False

    def __init__(self, operator, settings, steps, loss, w):
        self.settings, self.steps, self.loss, self.w = settings, steps, loss, w

    def __call__(self, F, G, H, A, KA, b):
        settings = self.settings
        D, db, KD = _dense_newton.direction(self.steps.dense, F, G, A, b, settings.alpha, settings.fit_intercept,
                                            self.loss, self.w)
        self.steps.status = "converged"
        return Step(A + D, b + db, KA + KD, 1)


def choose(operator, settings, steps, loss, w, k, started):
    """The direction of a fit of k columns (``started``: from a subsample's fit), given ``steps.dense``."""
    args = (operator, settings, steps, loss, w)
    if steps.dense is not None:
        return Dense(*args)
    if not operator.symmetric:
        return _centers.CentersDiagonal(*args) if loss.diagonal_hessian else _centers.CentersCoupled(*args)
    if not loss.diagonal_hessian:
        ratio = _full.coupling_ratio(operator, w, k, settings, steps)
        if ratio <= (STARTED_MAX_CONDITION if started else COUPLED_MAX_CONDITION):
            if ratio <= HALF_RANK_MAX_CONDITION:
                steps.rank = max(steps.L.shape[1] // 2, min(steps.L.shape[1], _full.MIN_LANDMARKS))
            return _full.FullCoupled(*args)
    return _full.FullDiagonal(*args)
