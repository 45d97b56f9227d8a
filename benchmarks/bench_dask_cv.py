"""The CV estimators' widths on joblib's Dask backend, against joblib's default threads.

    python benchmarks/bench_dask_cv.py [--workers 2] [--repeat 3]

``KernelGDRegressorCV()`` (leave-one-out) and ``KernelGDClassifierCV(loss="logistic")``
(5-fold, widths raced on threads) on synthetic sets of 1,000 and 400 rows (benchmarks/datasets.py),
each fitted with ``n_jobs=-1`` under joblib's default backend (threads in this process) and
under ``joblib.parallel_config(backend="dask")`` with a ``distributed.LocalCluster`` of
--workers single-threaded processes on the loopback. Prints fit time (median of --repeat),
the chosen width and ridge of each, and the tasks the cluster ran; writes
benchmarks/results/dask_cv.json.
"""

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402


def problems():
    from datasets import make_logistic_synthetic, make_synthetic

    X, y, _, _ = make_synthetic(1000, n_test=10)
    Xc, yc, _, _ = make_logistic_synthetic(400, 3, n_test=10)
    return {"regression (LOO)": (X, y), "logistic, 3 classes (5-fold)": (Xc, yc)}


def estimator(name):
    from kernelgd import KernelGDClassifierCV, KernelGDRegressorCV

    if name.startswith("regression"):
        return KernelGDRegressorCV(n_jobs=-1)
    return KernelGDClassifierCV(loss="logistic", n_jobs=-1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", default=str(HERE / "results" / "dask_cv.json"))
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster, get_task_stream
    from joblib import parallel_config

    warnings.simplefilter("ignore")
    rows = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        for name, (X, y) in problems().items():
            for backend in ("threads", "dask"):
                times, tasks = [], 0
                for _ in range(args.repeat):
                    model = estimator(name)
                    with get_task_stream() as stream:
                        start = time.perf_counter()
                        if backend == "dask":
                            with parallel_config(backend="dask"):
                                model.fit(X, y)
                        else:
                            model.fit(X, y)
                        times.append(time.perf_counter() - start)
                    tasks = len(stream.data)
                rows.append({"problem": name, "backend": backend, "fit_time": statistics.median(times),
                             "fit_times": times, "sigma": np.ravel(model.sigma_).tolist(), "alpha": float(model.alpha_),
                             "cluster_tasks": tasks})
                print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    write_json(args.out, {"machine": machine(), "workers": args.workers, "rows": rows})
    print(format_table(rows, [("problem", "problem", None), ("backend", "joblib backend", None),
                              ("fit_time", "fit (s)", "{:.2f}"), ("sigma", "sigma", None),
                              ("alpha", "alpha", "{:.3g}"), ("cluster_tasks", "tasks on the cluster", None)]))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
