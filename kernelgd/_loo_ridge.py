"""``alpha="auto"`` for a logistic loss on a full model: the ridge, and on a small set the width.

The start is the squared loss's rule (``_auto_alpha``) for the labels, scaled by the logistic
loss's curvature at the intercept-only model. Where Newton's dense system on the distinct rows
is small (``_dense_newton.tiny``), the ridges ``MULTIPLES`` times the start are fitted, largest
first and warm-started, and scored by approximate leave-one-out (``_logistic_loo``, Rad & Maleki,
2020); the largest within one standard error of the least loss is chosen (Breiman et al., 1984), a group of
identical rows holding a whole class left out of the choice (``_judged``).
On the smallest systems (``WIDTH_UNKNOWNS``) each of ``WIDTHS`` runs that path too.

On a larger set the whole set's held-out folds check the rule's ridge a factor of 4 at a time, trying
narrower (``NARROWER``) and wider (``WIDER``) kernels; from ``WHOLE_SET_ROWS`` rows the median multiple of
``DRAWS`` small subsamples scales the ridge first, and the widths are tried only the way a subsample
prefers (``_better_on``). With many classes the held-out
rows of one larger subsample (``_held_out_multiple``), or of the whole set's folds, choose instead;
where the rule's ridge is near the least (``NEAR_LEAST``), or the subsamples see no signal, held-out
rows choose the ridge (``_on_held_out_rows``), narrower kernels running that path too (kept by a stricter test
where its loss still falls at the least ridge or predicts no better than the classes' shares).
"""

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ._array_api import add_at_rows, block_of, like, rows_of, take_rows, to_numpy, xp_of, zeros_as
from ._auto_alpha import auto_alpha, curvature_share, least_ridge, significantly_fewer
from ._combiner import _labels, class_shares
from ._logistic_loo import exact as _exact
from ._logistic_loo import scores as _scores
from ._operator import KernelOperator, cross_kernel_dot
from ._replicates import collapse, distinct_rows, draw_groups, effective_count, subset_groups
from ._solvers import run_solver
from ._solvers._dense_newton import MAX_UNKNOWNS, coordinates, features, tiny
from ._warnings import recorded

# The ridges a path fits, as multiples of the rule's, largest first; it may extend past an end it chooses to
# EXTEND_TO either side (a subsample's upward to SUBSAMPLE_EXTEND_UP: its fits there are cheap).
MULTIPLES = 4.0 ** np.arange(2, -3, -1)
EXTEND_TO = 4.0**4
SUBSAMPLE_EXTEND_UP = 4.0**8
# The path's tol at most: the one-standard-error rule compares scores a few 1e-4 apart.
PATH_TOL = 1e-5
# A rule's ridge within this factor of the least interpolates: held-out rows choose the ridge instead.
NEAR_LEAST = 100.0
# The share of rows each fold holds out, the held-out rows wanted over all folds (``_folds``), and the powers
# of 4 times the least ridge where ``_on_held_out_rows`` starts and stops.
HELD_OUT = 0.2
HELD_OUT_ROWS = 500
HELD_OUT_POWERS = (10, 16)
# Held-out fits' tol: only their held-out losses are read, which a looser stop leaves to 4 digits.
HELD_OUT_TOL = 1e-2
# A held-out path's first ridge is reached by warm starts from up to this many factors of 4 above it where a cold
# Newton start is slow: below the rule's ridge (a subsample's multiple under 1: hundreds of CG iterations), and on
# the many classes' subsample (letter at the rule's ridge: 3.7 s cold against 3.3 s). On the whole set's folds
# under WHOLE_SET_ROWS rows, at the rule's ridge or above, a cold start costs less than the warm-up's fits.
# A width tried at the ridge chosen (``ways``) starts from one fit TRIAL_WARM_UP factors of 4 above it: a longer
# climb costs more fits than it saves.
WARM_UP = 2
TRIAL_WARM_UP = 1
# A width trial's fits stop, as failed, after this many Newton steps (and CG iterations per step): a trial is a
# check, and a kernel its fits cannot reach at that cost is not the one to keep.
TRIAL_MAX_ITER = 100
# The fewest rows a subsample's path may choose from, and the subsamples drawn (odd) until a majority agrees.
MIN_SUBSAMPLE = 200
DRAWS = 3
# Below this many distinct rows the whole set's held-out rows choose the ridge from the rule's own, no subsample
# drawn: its folds' fits cost less than the subsamples' paths and screens (and with many classes a subsample of
# HELD_OUT_SUBSAMPLE would hold out fewer than MIN_SUBSAMPLE rows).
WHOLE_SET_ROWS = 4000
# With many classes (no small subsample system), held-out rows of this share of the rows choose the multiple,
# within 4 ** HELD_OUT_REACH either way: a subsample says which way the rule errs, not by how much.
HELD_OUT_SUBSAMPLE = 0.25
HELD_OUT_REACH = 1
# The whole set's check moves a ridge or width while each step lowers the held-out log-loss by this many
# standard errors of the paired difference, up to CHECK_REACH_UP factors of 4 above the start.
CHECK_SIGNIFICANCE = 1.0
CHECK_REACH_UP = 4
# Where a kernel is flat at every ridge (``_HeldOut.flat``), a narrower one must lower the held-out log-loss by
# this many standard errors: on labels drawn at random every kernel is flat, and one in six passes one.
FLAT_SIGNIFICANCE = 2.0
# The widths that check tries in turn, as multiples of sigma="scale"'s: narrower, else wider (classes split by
# thresholds on a few features want a kernel far wider than the spread of every feature).
NARROWER = (0.5, 0.25)
WIDER = (2.0, 4.0, 8.0)
# The widths a small set's own paths compare, where Newton's dense system has at most WIDTH_UNKNOWNS unknowns.
WIDTHS = (1.0, 2.0**0.5, 2.0)
WIDTH_UNKNOWNS = 512


def choose(problem, settings, widen=None):
    """``(problem, start, n_iter, held_out)``: the problem at the chosen width and ridge, the chosen fit's
    ``(coef, intercept, converged)`` to start the solve from, the paths' iterations, and the held-out folds'
    fits of the chosen model where the whole set's held-out rows chose it (``HeldOutFits``, else None); on a larger
    set ``_on_held_out_rows``'s where the rule's ridge is near the least, else ``_on_a_subsample``'s.
    ``widen(factor)``: the problem with a kernel ``factor`` times as wide (None: the width is the user's);
    on at most ``WIDTH_UNKNOWNS`` unknowns each of ``WIDTHS`` runs its path, and the widest within one
    standard error of the least loss is kept.
    """
    rows, loss = problem.rows, problem.loss
    n_distinct = distinct_rows(rows.w, rows.replicates)  # of positive weight: rows of zero weight change nothing
    if not tiny(n_distinct, rows.Y.shape[1], not loss.diagonal_hessian):  # before any kernel evaluation
        if problem.alpha < NEAR_LEAST * _least(problem, settings):
            return _on_held_out_rows(problem, settings, widen)
        return _on_a_subsample(problem, settings, widen)
    unknowns = (n_distinct + 1) * (1 if loss.diagonal_hessian else rows.Y.shape[1])
    widths = WIDTHS if widen is not None and unknowns <= WIDTH_UNKNOWNS else (1.0,)
    fits, n_iter = [], 0  # (factor, problem at its chosen ridge, start, its groups' losses there)
    for factor in widths:
        candidate = problem if factor == 1.0 else widen(factor)
        alpha, start, iters, losses = _path(candidate, settings, extend=True, exact=True)
        n_iter += iters
        if losses is not None:
            fits.append((factor, replace(candidate, alpha=alpha), start, losses))
    if not fits:
        return problem, None, n_iter, None
    # the widest kernel within one standard error of the least loss: the smoothest the rows cannot tell apart
    fits.sort(key=lambda fit: -fit[0])
    _, W, T = _groups(rows)
    W = _judged(W, T)
    chosen = fits[_one_standard_error(np.array([fit[3] for fit in fits]), W)]
    if settings.verbose and len(widths) > 1:
        means = ", ".join(f"x{factor:.3g}: {losses @ W:.4g}" for factor, _, _, losses in fits)
        print(f"[sigma] leave-one-out log-loss by multiple of sigma='scale': {means}; chosen x{chosen[0]:.3g}")
    return chosen[1], chosen[2], n_iter, None


def _path(problem, settings, extend=False, lowest=0.0, exact=False, highest=EXTEND_TO):
    """``(alpha, start, n_iter, losses)``: the ridge chosen around ``problem.alpha`` on a small set, its fit
    ``(coef, intercept, converged)`` (None where none was scored), the path's iterations, and the groups'
    leave-one-out losses at the ridge (None where none was scored). ``extend``: a choice at an end goes on
    past it a factor of 4 at a time, to at most ``highest`` times or an ``EXTEND_TO``-th of the start; no
    multiple below ``lowest``. ``exact``: the choice rests on exact losses (``_settled``).
    """
    rows, loss = problem.rows, problem.loss
    first, W, T = _groups(rows)
    judged = _judged(W, T)
    if judged is None:
        return problem.alpha, None, 0, None
    distinct = _distinct_operator(problem, first)
    dense = features(distinct, T.shape[1], problem.alpha, not loss.diagonal_hessian, confirm=True)
    if dense is None:
        return problem.alpha, None, 0, None
    Psi = np.asarray(to_numpy(coordinates(dense, distinct.n, settings.fit_intercept)), dtype=np.float64)
    r = dense.Phi.shape[1]
    n_iter = 0

    def fit_at(multiple, start):
        """``(fit, losses)`` at ``multiple`` times the start, from the fit ``start``; None where it fails."""
        nonlocal n_iter
        alpha = float(problem.alpha * multiple)
        stops = []  # stops at the objective's rounding, recorded instead of warned
        path = replace(settings, alpha=alpha, coef_init=start[0], intercept_init=start[1], verbose=0,
                       tol=min(settings.tol, PATH_TOL), callback=None, rounding_stops=stops,
                       landmarks=problem.landmarks)
        with recorded() as caught:
            result = run_solver(problem.solver, problem.operator, rows.Y, rows.w, path)
        n_iter += result.n_iter
        # a fit stopped at its objective's rounding (a tol below it, where the CPU's BLAS decides the
        # stop) is at its optimum for scoring; any other failure ends the path: a smaller ridge is harder
        if caught or not (result.converged or stops):
            return None
        F = np.asarray(to_numpy(problem.operator.matvec(result.dual_coef) + result.intercept))[first]
        try:  # a score that rounding breaks (a singular I - H Q) ends the path as a warning does
            with np.errstate(all="ignore"):
                losses = np.where(judged > 0, _scores(Psi, r, F, W, T, alpha, settings.fit_intercept, loss), 0.0)
        except np.linalg.LinAlgError:
            return None
        fit = (result.dual_coef, result.intercept, result.converged and not stops)
        refine = (lambda: _exact(Psi, r, F, W, T, alpha, settings.fit_intercept, loss, losses)) if exact else None
        return (fit, losses, refine) if np.all(np.isfinite(losses)) else None

    # path: [multiple, fit, losses, refine] by decreasing multiples; refine: the exact losses' function (None: called)
    path, multiples = [], MULTIPLES[MULTIPLES >= lowest]
    for multiple in multiples:
        done = fit_at(multiple, path[-1][1] if path else (None, None, False))
        if done is None:
            break
        path.append([multiple, *done])
    if not path:
        return problem.alpha, None, n_iter, None
    chosen = _settled(path, judged)
    broke = len(path) < len(multiples)
    while extend:
        if chosen == len(path) - 1 and not broke and path[-1][0] / 4 >= max(lowest, 1.0 / EXTEND_TO):
            at, multiple, start = len(path), path[-1][0] / 4, path[-1][1]
        elif chosen == 0 and path[0][0] < highest:
            at, multiple, start = 0, path[0][0] * 4, path[0][1]
        else:
            break
        done = fit_at(multiple, start)
        if done is None:
            break
        path.insert(at, [multiple, *done])
        chosen = _settled(path, judged)
    if settings.verbose:
        means = ", ".join(f"{m:g}: {losses @ judged:.4g}" for m, _, losses, _ in path)
        sigma = "" if problem.kernel is None else f" at sigma={problem.kernel.params.get('sigma', 'none'):.4g}"
        print(f"[alpha] leave-one-out log-loss{sigma} by multiple of {problem.alpha:.3e}: {means}; "
              f"chosen {path[chosen][0]:g}")
    return float(problem.alpha * path[chosen][0]), path[chosen][1], n_iter, path[chosen][2]


def _on_a_subsample(problem, settings, widen=None):
    """``(problem, start, n_iter, held_out)``: the problem at the rule's ridge times the median multiple the path
    chooses on ``DRAWS`` random subsamples (the largest whose dense system is small; none below the least ridge), as
    the whole set's held-out rows correct it (``_checked_on_held_out_rows``); where every path ran up to its
    reach (no signal), ``_on_held_out_rows``'s. Where such a subsample would be under ``MIN_SUBSAMPLE`` rows,
    ``_held_out_multiple``'s multiple. Under ``WHOLE_SET_ROWS`` distinct rows, the rule's ridge as the whole set's
    held-out rows correct it, or ``_on_held_out_rows``'s choice where it is flat; the rule's ridge alone where
    those rows would be too few.
    """
    rows, loss = problem.rows, problem.loss
    n_distinct = distinct_rows(rows.w, rows.replicates)
    if n_distinct < WHOLE_SET_ROWS:
        if _held_out_count(n_distinct) < MIN_SUBSAMPLE:
            return problem, None, 0, None
        return _checked_on_held_out_rows(problem, settings, widen, problem.alpha, or_flat=True)
    k, coupled = rows.Y.shape[1], not loss.diagonal_hessian
    n = max((m for m in range(MIN_SUBSAMPLE, MAX_UNKNOWNS + 1) if tiny(m, k, coupled)), default=0)
    rng = np.random.RandomState(problem.seed)
    if n < MIN_SUBSAMPLE:
        multiple = _held_out_multiple(problem, settings, n_distinct, rng)
        return replace(problem, alpha=problem.alpha * multiple), None, 0, None
    if n_distinct <= n:
        return problem, None, 0, None
    # separable classes' paths would fall to ever smaller ridges, each slower: not past the least one
    lowest = _least(problem, settings) / problem.alpha
    draws, multiples, losses = [], [], []
    for _ in range(DRAWS):  # each draw's rows, then its path (whose rule reads the generator too)
        draws.append(draw_groups(rows.w, rows.replicates, n, rng))
        multiple, loss = _subsample_multiple(problem, settings, draws[-1], rng, lowest)
        multiples.append(multiple)
        losses.append(loss)
        if max(np.unique(multiples, return_counts=True)[1]) > DRAWS // 2:
            break  # a majority: the median of every draw's multiple is already its multiple
    multiple = float(np.median(multiples))  # DRAWS is odd: one of the multiples
    if settings.verbose:
        print(f"[alpha] on {len(multiples)} subsamples of {n} rows the leave-one-out paths took {multiples} times "
              f"the rule's ridge: {multiple:g}")
    enough = _held_out_count(n_distinct) >= MIN_SUBSAMPLE  # held-out rows to judge by
    if multiple >= SUBSAMPLE_EXTEND_UP and enough:  # the subsamples saw no signal, only the smoothest model
        return _on_held_out_rows(problem, settings, widen)
    rule, problem = problem.alpha, replace(problem, alpha=problem.alpha * multiple)
    if not enough:
        return problem, None, 0, None
    # the first way whose first width the subsample prefers, if any, on the first draw of the multiple chosen
    pick = int(np.argmin(np.abs(np.subtract(multiples, multiple))))
    ways = () if widen is None else next(((way,) for way in (NARROWER, WIDER)
                                          if _better_on(problem, settings, draws[pick], losses[pick], rng, way[0])),
                                         ())
    return _checked_on_held_out_rows(problem, settings, widen if ways else None, rule, ways)


def _better_on(problem, settings, idx, losses, rng, factor):
    """Whether the subsample ``idx``'s leave-one-out losses at ``factor`` times the width (at its own ridge's
    chosen multiple) are lower than ``losses`` at the width by ``CHECK_SIGNIFICANCE`` standard errors of the
    paired difference: a screen before the whole set's held-out rows try kernels that way (each of their
    fits as slow as the path's)."""
    if losses is None:
        return False
    sub = _subproblem(replace(problem, kernel=scaled(problem.kernel, factor)), settings, idx, rng)
    other = _path_losses(sub, settings, 0.0, extend=False)[1] if sub is not None else None
    W = _judged(*_groups(sub.rows)[1:]) if sub is not None else None
    better = other is not None and significantly_fewer(other, losses, W, None, effective_count(W),
                                                         CHECK_SIGNIFICANCE)
    if settings.verbose:
        print(f"[sigma] leave-one-out log-loss on a subsample at {factor:g} times the width: "
              f"{'none' if other is None else f'{other @ W:.4g}'}, at the width {losses @ W:.4g}")
    return better


def scaled(kernel, factor):
    """The kernel with its sigma ``factor`` times as large."""
    return type(kernel)(kernel.spec, dict(kernel.params, sigma=kernel.params["sigma"] * factor))


def _checked_on_held_out_rows(problem, settings, widen=None, rule=None, ways=(NARROWER, WIDER), or_flat=False):
    """``_held_out_path`` from ``problem.alpha`` (the subsamples' ridge, or the rule's): down while each factor of
    4 lowers the held-out log-loss significantly (``CHECK_SIGNIFICANCE``), not below the least ridge (``_least``),
    or up as far as ``CHECK_REACH_UP`` factors of 4 where the first step down does not: a subsample's path sees a
    few hundred rows, and the best multiple of the rule's ridge moves as the rows grow. ``ways``: the widths
    ``widen`` tries (``_held_out_path``); ``or_flat``: as ``_held_out_path``'s."""
    bottom = min(0, int(np.ceil(np.log(_least(problem, settings) / problem.alpha) / np.log(4.0))))
    warm_up = WARM_UP if rule and problem.alpha < rule else 0
    return _held_out_path(problem, settings, problem.alpha, 0, bottom, CHECK_REACH_UP, by=CHECK_SIGNIFICANCE,
                          widen=widen, rule=rule, ways=ways, or_flat=or_flat, warm_up=warm_up)


def _least(problem, settings):
    """``least_ridge`` for this loss: the squared loss's times ``curvature_share``, as the rule scales its ridge."""
    rows = problem.rows
    return least_ridge(problem.operator, rows.w, distinct_rows(rows.w, rows.replicates)) * curvature_share(
        problem.loss, rows.Y, rows.w, settings.fit_intercept)


def _on_held_out_rows(problem, settings, widen=None):
    """``(problem, start, n_iter, held_out)``: ``_held_out_path`` from the least ridge (``_least``) times
    ``4 ** HELD_OUT_POWERS[0]`` down to the least, or up to ``4 ** HELD_OUT_POWERS[1]`` times it. Powers
    of 4 from the least ridge, not from the rule's: weights and the rows repeated then try the same ridges.
    ``widen``'s narrower kernels run the path too (``_held_out_path``)."""
    top, highest = HELD_OUT_POWERS
    return _held_out_path(problem, settings, _least(problem, settings), top, 0, highest, widen=widen)


def _held_out_path(problem, settings, base, top, bottom, highest, by=0.0, widen=None, rule=None, folds=True,
                   ways=(NARROWER,), or_flat=False, warm_up=0):
    """``(problem, start, n_iter, held_out)``: the problem at the ridge chosen by the log-loss of the groups of
    identical rows held out of each fold's fit (``_HeldOut``; one fold without ``folds``), its first fold's fit,
    and every fold's (``HeldOutFits``).

    The ridges are ``base * 4 ** top`` (reached by warm starts from up to ``warm_up`` larger ones), then a
    factor of 4 smaller while each lowers the held-out loss, down to ``base * 4 ** bottom``, or larger while
    each lowers it where the first step down did not, up to ``base * 4 ** highest``; the last that lowered it
    is taken. A step lowers the loss where it cuts the mean by more than ``by`` standard errors of the paired
    difference (0: any cut). ``widen`` (``_fit.widener``'s) and ``rule`` (the rule's ridge): the widths of
    ``ways`` are then tried in turn, each at its rule's ridge times the multiple of ``rule`` chosen (warm-started
    from ``TRIAL_WARM_UP`` factors of 4 above; its first fold racing the best, ``_HeldOut.trial``), while each
    lowers the loss by ``CHECK_SIGNIFICANCE`` standard errors; the next way only where the first width of one did
    not. Without ``rule`` (no ridge of the rule's to scale), the widths of ``ways[0]`` run the path from their
    own least ridge in turn, each kept where it lowers the loss by ``CHECK_SIGNIFICANCE`` standard errors
    (``FLAT_SIGNIFICANCE`` while the best is ``flat``) and ``informs``, tried on while each is kept or the best
    is flat. ``or_flat``: with ``rule``, where the chosen ridge is flat,
    ``_on_held_out_rows``'s choice instead (no signal at the rule's ridge, as where the subsamples see none).
    """
    held = _HeldOut(problem, settings, folds, (top, bottom, highest, by))
    best = held.walk(problem, base, held.shared, warm_up) if held.outs else None
    if best is None:
        return problem, None, held.n_iter, None
    if or_flat and rule and widen is not None and held.flat(best):
        chosen, start, n_iter, held_out = _on_held_out_rows(problem, settings, widen)
        return chosen, start, n_iter + held.n_iter, held_out
    chosen, fits = replace(problem, alpha=float(base * 4.0 ** best[0])), best[1]
    multiple = chosen.alpha / rule if rule else None
    for factor in ways[0] if widen is not None and not rule else ():
        other = widen(factor)
        other_base = _least(other, settings)
        found = held.walk(other, other_base, [{} for _ in held.outs])
        better = held.lowers(found, best, FLAT_SIGNIFICANCE if held.flat(best) else CHECK_SIGNIFICANCE) and \
            held.informs(found)
        held.report(factor, found, best)
        if better:
            chosen, fits, best = replace(other, alpha=float(other_base * 4.0 ** found[0])), found[1], found
        elif not held.flat(best):
            break
    # other widths in turn, each at its own rule's ridge times the multiple chosen, while each lowers the loss
    for way in ways if widen is not None and multiple else ():
        for factor in way:
            other = widen(factor)
            other = replace(other, alpha=other.alpha * multiple)
            found = held.trial(other, best)
            held.report(factor, found, best, other.alpha)
            if isinstance(found, str) or not held.lowers(found, best, CHECK_SIGNIFICANCE):
                break
            chosen, fits, best = other, found[1], found
        if chosen.kernel is not problem.kernel:
            break  # this way moved the width: the other way would go back
    coef, intercept, converged, view = fits[0]
    held_out = HeldOutFits(held.outs, [held.scores([fit]) for fit in fits])
    return chosen, (view.whole(coef), intercept, converged), held.n_iter, held_out


class HeldOutFits(NamedTuple):
    """The held-out rows of the folds that chose a model (``_HeldOut.outs``), and each fold's held-out scores under
    the model fitted to its other rows (``_HeldOut.scores``): what the fits leave once their kernel matrices go."""

    outs: list
    scores: list


class _HeldOut:
    """The held-out folds of a problem's rows (``_folds``) and the fits of models on the others: a held-out row
    weighs zero in its fold's fits. ``outs`` is empty where some fold leaves a class without fitted rows (or
    with only them): nothing to separate it from. ``path``: ``_held_out_path``'s (top, bottom, highest, by);
    ``n_folds``, ``skip``: ``_folds``'s."""

    def __init__(self, problem, settings, folds, path, n_folds=None, skip=0):
        rows, self.settings, self.loss = problem.rows, settings, problem.loss
        self.top, self.bottom, self.highest, self.by = path
        w = np.asarray(to_numpy(rows.w), dtype=np.float64)
        groups = np.arange(len(w)) if rows.replicates is None else rows.replicates
        outs = _folds(_group_draws(problem.seed, w, groups), w, groups, folds, n_folds, skip)
        Y = np.asarray(to_numpy(rows.Y))
        fitted = [Y[(w > 0) & ~out] for out in outs]
        self.outs = [] if any(not len(f) or np.any(f.max(axis=0) == f.min(axis=0)) for f in fitted) else outs
        self.n_iter, self.cold = 0, [(None, None, False)] * len(self.outs)
        # per fold, one K, one preconditioner for every fit of the path's own kernel (CG's solutions unchanged)
        self.shared = [{} for _ in self.outs]
        if not self.outs:
            return
        kept = [np.where(out, 0.0, w) for out in self.outs]  # each fold's fitted rows' weights
        self.folds_of = _fold_views(self.outs, [like(k / k.sum(), rows.Y) for k in kept])
        self.held = np.concatenate([np.flatnonzero(out) for out in self.outs])  # each held-out row once, in order
        self.W = w[self.held] / w[self.held].sum()
        self.groups = np.unique(groups[self.held], return_inverse=True)[1]
        self.n_effective = effective_count(self.W, self.groups)
        self.labels = (Y[self.held, 0] > 0).astype(int) if Y.shape[1] == 1 else np.argmax(Y[self.held], axis=1)
        self.prior = [None, None, _prior_losses(Y, kept, self.outs)]

    def fit(self, on, alpha, starts, reuse, folds=None, max_iter=None):
        """``(fits, losses)`` of ``on``'s model at ``alpha``, a fit per fold on its fitted rows (of the folds
        ``folds``, consecutive; None: every fold) and the losses of their held-out rows; None where one fails
        (or needs more than ``max_iter`` iterations; None: the settings')."""
        folds = range(len(self.outs)) if folds is None else folds
        fits, views = [], self.folds_of(on)
        for fold in folds:
            view, start = views[fold], starts[fold]
            fit = replace(self.settings, alpha=alpha, coef_init=start[0], intercept_init=start[1], verbose=0,
                          callback=None, rounding_stops=[], landmarks=None, reuse=reuse[fold],
                          tol=max(self.settings.tol, HELD_OUT_TOL),
                          max_iter=min(self.settings.max_iter, max_iter or self.settings.max_iter))
            with recorded() as caught:
                result = run_solver(on.solver, view.operator, view.Y, view.w, fit)
            self.n_iter += result.n_iter
            if caught or not (result.converged or fit.rounding_stops):
                return None  # a failed fit ends the path: a smaller ridge is harder
            fits.append((result.dual_coef, result.intercept, False, view))  # a start, in its fold's rows
        F = self.loss.log_probabilities(self.scores(fits))  # on the host
        labels = self.labels[self.rows_of(folds)]
        losses = -F[np.arange(len(labels)), labels]
        return (fits, losses) if np.all(np.isfinite(losses)) else None

    def rows_of(self, folds):
        """The positions in ``held`` of the held-out rows of the consecutive ``folds``."""
        ends = np.cumsum([0] + [int(np.count_nonzero(out)) for out in self.outs])
        return slice(int(ends[folds[0]]), int(ends[folds[-1] + 1]))

    def trial(self, other, best):
        """``[None, fits, losses]`` of ``other`` at its ridge, each fold's fit warm-started from one cold at
        ``TRIAL_WARM_UP`` factors of 4 above; None where a fit fails. With several folds, the first fold's races
        ``best`` (``[power, fits, losses]``, the best so far): where its held-out loss is not below the best's on
        that fold's rows, the trial stops there (``"lost"``): a width the first fold does not favour seldom passes
        the significance test over every fold, and each other fold's fits cost as much as the path's."""
        reuse, parts = [{} for _ in self.outs], [[0], list(range(1, len(self.outs)))]
        fits, losses = [], []
        for part in parts if len(self.outs) > 1 else parts[:1]:
            begin = list(self.cold)
            for power in range(TRIAL_WARM_UP, -1, -1):
                done = self.fit(other, other.alpha * 4.0**power, begin, reuse, part, TRIAL_MAX_ITER)
                if done is None:
                    return None
                for fold, fit in zip(part, done[0]):
                    begin[fold] = fit
            fits, losses = fits + done[0], losses + [done[1]]
            if part == [0] and len(self.outs) > 1:
                rows = self.rows_of(part)
                if (done[1] - best[2][rows]) @ self.W[rows] >= 0:
                    return "lost"
        return [None, fits, np.concatenate(losses)]

    def scores(self, fits):
        """The held-out rows' scores under ``fits`` (``fit``'s), in ``held``'s order, as float64 host arrays."""
        return np.concatenate([np.asarray(to_numpy(view.held_out_scores(coef) + intercept), dtype=np.float64)
                               for coef, intercept, _, view in fits])

    def lowers(self, done, best, by=None):
        """Whether ``done``'s held-out losses are below ``best``'s by ``by`` (None: the path's) standard errors."""
        by = self.by if by is None else by
        return done is not None and significantly_fewer(done[2], best[2], self.W, self.groups, self.n_effective, by)

    def informs(self, found):
        """Whether a path's choice predicts the held-out rows better than the classes' shares, by
        ``CHECK_SIGNIFICANCE`` standard errors."""
        return self.lowers(found, self.prior, CHECK_SIGNIFICANCE)

    def flat(self, found):
        """Whether a path's choice fell to its least ridge, or does not inform (``informs``): a kernel too smooth
        for the rows at any ridge."""
        return found[0] == self.bottom or not self.informs(found)

    def walk(self, on, base, reuse, warm_up=0):
        """``[power, fits, losses]`` of the ridge ``base * 4 ** power`` the path chooses for ``on``, its first ridge
        reached from up to ``warm_up`` larger ones; None where that ridge fails."""
        top, bottom, highest = self.top, self.bottom, self.highest
        path = []  # [power of 4, the folds' fits, held-out losses], every ridge fitted

        def fit_at(power, starts):
            done = self.fit(on, base * 4.0**power, starts, reuse)
            if done is None:
                return None
            path.append([power, *done])
            return path[-1]

        starts = self.cold
        for power in range(min(highest, top + warm_up), top, -1):  # the warm-up: the climb's ridges, made first
            done = fit_at(power, starts)
            starts = starts if done is None else done[1]
        best = fit_at(top, starts)
        if best is None:
            return None
        for power in range(top - 1, bottom - 1, -1):
            done = fit_at(power, path[-1][1])
            if not self.lowers(done, best):
                break
            best = done
        # where the first step down did not lower the loss, larger ridges while each does (each fit the cheaper)
        climb = best[0] == top and any(power < top for power, _, _ in path)
        while climb and best[0] < highest:
            made = [fit for fit in path if fit[0] == best[0] + 1]
            done = made[0] if made else fit_at(best[0] + 1, best[1])
            if not self.lowers(done, best):
                break
            best = done
        if self.settings.verbose:
            means = ", ".join(f"{base * 4.0**power:.3g}: {losses @ self.W:.4g}" for power, _, losses in
                              sorted(path, key=lambda p: -p[0]))
            print(f"[alpha] held-out log-loss on {len(self.held)} rows in {len(self.outs)} folds by ridge: "
                  f"{means}; chosen {base * 4.0**best[0]:.3g}")
        return best

    def report(self, factor, found, best, alpha=None):
        """The verbose line of a width tried: its held-out log-loss against the best so far."""
        if self.settings.verbose:
            at = "" if alpha is None else f", alpha {alpha:.3g}"
            loss = "failed" if found is None else "above on the first fold" if isinstance(found, str) else \
                f"{found[2] @ self.W:.4g}"
            print(f"[sigma] held-out log-loss at {factor:g} times the width{at}: {loss}; "
                  f"chosen so far {best[2] @ self.W:.4g}")


def _prior_losses(Y, kept, outs):
    """Each fold's held-out rows' log-loss under the classes' shares of its fitted rows' weight ``kept``."""
    labels = _labels(Y)
    losses = []
    for weights, out in zip(kept, outs):
        shares = class_shares(Y, weights)  # the intercept-only model's probabilities
        with np.errstate(divide="ignore"):
            losses.append(-np.log(shares[labels[out]]))
    return np.concatenate(losses)


def _fold_views(outs, w_fits):
    """``views(problem)``: each fold's ``_FoldView`` of the problem (made once per problem), within the memory
    budget the problem's stored kernel matrix leaves."""
    made = {}  # id(problem): (problem, its views); the problem is kept so that its id is not reused

    def views(problem):
        if id(problem) not in made:
            operator, folds = problem.operator, []
            left = int(problem.options["memory_budget"]) - (operator.n * operator.m * operator.itemsize
                                                            if operator.stored else 0)
            for out, w_fit in zip(outs, w_fits):
                folds.append(_FoldView(problem, out, w_fit, left))
                left -= folds[-1].stored_bytes
            made[id(problem)] = problem, folds
        return made[id(problem)][1]

    return views


class _FoldView:
    """A fold's fits of ``problem``: on the kernel matrix of its fitted rows where that fits in ``budget`` bytes
    (the held-out rows' scores then from their kernel rows against those), else on the whole set's with the
    held-out rows at weight zero (the same optimum: their coefficients are zero, but every product is n^2)."""

    def __init__(self, problem, out, w_fit, budget):
        rows, operator = problem.rows, problem.operator
        self.n, self.held = rows.Y.shape[0], np.flatnonzero(out)
        self.fitted = np.flatnonzero(~out)
        m, precomputed = len(self.fitted), problem.kernel is None
        self.stored_bytes = m * m * operator.itemsize
        if self.stored_bytes > budget or m == self.n:
            self.fitted, self.stored_bytes = None, 0
            self.operator, self.Y, self.w = operator, rows.Y, w_fit
            return
        X, budget = rows.X, int(problem.options["memory_budget"])
        self.operator = KernelOperator(block_of(X, self.fitted, self.fitted) if precomputed else
                                       rows_of(X, self.fitted), problem.kernel, memory_budget=budget,
                                       dtype=operator.dtype, threads=operator.n_threads)
        self.Y, self.w = rows_of(rows.Y, self.fitted), rows_of(w_fit, self.fitted)
        self.cross = (block_of(X, self.held, self.fitted) if precomputed else rows_of(X, self.held),
                      None if precomputed else rows_of(X, self.fitted), problem.kernel, budget, operator)

    def held_out_scores(self, coef):
        """The held-out rows' ``K coef`` (coef: the fitted rows' coefficients)."""
        if self.fitted is None:
            return take_rows(self.operator.matvec(coef), self.held)
        Z, C, kernel, budget, operator = self.cross
        return cross_kernel_dot(kernel, Z, C, coef, memory_budget=budget, dtype=operator.dtype,
                                threads=operator.n_threads)

    def whole(self, coef):
        """The fit's coefficients over every row (zero on the held-out ones)."""
        return coef if self.fitted is None else add_at_rows(zeros_as(coef, (self.n, coef.shape[1])), self.fitted, coef)


def _group_draws(seed, w, groups):
    """Each row's group's uniform draw: one per group of positive weight, in the order of their first rows, so that
    rows of zero weight, wherever they are, change no group's draw."""
    first = np.unique(groups, return_index=True)[1]  # each group's first row, by group number
    weighs = np.bincount(groups, weights=w, minlength=len(first)) > 0
    order = np.flatnonzero(weighs)[np.argsort(first[weighs], kind="stable")]
    u = np.zeros(len(first))
    u[order] = np.random.RandomState(seed).rand(len(order))
    return u[groups]


def _folds(u, w, groups, folds=True, n_folds=None, skip=0):
    """The held-out rows of each fold, from each row's group's uniform draw ``u``: the first ``HELD_OUT`` of
    [0, 1), then the next, ``n_folds`` of them (None: ``_n_folds`` for the groups of positive weight; one without
    ``folds``), but the first ``skip`` (made already). Log-loss is led by the few confidently wrong rows (a label drawn at random), which a few hundred
    held-out rows may not hold: their ridge then overfits the others."""
    if n_folds is None:
        n_folds = _n_folds(distinct_rows(w, groups)) if folds else 1
    outs = [(u >= k * HELD_OUT) & (u < (k + 1) * HELD_OUT) & (w > 0) for k in range(skip, n_folds)]
    return [out for out in outs if out.any()]


def _n_folds(n):
    """Folds whose held-out rows, ``HELD_OUT`` of the n rows each, hold ``HELD_OUT_ROWS`` together, at most
    ``1 / HELD_OUT`` (every row once)."""
    return int(min(round(1 / HELD_OUT), max(1, np.ceil(HELD_OUT_ROWS / max(HELD_OUT * n, 1.0)))))


def _held_out_count(n):
    """About how many of n rows the folds hold out together."""
    return HELD_OUT * n * _n_folds(n)


def _held_out_multiple(problem, settings, n_distinct, rng):
    """The multiple of its rule's ridge ``_held_out_path`` chooses on ``HELD_OUT_SUBSAMPLE`` of the ``n_distinct``
    groups of identical rows drawn at random (``draw_groups``), within ``4 ** HELD_OUT_REACH`` either way (not below
    the subsample's least ridge); 1 where the held-out rows would be under ``MIN_SUBSAMPLE``, or a class has no rows
    in the subsample."""
    n = int(HELD_OUT_SUBSAMPLE * n_distinct)
    if HELD_OUT * n < MIN_SUBSAMPLE:
        return 1.0
    idx = draw_groups(problem.rows.w, problem.rows.replicates, n, rng)
    sub = _subproblem(problem, settings, idx, rng, dtype=problem.operator.dtype)  # no dense system here
    if sub is None:
        return 1.0
    bottom = min(0, max(-HELD_OUT_REACH, int(np.ceil(np.log(_least(sub, settings) / sub.alpha) / np.log(4.0)))))
    settings = replace(settings, coef_init=None, intercept_init=None)
    chosen = _held_out_path(sub, settings, sub.alpha, 0, bottom, HELD_OUT_REACH, folds=False, warm_up=WARM_UP)[0]
    multiple = chosen.alpha / sub.alpha
    if settings.verbose:
        print(f"[alpha] on held-out rows of a subsample of {n} rows: {multiple:g} times the rule's ridge")
    return multiple


def _subproblem(problem, settings, idx, rng, dtype="float64"):
    """The problem on the rows ``idx`` at its own rule's ridge, its kernel in ``dtype``; None where a class
    has none of them (or only them)."""
    rows, loss, precomputed = problem.rows, problem.loss, problem.kernel is None
    X = block_of(rows.X, idx, idx) if precomputed else rows_of(rows.X, idx)
    Y, w = rows_of(rows.Y, idx), rows_of(rows.w, idx)
    labels = np.asarray(to_numpy(Y))
    if not np.all((labels > 0).any(axis=0) & (labels <= 0).any(axis=0)):
        return None
    w, group_of = w / xp_of(w).sum(w), subset_groups(rows.replicates, idx)
    precision = np.float32 if problem.operator.dtype == np.float32 else np.float64  # the set's rule's floor
    threads = problem.options["n_threads"]
    alpha = auto_alpha(X, problem.kernel, Y, w, group_of, settings.fit_intercept, rng, precomputed=precomputed,
                       loss=loss, precision=precision, threads=threads)[0]
    sub_rows = replace(rows, X=X, Y=Y, w=w, replicates=group_of, train=None, validation=None, X_given=X)
    return replace(problem, rows=sub_rows, alpha=alpha, landmarks=None,
                   operator=KernelOperator(X, problem.kernel, dtype=dtype, threads=threads))


def _subsample_multiple(problem, settings, idx, rng, lowest):
    """``(multiple, losses)``: the multiple (at least ``lowest``) of the rule's ridge the path chooses on the
    rows ``idx``, and its groups' leave-one-out losses there; 1 and None where a class has none."""
    sub = _subproblem(problem, settings, idx, rng)
    if sub is None:
        return 1.0, None  # a class without rows (or only them): the subsample cannot say how sharply to split it
    return _path_losses(sub, settings, lowest)


def _path_losses(sub, settings, lowest, extend=True):
    """``(multiple, losses)`` of ``_path`` on the subsample's problem ``sub``, from its rule's ridge."""
    path = replace(settings, alpha=sub.alpha, coef_init=None, intercept_init=None, callback=None, landmarks=None,
                   reuse=None, verbose=0)
    alpha, _, _, losses = _path(sub, path, extend=extend, lowest=lowest, highest=SUBSAMPLE_EXTEND_UP)
    return alpha / sub.alpha, losses


def _settled(path, W):
    """The ridge ``_one_standard_error`` chooses on the path, made again until the losses it rests on,
    the least mean's and the chosen ridge's, are exact (``_logistic_loo.exact``); the others stay approximate."""
    while True:
        losses = np.array([p[2] for p in path])
        todo = {int(np.argmin(losses @ W)), _one_standard_error(losses, W)}
        todo = [i for i in todo if path[i][3] is not None]
        if not todo:
            return _one_standard_error(losses, W)
        for i in todo:
            path[i][2], path[i][3] = path[i][3](), None


def _one_standard_error(losses, W):
    """The first (largest) ridge whose mean loss exceeds the least by at most that excess's standard error.

    ``losses``: (ridges, groups) held-out losses; ``W``: the groups' weights (summing to 1). The
    ridges are scored on the same rows, so each is compared with the best row by row: the error of
    the mean difference is Kish's, its weighted spread over the effective number of groups.
    """
    excess = losses - losses[int(np.argmin(losses @ W))]
    mean = excess @ W
    with np.errstate(over="ignore"):  # a spread past float64's range (a left-out row at 1e160 nats) is inf
        error = np.sqrt(((excess - mean[:, None]) ** 2 @ W) / effective_count(W))
    return int(np.flatnonzero(mean <= error)[0])


def _groups(rows):
    """``(first, W, T)``: each group of identical rows' first row, summed weight and weighted mean label, for the
    groups of positive weight (rows of zero weight change no fit, and no choice)."""
    w = np.asarray(to_numpy(rows.w), dtype=np.float64)
    group_of = np.arange(len(w)) if rows.replicates is None else rows.replicates
    first, T, W = collapse(group_of, int(group_of.max()) + 1, to_numpy(rows.Y), w)
    weighs = W > 0
    return first[weighs], W[weighs], T[weighs]


def _judged(W, T):
    """The groups' weights in a leave-one-out choice (summing to 1; None where none is left): zero for a group
    that holds every row of some class. Without it the class has no row, its intercept runs off to minus
    infinity, and its leave-one-out loss grows without bound at any ridge (a rounding-driven tens or 1e5 nats
    where Newton stops): it tells no ridge or width from another."""
    shares = np.column_stack([1.0 + T[:, 0], 1.0 - T[:, 0]]) if T.shape[1] == 1 else T  # (+-1 codes for two)
    present = shares > 0
    alone = (present & (present.sum(axis=0) == 1)).any(axis=1)
    kept = np.where(alone, 0.0, W)
    return kept / kept.sum() if kept.sum() > 0 else None


def _distinct_operator(problem, first):
    """The kernel matrix of the distinct rows, in float64 (their Newton system is the rows' own)."""
    X, precomputed = problem.rows.X, problem.kernel is None
    if len(first) < X.shape[0]:
        X = block_of(X, first, first) if precomputed else rows_of(X, first)
    return KernelOperator(X, problem.kernel, dtype="float64", threads=problem.options["n_threads"])
