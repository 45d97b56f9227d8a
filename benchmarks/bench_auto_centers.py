"""``n_centers="auto"`` beyond the exact model's memory: centers against Nystroem(2000) + RidgeCV.

    python benchmarks/bench_auto_centers.py                      # 100,000 and 200,000 rows
    python benchmarks/bench_auto_centers.py --sizes 100000 --centers 1000 2000 4000

Where the float32 kernel matrix does not fit the memory budget, the squared
loss's default fits ``max(4000, 2 sqrt(n))`` random centers. This script
fits, on the smooth 8-feature problem of ``datasets.make_synthetic`` (5,000
test rows), in one run: ``KernelGDRegressor()`` (the default), the same with
fixed counts of centers (``--centers``), and the model a user would build by
hand, ``Nystroem(n_components=2000)`` + ``RidgeCV()``; each after
StandardScaler. The table gives test RMSE and fit seconds, with ratios to
Nystroem's; it is written to benchmarks/results/auto_centers.json.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402
from datasets import make_synthetic  # noqa: E402

NYSTROEM = "Nystroem(2000) + RidgeCV()"


def systems(centers):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from kernelgd import KernelGDRegressor

    out = {"KernelGDRegressor()": lambda: make_pipeline(StandardScaler(), KernelGDRegressor())}
    for m in centers:
        out[f"KernelGDRegressor(n_centers={m})"] = lambda m=m: make_pipeline(
            StandardScaler(), KernelGDRegressor(n_centers=m))
    out[NYSTROEM] = lambda: make_pipeline(StandardScaler(), Nystroem(n_components=2000, random_state=0), RidgeCV())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000], help="training rows")
    parser.add_argument("--centers", type=int, nargs="*", default=[1000, 2000], help="fixed counts fitted too")
    parser.add_argument("--out", default=str(HERE / "results" / "auto_centers.json"))
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        X_tr, y_tr, X_te, y_te = make_synthetic(n)
        for name, make in systems(args.centers).items():
            model = make()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.perf_counter()
                model.fit(X_tr, y_tr)
                fit_s = time.perf_counter() - start
            row = {"n_train": n, "system": name, "fit_s": fit_s,
                   "rmse": float(np.sqrt(np.mean((model.predict(X_te) - y_te) ** 2))),
                   "warnings": sum(not issubclass(w.category, (DeprecationWarning, FutureWarning)) for w in caught)}
            if hasattr(model[-1], "n_centers_"):
                row["n_centers"] = int(model[-1].n_centers_)
            rows.append(row)
            print(row, flush=True)
    for row in rows:
        peer = next(r for r in rows if r["n_train"] == row["n_train"] and r["system"] == NYSTROEM)
        row["rmse_ratio"], row["time_ratio"] = row["rmse"] / peer["rmse"], row["fit_s"] / peer["fit_s"]
    print(format_table(rows, [
        ("system", "system", None), ("n_train", "rows", "{:,}"), ("n_centers", "centers", "{:,}"),
        ("rmse", "test RMSE", "{:.4f}"), ("rmse_ratio", "RMSE / Nystroem's", "{:.3f}"),
        ("fit_s", "fit s", "{:.1f}"), ("time_ratio", "time / Nystroem's", "{:.2f}"), ("warnings", "warnings", None),
    ]))
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
