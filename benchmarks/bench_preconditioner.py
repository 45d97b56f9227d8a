"""The cg solver's preconditioner: pivoted against uniform landmarks, on Cal-16k.

    python benchmarks/bench_preconditioner.py --data-dir ../shared/data

The preconditioner is ``P = F F' + mu I`` with ``F F'`` a Nystroem
approximation of the (weighted) kernel matrix on m landmarks. "uniform" draws
the m landmarks uniformly (one round of randomly pivoted Cholesky on the flat
rbf diagonal); "pivoted" is randomly pivoted Cholesky in rounds of 100, which
draws each round where the approximation is still worst. For each m and
seed the script builds the preconditioner on the same stored K and solves the
Cal-16k ridge system to kernelgd's default tol (relative residual 1e-3),
printing setup time, iterations, CG time and test MSE (medians over 3 seeds),
and writes benchmarks/results/preconditioner.json.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402
from datasets import load_cal16k  # noqa: E402

SIGMA2, ALPHA, TOL = 2.0, 1e-5, 1e-3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--landmarks", type=int, nargs="*", default=[250, 500, 1000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "preconditioner.json"))
    args = parser.parse_args(argv)
    if not (Path(args.data_dir) / "california_housing" / "housing.csv").exists():
        parser.error(f"no california_housing/housing.csv under --data-dir {args.data_dir}")

    from kernelgd._operator import KernelOperator, cross_kernel_dot
    from kernelgd._solvers import _krylov, cg
    from kernelgd.kernels import bind_kernel

    X, y, X_test, y_test = load_cal16k(args.data_dir)
    kernel = bind_kernel("rbf", sigma=np.sqrt(SIGMA2))
    op = KernelOperator(X, kernel)  # float32 upper triangle, as a default fit
    n = len(X)
    s = np.full(n, 1 / np.sqrt(n))  # uniform weights summing to 1

    def apply_A(V):
        return s[:, None] * op.matvec(s[:, None] * V) + ALPHA * V

    rows = []
    for m in args.landmarks:
        for name, block in (("uniform", m), ("pivoted", _krylov.RPC_BLOCK)):
            runs = []
            for seed in range(args.seeds):
                start = time.perf_counter()
                P = cg.NystroemPreconditioner(op, s, ALPHA, m, np.random.RandomState(seed), block=block)
                setup = time.perf_counter() - start
                start = time.perf_counter()
                C, n_iter, _ = cg.block_pcg(apply_A, (s * y)[:, None], P, max_iter=1000, tol=TOL)
                solve = time.perf_counter() - start
                mse = float(np.mean((cross_kernel_dot(kernel, X_test, X, s * C[:, 0]) - y_test) ** 2))
                runs.append((setup, n_iter, solve, mse))
            setup, n_iter, solve, mse = np.median(np.array(runs), axis=0)
            rows.append({
                "landmarks": m, "selection": name, "setup_s": setup, "iterations": n_iter,
                "cg_s": solve, "total_s": setup + solve, "test_mse": mse,
                "iterations_per_seed": [int(r[1]) for r in runs],
            })
            print(f"  m={m} {name}: {rows[-1]}", file=sys.stderr, flush=True)
    print(f"Cal-16k, n = {n:,}, rbf sigma^2 = {SIGMA2}, alpha = {ALPHA}, tol = {TOL}; "
          f"medians over {args.seeds} seeds\n")
    print(format_table(rows, [
        ("landmarks", "landmarks", None), ("selection", "selection", None),
        ("setup_s", "setup (s)", "{:.3f}"), ("iterations", "CG iterations", "{:.0f}"),
        ("cg_s", "CG (s)", "{:.3f}"), ("total_s", "setup + CG (s)", "{:.3f}"),
        ("test_mse", "test MSE", "{:.5f}"),
    ]))
    payload = {"machine": machine(), "n": n, "tol": TOL, "seeds": args.seeds, "rows": rows}
    print(f"wrote {write_json(args.out, payload)}")


if __name__ == "__main__":
    main()
