"""Newton's exact step on few, rank-deficient centers, formed and factored densely.

On centers, solver "newton" solves each step by CG (the softmax's over every
class at once, ``newton._direction_centers_coupled``). Where the centers'
kernel matrix K_mm is rank-deficient (a smooth kernel on one or two
features, a polynomial kernel) CG's residual test says little about the
objective: softmax fits stopped 3e-4 to 7e-3 above the optimum with a
no-descent warning, binary ones 5e-6 to 2.6e-4 (some silently).
Where K_mm is so and the whole system is small, it is formed exactly: in the
coordinates ``A = Z B`` with ``Z = V (Lambda + jitter)^-1/2`` (K_mm's
eigenvectors and eigenvalues, the jitter the solver's penalty carries,
``center_factors``'), in which that penalty is ``|B|^2``, with features
``Phi = K_nm Z``, the Newton system of the coefficients and intercepts of
every class is

    [Phi 1]' H_cd [Phi 1] + 2 alpha I_B delta_cd,   (I_B: the identity on B, 0 on the intercepts),
    H_cd = w (p_c delta_cd - p_c p_d),

of ``(m + 1) k`` unknowns, formed for ``n (m + 1)^2 k (k + 1)`` flops and
solved by Cholesky (where the Hessian is diagonal, the binary logistic
loss's or the squared loss's, one system of ``m + 1`` unknowns per column).
The softmax's invariance (one constant added to every intercept) is its
null space; the gradient has no component there, and a rank-one term along
it picks the step without one.
"""

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, eigh, lstsq

# Forming and factoring the system, per Newton step: at most this many flops (about 0.1 s on
# two cores) and unknowns; beyond, CG's products are the cheaper way to the step.
MAX_FLOPS = 4e9
MAX_UNKNOWNS = 2000
# K_mm is rank-deficient for CG where an eigenvalue is within this many jitters: 1-2 features
# (rbf, 100-300 centers) put most of them below 1e3 jitters, and CG's steps warned in 6 of 10
# such fits; at 4-10 features none was within 1e6 and CG's steps reached the optimum
RESOLVED_JITTERS = 1e6


def applies(operator, k, alpha, coupled):
    """Whether the steps on these centers are formed densely (numpy, alpha > 0, small): the
    softmax's ``coupled`` system of every class, or one system per column where the Hessian is diagonal."""
    if operator.symmetric or not alpha > 0 or not isinstance(operator.diag(), np.ndarray):
        return False
    m, n = operator.m, operator.n
    unknowns, blocks = ((m + 1) * k, k * (k + 1) / 2) if coupled else (m + 1, k)
    return unknowns <= MAX_UNKNOWNS and 2 * n * (m + 1) ** 2 * blocks <= MAX_FLOPS


def features(operator, K_mm, jitter):
    """``(Z, Phi, Z'(K_mm + jitter I))``: coordinates ``A = Z B`` in which the solver's penalty
    ``A'(K_mm + jitter I) A`` (``center_factors``' jitter) is ``|B|^2``, the features ``K_nm Z``, and
    the map of coefficients A to the penalty's gradient in B. None where K_mm is well resolved (no
    eigenvalue within ``RESOLVED_JITTERS`` jitters): CG's steps are the cheaper there, and exact."""
    lam, V = eigh((K_mm + K_mm.T) / 2)
    if lam[0] >= RESOLVED_JITTERS * jitter:
        return None
    root = np.sqrt(np.maximum(lam, 0.0) + jitter)
    return V / root, operator.columns(np.arange(operator.m)) @ (V / root), root[:, None] * V.T


def direction(dense, F, G, A, b, alpha, fit_intercept, loss, w):
    """The exact Newton step ``(D, e, K_nm D)`` of the objective at ``(A, b)``.

    ``dense`` is ``features``' ``(Z, Phi, Z'(K_mm + jitter I))``; ``G`` the loss's gradient in
    the predictions F (weights included), ``w`` the sample weights. A loss whose Hessian is
    diagonal in F (the binary logistic, the squared) has one system per column.
    """
    Z, Phi, penalty_map = dense
    n, k = F.shape
    r = Phi.shape[1]  # the coefficients' coordinates B, one per center
    Psi = np.hstack([Phi, np.ones((n, 1))]) if fit_intercept else Phi
    q = Psi.shape[1]
    # the penalty |B|^2 = A'(K_mm + jitter I) A: curvature 2 alpha on B, gradient 2 alpha Z'(K_mm + jitter I) A
    ridge = np.zeros(q)
    ridge[:r] = 2.0 * alpha
    g = np.empty((q, k))
    g[:r] = Phi.T @ G + 2.0 * alpha * (penalty_map @ A)
    if fit_intercept:
        g[r] = G.sum(axis=0)
    if loss.diagonal_hessian:
        H = loss.hessian_diagonal(F, w)
        step = np.empty((q, k))
        for c in range(k):
            M = Psi.T @ (H[:, c:c + 1] * Psi)
            M[np.diag_indices_from(M)] += ridge
            step[:, c] = _solve(M, -g[:, c])
    else:
        step = _coupled_step(Psi, loss.probabilities(F), w, ridge, g, fit_intercept)
    D = Z @ step[:r]
    e = step[r] if fit_intercept else np.zeros(k)
    return D, e, Phi @ step[:r]


def _coupled_step(Psi, P, w, ridge, g, fit_intercept):
    """The softmax's Newton step of every class at once, ``(q, k)``, from the blocks ``Psi' H_cd Psi``."""
    q, k = g.shape
    WP = w[:, None] * P
    M = np.empty((q * k, q * k))
    for c in range(k):
        for d in range(c, k):
            h = (WP[:, c] if c == d else 0.0) - WP[:, c] * P[:, d]
            block = Psi.T @ (h[:, None] * Psi)
            M[c * q:(c + 1) * q, d * q:(d + 1) * q] = block
            M[d * q:(d + 1) * q, c * q:(c + 1) * q] = block.T
    M[np.diag_indices_from(M)] += np.tile(ridge, k)
    if fit_intercept:  # the invariance: every intercept moved alike changes nothing
        u = np.zeros(q * k)
        u[q - 1::q] = 1.0 / np.sqrt(k)
        scale = float(np.mean(np.diag(M)[q - 1::q]))
        M += max(scale, np.finfo(float).tiny) * np.outer(u, u)
    return _solve(M, -g.T.ravel()).reshape(k, q).T  # g class by class, as M's blocks


def _solve(M, v):
    """``M^-1 v`` by Cholesky; a least-squares solution where M is singular beyond the invariance
    (a class no row gives a probability has no intercept curvature)."""
    try:
        return cho_solve(cho_factor(M, lower=False, check_finite=False), v, check_finite=False)
    except LinAlgError:
        return lstsq(M, v, cond=np.finfo(float).eps * M.shape[0], check_finite=False)[0]
