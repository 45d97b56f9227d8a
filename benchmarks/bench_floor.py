"""Where a default misses its time goal: how much of its fit is the kernel matrix's own cost.

    python benchmarks/bench_floor.py --data-dir ../shared/data
    python benchmarks/bench_floor.py --sets hastie gaussian_quantiles      # no data folder needed
    python benchmarks/bench_floor.py --sets gaussian_quantiles --merge    # replaces those sets' rows only

Each default estimator is fitted as in bench_defaults.py (a StandardScaler
pipeline, every argument at its default; UCI sets: their first split), with
the kernel operator of the training rows instrumented: the time spent
building it (evaluating a stored K), the number of products the solver takes
with it (``matvec`` and ``rmatvec``, each one pass over K) and their time.
The sum of the two is the floor of this way of fitting: what the solver's own
passes over K cost, before choosing alpha, preconditioning or anything else
(the rest). The peer the goal names is fitted in the same run: ``SVC()`` for
``KernelGDClassifier()`` (goal: at most 1.5 times its time),
``SVC(probability=True)`` for the logistic loss (at most its time), and the
faster of ``SVR()`` and ``Nystroem(2000)`` + ``RidgeCV()`` for
``KernelGDRegressor()`` (at most 1.5 times). A floor above the goal's bound
means the goal needs fewer passes over K, or a cheaper K, than this solver
takes; a floor below it, that the rest is what to cut. The estimator is then
refitted once more, cold, with the kernel, width, ridge and tolerance its
default fit chose set as its arguments: what a user who knew them would wait.
Where that one fit is above the goal, parameters known in advance miss it too.
Default sets: the sets of at least 5,000 training rows where bench_defaults.py
has found a default past its time goal. Writes benchmarks/results/floor.json.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

SETS = ["letter", "hastie", "gaussian_quantiles", "noisy_classes", "uci_kin8nm", "uci_naval-propulsion-plant"]
# (system, peers whose fastest sets the goal, the goal's factor on that time)
GOALS = {
    "classification": [("KernelGDClassifier()", ["SVC()"], 1.5),
                       ("KernelGDClassifier(loss='logistic')", ["SVC(probability=True)"], 1.0)],
    "regression": [("KernelGDRegressor()", ["SVR()", "Nystroem(2000) + RidgeCV()"], 1.5)],
}


class Probe:
    """Times the kernel operators of ``n`` rows: their construction and every product with them."""

    def __init__(self, n):
        self.n, self.build_s, self.products, self.products_s = n, 0.0, 0, 0.0

    def __enter__(self):
        from kernelgd._operator import KernelOperator

        self.saved = {name: getattr(KernelOperator, name) for name in ("__init__", "matvec", "rmatvec")}
        probe = self

        def timed(name):
            original = self.saved[name]

            def method(operator, *args, **kwargs):
                start = time.perf_counter()
                out = original(operator, *args, **kwargs)
                if operator.n == probe.n:  # the training rows' operator, not a subsample's
                    if name == "__init__":
                        probe.build_s += time.perf_counter() - start
                    else:
                        probe.products += 1
                        probe.products_s += time.perf_counter() - start
                return out

            return method

        for name in self.saved:
            setattr(KernelOperator, name, timed(name))
        return self

    def __exit__(self, *exc):
        from kernelgd._operator import KernelOperator

        for name, method in self.saved.items():
            setattr(KernelOperator, name, method)


def fit_time(make, preprocessor, X, y, probe=None):
    """``(seconds, pipeline)``: a fresh pipeline of ``preprocessor()`` and ``make()`` fitted to X, y."""
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(preprocessor(), make())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        if probe is None:
            model.fit(X, y)
        else:
            with probe:
                model.fit(X, y)
        return time.perf_counter() - start, model


def chosen(model):
    """A kernelgd pipeline's estimator, unfitted, with the kernel, width, ridge and tolerance its fit chose."""
    from sklearn.base import clone

    fitted = model[-1]
    return lambda: clone(fitted).set_params(kernel=fitted.kernel_, sigma=fitted.sigma_, alpha=fitted.alpha_,
                                            tol=fitted.tol_)


def main():
    import bench_defaults

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="the shared data folder (generated sets need none)")
    parser.add_argument("--sets", nargs="+", default=None, help="default: " + " ".join(SETS))
    parser.add_argument("--out", default=str(HERE / "results" / "floor.json"))
    parser.add_argument("--merge", action="store_true", help="keep the other sets' rows of an existing --out")
    args = parser.parse_args()
    sets = args.sets or (SETS if args.data_dir else bench_defaults.GENERATED)
    kept = []
    if args.merge and Path(args.out).exists():
        import json

        previous = json.loads(Path(args.out).read_text())
        kept = [dict(row, cpu=row.get("cpu", previous["machine"]["cpu"])) for row in previous["rows"]
                if row["set"] not in sets]
    cpu = machine()["cpu"]  # each row names its machine: a merge may add rows from another
    rows = []
    for name in sets:
        task, parts, preprocessor = bench_defaults.load(name, args.data_dir, splits=1)
        X, y = parts[0][:2]
        systems = {**bench_defaults.classifiers(), **bench_defaults.regressors()}
        peer_times = {}
        for system, peers, factor in GOALS[task]:
            for peer in peers:
                if peer not in peer_times:
                    peer_times[peer] = fit_time(systems[peer], preprocessor, X, y)[0]
            probe = Probe(len(y))
            fit_s, model = fit_time(systems[system], preprocessor, X, y, probe)
            one_fit_s = fit_time(chosen(model), preprocessor, X, y)[0]
            peer = min(peers, key=peer_times.get)
            floor_s = probe.build_s + probe.products_s
            bound_s = factor * peer_times[peer]
            row = {"set": name, "system": system, "n_train": len(y), "cpu": cpu, "fit_s": fit_s,
                   "build_s": probe.build_s,
                   "products": probe.products, "products_s": probe.products_s, "floor_s": floor_s,
                   "rest_s": fit_s - floor_s, "peer": peer, "peer_s": peer_times[peer], "bound_s": bound_s,
                   "floor_over_bound": floor_s / bound_s, "one_fit_s": one_fit_s,
                   "one_fit_over_bound": one_fit_s / bound_s}
            rows.append(row)
            print(row, flush=True)
    columns = [("set", "set", None), ("system", "system", None), ("n_train", "n", "{:,}"), ("fit_s", "fit s", "{:.2f}"),
               ("build_s", "K built s", "{:.2f}"), ("products", "products", "{}"),
               ("products_s", "products s", "{:.2f}"), ("floor_s", "floor s", "{:.2f}"),
               ("rest_s", "rest s", "{:.2f}"), ("peer", "peer", None), ("peer_s", "peer s", "{:.2f}"),
               ("bound_s", "goal s", "{:.2f}"), ("floor_over_bound", "floor / goal", "{:.2f}"),
               ("one_fit_s", "one fit s", "{:.2f}"), ("one_fit_over_bound", "one fit / goal", "{:.2f}")]
    print(format_table(rows, columns))
    order = {name: k for k, name in enumerate(SETS)}
    rows = sorted(kept + rows, key=lambda row: order.get(row["set"], len(order)))  # (a stable sort: systems in order)
    write_json(args.out, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
