"""n-sweep: fit time, peak memory and test error from 1,000 to 250,000 rows.

    python benchmarks/bench_sweep.py

A synthetic smooth regression problem (8 features, noise 0.1; see
datasets.make_synthetic), rbf kernel with sigma^2 = 8, ridge alpha = 1e-6.
Each (system, n) fits in a fresh process; systems are skipped above the size
where they stop being sensible on a 2-core, 24 GiB machine (KernelRidge's
dense solve beyond 16,000 rows; the full kernelgd model beyond 32,000, whose
streamed K then costs minutes per pass). Writes benchmarks/results/sweep.json.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import (  # noqa: E402
    fit_recording_convergence,
    format_table,
    machine,
    measure_fit,
    run_repeated,
    write_json,
)
from datasets import make_synthetic  # noqa: E402

SIGMA2, ALPHA = 8.0, 1e-6
SIZES = [1000, 4000, 16000, 64000, 250000]
# system -> (description, largest n it runs at)
SYSTEMS = {
    "kernelgd": ("kernelgd, exact model (all points as centers)", 32000),
    "kernelgd-centers-2000": ("kernelgd n_centers=2000", 10**9),
    "krr-1thread": ("scikit-learn KernelRidge, 1 BLAS thread", 16000),
    "nystroem-2000": ("Nystroem(2000) + Ridge", 10**9),
}


def make_fit(name, n, X, y, seed=0):
    if name.startswith("kernelgd"):
        from kernelgd import KernelGDRegressor

        params = dict(kernel="rbf", sigma=np.sqrt(SIGMA2), alpha=ALPHA, random_state=seed)
        if name == "kernelgd-centers-2000":
            # the n x 2000 float64 K_nm (3.7 GiB at 250,000 rows) is stored
            # within the default budget, half the available memory
            params.update(n_centers=2000)
        model = KernelGDRegressor(**params)

        def fit():
            fit.info = fit_recording_convergence(model, X, y)
            return model.predict
        return fit
    if name == "krr-1thread":
        from sklearn.kernel_ridge import KernelRidge
        from threadpoolctl import threadpool_limits

        model = KernelRidge(alpha=ALPHA * n, kernel="rbf", gamma=1 / SIGMA2)

        def fit():
            with threadpool_limits(1):
                model.fit(X, y)
            return model.predict
        return fit
    if name == "nystroem-2000":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline

        model = make_pipeline(
            Nystroem(kernel="rbf", gamma=1 / SIGMA2, n_components=2000, random_state=seed),
            Ridge(alpha=ALPHA * n),
        )
        return lambda: model.fit(X, y).predict
    raise ValueError(name)


def worker(name, n, seed=0):
    X, y, X_test, y_test = make_synthetic(n)
    fit = make_fit(name, n, X, y, seed)
    predict, stats = measure_fit(fit)
    stats.update(getattr(fit, "info", {}))
    stats["test_rmse"] = float(np.sqrt(np.mean((predict(X_test) - y_test) ** 2)))
    print(json.dumps(stats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", type=int, default=SIZES)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", default=str(HERE / "results" / "sweep.json"))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0],
                        help="random_state of the centers / Nystroem components; several give a mean per system")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))

    rows = []
    for n in args.sizes:
        for name in args.systems:
            description, limit = SYSTEMS[name]
            if n > limit:
                continue
            for seed in args.seeds:
                result = run_repeated(__file__, [name, str(n), str(seed)], args.timeout, args.repeat)
                rows.append({"n": n, "system": name, "description": description, "seed": seed, **result})
                print(f"  n={n} {name} seed {seed}: {result}", file=sys.stderr, flush=True)
    columns = [
        ("n", "n", "{:,}"), ("description", "system", None), ("fit_time", "fit time (s)", "{:.2f}"),
        ("peak_mem_gib", "peak mem (GiB)", "{:.2f}"), ("test_rmse", "test RMSE", "{:.4f}"),
        ("n_iter", "iterations", None), ("converged", "converged", None), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    means = []
    if len(args.seeds) > 1:  # centers are random: compare systems by their mean over seeds
        for key in dict.fromkeys((r["n"], r["system"]) for r in rows):
            runs = [r for r in rows if (r["n"], r["system"]) == key and r.get("status") == "ok"]
            if runs:
                means.append({"n": key[0], "system": key[1], "seeds": len(runs),
                              "mean_test_rmse": float(np.mean([r["test_rmse"] for r in runs])),
                              "std_test_rmse": float(np.std([r["test_rmse"] for r in runs])),
                              "mean_fit_time": float(np.mean([r["fit_time"] for r in runs]))})
        print(format_table(means, [("n", "n", "{:,}"), ("system", "system", None), ("seeds", "seeds", None),
                                   ("mean_test_rmse", "mean test RMSE", "{:.4f}"),
                                   ("std_test_rmse", "std", "{:.4f}"), ("mean_fit_time", "mean fit (s)", "{:.1f}")]))
    path = write_json(args.out, {"machine": machine(), "rows": rows, "seed_means": means})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
