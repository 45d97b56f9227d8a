"""Repeated rows: which rows of X are identical, and what the ridge rules read from that.

A row repeated k times tells the model no more than one row of k times its weight, but a criterion that
counts each copy as an observation is fooled (leaving one copy out, the others still fit it). The rules
therefore leave a group of copies out together, or read the distinct rows each with its copies' summed
weight and weighted mean target, as R's ``smooth.spline`` reads tied x values.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils import gen_batches

from ._array_api import to_numpy

_MIX = np.uint64(0x9E3779B97F4A7C15)  # an odd constant: multiplying by it mixes a column's bits
HASH_BATCH = 1 << 16  # entries hashed at a time


def _column_multipliers(n_columns):
    """One odd 64-bit multiplier per column, the same on every call (the hash must be reproducible)."""
    return np.random.RandomState(0).randint(0, 2**62, size=n_columns, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _bits(values):
    """The bit patterns of float values, mixed, as uint64 (-0.0 read as 0.0)."""
    values = np.asarray(values) + 0.0  # -0.0 + 0.0 is 0.0: equal values, equal bits
    width = np.uint64 if values.dtype.itemsize == 8 else np.uint32
    bits = values.view(width).astype(np.uint64, copy=False) * _MIX
    # a product keeps its factors' trailing zero bits, which float32 values read as float64 (29)
    # and small integers (over 40) have: the high half folded into the low one mixes them away
    bits ^= bits >> np.uint64(32)
    return bits


def _row_hashes(A):
    """One 64-bit hash per row of a dense float array: equal rows, equal hashes."""
    multipliers = _column_multipliers(A.shape[1])
    hashes = np.empty(A.shape[0], dtype=np.uint64)
    for rows in gen_batches(A.shape[0], max(1, HASH_BATCH // max(1, A.shape[1]))):  # cache-sized temporaries
        hashes[rows] = (_bits(A[rows]) * multipliers[None, :]).sum(axis=1, dtype=np.uint64)
    return hashes


def row_hashes(X):
    """One 64-bit hash per row of X (dense or sparse): equal rows, equal hashes (``replicate_groups``')."""
    return _hashed(X)[1]


def _hashed(X):
    """``(A, hashes)``: X as a float CSR or C-ordered array, and one hash per row."""
    if sp.issparse(X):
        A = sp.csr_matrix(X, dtype=np.float64, copy=True)
        A.sum_duplicates()  # sorted indices, each stored once
        A.data += 0.0
        A.eliminate_zeros()
        terms = _bits(A.data) * _column_multipliers(A.shape[1])[A.indices]
        hashes = np.zeros(A.shape[0], dtype=np.uint64)
        filled = np.flatnonzero(np.diff(A.indptr))
        if len(filled):
            hashes[filled] = np.add.reduceat(terms, A.indptr[filled])
    else:
        A = np.asarray(to_numpy(X))
        A = np.ascontiguousarray(A, dtype=A.dtype if A.dtype in (np.float32, np.float64) else np.float64)
        hashes = _row_hashes(A)
    return A, hashes


def replicate_groups(X):
    """``(groups, n_groups)``: each row's group of identical rows of X (dense, sparse, or a kernel matrix),
    numbered in the order of their first rows. Rows are hashed exactly (integer sums of their entries' bit
    patterns) and rows that share a hash are told apart by their contents: a collision never merges rows.
    """
    A, hashes = _hashed(X)
    ordered = np.sort(hashes)
    if not np.any(ordered[1:] == ordered[:-1]):  # distinct hashes, distinct rows: one sort, not three argsorts
        return np.arange(A.shape[0]), A.shape[0]
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    shared = np.flatnonzero(counts[inverse] > 1)
    if not len(shared):
        return _by_first_row(inverse), len(counts)
    # the rows that share a hash: equal contents, equal key
    if sp.issparse(A):
        keys = [(A.indices[A.indptr[i]:A.indptr[i + 1]].tobytes(), A.data[A.indptr[i]:A.indptr[i + 1]].tobytes())
                for i in shared]
    else:
        keys = [row.tobytes() for row in A[shared] + 0.0]
    label = {}
    contents = np.array([label.setdefault(key, len(label)) for key in keys], dtype=np.int64)
    pairs = np.zeros((A.shape[0], 2), dtype=np.int64)
    pairs[:, 0] = inverse
    pairs[shared, 1] = contents + 1
    _, result, counts = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
    return _by_first_row(result.reshape(-1)), len(counts)


def distinct_groups(X):
    """Each row's group of identical rows (``replicate_groups``), or None where every row is distinct."""
    group_of, n_groups = replicate_groups(X)
    return None if n_groups == X.shape[0] else group_of


def subset_groups(group_of, rows):
    """The groups of the rows ``rows`` of a partition ``group_of`` (None: all distinct), renumbered."""
    if group_of is None:
        return None
    _, inverse = np.unique(group_of[rows], return_inverse=True)
    return None if inverse.max(initial=-1) + 1 == len(rows) else _by_first_row(inverse.reshape(-1))


def draw_groups(w, group_of, n, rng):
    """The rows of positive weight (sorted) of ``n`` of their groups of identical rows drawn at random (every one
    where fewer), the groups in the order of their first rows: weights and the rows repeated draw the same rows,
    rows of zero weight change no draw, and without repeats the draw is ``rng.choice`` of those rows."""
    positive = np.flatnonzero(np.asarray(to_numpy(w)) > 0)
    group = None if group_of is None else subset_groups(group_of, positive)
    if group is None:
        return np.sort(rng.choice(positive, min(n, len(positive)), replace=False))
    n_groups = int(group.max()) + 1
    return positive[np.isin(group, rng.choice(n_groups, min(n, n_groups), replace=False))]


def _by_first_row(group_of):
    """The groups renumbered in the order of their first rows (without repeats: each row its own index)."""
    _, first = np.unique(group_of, return_index=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[group_of]


def effective_count(w, group_of=None):
    """Kish's effective number of distinct rows, ``(sum W)^2 / sum W^2``, W the groups' summed weights: their
    number where they weigh alike, fewer where a few carry most of the weight; unchanged by scaling.
    """
    w = np.asarray(w, dtype=np.float64)
    W = w if group_of is None else np.bincount(group_of, weights=w)
    total = float(W.sum())
    return total**2 / float(np.sum(W**2)) if total > 0 else 0.0


def distinct_rows(w, group_of=None):
    """The number of distinct rows of positive weight: a group of identical rows counts once, a row of
    weight zero not at all (weights and the rows repeated, or dropped, count alike)."""
    positive = np.asarray(to_numpy(w)) > 0
    return int(np.count_nonzero(positive)) if group_of is None else len(np.unique(group_of[positive]))


def pure_error(Y, w, group_of):
    """``sum_i w_i |y_i - ybar_g(i)|^2``: the targets' weighted spread within groups of identical rows,
    which no function of the rows can fit (0 without repeated rows)."""
    if group_of is None:
        return 0.0
    Y = np.asarray(Y, dtype=np.float64).reshape(len(w), -1)
    means = collapse(group_of, int(group_of.max()) + 1, Y, w)[1]
    return float(np.sum(np.asarray(w)[:, None] * (Y - means[group_of]) ** 2))


def collapse(group_of, n_groups, Y, w):
    """``(first, Y_mean, w_sum)``: each group's first row, its weighted mean target and its summed weight
    (host arrays; Y of shape (n, t), w summing to 1)."""
    Y, w = np.asarray(Y, dtype=np.float64), np.asarray(w, dtype=np.float64)
    first = np.unique(group_of, return_index=True)[1]
    w_sum = np.bincount(group_of, weights=w, minlength=n_groups)
    safe = np.where(w_sum > 0, w_sum, 1.0)
    Y_mean = np.stack([np.bincount(group_of, weights=w * Y[:, j], minlength=n_groups) / safe
                       for j in range(Y.shape[1])], axis=1)
    return first, Y_mean, w_sum
