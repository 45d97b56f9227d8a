"""Solvers: plain functions of (operator, targets, weights, settings).

Each solver module exposes ``solve(operator, Y, w, settings) -> SolverResult``
and is listed in :data:`SOLVERS`; the estimators choose one by name, and
:func:`choose_solver` resolves ``"auto"``.
"""

from . import cg, eigenpro, gd
from ._common import SolverResult, SolverSettings

SOLVERS = {"gd": gd.solve, "cg": cg.solve, "eigenpro": eigenpro.solve}

# Solvers that handle a model restricted to centers (n_centers).
CENTER_SOLVERS = {"cg"}


def choose_solver(*, alpha, psd, centers):
    """The fastest solver that fits the problem, for solver="auto".

    Conjugate gradient needs a positive semi-definite system and converges
    fastest; without ridge it is EigenPro, which early stopping regularises;
    indefinite kernels fall back to plain gradient descent.
    """
    if not psd:
        return "gd"
    if centers or alpha > 0:
        return "cg"
    return "eigenpro"


__all__ = ["SOLVERS", "CENTER_SOLVERS", "SolverResult", "SolverSettings", "choose_solver"]
