"""Fits and predictions on Dask collections: the rows stay on the workers.

``fit(X, y)`` on row-chunked dask arrays or DataFrames fits the centers model: the blocks are persisted
once, the centers drawn from them and gathered (m rows), and the solver (``_solvers/blockwise.py``) runs
on the client, each pass over the rows one map-reduce summed in a tree. Predictions map the numpy
methods over the blocks. dask is optional: nothing here imports it unless the input is a dask collection.
"""

import sys
from dataclasses import replace
from functools import partial

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_feature_names

from . import _auto_alpha, _combiner, _fit, _posterior
from ._losses import SquaredLoss
from ._combiner import class_shares, combiner_label_noise, fit_output_layer, left_out_outputs
from ._replicates import _by_first_row, distinct_groups, row_hashes
from ._solvers import SMOOTH_LOSS_SOLVERS
from ._solvers import blockwise
from ._solvers._preconditioners import check_center_memory
from ._targets import class_weights, encode_labels
from .kernels import get_spec

# Blocks summed per task of the reduction tree.
FAN_IN = 8
# The kernel blocks K(X_j, C) are kept on the workers when, with the rows, they take at most
# this share of the workers' memory limits (dask starts spilling at 60%): each pass is then
# products at memory speed instead of kernel evaluations (benchmarks/bench_dask.py).
KERNEL_CACHE_SHARE = 0.4


def is_dask_collection(X):
    """Whether X is a dask collection (without importing dask when it is not loaded)."""
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(X)


def _as_dask_array(X, name, n_rows=None, row_chunks=None):
    """A dask array with known row chunks, from a dask array, DataFrame or Series (or a numpy array)."""
    import dask.array as da

    if X is None:
        return None
    if is_dask_collection(X) and hasattr(X, "to_dask_array"):  # dask DataFrame or Series
        X = X.to_dask_array(lengths=True)
    elif not is_dask_collection(X):
        X = np.asarray(X)
        if row_chunks is not None and X.ndim >= 1 and X.shape[0] == n_rows:
            X = da.from_array(X, chunks=(row_chunks,) + X.shape[1:])
        else:
            X = da.from_array(X)
    if not isinstance(X, da.Array):
        raise ValueError(f"{name} is a {type(X).__name__}; kernelgd takes dask arrays and dask DataFrames.")
    if sp.issparse(getattr(X, "_meta", None)):
        raise ValueError(
            f"{name} is a dask array of sparse blocks, which kernelgd does not fit on Dask; "
            "densify the blocks (X.map_blocks(lambda b: b.toarray())) or fit a scipy.sparse matrix in memory."
        )
    if any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X


def _aligned(v, X, name):
    """v (targets or weights) as a dask array chunked like X's rows."""
    v = _as_dask_array(v, name, X.shape[0], X.chunks[0])
    if v is None:
        return None
    if v.shape[0] != X.shape[0]:
        raise ValueError(f"{name} has {v.shape[0]} rows but X has {X.shape[0]}; they must match.")
    if v.chunks[0] != X.chunks[0]:
        v = v.rechunk({0: X.chunks[0]})
    return v


def _encode_labels(y, classes, one_hot):
    """The solver's targets for a block of labels (``encode_labels``)."""
    return encode_labels(np.searchsorted(classes, y), len(classes), one_hot)


def _class_of_rows(y, classes, per_class):
    return per_class[np.searchsorted(classes, y)]


def _weighted_counts(y, w, classes):
    return np.bincount(np.searchsorted(classes, y), weights=w, minlength=len(classes))[None, :]


def _positive_rows(w, ranks):
    """The positions in the block of the positive-weight rows of the given ranks."""
    return np.flatnonzero(w > 0)[ranks]


def fit(estimator, X, y, sample_weight, classifier):
    """Fit ``estimator`` (a KernelGDRegressor or KernelGDClassifier) on Dask collections."""
    import dask
    import dask.array as da

    from ._base import resolve_options

    est = estimator
    inputs = (X, y, sample_weight)
    X, y, w, found = _validated(est, X, y, sample_weight, classifier)
    Y, w, y_scale = _targets(est, X, y, w, found, classifier)
    n = X.shape[0]
    raw = w if w is not None else da.ones(n, chunks=X.chunks[0])
    (totals,) = dask.compute({"W": raw.sum(), "positive": (raw > 0).sum()})
    W, n_positive = float(totals["W"]), int(totals["positive"])
    if not W > 0:
        raise ValueError("sample_weight must have a positive sum; got all zero weights.")
    if not np.isfinite(W):
        raise ValueError("sample_weight sums to infinity; scale the weights down.")
    m = _n_centers(est, n_positive)
    if m is None:  # "auto" with rows few enough for the exact model: gathered, fitted in memory
        X_in, y_in, w_in = dask.compute(*inputs)
        return est.fit(X_in, y_in, sample_weight=w_in)
    loss = est._loss(Y.shape[1])
    alpha = est._alpha(W)
    rng = check_random_state(est.random_state)
    seed = rng.randint(np.iinfo(np.int32).max)  # drawn as the in-memory fit draws it: the same centers
    X, Y, wn = dask.persist(X, Y, raw / W)  # once: every later pass reads the blocks where they are
    sample, chooses = None, est._chooses_kernel(loss)
    if alpha == "auto" or chooses:  # the rules read at most MAX_ROWS rows gathered here (as in memory)
        rows = _center_rows(np.random.RandomState(seed), wn if w is not None else None, n_positive,
                            min(n_positive, _auto_alpha.MAX_ROWS))
        Xs, Ys, ws = dask.compute(X[rows], Y[rows], wn[rows])
        sample = (Xs, Ys, ws / ws.sum(), distinct_groups(Xs))
    options = resolve_options(est.options)
    precision = np.float32 if options["dtype"] in ("float32", np.float32) else np.float64  # as prepare_fit's
    est.kernel_, width = est.kernel, 1.0
    sigma_of = partial(_sigma, est, X, wn, float(found["top"]))  # of every row, as in memory
    if chooses:  # the in-memory fit's choice of kernel, width and ridge, on the gathered rows
        gathered = _fit.TrainingRows(X=sample[0], Y=sample[1], w=sample[2], y_scale=y_scale, replicates=sample[3],
                                     weight_total=W, train=None, validation=None, X_given=sample[0])
        alpha, _, width, _ = est._choose_kernel(gathered, alpha, loss, seed, precision, options["memory_budget"],
                                                options["n_threads"], sigma_of=sigma_of)
    est.sigma_ = sigma_of()
    if width != 1.0:  # a kernel without a width (sigma_ None) is never walked
        est.sigma_ = est.sigma_ * width
    kernel = est._bound_kernel()
    if not kernel.psd:
        raise ValueError(
            f"The {kernel.name} kernel is not positive semi-definite; fits on Dask collections take the "
            "centers model, whose solvers need a PSD kernel. Use a PSD kernel (rbf, laplacian, ...)."
        )
    solver = _solver(est, loss)
    check_center_memory(m, options["memory_budget"])
    rows = _distinct_centers(X, wn, _center_rows(rng, wn if w is not None else None, n_positive, m), rng)
    centers, center_weights, wY = dask.compute(X[rows], wn[rows], (wn[:, None] * Y).sum(axis=0))
    if alpha == "auto":
        alpha = _auto_alpha.auto_alpha(sample[0], kernel, *sample[1:], est.fit_intercept,
                                       np.random.RandomState(seed), loss=loss, precision=precision,
                                       classify=is_classifier(est) and loss is SquaredLoss
                                       and est._left_out_classes(loss),
                                       threads=options["n_threads"])[0]
    est.alpha_ = alpha
    stored = _kernel_fits(n * m * 8 + X.nbytes + Y.nbytes)
    X_rows = X  # the inputs, where X becomes the kernel blocks
    if stored:
        X = X.map_blocks(_kernel_block, kernel, centers, chunks=(X.chunks[0], (m,)), dtype=np.float64).persist()
    training = _fit.TrainingRows(X=X_rows, Y=Y, w=wn, y_scale=y_scale, replicates=None, weight_total=W,
                                 train=None, validation=None, X_given=X_rows)
    problem = _fit.FitProblem(
        rows=training, loss=loss, kernel=kernel, alpha=alpha, solver=solver, centers=centers, landmarks=None,
        tol=_fit.resolve_tol(est, loss, None, solver, centers=True), seed=seed, options=options,
        operator=DaskBlocks(kernel, centers, X, Y, wn, center_weights, loss, wY, stored=stored),
    )
    result = blockwise.solve(problem.operator, _fit.solver_settings(est, problem))
    if est._predictive:  # the Gaussian-process view (predict(X, return_std=True)): one more pass
        est._posterior = _posterior_of(problem, result)
    _fit.export(est, problem, result.dual_coef, result.intercept, result.n_iter, list(result.loss_curve), result,
                ravel=not classifier and y.ndim == 1)
    if classifier:  # the output layer, on the rows the in-memory fit reads (``_combiner``)
        est.combiner_, est.label_noise_, est._noise_shares = None, 0.0, None
        if est._combines(loss):
            limit = _combiner.COMBINER_ROWS
            picked = None if n_positive <= limit else _center_rows(  # combiner_rows's draw
                np.random.RandomState(seed), wn if w is not None else None, n_positive, limit)
            Xc, Yc, wc = dask.compute(*(A if picked is None else A[picked] for A in (X_rows, Y, wn)))
            est._noise_shares = class_shares(Yc, wc)  # the layer's rows', as the in-memory fit's
            left_out = left_out_outputs(Xc, None, kernel, Yc, wc, alpha, est.fit_intercept, est._precomputed,
                                        options["n_threads"], seed)
            outputs, wc = (left_out[0] * y_scale, left_out[1]) if left_out else (est._decision(Xc, "fit"), wc)
            est.combiner_ = fit_output_layer(outputs, Yc, wc, Xc, seed)
            est.label_noise_ = combiner_label_noise(est.combiner_, outputs, Yc, wc, Xc, seed, est._noise_shares)
    return est


def _posterior_of(problem, result):
    """The centers posterior's factors from one more pass over the blocks (``_posterior``), with the in-memory
    fit's leave-one-out rows: each group of identical rows as one row of its summed weight and weighted mean
    target (rows hashed on the workers, ``_replicates.row_hashes``; a hash names a group)."""
    import dask

    rows, kernel, centers = problem.rows, problem.kernel, problem.centers
    gram = problem.operator.posterior_gram()
    Kmm = problem.operator.center_matrix()
    hashes, w = dask.compute(rows.X.map_blocks(row_hashes, drop_axis=1, dtype=np.uint64), rows.w)
    positive = np.flatnonzero(w > 0)
    # groups numbered in the order of their first rows, as in memory
    group = _by_first_row(np.unique(hashes[positive], return_inverse=True)[1].reshape(-1))
    first = np.unique(group, return_index=True)[1]
    W = np.bincount(group, weights=w[positive])
    sample = _posterior.loo_rows(W, np.random.RandomState(problem.seed))  # groups, as the in-memory fit draws them
    members = np.flatnonzero(np.isin(group, sample))  # every row of a sampled group: their targets' mean
    Xs, Ym = dask.compute(rows.X[positive[first[sample]]], rows.Y[positive[members]])
    at = np.searchsorted(sample, group[members])
    wm = w[positive[members]]
    Ys = np.stack([np.bincount(at, weights=wm * column, minlength=len(sample)) for column in Ym.T], axis=1)
    Ys /= W[sample][:, None]
    K_rows = np.asarray(kernel(Xs, centers), dtype=np.float64)
    m = centers.shape[0]
    # a new observation's noise: N is Kish's effective number of distinct rows, as in memory
    n_observations = W.sum() ** 2 / float(W @ W)
    posterior = _posterior.centers_posterior(
        Kmm, gram, problem.alpha, n_observations, m * np.finfo(np.float64).eps * float(np.mean(np.diagonal(Kmm))),
        (K_rows, Ys - result.intercept - K_rows @ result.dual_coef, W[sample], kernel.diag(np.asarray(Xs, np.float64))),
    )
    return replace(posterior, signal_std=posterior.signal_std * rows.y_scale)


def _validated(est, X, y, sample_weight, classifier):
    """X, y and the weights as aligned dask arrays, checked in one pass; with what the pass found."""
    import dask
    import dask.array as da

    if hasattr(X, "columns"):  # a dask DataFrame: its (empty pandas) meta carries the feature names
        _check_feature_names(est, X._meta, reset=True)
    X = _as_dask_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); the dask array has shape {X.shape}.")
    if est._precomputed:
        raise ValueError("kernel='precomputed' cannot be fitted on Dask collections: pass the inputs and a kernel name.")
    if est.early_stopping:
        raise ValueError(
            "early_stopping is not supported on Dask collections. Fit with early_stopping=False, or "
            "hold out a validation set and choose max_iter or alpha with it."
        )
    X = X.rechunk({1: -1}).astype(np.float64)
    n, n_features = X.shape
    if n < 2 or n_features < 1:
        raise ValueError(f"Found array with {n} sample(s) and {n_features} feature(s); at least 2 and 1 are required.")
    y = _aligned(y, X, "y")
    if y is None:
        raise ValueError("y is required: pass the targets as a dask array or Series.")
    w = _aligned(sample_weight, X, "sample_weight")
    est.n_features_in_ = n_features
    checks = {"X finite": da.isfinite(X).all(), "top": abs(X).max()}
    if classifier:
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D class labels; got shape {y.shape}.")
        checks["classes"] = da.unique(y)
    else:
        if y.ndim > 2:
            raise ValueError(f"y must be 1-D or 2-D; got shape {y.shape}.")
        y = y.astype(np.float64)
        checks["y finite"], checks["y top"] = da.isfinite(y).all(), abs(y).max()
    if w is not None:
        w = w.astype(np.float64)
        checks["w finite"], checks["w min"] = da.isfinite(w).all(), w.min()
    (found,) = dask.compute(checks)
    for key in ("X finite", "y finite", "w finite"):
        if key in found and not found[key]:
            raise ValueError(f"Input {key.split()[0]} contains NaN or infinity; kernelgd needs finite values.")
    if w is not None and found["w min"] < 0:
        raise ValueError("Negative values in sample_weight are not allowed; weights must be >= 0.")
    return X, y, w, found


def _targets(est, X, y, w, found, classifier):
    """The solver's targets Y (n, k), the weights with class weights applied, and the targets' scale."""
    import dask.array as da

    if not classifier:  # solved for Y / s, s a power of two near max|Y|, as in memory
        top = float(found["y top"])
        y_scale = float(np.ldexp(1.0, np.frexp(top)[1] - 1)) if top > 0 and np.isfinite(top) else 1.0
        return y.reshape(X.shape[0], -1) / y_scale, w, y_scale
    classes = np.asarray(found["classes"])
    if len(classes) < 2:
        raise ValueError(
            "KernelGDClassifier needs samples of at least 2 classes, but the "
            f"data contains only one class: {classes[0]!r}."
        )
    est.classes_ = classes
    one_hot = est.loss == "logistic" and len(classes) > 2
    k = len(classes) if len(classes) > 2 else 1
    Y = y.map_blocks(_encode_labels, classes, one_hot, dtype=np.float64, new_axis=1, chunks=(y.chunks[0], (k,)))
    if est.class_weight is not None:
        ones = w if w is not None else da.ones(X.shape[0], chunks=X.chunks[0])
        counts = y.map_blocks(_weighted_counts, ones, classes, dtype=np.float64, new_axis=1,
                              chunks=((1,) * y.numblocks[0], (len(classes),))).sum(axis=0).compute()
        per_class = class_weights(est.class_weight, classes, classes, counts)
        w = ones * y.map_blocks(_class_of_rows, classes, per_class, dtype=np.float64)
    return Y, w, 1.0


def _sigma(est, X, w, top):
    """sigma_ as the in-memory fit computes it, from passes over the persisted blocks."""
    import dask

    spec = get_spec(est._kernel_used)
    if "sigma" not in spec.params or not (isinstance(est.sigma, str) and est.sigma == "scale"):
        return est._resolve_sigma(np.empty((1, X.shape[1])), np.ones(1))
    if top == 0.0:
        return 1.0
    Xs = X / top  # so that the variance of huge features does not overflow
    (means,) = dask.compute((w[:, None] * Xs).sum(axis=0)) if spec.centred_scale else (0.0,)  # w sums to one
    (var,) = dask.compute((w * ((Xs - means) ** 2).mean(axis=1)).sum())
    sigma = (top * float(np.sqrt(X.shape[1] * var))) ** (1.0 / spec.sigma_power)
    return sigma if sigma > 0 else 1.0


def _n_centers(est, n_positive):
    from ._base import auto_centers

    if isinstance(est.n_centers, (bool, np.bool_)):
        raise ValueError(f"n_centers must be a positive int, 'auto' or None, got {est.n_centers!r}.")
    if est.n_centers is None:
        raise ValueError(
            "The exact model (n_centers=None) needs every row in memory, which a Dask collection is "
            "not meant for. Set n_centers (for example n_centers=1000) or 'auto', or call .compute() "
            "on the inputs and fit those."
        )
    if isinstance(est.n_centers, str):  # "auto": None (the exact model) up to AUTO_EXACT_MAX_ROWS rows
        return auto_centers(n_positive, squared=getattr(est, "loss", "squared") == "squared")
    return min(int(est.n_centers), n_positive)


def _solver(est, loss):
    solver = est.solver
    if solver == "auto":
        return "cg" if loss is SquaredLoss else "newton"
    if solver not in ("cg", "newton"):
        raise ValueError(
            f"solver={solver!r} does not fit Dask collections; use solver='auto', 'cg' or 'newton'."
        )
    if loss is not SquaredLoss and solver not in SMOOTH_LOSS_SOLVERS:
        raise ValueError(
            f"solver={solver!r} minimises the squared loss only; with loss={loss.name!r} use "
            f"solver='auto' or one of {sorted(SMOOTH_LOSS_SOLVERS)}."
        )
    return solver


def _distinct_centers(X, w, rows, rng):
    """``rows``, or where they repeat a row of X, as many distinct rows of positive weight ``w`` in a random order:
    the in-memory fit's draw (``_base._distinct_rows``), on the rows' hashes (``_replicates.row_hashes``)."""
    import dask

    chosen = X[rows].compute()
    if sp.issparse(chosen) or len(np.unique(chosen, axis=0)) == len(rows):
        return rows  # the common case: one check on m rows (sparse rows: as in memory, as drawn)
    hashes, w = dask.compute(X.map_blocks(row_hashes, drop_axis=1, dtype=np.uint64), w)
    order = rng.permutation(np.flatnonzero(w > 0))
    first = np.unique(hashes[order], return_index=True)[1]
    return np.sort(order[np.sort(first)[: len(rows)]])


def _center_rows(rng, w, n_positive, m):
    """Sorted row indices of m centers drawn from the rows with positive weight.

    The same draw as the in-memory fit's (``rng.choice`` over the positive
    rows), so the same rows give the same centers; with weights, each
    block maps the ranks it holds to its rows.
    """
    import dask

    ranks = np.sort(rng.choice(n_positive, m, replace=False))
    if w is None:
        return ranks
    blocks = w.to_delayed().ravel()
    counts = dask.compute(*[dask.delayed(np.count_nonzero)(block > 0) for block in blocks])
    starts = np.concatenate([[0], np.cumsum(w.chunks[0])])
    rank_starts = np.concatenate([[0], np.cumsum(counts)])
    tasks = []
    for j, block in enumerate(blocks):
        mine = ranks[(ranks >= rank_starts[j]) & (ranks < rank_starts[j + 1])] - rank_starts[j]
        if len(mine):
            tasks.append(dask.delayed(_positive_rows)(block, mine) + starts[j])
    return np.sort(np.concatenate(dask.compute(*tasks)))


def _kernel_block(X, kernel, centers):
    return np.asarray(kernel(X, centers), dtype=np.float64)


def _kernel_fits(n_bytes):
    """Whether ``n_bytes`` fit in ``KERNEL_CACHE_SHARE`` of the workers' memory limits.

    Without a distributed client the local scheduler's workers are this
    process's threads: the limit is the memory this process can allocate.
    """
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        from ._operator import available_memory

        available = available_memory()
        return available is not None and n_bytes <= KERNEL_CACHE_SHARE * available
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info(n_workers=-1)["workers"].values()]
    return bool(limits) and min(limits) > 0 and n_bytes <= KERNEL_CACHE_SHARE * sum(limits)


class DaskBlocks:
    """The blockwise solver's problem on persisted dask arrays: each pass one map-reduce.

    With ``stored``, X holds the kernel blocks ``K(X_j, C)`` rather than the rows.
    """

    def __init__(self, kernel, centers, X, Y, w, center_weights, loss, weighted_targets, stored=False):
        self.kernel, self.C, self.loss = (None if stored else kernel), centers, loss
        self.center_kernel = kernel
        self.stored = stored
        self.arrays = (X, Y, w)  # holding the persisted collections holds their blocks on the workers
        self.parts = list(zip(X.to_delayed().ravel(), Y.to_delayed().ravel(), w.to_delayed().ravel()))
        self.center_weights = center_weights
        self.weighted_targets = weighted_targets
        self.n, self.m = X.shape[0], centers.shape[0]
        self.dtype = np.float64
        self.n_passes = 0

    def center_matrix(self):
        return np.asarray(self.center_kernel(self.C, self.C), dtype=np.float64)

    def _map_reduce(self, func, *args):
        import dask

        self.n_passes += 1
        shared = [dask.delayed(a) for a in (self.C,) + args]  # one key each, not a copy per task
        parts = [
            dask.delayed(func)(self.kernel, shared[0], X, Y, w, self.loss, *shared[1:]) for X, Y, w in self.parts
        ]
        while len(parts) > 1:
            parts = [dask.delayed(_sum_terms)(*parts[i : i + FAN_IN]) for i in range(0, len(parts), FAN_IN)]
        (terms,) = dask.compute(parts[0])
        return terms

    def evaluate(self, beta, b, hessian):
        return self._map_reduce(blockwise.block_terms, beta, b, hessian)

    def hessp(self, beta, b, D):
        return self._map_reduce(blockwise.block_hessp, beta, b, D)

    def posterior_gram(self):
        return self._map_reduce(blockwise.block_gram)["gram"]

    def features(self, Z, beta, b, fit_intercept):
        return self._map_reduce(blockwise.block_features, Z, beta, b, fit_intercept)


def _sum_terms(*parts):
    total = {}
    for part in parts:
        total = blockwise.add_terms(total, part)
    return total


def _on_frame(method, columns, block):
    import pandas as pd

    return method(pd.DataFrame(block, columns=columns))


def map_rows(method, X, n_columns, dtype):
    """``method`` (a numpy method of a fitted estimator) over X's row blocks, as a dask array.

    ``n_columns`` None: one value per row.
    """
    if hasattr(X, "columns"):  # blocks as pandas frames: the model checks the feature names it was fitted with
        method = partial(_on_frame, method, list(X.columns))
    X = _as_dask_array(X, "X").rechunk({1: -1})
    if n_columns is None:
        return X.map_blocks(method, drop_axis=1, dtype=dtype, meta=np.empty((0,), dtype=dtype))
    return X.map_blocks(method, chunks=(X.chunks[0], (n_columns,)), dtype=dtype,
                        meta=np.empty((0, n_columns), dtype=dtype))

