"""Model selection for classification (issue 9's classification row).

    python benchmarks/bench_cv_classification.py --data-dir ../shared/data [--sets mnist letter]

Each system chooses its kernel width and regularisation on the training rows
and is refitted on all of them; the table gives test accuracy, the whole fit
time (search and refit) and the chosen parameters. Systems:

* kernelgd-cv: ``KernelGDClassifierCV()`` with its default arguments (squared
  loss, rbf kernel: exact leave-one-out of every alpha, of a rank-2,000
  pivoted-Cholesky factor on at most 10,000 rows, for 21 alphas at each width
  of the walk over widths);
* svc-grid: ``GridSearchCV(SVC())``, C in {1, 10, 100} x gamma in
  {1/4, 1, 4} / (n_features * Var(X)), 3-fold.

Sets: MNIST (8,000 train / 2,000 test) and letter (16,000 / 4,000). Each
(set, system) runs in its own process. Writes
benchmarks/results/model_selection_classification.json.
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

SETS = ("mnist", "letter")
SYSTEMS = {
    "kernelgd-cv": "kernelgd KernelGDClassifierCV() (defaults)",
    "svc-grid": "GridSearchCV(SVC rbf), 3 C x 3 gamma, 3-fold",
}


def load(set_name, data_dir):
    import datasets

    return datasets.load_mnist8k(data_dir) if set_name == "mnist" else datasets.load_letter(data_dir)


def worker(set_name, system, data_dir):
    X, y, X_test, y_test = load(set_name, data_dir)
    if system == "kernelgd-cv":
        from kernelgd import KernelGDClassifierCV

        model = KernelGDClassifierCV(random_state=0)
    else:
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        gamma0 = 1.0 / (X.shape[1] * X.var())
        grid = {"C": [1.0, 10.0, 100.0], "gamma": list(gamma0 * np.array([0.25, 1.0, 4.0]))}
        model = GridSearchCV(SVC(cache_size=1000), grid, cv=3)
    start = time.perf_counter()
    model.fit(X, y)
    fit_time = time.perf_counter() - start
    if system == "kernelgd-cv":
        chosen = {"sigma": float(model.sigma_), "alpha": float(model.alpha_),
                  "widths": len(set(model.cv_results_["param_sigma"]))}
    else:
        chosen = {k: float(v) for k, v in model.best_params_.items()}
    accuracy = float(np.mean(model.predict(X_test) == y_test))
    print(json.dumps({"accuracy": accuracy, "fit_time": fit_time, "n_train": int(X.shape[0]),
                      "chosen": chosen}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="*", default=list(SETS), choices=list(SETS))
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per (set, system)")
    parser.add_argument("--out", default=str(HERE / "results" / "model_selection_classification.json"))
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.data_dir)

    rows = []
    for set_name in args.sets:
        for system in args.systems:
            result = run_worker(__file__, [set_name, system, "--data-dir", args.data_dir], args.timeout)
            print(f"  {set_name} {system}: {result}", file=sys.stderr, flush=True)
            rows.append({"set": set_name, "system": system, "description": SYSTEMS[system], **result})
    columns = [
        ("set", "set", None), ("system", "system", None), ("accuracy", "test accuracy", "{:.4f}"),
        ("fit_time", "fit incl. search (s)", "{:.1f}"), ("chosen", "chosen", None), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    path = write_json(args.out, {"machine": machine(), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
