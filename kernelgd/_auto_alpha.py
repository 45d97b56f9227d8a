"""``alpha="auto"`` for the squared loss: the ridge of least leave-one-out (or GCV) error.

The randomly pivoted Cholesky factor ``B`` of the centred, weighted kernel matrix
``Q S K S Q ~ B B'`` (the one the full model's preconditioner draws) gives, from the
eigenpairs of ``B'B``, the Nystroem model's predictions and hat matrix at every ridge at once.
Up to ``EXACT_MAX_ROWS`` distinct rows the factor takes every row (on at most that many rows, from the
eigendecomposition of the matrix itself: ``eigen_factor``) and the error is the exact model's closed-form
leave-one-out error (as scikit-learn's ``RidgeCV``); beyond, the factor has
rank ``RANK`` and the error is GCV's (Golub, Heath & Wahba, 1979) with every leverage taken as
their mean (the proxy's own leverages would single out its pivots), bounded from below by exact
leave-one-out on a random subset (``check_floor``) and, where the factor is the whole matrix, by the rows' own
leverages (``leverage_floor``).

A group of identical rows is left out as one and GCV counts Kish's effective number of rows, so
scaling the weights or repeating every row chooses the same ridge. Of the ridges within ``TIE``
of the least error the largest is taken. A classifier's ridge may move to one whose left-out
error rate is significantly lower (``classification_ridge``), among the ridges a truncated factor
resolves (``RESOLVED_DF_SHARE``).
"""

from functools import cached_property
from typing import NamedTuple

import numpy as np

from ._array_api import (
    add_at_rows, as_float64, block_of, like, on_host, sum_blocks, take_rows, to_numpy, xp_of, zeros_as,
)
from ._loo import center_columns, centred_weighted
from ._losses import SquaredLoss
from ._operator import KernelOperator, n_threads, run_pooled
from ._replicates import collapse, distinct_rows, draw_groups, effective_count, pure_error, subset_groups
from ._solvers._common import ROUNDING_EPS
from ._solvers._preconditioners import N_LANDMARKS, Landmarks, landmark_factor
from ._solvers.cg import LEAST_SQUARES_RIDGE

# The factor's rank: the full model's preconditioner landmarks, so that its factor serves both.
RANK = N_LANDMARKS
# Up to this many distinct rows the rule is the exact model's leave-one-out error (an n x n eigendecomposition).
EXACT_MAX_ROWS = 1000
# Rows the rule reads at most (a random subsample of the weighted rows beyond).
MAX_ROWS = 20_000
# Ridges tried per decade, and below the factor's smallest resolved eigenvalue.
STEPS_PER_DECADE = 4
FLOOR_BELOW_SPECTRUM = 10.0
# The most degrees of freedom, as a share of N, of a ridge GCV may choose.
MAX_DF_SHARE = 0.5
# Errors within this relative margin of the least count as tied.
TIE = 1e-3
# ``check_floor``: the random rows that check GCV's choice by exact leave-one-out; the multiple of their least
# left-out error that fails it; and the rows whose exact ridge then bounds GCV's.
CHECK_ROWS = 500
CHECK_FACTOR = 2.0
FLOOR_ROWS = EXACT_MAX_ROWS
# The ridge where the rule has nothing to read (a kernel zero on the data, or fewer than 3 rows).
FALLBACK_ALPHA = 1.0
# A classifier's larger ridge must cut the leave-one-out error rate by this many standard errors.
SIGNIFICANCE = 2.0
# A truncated factor's left-out error rate is read only at ridges of at most this share of its rank in degrees of
# freedom: nearer the rank, the Nystroem model's errors are its truncation's, not the ridge's.
RESOLVED_DF_SHARE = 0.5
# A classifier's walk to another width on exact leave-one-out errors must cut their squared error by this many
# standard errors (the one-standard-error rule): a smaller gain is within chance.
WALK_SIGNIFICANCE = 1.0
# Left-out predictions of several ridges come from one product with the factor, this many entries at most.
LEFT_OUT_BLOCK = 1 << 22


def ridge_grid(lam, least=0.0):
    """Decreasing ridges ``10 ** (k / STEPS_PER_DECADE)``, integer k, from the first at or above the
    largest eigenvalue to the last at or below ``FLOOR_BELOW_SPECTRUM`` below the smallest, none below
    ``least`` (``least_ridge``) but the largest.

    A fixed lattice: the smallest eigenvalue is often at rounding, and a grid spaced between the ends
    would move every ridge with it (and with the BLAS kernel that rounds).
    """
    top, bottom = float(lam[-1]), float(lam[0]) / FLOOR_BELOW_SPECTRUM
    first = int(np.ceil(STEPS_PER_DECADE * np.log10(top)))
    last = int(np.floor(STEPS_PER_DECADE * np.log10(bottom)))
    if least > 0:
        last = max(last, int(np.ceil(STEPS_PER_DECADE * np.log10(least))))
    return 10.0 ** (np.arange(first, min(last, first) - 1, -1) / STEPS_PER_DECADE)


def choose(factor, Y, w, fit_intercept, group_of=None, alphas=None, floor=0.0, classify=False, exact=False,
           least=0.0, pool=None, directions=None):
    """``(alpha, errors, alphas, wrong, residuals)``: the rule's ridge from the factor ``B`` of ``Q S K S Q ~ B B'``,
    with ``classify`` each row's left-out misclassification at it (else None), and with ``exact`` each row's
    left-out squared error at it (else None).

    ``w`` sums to 1; ``group_of``: each row's group of identical rows (None: all distinct). ``alphas``: the
    ridges scored (default ``ridge_grid``'s, none below ``least``). ``floor``: eigenvalues at most it are
    rounding (``rounding_floor``). ``classify(F, labels, w, groups)``: the left-out classes from left-out outputs F,
    for ``classification_ridge``; False: no check. ``exact``: B B' is the whole matrix, and ``errors`` are
    leave-one-out errors (inf where a group's leverage is 1), else GCV's. ``pool``: ``(run, batches)`` as
    ``factor_gram``'s; ``directions``: the factor's ``Directions`` above ``floor`` where made already (they then
    stand for factor, floor and pool).
    """
    w_host = np.asarray(to_numpy(w), dtype=np.float64)
    n_effective = effective_count(w_host, group_of)
    if factor.shape[1] == 0 or n_effective < 3:
        return FALLBACK_ALPHA, None, None, None, None
    directions = directions or Directions(factor, factor_gram(factor, pool), floor, pool)
    lam, W = directions.eigen
    if not len(lam):
        return FALLBACK_ALPHA, None, None, None, None
    Y_host = np.asarray(to_numpy(Y), dtype=np.float64)
    alphas = ridge_grid(lam, least) if alphas is None else np.asarray(alphas, dtype=float)
    errors = None if exact else _gcv_errors(factor, W, lam, Y, w_host, fit_intercept, group_of, n_effective, alphas)
    if not exact and not np.isfinite(errors).any():
        return FALLBACK_ALPHA, errors, alphas, None, None
    # the classification check reads only the ridges at least GCV's choice: no smaller one is scored
    scored = alphas if exact else alphas[: _first_tied(errors) + 1]
    if exact or classify:
        V = directions.V
        labels = (Y_host[:, 0] > 0 if Y_host.shape[1] == 1 else np.argmax(Y_host, axis=1)) if classify else None
        loo, wrong = np.full(len(scored), np.inf), np.ones((len(scored), len(w_host)) if classify else (0, 0))
        squared = np.full((len(scored), len(w_host)) if exact else (0, 0), np.inf)
        for i, (F, h) in enumerate(_left_out(V, lam, Y_host, w_host, fit_intercept, scored, group_of)):
            valid = h < 1.0  # a group of leverage 1 has no left-out prediction
            if valid.all():
                row_errors = np.sum((Y_host - F) ** 2, axis=1)
                loo[i] = float(w_host @ row_errors)
                if exact:
                    squared[i] = row_errors
            if classify:
                read = valid & np.isfinite(F).all(axis=1)  # a left-out output to read the class from
                classes = classify(F[read], labels[read], w_host[read],
                                   groups=None if group_of is None else group_of[read])
                wrong[i] = True
                wrong[i, read] = classes != labels[read]
        errors = loo if exact else errors
    if not np.isfinite(errors).any():
        return FALLBACK_ALPHA, errors, alphas, None, None
    first = _first_tied(errors)
    resolved = None
    if classify and not exact and factor.shape[1] >= RANK:
        df = (lam[None, :] / (lam[None, :] + alphas[: len(wrong), None])).sum(axis=1)
        resolved = df <= RESOLVED_DF_SHARE * len(lam)
    chosen = classification_ridge(wrong, first, w_host, group_of, n_effective, resolved) if classify else first
    return (float(alphas[chosen]), errors, alphas, wrong[chosen] if classify else None,
            squared[chosen] if exact else None)


def factor_directions(gram, floor=0.0):
    """``(lam, W)``: the eigenpairs of a factor's Gram matrix ``B'B`` above its rounding and above ``floor``
    (host eigenvalues, ascending); ``B W / sqrt(lam)`` are then B's left singular vectors."""
    lam, W = xp_of(gram).linalg.eigh(gram)
    lam = np.asarray(to_numpy(lam))
    keep = (lam > max(lam[-1], 0.0) * len(lam) * np.finfo(float).eps) & (lam > floor) if len(lam) else lam > 0
    return lam[keep], take_rows(W.T, np.flatnonzero(keep)).T


class Directions:
    """A factor B's directions above ``floor``, each computed once and kept: ``eigen``, the eigenpairs ``(lam, W)``
    of its Gram matrix ``gram`` (``factor_directions``), and ``V = B W / sqrt(lam)``, B's left singular vectors
    (host, row blocks on ``pool``'s threads), which the output layer's left-out outputs read again."""

    def __init__(self, factor, gram, floor=0.0, pool=None):
        self.factor, self.gram, self.floor, self.pool = factor, gram, floor, pool

    @cached_property
    def eigen(self):
        return factor_directions(self.gram, self.floor)

    @cached_property
    def V(self):
        lam, W = self.eigen
        M = W / like(np.sqrt(lam), W)
        V = np.empty((self.factor.shape[0], M.shape[1]))  # each batch writes its own rows: no joined copy

        def into(rows):
            V[rows] = to_numpy(self.factor[rows, ...] @ M)

        run, batches = self.pool or _one_call(self.factor)
        run(into, batches)
        return V

    def lifted(self, full, rows):
        """The directions of ``full``, the factor with zero rows beside its ``rows`` (what is made already, lifted)."""
        other = Directions(full, self.gram, self.floor)
        if "eigen" in self.__dict__:
            other.eigen = self.eigen
        if "V" in self.__dict__:
            V = np.zeros((full.shape[0], self.V.shape[1]))
            V[np.asarray(to_numpy(rows))] = self.V
            other.V = V
        return other


def largest_output(F, labels, w, groups=None):
    """The class of each row's largest output (of two classes: whether its output is positive)."""
    return F[:, 0] > 0 if F.shape[1] == 1 else np.argmax(F, axis=1)


def _one_call(factor):
    """``(run, batches)`` without a pool: the function runs once, on every row."""
    return (lambda func, parts: [func(rows) for rows in parts]), [slice(0, factor.shape[0])]


def factor_gram(factor, pool=None):
    """``B'B``; ``pool``: ``(run, batches)`` that run a function on row batches of B (an operator's
    thread pool, as the preconditioner's products take it: one BLAS thread each); None: one call."""
    run, batches = pool or _one_call(factor)
    return sum_blocks(run(lambda rows: factor[rows, ...].T @ factor[rows, ...], batches))


def _first_tied(errors):
    """The index of the largest ridge (decreasing ridges: the first) whose error is within ``TIE`` of the least."""
    return int(np.flatnonzero(errors <= np.min(errors) * (1.0 + TIE))[0])


def _gcv_errors(factor, W, lam, Y, w, fit_intercept, group_of, n_effective, alphas):
    """Each ridge's GCV error of the Nystroem model, ``(sum_i w_i (y_i - f_i)^2 - E) / (1 - df / N)^2`` (inf
    beyond ``MAX_DF_SHARE``), from B's eigenpairs ``(lam, W)``: every leverage taken as their mean ``df / N``,
    N Kish's effective number of distinct rows and E the spread within groups of identical rows
    (``pure_error``), which no ridge changes.
    """
    xp = xp_of(Y)
    s = xp.sqrt(like(w, Y))
    U = s[:, None] * (Y - like(w, Y) @ Y) if fit_intercept else s[:, None] * Y  # Q S y (s's = 1)
    Z = np.asarray(to_numpy(W.T @ (factor.T @ U)))  # sqrt(lam) V'U
    projected = Z**2 / lam[:, None]  # |V'U|^2 per direction and column
    total = float(np.sum(np.asarray(to_numpy(U)) ** 2))
    shrink = alphas[:, None] / (lam[None, :] + alphas[:, None])  # (ridges, directions)
    outside = max(total - float(projected.sum()), 0.0)  # the energy outside the factor's span (>= 0 but for rounding)
    spread = pure_error(np.asarray(to_numpy(Y)), w, group_of)
    residual = np.maximum(outside + (shrink**2 @ projected).sum(axis=1) - spread, 0.0)
    df = float(fit_intercept) + (1.0 - shrink).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(df <= MAX_DF_SHARE * n_effective, residual / (1.0 - df / n_effective) ** 2, np.inf)


def _left_out(V, lam, Y, w, fit_intercept, alphas, group_of):
    """Per ridge, ``(F, h)``: each row's prediction by the Nystroem model fitted without its group of identical
    rows, and that group's summed leverage (host arrays, shapes (n, t) and (n,)).

    ``S (f - ybar) = V diag(lam / (lam + alpha)) V' S (y - ybar)``; a group's hat block has rank one, so leaving
    it out moves its prediction to ``(f - h Ybar) / (1 - h)``, Ybar its weighted mean target.
    """
    s = np.sqrt(w)
    y_bar = w @ Y if fit_intercept else np.zeros(Y.shape[1])
    P = V.T @ (s[:, None] * (Y - y_bar))
    target = Y
    if group_of is not None:
        target = collapse(group_of, int(group_of.max()) + 1, Y, w)[1][group_of]
    shrinks = lam[None, :] / (lam[None, :] + np.asarray(alphas)[:, None])  # (ridges, directions)
    H = (V * V) @ shrinks.T + (w[:, None] if fit_intercept else 0.0)  # every ridge's leverages in one product
    n, t = Y.shape
    per_block = max(1, LEFT_OUT_BLOCK // (n * t))  # ridges whose predictions one product makes
    for start in range(0, len(shrinks), per_block):
        block = shrinks[start : start + per_block]
        F_block = (V @ (block.T[:, :, None] * P[:, None, :]).reshape(len(lam), -1)).reshape(n, len(block), t)
        for i in range(len(block)):
            F, h = F_block[:, i] / s[:, None] + y_bar, H[:, start + i]
            if group_of is not None:
                h = np.bincount(group_of, weights=h)[group_of]
            with np.errstate(divide="ignore", invalid="ignore"):
                yield (F - h[:, None] * target) / (1.0 - h)[:, None], h


def classification_ridge(wrong, first, w, group_of, n_effective, resolved=None):
    """The index of the ridge taken among decreasing ridges whose squared error chose ``first``: that one, or
    the largest of least left-out error rate where it beats ``first``'s by ``SIGNIFICANCE`` standard errors of
    the paired difference over groups of identical rows (``significantly_fewer``). Squared error on +-1 codes
    also charges a confident correct prediction; the error rate is what a classifier is judged by.
    ``wrong``: each row's left-out misclassification at each ridge scored; ``resolved``: the ridges whose error
    rate may be taken (None: every one).
    """
    errors = np.where(resolved, wrong @ w, np.inf) if resolved is not None else wrong @ w
    if not np.isfinite(errors).any():
        return first
    best = int(np.flatnonzero(errors <= errors.min())[0])  # decreasing ridges: the largest of least error
    return best if significantly_fewer(wrong[best], wrong[first], w, group_of, n_effective) else first


def significantly_fewer(wrong, than, w, group_of, n_effective, by=SIGNIFICANCE):
    """Whether the left-out misclassifications (or other errors) ``wrong`` (per row) are fewer than ``than``'s,
    on the same rows, by ``by`` standard errors of the paired difference over groups of identical rows."""
    groups = np.arange(len(w)) if group_of is None else group_of
    W = np.bincount(groups, weights=w)
    gain = np.bincount(groups, weights=w * (than - wrong))  # per group, weighted
    mean = float(gain.sum())
    per_group = np.divide(gain, W, out=np.zeros_like(gain), where=W > 0)
    error = np.sqrt(float(W @ (per_group - mean) ** 2) / n_effective)
    return mean > by * error


def _subsample(xp, X, Y, w, group_of, rng, precomputed):
    """``(X, Y, w, groups, kept)``: at most ``MAX_ROWS`` random rows of positive weight, w renormalised,
    their groups of identical rows, and which rows of X they are (None: every row; ``lifted`` reads it)."""
    rows = np.flatnonzero(np.asarray(to_numpy(w)) > 0)
    if len(rows) == X.shape[0]:  # every row: no copy (a precomputed K may be most of the memory)
        return X, Y, w / xp.sum(w), group_of, None
    weighted = len(rows)
    if distinct_rows(w, group_of) > MAX_ROWS:
        rows = draw_groups(w, group_of, MAX_ROWS, rng)
    Xs = _take(X, rows, precomputed)
    Ys, ws = take_rows(Y, rows), take_rows(w, rows)
    return Xs, Ys, ws / xp.sum(ws), subset_groups(group_of, rows), _Kept(rows, X.shape[0], len(rows) == weighted)


class _Kept(NamedTuple):
    """The rows of positive weight a rule read (``_subsample``), of ``n`` rows, and whether they are all of them."""

    rows: np.ndarray
    n: int
    every_weighted: bool


def lifted(factor, gram, pivots, kept, directions=None):
    """``Landmarks`` of every row from a factor of the weighted rows ``kept`` (``_subsample``'s): a row of zero
    weight is a zero row of the weighted kernel matrix's factor, as a factor drawn on every row has it, so that
    rows of zero weight change no fit. None where the rule read a subsample of the weighted rows. ``directions``:
    the factor's ``Directions``, kept with it."""
    if kept is None:
        return Landmarks(factor, gram, pivots, directions)
    if not kept.every_weighted:
        return None
    full = add_at_rows(zeros_as(factor, (kept.n, factor.shape[1])), kept.rows, factor)
    return Landmarks(full, gram, kept.rows[np.asarray(to_numpy(pivots))],
                     None if directions is None else directions.lifted(full, kept.rows))


def _take(X, rows, precomputed):
    """The rows ``rows`` of X (dense, CSR or a precomputed kernel matrix, whose columns go with them)."""
    return block_of(X, rows, rows) if precomputed else take_rows(X, rows) if not hasattr(X, "tocsr") else X[rows]


def _operator(X, kernel, precomputed, threads):
    """An operator that evaluates the kernel's columns as the factor asks for them, on ``threads`` threads."""
    if precomputed:
        return KernelOperator(X, None, dtype="float64", threads=threads)
    return KernelOperator(X, kernel, dtype="float64", store=False, memory_budget=1 << 28, threads=threads)


def choose_kernel(candidates, X, Y, w, group_of, fit_intercept, rng, alpha="auto", precision=np.float64,
                  classify=False, walk=None, threads="auto", memory_budget=None):
    """``(index, alpha, landmarks, error)``: the candidate kernel of least error (``choose``'s), its ridge and its
    error there (``relative_error``); with ``classify``, one whose left-out error rate is significantly lower
    instead (squared error on class codes can rank kernels apart from the error rate).

    ``candidates``: bound PSD kernels, each scored on the same rows (at most ``MAX_ROWS``) by its rank-``RANK``
    factor, at its own best ridge for ``alpha="auto"``, else at ``alpha``. ``walk(kernel, exact)``: the kernels
    to walk to in turn from the best candidate while each is the best so far, indexed after the candidates.
    ``landmarks``: the chosen factor (``Landmarks``) where ``alpha="auto"`` and it covers every row, else None.
    ``precision``, ``classify``, ``threads``: as ``auto_alpha``'s; scores run side by side on that many
    threads where ``memory_budget`` (bytes; None: no bound) holds their ``2 n r`` floats each.
    """
    xp = xp_of(w)
    n_distinct = distinct_rows(w, group_of)  # the fit's, for its least ridge
    Xs, Ys, ws, group_of, kept = _subsample(xp, X, Y, w, group_of, rng, False)
    seed = rng.randint(np.iinfo(np.int32).max)
    exact = every_row_rule(ws, group_of)

    def score(index, kernel):
        operator = _operator(Xs, kernel, False, threads)
        pool = (operator._run, operator._row_batches())
        factor, gram, pivots, directions = rule_factor(operator, ws, fit_intercept, np.random.RandomState(seed),
                                                       group_of, floor=rounding_floor(operator, ws, precision),
                                                       pool=pool)

        def at(least):
            return choose(factor, Ys, ws, fit_intercept, group_of, None if alpha == "auto" else [alpha],
                          directions.floor, classify, exact, least, directions=directions)

        least = least_ridge(operator, ws, n_distinct)

        def floor(gcv, falls):
            check = check_floor(Xs, kernel, Ys, ws, group_of, fit_intercept, np.random.RandomState(seed + 1), False,
                                n_distinct, precision, classify, gcv, threads)
            return max(leverage_floor(factor, Ys, ws, fit_intercept, group_of, directions, least, gcv, falls), check)

        result = _checked(at, least, exact or alpha != "auto", floor)
        chosen, errors, _, wrong, residuals = result
        # a factor is kept only where the full model's solve reuses it
        return (np.inf if errors is None else float(np.min(errors)), index, chosen if alpha == "auto" else alpha,
                lifted(factor, gram, pivots, kept, directions) if alpha == "auto" else None, wrong, residuals,
                relative_error(result, Ys, ws, fit_intercept))

    ws_host = np.asarray(to_numpy(ws), dtype=np.float64)
    n_effective = effective_count(ws_host, group_of)

    def pick(scored):  # least error; with classify, one of significantly fewer left-out errors instead
        best = min(scored, key=lambda found: found[:2])
        if classify and best[4] is not None:
            rivals = [found for found in scored if found[4] is not None]
            fewest = min(rivals, key=lambda found: (float(found[4] @ ws_host), found[:2]))
            if significantly_fewer(fewest[4], best[4], ws_host, group_of, n_effective):
                return fewest
        return best

    def may_walk(found, best):
        """Whether a classifier's walk may go on to ``found``: never to more left-out errors, and on exact
        left-out errors only by ``WALK_SIGNIFICANCE`` of their squared error (or significantly fewer errors)."""
        if not (classify and found[4] is not None and best[4] is not None):
            return True
        if significantly_fewer(found[4], best[4], ws_host, group_of, n_effective):
            return True
        if float(found[4] @ ws_host) > float(best[4] @ ws_host):
            return False
        return found[5] is None or best[5] is None or significantly_fewer(
            found[5], best[5], ws_host, group_of, n_effective, WALK_SIGNIFICANCE)

    ahead = list(walk(candidates[0], exact)) if walk is not None and len(candidates) == 1 else None
    jobs = list(enumerate(candidates)) + [(len(candidates), kernel) for kernel in (ahead or [])[:1]]
    extra = (len(jobs) - 1) * 2 * Xs.shape[0] * _factor_rank(ws, group_of) * 8  # beside the first
    side_by_side = on_host(w) and (memory_budget is None or extra <= memory_budget)
    done = run_pooled(lambda job: score(*job), jobs, n_threads(threads) if side_by_side else 1)
    best = pick(done[: len(candidates)])
    walked = ahead if ahead is not None else walk(candidates[best[1]], exact) if walk is not None else ()
    for index, kernel in enumerate(walked, len(candidates)):
        found = done[index] if index < len(done) else score(index, kernel)
        # the walk goes on only while each kernel is the best
        if pick([best, found]) is not found or not may_walk(found, best):
            break
        best = found
    return (*best[1:4], best[6])


def _checked(at, least, exact, floor):
    """``at(least)``, ``choose``'s result with ridges from ``least`` up; where GCV chose it (not ``exact``),
    made again from ``floor(chosen, falls)`` up (``check_floor``, ``leverage_floor``) where that is higher than
    GCV's choice; ``falls``: whether GCV's error still falls at its least ridge."""
    result = at(least)
    chosen, errors, alphas = result[:3]
    if exact or alphas is None:
        return result
    bound = floor(chosen, _falls_to_the_end(errors))
    return at(bound) if bound > chosen else result


def leverage_floor(factor, Y, w, fit_intercept, group_of, directions, least, chosen, falls):
    """A least ridge for GCV's choice ``chosen`` from the factor's own leave-one-out errors, or 0.

    GCV takes every row's leverage as their mean; a row far from the others has a leverage near 1 at a small
    ridge, and its left-out error, which GCV misses, can set the model's error off the rows. Where the factor
    is the whole matrix (randomly pivoted Cholesky stopped below ``RANK`` at rounding: the Nystroem model is the
    exact one, its landmarks no longer singled out), GCV's error still ``falls`` at the least ridge it scored,
    and the exact leave-one-out error at ``chosen`` is at least ``CHECK_FACTOR`` times its least, the bound is
    the ridge of that least.
    """
    if not falls or factor.shape[1] >= RANK:
        return 0.0
    alpha, errors, alphas = choose(factor, Y, w, fit_intercept, group_of, floor=directions.floor, exact=True,
                                   least=least, directions=directions)[:3]
    at = np.flatnonzero(alphas == chosen) if errors is not None and alphas is not None else []
    finite = errors[np.isfinite(errors)] if errors is not None else []
    if not len(at) or not len(finite) or not alpha > chosen:
        return 0.0
    return alpha if not errors[at[0]] < CHECK_FACTOR * np.min(finite) else 0.0


def _falls_to_the_end(errors):
    """Whether the error at the least ridge scored (of finite error) ties the least error."""
    finite = errors[np.isfinite(errors)]
    return finite.size > 0 and finite[-1] <= np.min(finite) * (1.0 + TIE)


def check_floor(X, kernel, Y, w, group_of, fit_intercept, rng, precomputed, n_distinct, precision, classify,
                chosen, threads="auto"):
    """A least ridge for GCV's choice ``chosen`` on rows X (``n_distinct`` distinct rows of positive weight), or 0.

    GCV misses the rows a small ridge interpolates (the far rows of a Gaussian cloud). On ``CHECK_ROWS``
    random rows, GCV's choice at the same total ridge is scored by exact leave-one-out; where that error is at
    least ``CHECK_FACTOR`` times its least, the bound is the exact leave-one-out ridge of ``FLOOR_ROWS`` random
    rows at the same total ridge. A check whose error still falls at its least ridge bounds nothing.
    """
    left_out, m = _exact_left_out(X, kernel, Y, w, group_of, fit_intercept, rng, precomputed, precision, classify,
                                  CHECK_ROWS, threads)
    alpha, errors = left_out()[:2]
    transferred = chosen * n_distinct / m  # GCV's choice at the same total ridge
    if errors is None or _falls_to_the_end(errors) or not transferred < alpha:
        return 0.0
    at_chosen = left_out([transferred])[1]
    if at_chosen is not None and at_chosen[0] < CHECK_FACTOR * np.min(errors[np.isfinite(errors)]):
        return 0.0
    left_out, m = _exact_left_out(X, kernel, Y, w, group_of, fit_intercept, rng, precomputed, precision, classify,
                                  FLOOR_ROWS, threads)
    alpha, errors = left_out()[:2]
    return 0.0 if errors is None or _falls_to_the_end(errors) else alpha * m / n_distinct


def _split(rng):
    """A generator of its own seeded from one draw of ``rng``: what it draws leaves ``rng``'s next draw as it is."""
    return np.random.RandomState(rng.randint(np.iinfo(np.int32).max))


def _exact_left_out(X, kernel, Y, w, group_of, fit_intercept, rng, precomputed, precision, classify, n_rows, threads):
    """``(left_out, m)``: on ``n_rows`` of the rows drawn at random (all, where fewer), ``left_out(alphas=None)``
    is ``choose``'s result by their exact leave-one-out, and m their number of distinct rows of positive weight."""
    rows = draw_groups(w, group_of, n_rows, rng)
    factor_rng = _split(rng)  # the factor's draws, whose number follows its rank, leave rng's next draw as it is
    Xc = _take(X, rows, precomputed)
    wc, groups = take_rows(w, rows), subset_groups(group_of, rows)
    wc = wc / xp_of(wc).sum(wc)
    operator = _operator(Xc, kernel, precomputed, threads)
    factor, _, _, directions = rule_factor(operator, wc, fit_intercept, factor_rng, groups, every_row=True,
                                           floor=rounding_floor(operator, wc, precision))
    m = distinct_rows(wc, groups)

    def left_out(alphas=None):
        return choose(factor, take_rows(Y, rows), wc, fit_intercept, groups, alphas=alphas, classify=classify,
                      exact=True, floor=directions.floor, least=least_ridge(operator, wc, m), directions=directions)

    return left_out, m


def least_ridge(operator, w, n_rows):
    """The smallest ridge the rule tries: the CG solver's ``LEAST_SQUARES_RIDGE`` times the mean weighted
    ``k(x, x)`` over the fit's ``n_rows`` distinct rows (w sums to 1). Below it the model interpolates whatever
    the ridge, and CG solves it as least squares.
    """
    return LEAST_SQUARES_RIDGE * float(w @ operator.diag()) / n_rows


def rounding_floor(operator, w, precision=np.float64):
    """The rounding of ``S K S``'s eigenvalues: ``ROUNDING_EPS`` eps of ``precision`` (the fit's
    kernel dtype) times the trace ``sum_i w_i k(x_i, x_i)`` (w sums to 1): each entry rounds by eps of
    its size, and a pivot on a residual diagonal of rounding takes an eigenvalue of that size."""
    return ROUNDING_EPS * float(np.finfo(precision).eps) * float(w @ operator.diag())


def _unstored_factor(operator, w, fit_intercept, rng, group_of=None, every_row=False):
    """``(Q B, pivots)``, B the factor of ``S K S``, from an operator that stores no K: centring B costs O(n r),
    centring the matrix first a product with K. Of rank ``RANK``, or of every distinct row of positive weight
    (``every_row``, or ``every_row_rule``).
    """
    root = xp_of(w).sqrt(w)
    factor, pivots = landmark_factor(operator, root, _factor_rank(w, group_of, every_row), rng)
    return center_columns(factor, root) if fit_intercept else factor, pivots


def rule_factor(operator, w, fit_intercept, rng, group_of=None, every_row=False, floor=0.0, pool=None):
    """``(factor, gram, pivots, directions)``: ``_unstored_factor``'s factor B, ``B'B``, its pivots and its
    ``Directions`` above ``floor`` (``pool``: as ``factor_gram``'s). Where B takes every row of at most
    ``EXACT_MAX_ROWS``, from the eigendecomposition of ``Q S K S Q`` itself (``eigen_factor``): the same
    directions without a pivoted Cholesky, a Gram matrix and its eigendecomposition, and ``V`` to form."""
    if (every_row or every_row_rule(w, group_of)) and w.shape[0] <= EXACT_MAX_ROWS:
        return eigen_factor(operator, w, fit_intercept, floor)
    factor, pivots = _unstored_factor(operator, w, fit_intercept, rng, group_of, every_row)
    gram = factor_gram(factor, pool)
    return factor, gram, pivots, Directions(factor, gram, floor, pool)


def eigen_factor(operator, w, fit_intercept, floor=0.0):
    """``rule_factor``'s result from the eigenpairs ``(lam, U)`` of ``Q S K S Q`` above its rounding and ``floor``:
    ``B = U diag(sqrt(lam))``, ``B'B = diag(lam)``, every row a pivot; its ``Directions`` are lam and U already."""
    A = centred_weighted(as_float64(operator.rows(slice(0, w.shape[0]))), w, fit_intercept)
    lam, U = xp_of(w).linalg.eigh(A)  # the lower triangle, as LAPACK's syevd reads it
    lam = np.asarray(to_numpy(lam))
    keep = np.flatnonzero((lam > max(lam[-1], 0.0) * len(lam) * np.finfo(float).eps) & (lam > floor))
    lam, U = lam[keep], take_rows(U.T, keep).T
    factor = U * like(np.sqrt(lam), U)[None, :]
    directions = Directions(factor, like(np.diag(lam), U), floor)
    directions.eigen = (lam, like(np.eye(len(lam)), U))  # B'B is diagonal: its eigenvectors are the axes
    directions.V = np.asarray(to_numpy(U), dtype=np.float64)
    return factor, directions.gram, np.arange(w.shape[0]), directions


def _factor_rank(w, group_of, every_row=False):
    """The rule's factor rank on rows of weights w: every distinct row of positive weight (``every_row``, or
    ``every_row_rule``), else ``RANK``."""
    n = distinct_rows(w, group_of)
    return n if every_row or n <= EXACT_MAX_ROWS else RANK


def every_row_rule(w, group_of):
    """Whether the rule's factor of rows of weights w takes every distinct row of positive weight
    (``EXACT_MAX_ROWS``): a repeated row, or one of zero weight, adds no direction, and weights, repeats and
    rows of zero weight must decide alike."""
    return distinct_rows(w, group_of) <= EXACT_MAX_ROWS


def curvature_share(loss, Y, w, fit_intercept):
    """The loss's curvature at the intercept-only model over the squared loss's (1 for the squared loss),
    averaged over the columns: a smooth loss's first Newton step from that model is a kernel ridge regression
    at the ridge ``2 alpha / h``, so scaling the rule's ridge by ``h / 2`` makes that step the rule's smoother.
    """
    if loss is SquaredLoss:  # exactly: the rule's own ridge, not its rounding
        return 1.0
    xp = xp_of(Y)
    b = loss.baseline(Y, w, fit_intercept)[0]
    H = loss.hessian_diagonal(xp.broadcast_to(b[None, :], Y.shape), w)  # its rows carry w, which sums to 1
    return float(xp.mean(xp.sum(H, axis=0))) / SquaredLoss.curvature


def auto_alpha(X, kernel, Y, w, group_of, fit_intercept, rng, full_model=False, precomputed=False,
               loss=SquaredLoss, precision=np.float64, classify=False, threads="auto"):
    """``(alpha, landmarks, error)``: the rule's ridge, its factor (``Landmarks``) where the full model's
    preconditioner can reuse it, and its error at the ridge (``relative_error``).

    The rule reads at most ``MAX_ROWS`` weighted rows through a float64 operator of its own (a float32
    kernel's rounding would hide the small eigenvalues a near noiseless target needs), with the rounding
    floor of ``precision``, the dtype the fit resolves. ``group_of``: X's groups of identical rows. ``loss``:
    the ridge is scaled by ``curvature_share``. ``classify``: Y holds a squared-loss classifier's class codes
    (``classification_ridge``). ``threads``: the fit's ``options["n_threads"]``.
    """
    scale = curvature_share(loss, Y, w, fit_intercept)
    n_distinct = distinct_rows(w, group_of)  # the fit's, for its least ridge
    Xs, Ys, ws, group_of, kept = _subsample(xp_of(w), X, Y, w, group_of, rng, precomputed)
    # the factor's draws follow its rank, which rounding moves (the units of X): the check draws from its own stream
    factor_rng, check_rng = _split(rng), _split(rng)
    operator = _operator(Xs, kernel, precomputed, threads)
    pool = (operator._run, operator._row_batches())
    factor, gram, pivots, directions = rule_factor(operator, ws, fit_intercept, factor_rng, group_of,
                                                   floor=rounding_floor(operator, ws, precision), pool=pool)
    exact = every_row_rule(ws, group_of)

    def at(least):
        return choose(factor, Ys, ws, fit_intercept, group_of, floor=directions.floor, classify=classify,
                      exact=exact, least=least, directions=directions)

    least = least_ridge(operator, ws, n_distinct)
    result = _checked(at, least, exact, lambda gcv, falls: max(
        leverage_floor(factor, Ys, ws, fit_intercept, group_of, directions, least, gcv, falls),
        check_floor(Xs, kernel, Ys, ws, group_of, fit_intercept, check_rng, precomputed, n_distinct, precision,
                    classify, gcv, threads)))
    return (result[0] * scale, lifted(factor, gram, pivots, kept, directions) if full_model else None,
            relative_error(result, Ys, ws, fit_intercept))


def relative_error(result, Y, w, fit_intercept):
    """The rule's error at its ridge (``choose``'s ``result``: leave-one-out or GCV, root mean squared over the
    rows, w summing to 1) relative to Y's spread (about its weighted mean with an intercept); None where it
    scored no ridge."""
    alpha, errors, alphas = result[:3]
    at = np.flatnonzero(alphas == alpha) if errors is not None and alphas is not None else []
    if not len(at) or not np.isfinite(errors[at[0]]):
        return None
    Y, w = np.asarray(to_numpy(Y), dtype=np.float64), np.asarray(to_numpy(w), dtype=np.float64)
    spread = float(w @ np.sum((Y - w @ Y if fit_intercept else Y) ** 2, axis=1))
    return float(np.sqrt(max(float(errors[at[0]]), 0.0) / spread)) if spread > 0 else None
