"""Every test, doctest and docs page starts from the same global NumPy random state.

An estimator left at ``random_state=None`` draws from that state, so without a fixed start a test's
draws would depend on the tests that ran before it (and on their order).
"""

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fixed_global_random_state():
    state = np.random.get_state()
    np.random.seed(0)
    yield
    np.random.set_state(state)
