"""options["memory_budget"]: "auto" sizes it to the machine; bad values are clear errors."""

import numpy as np
import pytest

from kernelgd import KernelGDRegressor
from kernelgd import _operator
from kernelgd._base import resolve_options
from kernelgd._operator import MemoryBudgetError, check_budget, format_bytes

X = np.random.RandomState(0).normal(size=(60, 3))
y = X[:, 0]


def test_auto_is_a_share_of_the_available_memory(monkeypatch):
    monkeypatch.setattr(_operator, "available_memory", lambda: 8 << 30)
    assert resolve_options({})["memory_budget"] == 4 << 30
    monkeypatch.setattr(_operator, "available_memory", lambda: None)  # not readable: 2 GiB
    assert resolve_options({})["memory_budget"] == 2 << 30


def test_available_memory_reads_this_machine():
    free = _operator.available_memory()
    with open("/proc/meminfo") as fh:
        total = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1]) * 1024
    assert free is not None and 0 < free <= total


def test_cgroup_limit_is_respected(monkeypatch, tmp_path):
    files = {"/sys/fs/cgroup/memory.max": "1073741824\n", "/sys/fs/cgroup/memory.current": "268435456\n"}
    real_open = open

    def fake_open(path, *args, **kwargs):
        if path in files:
            target = tmp_path / path.replace("/", "_")
            target.write_text(files[path])
            return real_open(target, *args, **kwargs)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert _operator.available_memory() == (1 << 30) - (1 << 28)


@pytest.mark.parametrize("bad", [float("inf"), True, -1, 0, "lots", 2**70])
def test_bad_budgets_are_clear_errors(bad):
    with pytest.raises(ValueError, match="memory_budget"):
        KernelGDRegressor(options={"memory_budget": bad}).fit(X, y)


def test_budget_messages_use_readable_units():
    assert format_bytes(300) == "300 bytes"
    assert format_bytes(3 << 20) == "3 MiB"
    with pytest.raises(MemoryBudgetError, match="needs 1 KiB, more than the memory budget of 512 bytes"):
        check_budget(1024, "this", 512, "")


def test_fit_with_the_auto_budget():
    model = KernelGDRegressor(alpha=1e-3).fit(X, y)
    assert model.score(X, y) > 0.9
