"""Warnings that point at the user's line, not at kernelgd's internals."""

import contextvars
import sys
import warnings
from contextlib import contextmanager

# Frames of these modules are skipped: scikit-learn's fit wrappers call kernelgd's fit.
_INTERNAL = ("kernelgd", "sklearn", "joblib", "threadpoolctl", "contextlib", "functools")


# Where set (``held_back``), the list this context's warnings go to instead of the user: a context variable, so that a
# search's fits in other threads keep their own.
_HELD_BACK = contextvars.ContextVar("kernelgd_held_back_warnings", default=None)


def warn(message, category=UserWarning):
    """``warnings.warn`` with the stacklevel of the first frame outside kernelgd (and scikit-learn).

    A warning raised deep in a solver then names the line that called
    ``fit`` (or ``GridSearchCV.fit``), as pandas' find_stack_level does.
    Inside ``held_back`` it is kept in that context's list instead.
    """
    held = _HELD_BACK.get()
    if held is not None:
        held.append((category, message))
        return
    frame, level = sys._getframe(1), 2  # level 1 is this function; 2 its caller
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _INTERNAL:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


@contextmanager
def held_back():
    """Collect the warnings kernelgd raises in this context (``(category, message)`` pairs, in the yielded list)
    rather than show them: a search's probe fits, whose models the user never gets; the refit's warnings show."""
    held = []
    token = _HELD_BACK.set(held)
    try:
        yield held
    finally:
        _HELD_BACK.reset(token)


@contextmanager
def recorded():
    """``warnings.catch_warnings(record=True)`` with every warning shown, kernelgd's own included where an enclosing
    ``held_back`` would keep them: for fits whose warnings decide (a held-out fit that warned fails)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with held_back() as held:
            yield caught
        caught.extend(held)


@contextmanager
def labels_checked():
    """Inner fits (an output layer, a search's refit) leave scikit-learn's warning of more classes than half the
    rows to the fit's own check of the labels: the user is told once."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The number of unique classes", UserWarning)
        yield
