"""Kernel logistic regression at C=1 on large synthetic sets, against Nystroem + LogisticRegression.

    python benchmarks/bench_large_logistic.py [--sets binary-200k multiclass-50k] [--timeout 600]

Sets (benchmarks/datasets.make_logistic_synthetic, 10 Gaussian features, labels drawn from a
softmax of smooth functions): 200,000 rows with 2 classes, and 50,000 rows with 7 classes;
20,000 test rows each; features standardized. Systems: ``KernelGDClassifier(loss="logistic",
alpha=1 / (2 n))`` (C=1, LogisticRegression's default) with every other argument at its default
(``n_centers="auto"``: 1,000 centers at these sizes), the exact model (``n_centers=None``),
``n_centers=2000``, ``alpha=1 / (8 n)`` (C=4), and ``Nystroem(n_components=1000)`` +
``LogisticRegression()`` (scikit-learn's defaults; its gamma is ``"scale"``'s, the width of
kernelgd's ``sigma="scale"``). Each (set, system) fits in its own process, killed after
--timeout seconds; fit times are the median of --repeat fresh-process fits (one for fits over
20 s). Prints test log-loss, accuracy and fit time, and writes
benchmarks/results/large_logistic.json.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, run_repeated, write_json  # noqa: E402

SETS = {"binary-200k": (200_000, 2), "multiclass-50k": (50_000, 7)}
SYSTEMS = {
    "kernelgd": "kernelgd KernelGDClassifier(loss='logistic', alpha=1 / (2 n)), C=1",
    "kernelgd-exact": "kernelgd KernelGDClassifier(loss='logistic', alpha=1 / (2 n), n_centers=None)",
    "kernelgd-centers-2000": "kernelgd KernelGDClassifier(loss='logistic', alpha=1 / (2 n), n_centers=2000)",
    "kernelgd-c4": "kernelgd KernelGDClassifier(loss='logistic', alpha=1 / (8 n)), C=4",
    "nystroem-lr": "Nystroem(1000) + LogisticRegression()",
}


def worker(set_name, system):
    import warnings

    from datasets import make_logistic_synthetic
    from sklearn.metrics import log_loss
    from sklearn.preprocessing import StandardScaler

    n, n_classes = SETS[set_name]
    X, y, X_test, y_test = make_logistic_synthetic(n, n_classes)
    scaler = StandardScaler().fit(X)
    X, X_test = scaler.transform(X), scaler.transform(X_test)
    if system.startswith("kernelgd"):
        from kernelgd import KernelGDClassifier

        n_centers = {"kernelgd-exact": None, "kernelgd-centers-2000": 2000}.get(system, "auto")
        alpha = 1.0 / ((8 if system == "kernelgd-c4" else 2) * X.shape[0])  # C=4, else C=1
        model = KernelGDClassifier(loss="logistic", random_state=0, n_centers=n_centers, alpha=alpha)
    else:
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        gamma = 1.0 / (X.shape[1] * X.var())
        model = make_pipeline(Nystroem(gamma=gamma, n_components=1000, random_state=0), LogisticRegression())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
    proba = model.predict_proba(X_test)
    print(json.dumps({"fit_time": fit_time, "test_log_loss": float(log_loss(y_test, proba)),
                      "n_centers": getattr(model, "n_centers_", None),
                      "test_accuracy": float(np.mean(model.classes_[proba.argmax(axis=1)] == y_test)),
                      "warnings": sorted({type(w.message).__name__ for w in caught})}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="*", default=list(SETS), choices=list(SETS))
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--timeout", type=int, default=600, help="seconds per (set, system)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "large_logistic.json"))
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    rows = []
    for set_name in args.sets:
        for system in args.systems:
            result = run_repeated(__file__, [set_name, system], args.timeout, repeat=args.repeat)
            print(f"  {set_name} {system}: {result}", file=sys.stderr, flush=True)
            rows.append({"set": set_name, "system": system, "description": SYSTEMS[system], **result})
            write_json(args.out, {"machine": machine(), "rows": rows})  # kept if a later fit is stopped
    print(format_table(rows, [("set", "set", None), ("description", "system", None),
                              ("test_log_loss", "test log-loss", "{:.4f}"), ("test_accuracy", "accuracy", "{:.4f}"),
                              ("fit_time", "fit (s)", "{:.1f}"), ("status", "status", None)]))


if __name__ == "__main__":
    main()
