"""Where a default misses its accuracy or log-loss goal: the best any nearby width and ridge reach.

    python benchmarks/bench_ceiling.py --data-dir ../shared/data
    python benchmarks/bench_ceiling.py --sets gaussian_quantiles hastie     # no data folder needed

Each default estimator is fitted as in bench_defaults.py (a StandardScaler
pipeline, every argument at its default; a bundled set: the mean over 10
random splits), and then refitted with its own kernel at every width ``sigma_ *
2**(j / 2)``, j = -1, 0, 1, and every ridge ``alpha_ * 4**i``, i = -2 to 2,
around what its rules chose. The best of those 15 fits on the test rows is the
ceiling: an oracle's choice (it reads the test rows), an upper bound on what
any rule for sigma and alpha near the defaults' could reach with this model.
The peer the goal names is fitted in the same run: ``SVC()`` for
``KernelGDClassifier()`` (accuracy), ``SVC(probability=True)`` for the
logistic loss (log-loss), the better of ``SVR()`` and ``Nystroem(2000)`` +
``RidgeCV()`` for ``KernelGDRegressor()`` (test RMSE, the target in its own
units; UCI sets: the mean over their first 3 splits). A ceiling that misses the peer means no width or
ridge near the rules' meets the goal, and the model (its loss, its kernel)
is what would have to change; a ceiling past the peer, that the rules for
sigma and alpha are what to improve. Default sets: those where
bench_defaults.py has found a default behind its peer's accuracy or
log-loss, and the logistic default on MNIST and hastie, ahead of its peer
there, to show how much further nearby widths and ridges go. Writes
benchmarks/results/ceiling.json.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

SETS = {  # set: (system, peer or peers (the better one counts), metric)
    "gaussian_quantiles": ("KernelGDClassifier()", "SVC()", "accuracy"),
    "noisy_classes": ("KernelGDClassifier()", "SVC()", "accuracy"),
    "uci_wine-quality-red": ("KernelGDRegressor()", ("SVR()", "Nystroem(2000) + RidgeCV()"), "rmse"),
    "mnist": ("KernelGDClassifier(loss='logistic')", "SVC(probability=True)", "log_loss"),
    "hastie": ("KernelGDClassifier(loss='logistic')", "SVC(probability=True)", "log_loss"),
}
WIDTHS = (-1, 0, 1)  # sigma_ * 2**(j / 2)
RIDGES = (-2, -1, 0, 1, 2)  # alpha_ * 4**i


def score(model, X_te, y_te, metric):
    from sklearn.metrics import accuracy_score, log_loss, mean_squared_error

    if metric == "accuracy":
        return accuracy_score(y_te, model.predict(X_te))
    if metric == "rmse":
        return float(np.sqrt(mean_squared_error(y_te, model.predict(X_te))))
    return log_loss(y_te, model.predict_proba(X_te), labels=model.classes_)


def fitted(make, preprocessor, X, y):
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(preprocessor(), make())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC(probability=True), deprecated in scikit-learn 1.9
        return model.fit(X, y)


def main():
    import bench_defaults

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="the shared data folder (bundled sets need none)")
    parser.add_argument("--sets", nargs="+", default=None, help="default: " + " ".join(SETS))
    parser.add_argument("--bundled-splits", type=int, default=10, help="random splits of a bundled set averaged")
    parser.add_argument("--merge", action="store_true", help="keep the other sets' rows of an existing --out")
    parser.add_argument("--out", default=str(HERE / "results" / "ceiling.json"))
    args = parser.parse_args()
    bundled = bench_defaults.BUNDLED + bench_defaults.GENERATED
    sets = args.sets or [name for name in SETS if args.data_dir or name in bundled]
    systems = {**bench_defaults.classifiers(), **bench_defaults.regressors()}
    rows, cpu = [], machine()["cpu"]  # each row names its machine: a merge may add rows from another
    for name in sets:
        system, peer_names, metric = SETS[name]
        peer_names = (peer_names,) if isinstance(peer_names, str) else peer_names
        _, parts, preprocessor = bench_defaults.load(name, args.data_dir, splits=3,
                                                     bundled_splits=args.bundled_splits)
        sign = 1.0 if metric == "accuracy" else -1.0  # higher is better
        default, peers, grid = [], {p: [] for p in peer_names}, np.zeros((len(WIDTHS), len(RIDGES)))
        for X_tr, y_tr, X_te, y_te in parts:
            model = fitted(systems[system], preprocessor, X_tr, y_tr)
            default.append(score(model, X_te, y_te, metric))
            for p in peer_names:
                peers[p].append(score(fitted(systems[p], preprocessor, X_tr, y_tr), X_te, y_te, metric))
            base = model[-1]
            for a, j in enumerate(WIDTHS):
                for b, i in enumerate(RIDGES):
                    params = dict(base.get_params(), kernel=base.kernel_, sigma=base.sigma_ * 2.0 ** (j / 2),
                                  alpha=base.alpha_ * 4.0**i)
                    grid[a, b] += score(fitted(lambda: type(base)(**params), preprocessor, X_tr, y_tr),
                                        X_te, y_te, metric) / len(parts)
        a, b = np.unravel_index(np.argmax(sign * grid), grid.shape)
        peer = max(peer_names, key=lambda p: sign * np.mean(peers[p]))
        row = {"set": name, "system": system, "metric": metric, "n_train": len(parts[0][1]), "splits": len(parts),
               "cpu": cpu,
               "default": float(np.mean(default)), "ceiling": float(grid[a, b]),
               "ceiling_sigma_factor": float(2.0 ** (WIDTHS[a] / 2)), "ceiling_alpha_factor": float(4.0 ** RIDGES[b]),
               "peer": peer, "peer_score": float(np.mean(peers[peer])),
               "ceiling_beats_peer": bool(sign * grid[a, b] >= sign * np.mean(peers[peer]))}
        rows.append(row)
        print(row, flush=True)
    if args.merge and Path(args.out).exists():
        import json

        ran, previous = {row["set"] for row in rows}, json.loads(Path(args.out).read_text())
        kept = [dict(row, cpu=row.get("cpu", previous["machine"]["cpu"])) for row in previous["rows"]
                if row["set"] not in ran]
        rows = sorted(kept + rows, key=lambda row: list(SETS).index(row["set"]))
    columns = [("set", "set", None), ("system", "system", None), ("metric", "metric", None),
               ("default", "default", "{:.4f}"), ("ceiling", "ceiling", "{:.4f}"),
               ("ceiling_sigma_factor", "sigma x", "{:.3g}"), ("ceiling_alpha_factor", "alpha x", "{:.3g}"),
               ("peer", "peer", None), ("peer_score", "peer's", "{:.4f}")]
    print(format_table(rows, columns))
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
