"""Shared benchmark machinery: one fresh worker process per (system, problem).

Each fit runs in its own interpreter (``script --worker ...``), so every
system starts equally cold, a crash (OpenBLAS's segfault in multithreaded
LAPACK) is recorded instead of ending the run, and peak memory is the
process's own high-water mark above its resident size before the fit.
"""

import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

GiB = 1 << 30


def _status_kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def measure_fit(fit):
    """Run ``fit()``; return its wall time and peak extra resident memory."""
    rss_before = _status_kib("VmRSS")
    try:  # reset the high-water mark to the current RSS (Linux >= 4.0)
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    start = time.perf_counter()
    result = fit()
    fit_time = time.perf_counter() - start
    peak = (_status_kib("VmHWM") - rss_before) * 1024
    return result, {"fit_time": fit_time, "peak_mem_gib": max(peak, 0) / GiB}


def fit_recording_convergence(model, X, y):
    """``model.fit(X, y)``; returns ``{"n_iter", "converged"}`` (no ConvergenceWarning)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    return {
        "n_iter": int(model.n_iter_),
        "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
    }


def run_repeated(script, args, timeout, repeat=3, slow=20.0):
    """``run_worker`` up to ``repeat`` times; the run with the median fit time.

    Systems slower than ``slow`` seconds run once. Returns the chosen run
    with ``fit_times`` listing every run.
    """
    runs = []
    for _ in range(repeat):
        result = run_worker(script, args, timeout)
        runs.append(result)
        if result["status"] != "ok" or result["fit_time"] > slow:
            break
    ok = sorted((r for r in runs if r["status"] == "ok"), key=lambda r: r["fit_time"])
    if not ok:
        return runs[-1]
    chosen = dict(ok[len(ok) // 2])
    chosen["fit_times"] = [r["fit_time"] for r in runs if r["status"] == "ok"]
    return chosen


def run_worker(script, args, timeout, env=None, cwd=None, stream=False):
    """Run ``python script --worker *args`` (in ``env`` and ``cwd`` where given) and parse the JSON line it prints.

    ``stream=True`` echoes the worker's output to stderr as it comes, each line with the seconds since the start
    (a long fit's progress stays readable when it runs past ``timeout``).
    """
    cmd = [sys.executable, str(script), "--worker", *args]
    if stream:
        return _streamed(cmd, timeout, env, cwd)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout} s"}
    if proc.returncode < 0:
        return {"status": f"crashed (signal {-proc.returncode})"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return {"status": f"error: {tail[0][:120]}"}
    return {"status": "ok", **json.loads(proc.stdout.strip().splitlines()[-1])}


def _streamed(cmd, timeout, env, cwd):
    start, last = time.perf_counter(), ""
    env = dict(env if env is not None else os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    for line in proc.stdout:
        print(f"[{time.perf_counter() - start:8.1f} s] {line.rstrip()}", file=sys.stderr, flush=True)
        last = line if line.strip() else last
    proc.wait()
    timer.cancel()
    if time.perf_counter() - start >= timeout:
        return {"status": f"timeout after {timeout} s"}
    if proc.returncode != 0:
        return {"status": f"error (exit {proc.returncode}): {last.strip()[:120]}"}
    return {"status": "ok", **json.loads(last)}


def machine():
    """A description of the machine and library versions."""
    import numpy
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    import kernelgd

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from kernelgd._operator import n_threads

    return {
        "cpu": cpu,
        "cores": n_threads(),
        "memory_gib": round(
            int(Path("/proc/meminfo").read_text().split()[1]) / (1 << 20), 1
        ) if Path("/proc/meminfo").exists() else None,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "kernelgd": kernelgd.__version__,
        "blas": sorted({f"{i['internal_api']} {i.get('version')} x{i['num_threads']}" for i in threadpool_info()}),
    }


def format_table(rows, columns):
    """Rows (dicts) as a plain-text table; columns: (key, header, format)."""
    cells = [[h for _, h, _ in columns]]
    for row in rows:
        line = []
        for key, _, fmt in columns:
            value = row.get(key)
            line.append("-" if value is None else (fmt.format(value) if fmt else str(value)))
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    out = []
    for k, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def write_json(path, payload):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=float))
    return path


def load_sklearn_extra_eigenpro():
    """scikit-learn-extra's EigenProRegressor, or None.

    Its package __init__ imports compiled modules built against numpy 1,
    which fail under numpy 2; the EigenPro module itself is pure Python,
    so it is loaded from its file, with its call of scipy's eigh translated
    from the removed ``eigvals=`` to ``subset_by_index=`` (same algorithm).
    """
    import importlib.util

    spec = importlib.util.find_spec("sklearn_extra")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "kernel_methods" / "_eigenpro.py"
    if not path.exists():
        return None
    module_spec = importlib.util.spec_from_file_location("_sklearn_extra_eigenpro", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)

    def eigh(a, *args, eigvals=None, **kwargs):  # scipy removed eigvals= in 1.14
        if eigvals is not None:
            kwargs["subset_by_index"] = eigvals
        return scipy.linalg.eigh(a, *args, **kwargs)

    import scipy.linalg

    module.eigh = eigh
    return module.EigenProRegressor
