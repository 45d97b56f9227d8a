"""The measurements behind KernelOperator's design choices.

    python benchmarks/bench_operator.py [--n 16000]

1. Kernel blocks on two threads with single-threaded BLAS, against one
   block at a time on multithreaded BLAS (the GEMM is thin, k = n_features,
   and numpy's exp is single-threaded).
2. K @ v from the upper triangle (BLAS symv) against the full matrix (gemv).
3. K @ V for thin V (2 columns): one gemv per column against one gemm.
4. scipy's symv right after a numpy product, against after a scipy product:
   numpy and scipy ship separate OpenBLAS builds whose idle threads spin.
5. K @ V for wide V (3, 4, 6, 10 and 26 columns, one per class of a
   multinomial fit; and 2 to 26 on a float64 K of 4,000 rows): a symv per
   column or one symm over the triangle, on one thread, against a GEMM per
   row half of the whole K on two pool threads (numpy's matmul, which
   releases the GIL; scipy's BLAS wrappers hold it), and the one-off cost
   of mirroring the triangle; each row half's GEMM also as ``(V' K_b')'``,
   which OpenBLAS runs faster in float64 and slower in float32.
   ``--wide-only`` runs this part alone.
6. K_nm.T (w * K_nm V), the centers solvers' product (--gram-rows x 2,000
   float64, 1 and 7 columns): a product with K_nm then one with K_nm.T,
   against KernelOperator.gram_matvec's one pass, which multiplies each
   cache-sized chunk of rows twice while it is in cache, on two threads;
   and that pass's chunk size and second product: ``K_c' W`` on 8 MiB
   chunks against ``(W' K_c)'`` on 2 MiB chunks (OpenBLAS then packs the
   thin W' rather than the chunk); and ``K_nm' U`` alone, a gemv per
   column on one thread against row halves on two. ``--gram-only`` runs
   this part alone.
7. ``KernelOperator.matvec`` of small stored matrices (500 to 4,000 rows,
   float64, as in a cross-validation search's folds; 6, 10 and 26 columns)
   inside a fit, where BLAS runs on one thread: split by rows over the
   pool against one BLAS call, which wins up to about 500 rows (2 MiB),
   where the pool's hand-off outweighs the product; kernelgd pools from
   4 MiB.
8. A symv over a stored float32 triangle of 16,000 rows (Cal-16k's
   product) on one BLAS thread, as in a fit, against two.
   ``--threads-only`` runs parts 7 and 8 alone.

Prints a table of median times and writes benchmarks/results/operator.json.
"""

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402


def median_time(func, repeat=5, before=None):
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def fused_pass(op, V, w, chunk_bytes, transposed):
    """One pass of gram_matvec over a stored K_nm, with a given chunk size and second product."""
    from sklearn.utils import gen_batches

    from kernelgd._operator import _pool, single_threaded_blas

    KV = np.empty((op.n, V.shape[1]))
    chunk = max(1, chunk_bytes // (op.m * op.itemsize))

    def product(batch):
        out = np.zeros((op.m, V.shape[1]))
        for rows in gen_batches(batch.stop - batch.start, chunk, min_batch_size=0):
            rows = slice(batch.start + rows.start, batch.start + rows.stop)
            block = op.K[rows]
            KV[rows] = block @ V
            W = w[rows, None] * KV[rows]
            out += (np.ascontiguousarray(W.T) @ block).T if transposed else block.T @ W
        return out

    halves = [slice(0, op.n // 2), slice(op.n // 2, op.n)]
    with single_threaded_blas():
        return np.sum(list(_pool(2).map(product, halves)), axis=0), KV


def gram_rows(n, rng, m=2000):
    from kernelgd._operator import KernelOperator, single_threaded_blas
    from kernelgd.kernels import bind_kernel

    X = rng.normal(size=(n, 10))
    op = KernelOperator(X, bind_kernel("rbf", sigma=3.0), centers=X[:m], dtype="float64", store=True)
    w = rng.uniform(size=n)
    out = []
    for k in [1, 7]:
        V = rng.normal(size=(m, k))

        def two_passes():
            op.rmatvec(w[:, None] * op.matvec(V))

        with single_threaded_blas():
            out += [
                {"measure": f"K_nm' w K_nm V ({n:,} x {m:,}, {k} col.): two passes",
                 "seconds": median_time(two_passes, 3)},
                {"measure": f"K_nm' w K_nm V ({n:,} x {m:,}, {k} col.): gram_matvec's fused pass",
                 "seconds": median_time(lambda: op.gram_matvec(V, w), 3)},
            ]
        U = rng.normal(size=(n, k))
        with single_threaded_blas():
            out.append({"measure": f"K_nm' U ({n:,} x {m:,}, {k} col.): K_nm.T on one thread",
                        "seconds": median_time(lambda: op.dot(op.K.T, U), 5)})
        out.append({"measure": f"K_nm' U ({n:,} x {m:,}, {k} col.): row halves on two threads (rmatvec)",
                    "seconds": median_time(lambda: op.rmatvec(U), 5)})
        for chunk_mib, transposed in [(8, False), (2, False), (8, True), (2, True)]:
            second = "(W' K_c)'" if transposed else "K_c' W"
            out.append({
                "measure": f"K_nm' w K_nm V ({n:,} x {m:,}, {k} col.): fused, {chunk_mib} MiB chunks, {second}",
                "seconds": median_time(lambda: fused_pass(op, V, w, chunk_mib << 20, transposed), 5)})
    return out


def thread_rows(sizes, columns, rng, n_symv=16000):
    """Parts 7 and 8: pooled against one-call products of small stored matrices (float64) on
    one BLAS thread, as inside a fit; a large triangle's symv on one and on two BLAS threads."""
    import kernelgd._operator as operator_module
    from kernelgd._operator import KernelOperator, single_threaded_blas

    rows = []
    for n in sizes:
        K = rng.rand(n, n)
        K = (K + K.T) / 2
        op = KernelOperator(K, None, threads=2)
        for k in columns:
            V = rng.rand(n, k)
            repeat = max(5, int(2e9 / (n * n * k)))
            for label, min_bytes in (("pooled", 0), ("one call", np.inf)):
                saved, operator_module.POOLED_MIN_BYTES = operator_module.POOLED_MIN_BYTES, min_bytes
                try:
                    with single_threaded_blas():
                        op.matvec(V)  # warm the pool and the caches
                        seconds = median_time(lambda: op.matvec(V), repeat)
                finally:
                    operator_module.POOLED_MIN_BYTES = saved
                rows.append({"measure": f"small K {n} x {n}, {k} columns: {label}", "seconds": seconds})
    K = rng.rand(n_symv, n_symv).astype(np.float32)
    v = rng.rand(n_symv).astype(np.float32)
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            seconds = median_time(lambda: blas.ssymv(1.0, K.T, v, lower=1), 7)
        rows.append({"measure": f"symv, {n_symv} x {n_symv} float32 triangle: {threads} BLAS thread(s)",
                     "seconds": seconds})
    return rows


def wide_rows(K, rng, columns=(3, 4, 6, 10, 26)):
    """Part 5 on the symmetric K: a symv per column and one symm over its triangle on one thread,
    against a GEMM per row half of the whole K on two pool threads."""
    n, kind = K.shape[0], "float32" if K.dtype == np.float32 else "float64"
    symv, symm = blas.get_blas_funcs(("symv", "symm"), (K,))
    halves = [slice(0, n // 2), slice(n // 2, n)]
    rows = []
    with ThreadPoolExecutor(2) as pool:

        def row_halves(W, transposed=False):
            out, Wt = np.empty_like(W), np.ascontiguousarray(W.T)

            def product(batch):  # K_b W, or as (W' K_b')' (K_b' a Fortran view: no copy)
                out[batch] = (Wt @ K[batch].T).T if transposed else K[batch] @ W

            with threadpool_limits(1):
                list(pool.map(product, halves))
            return out

        for k in columns:
            W = rng.normal(size=(n, k)).astype(K.dtype)
            label = f"K @ V ({n:,} rows, {kind}, {k} columns)"
            with threadpool_limits(1):
                rows += [
                    {"measure": f"{label}: a symv per column", "seconds": median_time(
                        lambda: [symv(1.0, K.T, W[:, j], lower=1) for j in range(k)])},
                    {"measure": f"{label}: one symm", "seconds": median_time(
                        lambda: symm(1.0, K.T, W, side=0, lower=1))},
                ]
            rows += [
                {"measure": f"{label}: row halves on two threads", "seconds": median_time(lambda: row_halves(W))},
                {"measure": f"{label}: row halves on two threads, as (V' K_b')'", "seconds": median_time(
                    lambda: row_halves(W, True))},
            ]
    return rows


def small_wide_rows(rng, n=4000):
    """Part 5 on a float64 K of ``n`` rows (the most "auto" computes in float64)."""
    X = rng.normal(size=(n, 8))
    sq = np.einsum("ij,ij->i", X, X)
    return wide_rows(np.exp(-0.5 * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0) / 8), rng,
                     (2, 3, 4, 6, 10, 26))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=16000)
    parser.add_argument("--gram-rows", type=int, default=200_000)
    parser.add_argument("--out", default=str(HERE / "results" / "operator.json"))
    parser.add_argument("--gram-centers", type=int, default=2000)
    parser.add_argument("--gram-only", action="store_true", help="only the centers' product (part 6)")
    parser.add_argument("--threads-only", action="store_true", help="only the threads of small products and symv (7, 8)")
    parser.add_argument("--wide-only", action="store_true", help="only the products with several columns (5)")
    args = parser.parse_args(argv)
    table = [("measure", "measure", None), ("seconds", "median time (s)", "{:.5f}")]
    if args.threads_only:
        rows = thread_rows((500, 1000, 2000, 4000), (6, 10, 26), np.random.RandomState(0), args.n)
        print(format_table(rows, table))
        print(f"wrote {write_json(args.out, {'machine': machine(), 'rows': rows})}")
        return
    if args.wide_only:
        rng = np.random.RandomState(0)
        X = rng.normal(size=(args.n, 8)).astype(np.float32)
        sq = np.einsum("ij,ij->i", X, X)
        K = np.exp(-0.5 * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0) / 8)
        rows = wide_rows(K, rng) + small_wide_rows(rng)
        print(format_table(rows, table))
        print(f"wrote {write_json(args.out, {'machine': machine(), 'rows': rows})}")
        return
    if args.gram_only:
        rows = gram_rows(args.gram_rows, np.random.RandomState(0), args.gram_centers)
        print(format_table(rows, [("measure", "measure", None), ("seconds", "median time (s)", "{:.4f}")]))
        print(f"wrote {write_json(args.out, {'machine': machine(), 'rows': rows})}")
        return
    n, d, block = args.n, 8, 512
    rng = np.random.RandomState(0)
    X = rng.normal(size=(n, d)).astype(np.float32)
    sq = np.einsum("ij,ij->i", X, X)[:, None]
    A = np.hstack([X, sq, np.ones_like(sq)])
    B = np.hstack([X, -0.5 * np.ones_like(sq), -0.5 * sq]).T.copy()
    K = np.empty((n, n), dtype=np.float32)

    def fill(start):
        out = K[start : start + block]
        np.matmul(A[start : start + block], B, out=out)
        np.minimum(out, 0, out=out)
        np.exp(out, out=out)

    starts = list(range(0, n, block))

    def serial():
        for s in starts:
            fill(s)

    def pooled():
        with threadpool_limits(1), ThreadPoolExecutor(2) as pool:
            list(pool.map(fill, starts))

    rows = [
        {"measure": "K build: one block at a time, BLAS threads", "seconds": median_time(serial, 3)},
        {"measure": "K build: two blocks at once, 1-thread BLAS", "seconds": median_time(pooled, 3)},
    ]
    K = (K + K.T) / 2  # symmetric, as the kernel matrix
    v = rng.normal(size=n).astype(np.float32)
    V = rng.normal(size=(n, 2)).astype(np.float32)
    rows += [
        {"measure": "K @ v: gemv on the full matrix", "seconds": median_time(lambda: K @ v)},
        {"measure": "K @ v: symv on the upper triangle",
         "seconds": median_time(lambda: blas.ssymv(1.0, K.T, v, lower=1))},
        {"measure": "K @ V (2 columns): one gemm", "seconds": median_time(lambda: K @ V)},
        {"measure": "K @ V (2 columns): one gemv per column",
         "seconds": median_time(lambda: np.column_stack([K @ V[:, 0], K @ V[:, 1]]))},
    ]
    C = rng.normal(size=(n, 500))
    r = rng.normal(size=n)
    rows += [
        {"measure": "symv after a scipy product", "seconds": median_time(
            lambda: blas.ssymv(1.0, K.T, v, lower=1), before=lambda: blas.dgemv(1.0, C, r, trans=1))},
        {"measure": "symv after a numpy product", "seconds": median_time(
            lambda: blas.ssymv(1.0, K.T, v, lower=1), before=lambda: C.T @ r)},
    ]
    rows += wide_rows(K, rng)

    def mirror():
        for start in range(0, n, block):
            K[start : start + block, :start] = K[:start, start : start + block].T

    rows.append({"measure": "mirroring the upper triangle (once per fit)", "seconds": median_time(mirror, 3)})
    K = None  # frees the 1 GiB matrix before part 6
    rows += small_wide_rows(rng)
    rows += gram_rows(args.gram_rows, rng, args.gram_centers)
    print(f"n = {n:,}, float32\n")
    print(format_table(rows, [("measure", "measure", None), ("seconds", "median time (s)", "{:.4f}")]))
    rows += thread_rows((500, 1000, 2000, 4000), (6, 10, 26), rng, n)
    print(f"wrote {write_json(args.out, {'machine': machine(), 'n': n, 'rows': rows})}")


if __name__ == "__main__":
    main()
