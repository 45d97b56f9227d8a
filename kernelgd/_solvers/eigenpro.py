"""Solver "eigenpro": gradient descent preconditioned by top eigen-directions.

The EigenPro idea (Ma and Belkin, 2017, 2019). Plain gradient descent on the
dual is slow because its step is limited by the largest eigenvalue of the
(weighted) kernel operator. EigenPro shrinks the top q eigen-directions of a
subsample's kernel matrix down to the (q+1)-th eigenvalue ``tau``:

    P = I - sum_{j <= q} (1 - tau / lambda_j) phi_j (x) phi_j,

so a step about ``lambda_1 / tau`` times larger is stable. The ``phi_j`` are
exact RKHS-orthonormal eigenfunctions of the subsample, so P is positive
definite and the minimiser is the one of solver "gd".

In dual coefficients, one step on a mini-batch B with residuals g is

    a_B -= eta * grad_B,    a_S += eta * V D V' K[S, B] grad_B,
    grad_B = (n / |B|) * 2 w_B g_B,    D = diag((1 - tau / lambda_j) / theta_j),

with ``theta_j, V`` the eigenpairs of the subsample matrix K[S, S] and
``lambda_j = theta_j / |S|``. The batch size is EigenPro 2's critical size
``beta / tau`` (beta: the largest preconditioned diagonal) and the step
``bs / (2 (beta + (bs - 1) tau + bs alpha))``. With ridge (``alpha > 0``) the
batch is the whole training set, so the iteration converges to the exact
minimiser. Without ridge, early stopping (``max_iter`` epochs, ``tol``,
``early_stopping``) regularises. The intercept is eliminated exactly, as in
solver "cg", by iterating on the right-hand sides ``[Y, 1]``. One iteration
is one epoch, about one pass over K.
"""

import warnings

import numpy as np
import scipy.linalg
from sklearn.utils import gen_batches

from .._operator import blas_dot
from ._common import NonPSDKernelWarning, SolverResult, dual_sum_intercept

SUBSAMPLE = 2000  # subsample size |S| for the eigen-directions
TOP_Q = 100  # at most this many eigen-directions are flattened
# Flatten no eigenvalue below this fraction of the largest: below it lie
# float32 rounding and the directions early stopping should fit last.
EIGEN_FLOOR = 1e-4
MIN_BATCH = 64
MAX_HALVINGS = 20


def _preconditioner(operator, w, rng):
    """The subsample S and what the update needs from it.

    With at most SUBSAMPLE weighted points, S is all of them with their
    weights (exact eigen-directions of the weighted kernel operator, so
    integer weights and repeated rows give the same preconditioner);
    otherwise S is drawn with probability w and weighted uniformly.

    Returns S, K[S, S], Vt, D, tau, beta, exact: the correction is
    ``Vt D Vt' K[S, :] grad``.
    """
    candidates = np.flatnonzero(w > 0)
    exact = len(candidates) <= SUBSAMPLE
    if exact:
        S, omega = candidates, w[candidates]
    else:
        p = w[candidates] / w[candidates].sum()
        S = np.sort(rng.choice(candidates, SUBSAMPLE, replace=False, p=p))
        omega = np.full(len(S), 1.0 / len(S))
    K_SS = np.asarray(operator.rows(S)[:, S], dtype=np.float64)
    K_SS = (K_SS + K_SS.T) / 2
    root = np.sqrt(omega)
    size = len(S)
    q = min(TOP_Q, size - 1)
    if q < 1:  # a single point: nothing to flatten
        return S, K_SS, np.zeros((size, 0)), np.zeros(0), float(K_SS[0, 0] * omega[0]), 0.0, exact
    lam, U = scipy.linalg.eigh(root[:, None] * K_SS * root[None, :], subset_by_index=[size - q - 1, size - 1])
    lam, U = lam[::-1], U[:, ::-1]
    # tau: the (k+1)-th eigenvalue, with k the flattened directions above the floor
    k = int(np.searchsorted(-lam[1:], -EIGEN_FLOOR * lam[0], side="right"))
    tau = max(float(lam[k]), EIGEN_FLOOR * float(lam[0]), np.finfo(float).tiny)
    lam, U = lam[:k], U[:, :k]
    shrink = 1.0 - tau / lam
    Vt = root[:, None] * U
    D = shrink / lam
    # preconditioned diagonal k_P(x, x) on S; phi_j(x_i) = sqrt(lam_j) U_ij / root_i
    k_P = np.diagonal(K_SS) - (shrink * lam * U**2).sum(axis=1) / omega
    beta = operator.n * float((w[S] * np.maximum(k_P, 0)).max())
    return S, K_SS, Vt, D, tau, beta, exact


def solve(operator, Y, w, settings):
    """Run EigenPro-preconditioned (stochastic) gradient descent.

    Parameters
    ----------
    operator : KernelOperator
        Square: all training points are centers.
    Y : ndarray of shape (n_samples, n_targets)
    w : ndarray of shape (n_samples,)
        Sample weights summing to 1.
    settings : SolverSettings

    Returns
    -------
    SolverResult
        ``n_iter`` counts epochs; ``loss_curve`` holds the objective of each
        epoch (for mini-batches, the mean of the batch losses seen during it).
    """
    rng = np.random.RandomState(settings.random_state)
    n, t = Y.shape
    alpha = settings.alpha
    operator.mirror_lower()  # mini-batches read whole rows of K
    S, K_SS, V, D, tau, beta, exact = _preconditioner(operator, w, rng)

    if exact:  # exact eigen-directions: the top of P (K + alpha) is tau + alpha
        bs, eta = n, 0.9 / (tau + alpha)
    else:
        bs = n if alpha > 0 else int(np.clip(beta / tau, MIN_BATCH, n))
        bs = n if bs >= n // 2 else bs
        # a streamed batch of rows must fit in the budget
        bs = int(max(1, min(bs, settings.memory_budget // (operator.itemsize * n))))
        eta = bs / (2.0 * (beta + (bs - 1) * tau + bs * alpha))

    # The intercept is eliminated as in solver "cg": iterate on the
    # right-hand sides [Y, 1] and combine (the iteration is linear in them).
    intercept = settings.fit_intercept
    R = np.column_stack([Y, np.ones(n)]) if intercept else Y
    A = np.zeros((n, R.shape[1]))
    if settings.coef_init is not None:
        A[:, :t] = settings.coef_init
    u = np.zeros((len(S), A.shape[1]))  # K[S] @ A, kept up to date by every step
    if settings.coef_init is not None:  # a cold start needs no kernel rows here
        u = np.asarray(operator.rows(S) @ A.astype(operator.dtype), dtype=np.float64)
    b = np.zeros(t)

    def combined(A, b):
        return (A[:, :t] - np.outer(A[:, t], b), b) if intercept else (A, b)

    # Divergence is judged on the objective of the iteration itself, summed
    # over the columns [Y, 1] (monotone for a stable step on a PSD kernel);
    # the combined model's objective also moves with the intercept.
    best = (np.inf, A.copy(), b.copy(), u.copy())
    curve, converged, halvings = [], False, 0
    previous_raw, first_raw = np.inf, None

    epoch = 0
    while epoch < settings.max_iter:
        epoch += 1
        order = rng.permutation(n) if bs < n else np.arange(n)
        value = raw = 0.0
        for batch in gen_batches(n, bs):
            idx = order[batch]
            KB = operator.rows(idx)
            F = operator.dot(KB, A)
            wB = w[idx]
            G = F - R[idx]
            # the objective of the combined model, with this epoch's intercept
            Fc = F[:, :t] - np.outer(F[:, t], b) + b if intercept else F
            value += float(np.einsum("i,ij,ij->", wB, Fc - Y[idx], Fc - Y[idx]))
            raw += float(np.einsum("i,ij,ij->", wB, G, G))
            grad = (n / len(idx)) * 2.0 * wB[:, None] * G
            K_SB = np.take(KB, S, axis=1).astype(np.float64).T  # take: 2x faster than KB[:, S]
            Kg = blas_dot(K_SB, grad)
            if alpha:  # full batch: the ridge part of the gradient is 2 alpha A
                Ac, _ = combined(A, b)
                value += alpha * float(np.einsum("ij,ij->", Ac, Fc - b))
                raw += alpha * float(np.einsum("ij,ij->", A, F))
                Kg += 2.0 * alpha * u
                A *= 1.0 - 2.0 * eta * alpha
                u *= 1.0 - 2.0 * eta * alpha
            corr = blas_dot(V, D[:, None] * blas_dot(V.T, Kg))
            A[idx] -= eta * grad
            A[S] += eta * corr
            u += blas_dot(K_SS, eta * corr) - blas_dot(K_SB, eta * grad)
        if intercept:  # the intercept of this epoch's solutions (see dual_sum_intercept)
            b = dual_sum_intercept(w, Y, A[:, :t], A[:, t])[1]

        first_raw = raw if first_raw is None else first_raw
        if not np.isfinite(raw) or (raw > 4 * min(best[0], previous_raw) and raw > 1e-8 * first_raw):
            _, A, b, u = (best[0],) + tuple(x.copy() for x in best[1:])
            halvings += 1
            if exact or halvings > MAX_HALVINGS:
                # a stable step diverges only along negative eigenvalues
                warnings.warn(
                    f"Solver 'eigenpro' stopped at epoch {epoch}: the objective rose "
                    f"with a stable step, so the {settings.kernel_name} kernel matrix is "
                    "not positive semi-definite. Increase alpha or use a PSD kernel.",
                    NonPSDKernelWarning,
                )
                break
            eta /= 2  # the estimated step was too large for this data
            continue
        curve.append(value)
        if raw < best[0]:
            best = (raw, A.copy(), b.copy(), u.copy())
        if settings.verbose and (settings.verbose > 1 or epoch % 10 == 0 or epoch == 1):
            print(f"[eigenpro] epoch {epoch:4d}  objective {value:.6e}  batch {bs}  step {eta:.4g}")
        if settings.callback is not None and settings.callback(*combined(A, b)):
            break
        # stop when an epoch lowers the objective by at most tol times its start
        if settings.tol > 0 and len(curve) > 1 and previous_raw - raw <= settings.tol * first_raw:
            converged = True
            break
        previous_raw = raw

    if intercept:
        A, b = dual_sum_intercept(w, Y, A[:, :t], A[:, t])
    return SolverResult(A, b, len(curve), curve, eta, converged)
