"""Solver "eigenpro": gradient descent preconditioned by top eigen-directions (Ma and Belkin, 2017, 2019).

Gradient descent on the dual is slow because its step is limited by the largest eigenvalue of the
weighted kernel operator. EigenPro shrinks the top q eigen-directions of a subsample's kernel matrix
down to the (q+1)-th eigenvalue ``tau``:

    P = I - sum_{j <= q} (1 - (tau + alpha) / (lambda_j + alpha)) phi_j (x) phi_j,

so a step about ``(lambda_1 + alpha) / (tau + alpha)`` times larger is stable. The ``phi_j`` are exact
RKHS-orthonormal eigenfunctions of the subsample, so P is positive definite and the minimiser is
solver "gd"'s. In dual coefficients, one step on a mini-batch B with residuals g is

    a_B -= eta * grad_B,    a_S += eta * V D V' K[S, B] grad_B,
    grad_B = (n / |B|) * 2 w_B g_B,    D = diag((1 - (tau + alpha) / (lambda_j + alpha)) / theta_j),

with ``theta_j, V`` the eigenpairs of K[S, S] and ``lambda_j = theta_j / |S|``. The batch size is
EigenPro 2's critical ``beta / tau`` (beta: the largest preconditioned diagonal), the step
``bs / (2 (beta + (bs - 1) tau + bs alpha))``. With ridge the batch is the whole set, so the iteration
converges to the exact minimiser; without, early stopping regularises. The intercept is eliminated as in
solver "cg", on the right-hand sides ``[Y, 1]``. One iteration is one epoch, about one pass over K.
"""


from dataclasses import dataclass

import numpy as np
from sklearn.utils import gen_batches

from .._array_api import (
    add_at_rows, as_float64, clip_min, concat, copy_array, diagonal, full_as, outer_product, rows_of, scalar_sum,
    take_columns, to_numpy, top_eigenpairs, xp_of, zeros_as,
)
from .._array_api import blas_dot
from .._operator import single_threaded_blas
from ._common import (
    IterateLog,
    NonPSDKernelWarning,
    baseline,
    dual_sum_intercept,
    finish,
    warn_not_converged,
)
from .._warnings import warn

# What this solver minimises: its losses, and its models (all points as centers, or n_centers).
LOSSES = {"squared"}
MODELS = {"full"}

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


def _preconditioner(operator, w, alpha, rng):
    """The subsample S and what the update needs from it: with at most SUBSAMPLE weighted points, all of them
    with their weights (integer weights and repeated rows then give the same preconditioner), else drawn with
    probability w and weighted uniformly. Returns S, K[S, S], Vt, D, tau, beta, exact: the correction is
    ``Vt D Vt' K[S, :] grad``.
    """
    xp = xp_of(w)
    w_host = np.asarray(to_numpy(w))
    candidates = np.flatnonzero(w_host > 0)
    exact = len(candidates) <= SUBSAMPLE
    if exact:
        S, omega = candidates, rows_of(w, candidates)
    else:
        p = w_host[candidates] / w_host[candidates].sum()
        S = np.sort(rng.choice(candidates, SUBSAMPLE, replace=False, p=p))
        omega = full_as(w, len(S), 1.0 / len(S))
    K_SS = as_float64(take_columns(operator.rows(S), S))
    K_SS = (K_SS + K_SS.T) / 2
    root = xp.sqrt(omega)
    size = len(S)
    q = min(TOP_Q, size - 1)
    if q < 1:  # a single point: nothing to flatten
        return S, K_SS, zeros_as(K_SS, (size, 0)), zeros_as(K_SS, 0), float(K_SS[0, 0] * omega[0]), 0.0, exact
    with single_threaded_blas():  # multithreaded eigh ran 50x slower on a loaded 2-core machine
        lam, U = top_eigenpairs(root[:, None] * K_SS * root[None, :], q)
    lam_host = np.asarray(to_numpy(lam))
    if not lam_host[0] > 0:  # no positive direction: the caller returns the baseline
        return S, K_SS, zeros_as(K_SS, (size, 0)), zeros_as(K_SS, 0), 0.0, 0.0, exact
    # tau: the (k+1)-th eigenvalue, with k the flattened directions above the floor
    k = int(np.searchsorted(-lam_host[1:], -EIGEN_FLOOR * lam_host[0], side="right"))
    tau = max(float(lam_host[k]), EIGEN_FLOOR * float(lam_host[0]), np.finfo(float).tiny)
    lam, U = lam[:k], U[:, :k]
    # P flattens the top of K + alpha, not of K: (lam + alpha) -> (tau + alpha) in each direction
    # (tau / lam would leave tau (1 + alpha / lam), far below the step's tau + alpha for alpha >> tau)
    shrink = 1.0 - (tau + alpha) / (lam + alpha)
    Vt = root[:, None] * U
    D = shrink / lam
    # preconditioned diagonal k_P(x, x) on S; phi_j(x_i) = sqrt(lam_j) U_ij / root_i
    k_P = diagonal(K_SS) - xp.sum(shrink * lam * U**2, axis=1) / omega
    beta = operator.n * float(xp.max(rows_of(w, S) * clip_min(k_P, 0.0)))
    return S, K_SS, Vt, D, tau, beta, exact


def _sample(rng, size):
    """Positions of at most GRAD_SAMPLE rows out of ``size``, sorted."""
    return np.arange(size) if size <= GRAD_SAMPLE else np.sort(rng.choice(size, GRAD_SAMPLE, replace=False))


class _GradientNorm:
    """``||grad L||^2 = g'K g + (sum_i g_i)^2`` of an iterate, from samples of its rows: ``g'K g`` is estimated
    from blocks ``K[R, R]`` of random row subsets (kernel rows already read, where K is streamed), each term
    reweighted by the chance that its row, or pair, is sampled. Exact when one block covers the data.
    """

    def __init__(self, n):
        self.n = n
        self.diag = self.off = self.gsum = 0.0
        self.rows = self.pairs = 0

    def add(self, K_RR, GR):
        quad = scalar_sum(GR, blas_dot(K_RR, GR))
        d = scalar_sum(GR, GR, diagonal(K_RR))
        self.diag += d
        self.off += quad - d
        rows = GR.shape[0]
        self.rows += rows
        self.pairs += rows * (rows - 1)

    def value(self, gsum):
        n = self.n
        est = n / self.rows * self.diag
        if self.pairs:
            est += n * (n - 1) / self.pairs * self.off
        if gsum is not None:
            est += scalar_sum(gsum**2) if not isinstance(gsum, float) else gsum**2
        return max(est, 0.0)


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
    S, K_SS, V, D, tau, beta, exact = _preconditioner(operator, w, alpha, rng)
    log = IterateLog()
    if not tau > 0:  # K[S, S] has no positive eigenvalue: nothing to descend on
        warn(
            f"Solver 'eigenpro': the {settings.kernel_name} kernel matrix has no positive "
            "eigenvalue on the training data; the intercept-only model is returned.",
            NonPSDKernelWarning,
        )
        A0 = zeros_as(Y, (n, t))
        return finish("eigenpro", operator, Y, w, settings, A0, baseline(Y, w, settings.fit_intercept)[0], log, 0, False)

    bs, eta = _batch_and_step(operator, n, alpha, tau, beta, exact, settings.memory_budget)

    # The intercept is eliminated as the sum of the dual coefficients: iterate
    # on the right-hand sides [Y, 1] and combine (the iteration is linear in them).
    intercept = settings.fit_intercept
    R = concat([Y, zeros_as(Y, (n, 1)) + 1.0], axis=1) if intercept else Y
    k = R.shape[1]
    A = zeros_as(Y, (n, k))
    b = zeros_as(Y, t)
    if settings.coef_init is not None:
        A[:, :t] = settings.coef_init
        if intercept:  # the warm intercept rides on the constant column's fit
            b = copy_array(settings.intercept_init)
    u = zeros_as(Y, (len(S), k))  # K[S] @ A, kept up to date by every step
    if settings.coef_init is not None:  # a cold start needs no kernel rows here
        u = operator.dot(operator.rows(S), A)

    def combined(A, b):
        return (A[:, :t] - outer_product(A[:, t], b), b) if intercept else (A, b)

    from .gd import reference_gradient_norm2

    ref2 = reference_gradient_norm2(operator, Y, w, settings)
    if not ref2 > 0 and settings.coef_init is None:  # a stationary start: the intercept-only model
        return finish("eigenpro", operator, Y, w, settings, zeros_as(Y, (n, t)),
                      baseline(Y, w, settings.fit_intercept)[0], log, 0, True, eta)
    best_raw, best_raw_value, previous_raw, first_raw = None, np.inf, np.inf, None
    converged, reason, halvings = False, None, 0
    epoch = 0
    while epoch < settings.max_iter:
        epoch += 1
        raw_iterate = (copy_array(A), copy_array(u), copy_array(b))  # this epoch's iterate: copies (A moves in place)
        Ac_snap, b_snap = combined(raw_iterate[0], raw_iterate[2])
        snapshot = _Snapshot(*raw_iterate, Ac_snap, b_snap, t, intercept)
        A, u, raw, value, gsum, grad_norm = _epoch(operator, (Y, R, w, alpha), A, u, snapshot, bs, eta, rng,
                                                   (S, K_SS, V, D))
        if intercept:  # the intercept of this epoch's solutions (see dual_sum_intercept)
            b = dual_sum_intercept(w, Y, A[:, :t], A[:, t])[1]

        first_raw = raw if epoch == 1 else first_raw
        if epoch > 1:  # the snapshot is the iterate after epoch - 1
            if not np.isfinite(raw) or (raw > 4 * min(best_raw_value, previous_raw) and raw > 1e-8 * first_raw):
                halvings += 1
                if best_raw is not None:
                    A, u, b = (copy_array(x) for x in best_raw.raw)
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
                best_raw = snapshot
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

    _report(reason, converged, epoch, settings, grad2, ref2)
    coef, b = combined(A, b)
    return finish("eigenpro", operator, Y, w, settings, coef, b, log, epoch, converged, eta)


def _batch_and_step(operator, n, alpha, tau, beta, exact, memory_budget):
    """The batch size and step of the preconditioned iteration (``_preconditioner``'s tau and beta)."""
    if exact:  # exact eigen-directions: the top of P (K + alpha) is tau + alpha
        return n, 0.9 / (tau + alpha)
    bs = n if alpha > 0 else int(np.clip(beta / tau, MIN_BATCH, n))
    bs = n if bs >= n // 2 else bs
    # a streamed batch of rows must fit in the budget
    bs = int(max(1, min(bs, memory_budget // (operator.itemsize * n))))
    return bs, bs / (2.0 * (beta + (bs - 1) * tau + bs * alpha))


def _step(A, u, KB, G, wB, idx, n, eta, alpha, preconditioner):
    """The EigenPro step on a batch's rows ``idx`` (kernel rows KB, residuals G): ``(A, u)`` after it,
    ``u = K[S] @ A`` kept up to date (numpy's in place)."""
    S, K_SS, V, D = preconditioner
    grad = (n / len(idx)) * 2.0 * wB[:, None] * G
    K_SB = as_float64(take_columns(KB, S)).T
    KSg = blas_dot(K_SB, grad)
    Kg = KSg + 2.0 * alpha * u if alpha else KSg  # the ridge part of the gradient is 2 alpha A
    if alpha:
        A *= 1.0 - 2.0 * eta * alpha
        u *= 1.0 - 2.0 * eta * alpha
    corr = blas_dot(V, D[:, None] * blas_dot(V.T, Kg))
    if len(idx) == n:  # idx is every row in order: no scatter
        A = A - eta * grad
    else:
        A = add_at_rows(A, idx, -eta * grad)
    A = add_at_rows(A, S, eta * corr)
    u += blas_dot(K_SS, eta * corr) - eta * KSg
    return A, u


def _report(reason, converged, epoch, settings, grad2, ref2):
    """The warning of a fit that stalled or reached max_iter."""
    if reason == "stalled":
        warn_not_converged(
            "eigenpro", f"stopped at epoch {epoch} for lack of progress: the objective has not "
            f"decreased for {NO_PROGRESS_PATIENCE} epochs",
            "The model is the best iterate seen. Increase alpha, or use solver='cg'.",
        )
    elif not converged and reason is None and settings.tol > 0:
        warn_not_converged(
            "eigenpro", f"did not converge in max_iter={settings.max_iter} epochs (the gradient "
            f"norm is {np.sqrt(grad2 / max(ref2, 1e-300)):.2e} of its value at the intercept-only model, "
            f"above tol={settings.tol:g})",
            "Increase max_iter or alpha, or use early_stopping=True.",
        )


@dataclass(frozen=True)
class _Snapshot:
    """The iterate an epoch evaluates: coefficients on [Y, 1], ``u = K[S] A``, the intercept, and the
    combined model's coefficients and intercept (``Ac, bc``)."""

    A: object
    u: object
    b: object
    Ac: object
    bc: object
    t: int  # the targets' columns (A has one more with an intercept)
    intercept: bool

    @property
    def raw(self):
        return self.A, self.u, self.b

    def terms(self, rows, F, problem):
        """Objective pieces on ``rows`` from its predictions there (F = K[rows] A): the iteration's
        value on [Y, 1] (monotone for a stable step), the combined model's exact value, gradient and
        its column sums."""
        Y, R, w, alpha = problem
        wB = rows_of(w, rows)
        Gs = F - rows_of(R, rows)
        raw = scalar_sum(Gs, Gs, wB)
        if alpha:
            raw += alpha * scalar_sum(rows_of(self.A, rows), F)
        t = self.t
        Fc = F[:, :t] - outer_product(F[:, t], self.bc) + self.bc if self.intercept else F
        Rc = Fc - rows_of(Y, rows)
        value = scalar_sum(Rc, Rc, wB)
        Gc = 2.0 * wB[:, None] * Rc
        Gsum = xp_of(Gc).sum(Gc, axis=0)
        if alpha:
            value += alpha * scalar_sum(rows_of(self.Ac, rows), Fc - self.bc)
            Gc = Gc + 2.0 * alpha * rows_of(self.Ac, rows)
        return raw, value, Gc, Gsum


def _epoch(operator, problem, A, u, snapshot, bs, eta, rng, preconditioner):
    """One pass over the rows in batches of ``bs``: ``(A, u)`` after it, and the snapshot's raw and exact
    objective, gradient sum and gradient norm estimate.

    A stored K evaluates the snapshot with one product over K; a streamed K in the same products as the
    batches' steps."""
    Y, R, w, alpha = problem
    n, k = A.shape
    stored = operator.stored
    order = rng.permutation(n) if bs < n else np.arange(n)
    grad_norm = _GradientNorm(n)
    if stored:
        F_all = operator.matvec(snapshot.A)
        raw, value, Gc, gsum = snapshot.terms(slice(None), F_all, problem)
        pos = _sample(rng, n)
        grad_norm.add(as_float64(take_columns(operator.rows(pos), pos)), rows_of(Gc, pos))
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
            both = operator.dot(KB, concat([A, snapshot.A], axis=1)) if bs < n else None
            F, F_snap = (both[:, :k], both[:, k:]) if bs < n else (operator.dot(KB, A),) * 2
            raw_B, value_B, Gc_B, gsum_B = snapshot.terms(idx, F_snap, problem)
            raw, value, gsum = raw + raw_B, value + value_B, gsum + gsum_B
            pos = _sample(rng, len(idx))
            grad_norm.add(as_float64(take_columns(rows_of(KB, pos), idx[pos])), rows_of(Gc_B, pos))
        A, u = _step(A, u, KB, F - rows_of(R, idx), rows_of(w, idx), idx, n, eta, alpha, preconditioner)
    return A, u, raw, value, gsum, grad_norm
