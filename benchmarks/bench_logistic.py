"""Kernel logistic regression against probabilistic kernel classifiers.

    python benchmarks/bench_logistic.py --data-dir ../shared/data

Sets: mnist (the first 8,000 of MNIST's test images train, the last 2,000
test; pixels / 255), letter (first 16,000 / last 4,000 rows, standardized)
and adult (adult.data / adult.test; numeric columns standardized and
categorical ones one-hot encoded in a Pipeline). Systems: kernelgd
``loss="logistic"`` (the exact model; with ``--systems kernelgd-centers``
restricted to 2,000 centers, as many basis functions as the Nystroem peer),
SVC in CalibratedClassifierCV (3 folds), Nystroem(2000) +
LogisticRegression, and, with ``--systems gpc``,
GaussianProcessClassifier (which tunes its own length scale; killed after
--timeout seconds).

Every system gets the same budget of hyperparameters, chosen once per set
on a validation split (the last 20% of a stratified shuffle of the training
part, by validation log-loss): rbf widths ``sigma^2 = s * n_features *
Var(X)`` for s in {1/4, 1, 4} and ridge ``alpha`` in {1e-5, 1e-4, 1e-3} per
sample (``C = 1 / (2 alpha n)`` for the peers), or the grid given by
``--widths`` and ``--alphas``. The chosen configuration is
then refitted on the whole training part. Each (set, system) runs in its own
process; the script prints test log-loss, accuracy, the refit's time, the
search's time and the chosen hyperparameters, and writes
benchmarks/results/logistic.json.

With ``--refit-from RESULTS.json --repeat R`` there is no search: every
system of that file refits the configuration it chose there, in fresh
processes, the systems alternating R times, and the median refit time is
reported (one run's times carry the machine's drift; alternation shares it).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, run_worker, write_json  # noqa: E402

SETS = ["mnist", "letter", "adult"]
SYSTEMS = {
    "kernelgd": "kernelgd KernelGDClassifier(loss='logistic', n_centers=None)",
    "kernelgd-centers": "kernelgd KernelGDClassifier(loss='logistic', n_centers=2000)",
    "svc-calibrated": "SVC + CalibratedClassifierCV(cv=3)",
    "nystroem-lr": "Nystroem(2000) + LogisticRegression",
    "gpc": "GaussianProcessClassifier (RBF, own length scale)",
}
WIDTHS = [0.25, 1.0, 4.0]
ALPHAS = [1e-5, 1e-4, 1e-3]


def load(name, data_dir):
    import datasets

    if name == "mnist":
        return datasets.load_mnist8k(data_dir) + (None,)
    if name == "letter":
        return datasets.load_letter(data_dir) + (None,)
    return datasets.load_adult(data_dir) + (datasets.adult_preprocessor(),)


def base_sigma2(X):
    """n_features * the mean variance of the columns (sparse-aware)."""
    import scipy.sparse as sp
    from sklearn.utils.sparsefuncs import mean_variance_axis

    var = mean_variance_axis(sp.csr_matrix(X), axis=0)[1] if sp.issparse(X) else np.var(X, axis=0)
    return X.shape[1] * float(np.mean(var))


def make_model(system, sigma2, alpha, n):
    gamma, C = 1.0 / sigma2, 1.0 / (2.0 * alpha * n)
    if system == "kernelgd":
        from kernelgd import KernelGDClassifier

        # the exact model on every set (n_centers="auto" would take centers on adult's 32,560 rows)
        return KernelGDClassifier(loss="logistic", sigma=np.sqrt(sigma2), alpha=alpha, n_centers=None,
                                  random_state=0)
    if system == "kernelgd-centers":  # the same budget of basis functions as Nystroem(2000)
        from kernelgd import KernelGDClassifier

        return KernelGDClassifier(loss="logistic", sigma=np.sqrt(sigma2), alpha=alpha, n_centers=2000,
                                  random_state=0)
    if system == "svc-calibrated":
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.svm import SVC

        return CalibratedClassifierCV(SVC(C=C, gamma=gamma, cache_size=2000), cv=3)
    if system == "nystroem-lr":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        return make_pipeline(Nystroem(gamma=gamma, n_components=2000, random_state=0),
                             LogisticRegression(C=C, max_iter=1000))
    if system == "gpc":
        from sklearn.gaussian_process import GaussianProcessClassifier
        from sklearn.gaussian_process.kernels import RBF

        return GaussianProcessClassifier(RBF(length_scale=np.sqrt(sigma2 / 2)), random_state=0)
    raise ValueError(system)


def worker(set_name, system, data_dir, widths=WIDTHS, alphas=ALPHAS, fixed=None):
    from sklearn.metrics import accuracy_score, log_loss
    from sklearn.model_selection import train_test_split

    X, y, X_test, y_test, pre = load(set_name, data_dir)
    if pre is not None:  # adult: the encoding is fitted on the training part only
        pre.fit(X)
        X, X_test = pre.transform(X), pre.transform(X_test)
    sigma2_0 = base_sigma2(X)
    X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    grid = [(s, None) for s in widths] if system == "gpc" else [(s, a) for s in widths for a in alphas]
    if fixed is not None:  # a chosen configuration: refit only
        grid = []
    start, scores = time.perf_counter(), []
    for s, a in grid:
        model = make_model(system, s * sigma2_0, a or 1e-4, X_fit.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_fit, y_fit)
        scores.append(log_loss(y_val, model.predict_proba(X_val), labels=np.unique(y)))
    search_time = None if fixed is not None else time.perf_counter() - start
    s, a = fixed if fixed is not None else grid[int(np.argmin(scores))]
    model = make_model(system, s * sigma2_0, a or 1e-4, X.shape[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
    P = model.predict_proba(X_test)
    print(json.dumps({
        "test_log_loss": float(log_loss(y_test, P, labels=model.classes_)),
        "test_accuracy": float(accuracy_score(y_test, model.classes_[P.argmax(axis=1)])),
        "fit_time": fit_time, "search_time": search_time,
        "sigma2": s * sigma2_0, "width_factor": s, "alpha": a,
        "validation_log_losses": scores,
        "n_iter": int(model.n_iter_) if system.startswith("kernelgd") else None,  # the refit's Newton steps
        "warnings": sorted({str(w.message)[:120] for w in caught}),
    }))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="*", default=SETS, choices=SETS)
    parser.add_argument("--systems", nargs="*", default=["kernelgd", "svc-calibrated", "nystroem-lr"],
                        choices=list(SYSTEMS))
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per (set, system), search included")
    parser.add_argument("--out", default=str(HERE / "results" / "logistic.json"))
    parser.add_argument("--widths", nargs="*", type=float, default=WIDTHS, help="sigma^2 factors of the grid")
    parser.add_argument("--alphas", nargs="*", type=float, default=ALPHAS, help="ridges of the grid")
    parser.add_argument("--refit-from", help="a results file: refit its chosen configurations, no search")
    parser.add_argument("--repeat", type=int, default=3, help="alternating refits per system (--refit-from)")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--fixed", nargs=2, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.data_dir, args.widths, args.alphas, args.fixed)
    if args.refit_from:
        return refit_only(args)
    grid_args = ["--widths", *map(str, args.widths), "--alphas", *map(str, args.alphas)]

    rows = []
    for set_name in args.sets:
        for system in args.systems:
            result = run_worker(__file__, [set_name, system, "--data-dir", args.data_dir, *grid_args], args.timeout)
            rows.append({"set": set_name, "system": system, "description": SYSTEMS[system], **result})
            print(f"  {set_name} {system}: {result}", file=sys.stderr, flush=True)
    columns = [
        ("set", "set", None), ("description", "system", None),
        ("test_log_loss", "test log-loss", "{:.4f}"), ("test_accuracy", "accuracy", "{:.4f}"),
        ("fit_time", "refit (s)", "{:.1f}"), ("search_time", "search (s)", "{:.1f}"),
        ("width_factor", "sigma^2 factor", "{:g}"), ("alpha", "alpha", "{:g}"), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    path = write_json(args.out, {"machine": machine(), "widths": args.widths, "alphas": args.alphas, "rows": rows})
    print(f"wrote {path}")


def refit_only(args):
    """Refit each chosen configuration of ``args.refit_from``, the systems alternating in fresh processes."""
    source = json.loads(Path(args.refit_from).read_text())
    chosen = [r for r in source["rows"] if r.get("status") == "ok" and r["system"] != "gpc"]
    times = {(r["set"], r["system"]): [] for r in chosen}
    last = {}
    for _ in range(args.repeat):
        for r in chosen:
            fixed = ["--fixed", str(r["width_factor"]), str(r["alpha"])]
            result = run_worker(__file__, [r["set"], r["system"], "--data-dir", args.data_dir, *fixed], args.timeout)
            print(f"  {r['set']} {r['system']}: {result}", file=sys.stderr, flush=True)
            if result["status"] == "ok":
                times[r["set"], r["system"]].append(result["fit_time"])
                last[r["set"], r["system"]] = result
    rows = []
    for r in chosen:
        key = (r["set"], r["system"])
        result = last.get(key, {"status": "failed"})
        rows.append({"set": r["set"], "system": r["system"], "description": SYSTEMS[r["system"]],
                     "status": result["status"], "test_log_loss": result.get("test_log_loss"),
                     "test_accuracy": result.get("test_accuracy"), "width_factor": r["width_factor"],
                     "alpha": r["alpha"], "fit_times": times[key],
                     "fit_time": float(np.median(times[key])) if times[key] else None})
    columns = [
        ("set", "set", None), ("description", "system", None),
        ("test_log_loss", "test log-loss", "{:.4f}"), ("test_accuracy", "accuracy", "{:.4f}"),
        ("fit_time", "refit (s, median)", "{:.1f}"), ("width_factor", "sigma^2 factor", "{:g}"),
        ("alpha", "alpha", "{:g}"), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    path = write_json(args.out, {"machine": machine(), "refit_from": Path(args.refit_from).name,
                                 "repeat": args.repeat, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
