"""A large full model's start: the same objective minimised on a random subsample of its rows.

A full model of at least ``SUBSAMPLE_MIN_ROWS`` weighted rows (K stored on
the host), fitted without a warm start, starts from the fit on
``max(SUBSAMPLE_MIN, n / SUBSAMPLE_SHARE)`` of its weighted rows (weights
renormalised, the same alpha: the same function estimated from fewer rows),
solved on their block of K to ``SUBSAMPLE_TOL``; their coefficients, zero
elsewhere, start the full fit near its optimum, where Newton's steps
converge fastest (benchmarks/bench_subsample_start.py).
"""

from dataclasses import replace

import numpy as np

from ..._operator import KernelOperator

SUBSAMPLE_MIN_ROWS = 4000
SUBSAMPLE_MIN = 1000
SUBSAMPLE_SHARE = 8
SUBSAMPLE_TOL = 1e-2


def applies(operator, Y, w, settings):
    """Whether a fit starts from a subsample's fit."""
    return (settings.coef_init is None and operator.symmetric and operator.stored and operator.host
            and settings.alpha > 0 and int(np.count_nonzero(w)) >= SUBSAMPLE_MIN_ROWS)


def subsample_start(operator, Y, w, settings, solve):
    """``(A, b, K A)`` from ``solve`` (newton's) on a random subsample of the weighted rows."""
    n, k = Y.shape
    rows = np.flatnonzero(w > 0)
    rng = np.random.RandomState(settings.random_state)
    sub = np.sort(rng.choice(rows, max(SUBSAMPLE_MIN, len(rows) // SUBSAMPLE_SHARE), replace=False))
    operator.mirror_lower()  # whole rows, as the pooled products need anyway
    part = KernelOperator(operator.K[np.ix_(sub, sub)], None, dtype=operator.dtype, threads=operator.n_threads)
    result = solve(part, Y[sub], w[sub] / np.sum(w[sub]), replace(
        settings, tol=max(settings.tol, SUBSAMPLE_TOL), coef_init=None, intercept_init=None, verbose=0,
        callback=None, rounding_stops=[], float64_retry=False, reuse=None))
    A = np.zeros((n, k))
    A[sub] = result.dual_coef
    return A, result.intercept, operator.matvec(A)
