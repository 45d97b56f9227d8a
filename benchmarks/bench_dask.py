"""A fit on a Dask LocalCluster from files on disk, against the in-memory fit of the same rows.

    python benchmarks/bench_dask.py [--n 2000000] [--n-centers 1000] [--chunk 100000]
                                    [--workers 2] [--data-dir /tmp/kernelgd-bench-dask]

The set is benchmarks/datasets.make_logistic_synthetic (10 Gaussian features, two overlapping
classes; 20,000 test rows), standardized and written to --data-dir as .npy stacks of --chunk
rows (``dask.array.to_npy_stack``). Systems, each in its own process:

* ``dask``: a ``distributed.LocalCluster`` of --workers single-threaded worker processes on the
  loopback; ``KernelGDClassifier(loss="logistic", n_centers=...)`` fitted on
  ``dask.array.from_npy_stack``: the workers read the blocks, and every pass over the rows is
  one map-reduce;
* ``in-memory``: the same rows loaded into one numpy array and the same estimator fitted on it
  (its default thread pool, one thread per core).

Prints fit time, passes over the rows and seconds per pass, peak resident memory of the fitting
process (for ``dask``: the client, which also runs the scheduler) and of each worker, test
log-loss and accuracy, and the largest difference between the two models' test probabilities;
writes benchmarks/results/dask.json.
"""

import argparse
import json
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, measure_fit, run_worker, write_json  # noqa: E402

SYSTEMS = ("dask", "in-memory")


def write_data(data_dir, n, chunk):
    """The standardized set as .npy stacks (X, y) and the test rows as .npy files."""
    import dask.array as da

    from datasets import make_logistic_synthetic

    data_dir = Path(data_dir)
    marker = data_dir / "ready"
    if marker.exists():
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    X, y, X_test, y_test = make_logistic_synthetic(n, 2)
    mean, std = X.mean(axis=0), X.std(axis=0)
    X, X_test = (X - mean) / std, (X_test - mean) / std
    for name, a in (("X", X), ("y", y)):
        da.to_npy_stack(str(data_dir / name), da.from_array(a, chunks=(chunk,) + a.shape[1:]))
    np.save(data_dir / "X_test.npy", X_test)
    np.save(data_dir / "y_test.npy", y_test)
    marker.write_text("")


def _peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)  # KiB on Linux


def worker(system, data_dir, n_centers, n_workers):
    import dask.array as da
    from sklearn.metrics import log_loss

    from kernelgd import KernelGDClassifier
    from kernelgd import _dask

    data_dir = Path(data_dir)
    X_test, y_test = np.load(data_dir / "X_test.npy"), np.load(data_dir / "y_test.npy")
    model = KernelGDClassifier(loss="logistic", n_centers=n_centers, random_state=0)
    passes = {"n": 0}
    record = {}
    warnings.simplefilter("ignore")
    if system == "dask":
        from distributed import Client, LocalCluster

        original = _dask.DaskBlocks._map_reduce

        def counted(self, *args):
            passes["n"] += 1
            record["kernel_stored"] = self.stored
            return original(self, *args)

        _dask.DaskBlocks._map_reduce = counted
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            X, y = da.from_npy_stack(str(data_dir / "X")), da.from_npy_stack(str(data_dir / "y"))
            _, timing = measure_fit(lambda: model.fit(X, y))
            record["worker_peak_gib"] = sorted(client.run(_peak_rss_gib).values())
            record["n_blocks"] = X.numblocks[0]
    else:
        from kernelgd._operator import KernelOperator

        X = np.concatenate([np.load(f) for f in sorted((data_dir / "X").glob("*.npy"), key=lambda p: int(p.stem))])
        y = np.concatenate([np.load(f) for f in sorted((data_dir / "y").glob("*.npy"), key=lambda p: int(p.stem))])
        for name in ("matvec", "rmatvec", "gram_matvec"):  # each one pass over K_nm

            def counted(self, *args, _original=getattr(KernelOperator, name)):
                passes["n"] += 1
                return _original(self, *args)

            setattr(KernelOperator, name, counted)
        _, timing = measure_fit(lambda: model.fit(X, y))
    proba = model.predict_proba(X_test)
    np.save(data_dir / f"proba-{system}.npy", proba)
    print(json.dumps({
        **timing, **record, "passes": passes["n"], "n_iter": int(model.n_iter_), "n_rows": int(X.shape[0]),
        "n_centers": int(model.n_centers_), "client_peak_gib": _peak_rss_gib(),
        "test_log_loss": float(log_loss(y_test, proba)), "test_accuracy": float(np.mean(model.predict(X_test) == y_test)),
    }))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--n-centers", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--data-dir", default="/tmp/kernelgd-bench-dask")
    parser.add_argument("--timeout", type=int, default=5400, help="seconds per system")
    parser.add_argument("--out", default=str(HERE / "results" / "dask.json"))
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        system, data_dir, n_centers, n_workers = args.worker
        return worker(system, data_dir, int(n_centers), int(n_workers))
    data_dir = Path(args.data_dir) / f"n{args.n}-chunk{args.chunk}"
    start = time.perf_counter()
    write_data(data_dir, args.n, args.chunk)
    print(f"data in {data_dir} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    rows = []
    for system in args.systems:
        result = run_worker(__file__, [system, str(data_dir), str(args.n_centers), str(args.workers)], args.timeout)
        if result.get("passes"):
            result["seconds_per_pass"] = result["fit_time"] / result["passes"]
        print(f"  {system}: {result}", file=sys.stderr, flush=True)
        rows.append({"system": system, **result})
    probas = {s: data_dir / f"proba-{s}.npy" for s in args.systems}
    if all(p.exists() for p in probas.values()) and len(probas) == 2:
        rows[0]["max_proba_difference"] = float(np.max(np.abs(np.load(probas["dask"]) - np.load(probas["in-memory"]))))
    settings = {"n": args.n, "n_centers": args.n_centers, "chunk": args.chunk, "workers": args.workers}
    write_json(args.out, {"machine": machine(), "settings": settings, "rows": rows})
    for row in rows:
        row["worker_peak"] = " / ".join(f"{v:.2f}" for v in row.get("worker_peak_gib", [])) or "-"
    print(format_table(rows, [
        ("system", "system", None), ("fit_time", "fit (s)", "{:.1f}"), ("passes", "passes", None),
        ("seconds_per_pass", "s/pass", "{:.2f}"), ("client_peak_gib", "fitting process peak (GiB)", "{:.2f}"),
        ("worker_peak", "worker peaks (GiB)", None), ("test_log_loss", "test log-loss", "{:.4f}"),
        ("test_accuracy", "accuracy", "{:.4f}"), ("max_proba_difference", "max |p - p_mem|", "{:.1e}"),
        ("status", "status", None),
    ]))


if __name__ == "__main__":
    main()
