"""Solvers: plain functions of (operator, targets, weights, settings).

Each solver module exposes ``solve(operator, Y, w, settings) -> SolverResult``
and says what it supports: ``LOSSES`` (loss names) and ``MODELS`` ("full",
all training points as centers; "centers", a model on n_centers). It is
listed in :data:`SOLVERS`; the estimators choose one by name, and
:func:`choose_solver` resolves ``"auto"``. The pieces they share are
objects: the objective (``_objective``), block CG and randomly pivoted
Cholesky (``_krylov``), the Nystroem and FALKON preconditioners
(``_preconditioners``).
"""

from . import cg, eigenpro, gd, newton
from ._common import NonPSDKernelWarning, SolverResult, SolverSettings, baseline
from .._array_api import xp_of, zeros_as
from .._warnings import warn

_MODULES = {"gd": gd, "cg": cg, "eigenpro": eigenpro, "newton": newton}
SOLVERS = {name: module.solve for name, module in _MODULES.items()}

# Solvers that handle a model restricted to centers (n_centers).
CENTER_SOLVERS = {name for name, module in _MODULES.items() if "centers" in module.MODELS}
# Solvers that minimise any smooth loss, not only the squared one.
SMOOTH_LOSS_SOLVERS = {name for name, module in _MODULES.items() if "logistic" in module.LOSSES}


def choose_solver(*, alpha, psd, centers, loss=None):
    """The fastest solver that fits the problem, for solver="auto": conjugate gradient for a PSD system (with a
    ridge; ``alpha="auto"``'s is positive), EigenPro without ridge (early stopping regularises), Newton steps
    solved by CG for other smooth losses, plain gradient descent for indefinite kernels.
    """
    if not psd:
        return "gd"
    if loss is not None and loss.name != "squared":
        return "newton"
    if centers or alpha == "auto" or alpha > 0:
        return "cg"
    return "eigenpro"


def run_solver(name, operator, Y, w, settings):
    """Run solver ``name``; a kernel that is zero on the data needs no solver.

    For a PSD kernel, ``k(x, x) = 0`` on every weighted point means
    ``k(x, .) = 0`` there, so every f is constant on the data and the
    intercept-only model is the exact minimiser.
    """
    xp = xp_of(Y)
    diag = operator.diag()[w > 0]
    if settings.psd and bool(xp.any(diag < 0)):
        warn(
            f"The {settings.kernel_name} kernel is declared positive semi-definite but "
            f"k(x, x) < 0 on {int(xp.sum(xp.astype(diag < 0, xp.int64)))} training points, so it is not; "
            "the fit may stop early. Check the kernel function.",
            NonPSDKernelWarning,
        )
    elif settings.psd and not bool(xp.any(diag > 0)):
        b, value = baseline(Y, w, settings.fit_intercept, settings.loss)
        return SolverResult(zeros_as(Y, (operator.m, Y.shape[1])), b, 0, [value], None, True)
    return SOLVERS[name](operator, Y, w, settings)


__all__ = ["SOLVERS", "CENTER_SOLVERS", "SMOOTH_LOSS_SOLVERS", "SolverResult", "SolverSettings", "choose_solver", "run_solver"]
