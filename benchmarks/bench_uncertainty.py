"""Predictive uncertainty on the UCI regression sets: test log-likelihood and interval coverage.

    python benchmarks/bench_uncertainty.py --data-dir ../shared/data [--sets yacht energy]
        [--systems kernelgd-cv kernelgd gpr-ard] [--max-splits 20] [--large-n 200000] [--merge]

For every set in ``<data-dir>/uci`` and its standard train/test splits (20, or 5 for protein),
features and target are standardized on the training part, and each system's predictive
distribution ``N(mean, std^2)`` at the test rows is scored in the target's original units:
mean test log-likelihood (the metric of the dropout/Bayesian-deep-learning tables, here
against Gal and Ghahramani's updated dropout results), the share of test targets inside the
95% interval ``mean +- 1.96 std``, RMSE, and the time of the fit and of the std.

Systems: ``KernelGDRegressorCV()`` and ``KernelGDRegressor()`` with default arguments, and
scikit-learn's ``GaussianProcessRegressor`` with an ARD kernel ``C * RBF(per feature) + White``
(``normalize_y=True``, 2 optimizer restarts) where the training part has at most
``GPR_MAX_ROWS`` rows (its O(n^3) optimizer runs past an hour per set above). One fresh
process per (system, set).

``--large-n N``: a synthetic problem of N training rows (``datasets.make_synthetic``), where
``KernelGDRegressor()`` takes the centers model: the time of the fit, and of the std of
10,000 test points.

``--alone``: on the first split of each set in ``--sets`` and on ``make_friedman1`` (5,000
training rows, standardized), ``KernelGDRegressor()``'s std of the first ``ALONE_POINTS`` test
points, each predicted alone, against the same points' std among the first ``ALONE_BATCH``:
the exact model's variance for a few points may be the local one, never below the exact.
Writes benchmarks/results/uncertainty.json.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, run_worker, write_json  # noqa: E402
from bench_uci import SETS  # noqa: E402  (the eight UCI sets, in the same order)
from datasets import load_uci, make_synthetic  # noqa: E402

SYSTEMS = {
    "kernelgd-cv": "KernelGDRegressorCV()",
    "kernelgd": "KernelGDRegressor()",
    "gpr-ard": "GaussianProcessRegressor, ARD C*RBF+White",
}
GPR_MAX_ROWS = 1500
ALONE_POINTS = 20
ALONE_BATCH = 500
# Dropout's test log-likelihood (Gal and Ghahramani, updated table in their repository's README).
DROPOUT_LL = {
    "concrete": -2.94, "energy": -1.72, "kin8nm": 0.97, "naval-propulsion-plant": 3.92, "power-plant": -2.79,
    "protein-tertiary-structure": -2.87, "wine-quality-red": -0.92, "yacht": -1.38,
}


def make_model(name, d):
    if name == "kernelgd-cv":
        from kernelgd import KernelGDRegressorCV

        return KernelGDRegressorCV()
    if name == "kernelgd":
        from kernelgd import KernelGDRegressor

        return KernelGDRegressor()
    if name == "gpr-ard":
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

        kernel = ConstantKernel(1.0) * RBF(np.ones(d), (1e-2, 1e3)) + WhiteKernel(0.1, (1e-6, 1e1))
        return GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=2, random_state=0)
    raise ValueError(name)


def log_likelihood(y, mean, std):
    return -0.5 * np.log(2 * np.pi * std**2) - 0.5 * ((y - mean) / std) ** 2


def worker(name, data_dir, dataset, max_splits):
    lls, covers, rmses, fit_times, std_times = [], [], [], [], []
    for k, (X, y, X_te, y_te, y_std) in enumerate(load_uci(data_dir, dataset)):
        if k >= max_splits:
            break
        model = make_model(name, X.shape[1])
        start = time.perf_counter()
        model.fit(X, y)
        fit_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        mean, std = model.predict(X_te, return_std=True)
        std_times.append(time.perf_counter() - start)
        lls.append(float(np.mean(log_likelihood(y_te * y_std, mean * y_std, std * y_std))))
        covers.append(float(np.mean(np.abs(y_te - mean) <= 1.96 * std)))
        rmses.append(float(np.sqrt(np.mean((mean - y_te) ** 2)) * y_std))
    n_splits = sum(1 for _ in (Path(data_dir) / "uci" / dataset / "splits").glob("index_train_*.txt"))
    print(json.dumps({
        "n_train": int(X.shape[0]), "splits": f"{len(lls)}/{n_splits}",
        "ll_mean": float(np.mean(lls)), "ll_std": float(np.std(lls)), "coverage": float(np.mean(covers)),
        "rmse_mean": float(np.mean(rmses)), "fit_time": float(np.mean(fit_times)),
        "std_time": float(np.mean(std_times)), "ll_splits": lls,
    }))


def large_worker(n):
    from kernelgd import KernelGDRegressor

    X, y, X_te, y_te = make_synthetic(n, n_test=10_000)
    model = KernelGDRegressor()
    start = time.perf_counter()
    model.fit(X, y)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    mean, std = model.predict(X_te, return_std=True)
    std_time = time.perf_counter() - start
    print(json.dumps({
        "n_train": n, "n_centers": int(model.n_centers_), "fit_time": fit_time, "std_time": std_time,
        "coverage": float(np.mean(np.abs(y_te - mean) <= 1.96 * std)),
        "ll_mean": float(np.mean(log_likelihood(y_te, mean, std))),
    }))


def alone_worker(data_dir, dataset):
    from kernelgd import KernelGDRegressor

    if dataset == "friedman1":
        from sklearn.datasets import make_friedman1
        from sklearn.preprocessing import StandardScaler

        X, y = make_friedman1(7000, noise=1.0, random_state=0)
        X = StandardScaler().fit(X[:5000]).transform(X)
        y = (y - y[:5000].mean()) / y[:5000].std()
        X, y, X_te = X[:5000], y[:5000], X[5000:]
    else:
        X, y, X_te = next(iter(load_uci(data_dir, dataset)))[:3]
    model = KernelGDRegressor().fit(X, y)
    Z = X_te[:ALONE_BATCH]
    start = time.perf_counter()
    among = model.predict(Z, return_std=True)[1][:ALONE_POINTS]
    batch_time = time.perf_counter() - start
    start = time.perf_counter()
    alone = np.array([model.predict(Z[i : i + 1], return_std=True)[1][0] for i in range(ALONE_POINTS)])
    excess = alone / among - 1.0
    print(json.dumps({
        "n_train": int(X.shape[0]), "n_batch": int(Z.shape[0]), "max_excess": float(excess.max()),
        "min_excess": float(excess.min()), "median_excess": float(np.median(excess)),
        "alone_time": (time.perf_counter() - start) / ALONE_POINTS, "batch_time": batch_time,
    }))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="*", default=SETS)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--max-splits", type=int, default=20)
    parser.add_argument("--large-n", type=int, default=0)
    parser.add_argument("--alone", action="store_true", help="a point's std alone against among many")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--merge", action="store_true", help="keep the rows of other (set, system) pairs")
    parser.add_argument("--out", default=str(HERE / "results" / "uncertainty.json"))
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker and args.worker[0] == "large":
        return large_worker(int(args.worker[1]))
    if args.worker and args.worker[0] == "alone":
        return alone_worker(args.data_dir, args.worker[1])
    if args.worker:
        return worker(args.worker[0], args.data_dir, args.worker[1], int(args.worker[2]))

    out = Path(args.out)
    old = json.loads(out.read_text()) if (args.merge or args.alone) and out.exists() else {}  # --alone: its part
    rows, large, alone, here = [], old.get("large"), old.get("alone"), machine()
    if args.alone:
        alone = {"machine": here, "points": ALONE_POINTS, "batch": ALONE_BATCH, "rows": []}
        for dataset in args.sets + ["friedman1"]:
            result = run_worker(__file__, ["alone", dataset, "0", "--data-dir", args.data_dir], args.timeout)
            alone["rows"].append({"set": dataset, **result})
            print(f"  alone {dataset}: {result}", file=sys.stderr, flush=True)
        args.sets = []  # the other parts run where --alone is not given
    for dataset in args.sets:
        n_rows = sum(1 for _ in open(Path(args.data_dir) / "uci" / dataset / "data.txt"))
        for name in args.systems:
            row = {"set": dataset, "system": name, "description": SYSTEMS[name], "dropout_ll": DROPOUT_LL[dataset]}
            if name == "gpr-ard" and 0.9 * n_rows > GPR_MAX_ROWS:
                rows.append({**row, "status": f"skipped: n_train > {GPR_MAX_ROWS:,}"})
                continue
            result = run_worker(__file__, [name, dataset, str(args.max_splits), "--data-dir", args.data_dir],
                                args.timeout)
            rows.append({**row, **result, "machine": here})
            print(f"  {dataset} {name}: {result}", file=sys.stderr, flush=True)
    if args.large_n:
        large = {**run_worker(__file__, ["large", str(args.large_n), "0"], args.timeout), "machine": here}
        print(f"  large: {large}", file=sys.stderr, flush=True)
    done = {(r["set"], r["system"]) for r in rows}
    # each row keeps the machine it was measured on (merged rows: their file's)
    kept = [{"machine": old.get("machine"), **r} for r in old.get("rows", []) if (r["set"], r["system"]) not in done]
    rows = kept + rows
    rows.sort(key=lambda r: (SETS.index(r["set"]), list(SYSTEMS).index(r["system"])))
    print(format_table(table_rows(rows), COLUMNS))
    if large:
        print(f"large: {large}")
    if alone:
        print(format_table(alone["rows"], ALONE_COLUMNS))
    path = write_json(out, {"machine": here, "rows": rows, "large": large, "alone": alone})
    print(f"wrote {path}")


COLUMNS = [
    ("set", "set", None), ("n_train", "n_train", "{:,}"), ("description", "system", None),
    ("splits", "splits", None), ("ll", "test log-lik. (mean +- std)", None), ("dropout_ll", "dropout", "{:.2f}"),
    ("coverage", "95% coverage", "{:.3f}"), ("rmse_mean", "RMSE", "{:.4g}"),
    ("fit_time", "fit/split (s)", "{:.2f}"), ("std_time", "std/split (s)", "{:.2f}"), ("status", "status", None),
]

ALONE_COLUMNS = [
    ("set", "set", None), ("n_train", "n_train", "{:,}"), ("max_excess", "alone / among - 1 (max)", "{:.2%}"),
    ("median_excess", "(median)", "{:.2%}"), ("alone_time", "alone (s/point)", "{:.3f}"),
    ("batch_time", "batch (s)", "{:.2f}"), ("status", "status", None),
]


def table_rows(rows):
    out = []
    for row in rows:
        row = dict(row)
        if row.get("status") == "ok":
            row["ll"] = f"{row['ll_mean']:.3f} +- {row['ll_std']:.2f}"
        out.append(row)
    return out


if __name__ == "__main__":
    main()
