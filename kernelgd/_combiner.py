"""The squared-loss classifier's output layer: a logistic regression on its per-class outputs.

One least-squares output per class (one-vs-rest) ranks the classes badly
where a class lies between others: in nested shells the middle class's
output is nowhere the largest, at any width or ridge (three shells: 0.94
accuracy, against 0.97 for a logistic regression on the same outputs). A
multinomial logistic regression on the training rows' outputs, ``K (K + 1)``
numbers for K classes, learns how they combine; for two classes it places
the threshold. The outputs are the fitted model's own on its training rows.
"""

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.utils import gen_batches

from ._array_api import take_rows, to_numpy
from ._replicates import distinct_groups, distinct_rows

# The output layer reads at most this many training rows (drawn at random beyond): K (K + 1) numbers
# are set by a few thousand, and its fit costs rows x K^2 per iteration.
COMBINER_ROWS = 20_000
# Kernel rows evaluated at a time, as floats, where the output layer reads a subset of the rows.
BLOCK_FLOATS = 1 << 23


def combiner_rows(n, seed):
    """The training rows the output layer reads: None for all of the n, else ``COMBINER_ROWS`` drawn
    with the fit's seed (the in-memory and the Dask fit draw the same)."""
    if n <= COMBINER_ROWS:
        return None
    return np.sort(np.random.RandomState(seed).choice(n, COMBINER_ROWS, replace=False))


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


def fit_combiner(F, Y, w, X):
    """The output layer: ``LogisticRegression`` fitted to the outputs F of rows X (class codes Y,
    ``_targets.encode_labels``' +-1 columns; weights w), or None where a class has no row of positive weight.

    Each row weighs its share of the total weight times the number of distinct rows of positive weight
    (``distinct_rows``): scaling the weights, or a row repeated in place of a doubled weight, fits the same
    layer, and scikit-learn's ``C=1`` weighs the penalty against that many rows.
    """
    F, Y, w = (np.asarray(to_numpy(A), dtype=np.float64) for A in (F, Y, w))
    labels = (Y[:, 0] > 0).astype(int) if Y.shape[1] == 1 else np.argmax(Y, axis=1)
    positive = np.flatnonzero(w > 0)
    if len(np.unique(labels[positive])) < max(Y.shape[1], 2):
        return None
    group_of = distinct_groups(X)
    weight = w[positive] / w[positive].sum() * distinct_rows(w, group_of)
    return LogisticRegression(max_iter=1000).fit(F[positive], labels[positive], sample_weight=weight)
