"""Fits on a busy machine: Cal-16k quiet, then beside a process that keeps every core busy.

    python benchmarks/bench_threads.py --data-dir ../shared/data

Each system of bench_cal16k.py fits in fresh processes (median of --repeat
runs), first on a quiet machine, then while another process multiplies
matrices on every core with multithreaded OpenBLAS (a second scientific job).
The script prints both fit times and their ratio, and writes
benchmarks/results/threads.json. On a machine with c cores shared with a
job that wants all c, a fit that used every core quietly can expect about
twice its quiet time; multithreaded BLAS whose idle threads spin can be far
slower than that.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, run_repeated, write_json  # noqa: E402
from bench_cal16k import SYSTEMS  # noqa: E402

from kernelgd._operator import n_threads  # noqa: E402

DEFAULT = ["kernelgd", "kernelgd-eigenpro", "kernelgd-centers-4000", "krr-1thread", "nystroem-2000"]
BUSY = "import numpy as np\na = np.random.rand(1500, 1500)\nwhile True:\n    a @ a\n"


def start_busy(cores):
    """A process that keeps ``cores`` cores busy with multithreaded BLAS."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(cores), OMP_NUM_THREADS=str(cores))
    proc = subprocess.Popen([sys.executable, "-c", BUSY], env=env)
    time.sleep(2.0)  # let it start spinning
    return proc


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--systems", nargs="*", default=DEFAULT, choices=list(SYSTEMS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--out", default=str(HERE / "results" / "threads.json"))
    args = parser.parse_args(argv)
    if not (Path(args.data_dir) / "california_housing" / "housing.csv").exists():
        parser.error(f"no california_housing/housing.csv under --data-dir {args.data_dir}")

    script = HERE / "bench_cal16k.py"
    cores = n_threads()
    rows = []
    for name in args.systems:
        worker_args = [name, "--data-dir", args.data_dir]
        quiet = run_repeated(script, worker_args, args.timeout, args.repeat, slow=60.0)
        busy = start_busy(cores)
        try:
            loaded = run_repeated(script, worker_args, args.timeout, args.repeat, slow=60.0)
        finally:
            busy.kill()
            busy.wait()
        row = {"system": name, "description": SYSTEMS[name], "quiet": quiet, "loaded": loaded}
        if quiet.get("status") == loaded.get("status") == "ok":
            row.update(
                quiet_time=quiet["fit_time"], loaded_time=loaded["fit_time"],
                ratio=loaded["fit_time"] / quiet["fit_time"],
            )
        else:
            row["status"] = f"quiet: {quiet.get('status')}, loaded: {loaded.get('status')}"
        rows.append(row)
        print(f"  {name}: {row.get('ratio')}", file=sys.stderr, flush=True)
    columns = [
        ("description", "system", None), ("quiet_time", "quiet fit (s)", "{:.2f}"),
        ("loaded_time", f"beside a busy {cores}-core job (s)", "{:.2f}"),
        ("ratio", "ratio", "{:.2f}"), ("status", "status", None),
    ]
    print(format_table(rows, columns))
    path = write_json(args.out, {"machine": machine(), "busy_process": BUSY, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
