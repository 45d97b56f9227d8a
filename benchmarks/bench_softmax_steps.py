"""The full model's softmax Newton steps: exact (coupled Hessian) against the diagonal model.

    python benchmarks/bench_softmax_steps.py --data-dir ../shared/data
    python benchmarks/bench_softmax_steps.py --sets digits            # no data folder

Solver "newton" on the full model takes exact Newton steps for the softmax
where K's largest eigenvalue is at most ``COUPLED_MAX_CONDITION`` times
``2 alpha n`` (``STARTED_MAX_CONDITION`` for a fit that starts from a
subsample's fit, from ``SUBSAMPLE_MIN_ROWS`` rows) (for alpha = 1 / (2 C n): the ratio is C times that
eigenvalue), and the diagonal model's steps otherwise. This script fits
``KernelGDClassifier(loss="logistic", alpha=1 / (2 C n))`` at sigma="scale"
with each kind of step forced, and prints the ratio, the rule's choice, the
fit time, Newton steps, CG iterations (one product with K each) and the
final objective of both, writing benchmarks/results/softmax_steps.json. Sets:
digits (all 1,797 rows, StandardScaler), mnist (the first 8,000 of MNIST's
test images, pixels / 255), letter (the first 16,000 rows, standardized).
"""

import argparse
import contextlib
import io
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

CS = {"digits": (1, 4, 16, 64), "mnist": (1, 4, 16), "letter": (1, 4)}


def load(name, data_dir):
    import datasets

    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.preprocessing import StandardScaler

        X, y = load_digits(return_X_y=True)
        return StandardScaler().fit_transform(X), y
    X, y = (datasets.load_letter if name == "letter" else datasets.load_mnist8k)(data_dir)[:2]
    return X, y


def largest_eigenvalue(X):
    """K's largest eigenvalue at sigma="scale" (Lanczos)."""
    from scipy.sparse.linalg import eigsh

    from kernelgd import KernelGDClassifier, kernel_matrix

    sigma = KernelGDClassifier()._resolve_sigma(X, np.full(X.shape[0], 1.0 / X.shape[0]))
    return float(eigsh(kernel_matrix(X, sigma=sigma), k=1, return_eigenvectors=False, tol=1e-3)[0])


def fit(X, y, C, max_condition):
    from kernelgd import KernelGDClassifier
    from kernelgd._solvers.newton import _directions as newton

    saved = newton.COUPLED_MAX_CONDITION, newton.STARTED_MAX_CONDITION
    newton.COUPLED_MAX_CONDITION = newton.STARTED_MAX_CONDITION = max_condition
    out = io.StringIO()
    try:
        model = KernelGDClassifier(loss="logistic", alpha=1.0 / (2 * C * X.shape[0]), verbose=1, random_state=0)
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            model.fit(X, y)
            elapsed = time.perf_counter() - start
    finally:
        newton.COUPLED_MAX_CONDITION, newton.STARTED_MAX_CONDITION = saved
    inner = sum(int(v) for v in re.findall(r"cg iterations (\d+)", out.getvalue()))
    return {"fit_time": elapsed, "n_iter": int(model.n_iter_), "cg_iterations": inner,
            "objective": float(model.loss_curve_[-1]), "warnings": [str(w.message) for w in caught]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "softmax_steps.json"))
    args = parser.parse_args(argv)
    from kernelgd._solvers.newton._directions import COUPLED_MAX_CONDITION, STARTED_MAX_CONDITION
    from kernelgd._solvers.newton._start import SUBSAMPLE_MIN_ROWS

    sets = args.sets or (list(CS) if args.data_dir else ["digits"])
    rows = []
    for name in sets:
        X, y = load(name, args.data_dir)
        top = largest_eigenvalue(X)
        for C in CS[name]:
            ratio = C * top
            row = {"set": name, "n": int(X.shape[0]), "C": C, "ratio": ratio,
                   "rule": "exact" if ratio <= (STARTED_MAX_CONDITION if X.shape[0] >= SUBSAMPLE_MIN_ROWS
                                                else COUPLED_MAX_CONDITION) else "diagonal"}
            for kind, bound in (("exact", np.inf), ("diagonal", 0.0)):
                row[kind] = fit(X, y, C, bound)
            rows.append(row)
            e, d = row["exact"], row["diagonal"]
            print(f"{name:7s} C={C:<3g} ratio {ratio:9.0f} rule {row['rule']:8s} exact {e['fit_time']:7.2f} s "
                  f"({e['n_iter']} steps, {e['cg_iterations']} CG)  diagonal {d['fit_time']:7.2f} s "
                  f"({d['n_iter']} steps, {d['cg_iterations']} CG)  objective {e['objective']:.8g} / "
                  f"{d['objective']:.8g}", flush=True)
    table = [{"set": r["set"], "n": r["n"], "C": r["C"], "ratio": r["ratio"], "rule": r["rule"],
              "exact": r["exact"]["fit_time"], "exact_steps": f"{r['exact']['n_iter']} / {r['exact']['cg_iterations']}",
              "diagonal": r["diagonal"]["fit_time"],
              "diagonal_steps": f"{r['diagonal']['n_iter']} / {r['diagonal']['cg_iterations']}",
              "speedup": r["diagonal"]["fit_time"] / r["exact"]["fit_time"],
              "gap": r["diagonal"]["objective"] - r["exact"]["objective"]} for r in rows]
    print()
    print(format_table(table, [
        ("set", "set", None), ("n", "n", None), ("C", "C", None), ("ratio", "C x top eigenvalue", "{:.0f}"),
        ("rule", "rule", None), ("exact", "exact (s)", "{:.2f}"), ("exact_steps", "steps / CG", None),
        ("diagonal", "diagonal (s)", "{:.2f}"), ("diagonal_steps", "steps / CG", None),
        ("speedup", "diagonal / exact", "{:.2f}"), ("gap", "objective gap", "{:.1e}")]))
    write_json(args.out, {"machine": machine(), "max_condition": COUPLED_MAX_CONDITION,
                          "started_max_condition": STARTED_MAX_CONDITION, "subsample_min_rows": SUBSAMPLE_MIN_ROWS,
                          "rows": rows})


if __name__ == "__main__":
    main()
