"""The defaults on random problems they were not tuned on, against the peer and the best fixed ridge.

    python benchmarks/bench_generated.py                      # every task, seeds 1 to 5
    python benchmarks/bench_generated.py --tasks logistic --seeds 3
    python benchmarks/bench_generated.py --tasks logistic --merge     # replaces that task's rows only

Each problem is drawn at random: 600 to 4,000 training rows (2,000 test rows) of 2 to 8
features, Gaussian, Student-t (3 degrees of freedom, heavy-tailed) or uniform, standardized
on the training rows; the target one of |x_0|, sin(2 x_0) + x_1^2 / 4, x_0 x_1 (classes
only), tanh(3 x_0 x_1) (regression only) and cos(x_0 + x_1 + ...), with noise (regression:
0.3% to 30% of its spread) or labels drawn at random (classification: none, 2% or 10%), cut
into 2, 3 or 5 classes of equal size at its quantiles.

* ``regression``: ``KernelGDRegressor()`` against ``SVR()``, test R^2;
* ``classification``: ``KernelGDClassifier()`` against ``SVC()``, test accuracy;
* ``logistic``: ``KernelGDClassifier(loss="logistic")`` against ``SVC(probability=True)``,
  test log-loss.

"best fixed" refits the default's kernel and width at each of the fixed ridges
``alpha`` in 1e-8 (1e-7 for classes) to 1e-3 and keeps the best on the test rows: an
oracle, the most a ridge rule could reach with that kernel. Every fit's warnings are
counted. Prints a table and writes benchmarks/results/generated.json.
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

CASES = 12  # problems per task and seed
FIXED = {"regression": [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3], "classification": [1e-7, 1e-6, 1e-5, 1e-4, 1e-3]}


def draw(rng, task, case):
    """``(X_train, y_train, X_test, y_test, description)`` of one random problem."""
    n = int(rng.choice([1200, 2000, 4000] if task == "regression" else [600, 1500, 3000]))
    d = int(rng.choice([2, 3, 5, 8]))
    classes = 0 if task == "regression" else int(rng.choice([2, 3, 5]))
    law = ["gaussian", "student-t", "uniform"][case % 3]
    X = {"gaussian": lambda: rng.randn(n + 2000, d), "student-t": lambda: rng.standard_t(3, (n + 2000, d)),
         "uniform": lambda: rng.rand(n + 2000, d) * 2 - 1}[law]()
    target = case % 4
    f = [np.abs(X[:, 0]), np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4,
         np.tanh(3 * X[:, 0] * X[:, 1]) if task == "regression" else X[:, 0] * X[:, 1], np.cos(X.sum(axis=1))][target]
    X = (X - X[:n].mean(axis=0)) / X[:n].std(axis=0)
    if task == "regression":
        noise = float(rng.choice([0.003, 0.03, 0.3]))
        y = f + noise * f.std() * rng.randn(len(f))
        what = f"noise {noise:g}"
    else:
        flip = float(rng.choice([0.0, 0.02, 0.1]))
        y = np.searchsorted(np.quantile(f[:n], np.linspace(0, 1, classes + 1)[1:-1]), f)
        y = np.where(rng.rand(len(y)) < flip, rng.randint(0, classes, len(y)), y)
        what = f"{classes} classes, {flip:g} drawn"
    names = ["abs(x0)", "sin", "tanh" if task == "regression" else "x0*x1", "cos"]
    return X[:n], y[:n], X[n:], y[n:], f"{law}, {names[target]}, {what}"


def fitted(make, X, y):
    """``(model, seconds, warnings)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model = make().fit(X, y)
        seconds = time.perf_counter() - start
    return model, seconds, sum(1 for w in caught if not issubclass(w.category, FutureWarning))


def run(task, seed):
    from sklearn.metrics import log_loss
    from sklearn.svm import SVC, SVR

    from kernelgd import KernelGDClassifier, KernelGDRegressor

    rng = np.random.RandomState(seed)
    rows = []
    for case in range(CASES):
        X, y, X_test, y_test, what = draw(rng, task, case)
        if task == "regression":
            ours, peer = (lambda: KernelGDRegressor(random_state=0)), (lambda: SVR())

            def score(model):
                return model.score(X_test, y_test)
        else:
            logistic = task == "logistic"
            ours = lambda: KernelGDClassifier(loss="logistic" if logistic else "squared", random_state=0)  # noqa: E731
            peer = (lambda: SVC(probability=True, random_state=0)) if logistic else (lambda: SVC())

            def score(model):
                if logistic:
                    return log_loss(y_test, model.predict_proba(X_test), labels=model.classes_)
                return model.score(X_test, y_test)

        model, seconds, warned = fitted(ours, X, y)
        rival, rival_seconds, _ = fitted(peer, X, y)  # (its warnings, SVC's deprecated probability, are not counted)
        params = dict(kernel=model.kernel_, sigma=model.sigma_, random_state=0)
        if task != "regression":
            params["loss"] = model.loss
        scores = []
        for alpha in FIXED["regression" if task == "regression" else "classification"]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scores.append(score(type(model)(alpha=alpha, **params).fit(X, y)))
        lower_is_better = task == "logistic"
        best = min(scores) if lower_is_better else max(scores)
        row = {"task": task, "seed": seed, "case": case, "n_train": len(y), "n_features": X.shape[1],
               "problem": what, "score": score(model), "peer_score": score(rival), "best_fixed": best,
               "alpha": model.alpha_, "kernel": str(model.kernel_), "fit_s": seconds, "peer_s": rival_seconds,
               "warnings": warned}
        row["behind_peer"] = (row["score"] - row["peer_score"]) if lower_is_better else (row["peer_score"] - row["score"])
        row["behind_best"] = (row["score"] - best) if lower_is_better else (best - row["score"])
        if task == "logistic":  # the squared loss's probabilities too: its output layer's, on left-out outputs
            layer, layer_seconds, layer_warned = fitted(lambda: KernelGDClassifier(random_state=0), X, y)
            row.update(layer_score=score(layer), layer_s=layer_seconds, layer_warnings=layer_warned)
            row["layer_behind_peer"] = row["layer_score"] - row["peer_score"]
        rows.append(row)
        print(row, flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["regression", "classification", "logistic"],
                        choices=["regression", "classification", "logistic"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--out", default=str(HERE / "results" / "generated.json"))
    parser.add_argument("--merge", action="store_true", help="keep the other tasks' rows of an existing --out")
    args = parser.parse_args()
    cpu = machine()["cpu"]  # each row names its machine: a merge may add rows from another
    rows = [dict(row, cpu=cpu) for task in args.tasks for seed in args.seeds for row in run(task, seed)]
    columns = [("task", "task", None), ("seed", "seed", "{}"), ("case", "case", "{}"), ("n_train", "n", "{:,}"),
               ("n_features", "d", "{}"), ("problem", "problem", None), ("score", "default", "{:.4f}"),
               ("peer_score", "peer", "{:.4f}"), ("best_fixed", "best fixed", "{:.4f}"), ("alpha", "alpha", "{:.2g}"),
               ("fit_s", "fit s", "{:.2f}"), ("peer_s", "peer s", "{:.2f}"), ("warnings", "warnings", "{}")]
    print(format_table(rows, columns))
    for task in args.tasks:
        own = [row for row in rows if row["task"] == task]
        if own:
            print(f"{task}: behind the peer on {sum(r['behind_peer'] > 0 for r in own)} of {len(own)}, "
                  f"largest {max(r['behind_peer'] for r in own):.4f}; behind the best fixed ridge by at most "
                  f"{max(r['behind_best'] for r in own):.4f}; {sum(r['warnings'] > 0 for r in own)} fits warned; "
                  f"slowest fit {max(r['fit_s'] for r in own):.1f} s")
    if args.merge and Path(args.out).exists():
        import json

        previous = json.loads(Path(args.out).read_text())
        kept = [dict(row, cpu=row.get("cpu", previous["machine"]["cpu"])) for row in previous["rows"]
                if row["task"] not in args.tasks]
        rows = sorted(kept + rows, key=lambda row: ["regression", "classification", "logistic"].index(row["task"]))
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
