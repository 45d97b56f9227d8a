"""`python -m kernelgd` runs and prints its table."""

import subprocess
import sys


def test_demo_runs_and_prints_table():
    done = subprocess.run(
        [sys.executable, "-m", "kernelgd"], capture_output=True, text=True, check=True, timeout=600
    )
    out = done.stdout
    assert "Warning" not in done.stderr  # the defaults fit without a warning
    for name in ("KernelGDRegressor", "KernelGDClassifier", "KernelRidge", "SVC", "Ridge"):
        assert name in out
    rows = [ln for ln in out.splitlines() if "KernelGD" in ln]
    assert len(rows) == 3
    # kernelgd's test scores are real numbers in a sane range
    for ln in rows:
        score = float(ln.split()[-2])
        assert 0.2 < score <= 1.0
