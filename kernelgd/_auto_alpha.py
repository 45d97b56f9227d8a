"""``alpha="auto"`` for the squared loss: the ridge of least generalized cross-validation error.

The rank-r randomly pivoted Cholesky factor ``B`` of the centred, weighted
kernel matrix ``Q S K S Q ~ B B'`` (the one the full model's CG preconditioner
draws) gives, from the eigenpairs of ``B'B`` (O(n r^2)), the weighted residual
and the degrees of freedom ``df = 1 + sum_j lam_j / (lam_j + alpha)`` of the
Nystroem model on its pivots for every ridge at once, and with them the
generalized cross-validation error (Golub, Heath & Wahba, 1979)

    GCV(alpha) = (sum_i w_i (y_i - f_i)^2 - E) / (1 - df / N)^2

(w sums to 1). Repeated rows are read as one (``_replicates``): N is Kish's
effective number of distinct rows, ``1 / sum_g W_g^2`` over the groups of
identical rows and their summed weights W_g (the number of rows where they
are distinct and weigh alike), and ``E`` is the targets' weighted spread
within the groups, which no ridge changes. So scaling every weight, or
repeating every row, chooses the same ridge, and integer weights choose the
ridge of the rows repeated. The ridges tried span the factor's resolved
spectrum, from a tenth of its smallest eigenvalue to its largest: below that
floor the Nystroem model hardly changes with alpha, and at or above it the CG
solve at the chosen ridge is well conditioned (the preconditioner's residual
eigenvalues are at most about the floor), so the fit costs about one solve.
Of ridges whose error is within ``TIE`` of the least, the largest is chosen:
the smoother model, and the faster solve.
"""

import numpy as np

from ._array_api import block_of, take_rows, to_numpy, xp_of
from ._losses import SquaredLoss
from ._operator import KernelOperator
from ._replicates import effective_count, pure_error, subset_groups
from ._solvers._common import ROUNDING_EPS
from ._solvers._preconditioners import N_LANDMARKS, landmark_factor

# The factor's rank: the full model's preconditioner landmarks, so that its factor serves both.
RANK = N_LANDMARKS
# Rows the rule reads at most (a random subsample of the weighted rows beyond).
MAX_ROWS = 20_000
# Ridges tried per decade, and below the factor's smallest resolved eigenvalue.
STEPS_PER_DECADE = 4
FLOOR_BELOW_SPECTRUM = 10.0
# The most degrees of freedom, as a share of N, of a ridge the rule may choose.
MAX_DF_SHARE = 0.5
# GCV errors within this relative margin of the least count as tied.
TIE = 1e-3
# The ridge where the rule has nothing to read (a kernel zero on the data, or fewer than 3 rows).
FALLBACK_ALPHA = 1.0


def ridge_grid(lam):
    """Decreasing ridges from the largest eigenvalue to ``FLOOR_BELOW_SPECTRUM`` below the smallest."""
    top, bottom = float(lam[-1]), float(lam[0]) / FLOOR_BELOW_SPECTRUM
    decades = max(np.log10(top / bottom), 0.0)
    return np.logspace(np.log10(top), np.log10(bottom), int(np.ceil(decades * STEPS_PER_DECADE)) + 1)


def choose(factor, Y, w, fit_intercept, group_of=None, alphas=None, floor=0.0):
    """``(alpha, errors, alphas)``: the rule's ridge from the factor ``B`` of ``Q S K S Q ~ B B'``.

    ``w`` sums to 1; ``group_of``: each row's group of identical rows
    (``_replicates.replicate_groups``; None: every row distinct). ``alphas``:
    the ridges to score (default: ``ridge_grid`` of the factor's spectrum).
    ``floor``: ``rounding_floor``'s; eigenvalues at most it are the rounding of K's
    entries (a kernel constant on the data), not directions.
    """
    xp = xp_of(Y)
    w_host = np.asarray(to_numpy(w), dtype=np.float64)
    n_effective = effective_count(w_host, group_of)
    if factor.shape[1] == 0 or n_effective < 3:
        return FALLBACK_ALPHA, None, None
    s = xp.sqrt(w)
    U = s[:, None] * (Y - w @ Y) if fit_intercept else s[:, None] * Y  # Q S y (s's = 1)
    lam, W = xp.linalg.eigh(factor.T @ factor)
    lam, Z = np.asarray(to_numpy(lam)), np.asarray(to_numpy(W.T @ (factor.T @ U)))  # Z = sqrt(lam) V'U
    keep = lam > max(lam[-1], 0.0) * len(lam) * np.finfo(float).eps
    keep &= lam > floor
    if not keep.any():
        return FALLBACK_ALPHA, None, None
    lam, Z = lam[keep], Z[keep]
    projected = Z**2 / lam[:, None]  # |V'U|^2 per direction and column
    total = float(np.sum(np.asarray(to_numpy(U)) ** 2))
    alphas = ridge_grid(lam) if alphas is None else np.asarray(alphas, dtype=float)
    shrink = alphas[:, None] / (lam[None, :] + alphas[:, None])  # (ridges, directions)
    outside = max(total - float(projected.sum()), 0.0)  # the energy outside the factor's span (>= 0 but for rounding)
    # the spread within groups of identical rows is in every ridge's residual: it is not the fit's error
    spread = pure_error(np.asarray(to_numpy(Y)), w_host, group_of)
    residual = np.maximum(outside + (shrink**2 @ projected).sum(axis=1) - spread, 0.0)
    df = float(fit_intercept) + (1.0 - shrink).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        errors = np.where(df <= MAX_DF_SHARE * n_effective, residual / (1.0 - df / n_effective) ** 2, np.inf)
    if not np.isfinite(errors).any():
        return FALLBACK_ALPHA, errors, alphas
    tied = np.flatnonzero(errors <= np.min(errors) * (1.0 + TIE))
    return float(alphas[tied[0]]), errors, alphas  # decreasing ridges: the first tied is the largest


def _subsample(xp, X, Y, w, group_of, rng, precomputed):
    """``(X, Y, w, groups, every_row)``: at most ``MAX_ROWS`` random rows of positive weight, w renormalised,
    and their groups of identical rows."""
    rows = np.flatnonzero(np.asarray(to_numpy(w)) > 0)
    if len(rows) == X.shape[0]:  # every row: no copy (a precomputed K may be most of the memory)
        return X, Y, w / xp.sum(w), group_of, True
    if len(rows) > MAX_ROWS:
        rows = np.sort(rng.choice(rows, MAX_ROWS, replace=False))
    Xs = block_of(X, rows, rows) if precomputed else take_rows(X, rows) if not hasattr(X, "tocsr") else X[rows]
    Ys, ws = take_rows(Y, rows), take_rows(w, rows)
    return Xs, Ys, ws / xp.sum(ws), subset_groups(group_of, rows), False


def _operator(X, kernel, precomputed):
    """An operator that evaluates the kernel's columns as the factor asks for them."""
    if precomputed:
        return KernelOperator(X, None, dtype="float64")
    return KernelOperator(X, kernel, dtype="float64", store=False, memory_budget=1 << 28)


def choose_kernel(candidates, X, Y, w, group_of, fit_intercept, rng, alpha="auto", precision=np.float64):
    """``(index, alpha, factor)``: the candidate kernel of least GCV error, and its ridge.

    ``candidates``: bound PSD kernels; ``group_of``: X's groups of identical rows
    (``_replicates.distinct_groups``). Each is scored on the same rows (at
    most ``MAX_ROWS``) by its rank-``RANK`` factor: at its own best ridge for
    ``alpha="auto"``, else at ``alpha``. ``factor``: the chosen kernel's where
    ``alpha="auto"`` and it covers every row (the full model's preconditioner
    then reuses it, as ``auto_alpha``'s), else None. ``precision``: as ``auto_alpha``'s.
    """
    xp = xp_of(w)
    Xs, Ys, ws, group_of, every_row = _subsample(xp, X, Y, w, group_of, rng, False)
    seed = rng.randint(np.iinfo(np.int32).max)
    best = None
    for index, kernel in enumerate(candidates):
        operator = _operator(Xs, kernel, False)
        factor = _unstored_factor(operator, ws, fit_intercept, np.random.RandomState(seed))
        chosen, errors, alphas = choose(factor, Ys, ws, fit_intercept, group_of,
                                        None if alpha == "auto" else [alpha], rounding_floor(operator, ws, precision))
        error = np.inf if errors is None else float(np.min(errors))
        if best is None or error < best[0]:  # a factor is kept only where the full model's solve reuses it
            best = (error, index, chosen if alpha == "auto" else alpha,
                    factor if every_row and alpha == "auto" else None)
        del factor
    return best[1:]


def rounding_floor(operator, w, precision=np.float64):
    """The rounding of ``S K S``'s eigenvalues: ``ROUNDING_EPS`` eps of ``precision`` (the fit's
    kernel dtype) times the trace ``sum_i w_i k(x_i, x_i)`` (w sums to 1): each entry rounds by eps of
    its size, and a pivot on a residual diagonal of rounding takes an eigenvalue of that size."""
    return ROUNDING_EPS * float(np.finfo(precision).eps) * float(w @ operator.diag())


def _center(F, s):
    """``Q F`` with ``Q = I - s s'``, in place a column block at a time (no second n x r copy)."""
    projection, r = s @ F, F.shape[1]
    for start in range(0, r, 64):
        stop = min(start + 64, r)  # the array API leaves out-of-bounds slices unspecified
        F[:, start:stop] -= s[:, None] * projection[None, start:stop]
    return F


def _unstored_factor(operator, w, fit_intercept, rng):
    """``Q B``, B the factor of ``S K S``: a factor of ``Q S K S Q`` from an operator that stores no K.

    Centring first (``landmark_factor``'s ``center``) takes the product ``K s``, a kernel
    evaluation over every pair of rows; centring B costs O(n r).
    """
    root = xp_of(w).sqrt(w)
    factor = landmark_factor(operator, root, RANK, rng)[0]
    return _center(factor, root) if fit_intercept else factor


def curvature_share(loss, Y, w, fit_intercept):
    """The loss's curvature at the intercept-only model over the squared loss's (1 for the squared loss).

    A smooth loss's first Newton step from that model is a kernel ridge
    regression with every row weighted by this curvature ``h`` (constant
    there), at the ridge ``2 alpha / h`` relative to the squared loss's
    ``alpha``; scaling GCV's ridge by ``h / 2`` makes that step the smoother GCV
    chose. Averaged over the columns (classes).
    """
    if loss is SquaredLoss:  # exactly: GCV's own ridge, not its rounding
        return 1.0
    xp = xp_of(Y)
    b = loss.baseline(Y, w, fit_intercept)[0]
    H = loss.hessian_diagonal(xp.broadcast_to(b[None, :], Y.shape), w)  # its rows carry w, which sums to 1
    return float(xp.mean(xp.sum(H, axis=0))) / SquaredLoss.curvature


def auto_alpha(X, kernel, Y, w, group_of, fit_intercept, rng, full_model=False, precomputed=False,
               loss=SquaredLoss, precision=np.float64):
    """``(alpha, factor)``: the rule's ridge, and its factor where the full model's preconditioner can reuse it.

    The rule reads at most ``MAX_ROWS`` weighted rows of X through an operator of
    their own, in float64: a float32 kernel's rounding would hide the small
    eigenvalues a near noiseless target needs. Its floor is that of ``precision``,
    the dtype the fit resolves (float64 where float32 may stop it short and the fit
    goes on in float64: ``options["dtype"]="auto"``). ``group_of``: X's groups of
    identical rows (``_replicates.distinct_groups``; of the points where X is a
    precomputed kernel). ``loss``: GCV's ridge for the targets Y is scaled by
    ``curvature_share`` (a smooth loss's first Newton step is then GCV's smoother).
    """
    scale = curvature_share(loss, Y, w, fit_intercept)
    Xs, Ys, ws, group_of, every_row = _subsample(xp_of(w), X, Y, w, group_of, rng, precomputed)
    operator = _operator(Xs, kernel, precomputed)
    factor = _unstored_factor(operator, ws, fit_intercept, rng)
    alpha = choose(factor, Ys, ws, fit_intercept, group_of, floor=rounding_floor(operator, ws, precision))[0]
    return alpha * scale, factor if full_model and every_row else None
