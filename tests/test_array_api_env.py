"""Runs the array API tests in a subprocess with SCIPY_ARRAY_API=1.

scikit-learn's array API dispatch needs that variable set before scipy is
imported; setting it for the whole suite would change how scipy treats
every other test's inputs. The subprocess runs tests/test_array_api.py and
scikit-learn's own array API checks of the estimators (test_common.py),
on array-api-strict and, where installed, torch on the CPU.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_array_api_suite():
    pytest.importorskip("array_api_strict", reason="array-api-strict is a test dependency ([test] extra)")
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
        str(HERE / "test_array_api.py"), str(HERE / "test_common.py"), str(HERE.parent / "docs" / "gpu.rst"),
        "-k", "array_api or gpu.rst",
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200, cwd=HERE.parent)
    tail = "\n".join(result.stdout.splitlines()[-40:])
    assert result.returncode == 0, f"the array API tests failed:\n{tail}\n{result.stderr[-3000:]}"
    assert " passed" in tail and "failed" not in tail, tail
