"""Model selection for classification: the CV estimator against GridSearchCV(SVC).

    python benchmarks/bench_cv_classification.py --data-dir ../shared/data [--sets mnist letter]

Each system chooses its kernel width and regularisation on the training rows
and is refitted on all of them; the table gives test accuracy, the whole fit
time (search and refit) and the chosen parameters. Systems:

* kernelgd-cv: ``KernelGDClassifierCV()`` with its default arguments (squared
  loss, rbf kernel: exact leave-one-out of every alpha, of a rank-2,000
  pivoted-Cholesky factor on at most 10,000 rows, for 21 alphas at each width
  of the walk over widths);
* kernelgd-cv-logistic: ``KernelGDClassifierCV(loss="logistic")`` (stratified
  5-fold along each width's alpha path, by log-loss);
* svc-grid: ``GridSearchCV(SVC())``, C in {1, 10, 100} x gamma in
  {1/4, 1, 4} / (n_features * Var(X)), 3-fold;
* svc-grid-7x7: ``GridSearchCV(SVC())``, 7 C from 0.1 to 100 x 7 gammas from
  10^-1.5 to 10^1.5 times 1 / (n_features * Var(X)), 5-fold;
* svc-grid-7x7-all-cores: the same with ``n_jobs=-1`` (GridSearchCV's
  default, ``n_jobs=None``, runs one fit at a time, and libsvm on one core);
* logistic-ceiling: not a search but its bound. ``KernelGDClassifier(loss="logistic")``
  at 6 widths (0.71 to 4 times sigma="scale"'s) x the 17 alphas of
  ``KernelGDClassifierCV``'s grid from 1e-2 down, each scored on the test
  rows; the best test accuracy (and the log-loss of that model) is what any
  search over that grid could reach on the split, chosen by peeking. Every
  pair's accuracy is kept (``grids``), for the best pair fixed over the splits.

``--repeat N`` runs every (set, system) N times, round-robin, and reports
the median fit time (every run's in ``fit_times``). ``--splits N`` draws
digits' train/test split N times (seeds 0 to N-1; MNIST and letter have
fixed splits): one 450-row test set tells accuracies apart only to a few
digits, so the table then gives the mean test accuracy over the splits
(every split's in ``accuracies``) and the median fit time over every run.

Sets: MNIST (8,000 train / 2,000 test), letter (16,000 / 4,000) and, with
``--sets digits``, scikit-learn's digits (a stratified 75/25 split). Each
(set, system) runs in its own process. Writes
benchmarks/results/model_selection_classification.json. The logistic
search against the 7 x 7 grid on digits:

    python benchmarks/bench_cv_classification.py --sets digits --repeat 3 \
        --systems kernelgd-cv-logistic svc-grid-7x7 svc-grid-7x7-all-cores \
        --out benchmarks/results/model_selection_digits.json
    python benchmarks/bench_cv_classification.py --sets digits --splits 5 \
        --systems kernelgd-cv-logistic kernelgd-cv svc-grid-7x7 \
        --out benchmarks/results/model_selection_digits_splits.json
    python benchmarks/bench_cv_classification.py --sets digits --splits 5 \
        --systems logistic-ceiling --out benchmarks/results/model_selection_digits_ceiling.json
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

SETS = ("mnist", "letter", "digits")
SYSTEMS = {
    "kernelgd-cv": "kernelgd KernelGDClassifierCV() (defaults)",
    "kernelgd-cv-logistic": "kernelgd KernelGDClassifierCV(loss='logistic')",
    "svc-grid": "GridSearchCV(SVC rbf), 3 C x 3 gamma, 3-fold",
    "svc-grid-7x7": "GridSearchCV(SVC rbf), 7 C x 7 gamma, 5-fold",
    "svc-grid-7x7-all-cores": "GridSearchCV(SVC rbf, n_jobs=-1), 7 C x 7 gamma, 5-fold",
    "logistic-ceiling": "kernelgd logistic, best of 6 widths x 17 alphas on the test rows (a bound)",
}
CEILING_WIDTHS = (0.71, 1.0, 1.41, 2.0, 2.83, 4.0)


def logistic_ceiling(X, y, X_test, y_test):
    """The best test accuracy of the logistic model over CEILING_WIDTHS x the search's alphas up to 1e-2."""
    import warnings

    from sklearn.metrics import log_loss

    from kernelgd import KernelGDClassifier
    from kernelgd._search import DEFAULT_ALPHAS

    scale = KernelGDClassifier()._resolve_sigma(X, np.full(X.shape[0], 1.0 / X.shape[0]))
    best, grid = (-1.0, None, None), []
    for factor in CEILING_WIDTHS:
        path = KernelGDClassifier(loss="logistic", sigma=factor * scale, warm_start=True, random_state=0)
        for alpha in sorted(DEFAULT_ALPHAS[DEFAULT_ALPHAS <= 1e-2], reverse=True):
            with warnings.catch_warnings():  # a stop short of the optimum still gives a model to score
                warnings.simplefilter("ignore")
                path.set_params(alpha=float(alpha)).fit(X, y)
            accuracy = float(np.mean(path.predict(X_test) == y_test))
            grid.append([factor, float(alpha), accuracy])
            if accuracy > best[0]:
                loss = float(log_loss(y_test, path.predict_proba(X_test), labels=path.classes_))
                best = (accuracy, loss, {"sigma": float(factor * scale), "alpha": float(alpha)})
    return (*best, grid)


def load(set_name, data_dir, split=0):
    import datasets

    if set_name == "digits":  # scikit-learn's copy: a stratified 75/25 split, standardized on training
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler

        X, y = load_digits(return_X_y=True)
        X, X_test, y, y_test = train_test_split(X, y, stratify=y, random_state=split)
        scaler = StandardScaler().fit(X)
        return scaler.transform(X), y, scaler.transform(X_test), y_test
    return datasets.load_mnist8k(data_dir) if set_name == "mnist" else datasets.load_letter(data_dir)


def worker(set_name, system, data_dir, split):
    X, y, X_test, y_test = load(set_name, data_dir, split)
    if system == "logistic-ceiling":
        start = time.perf_counter()
        accuracy, loss, chosen, grid = logistic_ceiling(X, y, X_test, y_test)
        print(json.dumps({"accuracy": accuracy, "log_loss": loss, "fit_time": time.perf_counter() - start,
                          "n_train": int(X.shape[0]), "chosen": chosen, "grid": grid, "split": split}))
        return
    if system.startswith("kernelgd-cv"):
        from kernelgd import KernelGDClassifierCV

        model = KernelGDClassifierCV(loss="logistic" if system.endswith("logistic") else "squared", random_state=0)
    else:
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        gamma0 = 1.0 / (X.shape[1] * X.var())
        if system == "svc-grid":
            grid, cv = {"C": [1.0, 10.0, 100.0], "gamma": list(gamma0 * np.array([0.25, 1.0, 4.0]))}, 3
        else:  # 7 x 7 around the defaults C=1 and gamma="scale", half-decade steps
            grid, cv = {"C": list(np.logspace(-1, 2, 7)), "gamma": list(gamma0 * np.logspace(-1.5, 1.5, 7))}, 5
        model = GridSearchCV(SVC(cache_size=1000), grid, cv=cv, n_jobs=-1 if system.endswith("all-cores") else None)
    start = time.perf_counter()
    model.fit(X, y)
    fit_time = time.perf_counter() - start
    if system.startswith("kernelgd-cv"):
        chosen = {"sigma": float(model.sigma_), "alpha": float(model.alpha_),
                  "widths": len(set(model.cv_results_["param_sigma"]))}
    else:
        chosen = {k: float(v) for k, v in model.best_params_.items()}
    accuracy = float(np.mean(model.predict(X_test) == y_test))
    loss = None
    if system.endswith("logistic"):
        from sklearn.metrics import log_loss

        loss = float(log_loss(y_test, model.predict_proba(X_test)))
    print(json.dumps({"accuracy": accuracy, "log_loss": loss, "fit_time": fit_time, "n_train": int(X.shape[0]),
                      "chosen": chosen, "split": split}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="*", default=["mnist", "letter"], choices=list(SETS))
    parser.add_argument("--systems", nargs="*", default=["kernelgd-cv", "svc-grid"], choices=list(SYSTEMS))
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per (set, system)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (set, system); the median's is reported")
    parser.add_argument("--splits", type=int, default=1, help="digits' train/test splits (seeds 0 to N-1)")
    parser.add_argument("--out", default=str(HERE / "results" / "model_selection_classification.json"))
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.data_dir, int(args.worker[2]))

    rows = []
    for set_name in args.sets:
        runs = {system: [] for system in args.systems}
        splits = range(args.splits if set_name == "digits" else 1)
        for _ in range(args.repeat):  # round-robin: a busy spell slows every system alike
            for split in splits:
                for system in args.systems:
                    result = run_worker(
                        __file__, [set_name, system, str(split), "--data-dir", args.data_dir], args.timeout)
                    print(f"  {set_name} {system} split {split}: {result}", file=sys.stderr, flush=True)
                    runs[system].append(result)
        for system, results in runs.items():
            ok = [r for r in results if r["status"] == "ok"]
            if len(ok) < len(results):
                row = next(r for r in results if r["status"] != "ok")
            else:  # the run of median time, with every run's time
                row = dict(sorted(ok, key=lambda r: r["fit_time"])[(len(ok) - 1) // 2])
                row["fit_times"] = [r["fit_time"] for r in ok]
                if len(splits) > 1:  # every split's scores once (a repeat gives the same), and their means
                    by_split = [next(r for r in ok if r["split"] == split) for split in splits]
                    row["accuracies"] = [r["accuracy"] for r in by_split]
                    row["accuracy"] = float(np.mean(row["accuracies"]))
                    row["log_losses"] = [r["log_loss"] for r in by_split]
                    row["log_loss"] = None if None in row["log_losses"] else float(np.mean(row["log_losses"]))
                    row["chosen"] = [r["chosen"] for r in by_split]
                    if "grid" in row:  # (width factor, alpha, accuracy) per split: the best fixed pair's mean
                        row["grids"] = [r["grid"] for r in by_split]
                        row.pop("grid")
                    row.pop("split")
            rows.append({"set": set_name, "system": system, "description": SYSTEMS[system], **row})
    columns = [
        ("set", "set", None), ("system", "system", None), ("accuracy", "test accuracy", "{:.4f}"),
        ("fit_time", "fit incl. search (s)", "{:.1f}"), ("chosen", "chosen", None), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    path = write_json(args.out, {"machine": machine(), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
