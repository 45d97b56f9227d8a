"""Newton's method for a centers model whose rows stay in blocks: every pass over them is one map-reduce.

Every quantity a Newton step on ``f = K_nm beta + b`` needs from the n rows is a sum over row blocks.
A *problem* computes those sums wherever its rows live (Dask workers: ``kernelgd/_dask.py``; in-memory
blocks: the tests' ``LocalBlocks``) and exposes

* ``evaluate(beta, b, hessian)``: the loss, ``K'G`` and ``sum_i G_i`` at ``F = K beta + b``; with
  ``hessian``, also ``S = sum_i H_i`` and ``K'H 1`` for eliminating the intercept;
* ``hessp(beta, b, D)``: ``K'H K D`` and ``sum_i (H K D)_i``;
* ``center_matrix()``, ``center_weights``, ``weighted_targets`` (``sum_i w_i Y_i``), ``n``, ``m``.

The client keeps the m x m factors and the m x k state. Each step is solver "newton"'s exact step on
centers, for every loss: the intercept eliminated through the Schur complement of S, CG in FALKON's
variables, one pass over the rows per iteration (the squared loss's first step, solved to tol, is the
fit). Where the in-memory fit forms its steps densely (few centers, or a K_mm singular to CG), so does this
one: ``features(Z, beta, b, fit_intercept)`` sums ``block_features``, the systems in K_mm's eigenvector
coordinates from ``P = K Z`` formed on the blocks (the softmax's coupling every class), one pass per step.
A backtracking line search on the exact objective keeps every iterate a decrease.
"""

from typing import NamedTuple

import numpy as np
from sklearn.utils import gen_batches

from .._array_api import solve_psd
from . import _dense_newton
from ._krylov import ProductTracker, block_pcg
from ._objective import Objective
from ._preconditioners import CENTERS_MIN_RIDGE, FalkonPreconditioner, center_factors, center_jitter
from ._common import IterateLog, SolverResult, warn_not_converged, warn_rounding
from .newton._run import ARMIJO, CONFIRM_MARGIN, FORCING_MAX, MAX_HALVINGS, ROUNDING

# Rows of a block whose kernel values are formed at once (bytes of K).
CHUNK_BYTES = 64 << 20


# ------------------------------------------------------------------ per block


def _kernel_chunks(kernel, C, X):
    """``(rows, K[rows])`` over chunks of the block; ``kernel=None``: X is the block's stored K."""
    step = max(1, CHUNK_BYTES // (8 * max(C.shape[0], 1)))
    for rows in gen_batches(X.shape[0], step):
        yield rows, (X[rows] if kernel is None else kernel(X[rows], C))


def block_terms(kernel, C, X, Y, w, loss, beta, b, hessian):
    """A block's share of ``evaluate``: dict of sums (``value`` a 0-d array)."""
    k = Y.shape[1]
    out = {}
    for rows, K in _kernel_chunks(kernel, C, X):
        F = K @ beta + b
        Yr, wr = Y[rows], w[rows]
        G = loss.gradient(F, Yr, wr)
        part = {"value": np.array(loss.value(F, Yr, wr)), "KG": K.T @ G, "sG": G.sum(axis=0)}
        if hessian and loss.diagonal_hessian:
            h = loss.hessian_diagonal(F, wr)
            part["Kh"], part["sh"] = K.T @ h, h.sum(axis=0)
        elif hessian:  # the softmax: K'(w P), the k (k + 1) / 2 distinct K'(w p_c p_d), and S
            P = loss.probabilities(F)
            WP = wr[:, None] * P
            i, j = np.triu_indices(k)
            part["KWP"] = K.T @ np.hstack([WP, WP[:, i] * P[:, j]])
            part["S"] = np.diag(WP.sum(axis=0)) - WP.T @ P
        out = add_terms(out, part)
    return out


def block_hessp(kernel, C, X, Y, w, loss, beta, b, D):
    """A block's share of ``hessp``: ``K'H K D`` and ``sum_i (H K D)_i``."""
    out = {}
    for rows, K in _kernel_chunks(kernel, C, X):
        if loss.name == "squared":  # its Hessian does not depend on F: one product less
            F, U = None, K @ D
        else:  # F and K D in one read of K
            KV = K @ np.hstack([beta, D])
            F, U = KV[:, : beta.shape[1]] + b, KV[:, beta.shape[1] :]
        HU = loss.hessp(F, Y[rows], w[rows], U)
        out = add_terms(out, {"KHU": K.T @ HU, "sHU": HU.sum(axis=0)})
    return out


def block_gram(kernel, C, X, Y, w, loss):
    """A block's share of ``K'W K`` (the centers posterior's precision, less the ridge)."""
    out = {}
    for rows, K in _kernel_chunks(kernel, C, X):
        out = add_terms(out, {"gram": K.T @ (w[rows][:, None] * K)})
    return out


def add_terms(a, b):
    """Key-wise sum of two dicts of arrays (an empty dict is zero)."""
    if not a:
        return b
    if not b:
        return a
    return {key: a[key] + b[key] for key in a}


# ------------------------------------------------------------------ client side


def baseline_intercept(loss, weighted_targets, fit_intercept):
    """The intercept-only model's intercept from ``sum_i w_i Y_i`` (weights summing to one)."""
    wY = np.asarray(weighted_targets, dtype=np.float64)
    if not fit_intercept:
        return np.zeros(wY.shape[0])
    if loss.name == "squared":
        return wY.copy()
    if wY.shape[0] == 1:  # +-1 labels: the positive share is (1 + sum w y) / 2
        p = (1.0 + wY[0]) / 2.0
        return loss.baseline(np.array([[1.0], [-1.0]]), np.array([p, 1.0 - p]), True)[0]
    return loss.baseline(np.eye(wY.shape[0]), wY, True)[0]


def _hessian_summary(loss, terms, m, k):
    """``S = sum_i H_i`` (k x k) and ``K'H 1`` (m x k x k: ``[:, :, d] = K'H(1 e_d')``)."""
    if loss.diagonal_hessian:
        S = np.diag(terms["sh"])
        KH1 = np.zeros((m, k, k))
        KH1[:, np.arange(k), np.arange(k)] = terms["Kh"]
        return S, KH1
    i, j = np.triu_indices(k)
    KWP = terms["KWP"]
    KPP = np.empty((m, k, k))
    KPP[:, i, j] = KPP[:, j, i] = KWP[:, k:]
    KH1 = -KPP
    KH1[:, np.arange(k), np.arange(k)] += KWP[:, :k]
    return terms["S"], KH1


def _direction(problem, terms, beta, b, settings, factors, inner_tol, scale, basis=None):
    """The Newton step ``(D, e)`` at ``(beta, b)``, its CG iterations and status (see the module doc); formed
    densely in ``basis`` (``_dense_basis``) where given, as one iteration.

    CG stops at ``inner_tol`` of its right-hand side, or at ``scale["tol"]``
    of the first step's (set here on the first call): near the optimum the
    gradient is tiny, and a tolerance relative to it alone would ask for
    more than the fit's tol can see (solver "newton"'s ``tol_b``).
    """
    loss, alpha = settings.loss, settings.alpha
    if basis is not None:
        return (*_dense_step(problem, basis, loss, alpha, beta, b, settings.fit_intercept), 1, "converged")
    m, k = beta.shape
    center = settings.fit_intercept
    S, KH1 = _hessian_summary(loss, terms, m, k)
    total = np.maximum(np.diagonal(S).copy(), np.finfo(float).tiny)
    floor = CENTERS_MIN_RIDGE * factors.diag_mean
    # one ridge for every column, solver "cg"'s floor in the Hessian's scale (see newton's coupled step)
    ridge = max(2.0 * alpha, floor * float(total.max()))
    h_centers = loss.hessian_diagonal(factors.kmm_dot(beta) + b, problem.center_weights)
    d = (problem.n * h_centers / total).mean(axis=1)
    falkon = FalkonPreconditioner(factors, d, float(np.exp(np.mean(np.log(ridge / total)))), center)
    apply_B, apply_Bt = falkon.apply, falkon.apply_t

    rhs = -(terms["KG"] + 2.0 * alpha * factors.kmm_dot(beta))
    e0 = np.zeros(k)
    if center:
        S_pinv = np.diag(1.0 / total) if loss.diagonal_hessian else np.linalg.pinv(S, hermitian=True)
        e0 = -S_pinv @ terms["sG"]
        rhs = rhs - KH1 @ e0
    tracker = ProductTracker(np.zeros(k))  # sum_i H_i (K D)_i, tracked through CG's steps

    def operator_D(D):
        parts = problem.hessp(beta, b, D)
        tracker.record(parts["sHU"])
        out = parts["KHU"] + ridge * factors.kmm_dot(D)
        if center:
            out -= KH1 @ (S_pinv @ parts["sHU"])
        return out

    if loss.diagonal_hessian:  # independent columns: one CG run each, each scaled by its total weight

        def apply_A(U):
            return apply_Bt(operator_D(apply_B(U)) / total)

        B0, precondition = apply_Bt(rhs / total), (lambda V: V)
    else:  # the softmax couples the classes: one joint run, rows kept summing to zero

        def zero_sum(Z):
            return (Z - Z.mean(axis=1, keepdims=True)).reshape(-1, 1)

        def apply_A(u):
            return zero_sum(apply_Bt(operator_D(apply_B(u.reshape(m, k)))))

        def precondition(r):
            return zero_sum(r.reshape(m, k) / total)

        B0 = zero_sum(apply_Bt(rhs))

    def on_iter(X, step):
        tracker.advance(step if loss.diagonal_hessian else step[0])
        return False

    norms = np.linalg.norm(B0, axis=0)
    scale.setdefault("norms", norms)
    floor = scale["tol"] * scale["norms"] / np.where(norms > 0, norms, 1.0)
    U, n_inner, status = block_pcg(
        apply_A, B0, precondition, max_iter=settings.max_iter, tol=np.maximum(inner_tol, floor), on_iter=on_iter,
    )
    D = apply_B(U.reshape(m, k))
    e = e0 - S_pinv @ tracker.KX if center else np.zeros(k)
    return D, e, n_inner, status


def block_features(kernel, C, X, Y, w, loss, Z, beta, b, fit_intercept):
    """A block's share of a dense Newton step in coordinates ``beta = Z B``: with ``P = K Z`` formed here (K's
    rounding stays that of its entries) and ``Psi = [P 1]`` (``P`` without an intercept), the Newton systems at
    ``alpha = 0`` of ``_dense_newton.systems`` (one per column for a loss of diagonal Hessian, one for all where
    the columns share it, the softmax's coupled one), ``Psi'G`` at ``F = K beta + b``, and ``|P|^2`` per column."""
    out = {}
    for rows, K in _kernel_chunks(kernel, C, X):
        P = K @ Z
        F = K @ beta + b
        G = loss.gradient(F, Y[rows], w[rows])
        Psi = np.hstack([P, np.ones((len(P), 1))]) if fit_intercept else P
        M = _dense_newton.systems(Psi, F, w[rows], 0.0, P.shape[1], fit_intercept, loss, loss.name == "squared")
        out = add_terms(out, {"M": np.stack(M), "PsiG": Psi.T @ G, "PP": np.einsum("ij,ij->j", P, P)})
    return out


class _DenseBasis(NamedTuple):
    """K_mm's eigenvectors ``V`` of positive ``lam + jitter`` and their ``root = sqrt(lam + jitter)``: the
    coordinates ``beta = Z B``, ``Z = V / root``, in which the penalty ``beta'(K_mm + jitter I) beta`` is ``|B|^2``;
    ``rounding``: the norm at most which a direction's function ``K_nm v`` is its products' rounding."""

    V: np.ndarray
    root: np.ndarray
    rounding: float


def _dense_basis(problem, factors, loss, alpha, k):
    """``_DenseBasis`` where Newton's steps on these centers are formed densely, as the in-memory fit's
    (``_dense_newton.features``: a small system where CG's steps are not to be trusted, or tiny), else None."""
    n, m = problem.n, problem.m
    unknowns, flops = _dense_newton.system_size(n, m, k, not loss.diagonal_hessian)
    if not (alpha > 0 and hasattr(problem, "features")) or (
            unknowns > _dense_newton.MAX_UNKNOWNS or flops > _dense_newton.MAX_FLOPS):
        return None
    Kmm = problem.center_matrix()
    jitter = center_jitter(problem, Kmm)
    lam, V = np.linalg.eigh((Kmm + Kmm.T) / 2)
    trusted = lam[0] >= _dense_newton.RESOLVED_JITTERS * jitter and 2.0 * alpha >= CENTERS_MIN_RIDGE * factors.diag_mean
    if trusted and flops > _dense_newton.TINY_FLOPS:
        return None
    positive = np.flatnonzero(lam + jitter > 0)
    # K_nm's rounding has a spectral norm of at most sqrt(n m) eps max|K_nm|; max|K_nm| is at most the largest
    # k(c, c) for the kernels the centers model takes
    rounding = _dense_newton.RESOLVED * np.finfo(float).eps * np.sqrt(n * m) * float(np.max(np.diagonal(Kmm)))
    return _DenseBasis(V[:, positive], np.sqrt(lam[positive] + jitter), rounding)


def _dense_step(problem, basis, loss, alpha, beta, b, fit_intercept):
    """The exact Newton step ``(D, e)`` at ``(beta, b)`` in ``basis``' coordinates, without the directions whose
    functions are rounding: the blocks' systems (``block_features``) with the penalty's curvature, one pass."""
    Z = basis.V / basis.root
    terms = problem.features(Z, beta, b, fit_intercept)
    r, k = Z.shape[1], beta.shape[1]
    keep = np.flatnonzero(np.sqrt(terms["PP"]) * basis.root > basis.rounding)
    q = len(keep) + fit_intercept
    at = np.append(keep, r) if fit_intercept else keep  # Psi's columns kept: B's above rounding, the intercept
    # the penalty alpha |B|^2 with B = Z'(K_mm + jitter I) beta: gradient 2 alpha B, Hessian 2 alpha I
    g = terms["PsiG"][at]
    g[: len(keep)] += 2.0 * alpha * basis.root[keep, None] * (basis.V[:, keep].T @ beta)
    ridge = np.where(np.arange(q) < len(keep), 2.0 * alpha, 0.0)
    if not loss.diagonal_hessian:  # the softmax's system of every class at once, class by class
        every = (np.arange(k)[:, None] * (r + fit_intercept) + at).ravel()
        M = terms["M"][0][np.ix_(every, every)] + np.diag(np.tile(ridge, k))
        step = solve_psd(M, -g.T.reshape(-1, 1)).reshape(k, q).T
    else:
        step = np.column_stack([solve_psd(terms["M"][min(c, len(terms["M"]) - 1)][np.ix_(at, at)] + np.diag(ridge),
                                          -g[:, c]) for c in range(k)])
    return Z[:, keep] @ step[: len(keep)], step[len(keep)] if fit_intercept else np.zeros(k)


def solve(problem, settings):
    """Minimise the objective on centers by Newton steps whose data passes are map-reduces.

    Parameters
    ----------
    problem : object
        The rows' sums (module docstring), for example the Dask fit's ``DaskBlocks``.
    settings : SolverSettings

    Returns
    -------
    SolverResult
        ``loss_curve`` holds the exact objective of every accepted iterate.
    """
    loss, alpha, tol = settings.loss, settings.alpha, settings.tol
    factors = center_factors(problem)
    penalty = Objective(loss, None, None, alpha, T=factors.T).penalty  # the loss comes from the blocks' sums

    k = len(problem.weighted_targets)
    b0 = baseline_intercept(loss, problem.weighted_targets, settings.fit_intercept)
    beta0 = np.zeros((problem.m, k))
    terms0 = problem.evaluate(beta0, b0, hessian=settings.coef_init is None)
    value0 = float(terms0["value"])
    if not np.isfinite(value0):
        raise ValueError(
            f"The intercept-only model's loss is {value0}: the targets or weights overflow float64. "
            "Scale the targets down."
        )
    beta, b, terms, value = beta0, b0, terms0, value0
    if settings.coef_init is not None:  # warm start, kept only where it beats the intercept-only model
        start = (settings.coef_init.copy(), settings.intercept_init.copy() if settings.fit_intercept else b0)
        terms_s = problem.evaluate(*start, hessian=True)
        value_s = float(terms_s["value"]) + alpha * float(penalty(start[0]))
        if np.isfinite(value_s) and value_s <= value0:
            (beta, b), terms, value = start, terms_s, value_s
        else:
            terms = problem.evaluate(beta0, b0, hessian=True)
    log = IterateLog()
    squared = loss.name == "squared"
    # the squared loss's single step is solver "cg"'s solve, to tol; smooth losses: newton's exact tolerance
    exact_tol = tol if squared else min(tol, 1e-3)
    exact = squared or not value0 > 0
    scale = {"tol": exact_tol}
    basis = _dense_basis(problem, factors, loss, alpha, k)  # few centers, or a K_mm singular to CG: dense steps
    decrement = np.inf
    converged, reason, it = False, None, 0
    while it < settings.max_iter:
        it += 1
        inner_tol = exact_tol if exact else max(exact_tol, min(FORCING_MAX, np.sqrt(decrement / value0)))
        loose = inner_tol > exact_tol and basis is None
        D, e, n_inner, status = _direction(problem, terms, beta, b, settings, factors, inner_tol, scale, basis)
        slope = float(np.sum(terms["KG"] * D) + terms["sG"] @ e)
        if alpha:
            slope += 2.0 * alpha * float(np.sum(D * factors.kmm_dot(beta)))
        if not loose and tol > 0 and -slope <= tol**2 * value0:  # Newton's decrement: nothing left to gain
            it = n_inner if squared else it - 1
            converged = True
            break
        accepted, step = False, 1.0
        if slope < 0:
            for _ in range(MAX_HALVINGS):
                beta_t, b_t = beta + step * D, b + step * e
                # the Hessian summary is fetched with the trial a full step usually makes the next iterate
                terms_t = problem.evaluate(beta_t, b_t, hessian=step == 1.0 or loss.diagonal_hessian)
                value_t = float(terms_t["value"]) + alpha * float(penalty(beta_t))
                if np.isfinite(value_t) and value_t <= value + ARMIJO * step * slope:
                    accepted = True
                    break
                step /= 2
        if not accepted:
            it -= 1
            if loose:  # an inexact direction failed: retry it exact
                exact = True
                continue
            reason = "no_descent"
            break
        decrement = -slope
        beta, b, value, terms = beta_t, b_t, value_t, terms_t
        log.record(value, beta, b)
        if settings.verbose:
            print(f"[newton] iter {it:4d}  objective {value:.6e}  step {step:.3g}  decrement {decrement:.3e}  "
                  f"cg iterations {n_inner}")
        stop_requested = settings.callback is not None and settings.callback(beta, b)
        if squared:  # the quadratic's Newton step is its minimiser, as exact as CG solved it
            it = n_inner  # counted as solver "cg" counts: its iterations
            converged = status == "converged"
            reason = None if converged else status
            break
        if loose and decrement <= tol**2 * value0 and not decrement <= CONFIRM_MARGIN * tol**2 * value0:
            exact = True  # confirm a loose step's small decrement with an exact one
        elif tol > 0 and decrement <= tol**2 * value0:
            converged = True
            break
        elif decrement <= ROUNDING * (abs(value) + value0):
            reason = "rounding"
            break
        if stop_requested:
            reason = "callback"
            break
        if basis is None and "sh" not in terms and "S" not in terms:  # a damped step's point lacks CG's summary
            terms = problem.evaluate(beta, b, hessian=True)
    _report(reason, converged, it, settings)
    if log.negative:  # a loss plus a PSD penalty cannot be negative: rounding broke the fit
        warn_rounding(
            settings, "newton", f"computed a negative objective ({min(log.curve):.3g}), which a loss plus a "
            "positive semi-definite penalty cannot have", "The best iterate with a valid objective is returned. "
            "Increase alpha, use fewer centers, or scale the features.",
        )
    if log.best is None:  # no step decreased the objective: the start is the model
        return SolverResult(beta, np.asarray(b, dtype=np.float64), 0, [value], None, converged)
    beta, b = log.best
    b = np.asarray(b, dtype=np.float64)
    if getattr(loss, "shift_invariant", False):
        b = b - b.mean()
    return SolverResult(beta, b, it, list(log.curve), None, converged)


def _report(reason, converged, it, settings):
    if reason == "no_descent":
        warn_rounding(
            settings, "newton", f"stopped at iteration {it}: the Newton direction no longer decreases the "
            "objective (rounding)", "The model is the best iterate seen. Increase alpha.",
        )
    elif reason == "rounding":
        warn_rounding(
            settings, "newton", f"stopped at iteration {it} for lack of progress: the predicted decrease is at "
            f"the level of rounding, above tol={settings.tol:g}", "The model is the best iterate seen; a larger tol suffices.",
        )
    elif reason in ("max_iter", "stalled"):
        warn_not_converged(
            "cg", f"did not reach tol={settings.tol:g} in max_iter={settings.max_iter} iterations"
            if reason == "max_iter" else "lost conjugacy in rounding before reaching tol",
            "The model is the best iterate seen. Increase max_iter or alpha.",
        )
    elif not converged and reason is None and settings.tol > 0:
        warn_not_converged("newton", f"did not converge in max_iter={settings.max_iter} iterations",
                           "Increase max_iter or alpha.")
