"""Sparse inputs: when a dense copy of X pays, and what it saves on adult.

    python benchmarks/bench_sparse.py --data-dir ../shared/data

Part 1 times one rbf kernel block (3,000 x 3,000) from sparse X through
scipy's sparse product (float64) and from a dense copy through BLAS
(float64, and float32: the operator's precision from 2,000 rows), for
random sparse matrices of several widths and densities and for adult's
encoding (6 standardized numeric columns beside one-hot categories), and
prints what ``kernelgd._operator.densify_if_faster`` decides for each. The
rule is right where its choice is within 10% of the faster float32-or-sparse
time. Part 2 fits ``KernelGDClassifier(loss="logistic")`` on adult's
sparse encoding with the rule and with it switched off, alternating fresh
processes, 3 runs each, and prints the medians. Writes
benchmarks/results/sparse.json.
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

BLOCK = 3000


def adult_matrix(data_dir):
    import datasets

    X, y, _, _ = datasets.load_adult(data_dir)
    pre = datasets.adult_preprocessor().fit(X)
    return pre.transform(X).tocsr(), y


def best_of(func, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def kernel_blocks(data_dir):
    import scipy.sparse as sp

    from kernelgd._operator import densify_if_faster
    from kernelgd.kernels import rbf

    rng = np.random.RandomState(0)
    cases = [(f"random d={d} density={p:g}", sp.random(BLOCK, d, density=p, format="csr", random_state=rng))
             for d in (100, 1000, 5000) for p in (0.003, 0.03, 0.1)]
    try:
        cases.append(("adult (one-hot + numeric)", adult_matrix(data_dir)[0][:BLOCK]))
    except OSError as exc:
        print(f"adult skipped: {exc}", file=sys.stderr)
    rows = []
    for name, X in cases:
        Xd = X.toarray()
        X32 = Xd.astype(np.float32)
        sparse_time = best_of(lambda: rbf(X, X, 3.0))
        dense_time = best_of(lambda: rbf(Xd, Xd, 3.0))
        dense32_time = best_of(lambda: rbf(X32, X32, 3.0))
        dense = not sp.issparse(densify_if_faster(X, None, 1 << 40)[0])
        # judged in float32, the operator's precision from 2,000 rows; a 10% tie band
        chosen, other = (dense32_time, sparse_time) if dense else (sparse_time, dense32_time)
        rows.append({"case": name, "sparse_s": sparse_time, "dense_s": dense_time, "dense32_s": dense32_time,
                     "ratio": sparse_time / dense32_time, "rule": "dense" if dense else "sparse",
                     "right": bool(chosen <= 1.1 * other)})
    return rows


def fit_worker(mode, data_dir):
    from kernelgd import KernelGDClassifier, _operator

    if mode == "off":
        _operator.SPARSE_OP_COST = 0.0
    X, y = adult_matrix(data_dir)
    var = np.asarray(X.multiply(X).mean(axis=0)).ravel() - np.asarray(X.mean(axis=0)).ravel() ** 2
    sigma = np.sqrt(X.shape[1] * var.mean())
    model = KernelGDClassifier(loss="logistic", sigma=sigma, alpha=1e-5, random_state=0)
    start = time.perf_counter()
    model.fit(X, y)
    print(json.dumps({"fit_time": time.perf_counter() - start, "n_iter": int(model.n_iter_),
                      "train_accuracy": float(model.score(X[:5000], y[:5000]))}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-fit", action="store_true")
    parser.add_argument("--out", default=str(HERE / "results" / "sparse.json"))
    parser.add_argument("--worker", nargs=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return fit_worker(args.worker[0], args.data_dir)

    blocks = kernel_blocks(args.data_dir)
    print(format_table(blocks, [
        ("case", "X (3,000 rows)", None), ("sparse_s", "sparse product (s)", "{:.3f}"),
        ("dense_s", "dense float64 (s)", "{:.3f}"), ("dense32_s", "dense float32 (s)", "{:.3f}"),
        ("ratio", "sparse / dense32", "{:.2f}"),
        ("rule", "rule picks", None), ("right", "right", None),
    ]))
    fits = []
    if not args.skip_fit:
        runs = {"on": [], "off": []}
        for _ in range(args.repeat):
            for mode in ("off", "on"):
                runs[mode].append(run_worker(__file__, [mode, "--data-dir", args.data_dir], 1800))
        for mode, results in runs.items():
            times = [r["fit_time"] for r in results if "fit_time" in r]
            fits.append({"densify": mode, "median_fit_s": float(np.median(times)), "fit_times": times,
                         "n_iter": results[0].get("n_iter"), "train_accuracy": results[0].get("train_accuracy")})
        print(format_table(fits, [
            ("densify", "adult logistic fit, densify", None), ("median_fit_s", "median fit (s)", "{:.1f}"),
            ("n_iter", "Newton steps", None), ("train_accuracy", "accuracy (5,000 rows)", "{:.4f}"),
        ]))
    path = write_json(args.out, {"machine": machine(), "blocks": blocks, "fits": fits})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
