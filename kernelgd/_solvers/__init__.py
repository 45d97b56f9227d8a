"""Solvers: plain functions of (operator, targets, weights, settings).

Each solver module exposes ``solve(operator, Y, w, settings) -> SolverResult``
and is listed in :data:`SOLVERS`; the estimators choose one by name.
"""

from ._common import SolverResult, SolverSettings
from . import gd

SOLVERS = {"gd": gd.solve}

__all__ = ["SOLVERS", "SolverResult", "SolverSettings"]
