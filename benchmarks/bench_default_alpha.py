"""The logistic loss's default ridge: KernelGDClassifier(loss="logistic") against SVC's defaults.

    python benchmarks/bench_default_alpha.py --data-dir ../shared/data
    python benchmarks/bench_default_alpha.py --sets breast_cancer wine digits   # no data folder

alpha="auto" is ``c / (2 n)`` (n the training rows' total weight): c = 1 is
LogisticRegression's and SVC's default C=1. This script measures the factor
c on sets the rule was not tuned to, with sigma="scale" (SVC's
gamma="scale") and every other argument at its default, against SVC() after
the same preprocessing. Sets: breast_cancer, wine, digits (scikit-learn's
bundled copies; stratified 5-fold CV, StandardScaler in the pipeline),
letter (first 16,000 / last 4,000 rows, standardized), adult (adult.data /
adult.test, numeric standardized, categorical one-hot) and mnist (the first
8,000 / last 2,000 of MNIST's test images, pixels / 255). Prints accuracy,
log-loss and fit time per set and system, writes
benchmarks/results/default_alpha.json.
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

SMALL = ["breast_cancer", "wine", "digits"]
LARGE = ["letter", "adult", "mnist"]
FACTORS = [1.0, 1 / 16, 1 / 64, 1 / 256]


def systems(factors):
    from sklearn.svm import SVC

    from kernelgd import KernelGDClassifier

    out = {"SVC() defaults": lambda n: SVC()}
    for c in factors:
        name = "kernelgd alpha=auto (default)" if c is None else f"kernelgd alpha={c:g}/(2n)"
        out[name] = (lambda c: lambda n: KernelGDClassifier(
            loss="logistic", **({} if c is None else {"alpha": c / (2 * n)}), random_state=0))(c)
    return out


def scores(model, X_test, y_test):
    from sklearn.metrics import accuracy_score, log_loss

    accuracy = float(accuracy_score(y_test, model.predict(X_test)))
    if not hasattr(model, "predict_proba"):
        return accuracy, None
    return accuracy, float(log_loss(y_test, model.predict_proba(X_test), labels=model.classes_))


def run_small(name, make):
    from sklearn import datasets
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    results = []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        model = make_pipeline(StandardScaler(), make(len(train)))
        start = time.perf_counter()
        model.fit(X[train], y[train])
        results.append((time.perf_counter() - start,) + scores(model, X[test], y[test]))
    fit_time, accuracy, loss = zip(*results)
    return float(np.mean(accuracy)), None if loss[0] is None else float(np.mean(loss)), float(np.mean(fit_time))


def run_large(name, make, data_dir):
    import datasets

    if name == "letter":
        X, y, X_test, y_test = datasets.load_letter(data_dir)
    elif name == "mnist":
        X, y, X_test, y_test = datasets.load_mnist8k(data_dir)
    else:
        X, y, X_test, y_test = datasets.load_adult(data_dir)
        pre = datasets.adult_preprocessor().fit(X)
        X, X_test = pre.transform(X), pre.transform(X_test)
    model = make(X.shape[0])
    start = time.perf_counter()
    model.fit(X, y)
    fit_time = time.perf_counter() - start
    accuracy, loss = scores(model, X_test, y_test)
    return accuracy, loss, fit_time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--factors", nargs="+", type=float, default=FACTORS,
                        help="values of c in alpha = c / (2 n); the current default is always run too")
    parser.add_argument("--out", default=str(HERE / "results" / "default_alpha.json"))
    args = parser.parse_args(argv)
    sets = args.sets or (SMALL + LARGE if args.data_dir else SMALL)
    rows = []
    for name in sets:
        for system, make in systems([None] + list(args.factors)).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if name in SMALL:
                    accuracy, loss, fit_time = run_small(name, make)
                else:
                    accuracy, loss, fit_time = run_large(name, make, args.data_dir)
            rows.append({"set": name, "system": system, "accuracy": accuracy, "log_loss": loss,
                         "fit_time": fit_time})
            print(f"{name:14s} {system:32s} acc {accuracy:.4f}  log-loss "
                  f"{'-' if loss is None else f'{loss:.4f}'}  fit {fit_time:.2f}s", flush=True)
            # written after every row: a long run stopped early keeps what it measured
            write_json(args.out, {"machine": machine(), "factors": args.factors, "rows": rows})
    print()
    print(format_table(rows, [("set", "set", None), ("system", "system", None), ("accuracy", "accuracy", "{:.4f}"),
                              ("log_loss", "log-loss", "{:.4f}"), ("fit_time", "fit (s)", "{:.2f}")]))
    write_json(args.out, {"machine": machine(), "factors": args.factors, "rows": rows})


if __name__ == "__main__":
    main()
