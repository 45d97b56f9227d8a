"""``python -m kernelgd``: a short demo on data that ships with scikit-learn.

Fits KernelGDRegressor and KernelGDClassifier with their defaults next to a linear
model and scikit-learn's kernel peers (KernelRidge, SVC) on the same train/test
split and prints test scores and fit times.
"""

import argparse
import time

from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from . import KernelGDClassifier, KernelGDRegressor, __version__


def _models(task):
    if task == "regression":
        return [
            ("Ridge (linear)", Ridge(alpha=1.0)),
            ("KernelRidge rbf", KernelRidge(kernel="rbf", alpha=1.0, gamma=0.1)),
            ("KernelGDRegressor()", KernelGDRegressor()),
        ]
    return [
        ("LogisticRegression (linear)", LogisticRegression(max_iter=1000)),
        ("SVC()", SVC()),
        ("KernelGDClassifier()", KernelGDClassifier()),
    ]


DATASETS = [
    ("diabetes", load_diabetes, "regression", "R^2"),
    ("breast_cancer", load_breast_cancer, "classification", "accuracy"),
    ("digits", load_digits, "classification", "accuracy"),
]


def run_demo(datasets=DATASETS):
    """Fit every model on every dataset; return rows of results.

    Returns
    -------
    rows : list of dict
        One row per (dataset, model) with the test score and fit time.
    """
    rows = []
    for name, loader, task, metric in datasets:
        X, y = loader(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
        for label, model in _models(task):
            pipe = make_pipeline(StandardScaler(), model)
            start = time.perf_counter()
            pipe.fit(X_train, y_train)
            fit_time = time.perf_counter() - start
            rows.append(
                {
                    "dataset": f"{name} ({X.shape[0]}x{X.shape[1]})",
                    "model": label,
                    "metric": metric,
                    "score": pipe.score(X_test, y_test),
                    "fit_time": fit_time,
                }
            )
    return rows


def format_table(rows):
    """The rows as a plain-text table."""
    header = f"{'dataset':<22} {'model':<29} {'test score':>16} {'fit time':>9}"
    lines = [header, "-" * len(header)]
    for r in rows:
        score = f"{r['metric']} {r['score']:.3f}"
        lines.append(
            f"{r['dataset']:<22} {r['model']:<29} {score:>16} {r['fit_time']:>8.3f}s"
        )
    return "\n".join(lines)


def main(argv=None):
    """Entry point of ``python -m kernelgd``."""
    parser = argparse.ArgumentParser(
        prog="python -m kernelgd",
        description="Demo: kernelgd next to linear models, KernelRidge and SVC "
        "on scikit-learn's bundled datasets (75/25 split, standardized).",
    )
    parser.parse_args(argv)
    print(f"kernelgd {__version__}: kernel machines trained by gradient descent\n")
    print(format_table(run_demo()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
