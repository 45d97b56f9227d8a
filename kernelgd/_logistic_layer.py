"""The logistic loss's output layer: a logistic regression on the model's log-probabilities of held-out rows, and
the share of labels drawn at random.

One ridge shrinks every class's scores toward zero alike. Where a class lies between others (ordered
bands of a feature, nested shells) or labels are noisy, the kernel model's probabilities are off in a
way that ``k (k + 1)`` numbers on its log-probabilities correct, as the squared loss's output layer
(``_combiner``) corrects its outputs. The layer reads the scores of rows held out of fits at the chosen
width and ridge (at least ``LAYER_ROWS`` rows, every row once where the set is that small): the ridge
rule's own held-out fits where they chose the model, the other folds fitted cold. It is kept only where
its own cross-validated log-loss on those rows is below the model's by ``_combiner.SIGNIFICANCE`` standard
errors of the paired difference: on a model already calibrated, a layer fitted to a few thousand rows adds noise.

A model fitted at a small ridge is certain far from its boundaries, and a label drawn at random there costs
tens of nats. The probabilities are then read as those of labels drawn at random with probability ``eps``
(``_combiner.label_noise``): ``(1 - eps) p + eps q``, q the classes' shares, eps of greatest likelihood on the
same held-out rows, kept under the same test.
"""

from typing import NamedTuple

import numpy as np

from ._array_api import rows_of, to_numpy
from ._auto_alpha import significantly_fewer
from ._combiner import (
    ROWS_PER_NUMBER, SIGNIFICANCE, class_shares, converged, cross_validated_losses, cross_validation_folds,
    fit_combiner, label_noise,
)
from ._loo_ridge import HELD_OUT, _HeldOut
from ._replicates import distinct_rows

# The held-out rows the layer reads at least (all of them on smaller sets), in at most 1 / HELD_OUT folds.
LAYER_ROWS = 1000
# The layer reads log-probabilities (and log-odds) down to this: a probability of 1e-13 or one of 1e-30 says the
# same of a class, and inputs in the hundreds of nats leave its LBFGS unconverged.
LEAST_LOG_PROBABILITY = -30.0
# A _HeldOut's path, which the layer's folds do not walk.
HELD_OUT_PATH = (0, 0, 0, 0.0)
# The folds fitted for the layer beside the ridge rule's, at most this many times n^2 k kernel entries together (n
# the distinct rows of positive weight; each fit takes many products of that size): a fold of 5,600 rows of five
# classes (1.6e8), not one of MNIST's 8,000 rows of ten (6.4e8). Beyond, the rule's folds alone, where it made any.
LAYER_WORK = 2e8


def layer_inputs(loss, F):
    """What the layer reads of scores F (a host array): the log-odds for two classes, else the log-probabilities,
    each at least ``LEAST_LOG_PROBABILITY`` (below, they tell the layer nothing more, and their scale stalls its
    solver)."""
    F = np.asarray(F, dtype=np.float64)
    if F.shape[1] == 1:
        return np.clip(F, LEAST_LOG_PROBABILITY, -LEAST_LOG_PROBABILITY)
    return np.maximum(loss.log_probabilities(F), LEAST_LOG_PROBABILITY)


def layer_folds(n):
    """The folds whose held-out rows, ``HELD_OUT`` of the n distinct rows each, hold ``LAYER_ROWS`` together (every
    row once at most)."""
    return int(min(round(1 / HELD_OUT), max(1, np.ceil(LAYER_ROWS / max(HELD_OUT * n, 1.0)))))


class Calibration(NamedTuple):
    """What ``output_layer`` fitted: the layer (a ``LogisticRegression``, or None), the share of labels drawn at
    random (``label_noise``'s eps, 0 for none) and the classes' shares they are drawn from (None for none)."""

    layer: object
    label_noise: float
    shares: object


NO_CALIBRATION = Calibration(None, 0.0, None)


def output_layer(problem, settings, held_out=None):
    """The ``Calibration`` of ``problem``'s model at its width and ridge from its held-out log-probabilities: of the
    ridge rule's folds that chose the model (``held_out``, ``_loo_ridge.HeldOutFits``), and of more folds fitted
    cold (``layer_folds``, within ``LAYER_WORK``) where the held-out rows are then enough for the layer's numbers
    (``ROWS_PER_NUMBER``). The layer (``LogisticRegression``) where it lowers their log-loss significantly; then
    the share of labels drawn at random of the probabilities kept (``_combiner.label_noise``). ``NO_CALIBRATION``
    where a fold's fit fails or a class has too few held-out rows."""
    rows, loss = problem.rows, problem.loss
    k = rows.Y.shape[1]
    outs, scores = ([], []) if held_out is None else (list(held_out.outs), list(held_out.scores))
    n_distinct = distinct_rows(rows.w, rows.replicates)  # of positive weight: as weights or the rows repeated
    n_folds = max(layer_folds(n_distinct), len(outs))
    if (n_folds - len(outs)) * float(n_distinct) ** 2 * k > LAYER_WORK:
        n_folds = len(outs)
    held = _HeldOut(problem, settings, True, HELD_OUT_PATH, n_folds) if n_folds else None  # every fold's rows
    layered = held is not None and held.outs and held.groups.max() + 1 >= ROWS_PER_NUMBER * k * (k + 1)
    if not layered and n_folds > len(outs):  # too few distinct rows for the layer: the rule's folds alone, for eps
        n_folds = len(outs)
        held = _HeldOut(problem, settings, True, HELD_OUT_PATH, n_folds) if n_folds else None
    if held is None or not held.outs or held.groups.max() + 1 < ROWS_PER_NUMBER:  # distinct rows for eps
        return NO_CALIBRATION
    if len(held.outs) > len(outs):
        more = _HeldOut(problem, settings, True, HELD_OUT_PATH, n_folds, skip=len(outs))
        done = more.fit(problem, problem.alpha, more.cold, [{} for _ in more.outs]) if more.outs else None
        if done is None:
            return NO_CALIBRATION
        outs, scores = outs + more.outs, scores + [more.scores(done[0])]
    if len(outs) != len(held.outs) or not all(np.array_equal(a, b) for a, b in zip(outs, held.outs)):
        return NO_CALIBRATION  # (never: the rule's folds are the first ones, of the same rows, seed and share)
    F = np.concatenate(scores)
    losses = -loss.log_probabilities(F)[np.arange(len(held.labels)), held.labels]
    if not np.all(np.isfinite(losses)):
        return NO_CALIBRATION
    w, layer = held.W, None
    folds = cross_validation_folds(held.labels, held.groups, np.random.RandomState(problem.seed))
    if folds is None:
        return NO_CALIBRATION
    if layered:
        S = layer_inputs(loss, F)
        Y, X = (to_numpy(rows_of(A, held.held)) for A in (rows.Y, rows.X))  # on the host (X: sparse or dense)
        layer_losses = cross_validated_losses(fit_combiner, S, Y, w, X, held.labels, folds)
        if layer_losses is not None and significantly_fewer(layer_losses, losses, w, held.groups, held.n_effective,
                                                            SIGNIFICANCE):
            layer = converged(fit_combiner, S, Y, w, X)
            losses = losses if layer is None else layer_losses  # the layer's probabilities, out of its own fit
    shares = class_shares(rows.Y, rows.w)  # of every training row: the intercept-only model's probabilities
    return Calibration(layer, label_noise(losses, w, folds, held.groups, held.n_effective, shares[held.labels]), shares)
