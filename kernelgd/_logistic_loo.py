"""The logistic loss's leave-one-out losses on a small dense Newton system: one step, and exact.

Without row i the minimiser moves by about one Newton step (Rad & Maleki, 2020), which moves its scores
to ``f_i^(-i) = f_i + Q_i (I - H_i Q_i)^-1 g_i``, ``Q_i = Psi_i M^-1 Psi_i'`` (g_i, H_i: the row's
gradient and Hessian in its scores; M: the Newton system in ``_dense_newton``'s coordinates
``Psi = [K Z, 1]``): ``scores``. The step errs where it is long; ``exact`` iterates Newton without
such a row to its minimiser. Rows are the distinct rows' groups (summed weight W, mean label T).
"""

import numpy as np
import scipy.linalg

from ._array_api import eye, log_expit, logsumexp, row_dot, solve_psd
from ._solvers._dense_newton import systems
from ._solvers.newton._run import ARMIJO, MAX_HALVINGS

# A row whose one leave-one-out step raises its loss by more than this (nats) is left out exactly: the
# step is optimistic where it is long.
FAR = 0.5
# The exact leave-one-out's Newton iterations: at most this many with the fit's Hessian (for every row
# at once), then this many with their own, until the decrement is below the tolerance.
CHORD_ITER = 20
NEWTON_ITER = 20
REFINE_TOL = 1e-12


def scores(Psi, r, F, W, T, alpha, fit_intercept, loss):
    """Each distinct row's approximate leave-one-out loss at its scores F (weights W, mean labels T)."""
    k, binary = F.shape[1], loss.diagonal_hessian
    M = systems(Psi, F, W, alpha, r, fit_intercept, loss)[0]
    if binary:  # the binary logistic loss: one column of log-odds, labels +-1
        Q = _leverages(M, Psi)
        t, f = (T[:, 0] + 1.0) / 2.0, F[:, 0]
        p = np.exp(log_expit(f))
        f = (f + Q * (W * (p - t)) / (1.0 - Q * W * p * (1.0 - p)))[:, None]
    else:
        Q = _coupled_leverages(M, Psi, k)
        P = np.exp(F - logsumexp(F, axis=1, keepdims=True))
        H = W[:, None, None] * (P[:, :, None] * np.eye(k) - P[:, :, None] * P[:, None, :])
        f = F + (Q @ np.linalg.solve(np.eye(k) - H @ Q, (W[:, None] * (P - T))[:, :, None]))[:, :, 0]
    return _row_losses(f, T, binary)


def exact(Psi, r, F, W, T, alpha, fit_intercept, loss, approximate):
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
    """The exact leave-one-out losses of the groups ``rows`` (None where M has no Cholesky factor): Newton's
    iterations from the fit, first with the Hessian without the group at the fit (chord steps by Woodbury's
    identity, every group at once), then, for a group still far, with its own Hessian, each backtracked to
    descend. The objective's change is read off the scores alone: at the fit ``2 alpha B = -Phi' G``, and
    G sums to 0 over the rows.
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
        return change - np.sum(G0 * (S - F), axis=(1, 2)) + alpha * np.sum(D[:, :, :r] ** 2, axis=(1, 2)), S

    value, S = objective(D)
    active = np.ones(m, dtype=bool)
    for _ in range(iterations):
        grad = np.swapaxes(Psi.T @ (kept[:, :, None] * _row_gradients(S, T, binary) - G0), 1, 2)  # (m, k, q)
        grad[:, :, :r] += 2.0 * alpha * D[:, :, :r]
        grad = grad.reshape(m, k * q)
        step = solve(grad, S, at)
        decrement = -np.sum(grad * step, axis=1)  # Newton's decrement squared: about twice the descent left
        active = decrement > REFINE_TOL
        if not active.any():
            break
        step, t = step.reshape(m, k, q), active.astype(float)
        for _ in range(MAX_HALVINGS):  # halve each step until it descends (Armijo's test, as the solver's)
            trial, S_trial = objective(D + t[:, None, None] * step)
            fails = (t > 0) & (trial > value - ARMIJO * t * decrement)
            if not fails.any():
                break
            t = np.where(fails, t / 2.0, t)
        if fails.any():  # no descent left along a step: that objective stays where it is
            t = np.where(fails, 0.0, t)
            trial, S_trial = objective(D + t[:, None, None] * step)
        D, value, S = D + t[:, None, None] * step, trial, S_trial
    return D, S, active


def _coupled_leverages(M, Psi, k):
    """Each row's ``(k, k)`` block ``Q_i = (I_k (x) Psi_i) M^-1 (I_k (x) Psi_i)'`` of the softmax's system M.

    By M's Cholesky factor ``R'R``: ``Q_i[c, d] = Z_c[:, i] . Z_d[:, i]`` with ``Z_c = R^-T (e_c (x) Psi')``,
    which is zero above class c's block (R' is lower triangular), so each class solves with the trailing part
    of R only (about a fifth of the flops of M's inverse for 3 classes); M's inverse where M is singular."""
    q = Psi.shape[1]
    try:
        R = scipy.linalg.cholesky(M, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        M_inv = solve_psd(M, eye(M, M.shape[0]))
        return np.stack([np.stack([row_dot(Psi @ M_inv[c * q:(c + 1) * q, d * q:(d + 1) * q], Psi)
                                   for d in range(k)], 1) for c in range(k)], 1)
    Z = np.zeros((k, k * q, Psi.shape[0]))
    for c in range(k):
        E = np.zeros(((k - c) * q, Psi.shape[0]))
        E[:q] = Psi.T
        Z[c, c * q:] = scipy.linalg.solve_triangular(R[c * q:, c * q:], E, trans="T", check_finite=False)
    return np.einsum("cji,dji->icd", Z, Z, optimize=True)


def _leverages(M, Psi):
    """Each row's ``Psi_i M^-1 Psi_i'``: by M's Cholesky factor ``R'R``, ``|R^-T Psi_i'|^2`` (a quarter of
    the products of M's inverse); by the least-squares inverse where M is singular (as ``solve_psd``)."""
    try:
        R = scipy.linalg.cholesky(M, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        return row_dot(Psi @ solve_psd(M, eye(M, M.shape[0])), Psi)
    Z = scipy.linalg.solve_triangular(R, Psi.T, trans="T", check_finite=False)
    return np.einsum("ij,ij->j", Z, Z)
