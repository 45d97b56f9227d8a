"""Exact leave-one-out against its low-rank estimate, per width (the bias on power).

    python benchmarks/bench_loo_rank.py --data-dir ../shared/data [--set power-plant] [--split 0]

Beyond ``LOO_MAX_SAMPLES`` rows ``KernelGDRegressorCV`` scores each width by
the exact leave-one-out error of a rank-2,000 randomly pivoted Cholesky
(Nystroem) factor of K. This script computes, for a few widths of one split,
the best leave-one-out mean squared error over the alphas (standardized
target, intercept fitted) from the full eigendecomposition of K and from
factors of several ranks, with the time of each, and prints which width each
ranks best. It writes benchmarks/results/loo_rank.json.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--set", default="power-plant")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--sigmas", nargs="*", type=float, default=[0.354, 0.5, 0.707])
    parser.add_argument("--ranks", nargs="*", type=int, default=[2000, 4000, 6000])
    parser.add_argument("--out", default=str(HERE / "results" / "loo_rank.json"))
    args = parser.parse_args(argv)

    import datasets

    from kernelgd._loo import _eigen_system, _loo_scores, _low_rank_system
    from kernelgd._operator import KernelOperator
    from kernelgd._solvers._krylov import rp_cholesky
    from kernelgd.kernels import bind_kernel

    for k, (X, y, *_) in enumerate(datasets.load_uci(args.data_dir, args.set)):
        if k == args.split:
            break
    n = len(X)
    Y, w = y[:, None], np.full(n, 1.0 / n)
    alphas = np.logspace(-9, -3, 13)
    rows = []
    for sigma in args.sigmas:
        kernel = bind_kernel("rbf", degree=3, coef0=1.0, kernel_params={"sigma": sigma})
        operator = KernelOperator(X, kernel, dtype="float64", store=False)
        systems = [("exact", lambda: _eigen_system(operator.columns(np.arange(n)), Y, w, True))]
        for rank in args.ranks:
            def factor(rank=rank):
                columns = lambda idx: np.asfortranarray(operator.columns(idx))  # noqa: E731
                F = rp_cholesky(columns, operator.diag(), rank, np.random.RandomState(0))[0]
                return _low_rank_system(F, Y, w, True)
            systems.append((f"rank {rank}", factor))
        for name, make in systems:
            start = time.perf_counter()
            scores = np.asarray(_loo_scores(make(), Y, w, alphas, True, None)[0])
            best = int(np.argmax(scores))
            rows.append({"sigma": sigma, "method": name, "loo_mse": -float(scores[best]),
                         "alpha": float(alphas[best]), "time": time.perf_counter() - start})
            print(f"  sigma={sigma:g} {name}: {rows[-1]}", file=sys.stderr, flush=True)
    for method in dict.fromkeys(r["method"] for r in rows):
        best = min((r for r in rows if r["method"] == method), key=lambda r: r["loo_mse"])
        print(f"{method}: best width sigma={best['sigma']:g} (LOO MSE {best['loo_mse']:.4f})")
    print(format_table(rows, [("sigma", "sigma", "{:g}"), ("method", "method", None),
                              ("loo_mse", "best LOO MSE", "{:.4f}"), ("alpha", "its alpha", "{:g}"),
                              ("time", "time (s)", "{:.1f}")]))
    path = write_json(args.out, {"machine": machine(), "set": args.set, "split": args.split, "n": n,
                                 "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
