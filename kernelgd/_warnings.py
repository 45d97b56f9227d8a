"""Warnings that point at the user's line, not at kernelgd's internals."""

import sys
import warnings

# Frames of these modules are skipped: scikit-learn's fit wrappers call kernelgd's fit.
_INTERNAL = ("kernelgd", "sklearn", "joblib", "threadpoolctl", "contextlib", "functools")


def warn(message, category=UserWarning):
    """``warnings.warn`` with the stacklevel of the first frame outside kernelgd (and scikit-learn).

    A warning raised deep in a solver then names the line that called
    ``fit`` (or ``GridSearchCV.fit``), as pandas' find_stack_level does.
    """
    frame, level = sys._getframe(1), 2  # level 1 is this function; 2 its caller
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _INTERNAL:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
