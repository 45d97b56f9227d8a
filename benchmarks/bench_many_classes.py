"""The squared loss's output layer with many classes: the default against the full layer and SVC.

    python benchmarks/bench_many_classes.py

``make_classification`` problems of 20 features (10 informative), one cluster per class, from 5 classes on
400 rows to 40 classes on 2,000, each split 70/30 (stratified) at 3 seeds and standardized on the training
rows. ``KernelGDClassifier()`` (whose output layer is a slope shared by the classes where the full layer's
``k (k + 1)`` numbers outnumber the distinct rows and the shared slope's cross-validated log-loss is lower),
the same with the full layer always (``_combiner.SHARED_ROWS_PER_NUMBER = 0``), ``SVC()`` and
``SVC(probability=True)``, each fitted in the same run: test accuracy and log-loss, and which layer the default
kept. Prints a table and writes benchmarks/results/many_classes.json.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

PROBLEMS = [(400, 5), (300, 10), (600, 10), (1000, 20), (3000, 30), (2000, 40)]


def run(n, k, seed):
    """One problem's row: each system's test accuracy and log-loss."""
    from sklearn.datasets import make_classification
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    from kernelgd import KernelGDClassifier, _combiner

    X, y = make_classification(n, 20, n_informative=10, n_redundant=0, n_classes=k, n_clusters_per_class=1,
                               random_state=seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    row = {"n_train": len(y_tr), "classes": k, "seed": seed, "rows_per_number": len(y_tr) / (k * (k + 1))}
    default = KernelGDClassifier(random_state=seed).fit(X_tr, y_tr)
    coef = default.combiner_.coef_
    row["layer"] = "shared" if np.allclose(coef, coef[0, 0] * np.eye(k)) else "full"
    kept = _combiner.SHARED_ROWS_PER_NUMBER
    _combiner.SHARED_ROWS_PER_NUMBER = 0
    try:
        full = KernelGDClassifier(random_state=seed).fit(X_tr, y_tr)
    finally:
        _combiner.SHARED_ROWS_PER_NUMBER = kept
    svc = SVC().fit(X_tr, y_tr)
    platt = SVC(probability=True, random_state=0).fit(X_tr, y_tr)
    for name, model in (("default", default), ("full", full)):
        row[f"{name}_accuracy"] = model.score(X_te, y_te)
        row[f"{name}_log_loss"] = log_loss(y_te, model.predict_proba(X_te), labels=model.classes_)
    row["svc_accuracy"] = svc.score(X_te, y_te)
    row["platt_log_loss"] = log_loss(y_te, platt.predict_proba(X_te), labels=platt.classes_)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "many_classes.json"))
    args = parser.parse_args()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SVC(probability=True)'s and the labels' notices; kernelgd's fits are quiet
        for n, k in PROBLEMS:
            for seed in range(args.seeds):
                rows.append(run(n, k, seed))
                print(rows[-1], flush=True)
    columns = [("n_train", "n", "{:,}"), ("classes", "classes", "{}"), ("seed", "seed", "{}"),
               ("rows_per_number", "rows / number", "{:.2f}"), ("layer", "default's layer", None),
               ("default_accuracy", "default acc", "{:.4f}"), ("full_accuracy", "full layer acc", "{:.4f}"),
               ("svc_accuracy", "SVC() acc", "{:.4f}"), ("default_log_loss", "default log-loss", "{:.3f}"),
               ("full_log_loss", "full layer log-loss", "{:.3f}"), ("platt_log_loss", "SVC(prob) log-loss", "{:.3f}")]
    print(format_table(rows, columns))
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
