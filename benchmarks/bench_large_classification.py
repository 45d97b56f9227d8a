"""A 200,000-row, 3-feature classification problem with a thin boundary: n_centers against Nystroem.

    python benchmarks/bench_large_classification.py

Three uniform features in [0, 1]; the label is
``sin(6 x0) + cos(6 x1) + x2 > 0.5``, a curved boundary that the rbf kernel
with sigma = 0.1 resolves (gamma = 100). 200,000 training rows and 50,000
test rows. kernelgd fits 2,000 centers at alpha = 0 (which the centers
path floors at 1e-7 mean k(c, c)) and at alpha = 1e-6;
the peer is Nystroem(2000) + RidgeClassifier (scikit-learn defaults). Each
fit runs in its own process; the script prints fit time, peak extra memory,
iterations, whether the fit converged before max_iter (no
ConvergenceWarning), test accuracy and the time ratios, and writes
benchmarks/results/large_classification.json.
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

SIGMA = 0.1
SYSTEMS = {
    "kernelgd-centers-2000": "kernelgd n_centers=2000, alpha=0",
    "kernelgd-centers-2000-alpha1e-6": "kernelgd n_centers=2000, alpha=1e-6",
    "nystroem-2000": "Nystroem(2000) + RidgeClassifier",
}


def make_data(n, n_test=50_000, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.rand(n + n_test, 3)
    y = (np.sin(6 * X[:, 0]) + np.cos(6 * X[:, 1]) + X[:, 2] > 0.5).astype(int)
    return X[:n], y[:n], X[n:], y[n:]


def make_fit(name, X, y):
    if name.startswith("kernelgd"):
        from kernelgd import KernelGDClassifier

        params = dict(sigma=SIGMA, n_centers=2000, random_state=0, alpha=0.0)
        if name.endswith("alpha1e-6"):
            params["alpha"] = 1e-6
        model = KernelGDClassifier(**params)

        def fit():
            fit.info = fit_recording_convergence(model, X, y)
            return model
        return fit
    if name == "nystroem-2000":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import RidgeClassifier
        from sklearn.pipeline import make_pipeline

        model = make_pipeline(
            Nystroem(kernel="rbf", gamma=1 / SIGMA**2, n_components=2000, random_state=0),
            RidgeClassifier(),
        )
        return lambda: model.fit(X, y)
    raise ValueError(name)


def worker(name, n):
    X, y, X_test, y_test = make_data(n)
    fit = make_fit(name, X, y)
    model, stats = measure_fit(fit)
    stats.update(getattr(fit, "info", {}))
    stats["test_accuracy"] = float(model.score(X_test, y_test))
    print(json.dumps(stats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--out", default=str(HERE / "results" / "large_classification.json"))
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]))

    rows = []
    for name in args.systems:
        result = run_repeated(__file__, [name, str(args.n)], args.timeout, args.repeat)
        rows.append({"system": name, "description": SYSTEMS[name], "n": args.n, **result})
        print(f"  {name}: {result}", file=sys.stderr, flush=True)
    by = {r["system"]: r for r in rows if r.get("status") == "ok"}
    summary = {}
    if "nystroem-2000" in by:
        peer = by["nystroem-2000"]
        for name in by:
            if name.startswith("kernelgd"):
                summary[f"nystroem_time_over_{name}"] = peer["fit_time"] / by[name]["fit_time"]
                summary[f"{name}_accuracy_minus_nystroem"] = by[name]["test_accuracy"] - peer["test_accuracy"]
    columns = [
        ("description", "system", None), ("fit_time", "fit time (s)", "{:.1f}"),
        ("peak_mem_gib", "peak mem (GiB)", "{:.2f}"), ("n_iter", "iterations", None),
        ("converged", "converged", None), ("test_accuracy", "test accuracy", "{:.4f}"),
        ("status", "status", None),
    ]
    print(f"n = {args.n:,} training rows, 50,000 test rows")
    print(format_table(rows, columns))
    for key, value in summary.items():
        print(f"{key}: {value:.3g}")
    path = write_json(args.out, {"machine": machine(), "n": args.n, "rows": rows, "summary": summary})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
