"""What each part of the logistic default's small-set rule buys: widths, exact scores, both.

    python benchmarks/bench_loo_width.py            # bundled sets, no data folder needed

On sets whose Newton system is small (iris, wine, breast cancer: a few hundred
rows), ``KernelGDClassifier(loss="logistic")`` fits ridges around its rule's
and keeps one by leave-one-out log-loss, at 1, 1.41 and 2 times
``sigma="scale"``'s width, the losses exact where the one Newton step is long.
Each variant below takes a part away (by setting the module constants the
rule reads), fitted in one run after a ``StandardScaler``, every argument at
its default, against ``SVC(probability=True)``: test log-loss and fit seconds,
the mean over 10 random stratified 70/30 splits (``--splits``). Writes
benchmarks/results/loo_width.json.
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

SETS = ["iris", "wine", "breast_cancer"]
# variant: the _loo_ridge / _logistic_loo constants it sets (the default sets none)
VARIANTS = {
    "default": {},
    "sigma='scale' only": {"WIDTHS": (1.0,)},
    "one-step scores only": {"FAR": np.inf},
    "sigma='scale', one-step scores": {"WIDTHS": (1.0,), "FAR": np.inf},
}


def fit_score(make, X_tr, y_tr, X_te, y_te):
    """``(log-loss, fit seconds)`` of ``make()`` after a StandardScaler."""
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), make())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC(probability=True), deprecated in scikit-learn 1.9
        start = time.perf_counter()
        model.fit(X_tr, y_tr)
        seconds = time.perf_counter() - start
    return log_loss(y_te, model.predict_proba(X_te), labels=model.classes_), seconds


def main():
    import bench_defaults
    from sklearn.svm import SVC

    from kernelgd import KernelGDClassifier, _logistic_loo, _loo_ridge

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=SETS)
    parser.add_argument("--splits", type=int, default=10, help="random splits averaged")
    parser.add_argument("--out", default=str(HERE / "results" / "loo_width.json"))
    args = parser.parse_args()
    saved = {name: getattr(module, name) for module in (_loo_ridge, _logistic_loo) for name in ("WIDTHS", "FAR")
             if hasattr(module, name)}
    rows = []
    for name in args.sets:
        _, parts, _ = bench_defaults.load(name, None, splits=1, bundled_splits=args.splits)
        systems = {variant: lambda: KernelGDClassifier(loss="logistic") for variant in VARIANTS}
        systems["SVC(probability=True)"] = lambda: SVC(probability=True)
        for system, make in systems.items():
            for key, value in VARIANTS.get(system, {}).items():
                setattr(_loo_ridge if key == "WIDTHS" else _logistic_loo, key, value)
            try:
                scores = np.array([fit_score(make, *part) for part in parts])
            finally:
                for key, value in saved.items():
                    setattr(_loo_ridge if key == "WIDTHS" else _logistic_loo, key, value)
            row = {"set": name, "system": system, "n_train": len(parts[0][1]), "splits": len(parts),
                   "log_loss": float(scores[:, 0].mean()), "fit_s": float(scores[:, 1].mean())}
            rows.append(row)
            print(row, flush=True)
    columns = [("set", "set", None), ("n_train", "n", "{:,}"), ("system", "system", None),
               ("log_loss", "log-loss", "{:.4f}"), ("fit_s", "fit s", "{:.2f}")]
    print(format_table(rows, columns))
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
