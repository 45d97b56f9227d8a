"""The Gaussian kernel's products on a CUDA device in one fused Triton kernel: ``exp(-|x - c|^2) @ V``.

A kernel product written as blocks (a GEMM for ``x'c``, the norms, ``exp``, a GEMM with V) passes over
every block in device memory several times and is bound by bandwidth. Here each program evaluates a
tile of squared distances in registers (from features the operator has shifted and divided by sigma),
takes ``exp`` and multiplies by V's tile: K never reaches memory. Programs split the summed dimension
where the output has few rows, and the partial sums are added in a fixed order (deterministic).

Used by the operator only for torch arrays on CUDA in float32 where Triton imports; without Triton this
module defines no kernel. ``ENABLED = False`` sends the operator back to the generic blocks.
"""

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton: the operator evaluates generic blocks
    triton = None

ENABLED = True
# Tile of (rows, summed columns, features); V's columns are padded to at least 16 (tl.dot's least).
# Tuned by benchmarks/bench_gpu_product.py.
BLOCK_ROWS, BLOCK_COLS, BLOCK_FEATURES, MIN_BLOCK_K = 128, 64, 32, 16
WARPS = 4
# Programs per multiprocessor to aim for before the summed dimension is split.
PROGRAMS_PER_SM = 4
# At most this many terms per float32 accumulator; the splits' sums are added in float64.
MAX_SUMMED = 16384
# "ieee": float32 products on the CUDA cores ("tf32x3" measured slower, "tf32" is too coarse for CG).
# PRECISION is that of the products with V, DISTANCE_PRECISION of the distances' x'c.
PRECISION = DISTANCE_PRECISION = "ieee"
# One column of V: K's tile times V's column summed along each row, not a tl.dot padded to MIN_BLOCK_K
# columns (16 times the products).
COLUMN_SUM = True

if triton is not None:

    @triton.jit
    def _product_kernel(
        A, B, a_norms, b_norms, V, Out, n_a, n_b, d, k, stride_a, stride_b, stride_v, stride_split, stride_out,
        cols_per_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
        BLOCK_K: tl.constexpr, PREC: tl.constexpr, DIST_PREC: tl.constexpr, ONE_COLUMN: tl.constexpr,
    ):
        # Out[split, i, :] = sum_{j in split} exp(-(|a_i|^2 + |b_j|^2 - 2 a_i'b_j)) V[j, :]
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < n_a
        rows64 = rows.to(tl.int64)  # offsets past 2^31 entries (10^7 rows of 28 features is 2.8e8)
        ks = tl.arange(0, BLOCK_K)
        k_ok = ks < k
        a_norm = tl.load(a_norms + rows, mask=row_ok, other=0.0)
        if ONE_COLUMN:
            acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
        start = tl.program_id(1) * cols_per_split
        stop = tl.minimum(start + cols_per_split, n_b)
        for j0 in range(start, stop, BLOCK_N):
            cols = j0 + tl.arange(0, BLOCK_N)
            col_ok = cols < stop
            cols64 = cols.to(tl.int64)
            dots = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for d0 in range(0, d, BLOCK_D):
                ds = d0 + tl.arange(0, BLOCK_D)
                d_ok = ds < d
                a = tl.load(A + rows64[:, None] * stride_a + ds[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
                b = tl.load(B + cols64[:, None] * stride_b + ds[None, :], mask=col_ok[:, None] & d_ok[None, :], other=0.0)
                dots = tl.dot(a, tl.trans(b), dots, input_precision=DIST_PREC)
            b_norm = tl.load(b_norms + cols, mask=col_ok, other=0.0)
            sq = tl.maximum(a_norm[:, None] + b_norm[None, :] - 2.0 * dots, 0.0)
            kv = tl.where(col_ok[None, :], tl.exp(-sq), 0.0)
            if ONE_COLUMN:
                v = tl.load(V + cols64 * stride_v, mask=col_ok, other=0.0)
                acc += tl.sum(kv * v[None, :], axis=1)
            else:
                v = tl.load(V + cols64[:, None] * stride_v + ks[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
                acc = tl.dot(kv, v, acc, input_precision=PREC)
        out = Out + tl.program_id(1).to(tl.int64) * stride_split
        if ONE_COLUMN:
            tl.store(out + rows64 * stride_out, acc, mask=row_ok)
        else:
            tl.store(out + rows64[:, None] * stride_out + ks[None, :], acc, mask=row_ok[:, None] & k_ok[None, :])


def _splits(n_rows, n_summed, n_sms):
    """How many ranges the summed dimension is split into: enough programs for every multiprocessor,
    and at most ``MAX_SUMMED`` terms in each."""
    row_blocks = -(-n_rows // BLOCK_ROWS)
    wanted = min(-(-PROGRAMS_PER_SM * n_sms // row_blocks), -(-n_summed // (4 * BLOCK_COLS)))
    return max(1, wanted, -(-n_summed // MAX_SUMMED))


def gaussian_product(A, B, a_norms, b_norms, V):
    """``exp(-|a_i - b_j|^2) @ V`` for float32 CUDA tensors A (n_a, d), B (n_b, d) and V (n_b,) or (n_b, k).

    ``a_norms``, ``b_norms``: the rows' squared norms (float32). Returns float64 of shape
    (n_a,) or (n_a, k); the sums accumulate in float32, as a float32 GEMM's do.
    """
    import torch

    n_a, d = A.shape
    n_b = B.shape[0]
    A, B, a_norms, b_norms = (Z.contiguous() for Z in (A, B, a_norms, b_norms))
    V2 = V.reshape(n_b, -1).to(torch.float32).contiguous()
    k = V2.shape[1]
    if min(n_a, n_b, k) == 0:
        return torch.zeros((n_a,) + tuple(V.shape[1:]), dtype=torch.float64, device=A.device)
    block_k = max(MIN_BLOCK_K, triton.next_power_of_2(k))
    block_d = max(16, min(BLOCK_FEATURES, triton.next_power_of_2(d)))
    # (a CPU tensor only under Triton's interpreter, TRITON_INTERPRET=1: the tests' check of the kernel)
    n_sms = torch.cuda.get_device_properties(A.device).multi_processor_count if A.device.type == "cuda" else 4
    splits = _splits(n_a, n_b, n_sms)
    per_split = -(-n_b // splits)
    per_split = -(-per_split // BLOCK_COLS) * BLOCK_COLS  # whole column tiles per split
    splits = -(-n_b // per_split)
    out = torch.empty((splits, n_a, k), dtype=torch.float32, device=A.device)
    grid = (-(-n_a // BLOCK_ROWS), splits)
    _product_kernel[grid](
        A, B, a_norms, b_norms, V2, out, n_a, n_b, d, k, A.stride(0), B.stride(0), V2.stride(0), out.stride(0),
        out.stride(1), per_split, BLOCK_M=BLOCK_ROWS, BLOCK_N=BLOCK_COLS, BLOCK_D=block_d, BLOCK_K=block_k,
        PREC=PRECISION, DIST_PREC=DISTANCE_PRECISION, ONE_COLUMN=COLUMN_SUM and k == 1, num_warps=WARPS,
    )
    total = out[0].to(torch.float64) if splits == 1 else out.to(torch.float64).sum(dim=0)
    return total.reshape((n_a,) + tuple(V.shape[1:]))
