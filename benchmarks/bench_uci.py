"""UCI regression sets on their standard splits: kernelgd against its peers.

    python benchmarks/bench_uci.py --data-dir ../shared/data

For every set in ``<data-dir>/uci`` and every standard train/test split (20,
or 5 for protein), features and target are standardized on the training part
and each system fits the same model: rbf kernel with sigma^2 = n_features
(kernelgd's sigma="scale" on standardized data) and ridge alpha = 1e-3 per
sample (KernelRidge alpha = 1e-3 * n_train). No hyperparameter is tuned: the
benchmark compares solvers on one model, not models. Reported: mean and
standard deviation of test RMSE in the target's original units, and mean fit
time per split. KernelRidge and SVR are skipped above 16,000 training rows
(a dense n x n solve is unsafe there on this machine). One fresh process per
(system, set) runs all its splits. Writes benchmarks/results/uci.json.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, measure_fit, run_worker, write_json  # noqa: E402
from datasets import load_uci  # noqa: E402

ALPHA = 1e-3
DENSE_MAX = 16000
SETS = [
    "yacht", "energy", "concrete", "wine-quality-red", "kin8nm", "power-plant",
    "naval-propulsion-plant", "protein-tertiary-structure",
]
SYSTEMS = {
    "kernelgd": "kernelgd, rbf, alpha=1e-3",
    "krr-1thread": "KernelRidge, 1 BLAS thread",
    "svr": "SVR (C=1, epsilon=0.1)",
    "nystroem-1000": "Nystroem(1000) + Ridge",
}


def make_model(name, n, d):
    gamma = 1.0 / d
    if name == "kernelgd":
        from kernelgd import KernelGDRegressor

        # protein's 41k x 41k float32 K is 6.3 GiB: let it be stored
        return KernelGDRegressor(kernel="rbf", alpha=ALPHA, random_state=0, options={"memory_budget": 8 << 30})
    if name == "krr-1thread":
        from sklearn.kernel_ridge import KernelRidge

        return KernelRidge(alpha=ALPHA * n, kernel="rbf", gamma=gamma)
    if name == "svr":
        from sklearn.svm import SVR

        return SVR(kernel="rbf", gamma=gamma, C=1.0, epsilon=0.1, cache_size=1000)
    if name == "nystroem-1000":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline

        return make_pipeline(
            Nystroem(kernel="rbf", gamma=gamma, n_components=min(1000, n), random_state=0),
            Ridge(alpha=ALPHA * n),
        )
    raise ValueError(name)


def worker(name, data_dir, dataset, max_splits):
    from threadpoolctl import threadpool_limits

    rmses, times, peaks = [], [], []
    for k, (X, y, X_te, y_te, y_std) in enumerate(load_uci(data_dir, dataset)):
        if k >= max_splits:
            break
        model = make_model(name, *X.shape)

        def fit():
            if name == "krr-1thread":
                with threadpool_limits(1):
                    return model.fit(X, y)
            return model.fit(X, y)

        _, stats = measure_fit(fit)
        rmses.append(float(np.sqrt(np.mean((model.predict(X_te) - y_te) ** 2))) * y_std)
        times.append(stats["fit_time"])
        peaks.append(stats["peak_mem_gib"])
    print(json.dumps({
        "n_train": int(X.shape[0]), "n_splits": len(rmses),
        "rmse_mean": float(np.mean(rmses)), "rmse_std": float(np.std(rmses)),
        "fit_time": float(np.mean(times)), "peak_mem_gib": float(np.max(peaks)),
    }))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="*", default=SETS)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--max-splits", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--out", default=str(HERE / "results" / "uci.json"))
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.data_dir, args.worker[1], int(args.worker[2]))
    if not (Path(args.data_dir) / "uci").exists():
        parser.error(f"no uci/ folder under --data-dir {args.data_dir}")

    rows = []
    for dataset in args.sets:
        n_rows = sum(1 for _ in open(Path(args.data_dir) / "uci" / dataset / "data.txt"))
        for name in args.systems:
            if name in ("krr-1thread", "svr") and 0.9 * n_rows > DENSE_MAX:
                rows.append({"set": dataset, "system": name, "description": SYSTEMS[name],
                             "status": f"skipped: n_train > {DENSE_MAX:,}"})
                continue
            result = run_worker(__file__, [name, dataset, str(args.max_splits), "--data-dir", args.data_dir], args.timeout)
            rows.append({"set": dataset, "system": name, "description": SYSTEMS[name], **result})
            print(f"  {dataset} {name}: {result}", file=sys.stderr, flush=True)
    for row in rows:
        if row.get("status") == "ok":
            row["rmse"] = f"{row['rmse_mean']:.4g} +- {row['rmse_std']:.2g}"
    columns = [
        ("set", "set", None), ("n_train", "n_train", "{:,}"), ("description", "system", None),
        ("rmse", "test RMSE (mean +- std)", None), ("fit_time", "fit time/split (s)", "{:.3f}"),
        ("peak_mem_gib", "peak mem (GiB)", "{:.2f}"), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    path = write_json(args.out, {"machine": machine(), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
