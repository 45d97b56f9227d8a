"""The fused Triton Gaussian product against the generic blocks, on one CUDA device: entries per second.

    SCIPY_ARRAY_API=1 python benchmarks/bench_gpu_product.py               # 10^6 x 10^4, 20 features
    SCIPY_ARRAY_API=1 python benchmarks/bench_gpu_product.py --n 200000 --m 5000 --d 28

For each tile shape, warp count, precision of the products with V and of the
distances, and one column's product as a dot or a row sum, of
``kernelgd/_triton.py`` (``--configs``), one product ``K V`` (n rows, summed over m) and one ``K' U``
(m rows, summed over n) of a recomputed rbf K in float32, with V and U of k
columns: the time, kernel entries per second, and the largest error of the
first 256 rows against a float64 product of the same float32 inputs
(relative to 1 + |exact|). Then the operator's recomputed ``matvec`` and
``gram_matvec`` with the fused product and with the generic blocks
(``_triton.ENABLED = False``), in one process. Needs torch with CUDA and
Triton. Prints a table and writes benchmarks/results/gpu_product.json (or --out).
"""

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

# "cpu" checks the script under Triton's interpreter (TRITON_INTERPRET=1), at a small --n and --m.
DEVICE = os.environ.get("KGD_DEVICE", "cuda")
CONFIGS = ["128x64x4:ieee:ieee:dot", "128x64x4:ieee:ieee:sum", "128x64x4:ieee:tf32x3:sum", "128x128x8:ieee:tf32x3:sum",
           "64x128x4:ieee:tf32x3:sum", "256x64x8:ieee:tf32x3:sum", "128x64x4:tf32x3:tf32x3:sum"]


def _timed(torch, f, reps=3):
    f()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        f()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


def _exact(torch, A, B, V, rows=256, chunk=200_000):
    """``exp(-|a_i - b_j|^2) @ V`` in float64 for A's first rows."""
    A = A[:rows].double()
    out = 0
    for start in range(0, B.shape[0], chunk):
        Bs = B[start : start + chunk].double()
        sq = (A * A).sum(1)[:, None] + (Bs * Bs).sum(1)[None, :] - 2 * A @ Bs.T
        out = out + torch.exp(-sq.clamp_min(0)) @ V[start : start + chunk].double()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--m", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 8], help="columns of V and U")
    parser.add_argument("--configs", nargs="+", default=CONFIGS,
                        help="ROWSxCOLSxWARPS:PRECISION:DISTANCE_PRECISION:sum|dot")
    parser.add_argument("--out", default=str(HERE / "results" / "gpu_product.json"))
    args = parser.parse_args()
    import torch
    from sklearn import config_context

    from kernelgd import _triton
    from kernelgd._operator import KernelOperator
    from kernelgd.kernels import bind_kernel

    n, m, d = args.n, args.m, args.d
    generator = torch.Generator(device=DEVICE).manual_seed(0)
    X = torch.randn(n, d, device=DEVICE, generator=generator) * (2 / d**0.5)
    C = X[torch.randperm(n, device=DEVICE, generator=generator)[:m]].clone()
    x_norms, c_norms = (X * X).sum(1), (C * C).sum(1)
    settings = ("BLOCK_ROWS", "BLOCK_COLS", "WARPS", "PRECISION", "DISTANCE_PRECISION", "COLUMN_SUM")
    defaults = {name: getattr(_triton, name) for name in settings}
    rows = []
    for k in args.k:
        V = torch.randn(m, k, device=DEVICE, dtype=torch.float64, generator=generator)
        U = torch.randn(n, k, device=DEVICE, dtype=torch.float64, generator=generator)
        exact, exact_t = _exact(torch, X, C, V), _exact(torch, C, X, U)
        for config in args.configs:
            shape, precision, distance_precision, column = config.split(":")
            _triton.BLOCK_ROWS, _triton.BLOCK_COLS, _triton.WARPS = map(int, shape.split("x"))
            _triton.PRECISION, _triton.DISTANCE_PRECISION = precision, distance_precision
            _triton.COLUMN_SUM = column == "sum"
            errors = []
            for A, B, a, b, W, ref in ((X, C, x_norms, c_norms, V, exact), (C, X, c_norms, x_norms, U, exact_t)):
                got = _triton.gaussian_product(A, B, a, b, W)[:256]
                errors.append(float(((got - ref).abs() / (ref.abs() + 1)).max()))
            seconds = _timed(torch, lambda: _triton.gaussian_product(X, C, x_norms, c_norms, V))
            seconds_t = _timed(torch, lambda: _triton.gaussian_product(C, X, c_norms, x_norms, U))
            rows.append({"product": "fused", "config": config, "k": k, "seconds": seconds, "entries_per_s": n * m / seconds,
                         "error": errors[0], "seconds_t": seconds_t, "entries_per_s_t": n * m / seconds_t,
                         "error_t": errors[1]})
            print(format_table([rows[-1]], COLUMNS).splitlines()[-1], flush=True)
    for name, value in defaults.items():
        setattr(_triton, name, value)
    budget = int(torch.cuda.mem_get_info()[0] // 2) if DEVICE == "cuda" else 1 << 30
    with config_context(array_api_dispatch=True):
        for enabled in (True, False):
            _triton.ENABLED = enabled
            op = KernelOperator(X, bind_kernel("rbf", sigma=1.0), centers=C, store=False, dtype="float32",
                                memory_budget=budget)
            V = torch.ones(m, 1, device=DEVICE, dtype=torch.float64)
            w = torch.full((n,), 1.0 / n, device=DEVICE, dtype=torch.float64)
            seconds = _timed(torch, lambda: op.matvec(V), reps=2)
            rows.append({"product": "operator, " + ("fused" if enabled else "blocks"), "k": 1, "seconds": seconds,
                         "entries_per_s": n * m / seconds,
                         "gram_seconds": _timed(torch, lambda: op.gram_matvec(V, w), reps=2)})
            print(format_table([rows[-1]], COLUMNS).splitlines()[-1], flush=True)
    _triton.ENABLED = True
    print()
    print(format_table(rows, COLUMNS))
    payload = {"machine": machine(), "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu", "n": n, "m": m, "d": d, "rows": rows}
    print(f"\nwrote {write_json(args.out, payload)}")


COLUMNS = [
    ("product", "product", None), ("config", "tile x warps : precision : distances' : one column", None), ("k", "k", None),
    ("seconds", "K V (s)", "{:.4f}"), ("entries_per_s", "entries / s", "{:.3g}"), ("error", "error", "{:.1e}"),
    ("seconds_t", "K'U (s)", "{:.4f}"), ("entries_per_s_t", "entries / s", "{:.3g}"), ("error_t", "error", "{:.1e}"),
    ("gram_seconds", "gram_matvec (s)", "{:.4f}"),
]


if __name__ == "__main__":
    main()
