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


import numpy as np
import scipy.linalg
from sklearn.utils import gen_batches

from .._operator import blas_dot, single_threaded_blas
from ._common import (
    IterateLog,
    NonPSDKernelWarning,
    baseline,
    dual_sum_intercept,
    finish,
    warn_not_converged,
)
from .._warnings import warn

SUBSAMPLE = 2000  # subsample size |S| for the eigen-directions
TOP_Q = 100  # at most this many eigen-directions are flattened
# Flatten no eigenvalue below this fraction of the largest: below it lie
# float32 rounding and the directions early stopping should fit last.
EIGEN_FLOOR = 1e-4
MIN_BATCH = 64
MAX_HALVINGS = 20
# Rows per batch whose kernel block estimates the gradient norm.
GRAD_SAMPLE = 2000
# Epochs without a new best objective before stopping for lack of progress.
NO_PROGRESS_PATIENCE = 10


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
    lam, U = _top_eigenpairs(root[:, None] * K_SS * root[None, :], q)
    if not lam[0] > 0:  # no positive direction: the caller returns the baseline
        return S, K_SS, np.zeros((size, 0)), np.zeros(0), 0.0, 0.0, exact
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


def _top_eigenpairs(M, q):
    """The q + 1 largest eigenpairs of the symmetric M, largest first.

    One BLAS thread (multithreaded eigh ran 50x slower on a loaded 2-core
    machine); LAPACK's MRRR driver can fail on clustered spectra (a kernel
    near the identity), where bisection (evx) and then the full
    decomposition still succeed.
    """
    size = len(M)
    subset = [size - q - 1, size - 1]
    attempts = [("evr", subset), ("evx", subset), ("evd", None), ("ev", None)]
    with single_threaded_blas():
        for driver, wanted in attempts:
            try:
                lam, U = scipy.linalg.eigh(M, subset_by_index=wanted, driver=driver)
            except (np.linalg.LinAlgError, ValueError):
                if driver == attempts[-1][0]:
                    raise
                continue
            if wanted is None:  # a full decomposition: keep the top q + 1
                lam, U = lam[size - q - 1 :], U[:, size - q - 1 :]
            return lam[::-1], U[:, ::-1]


class _GradientNorm:
    """``||grad L||^2 = g'K g + (sum_i g_i)^2`` of an iterate, from samples of its rows.

    ``g'K g`` is estimated from blocks ``K[R, R]`` of random row subsets R
    (taken from kernel rows already read, where K is streamed); diagonal and
    off-diagonal terms are reweighted by the chance that a row, or a pair,
    is sampled. Exact when one block covers the data.
    """

    def __init__(self, n):
        self.n = n
        self.diag = self.off = self.gsum = 0.0
        self.rows = self.pairs = 0

    def add(self, K_RR, GR):
        quad = float(np.sum(GR * blas_dot(K_RR, GR)))
        d = float(np.einsum("ij,i,ij->", GR, np.diagonal(K_RR), GR))
        self.diag += d
        self.off += quad - d
        self.rows += len(GR)
        self.pairs += len(GR) * (len(GR) - 1)

    def value(self, gsum):
        n = self.n
        est = n / self.rows * self.diag
        if self.pairs:
            est += n * (n - 1) / self.pairs * self.off
        if gsum is not None:
            est += float(np.sum(np.asarray(gsum) ** 2))
        return max(est, 0.0)


def _sample(rng, size):
    """Positions of at most GRAD_SAMPLE rows out of ``size``, sorted."""
    return np.arange(size) if size <= GRAD_SAMPLE else np.sort(rng.choice(size, GRAD_SAMPLE, replace=False))


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
        ``n_iter`` counts epochs; ``loss_curve`` holds the exact objective of
        the iterate after each epoch, up to the one returned.
    """
    rng = np.random.RandomState(settings.random_state)
    n, t = Y.shape
    alpha = settings.alpha
    operator.mirror_lower()  # mini-batches read whole rows of K
    S, K_SS, V, D, tau, beta, exact = _preconditioner(operator, w, rng)
    log = IterateLog()
    if not tau > 0:  # K[S, S] has no positive eigenvalue: nothing to descend on
        warn(
            f"Solver 'eigenpro': the {settings.kernel_name} kernel matrix has no positive "
            "eigenvalue on the training data; the intercept-only model is returned.",
            NonPSDKernelWarning,
        )
        A0 = np.zeros((n, t))
        return finish("eigenpro", operator, Y, w, settings, A0, baseline(Y, w, settings.fit_intercept)[0], log, 0, False)

    if exact:  # exact eigen-directions: the top of P (K + alpha) is tau + alpha
        bs, eta = n, 0.9 / (tau + alpha)
    else:
        bs = n if alpha > 0 else int(np.clip(beta / tau, MIN_BATCH, n))
        bs = n if bs >= n // 2 else bs
        # a streamed batch of rows must fit in the budget
        bs = int(max(1, min(bs, settings.memory_budget // (operator.itemsize * n))))
        eta = bs / (2.0 * (beta + (bs - 1) * tau + bs * alpha))

    # The intercept is eliminated as the sum of the dual coefficients: iterate
    # on the right-hand sides [Y, 1] and combine (the iteration is linear in them).
    intercept = settings.fit_intercept
    R = np.column_stack([Y, np.ones(n)]) if intercept else Y
    k = R.shape[1]
    A = np.zeros((n, k))
    b = np.zeros(t)
    if settings.coef_init is not None:
        A[:, :t] = settings.coef_init
        if intercept:  # the warm intercept rides on the constant column's fit
            b = settings.intercept_init.copy()
    u = np.zeros((len(S), k))  # K[S] @ A, kept up to date by every step
    if settings.coef_init is not None:  # a cold start needs no kernel rows here
        u = np.asarray(operator.rows(S) @ A.astype(operator.dtype), dtype=np.float64)

    def combined(A, b):
        return (A[:, :t] - np.outer(A[:, t], b), b) if intercept else (A, b)

    from .gd import reference_gradient_norm2

    ref2 = reference_gradient_norm2(operator, Y, w, settings)
    best_raw, best_raw_value, previous_raw, first_raw = None, np.inf, np.inf, None
    converged, reason, halvings = False, None, 0
    epoch = 0
    def snapshot_terms(rows, F_snap):
        """Objective pieces of the snapshot on ``rows``: raw value, exact value, gradient, its sum."""
        wB = w[rows]
        # the objective of the iteration on [Y, 1] (monotone for a stable step)
        Gs = F_snap - R[rows]
        raw = float(np.einsum("i,ij,ij->", wB, Gs, Gs))
        if alpha:
            raw += alpha * float(np.einsum("ij,ij->", snap[0][rows], F_snap))
        # the exact objective and gradient of the snapshot's combined model
        Fc = F_snap[:, :t] - np.outer(F_snap[:, t], b_snap) + b_snap if intercept else F_snap
        Rc = Fc - Y[rows]
        value = float(np.einsum("i,ij,ij->", wB, Rc, Rc))
        Gc = 2.0 * wB[:, None] * Rc
        Gsum = Gc.sum(axis=0)
        if alpha:
            value += alpha * float(np.einsum("ij,ij->", Ac_snap[rows], Fc - b_snap))
            Gc += 2.0 * alpha * Ac_snap[rows]
        return raw, value, Gc, Gsum

    # A stored K evaluates each epoch's snapshot with one product over K; a
    # streamed K evaluates it in the same products as the batches' steps.
    stored = operator.stored
    while epoch < settings.max_iter:
        epoch += 1
        snap = (A.copy(), u.copy(), b.copy())  # the iterate this epoch evaluates
        Ac_snap, b_snap = combined(snap[0], snap[2])
        order = rng.permutation(n) if bs < n else np.arange(n)
        grad_norm = _GradientNorm(n)
        if stored:
            F_all = operator.matvec(snap[0])
            raw, value, Gc, gsum = snapshot_terms(slice(None), F_all)
            pos = _sample(rng, n)
            grad_norm.add(np.asarray(np.take(operator.rows(pos), pos, axis=1), dtype=np.float64), Gc[pos])
        else:
            value, raw, gsum = 0.0, 0.0, 0.0
        for batch in gen_batches(n, bs):
            idx = order[batch]
            KB = operator.rows(batch if bs == n else idx)  # a slice: no copy of a stored K
            if bs == n and stored:
                F = F_all
            elif stored:
                F = operator.dot(KB, A)
            else:  # A moves within the epoch: evaluate the snapshot too, in one product
                both = operator.dot(KB, np.hstack([A, snap[0]])) if bs < n else None
                F, F_snap = (both[:, :k], both[:, k:]) if bs < n else (operator.dot(KB, A),) * 2
                raw_B, value_B, Gc_B, gsum_B = snapshot_terms(idx, F_snap)
                raw, value, gsum = raw + raw_B, value + value_B, gsum + gsum_B
                pos = _sample(rng, len(idx))
                K_RR = np.asarray(np.take(KB[pos], idx[pos], axis=1), dtype=np.float64)
                grad_norm.add(K_RR, Gc_B[pos])
            wB = w[idx]
            # the EigenPro step on the current iterate
            G = F - R[idx]
            grad = (n / len(idx)) * 2.0 * wB[:, None] * G
            K_SB = np.take(KB, S, axis=1).astype(np.float64).T  # take: 2x faster than KB[:, S]
            KSg = blas_dot(K_SB, grad)
            Kg = KSg + 2.0 * alpha * u if alpha else KSg  # the ridge part of the gradient is 2 alpha A
            if alpha:
                A *= 1.0 - 2.0 * eta * alpha
                u *= 1.0 - 2.0 * eta * alpha
            corr = blas_dot(V, D[:, None] * blas_dot(V.T, Kg))
            A[idx] -= eta * grad
            A[S] += eta * corr
            u += blas_dot(K_SS, eta * corr) - eta * KSg
        if intercept:  # the intercept of this epoch's solutions (see dual_sum_intercept)
            b = dual_sum_intercept(w, Y, A[:, :t], A[:, t])[1]

        first_raw = raw if epoch == 1 else first_raw
        if epoch > 1:  # the snapshot is the iterate after epoch - 1
            if not np.isfinite(raw) or (raw > 4 * min(best_raw_value, previous_raw) and raw > 1e-8 * first_raw):
                halvings += 1
                if best_raw is not None:
                    A, u, b = (x.copy() for x in best_raw)
                if exact or halvings > MAX_HALVINGS:
                    # a stable step diverges only along negative eigenvalues
                    warn(
                        f"Solver 'eigenpro' stopped at epoch {epoch}: the objective rose "
                        f"with a stable step, so the {settings.kernel_name} kernel matrix is "
                        "not positive semi-definite. The best iterate seen is returned; "
                        "increase alpha or use a PSD kernel.",
                        NonPSDKernelWarning,
                    )
                    reason, epoch = "diverged", log.best_index
                    break
                eta /= 2  # the estimated step was too large for this data
                continue
            log.record(value, Ac_snap, b_snap)
            if log.best_index == len(log.curve):
                best_raw = snap
            best_raw_value = min(best_raw_value, raw)
        previous_raw = raw
        if settings.verbose and (settings.verbose > 1 or epoch % 10 == 0 or epoch == 1):
            print(f"[eigenpro] epoch {epoch:4d}  objective {value:.6e}  batch {bs}  step {eta:.4g}")
        grad2 = grad_norm.value(gsum if intercept else None)
        # Every epoch's iterate reaches the callback, the last one included.
        stop_requested = settings.callback is not None and settings.callback(*combined(A, b))
        if settings.tol > 0 and grad2 <= settings.tol**2 * ref2:
            converged = True
            break
        if stop_requested:
            reason = "callback"
            break
        if settings.tol > 0 and log.since_best() >= NO_PROGRESS_PATIENCE:
            reason = "stalled"
            break

    if reason == "stalled":
        warn_not_converged(
            "eigenpro", f"stopped at epoch {epoch} for lack of progress: the objective has not "
            f"decreased for {NO_PROGRESS_PATIENCE} epochs",
            "The model is the best iterate seen. Increase alpha, or use solver='cg'.",
        )
    elif not converged and reason is None and settings.tol > 0:
        warn_not_converged(
            "eigenpro", f"did not converge in max_iter={settings.max_iter} epochs (the gradient "
            f"norm is {np.sqrt(grad2 / max(ref2, 1e-300)):.2e} of its initial value, above tol={settings.tol:g})",
            "Increase max_iter or alpha, or use early_stopping=True.",
        )
    coef, b = combined(A, b)
    return finish("eigenpro", operator, Y, w, settings, coef, b, log, epoch, converged, eta)
