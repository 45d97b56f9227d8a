"""The full model's Newton fits from a subsample's fit against from the intercept-only model.

    python benchmarks/bench_subsample_start.py --data-dir ../shared/data
    python benchmarks/bench_subsample_start.py --data-dir ../shared/data --sets letter --cs 4 --repeat 1 \\
        --out benchmarks/results/subsample_start_letter_c4.json

Solver "newton" starts a full model of at least ``SUBSAMPLE_MIN_ROWS``
weighted rows from the same objective's minimiser on a random eighth of
them. This script fits ``KernelGDClassifier(loss="logistic", alpha=1 / (2 C n))``
at sigma="scale", every other argument at its default, with that start and
with it switched off, round-robin ``--repeat`` times, and prints the median
fit time of each, the Newton steps and CG iterations (one product with K
each) of the full fit and the final objectives. Sets: mnist (the first 8,000
of MNIST's test images, pixels / 255), mnist-binary (the same, digits 0-4
against 5-9), letter (the first 16,000 rows, standardized). Writes
benchmarks/results/subsample_start.json.
"""

import argparse
import contextlib
import io
import re
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

CS = {"mnist": (1, 4), "mnist-binary": (1, 16), "letter": (1,)}


def load(name, data_dir):
    import datasets

    X, y = (datasets.load_letter if name == "letter" else datasets.load_mnist8k)(data_dir)[:2]
    if name == "mnist-binary":
        y = (y.astype(int) >= 5).astype(int)
    return X, y


def fit(X, y, C, subsample):
    from kernelgd import KernelGDClassifier
    from kernelgd._solvers.newton import _start as newton

    saved = newton.SUBSAMPLE_MIN_ROWS
    newton.SUBSAMPLE_MIN_ROWS = saved if subsample else np.inf
    out = io.StringIO()
    try:
        model = KernelGDClassifier(loss="logistic", alpha=1.0 / (2 * C * X.shape[0]), verbose=1, random_state=0)
        with contextlib.redirect_stdout(out):
            start = time.perf_counter()
            model.fit(X, y)
            elapsed = time.perf_counter() - start
    finally:
        newton.SUBSAMPLE_MIN_ROWS = saved
    inner = sum(int(v) for v in re.findall(r"cg iterations (\d+)", out.getvalue()))
    return {"fit_time": elapsed, "n_iter": int(model.n_iter_), "cg_iterations": inner,
            "objective": float(model.loss_curve_[-1])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="+", default=list(CS), choices=list(CS))
    parser.add_argument("--cs", nargs="+", type=float, default=None, help="C values (default: per set)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "subsample_start.json"))
    args = parser.parse_args(argv)
    rows = []
    for name in args.sets:
        X, y = load(name, args.data_dir)
        for C in args.cs or CS[name]:
            runs = {"subsample": [], "intercept": []}
            for _ in range(args.repeat):  # round-robin: a busy spell slows both alike
                for kind in runs:
                    runs[kind].append(fit(X, y, C, kind == "subsample"))
            row = {"set": name, "n": int(X.shape[0]), "C": C}
            for kind, results in runs.items():
                median = sorted(results, key=lambda r: r["fit_time"])[(len(results) - 1) // 2]
                row[kind] = {**median, "fit_times": [r["fit_time"] for r in results]}
            rows.append(row)
            s, i = row["subsample"], row["intercept"]
            print(f"{name:12s} C={C:<3g} subsample start {s['fit_time']:7.2f} s ({s['n_iter']} steps, "
                  f"{s['cg_iterations']} CG)  intercept-only {i['fit_time']:7.2f} s ({i['n_iter']} steps, "
                  f"{i['cg_iterations']} CG)  objective {s['objective']:.8g} / {i['objective']:.8g}", flush=True)
    table = [{"set": r["set"], "n": r["n"], "C": r["C"], "subsample": r["subsample"]["fit_time"],
              "subsample_steps": f"{r['subsample']['n_iter']} / {r['subsample']['cg_iterations']}",
              "intercept": r["intercept"]["fit_time"],
              "intercept_steps": f"{r['intercept']['n_iter']} / {r['intercept']['cg_iterations']}",
              "speedup": r["intercept"]["fit_time"] / r["subsample"]["fit_time"],
              "gap": r["subsample"]["objective"] - r["intercept"]["objective"]} for r in rows]
    columns = [("set", "set", None), ("n", "rows", "{:,}"), ("C", "C", "{:g}"),
               ("subsample", "subsample start (s)", "{:.2f}"), ("subsample_steps", "steps / CG", None),
               ("intercept", "intercept-only start (s)", "{:.2f}"), ("intercept_steps", "steps / CG", None),
               ("speedup", "intercept / subsample", "{:.2f}"), ("gap", "objective gap", "{:.1e}")]
    print(format_table(table, columns))
    path = write_json(args.out, {"machine": machine(), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
