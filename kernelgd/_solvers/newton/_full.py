"""The full model's directions (all training points as centers): the diagonal model's and the softmax's exact one.

Both solve a weighted kernel ridge system by one CG run over every class,
preconditioned by one Nystroem factor ``K ~ L L'`` drawn once per fit (and
kept along a search path), re-weighted by each column's Hessian weights.
"""

from dataclasses import dataclass

import numpy as np

from ..._array_api import (
    CholeskyStack, add_to_diagonal, blas_dot, cho_solve, cholesky, cholesky_many, clip_min, coldot,
    concat, contiguous, copy_array, fortran, from_numpy, gram, single_threaded_blas, take_columns, take_rows, to_numpy,
    xp_of, zeros_as,
)
from .._krylov import ProductTracker, block_pcg, rp_cholesky
from .._preconditioners import N_LANDMARKS, PRECONDITIONER_MIN_SHIFT
from ._centers import intercept_pinv
from ._steps import LM_INNER, REFACTOR_CHANGE, REFACTOR_RATIO, Step

# The Nystroem factor's rank: at most N_LANDMARKS, at least MIN_LANDMARKS (every row below that).
MIN_LANDMARKS = 100
# k factors cost n r^2 k flops per refactoring, a product with K n^2 k: r <= sqrt(REFACTOR_PRODUCTS n)
# keeps a refactoring within that many products.
REFACTOR_PRODUCTS = 8
# Column sums of the coefficients below this share of their size are rounding of 0.
ZERO_SUM = 1e-10
# A row's coupling of two classes is bounded above where either's probability is below this (coupled_gram).
COUPLING_FLOOR = 1e-4
# Probabilities are floored here in the softmax's exact step (its g divides by sqrt(p)).
PROBABILITY_FLOOR = 1e-10
_TINY = float(np.finfo(float).tiny)


@dataclass
class FullFactors:
    """Per column c, the Cholesky factor of ``L' diag(h_c) L + mu_c I`` and the weights and shift it was made with."""

    cholesky: CholeskyStack
    weights: list
    shifts: np.ndarray

    @classmethod
    def empty(cls, k):
        return cls(CholeskyStack(k), [None] * k, np.ones(k))

    def rank(self):
        """The rank of the factor L they were made with (None: none made yet)."""
        return next((R.shape[0] for R in self.cholesky.R if R is not None), None)


def nystroem_factor(operator, k, settings, steps):
    """The full model's Nystroem factor ``L`` of K (``K ~ L L'``), drawn once per fit into ``steps.L``."""
    if steps.L is not None:
        return steps.L
    rng = np.random.RandomState(settings.random_state)

    def columns(idx):
        with single_threaded_blas():
            return fortran(operator.columns(idx))

    steps.L = rp_cholesky(columns, operator.diag(), factor_rank(operator.n, k), rng, precision=operator.dtype)[0]
    return steps.L


def factor_rank(n, k):
    """The rank of the Nystroem factor of K for n rows and k columns (``nystroem_factor``'s)."""
    return int(min(N_LANDMARKS, 2 * N_LANDMARKS / np.sqrt(k), max(np.sqrt(REFACTOR_PRODUCTS * n), MIN_LANDMARKS)))


def coupled_rank(n, k):
    """The rank of the softmax's coupled factor (``coupled_preconditioner``) for n rows and k classes: the
    per-class factors' (``factor_rank``), or less where that would cost more than ``REFACTOR_PRODUCTS``
    products with K. Its Gram matrix costs ``k^2 n r^2`` flops and its Cholesky ``(k r)^3 / 3``, a product
    ``2 n^2 k``."""
    budget = REFACTOR_PRODUCTS * 2.0 * n * n * k
    return min(factor_rank(n, k), int(np.sqrt(budget / (k * k * n))), int(np.cbrt(3.0 * budget) / k))


def coupling_ratio(operator, w, k, settings, steps):
    """K's largest eigenvalue over ``2 alpha n`` (n the rows that weigh), read from the Nystroem factor
    the preconditioner draws anyway (``L'L``'s); infinite without ridge."""
    if not settings.alpha > 0:
        return np.inf
    L = nystroem_factor(operator, k, settings, steps)
    if not L.shape[1]:
        return np.inf
    top = float(np.linalg.eigvalsh(to_numpy(L.T @ L))[-1])
    return top / (2.0 * settings.alpha * int(np.count_nonzero(to_numpy(w))))


def preconditioner(operator, H, ridge, settings, steps):
    """The inverse of ``P_c = S_c L L' S_c + mu_c I`` for every column (Woodbury), ``S_c = diag(sqrt(h_c))``:
    a function applying every column's ``P_c^-1`` at once. Each factor is applied with the weights
    and shift it was made for (Woodbury needs them to match)."""
    n, k = H.shape
    xp = xp_of(H)
    S = xp.sqrt(H)
    nystroem_factor(operator, k, settings, steps)
    # randomly pivoted Cholesky's leading columns are the factor of a smaller rank
    L = steps.L if steps.rank is None or steps.rank >= steps.L.shape[1] else steps.L[:, : steps.rank]
    L = contiguous(L)
    if steps.factors is not None and steps.factors.rank() not in (None, L.shape[1]):
        steps.factors = None  # made at another rank (a search path's earlier fit)
    diag = operator.diag()
    # floored as solver "cg" floors it: a shift of a tiny ridge would blow every component outside
    # L's span up by 1 / ridge, coefficients K cannot see but the penalty's rounding can
    shift_floor = float(max(ridge, np.finfo(float).tiny))
    mu = clip_min(PRECONDITIONER_MIN_SHIFT * (diag @ H) / n, shift_floor)
    if steps.factors is None:
        steps.factors = FullFactors.empty(k)
    factors = steps.factors
    weights, shifts = factors.weights, factors.shifts
    # every column's shift and refactoring tests in one read from the device: the weights' L1 change since each
    # factor was made, and the largest factor by which a row's h_i K_ii + mu moved
    seen = [c for c in range(k) if weights[c] is not None]
    parts = [mu]
    if seen:
        old, new = xp.stack([weights[c] for c in seen], axis=1), take_columns(H, seen)
        made = from_numpy(np.asarray(shifts, dtype=np.float64)[seen], xp, getattr(H, "device", None))
        ratio = (new * diag[:, None] + take_rows(mu, seen)[None, :]) / (old * diag[:, None] + made[None, :])
        change = xp.sum(xp.abs(new - old), axis=0) / xp.sum(old, axis=0)
        parts += [change, xp.max(xp.maximum(ratio, 1.0 / ratio), axis=0)]
    read = [float(value) for value in np.asarray(to_numpy(concat(parts)))]
    mus, tests = read[:k], {c: (read[k + i], read[k + len(seen) + i]) for i, c in enumerate(seen)}

    # a column's factor is remade where its weights moved by REFACTOR_CHANGE (L1 share) since it was made, or some
    # row's h_i K_ii + mu, or mu, by more than REFACTOR_RATIO: the row ratios miss weights that move under a larger
    # mu, the L1 share a single row (the shift alone sets the spectrum outside L's span: a damping that moved moves it)
    def stale(c):
        change, ratio = tests.get(c, (np.inf, np.inf))
        return change > REFACTOR_CHANGE or ratio * max(mus[c] / shifts[c], shifts[c] / mus[c]) > REFACTOR_RATIO

    moved = [c for c in range(k) if L.shape[1] and stale(c)]
    grams = [add_to_diagonal(gram(S[:, c : c + 1] * L, trans=True), mus[c]) for c in moved]
    for c, R in zip(moved, cholesky_many(grams, "preconditioner matrix")):  # off the host: one read for all
        factors.cholesky.set(c, R)
        weights[c], shifts[c] = copy_array(H[:, c]), mus[c]
    if not L.shape[1]:
        return lambda V: V / mu
    S_factor = xp.sqrt(xp.stack(weights, axis=1))
    shifts_now = from_numpy(np.asarray(shifts, dtype=np.float64), xp, getattr(H, "device", None))

    def apply(V):
        inner = factors.cholesky.solve(blas_dot(L.T, S_factor * V))
        return (V - S_factor * blas_dot(L, inner)) / shifts_now

    return apply


def coupled_preconditioner(operator, P, H, w, ridge, settings, steps, rank, M, Mt):
    """The inverse of ``P = M'(I_k (x) L L')M + mu I`` on M's range, L the Nystroem factor's leading ``rank``
    columns and ``M`` (``Mt``: M') the softmax's Hessian factor: by Woodbury, with the r k x r k matrix
    ``G = mu I + sum_i H_i (x) L_i' L_i``, ``H_i = w_i (diag(p_i) - p_i p_i')`` the row's Hessian block, made
    at every step (``coupled_gram``). Unlike ``preconditioner``'s per-class factors it holds the classes'
    coupling ``-p_i p_i'``; ``mu``: that function's shift, the largest of its classes'."""
    xp = xp_of(P)
    n, k = P.shape
    rank = min(rank, steps.rank or rank)  # (a large ridge's leading half: see ``_directions``)
    L = contiguous(nystroem_factor(operator, k, settings, steps)[:, :rank])
    rank = L.shape[1]  # (fewer where K's own rank is)
    diag = operator.diag()
    mu = max(float(PRECONDITIONER_MIN_SHIFT * float(xp.max(diag @ H)) / n), float(ridge), _TINY)
    R = cholesky(add_to_diagonal(coupled_gram(L, P, w), mu), "preconditioner matrix")

    def apply(V):
        Z = xp.reshape(blas_dot(L.T, M(V)).T, (-1, 1))  # class by class: G's order
        Z = xp.reshape(cho_solve(R, Z), (k, rank)).T
        return (V - Mt(blas_dot(L, Z))) / mu

    return apply


def coupled_gram(L, P, w):
    """``sum_i H~_i (x) L_i' L_i`` (class-major blocks; numpy: the upper triangle, which its Cholesky reads),
    with ``H~_i >= H_i``: the coupling ``-w_i p_ic p_id`` of two classes one of which is below ``COUPLING_FLOOR``
    is replaced by ``w_i p_ic p_id`` on both diagonals (adding the PSD ``(e_c + e_d)(e_c + e_d)'`` term).
    Then ``G~ >= G`` and Woodbury's apply stays positive definite, while the coupling costs one product per
    pair of classes over the rows where both are likely, not ``k^2`` over every row.
    """
    xp, k, rank = xp_of(P), P.shape[1], L.shape[1]
    kept = xp.astype(P >= COUPLING_FLOOR, P.dtype)
    Q = kept * P * xp.sqrt(w)[:, None]  # the coupling's rows sqrt(w_i) p_i, the unlikely classes' zeroed
    unlikely = xp.sum((1.0 - kept) * P, axis=1, keepdims=True)
    # H~'s diagonal: w p_c (1 - p_c + unlikely) for a kept class, 2 w p_c (1 - p_c) for an unlikely one
    D = w[:, None] * P * (kept * (1.0 - P + unlikely) + (1.0 - kept) * 2.0 * (1.0 - P))
    G = fortran(zeros_as(P, (k * rank, k * rank)))  # (Fortran: the factor's triangular solves read it in place)
    support = np.asarray(to_numpy(P)) >= COUPLING_FLOOR
    for c in range(k):
        block = slice(c * rank, (c + 1) * rank)
        G[block, block] = gram(xp.sqrt(D[:, c : c + 1]) * L, trans=True)
        rows = np.flatnonzero(support[:, c])
        both = support[rows]
        for d in range(c + 1, k):
            pair = rows[both[:, d]]
            if pair.size:  # -sum over the pair's rows of w p_c p_d L_i' L_i
                Lp = take_rows(L, pair)
                coupling = -blas_dot(((take_rows(Q[:, c], pair) * take_rows(Q[:, d], pair))[:, None] * Lp).T, Lp)
                G[block, d * rank : (d + 1) * rank] = coupling
                G[d * rank : (d + 1) * rank, block] = coupling.T
    return G


class FullDiagonal:
    """The diagonal model's minimiser for the full model, all columns in one CG run: column c solves
    ``(Q S K S Q + ridge I) x = Q S (z - z_bar)`` with ``S = diag(sqrt(h_c))``, ``z = F - G / h`` and
    ``a = S x``, as solver "cg" does; ``ridge`` is ``2 alpha`` plus any Levenberg-Marquardt damping (the run
    then truncated at ``LM_INNER``: any of its iterates descends). Warm-started from the current iterate.
    """

    tight = False

    def __init__(self, operator, settings, steps, loss, w):
        self.operator, self.settings, self.steps = operator, settings, steps
        self.exact = loss.diagonal_hessian  # the softmax's diagonal model is not its Hessian

    def __call__(self, F, G, H, A, KA, b):
        operator, settings, steps = self.operator, self.settings, self.steps
        n, k = F.shape
        xp = xp_of(F)
        damping = steps.damping
        ridge = 2.0 * settings.alpha + damping
        center = settings.fit_intercept
        S = xp.sqrt(H)
        total = xp.sum(H, axis=0)
        Z = F - G / H
        z_bar = coldot(H, Z) / total if center else zeros_as(F, k)
        inverse = preconditioner(operator, H, ridge, settings, steps)

        def project(V):  # removes the intercept: Q_c = I - s_c s_c' / total_c
            return V - S * (coldot(S, V) / total) if center else V

        tracker = ProductTracker()

        def apply_A(V):
            KV = operator.matvec(S * V)
            tracker.record(KV)
            return project(S * KV) + ridge * V

        def on_iter(X, step):
            tracker.advance(step)
            return False

        X0, AX0 = project(A / S), None
        # Q removes nothing from A / s where A's columns sum to 0 (every iterate but a user's coef_init,
        # with an intercept): then K S X0 = K A, known, and the warm start costs no product with K
        sums, sizes = xp.abs(xp.sum(A, axis=0)), xp.sum(xp.abs(A), axis=0)
        if not center or bool(xp.all(sums <= ZERO_SUM * sizes)):
            tracker.KX = copy_array(KA)
            AX0 = project(S * KA) + ridge * X0
        rhs = project(S * (Z - z_bar))
        tol_b, from_start = steps.exact_tol, steps.loose
        if damping:  # solved for the correction; B grows with the margins: no tolerance relative to it
            rhs += damping * X0
            tol_b, from_start = 0.0, True
        X, n_inner, steps.status = block_pcg(
            apply_A, rhs, lambda V: project(inverse(V)),
            max_iter=min(steps.inner_cap, LM_INNER) if damping else steps.inner_cap,
            tol=steps.inner_tol, tol_from_start=from_start, tol_b=tol_b, on_iter=on_iter, x0=X0,
            tracker=tracker, Ax0=AX0,
        )
        A_new, KA_new = S * X, tracker.KX
        b_new = z_bar - coldot(H, KA_new) / total if center else zeros_as(F, k)
        return Step(A_new, b_new, KA_new, n_inner)


class FullCoupled:
    """The softmax's exact Newton step for the full model, every class in one CG run.

    Row i's Hessian ``H_i = w_i (diag(p_i) - p_i p_i')`` factors as ``M_i M_i'`` with
    ``M_i = sqrt(w_i) (diag(sqrt(p_i)) - p_i sqrt(p_i)')``, and the gradient as ``G_i = M_i g_i``. With
    ``A = M x`` the second-order model is the diagonal model's least squares with the block ``M`` for ``S``:
    ``(Q M'K M Q + 2 alpha I) x = Q (M'F - g)``, ``Q`` the projection that removes the intercepts
    (``B = M'1``: ``Q = I - B S^+ B'``, ``S = B'B``). Preconditioned on M's range by the diagonal model's
    per-class factors, or, given the classes ``k``, by the rows' Hessian blocks where that factor is cheap
    (``coupled_rank``; each step then solved to the exact tolerance, ``tight``); exactly on its null space
    (``2 alpha I`` there). Warm-started from ``x0 = A / sqrt(w p)``.
    """

    exact = True

    def __init__(self, operator, settings, steps, loss, w, k=None):
        self.operator, self.settings, self.steps, self.loss, self.w = operator, settings, steps, loss, w
        self.rank = coupled_rank(int(operator.n), k) if k else 0  # (0: the per-class factors)
        self.tight = self.rank > 0

    def __call__(self, F, G, H, A, KA, b):
        operator, settings, steps, loss, w = self.operator, self.settings, self.steps, self.loss, self.w
        n, k = F.shape
        xp = xp_of(F)
        ridge = 2.0 * settings.alpha  # (never damped: these steps are taken with a ridge only)
        center = settings.fit_intercept
        P = loss.probabilities(F)
        root_p = xp.sqrt(clip_min(P, PROBABILITY_FLOOR))
        root_w = xp.sqrt(w)[:, None]
        root_h = root_w * root_p
        scale = xp.where(root_h > 0, 1.0 / xp.where(root_h > 0, root_h, 1.0), 0.0)  # 0 where w is

        def M(X):  # rows M_i x_i
            RX = root_p * X
            return root_w * (RX - P * xp.sum(RX, axis=1, keepdims=True))

        def Mt(V):  # rows M_i' v_i
            return root_w * root_p * (V - xp.sum(P * V, axis=1, keepdims=True))

        if center:
            S_pinv = intercept_pinv(w[:, None] * P, P)

            def project(X):  # X - B S^+ B'X, B e = rows M_i' e
                e = S_pinv @ xp.sum(M(X), axis=0)
                return X - Mt(xp.broadcast_to(e[None, :], X.shape))
        else:
            def project(X):
                return X

        if self.rank:
            inverse = coupled_preconditioner(operator, P, H, w, ridge, settings, steps, self.rank, M, Mt)
        else:
            inverse = preconditioner(operator, H, ridge, settings, steps)
        # On M's null space (each row's sqrt(p)) the system is exactly ridge * I, where the diagonal model's factors
        # see a confident row's curvature: they apply on M's range only, the null part is solved exactly.
        unit = root_p / xp.sqrt(xp.sum(root_p * root_p, axis=1, keepdims=True))
        weighs = xp.astype(root_w > 0, root_w.dtype)
        unit = weighs * unit

        def precondition(V):
            null = unit * xp.sum(unit * V, axis=1, keepdims=True)
            null = null + (1.0 - weighs) * V
            inside = inverse(V - null)
            inside = weighs * (inside - unit * xp.sum(unit * inside, axis=1, keepdims=True))
            return project(inside) + null / ridge

        def flat(X):  # one CG run over every class's coefficients: a column of n * k entries
            return xp.reshape(X, (-1, 1))

        def square(u):
            return xp.reshape(u, (n, k))

        tracker = ProductTracker()

        def apply_A(u):
            X = square(u)
            KX = operator.matvec(M(X))
            tracker.record(KX)
            return flat(project(Mt(KX)) + ridge * X)

        def on_iter(X, step):
            tracker.advance(step[0])
            return False

        X0, AX0 = project(A * scale), None
        # M X0 = A where A's rows sum to zero (and its columns, with an intercept): every iterate but a
        # user's coef_init. Then K M X0 = K A, known, and the warm start costs no product with K
        sizes = xp.sum(xp.abs(A))
        rows_ok = bool(xp.all(xp.abs(xp.sum(A, axis=1)) <= ZERO_SUM * sizes))
        if rows_ok and (not center or bool(xp.all(xp.abs(xp.sum(A, axis=0)) <= ZERO_SUM * sizes))):
            tracker.KX = copy_array(KA)
            AX0 = project(Mt(KA)) + ridge * X0
        rhs = project(Mt(F) - G * scale)
        u, n_inner, steps.status = block_pcg(
            apply_A, flat(rhs), lambda v: flat(precondition(square(v))), max_iter=steps.inner_cap,
            tol=steps.inner_tol, tol_from_start=steps.loose, tol_b=steps.exact_tol, on_iter=on_iter, x0=flat(X0),
            tracker=tracker, Ax0=None if AX0 is None else flat(AX0),
        )
        A_new, KA_new = M(square(u)), tracker.KX
        if center:  # the intercepts' optimum given K A_new: S b = sum_i (H_i (F_i - K A_new_i) - G_i)
            b_new = S_pinv @ xp.sum(loss.hessp(F, None, w, F - KA_new) - G, axis=0)
        else:
            b_new = zeros_as(F, k)
        return Step(A_new, b_new, KA_new, n_inner)
