"""The squared-loss classifier's output layer: a logistic regression on its per-class outputs.

One least-squares output per class ranks the classes badly where a class lies between others (in
nested shells the middle class's output is nowhere the largest). A multinomial logistic regression
on the outputs, ``K (K + 1)`` numbers for K classes, learns how they combine; for two classes it
places the threshold. It is fitted to each training row's output from the fit without that row
(``left_out_outputs``): the layer decides for rows the model has not seen.

With more numbers than distinct rows the layer is not identified and overfits: there a layer of one slope shared
by every class and an intercept per class (``fit_shared``, ``K + 1`` numbers) replaces it where its cross-validated
log-loss is lower by ``SIGNIFICANCE`` standard errors. With fewer, the full layer's reading of each output against
the others decides better, even where its log-loss is higher.

Both output layers (this one and the logistic loss's, ``_logistic_layer``) read their probabilities as those of
labels drawn at random (from the classes' shares) with probability eps where that fits held-out rows significantly
better (``label_noise``): a model certain far from its boundaries pays tens of nats for each such label.
"""

import warnings

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, log_softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils import gen_batches

from ._array_api import take_rows, to_numpy
from ._auto_alpha import (
    _left_out, _operator, _take, rule_factor, every_row_rule, Directions, least_ridge, significantly_fewer,
)
from ._losses import BinaryLogisticLoss, MultinomialLoss
from ._replicates import distinct_groups, distinct_rows, effective_count, replicate_groups
from ._solvers._preconditioners import Landmarks
from ._warnings import labels_checked

# The output layer reads at most this many training rows (drawn at random beyond): K (K + 1) numbers
# are set by a few thousand, and its fit costs rows x K^2 per iteration.
COMBINER_ROWS = 20_000
# Kernel rows evaluated at a time, as floats, where the output layer reads a subset of the rows.
BLOCK_FLOATS = 1 << 23
# The ridge rule's check fits a layer to at most this many rows' left-out outputs per ridge it scores,
# to this tolerance (it reads only the classes, which settle in a few iterations).
CHECK_ROWS = 1000
CHECK_ROWS_PER_CLASS = 100
CHECK_TOL = 1e-2
# A layer, or a share of labels drawn at random, is kept where its cross-validated log-loss is below the
# probabilities' it replaces by this many standard errors of the paired difference: on a calibrated model, numbers
# fitted to a few thousand rows add noise.
SIGNIFICANCE = 1.0
# The folds of that cross-validation at most (fewer where a class has fewer groups of identical rows).
CV_FOLDS = 5
# The distinct rows per number a layer fits (K (K + 1) for K score columns) at least: on fewer it overfits (26 classes'
# 702 numbers on letter's 3,200 held-out rows, 1,640 numbers of 40 classes on 1,400 rows), and its checks cost seconds.
ROWS_PER_NUMBER = 10
# The squared loss's layer tries the shared slope below this many distinct rows per number of the full layer: above
# one its probabilities are often better calibrated but its classes worse (1.5 points of accuracy lost on average
# over 12 problems of 5 to 30 classes at 1.7 to 9 rows per number).
SHARED_ROWS_PER_NUMBER = 1
# The layer's solver: Newton-Cholesky forms the Hessian of the layer's numbers each step (rows x numbers^2 flops) and
# stops in about ten; L-BFGS takes tens to hundreds of gradient steps (440 on the log-probabilities of five classes,
# stopping short of the optimum), so Newton's up to this many numbers (the two cost alike on MNIST's 110).
NEWTON_LAYER_NUMBERS = 128
NEWTON_LAYER_TOL = 1e-8


def combiner_rows(w, seed):
    """The training rows the output layer reads: None for all of them, else ``COMBINER_ROWS`` of the rows of
    positive weight w, drawn with the fit's seed (rows of zero weight change no draw; the in-memory and the
    Dask fit draw the same)."""
    positive = np.flatnonzero(np.asarray(to_numpy(w)) > 0)
    if len(positive) <= COMBINER_ROWS:
        return None
    return positive[np.sort(np.random.RandomState(seed).choice(len(positive), COMBINER_ROWS, replace=False))]


def training_outputs(operator, coef, intercept, rows):
    """``K[rows] @ coef + intercept`` (``rows``: None for every row) from the fit's operator: one product
    with a stored K (a pass over memory), else the rows' own kernel blocks."""
    if rows is None or operator.stored:
        F = operator.matvec(coef) + intercept
        return F if rows is None else take_rows(F, rows)
    step = max(1, BLOCK_FLOATS // max(operator.m, 1))
    return np.concatenate([
        np.asarray(to_numpy(operator.dot(operator.rows(rows[batch]), coef)))
        for batch in gen_batches(len(rows), step)
    ]) + np.asarray(to_numpy(intercept))


def left_out_outputs(X, rows, kernel, Y, w, alpha, fit_intercept, precomputed, threads, seed, landmarks=None):
    """``(F, w_layer)``: the outputs at ridge ``alpha`` of the rows ``rows`` of X (None: all), each from the
    fit without it and its copies, and their weights in the output layer; None where some class has no such
    output, below the ridge rule's least ridge (an interpolant) or for a kernel that is not PSD.

    They are the Nystroem model's on the ridge rule's factor (``landmarks`` where the fit drew them on these
    rows, else drawn here): the exact model's up to ``_auto_alpha.EXACT_MAX_ROWS`` distinct rows, beyond its
    landmarks' model, whose own outputs (a basis function each) weigh zero in the layer unless a class would
    be left without a row. On the host, in float64.
    """
    if kernel is not None and not kernel.psd:
        return None
    Y = np.asarray(to_numpy(Y), dtype=np.float64)
    weighted = np.flatnonzero(np.asarray(to_numpy(w)) > 0)
    if landmarks is None and len(weighted) < len(Y):  # a factor drawn on the weighted rows: the others change nothing
        found = left_out_outputs(X, weighted if rows is None else np.asarray(rows)[weighted], kernel, Y[weighted],
                                 take_rows(w, weighted), alpha, fit_intercept, precomputed, threads, seed)
        if found is None:
            return None
        F, w_layer = np.zeros_like(Y), np.zeros(len(Y))
        F[weighted], w_layer[weighted] = found
        return F, w_layer
    w, group_of, operator = _layer_rows(X, rows, kernel, w, precomputed, threads)
    if not alpha > 0 or alpha < least_ridge(operator, w, distinct_rows(w, group_of)):
        return None  # the model interpolates whatever the ridge
    if landmarks is None:
        landmarks = _layer_factor(operator, w, fit_intercept, group_of, seed)
    directions = landmarks.directions or Directions(*(np.asarray(to_numpy(A)) for A in landmarks[:2]))
    lam = directions.eigen[0]
    if not len(lam):
        return None  # a kernel of zero on these rows: no model to leave a row out of
    V, pivots = directions.V, np.asarray(to_numpy(landmarks.pivots))  # V: the factor's left singular vectors
    with np.errstate(divide="ignore", invalid="ignore"):  # a row of zero weight has no output of its own here
        F = next(_left_out(V, lam, Y, w, fit_intercept, [float(alpha)], group_of))[0]
    read = np.isfinite(F).all(axis=1) & (w > 0)  # a group of leverage 1 (an interpolant's) has no left-out output
    F[~read] = 0.0
    w_layer = np.where(read, w, 0.0)
    if not every_row_rule(w, group_of):
        landmark = np.zeros(len(w), dtype=bool)
        landmark[pivots] = True
        landmark = landmark if group_of is None else np.isin(group_of, group_of[landmark])
        w_layer = np.where(landmark, 0.0, w_layer)
    labels = _labels(Y)
    if len(np.unique(labels[w_layer > 0])) < len(np.unique(labels[w > 0])):
        return None  # a class none of whose rows can train the layer
    return F, w_layer


def layer_landmarks(X, kernel, w, fit_intercept, precomputed, threads, seed):
    """The factor (``Landmarks``) ``left_out_outputs`` draws on every row of X where the fit has none: drawn
    before a fixed ridge's solve, whose preconditioner then reuses it (one factor of K, not two)."""
    w, group_of, operator = _layer_rows(X, None, kernel, w, precomputed, threads)
    return _layer_factor(operator, w, fit_intercept, group_of, seed)


def _layer_rows(X, rows, kernel, w, precomputed, threads):
    """``(w, group_of, operator)`` of the rows ``rows`` of X the layer reads (None: all): their weights summing to
    one, their groups of identical rows (None: all distinct) and a float64 operator that stores no K."""
    X = to_numpy(X)
    w = np.asarray(to_numpy(w), dtype=np.float64)
    w = w / w.sum()
    X_rows = X if rows is None else _take(X, rows, precomputed)
    group_of, n_groups = replicate_groups(X_rows)
    return w, None if n_groups == len(w) else group_of, _operator(X_rows, kernel, precomputed, threads)


def _layer_factor(operator, w, fit_intercept, group_of, seed):
    """The ridge rule's factor of the rows (``_auto_alpha.rule_factor``), drawn with the fit's seed."""
    factor, gram, pivots, directions = rule_factor(operator, w, fit_intercept, np.random.RandomState(seed), group_of)
    return Landmarks(factor, gram, pivots, directions)


def _labels(Y):
    """Class indices of the +-1 codes Y (one column for two classes)."""
    return (Y[:, 0] > 0).astype(int) if Y.shape[1] == 1 else np.argmax(Y, axis=1)


def fit_combiner(F, Y, w, X):
    """The output layer: ``LogisticRegression`` fitted to the outputs F of rows X (class codes Y, +-1 columns;
    weights w), or None where a class has no row of positive weight. Each row weighs its share of the weight
    times the number of distinct rows of positive weight: scaling the weights, or a row repeated in place of a
    doubled weight, fits the same layer, and ``C=1`` weighs the penalty against that many rows.
    """
    F, Y, w = (np.asarray(to_numpy(A), dtype=np.float64) for A in (F, Y, w))
    labels = _labels(Y)
    positive = np.flatnonzero(w > 0)
    if len(np.unique(labels[positive])) < max(Y.shape[1], 2):
        return None
    group_of = distinct_groups(X)
    weight = w[positive] / w[positive].sum() * distinct_rows(w, group_of)
    numbers = (F.shape[1] + 1) * (1 if Y.shape[1] == 1 else Y.shape[1])
    # Newton's steps converge quadratically: a tight tol costs a step or two
    params = dict(solver="newton-cholesky", tol=NEWTON_LAYER_TOL) if numbers <= NEWTON_LAYER_NUMBERS else {}
    with labels_checked():
        layer = _fit_logistic(F[positive], labels[positive], weight, params)
        if not reads_own_class(layer.coef_.T, layer.classes_):  # no signal: the classes' weighted shares
            layer = _fit_logistic(np.zeros_like(F[positive]), labels[positive], weight, params)
    return layer


def _fit_logistic(F, labels, weight, params):
    """``LogisticRegression(**params)`` fitted to (F, labels); L-BFGS's fit where Newton's line search gives up,
    as it does where its start is already the optimum to rounding (every row's outputs alike)."""
    if params:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", ConvergenceWarning)
                return LogisticRegression(max_iter=1000, **params).fit(F, labels, sample_weight=weight)
        except ConvergenceWarning:
            pass
    return LogisticRegression(max_iter=1000).fit(F, labels, sample_weight=weight)


def fit_shared(F, Y, w, X):
    """The output layer of one slope a shared by every class and an intercept b_c per class: the probabilities
    ``softmax(a F + b)``, as a ``LogisticRegression`` of coefficients ``a I``. Rows weigh as ``fit_combiner``'s;
    the slope, one number, is penalized as ``C=1`` penalizes a coefficient of an input of unit spread (``(a s)^2 /
    2``, s the outputs' weighted spread): ``K + 1`` numbers, fitted alike whatever the outputs' scale. ``a = 0`` (the
    classes' weighted shares) where the best slope does not read each class's own output as evidence for it. None
    where a class has no row of positive weight; for two classes (one output), ``fit_combiner``'s layer."""
    F, Y, w = (np.asarray(to_numpy(A), dtype=np.float64) for A in (F, Y, w))
    if Y.shape[1] == 1:
        return fit_combiner(F, Y, w, X)
    labels, k = _labels(Y), Y.shape[1]
    positive = np.flatnonzero(w > 0)
    if len(np.unique(labels[positive])) < k:
        return None
    F, labels, weight = F[positive], labels[positive], w[positive] / w[positive].sum()
    spread = float(np.sqrt(weight @ np.mean((F - weight @ F.mean(axis=1)) ** 2, axis=1)))
    G = F / spread if spread > 0 else np.zeros_like(F)  # the slope in units of the spread: one scale for L-BFGS
    penalty = 1.0 / distinct_rows(w, distinct_groups(X))  # the objective over the total weight: the same minimizer
    onehot = labels[:, None] == np.arange(k)

    def loss_gradient(theta):
        log_p = log_softmax(theta[0] * G + theta[1:], axis=1)
        residual = (np.exp(log_p) - onehot) * weight[:, None]
        value = -float(weight @ log_p[onehot]) + penalty * theta[0] ** 2 / 2
        return value, np.concatenate([[np.sum(residual * G) + penalty * theta[0]], residual.sum(axis=0)])

    start = np.concatenate([[0.0], np.log(np.bincount(labels, weights=weight, minlength=k))])
    found = minimize(loss_gradient, start, jac=True, method="L-BFGS-B",
                     options={"maxiter": 1000, "gtol": 1e-8, "ftol": 64 * np.finfo(float).eps})
    slope, intercept = (found.x[0] / spread, found.x[1:]) if found.x[0] > 0 else (0.0, start[1:])
    layer = LogisticRegression(max_iter=1000)
    layer.classes_, layer.n_features_in_ = np.arange(k), k
    layer.coef_, layer.intercept_ = slope * np.eye(k), intercept - intercept.mean()
    layer.n_iter_ = np.array([found.nit], dtype=np.int32)
    return layer


def fit_output_layer(F, Y, w, X, seed):
    """The squared loss's output layer: ``fit_combiner``'s, or ``fit_shared``'s where the distinct rows of positive
    weight are fewer than the former's numbers (``SHARED_ROWS_PER_NUMBER``) and the shared layer's log-loss,
    cross-validated on the rows (``cross_validation_folds``, drawn with ``seed``), is below the full layer's by
    ``SIGNIFICANCE`` standard errors of the paired difference."""
    full = fit_combiner(F, Y, w, X)
    k = Y.shape[1]
    if full is None or k == 1:
        return full
    F, Y, w = (np.asarray(to_numpy(A), dtype=np.float64) for A in (F, Y, w))
    positive = np.flatnonzero(w > 0)
    groups = np.unique(replicate_groups(X)[0][positive], return_inverse=True)[1].reshape(-1)
    if groups.max() + 1 >= SHARED_ROWS_PER_NUMBER * k * (k + 1):
        return full
    labels, weights = _labels(Y)[positive], w[positive] / w[positive].sum()
    folds = cross_validation_folds(labels, groups, np.random.RandomState(seed))
    if folds is None:
        return full
    F, Y, X = F[positive], Y[positive], _take(X, positive, False)
    shared = cross_validated_losses(fit_shared, F, Y, weights, X, labels, folds)
    kept = cross_validated_losses(fit_combiner, F, Y, weights, X, labels, folds)
    if shared is None or kept is None or not significantly_fewer(
            shared, kept, weights, groups, effective_count(weights, groups), SIGNIFICANCE):
        return full
    return fit_shared(F, Y, weights, X)


def converged(fit, F, Y, w, X):
    """The layer ``fit`` fits (``fit_combiner``, ``fit_shared``), or None where its solver did not converge (no
    layer rather than a warning the user cannot act on)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        layer = fit(F, Y, w, X)
    return None if any(issubclass(warning.category, ConvergenceWarning) for warning in caught) else layer


def cross_validated_losses(fit, S, Y, w, X, labels, folds):
    """Each row's log-loss under a layer ``fit`` fitted to the other ``folds``' rows of inputs S
    (``cross_validation_folds``); None where a fold's layer misses a class or does not converge."""
    losses = np.empty(len(labels))
    for k in range(folds.max() + 1):
        train, test = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        layer = converged(fit, S[train], Y[train], w[train], _take(X, train, False))
        if layer is None:
            return None
        D = layer.decision_function(S[test])  # log-probabilities from the layer's log-odds: no log of a rounded 0
        P = (MultinomialLoss if D.ndim == 2 else BinaryLogisticLoss).log_probabilities(D.reshape(len(test), -1))
        losses[test] = -P[np.arange(len(test)), np.searchsorted(layer.classes_, labels[test])]
    return losses


def reads_own_class(coef, columns):
    """Whether a layer of coefficients ``coef`` (its inputs by its decision columns; one decision column for two
    classes) reads each class's output (``columns[j]``: class j's input) as evidence for that class: a positive
    slope on one output, else a positive sum of each class's own coefficient, centred over the classes.

    A row's left-out output leans away from its own class where the outputs carry no signal (the fit without it
    follows the other rows' labels), and a layer fitted to such outputs reads them inverted: it would then assign
    the full model's training rows, whose outputs follow their labels, to the wrong classes.
    """
    coef = np.asarray(coef, dtype=np.float64)
    if coef.shape[0] == 1:  # one output (two classes): its slope
        return bool(coef[0, 0] > 0)
    if coef.shape[1] == 1:  # two classes of several outputs: the second's score over the first's
        coef = np.hstack([-coef / 2.0, coef / 2.0])
    centered = coef - coef.mean(axis=1, keepdims=True)
    return bool(np.sum(centered[np.asarray(columns), np.arange(len(columns))]) > 0)


def cross_validation_folds(labels, groups, rng):
    """Each row's fold of a layer's cross-validation: a class's groups of identical rows dealt in a random order
    to ``CV_FOLDS`` folds (fewer where a class has fewer groups, None below two), a group's rows together. The
    rows of every held-out fit's model fall in every fold, as they fall in the layer's fit."""
    first = np.unique(groups, return_index=True)[1]
    group_labels = labels[first]
    present = np.unique(group_labels)
    n_splits = min(CV_FOLDS, min(int(np.sum(group_labels == c)) for c in present))
    if n_splits < 2:
        return None
    # one random order of every group, each class dealt in it: the same folds whatever the classes are called
    rank = np.empty(len(first), dtype=int)
    rank[rng.permutation(len(first))] = np.arange(len(first))
    fold_of = np.empty(len(first), dtype=int)
    for c in present:
        members = np.flatnonzero(group_labels == c)
        members = members[np.argsort(rank[members])]
        fold_of[members] = np.arange(len(members)) % n_splits
    return fold_of[groups]


def class_shares(Y, w):
    """The classes' shares of the weight w of rows of class codes Y (+-1 columns; one for two classes): the
    intercept-only model's probabilities, which labels drawn at random are drawn from (``label_noise``)."""
    Y, w = np.asarray(to_numpy(Y)), np.asarray(to_numpy(w), dtype=np.float64)
    return np.bincount(_labels(Y), weights=w, minlength=max(Y.shape[1], 2)) / w.sum()


def label_noise(losses, w, folds, groups, n_effective, row_shares):
    """The share eps of labels drawn at random of greatest likelihood for rows whose label has log-loss ``losses``
    (weights ``w`` summing to 1), each row's label drawn with probability ``row_shares`` (its class's
    ``class_shares``): the probabilities ``(1 - eps) p + eps shares`` then, at eps = 1 the intercept-only model's.
    0 unless eps fitted to the other ``folds`` lowers each fold's log-loss by ``SIGNIFICANCE`` standard errors of
    the paired difference (over ``groups`` of identical rows, ``n_effective`` of them)."""
    held = np.empty_like(losses)
    for fold in range(folds.max() + 1):
        test = folds == fold
        eps = likeliest_share(losses[~test], w[~test], row_shares[~test])
        held[test] = mixed(losses[test], eps, row_shares[test])
    if not significantly_fewer(held, losses, w, groups, n_effective, SIGNIFICANCE):
        return 0.0
    return likeliest_share(losses, w, row_shares)


def likeliest_share(losses, w, row_shares):
    """The share eps in [0, 1] of labels drawn at random of greatest likelihood for rows of log-losses ``losses``
    (weights w) whose classes have shares ``row_shares``: the log-likelihood is concave in eps, one bounded scalar
    search finds it."""
    w = w / w.sum()
    return float(minimize_scalar(lambda eps: w @ mixed(losses, eps, row_shares), bounds=(0.0, 1.0),
                                 method="bounded").x)


def mixed(losses, eps, row_shares):
    """The log-losses ``losses`` of labels once a share ``eps`` of them is drawn at random, each row's label with
    probability ``row_shares``: ``-log((1 - eps) p + eps row_shares)`` for ``p = exp(-losses)``, without forming p
    (a certain wrong row's is below float's range)."""
    with np.errstate(divide="ignore"):  # log(0) at eps = 0 or 1: the term drops out
        return -np.logaddexp(np.log1p(-eps) - losses, np.log(eps) + np.log(row_shares))


def combiner_label_noise(layer, F, Y, w, X, seed, shares):
    """``label_noise``'s share for the output layer ``layer`` that ``fit_combiner`` fitted to outputs F of rows X
    (class codes Y, weights w), labels drawn from ``shares`` (the training rows' ``class_shares``), from the layer's
    probabilities of those rows: their outputs are left-out ones, and the layer's ``K (K + 1)`` numbers, fitted to
    thousands of rows, barely overfit them. 0 where the layer is None."""
    if layer is None:
        return 0.0
    F, Y, w = (np.asarray(to_numpy(A), dtype=np.float64) for A in (F, Y, w))
    positive = np.flatnonzero(w > 0)
    labels = _labels(Y)[positive]
    groups = np.unique(replicate_groups(X)[0][positive], return_inverse=True)[1].reshape(-1)
    D = layer.decision_function(F[positive])
    log_p = (MultinomialLoss if D.ndim == 2 else BinaryLogisticLoss).log_probabilities(D.reshape(len(positive), -1))
    losses = -log_p[np.arange(len(positive)), labels]
    folds = cross_validation_folds(labels, groups, np.random.RandomState(seed))
    if folds is None or not np.all(np.isfinite(losses)):
        return 0.0
    weights = w[positive] / w[positive].sum()
    return label_noise(losses, weights, folds, groups, effective_count(weights, groups), shares[labels])


def layer_classes(F, labels, w, groups=None):
    """The classes a layer fitted to left-out outputs F (rows' classes ``labels``, weights w) assigns them: the
    ridge rule's left-out classes where the fit's decision is the layer (a ridge that smooths the outputs can
    leave the largest one wrong where a layer reads them right).

    Rows of one class and equal outputs are merged, weighing their summed weight: rows of one class in one of
    ``groups`` (identical rows, left out together: one output, whatever its rounding), else of bitwise equal
    outputs. At most ``CHECK_ROWS`` of them (a fixed stratified draw) fit it, weighed as ``fit_combiner`` weighs
    rows. It reads the outputs as they are, as the fit's layer does; the penalty keeps it from reading the class
    from outputs that barely vary.
    """
    labels = labels.astype(int)
    # one row per distinct (outputs, class) of positive weight, weighing their sum (repeated rows and scaled weights
    # fit the same layer); a random projection tells the rows apart
    if groups is None:
        key = np.column_stack([F, labels]) @ np.random.RandomState(0).standard_normal(F.shape[1] + 1)
    else:
        key = np.asarray(groups, dtype=np.int64) * (int(labels.max()) + 1) + labels
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    weight = np.bincount(inverse.ravel(), weights=w, minlength=len(first))
    order = np.argsort(first)  # the rows' own order
    first, weight = first[order], weight[order]
    first, weight = first[weight > 0], weight[weight > 0]
    most = max(CHECK_ROWS, CHECK_ROWS_PER_CLASS * (int(labels.max()) + 1))
    if len(first) > most:
        drawn = _stratified_draw(labels[first], most)
        first, weight = first[drawn], weight[drawn]
    weight = weight / weight.sum()
    if len(np.unique(labels[first])) < 2:  # nothing to read: the weighted majority class
        return np.full(len(labels), np.argmax(np.bincount(labels[first], weights=weight)))
    classes, codes = np.unique(labels[first], return_inverse=True)
    coef, intercept = _logistic_layer(F[first], codes, weight, len(classes))
    if not reads_own_class(coef, classes):  # no signal: the weighted majority class (as ``fit_combiner``'s)
        return np.full(len(labels), classes[np.argmax(np.bincount(codes, weights=weight))])
    scores = F @ coef + intercept
    return classes[(scores[:, 0] > 0).astype(int) if len(classes) == 2 else np.argmax(scores, axis=1)]


def _stratified_draw(labels, size):
    """``size`` of the rows, sorted, drawn at random (a fixed seed), each class's share of them rounded by
    largest remainders: ``resample(stratify=...)``'s draw at a fraction of its cost."""
    counts = np.bincount(labels)
    share = counts * size / len(labels)
    quota = np.floor(share).astype(int)
    quota[np.argsort(quota - share, kind="stable")[: size - quota.sum()]] += 1
    order = np.random.RandomState(0).permutation(len(labels))
    order = order[np.argsort(labels[order], kind="stable")]  # each class's rows together, in random order
    starts = np.cumsum(counts) - counts
    return np.sort(np.concatenate([order[start : start + q] for start, q in zip(starts, quota)]))


def _logistic_layer(F, codes, weight, n_classes):
    """``(coef, intercept)`` of ``LogisticRegression(tol=CHECK_TOL)`` fitted to outputs F, class codes ``codes``
    (0 to ``n_classes - 1``, each present) and weights ``weight`` (summing to 1) times the rows' number: the
    same objective (weighted mean log-loss plus ``|coef|^2 / (2 n)``, binomial for two classes), L-BFGS-B
    options and start, without its validation, which costs more than the fit on a few hundred rows.
    """
    n, d = F.shape
    k = 1 if n_classes == 2 else n_classes
    onehot = codes[:, None] == (1 if k == 1 else np.arange(k))

    def loss_gradient(theta):
        coef, intercept = theta[: d * k].reshape(d, k), theta[d * k :]
        Z = F @ coef + intercept
        if k == 1:
            losses, residual = np.logaddexp(0.0, Z) - onehot * Z, expit(Z) - onehot
        else:
            Z -= Z.max(axis=1, keepdims=True)
            log_p = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
            losses, residual = -log_p[onehot], np.exp(log_p) - onehot
        residual *= weight[:, None]
        gradient = np.concatenate([(F.T @ residual + coef / n).ravel(), residual.sum(axis=0)])
        return float(weight @ losses.reshape(n, -1).sum(axis=1)) + float(np.sum(coef**2)) / (2 * n), gradient

    theta = minimize(loss_gradient, np.zeros((d + 1) * k), jac=True, method="L-BFGS-B",
                     options={"maxiter": 1000, "maxls": 50, "gtol": CHECK_TOL, "ftol": 64 * np.finfo(float).eps}).x
    return theta[: d * k].reshape(d, k), theta[d * k :]
