"""``alpha="auto"`` for a logistic loss on a full model: the ridge, and on a small set the width, by leave-one-out.

The general rule (``_auto_alpha``) takes the squared loss's ridge for the labels read as
its targets, scaled by the logistic loss's curvature at the
intercept-only model; the log-loss it leaves can be far from the best ridge's
(UCI wine, 10 splits: 0.085 there, 0.051 at this rule's). Where Newton's exact
system on the distinct rows is small (``_dense_newton.tiny``), the ridges
``MULTIPLES`` times that start are fitted instead, from the largest down,
each warm-started from the last, and each is scored by the approximate
leave-one-out loss (Rad & Maleki, 2020): without row i the minimiser moves by
one Newton step of the objective without that row, which moves its scores to

    f_i^(-i) = f_i + Q_i (I - H_i Q_i)^-1 g_i,    Q_i = Psi_i M^-1 Psi_i'

(g_i, H_i: the row's gradient and Hessian of the loss in its scores, weight
included; M: the Newton system in the dense coordinates ``Psi = [K Z, 1]``).
A group of identical rows is left out as one, with its summed weight and its
mean label (the loss is linear in the label). The largest ridge whose mean loss
exceeds the least by at most one standard error of that excess is chosen (a
paired one-standard-error rule, after Breiman et al., 1984): on a few hundred
rows the least is partly chance. The one step errs where it is long (a nearly
interpolating fit, a row its neighbours contradict): there the ridges the
choice rests on are scored exactly, by Newton's iterations on the objective
without the row (``_exact``). The path runs at each of ``WIDTHS`` times
``sigma="scale"``'s width, from the rule's ridge for it, and the widest whose
chosen losses are within one standard error of the least is kept. The scoring
is a small dense computation and runs on the host.

A larger set's dense system is not small: there the path runs on ``DRAWS``
random subsamples of the rows, the largest whose system is (at least
``MIN_SUBSAMPLE`` rows; with many classes the coupled system allows fewer,
and the rule's ridge stands), around the rule's ridge for each subsample,
going on past an end it chooses (``EXTEND_TO``) but not below the least
ridge; the median multiple scales the rule's ridge for the whole set. The
multiple is what transfers: the rule misjudges the curvature at the fitted
model the same way at either size (too large a ridge for classes a
noiseless boundary splits, too small for overlapping ones). There
``sigma="scale"``'s width stands (see ``WIDTHS``).
"""

import warnings
from dataclasses import replace

import numpy as np
import scipy.linalg

from ._array_api import block_of, eye, log_expit, logsumexp, row_dot, rows_of, solve_psd, to_numpy, xp_of
from ._auto_alpha import auto_alpha, curvature_share, least_ridge
from ._operator import KernelOperator
from ._replicates import collapse, effective_count, subset_groups
from ._solvers import run_solver
from ._solvers._dense_newton import MAX_UNKNOWNS, coordinates, features, systems, tiny

# The ridges fitted, as multiples of the general rule's, largest first: a decade and a fifth either side.
MULTIPLES = 4.0 ** np.arange(2, -3, -1)
# A subsample's path goes on past an end it chooses, to at most this factor either side of its start.
EXTEND_TO = 4.0**4
# The path's fits are solved at least this tightly: the one-standard-error rule compares scores a few
# 1e-4 apart, which fits stopped at tol=1e-3 do not resolve (weights and the rows repeated chose apart).
PATH_TOL = 1e-5
# The fewest rows a subsample's path may choose the multiple from (fewer say too little of the set).
MIN_SUBSAMPLE = 200
# Subsamples whose median multiple is taken (odd): one subsample's rule and path vary with its rows.
DRAWS = 3
# The widths a small set's paths compare, as multiples of sigma="scale"'s (UCI wine, iris and breast
# cancer's held-out log-loss fell 10-30% at 1.4-2 times it). Not a subsample's: its paths rank them as
# the test rows do (hastie: 2 and 1.41 ahead of 1), but a wider kernel's smaller ridge slows the whole
# set's fit (gaussian quantiles at twice the width: 78 s against 8 s, log-loss 0.040 against 0.054).
WIDTHS = (1.0, 2.0**0.5, 2.0)
# A row whose one leave-one-out step raises its loss by more than this (nats) is left out exactly: the
# step is optimistic where it is long (iris, 105 rows: 0.054 against the exact 0.094 at the ridge it chose).
FAR = 0.5
# The exact leave-one-out's Newton iterations: at most this many with the fit's Hessian (for every row
# at once), then this many with their own, until the decrement is below the tolerance.
CHORD_ITER = 20
NEWTON_ITER = 20
REFINE_TOL = 1e-12


def choose(problem, settings, widen=None):
    """``(problem, start, n_iter)``: the problem at the chosen width and ridge, the chosen fit's
    ``(coef, intercept)`` to start the solve from, and the iterations the paths ran; on a larger set,
    the problem at ``_on_a_subsample``'s ridge, None and 0.

    ``widen(factor)``: the problem with its kernel ``factor`` times as wide (its own rule's ridge); None
    where the width is the user's. Then each of ``WIDTHS`` runs its path, and the width whose chosen
    ridge leaves the least mean leave-one-out loss on the same rows is kept.
    """
    rows, loss = problem.rows, problem.loss
    n_distinct = rows.Y.shape[0] if rows.replicates is None else int(rows.replicates.max()) + 1
    if not tiny(n_distinct, rows.Y.shape[1], not loss.diagonal_hessian):  # before any kernel evaluation
        return replace(problem, alpha=_on_a_subsample(problem, settings)), None, 0
    fits, n_iter = [], 0  # (factor, problem at its chosen ridge, start, its groups' losses there)
    for factor in WIDTHS if widen is not None else (1.0,):
        candidate = problem if factor == 1.0 else widen(factor)
        alpha, start, iters, losses = _path(candidate, settings, extend=True, exact=True)
        n_iter += iters
        if losses is not None:
            fits.append((factor, replace(candidate, alpha=alpha), start, losses))
    if not fits:
        return problem, None, n_iter
    # the widest kernel within one standard error of the least loss: the smoothest the rows cannot tell apart
    fits.sort(key=lambda fit: -fit[0])
    chosen = fits[_one_standard_error(np.array([fit[3] for fit in fits]), _groups(rows)[1])]
    if settings.verbose and widen is not None:
        means = ", ".join(f"x{factor:.3g}: {losses @ _groups(rows)[1]:.4g}" for factor, _, _, losses in fits)
        print(f"[sigma] leave-one-out log-loss by multiple of sigma='scale': {means}; chosen x{chosen[0]:.3g}")
    return chosen[1], chosen[2], n_iter


def _path(problem, settings, extend=False, lowest=0.0, exact=False):
    """``(alpha, start, n_iter, losses)``: the ridge chosen around ``problem.alpha`` on a small set, its
    fit ``(coef, intercept, converged)`` (None where no fit was scored), the iterations the path ran, and
    the groups' leave-one-out losses at the ridge chosen (None where none was scored). ``extend``: a
    choice at an end of the path goes on past it, a factor of 4 at a time, to at most ``EXTEND_TO``
    times or a ``EXTEND_TO``-th of the start; no multiple is below ``lowest``. ``exact``: the choice
    rests on exact losses (``_settled``); a subsample's path, whose multiple is what transfers, keeps the
    approximation (hastie's and gaussian quantiles' multiples did not move, at 1.7 and 1.5 times the time)."""
    rows, loss = problem.rows, problem.loss
    first, W, T = _groups(rows)
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_solver(problem.solver, problem.operator, rows.Y, rows.w, path)
        n_iter += result.n_iter
        # a fit stopped at its objective's rounding (a tol below it, where the CPU's BLAS decides the
        # stop) is at its optimum for scoring; any other failure ends the path: a smaller ridge is harder
        if caught or not (result.converged or stops):
            return None
        F = np.asarray(to_numpy(problem.operator.matvec(result.dual_coef) + result.intercept))[first]
        try:  # a score that rounding breaks (a singular I - H Q) ends the path as a warning does
            with np.errstate(all="ignore"):
                losses = _scores(Psi, r, F, W, T, alpha, settings.fit_intercept, loss)
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
    chosen = _settled(path, W)
    broke = len(path) < len(multiples)
    while extend:
        if chosen == len(path) - 1 and not broke and path[-1][0] / 4 >= max(lowest, 1.0 / EXTEND_TO):
            at, multiple, start = len(path), path[-1][0] / 4, path[-1][1]
        elif chosen == 0 and path[0][0] < EXTEND_TO:
            at, multiple, start = 0, path[0][0] * 4, path[0][1]
        else:
            break
        done = fit_at(multiple, start)
        if done is None:
            break
        path.insert(at, [multiple, *done])
        chosen = _settled(path, W)
    if settings.verbose:
        means = ", ".join(f"{m:g}: {losses @ W:.4g}" for m, _, losses, _ in path)
        sigma = "" if problem.kernel is None else f" at sigma={problem.kernel.params.get('sigma', 'none'):.4g}"
        print(f"[alpha] leave-one-out log-loss{sigma} by multiple of {problem.alpha:.3e}: {means}; "
              f"chosen {path[chosen][0]:g}")
    return float(problem.alpha * path[chosen][0]), path[chosen][1], n_iter, path[chosen][2]


def _on_a_subsample(problem, settings):
    """The rule's ridge times the median multiple the path chooses on ``DRAWS`` random subsamples of
    the rows (the largest whose dense system is small), each around the rule's ridge for it, none
    below ``least_ridge``'s for this loss. The rule's ridge where a subsample would be under
    ``MIN_SUBSAMPLE`` rows."""
    rows, loss = problem.rows, problem.loss
    k, coupled = rows.Y.shape[1], not loss.diagonal_hessian
    n = max((m for m in range(MIN_SUBSAMPLE, MAX_UNKNOWNS + 1) if tiny(m, k, coupled)), default=0)
    positive = np.flatnonzero(np.asarray(to_numpy(rows.w)) > 0)
    if n < MIN_SUBSAMPLE or len(positive) <= n:
        return problem.alpha
    # separable classes' paths would fall to ever smaller ridges, each slower: not past the least one
    lowest = least_ridge(problem.operator, rows.w, rows.Y.shape[0]) * curvature_share(
        loss, rows.Y, rows.w, settings.fit_intercept) / problem.alpha
    rng = np.random.RandomState(problem.seed)
    multiples = [_subsample_multiple(problem, settings, np.sort(rng.choice(positive, n, replace=False)), rng,
                                     lowest) for _ in range(DRAWS)]
    multiple = float(np.median(multiples))  # DRAWS is odd: one of the multiples
    if settings.verbose:
        print(f"[alpha] on {DRAWS} subsamples of {n} rows the leave-one-out paths took {multiples} times "
              f"the rule's ridge: {multiple:g}")
    return problem.alpha * multiple


def _subsample_multiple(problem, settings, idx, rng, lowest):
    """The multiple (at least ``lowest``) of the rule's ridge the path chooses on the rows ``idx``; 1 where a
    class has none."""
    rows, loss, precomputed = problem.rows, problem.loss, problem.kernel is None
    X = block_of(rows.X, idx, idx) if precomputed else rows_of(rows.X, idx)
    Y, w = rows_of(rows.Y, idx), rows_of(rows.w, idx)
    labels = np.asarray(to_numpy(Y))
    if not np.all((labels > 0).any(axis=0) & (labels <= 0).any(axis=0)):
        return 1.0  # a class without rows (or only them): the subsample cannot say how sharply to separate it
    w, group_of = w / xp_of(w).sum(w), subset_groups(rows.replicates, idx)
    precision = np.float32 if problem.operator.dtype == np.float32 else np.float64  # the set's rule's floor
    alpha = auto_alpha(X, problem.kernel, Y, w, group_of, settings.fit_intercept, rng, precomputed=precomputed,
                       loss=loss, precision=precision)[0]
    sub_rows = replace(rows, X=X, Y=Y, w=w, replicates=group_of, train=None, validation=None, X_given=X)
    sub = replace(problem, rows=sub_rows, alpha=alpha, landmarks=None,
                  operator=KernelOperator(X, problem.kernel, dtype="float64"))
    path = replace(settings, alpha=alpha, coef_init=None, intercept_init=None, callback=None, landmarks=None,
                   reuse=None, verbose=0)
    return _path(sub, path, extend=True, lowest=lowest)[0] / alpha


def _settled(path, W):
    """The ridge ``_one_standard_error`` chooses on the path, made again until the losses it rests on,
    the least mean's and the chosen ridge's, are exact (``_exact``); the others stay approximate (making
    every ridge's exact cost 1.3-1.6 times the time on iris, wine and breast cancer, and chose no better)."""
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
    """``(first, W, T)``: each group of identical rows' first row, summed weight and weighted mean label."""
    w = np.asarray(to_numpy(rows.w), dtype=np.float64)
    group_of = np.arange(len(w)) if rows.replicates is None else rows.replicates
    first, T, W = collapse(group_of, int(group_of.max()) + 1, to_numpy(rows.Y), w)
    return first, W, T


def _distinct_operator(problem, first):
    """The kernel matrix of the distinct rows, in float64 (their Newton system is the rows' own)."""
    X, precomputed = problem.rows.X, problem.kernel is None
    if len(first) < X.shape[0]:
        X = block_of(X, first, first) if precomputed else rows_of(X, first)
    return KernelOperator(X, problem.kernel, dtype="float64")


def _scores(Psi, r, F, W, T, alpha, fit_intercept, loss):
    """Each distinct row's approximate leave-one-out loss at its scores F (weights W, mean labels T)."""
    k, binary = F.shape[1], loss.diagonal_hessian
    M = systems(Psi, F, W, alpha, r, fit_intercept, loss)[0]
    if binary:  # the binary logistic loss: one column of log-odds, labels +-1
        Q = _leverages(M, Psi)
        t, f = (T[:, 0] + 1.0) / 2.0, F[:, 0]
        p = np.exp(log_expit(f))
        f = (f + Q * (W * (p - t)) / (1.0 - Q * W * p * (1.0 - p)))[:, None]
    else:
        q, M_inv = Psi.shape[1], solve_psd(M, eye(M, M.shape[0]))
        Q = np.stack([np.stack([row_dot(Psi @ M_inv[c * q:(c + 1) * q, d * q:(d + 1) * q], Psi)
                                for d in range(k)], 1) for c in range(k)], 1)
        P = np.exp(F - logsumexp(F, axis=1, keepdims=True))
        H = W[:, None, None] * (P[:, :, None] * np.eye(k) - P[:, :, None] * P[:, None, :])
        f = F + (Q @ np.linalg.solve(np.eye(k) - H @ Q, (W[:, None] * (P - T))[:, :, None]))[:, :, 0]
    return _row_losses(f, T, binary)


def _exact(Psi, r, F, W, T, alpha, fit_intercept, loss, approximate):
    """The groups' leave-one-out losses: ``approximate``'s, exact (``_refined``) where the one step
    raised a group's loss by more than ``FAR``."""
    binary = loss.diagonal_hessian
    losses, far = approximate.copy(), np.flatnonzero(approximate - _row_losses(F, T, binary) > FAR)
    if far.size:
        try:  # a singular system (a group alone in a direction of the kernel) keeps the approximation
            with np.errstate(all="ignore"):
                M = systems(Psi, F, W, alpha, r, fit_intercept, loss)[0]
                exact = _refined(Psi, r, F, W, T, alpha, M, far, binary, fit_intercept, loss)
        except np.linalg.LinAlgError:
            exact = None
        if exact is not None and np.all(np.isfinite(exact)):
            losses[far] = exact
    return losses


def _row_losses(F, T, binary):
    """Each row's log-loss at its scores F (``(..., n, k)``) for its mean labels T (+-1 where ``binary``)."""
    if binary:
        t = (T[..., 0] + 1.0) / 2.0
        return -(t * log_expit(F[..., 0]) + (1.0 - t) * log_expit(-F[..., 0]))
    return logsumexp(F, axis=-1) - np.sum(T * F, axis=-1)


def _row_gradients(F, T, binary):
    """The row losses' gradients in their scores: ``p - t``."""
    if binary:
        return np.exp(log_expit(F)) - (T + 1.0) / 2.0
    return np.exp(F - logsumexp(F, axis=-1, keepdims=True)) - T


def _refined(Psi, r, F, W, T, alpha, M, rows, binary, fit_intercept, loss):
    """The exact leave-one-out losses of the groups ``rows`` (None where M has no Cholesky factor).

    Without a group the minimiser is reached by Newton's iterations from the fit: first with the
    Hessian without the group at the fit (M less the group's term, by Woodbury's identity: chord
    steps, for every group at once), then, for a group still far from it, with the Hessian where it
    is. Each step is backtracked to descend. The objective's change is read off the scores alone: at
    the fit the penalty's gradient ``2 alpha B`` is ``-Phi' G`` (G: the rows' weighted gradients),
    and G sums to 0 over the rows.
    """
    try:
        factor = scipy.linalg.cho_factor(M, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    (n, k), q, m = F.shape, Psi.shape[1], len(rows)
    G0 = W[:, None] * _row_gradients(F, T, binary)
    base = _row_losses(F, T, binary)
    kept = np.ones((m, n))
    kept[np.arange(m), rows] = 0.0
    kept *= W  # each group's rows' weights without it
    # U: each group's term's columns (class c's block holds its Psi row); MU = M^-1 U
    U = np.zeros((m, k, k * q))
    for c in range(k):
        U[:, c, c * q:(c + 1) * q] = Psi[rows]
    MU = scipy.linalg.cho_solve(factor, U.reshape(m * k, k * q).T, check_finite=False).T.reshape(m, k, k * q)
    P = np.exp(log_expit(F[rows])) if binary else np.exp(F[rows] - logsumexp(F[rows], axis=1, keepdims=True))
    H = W[rows, None, None] * (P[:, :, None] * (1.0 - P[:, :, None]) if binary
                               else P[:, :, None] * np.eye(k) - P[:, :, None] * P[:, None, :])
    C = np.linalg.solve(np.eye(k) - H @ np.einsum("mcj,mdj->mcd", U, MU), H)  # (I - H Q)^-1 H

    def chord(grad, S, at):
        z = scipy.linalg.cho_solve(factor, grad.T, check_finite=False).T
        return -(z + np.einsum("mcj,mc->mj", MU[at], np.einsum("mcd,md->mc", C[at], np.einsum("mcj,mj->mc", U[at], z))))

    def newton(grad, S, at):
        (j,) = at
        exact = systems(Psi, S[0], kept[j], alpha, r, fit_intercept, loss)[0]
        return -solve_psd(exact, grad.T).T

    at = np.arange(m)
    D, S, active = _descend(Psi, r, F, T, alpha, G0, base, kept, binary, chord, np.zeros((m, k, q)), at, CHORD_ITER)
    for j in np.flatnonzero(active):
        D[j:j + 1], S[j:j + 1], _ = _descend(Psi, r, F, T, alpha, G0, base, kept[j:j + 1], binary, newton,
                                             D[j:j + 1], at[j:j + 1], NEWTON_ITER)
    return _row_losses(S[at, rows], T[rows], binary)


def _descend(Psi, r, F, T, alpha, G0, base, kept, binary, solve, D, at, iterations):
    """``(D, S, active)``: at most ``iterations`` backtracked steps ``solve(grad, S, at)`` on the objectives
    without each group (``kept``: the rows' weights in each), from the coordinate changes D ``(m, k, q)``;
    S the scores there, ``active`` where the decrement is still above ``REFINE_TOL``."""
    m, k, q = D.shape

    def objective(D):  # each objective's change from the fit, and its scores
        S = F + Psi @ np.swapaxes(D, 1, 2)
        change = np.sum(kept * (_row_losses(S, T, binary) - base), axis=1)
        return change - np.einsum("nk,mnk->m", G0, S - F) + alpha * np.sum(D[:, :, :r] ** 2, axis=(1, 2)), S

    value, S = objective(D)
    active = np.ones(m, dtype=bool)
    for _ in range(iterations):
        grad = np.einsum("nq,mnk->mkq", Psi, kept[:, :, None] * _row_gradients(S, T, binary) - G0)
        grad[:, :, :r] += 2.0 * alpha * D[:, :, :r]
        grad = grad.reshape(m, k * q)
        step = solve(grad, S, at)
        decrement = -np.sum(grad * step, axis=1)  # Newton's decrement squared: about twice the descent left
        active = decrement > REFINE_TOL
        if not active.any():
            break
        step, t = step.reshape(m, k, q), active.astype(float)
        for _ in range(30):  # halve each step until it descends (Armijo's test)
            trial, S_trial = objective(D + t[:, None, None] * step)
            fails = (t > 0) & (trial > value - 1e-4 * t * decrement)
            if not fails.any():
                break
            t = np.where(fails, t / 2.0, t)
        if fails.any():  # no descent left along a step: that objective stays where it is
            t = np.where(fails, 0.0, t)
            trial, S_trial = objective(D + t[:, None, None] * step)
        D, value, S = D + t[:, None, None] * step, trial, S_trial
    return D, S, active


def _leverages(M, Psi):
    """Each row's ``Psi_i M^-1 Psi_i'``: by M's Cholesky factor ``R'R``, ``|R^-T Psi_i'|^2`` (a quarter of
    the products of M's inverse); by the least-squares inverse where M is singular (as ``solve_psd``)."""
    try:
        R = scipy.linalg.cholesky(M, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        return row_dot(Psi @ solve_psd(M, eye(M, M.shape[0])), Psi)
    Z = scipy.linalg.solve_triangular(R, Psi.T, trans="T", check_finite=False)
    return np.einsum("ij,ij->j", Z, Z)
