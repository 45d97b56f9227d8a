"""The classifier's fit time at two git revisions (issue 8: "not slower than today").

    python benchmarks/bench_revisions.py --data-dir ../shared/data --old 61afadc --new HEAD
    python benchmarks/bench_revisions.py --data-dir ../shared/data --loss logistic --old 726777b \
        --out benchmarks/results/revisions_logistic.json

Each revision is checked out into a temporary git worktree and imported from
there (kernelgd is pure Python). ``KernelGDClassifier()`` with its default
(squared) loss, solver and dtype is fitted on MNIST (the first 8,000 test
images, pixels / 255) and letter (the first 16,000 rows, standardized) at
``sigma = sqrt(n_features * mean variance)`` and ``alpha = 1e-5``, in fresh
processes that alternate between the revisions (old, new, old, new, ...) so
both see the same load. With ``--loss logistic`` the model is
``KernelGDClassifier(loss="logistic")`` at the width and ridge that
bench_logistic.py's wider grids chose (sigma^2 = 1 and 1/4 times
n_features * mean variance, alpha = 1e-7), and on adult too (binary; 1 and
1e-5; one-hot encoded as in bench_logistic.py). The script prints the median fit
time of each, their ratio and the test accuracies, and writes
benchmarks/results/revisions.json. ``--sets cal16k`` times ``KernelGDRegressor()``
with every default on California housing (16,000 rows; score: test R^2).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, run_worker, write_json  # noqa: E402

SETS = ["mnist", "letter", "adult", "cal16k"]
# (sigma^2 factor, alpha) chosen by bench_logistic.py's wider grids (adult: binary, logistic loss only)
LOGISTIC = {"mnist": (1.0, 1e-7), "letter": (0.25, 1e-7), "adult": (1.0, 1e-5)}


def worker(set_name, data_dir, loss):
    import datasets
    from sklearn.metrics import log_loss

    import kernelgd
    from kernelgd import KernelGDClassifier

    if set_name == "cal16k":  # the regressor with every default (score: R^2)
        from kernelgd import KernelGDRegressor

        X, y, X_test, y_test = datasets.load_cal16k(data_dir)
        model = KernelGDRegressor(random_state=0)
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
        print(json.dumps({"fit_time": fit_time, "accuracy": float(model.score(X_test, y_test)),
                          "n_iter": int(model.n_iter_), "module": kernelgd.__file__}))
        return
    if set_name == "adult":
        from bench_logistic import base_sigma2, load

        X, y, X_test, y_test, pre = load(set_name, data_dir)
        X, X_test = pre.fit(X).transform(X), pre.transform(X_test)
        sigma2 = base_sigma2(X)
    else:
        load = datasets.load_mnist8k if set_name == "mnist" else datasets.load_letter
        X, y, X_test, y_test = load(data_dir)
        sigma2 = X.shape[1] * np.mean(np.var(X, axis=0))
    if loss == "logistic":
        factor, alpha = LOGISTIC[set_name]
        model = KernelGDClassifier(loss="logistic", sigma=float(np.sqrt(factor * sigma2)), alpha=alpha, random_state=0)
    else:  # the default loss, which every revision has
        model = KernelGDClassifier(sigma=float(np.sqrt(sigma2)), alpha=1e-5, random_state=0)
    start = time.perf_counter()
    model.fit(X, y)
    fit_time = time.perf_counter() - start
    result = {"fit_time": fit_time, "accuracy": float(model.score(X_test, y_test)),
              "n_iter": int(model.n_iter_), "module": kernelgd.__file__}
    if loss == "logistic":
        result["log_loss"] = float(log_loss(y_test, model.predict_proba(X_test), labels=model.classes_))
    print(json.dumps(result))


def run(tree, set_name, data_dir, loss, timeout):
    """One fit in a fresh process that imports kernelgd from ``tree``."""
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{HERE}")
    return run_worker(Path(__file__).resolve(), [set_name, "--data-dir", data_dir, "--loss", loss], timeout,
                      env=env, cwd=tree)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--old", default="61afadc", help="the revision before the logistic loss")
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--sets", nargs="*", choices=SETS, help="default: mnist letter (and adult with --loss logistic)")
    parser.add_argument("--loss", default="squared", choices=["squared", "logistic"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--out", default=str(HERE / "results" / "revisions.json"))
    parser.add_argument("--worker", nargs=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], str(Path(args.data_dir).resolve()), args.loss)
    data_dir = str(Path(args.data_dir).resolve())
    if args.sets is None:
        args.sets = SETS[:3] if args.loss == "logistic" else SETS[:2]
    if args.loss == "squared" and "adult" in args.sets:
        parser.error("adult is measured with --loss logistic only")
    if args.loss == "logistic" and "cal16k" in args.sets:
        parser.error("cal16k (regression) is measured without --loss logistic")
    repo = HERE.parent
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for label, rev in (("old", args.old), ("new", args.new)):
            trees[label] = Path(tmp) / label
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(trees[label]), rev],
                           check=True, capture_output=True)
        try:
            for set_name in args.sets:
                runs = {"old": [], "new": []}
                for _ in range(args.repeat):
                    for label in ("old", "new"):
                        result = run(trees[label], set_name, data_dir, args.loss, args.timeout)
                        runs[label].append(result)
                        print(f"  {set_name} {label}: {result}", file=sys.stderr, flush=True)
                row = {"set": set_name}
                for label in ("old", "new"):
                    ok = [r for r in runs[label] if r["status"] == "ok"]
                    row[f"{label}_fit_times"] = [r["fit_time"] for r in ok]
                    row[f"{label}_fit_time"] = float(np.median(row[f"{label}_fit_times"])) if ok else None
                    row[f"{label}_accuracy"] = ok[0]["accuracy"] if ok else None
                    if args.loss == "logistic":
                        row[f"{label}_log_loss"] = ok[0]["log_loss"] if ok else None
                    row[f"{label}_status"] = "ok" if len(ok) == len(runs[label]) else runs[label][-1]["status"]
                if row["old_fit_time"] and row["new_fit_time"]:
                    row["ratio"] = row["new_fit_time"] / row["old_fit_time"]
                rows.append(row)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
    columns = [
        ("set", "set", None), ("old_fit_time", f"{args.old} fit (s)", "{:.2f}"),
        ("new_fit_time", f"{args.new} fit (s)", "{:.2f}"), ("ratio", "new / old", "{:.2f}"),
        ("old_accuracy", "old score", "{:.4f}"), ("new_accuracy", "new score", "{:.4f}"),
    ]
    if args.loss == "logistic":
        columns += [("old_log_loss", "old log-loss", "{:.4f}"), ("new_log_loss", "new log-loss", "{:.4f}")]
    print(format_table(rows, columns))
    revisions = {label: subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", rev], capture_output=True,
                                       text=True).stdout.strip() for label, rev in (("old", args.old), ("new", args.new))}
    path = write_json(args.out, {"machine": machine(), "revisions": revisions, "loss": args.loss, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
