"""numpy on the CPU against torch (and CuPy) on a GPU: the same kernelgd fits, default arguments.

    python benchmarks/bench_gpu.py --data-dir ../shared/data                 # torch on CUDA where present
    python benchmarks/bench_gpu.py --data-dir ../shared/data --device cpu    # torch on the CPU (a check)
    python benchmarks/bench_gpu.py --problems synthetic --n-synthetic 20000  # no data folder
    python benchmarks/bench_gpu.py --problems higgs-squared higgs-logistic --dtype float32

Problems: California 16k (KernelGDRegressor(), the exact model), MNIST 10k
(first 8,000 / last 2,000 of MNIST's test images, KernelGDClassifier(loss=
"logistic")), letter (16,000 / 4,000, the same classifier), a synthetic
regression with n rows of 20 features fitted on m centers
(KernelGDRegressor(alpha=1e-6, n_centers=m); n = 10^6 and m = 10^4 by default),
and two HIGGS-sized synthetic problems of 28 features, 10^7 rows and 5x10^4
centers by default (--n-higgs, --higgs-centers): the same regressor, and a
binary KernelGDClassifier(loss="logistic", n_centers=m) on labels drawn from a
logistic model (not fitted on numpy: a CPU product over 10^7 x 5x10^4 entries
takes minutes). ``--dtype float32`` moves the inputs as float32; ``--compute-dtype float32``
sets the fits' ``options={"dtype": "float32"}`` (centers compute in float64
by default).

On CUDA, torch computes a recomputed rbf kernel's products with the fused
Triton kernel where Triton imports; "torch-blocks" is the same fit with the
generic blocks instead (not on the HIGGS-sized problems, where they take
many minutes). --systems keeps only the named systems.

Each (problem, system) fit runs in a fresh process with SCIPY_ARRAY_API=1,
after a warm-up fit on a few thousand of its rows (a device's first fit in a
process pays for its context and kernels); the fit reported is the second on
all the rows ("first fit" is the first, which still compiles kernels that the
warm-up did not need), but on the HIGGS-sized problems, fitted once. The data is moved to the device
before the clock starts and the device is synchronized before it stops. On
centers, one product ``K_nm V`` (V with one column per target) is then timed
alone, with K_nm recomputed, and reported as kernel entries per second. Prints
fit time, the test score and the time as a ratio to numpy's, names the
devices, and writes benchmarks/results/gpu.json (or --out).
"""

import argparse
import json
import os
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, run_worker, write_json  # noqa: E402

PROBLEMS = ["cal16k", "mnist", "letter", "synthetic", "higgs-squared", "higgs-logistic"]
HIGGS = ("higgs-squared", "higgs-logistic")
# Rows (and at most centers) of the warm-up fit.
WARM_UP_ROWS, WARM_UP_CENTERS = 2000, 200


def _load(problem, data_dir, n_synthetic):
    from datasets import load_cal16k, load_letter, load_mnist8k, make_logistic_synthetic, make_synthetic

    if problem == "higgs-squared":
        return make_synthetic(n_synthetic, n_test=10_000, d=28, seed=0)
    if problem == "higgs-logistic":
        return make_logistic_synthetic(n_synthetic, 2, n_test=10_000, d=28, seed=0)

    if problem == "cal16k":
        return load_cal16k(data_dir)
    if problem == "mnist":
        return load_mnist8k(data_dir)
    if problem == "letter":
        X_tr, y_tr, X_te, y_te = load_letter(data_dir)
        classes = np.unique(y_tr)  # integer labels: predictions stay on the device
        return X_tr, np.searchsorted(classes, y_tr), X_te, np.searchsorted(classes, y_te)
    return make_synthetic(n_synthetic, n_test=10_000, d=20, seed=0)


def _estimator(problem, n_centers):
    from kernelgd import KernelGDClassifier, KernelGDRegressor

    if problem in ("mnist", "letter"):
        return KernelGDClassifier(loss="logistic", random_state=0)
    if problem == "higgs-logistic":
        return KernelGDClassifier(loss="logistic", n_centers=n_centers, random_state=0)
    if problem in ("synthetic", "higgs-squared"):
        return KernelGDRegressor(kernel="rbf", alpha=1e-6, n_centers=n_centers, random_state=0)
    return KernelGDRegressor(random_state=0)


def _device_name(system, device):
    if system == "numpy":
        return machine()["cpu"]
    if device == "cpu":
        return "CPU (" + machine()["cpu"] + ")"
    if system == "torch":
        import torch

        return torch.cuda.get_device_name(0)
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


def _product_rate(model, X_d, sync):
    """Kernel entries per second of one product ``K_nm V`` with K_nm recomputed, and its time."""
    from kernelgd._array_api import xp_of
    from kernelgd._operator import KernelOperator

    xp = xp_of(X_d)
    C = model.X_fit_
    operator = KernelOperator(X_d, model._bound_kernel(), centers=C, store=False, dtype=str(X_d.dtype).split(".")[-1])
    V = xp.ones((C.shape[0], xp.reshape(model.dual_coef_, (C.shape[0], -1)).shape[1]), dtype=xp.float64, device=C.device)
    operator.matvec(V)  # its blocks' kernels, warm
    sync()
    start = time.perf_counter()
    operator.matvec(V)
    sync()
    seconds = time.perf_counter() - start
    return X_d.shape[0] * C.shape[0] / seconds, seconds


def worker(problem, system, device, data_dir, n_synthetic, n_centers, dtype="float64", compute="auto"):
    from sklearn import clone, config_context
    from sklearn.metrics import accuracy_score, log_loss, mean_squared_error

    X_tr, y_tr, X_te, y_te = _load(problem, data_dir, n_synthetic)
    X_tr, X_te = X_tr.astype(dtype), X_te.astype(dtype)
    model = _estimator(problem, n_centers)
    if compute != "auto":
        model.set_params(options={"dtype": compute})
    model.set_params(verbose=int(os.environ.get("KGD_BENCH_VERBOSE", "0")))
    sync = lambda: None  # noqa: E731
    if system == "torch-blocks":  # torch without the fused Triton product: the generic blocks
        import kernelgd._triton

        kernelgd._triton.ENABLED, system = False, "torch"
    if system == "numpy":
        to = lambda a: a  # noqa: E731
    elif system == "torch":
        import torch

        to = lambda a: torch.asarray(a, device=device)  # noqa: E731
        if device != "cpu":
            sync = torch.cuda.synchronize
    else:
        import cupy

        to = cupy.asarray
        sync = cupy.cuda.Device().synchronize
    X_d, y_d, X_te_d = to(X_tr), to(y_tr), to(X_te)
    sync()
    with config_context(array_api_dispatch=system != "numpy"):
        warm = clone(model)
        if getattr(warm, "n_centers", None) not in (None, "auto"):
            warm.set_params(n_centers=min(WARM_UP_CENTERS, warm.n_centers))
        warm.fit(X_d[:WARM_UP_ROWS], y_d[:WARM_UP_ROWS])
        sync()
        # the first full-size fit still compiles kernels the warm-up did not need (CuPy: 1.25 s on
        # California, then 0.3 s); the fit timed is the second, but on the HIGGS-sized problems (minutes)
        fit_times = []
        for _ in range(1 if problem in HIGGS else 2):
            start = time.perf_counter()
            clone(model).fit(X_d, y_d) if fit_times else model.fit(X_d, y_d)
            sync()
            fit_times.append(time.perf_counter() - start)
        first_fit_time, fit_time = fit_times[0], fit_times[-1]
        if problem in ("mnist", "letter", "higgs-logistic"):
            proba = model.predict_proba(X_te_d)
            proba = np.asarray(proba.cpu() if hasattr(proba, "cpu") else getattr(proba, "get", lambda: proba)())
            score = {"log_loss": float(log_loss(y_te, proba, labels=model.classes_)),
                     "accuracy": float(accuracy_score(y_te, model.classes_[proba.argmax(axis=1)]))}
        else:
            pred = model.predict(X_te_d)
            pred = np.asarray(pred.cpu() if hasattr(pred, "cpu") else getattr(pred, "get", lambda: pred)())
            score = {"mse": float(mean_squared_error(y_te, pred))}
        if getattr(model, "n_centers_", None):
            score["entries_per_s"], score["product_s"] = _product_rate(model, X_d, sync)
    print(json.dumps({"fit_time": fit_time, "first_fit_time": first_fit_time, "device_name": _device_name(system, device), "n_iter": int(model.n_iter_),
                      "solver": model.solver_, **score}))


def _systems(device, problem):
    systems = ["numpy"] if problem not in HIGGS or device == "cpu" else []
    try:
        import torch

        if device == "cpu" or torch.cuda.is_available():
            systems.append("torch")
        # the generic blocks beside the fused product, where Triton is there to fuse
        if device != "cpu" and problem not in HIGGS and torch.cuda.is_available() and find_spec("triton"):
            systems.append("torch-blocks")
    except ImportError:
        pass
    if device != "cpu":
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                systems.append("cupy")
        except Exception:  # noqa: BLE001 - no CuPy, or no device
            pass
    return systems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=8,
                        metavar=("PROBLEM", "SYSTEM", "DEVICE", "DATA_DIR", "N", "M", "DTYPE", "COMPUTE"))
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--problems", nargs="+", default=PROBLEMS, choices=PROBLEMS)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                        help="where torch computes; auto: cuda where available (else torch is left out)")
    parser.add_argument("--n-synthetic", type=int, default=1_000_000)
    parser.add_argument("--n-centers", type=int, default=10_000, help="centers of the synthetic problem")
    parser.add_argument("--n-higgs", type=int, default=10_000_000, help="training rows of the HIGGS-sized problems")
    parser.add_argument("--higgs-centers", type=int, default=50_000, help="centers of the HIGGS-sized problems")
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"], help="the inputs' dtype")
    parser.add_argument("--compute-dtype", default="auto", choices=["auto", "float64", "float32"],
                        help="the fits' options['dtype'] (auto: the estimators' default)")
    parser.add_argument("--systems", nargs="+", help="only these of numpy, torch, torch-blocks, cupy")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--verbose", action="store_true", help="the fits' progress (verbose=1), streamed with times")
    parser.add_argument("--out", default=str(HERE / "results" / "gpu.json"))
    args = parser.parse_args()
    if args.worker:
        problem, system, device, data_dir, n, m, dtype, compute = args.worker
        return worker(problem, system, device, data_dir, int(n), int(m), dtype, compute)

    device = "cuda" if args.device == "auto" else args.device
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    rows = []
    for problem in args.problems:
        base = None
        n, m = (args.n_higgs, args.higgs_centers) if problem in HIGGS else (args.n_synthetic, args.n_centers)
        for system in _systems(device, problem):
            if args.systems and system not in args.systems:
                continue
            dev = "cpu" if system == "numpy" else device
            result = run_worker(__file__, [problem, system, dev, args.data_dir, str(n), str(m), args.dtype,
                                                  args.compute_dtype],
                                args.timeout, env=dict(env, KGD_BENCH_VERBOSE=str(int(args.verbose))),
                                stream=args.verbose)
            row = {"problem": problem, "system": system, **result}
            if system == "numpy" and result["status"] == "ok":
                base = result["fit_time"]
            if base and result["status"] == "ok":
                row["vs_numpy"] = result["fit_time"] / base
            rows.append(row)
            print(format_table([row], COLUMNS).splitlines()[-1], flush=True)
    print()
    print(format_table(rows, COLUMNS))
    payload = {"machine": machine(), "device": device, "n_synthetic": args.n_synthetic,
               "n_centers": args.n_centers, "n_higgs": args.n_higgs, "higgs_centers": args.higgs_centers,
               "dtype": args.dtype, "compute_dtype": args.compute_dtype, "warm_up_rows": WARM_UP_ROWS, "rows": rows}
    print(f"\nwrote {write_json(args.out, payload)}")


COLUMNS = [
    ("problem", "problem", None), ("system", "system", None), ("device_name", "device", None),
    ("fit_time", "fit (s)", "{:.2f}"), ("first_fit_time", "first fit (s)", "{:.2f}"), ("vs_numpy", "time / numpy's", "{:.2f}"), ("n_iter", "iterations", None),
    ("mse", "test MSE", "{:.4f}"), ("log_loss", "log-loss", "{:.4f}"), ("accuracy", "accuracy", "{:.4f}"),
    ("entries_per_s", "kernel entries / s", "{:.3g}"), ("product_s", "one product (s)", "{:.3g}"),
    ("status", "status", None),
]


if __name__ == "__main__":
    main()
