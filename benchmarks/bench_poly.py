"""The polynomial kernel's scale: sigma="scale" against the unscaled kernel and SVC(kernel="poly").

    python benchmarks/bench_poly.py                      # breast_cancer, wine, digits
    python benchmarks/bench_poly.py --data-dir ../shared/data --sets letter mnist

The polynomial kernel is ``(coef0 + x'z / sigma**2) ** degree``; the
estimators' default ``sigma="scale"`` sets ``sigma**2 = n_features *
X.var()``, SVC's ``gamma="scale"``. ``sigma=1`` is the kernel on X as it
is. Every system is fitted with its other arguments at their defaults
(KernelGDClassifier with ``loss="logistic"``), after the preprocessing of
``bench_default_alpha.py`` (StandardScaler; MNIST: pixels / 255), on the
same sets and splits. Prints accuracy, log-loss, fit time and the warnings
a fit raised, and writes benchmarks/results/poly.json.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402
from bench_default_alpha import LARGE, SMALL, run_large, run_small  # noqa: E402

SETS = SMALL + [name for name in LARGE if name != "adult"]


def systems():
    from sklearn.svm import SVC

    from kernelgd import KernelGDClassifier

    return {
        "SVC(kernel='poly')": lambda n: SVC(kernel="poly"),
        "kernelgd poly, sigma='scale' (default)": lambda n: KernelGDClassifier(kernel="poly", loss="logistic"),
        "kernelgd poly, sigma=1 (X as it is)": lambda n: KernelGDClassifier(kernel="poly", loss="logistic", sigma=1.0),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sets", nargs="+", default=None, choices=SETS)
    parser.add_argument("--out", default=str(HERE / "results" / "poly.json"))
    args = parser.parse_args(argv)
    sets = args.sets or SMALL  # letter's default poly fit takes minutes
    rows = []
    for name in sets:
        for system, make in systems().items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.perf_counter()
                if name in SMALL:
                    accuracy, loss, fit_time = run_small(name, make)
                else:
                    accuracy, loss, fit_time = run_large(name, make, args.data_dir)
                wall = time.perf_counter() - start
            raised = sorted({f"{w.category.__name__}: {str(w.message)[:80]}" for w in caught})
            rows.append({"set": name, "system": system, "accuracy": accuracy, "log_loss": loss,
                         "fit_time": fit_time, "wall_time": wall, "warnings": raised})
            print(f"{name:14s} {system:40s} acc {accuracy:.4f} fit {fit_time:8.3f}s warnings {len(raised)}",
                  flush=True)
    for r in rows:
        r["n_warnings"] = len(r["warnings"])
    print(format_table(rows, [("set", "set", "{}"), ("system", "system", "{}"), ("accuracy", "accuracy", "{:.4f}"),
                              ("log_loss", "log-loss", "{:.3f}"), ("fit_time", "fit (s)", "{:.3f}"),
                              ("n_warnings", "warnings", "{}")]))
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
