"""Newton's exact step on few centers, formed and factored densely.

On centers, solver "newton" solves each step by CG, and CG's residual test does not always bound
what is left of the objective: where K_mm is rank-deficient (a smooth kernel on one or two
features, a polynomial kernel) fits stopped above the optimum, and below the centers' ridge floor
a run of no iteration could pass for the optimum. Where the whole system is small (``features``
says where) it is formed exactly instead, in the coordinates ``A = Z B`` with
``Z = V (Lambda + jitter)^-1/2`` (K_mm's eigenvectors whose function values ``K_nm v`` are above
the product's rounding), in which the penalty is ``|B|^2``. With features ``Phi = K_nm Z`` the
Newton system of every class's coefficients and intercepts is

    [Phi 1]' H_cd [Phi 1] + 2 alpha I_B delta_cd,   (I_B: the identity on B, 0 on the intercepts),
    H_cd = w (p_c delta_cd - p_c p_d),

of ``(m + 1) k`` unknowns, solved by Cholesky (one system of ``m + 1`` unknowns per column where
the Hessian is diagonal). The softmax's invariance (one constant added to every intercept) is its
null space; a rank-one term along it picks the step without one.
"""

from typing import NamedTuple

import numpy as np

from .._array_api import (
    add_to_diagonal, concat, diagonal, eigh, solve_psd, take_columns, take_rows, to_numpy, xp_of, zeros_as,
)
from ._preconditioners import CENTERS_MIN_RIDGE, center_jitter

# Forming and factoring the system, per Newton step: at most this many flops (about 0.1 s on
# two cores) and unknowns; beyond, CG's products are the cheaper way to the step.
MAX_FLOPS = 4e9
MAX_UNKNOWNS = 2000
# K_mm is rank-deficient for CG where an eigenvalue is within this many jitters (1-2 features put most of
# them there; CG's steps then warned or stopped short)
RESOLVED_JITTERS = 1e6
# Below this many flops per step a dense step costs about what CG's would (a few ms) and is exact
TINY_FLOPS = 2e8
# A direction of K_mm whose function values K_nm v have a norm at most this many eps times the spectral
# bound of K_nm's rounding, sqrt(n m) max|K_nm|, is that rounding
RESOLVED = 1e2


class DenseFeatures(NamedTuple):
    """The coordinates ``A = Z B`` of dense steps, their features ``Phi = K_nm Z`` and ``Z'(K_mm + jitter I)``."""

    Z: object
    Phi: object
    penalty_map: object


def system_size(n, m, k, coupled):
    """``(unknowns of the largest system, flops to form the systems)`` per Newton step."""
    unknowns, blocks = ((m + 1) * k, k * (k + 1) / 2) if coupled else (m + 1, k)
    return unknowns, 2 * n * (m + 1) ** 2 * blocks


def tiny(n, k, coupled):
    """Whether the full model's dense system on n rows is formed for at most ``TINY_FLOPS``."""
    unknowns, flops = system_size(n, n, k, coupled)
    return unknowns <= MAX_UNKNOWNS and flops <= TINY_FLOPS


def features(operator, k, alpha, coupled, confirm=False):
    """``DenseFeatures`` where the steps on these centers are formed densely, else None.

    Coordinates ``A = Z B`` in which the penalty ``A'(K_mm + jitter I) A`` is ``|B|^2``, the features
    ``K_nm Z``, and the map of A to the penalty's gradient in B, in K_mm's namespace. Dense steps need
    ``alpha > 0`` and a small system (``MAX_UNKNOWNS``, ``MAX_FLOPS``), and are taken where CG's are not
    to be trusted: K_mm has an eigenvalue within ``RESOLVED_JITTERS`` jitters, alpha is below the
    centers' ridge floor, or the system costs at most ``TINY_FLOPS``. The full model (K itself, no
    jitter) takes them where it costs at most ``TINY_FLOPS`` and alpha is below that floor, or, with
    ``confirm``, at any alpha (the softmax's exact steps after its diagonal model's stop).
    """
    if not alpha > 0:
        return None
    unknowns, flops = system_size(operator.n, operator.m, k, coupled)
    if unknowns > MAX_UNKNOWNS or flops > MAX_FLOPS:
        return None
    if operator.symmetric:  # the full model: its own centers, its penalty A'K A (no jitter); dense steps
        xp = xp_of(operator.diag())  # only where tiny and alpha is below the ridge floor
        if flops > TINY_FLOPS or (not confirm and 2.0 * alpha >= CENTERS_MIN_RIDGE * float(xp.mean(operator.diag()))):
            return None
    K_nm = operator.columns(np.arange(operator.m))
    K_mm = K_nm if operator.symmetric else operator.center_matrix()
    jitter = 0.0 if operator.symmetric else center_jitter(operator, K_mm)
    xp = xp_of(K_mm)
    lam, V = eigh((K_mm + K_mm.T) / 2)
    floor = CENTERS_MIN_RIDGE * float(xp.mean(diagonal(K_mm)))
    trusted = float(lam[0]) >= RESOLVED_JITTERS * jitter and 2.0 * alpha >= floor
    if trusted and flops > TINY_FLOPS:
        return None
    # A direction v whose function values K_nm v are the product's rounding (K_mm's null space) is noise, which a
    # tiny alpha lets the steps chase; an eigenvalue at K_mm's own rounding is not (an rbf kernel's are real).
    KV = K_nm @ V
    size = to_numpy(xp.sqrt(xp.sum(KV * KV, axis=0)))
    # K_nm's rounding has a spectral norm of at most sqrt(n m) eps max|K_nm|: far less than its Frobenius norm
    # where every entry is large, and a real direction can lie between the two
    scale = float(np.sqrt(operator.n * operator.m)) * float(xp.max(xp.abs(K_nm)))
    rounding = RESOLVED * np.finfo(float).eps * scale
    keep = np.flatnonzero((size > rounding) & (to_numpy(lam) + float(jitter) > 0))
    root = xp.sqrt(take_rows(lam, keep) + float(jitter))
    V, KV = take_columns(V, keep), take_columns(KV, keep)
    return DenseFeatures(V / root, KV / root, root[:, None] * V.T)


def coordinates(dense, n, fit_intercept):
    """``Psi = [Phi 1]`` (``Phi`` without an intercept): the predictions' map from the dense coordinates."""
    Phi = dense.Phi
    return concat([Phi, zeros_as(Phi, (n, 1)) + 1.0], axis=1) if fit_intercept else Phi


def systems(Psi, F, w, alpha, r, fit_intercept, loss, shared=False):
    """The Newton system(s) at the predictions F: one ``(q, q)`` per column where the loss's Hessian
    is diagonal in F (one in all where ``shared``: the squared loss's), else one, the softmax's
    ``(q k, q k)`` of every class at once; ``r``: the coordinates B (the penalty's) among Psi's q."""
    ridge = zeros_as(F, (Psi.shape[1],))
    ridge[:r] = 2.0 * alpha  # the penalty |B|^2: curvature 2 alpha on B, none on the intercepts
    if loss.diagonal_hessian:
        H = loss.hessian_diagonal(F, w)
        return [add_to_diagonal(Psi.T @ (H[:, c:c + 1] * Psi), ridge) for c in range(1 if shared else F.shape[1])]
    return [_coupled_system(Psi, loss.probabilities(F), w, ridge, fit_intercept)]


def direction(dense, F, G, A, b, alpha, fit_intercept, loss, w):
    """The exact Newton step ``(D, e, K_nm D)`` of the objective at ``(A, b)``.

    ``dense`` is ``features``' ``(Z, Phi, Z'(K_mm + jitter I))``; ``G`` the loss's gradient in
    the predictions F (weights included), ``w`` the sample weights. A loss whose Hessian is
    diagonal in F (the binary logistic, the squared) has one system per column.
    """
    Z, Phi, penalty_map = dense
    xp = xp_of(F)
    n, k = F.shape
    r = Phi.shape[1]  # B's coordinates: K_mm's eigenvectors whose functions are above rounding
    Psi = coordinates(dense, n, fit_intercept)
    # the penalty |B|^2 = A'(K_mm + jitter I) A: gradient 2 alpha Z'(K_mm + jitter I) A
    g = Phi.T @ G + 2.0 * alpha * (penalty_map @ A)
    if fit_intercept:
        g = concat([g, xp.sum(G, axis=0)[None, :]], axis=0)
    if loss.diagonal_hessian:
        H = loss.hessian_diagonal(F, w)
        shared = bool(xp.all(H == H[:, :1]))  # the squared loss: one system for every column
        steps = [solve_psd(M, -(g if shared else g[:, c:c + 1]))
                 for c, M in enumerate(systems(Psi, F, w, alpha, r, fit_intercept, loss, shared))]
        step = steps[0] if shared else concat(steps, axis=1)
    else:  # g class by class, as the system's blocks
        M = systems(Psi, F, w, alpha, r, fit_intercept, loss)[0]
        step = xp.reshape(solve_psd(M, -xp.reshape(g.T, (-1, 1))), (k, Psi.shape[1])).T
    D = Z @ step[:r, :]
    e = step[r, :] if fit_intercept else zeros_as(F, (k,))
    return D, e, Phi @ step[:r, :]


def _coupled_system(Psi, P, w, ridge, fit_intercept):
    """The softmax's Newton system of every class at once, ``(q k, q k)``, from the blocks ``Psi' H_cd Psi``.

    The invariance (every intercept moved alike changes nothing) is its null space; a rank-one
    term along it makes the system definite without changing any step the gradient asks for.
    """
    xp = xp_of(P)
    q, k = Psi.shape[1], P.shape[1]
    WP = w[:, None] * P
    M = zeros_as(P, (q * k, q * k))
    for c in range(k):
        for d in range(c, k):
            h = (WP[:, c] if c == d else 0.0) - WP[:, c] * P[:, d]
            block = Psi.T @ (h[:, None] * Psi)
            M[c * q:(c + 1) * q, d * q:(d + 1) * q] = block
            M[d * q:(d + 1) * q, c * q:(c + 1) * q] = block.T
    M = add_to_diagonal(M, concat([ridge] * k))
    if fit_intercept:
        u = zeros_as(P, (q * k,))
        u[q - 1::q] = 1.0 / float(np.sqrt(k))
        scale = float(xp.mean(diagonal(M)[q - 1::q]))
        M = M + max(scale, float(np.finfo(float).tiny)) * (u[:, None] * u[None, :])
    return M
