"""Fits on Dask collections, on a distributed LocalCluster (2 worker processes, loopback only).

Reference: the in-memory fit of the same rows, which draws the same
centers; both solve the same objective to tolerance.
"""

import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from kernelgd import KernelGDClassifier, KernelGDRegressor  # noqa: E402

rng = np.random.RandomState(0)
N = 3000
X = rng.normal(size=(N, 4))
y = np.sin(X[:, 0]) + 0.3 * X[:, 1] ** 2 + 0.1 * rng.normal(size=N)
labels3 = np.digitize(y, np.quantile(y, [0.33, 0.66]))
CHUNK = 700  # uneven blocks on purpose
TIGHT = dict(n_centers=150, random_state=0, tol=1e-8)


def cluster_kwargs():
    return dict(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None)


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cluster's own start-up chatter
        cluster = distributed.LocalCluster(**cluster_kwargs())
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def dask(a):
    return da.from_array(a, chunks=(CHUNK,) + a.shape[1:])


def quiet(est, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(*args, **kwargs)


@pytest.mark.parametrize("alpha", [0.0, 1e-4])
def test_regressor_equals_the_in_memory_fit(client, alpha):
    kwargs = dict(TIGHT, tol=1e-8 if alpha else 1e-5)  # alpha=0: each extra digit costs many passes
    ref = quiet(KernelGDRegressor(alpha=alpha, **kwargs), X, y)
    est = quiet(KernelGDRegressor(alpha=alpha, **kwargs), dask(X), dask(y))
    assert_array_equal(est.X_fit_, ref.X_fit_)
    assert est.sigma_ == pytest.approx(ref.sigma_, rel=1e-12)
    assert est.n_centers_ == 150 and est.solver_ == "cg"
    # alpha=0 sits at the centers' ridge floor: conditioning bounds the agreement
    assert_allclose(est.predict(X), ref.predict(X), atol=1e-6 if alpha else 1e-3)
    assert est.loss_curve_[-1] <= ref.loss_curve_[-1] * (1 + 1e-6)


def test_multi_output_regressor(client):
    Y = np.column_stack([y, 100 * X[:, 1]])
    ref = KernelGDRegressor(alpha=1e-4, **TIGHT).fit(X, Y)
    est = KernelGDRegressor(alpha=1e-4, **TIGHT).fit(dask(X), dask(Y))
    assert est.dual_coef_.shape == (150, 2)
    assert_allclose(est.predict(X), ref.predict(X), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_equals_the_in_memory_fit(client, loss, n_classes):
    labels = (y > np.median(y)).astype(int) if n_classes == 2 else labels3
    names = np.array(["low", "mid", "high"])[labels]  # string labels go through too
    ref = quiet(KernelGDClassifier(loss=loss, alpha=1e-4, **TIGHT), X, names)
    est = quiet(KernelGDClassifier(loss=loss, alpha=1e-4, **TIGHT), dask(X), dask(names))
    assert_array_equal(est.classes_, ref.classes_)
    assert_allclose(est.decision_function(X), ref.decision_function(X), atol=1e-5)
    assert_array_equal(est.predict(X), ref.predict(X))
    assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-5)  # (the squared loss's: its layer's)
    assert est.solver_ == ("cg" if loss == "squared" else "newton")


def test_weights_with_zeros_and_balanced_classes(client):
    w = rng.uniform(0, 2, N)
    w[rng.rand(N) < 0.2] = 0.0  # centers come from the weighted rows only
    kwargs = dict(loss="logistic", class_weight="balanced", **TIGHT)
    # alpha="auto" reads the same weighted rows on both paths (one Newton step: the ridge is set before)
    first = dict(kwargs, max_iter=1)
    ref = quiet(KernelGDClassifier(**first), X, labels3, sample_weight=w)
    est = quiet(KernelGDClassifier(**first), dask(X), dask(labels3), sample_weight=dask(w))
    assert est.alpha_ == pytest.approx(ref.alpha_, rel=1e-12)
    kwargs["alpha"] = 1e-4  # the fits themselves at a ridge the blockwise solver resolves in seconds
    ref = KernelGDClassifier(**kwargs).fit(X, labels3, sample_weight=w)
    est = KernelGDClassifier(**kwargs).fit(dask(X), dask(labels3), sample_weight=dask(w))
    assert_array_equal(est.X_fit_, ref.X_fit_)
    assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-6)


def test_default_classifier_chooses_the_in_memory_fits_ridge(client):
    # The squared-loss classifier chooses its width and ridge by one rule (``_choose_kernel``) on both paths: the
    # Dask fit ran the plain ridge rule, another random factor of the same rows, and here another ridge
    r = np.random.RandomState(5)
    X_wide = r.normal(size=(4000, 8))
    f = np.sin(2 * X_wide[:, 0]) + 0.5 * r.normal(size=4000)
    labels = (f > np.median(f)).astype(int)
    ref = KernelGDClassifier(n_centers=30, random_state=0).fit(X_wide, labels)
    est = KernelGDClassifier(n_centers=30, random_state=0).fit(
        da.from_array(X_wide, chunks=(803, 8)), da.from_array(labels, chunks=803))
    assert est.alpha_ == ref.alpha_
    assert est.sigma_ == pytest.approx(ref.sigma_, rel=1e-12)


def test_output_layer_past_its_rows_reads_the_in_memory_fits_rows(client, monkeypatch):
    # Past COMBINER_ROWS rows both fits' layers read the same seeded draw of the weighted rows
    from kernelgd import _combiner

    monkeypatch.setattr(_combiner, "COMBINER_ROWS", 1000)
    w = rng.uniform(0.5, 2, N)
    w[rng.rand(N) < 0.2] = 0.0
    ref = quiet(KernelGDClassifier(alpha=1e-4, **TIGHT), X, labels3, sample_weight=w)
    est = quiet(KernelGDClassifier(alpha=1e-4, **TIGHT), dask(X), dask(labels3), sample_weight=dask(w))
    assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-5)


def test_predictions_are_lazy_dask_arrays_equal_to_numpy(client):
    est = KernelGDClassifier(loss="logistic", n_centers=100, alpha=1e-3, random_state=0).fit(dask(X), dask(labels3))
    Xd = dask(X)
    for method, shape in [("predict", (N,)), ("decision_function", (N, 3)), ("predict_proba", (N, 3)),
                          ("predict_log_proba", (N, 3))]:
        out = getattr(est, method)(Xd)
        assert isinstance(out, da.Array) and out.shape == shape and out.chunks[0] == Xd.chunks[0]
        assert_allclose(out.compute(), getattr(est, method)(X)) if method != "predict" else \
            assert_array_equal(out.compute(), est.predict(X))
    squared = KernelGDClassifier(n_centers=100, alpha=1e-3, random_state=0).fit(dask(X), dask(labels3))
    out = squared.predict_proba(Xd)  # the output layer's, lazily
    assert isinstance(out, da.Array) and out.shape == (N, 3)
    assert_allclose(out.compute(), squared.predict_proba(X))
    reg = KernelGDRegressor(n_centers=100, random_state=0, alpha=1e-3).fit(dask(X), dask(y))
    out = reg.predict(Xd)
    assert isinstance(out, da.Array) and out.shape == (N,)
    assert_allclose(out.compute(), reg.predict(X))


def test_dask_dataframes(client):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    ddf = dd.from_pandas(frame, npartitions=4)
    target = dd.from_pandas(pd.Series(y, name="y"), npartitions=4)
    est = KernelGDRegressor(alpha=1e-4, **TIGHT).fit(ddf, target)
    ref = KernelGDRegressor(alpha=1e-4, **TIGHT).fit(frame, y)
    assert list(est.feature_names_in_) == ["a", "b", "c", "d"]
    assert_allclose(est.predict(frame), ref.predict(frame), atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # blocks reach the model with their feature names
        assert_allclose(est.predict(ddf).compute(), ref.predict(frame), atol=1e-6)


def test_auto_on_few_rows_is_the_in_memory_exact_fit(client):
    est = KernelGDRegressor(alpha=1e-3, random_state=0).fit(dask(X), dask(y))
    ref = KernelGDRegressor(alpha=1e-3, random_state=0).fit(X, y)
    assert est.n_centers_ == N == ref.n_centers_
    assert_allclose(est.predict(X), ref.predict(X))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(n_centers=None), "n_centers"),
        (dict(n_centers=50, early_stopping=True), "early_stopping"),
        (dict(n_centers=50, solver="eigenpro"), "solver"),
        (dict(n_centers=50, kernel="sigmoid"), "positive semi-definite"),
        (dict(kernel="precomputed"), "precomputed"),
    ],
)
def test_unsupported_settings_raise_clear_errors(client, params, match):
    with pytest.raises(ValueError, match=match):
        KernelGDRegressor(**params).fit(dask(X), dask(y))


def test_bad_inputs_raise_clear_errors(client):
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KernelGDRegressor(n_centers=50).fit(dask(bad), dask(y))
    with pytest.raises(ValueError, match="rows"):
        KernelGDRegressor(n_centers=50).fit(dask(X), dask(y[:-1]))
    with pytest.raises(ValueError, match="Negative"):
        KernelGDRegressor(n_centers=50).fit(dask(X), dask(y), sample_weight=dask(-np.ones(N)))
    with pytest.raises(ValueError, match="2 classes"):
        KernelGDClassifier(n_centers=50).fit(dask(X), dask(np.zeros(N)))


def test_a_killed_worker_leaves_the_fit_finishing_or_failing_clearly():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(**cluster_kwargs())
    outcome = {}
    with cluster, distributed.Client(cluster) as c:
        Xd, yd = dask(X).persist(), dask(y).persist()
        est = KernelGDRegressor(n_centers=150, random_state=0, alpha=1e-6, tol=1e-6)

        def run():
            try:
                outcome["model"] = est.fit(Xd, yd)
            except Exception as exc:  # noqa: BLE001 - recorded, checked below
                outcome["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        time.sleep(2.0)  # the fit's passes are under way
        assert thread.is_alive(), "the fit ended before the worker was killed: the test checks nothing"
        pids = c.run(os.getpid)
        victim = sorted(pids)[0]
        os.kill(pids[victim], signal.SIGKILL)
        thread.join(timeout=180)
        assert not thread.is_alive(), "the fit hung after a worker was killed"
        assert pids[victim] not in c.run(os.getpid).values()  # it did die (the nanny restarted it)
    if "error" in outcome:  # a failure must say what happened
        assert str(outcome["error"])
    else:
        ref = KernelGDRegressor(n_centers=150, random_state=0, alpha=1e-6, tol=1e-6).fit(X, y)
        assert_allclose(outcome["model"].predict(X), ref.predict(X), atol=1e-4)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_cv_widths_run_on_joblibs_dask_backend(client, loss):
    from joblib import parallel_config

    from kernelgd import KernelGDClassifierCV

    Xs, ys = X[:400], labels3[:400]
    # threads (the logistic loss races widths); a seed: the logistic refit's calibration draws its folds
    ref = KernelGDClassifierCV(loss=loss, cv=3, n_jobs=-1, random_state=0).fit(Xs, ys)
    with distributed.get_task_stream(client) as stream, parallel_config(backend="dask"):
        est = KernelGDClassifierCV(loss=loss, cv=3, n_jobs=-1, random_state=0).fit(Xs, ys)
    assert len(stream.data) >= 3  # the widths ran on the workers
    assert (est.sigma_, est.alpha_) == (ref.sigma_, ref.alpha_)
    assert_array_equal(est.predict(Xs), ref.predict(Xs))


def test_kernel_blocks_recomputed_when_they_do_not_fit(client, monkeypatch):
    from kernelgd import _dask

    monkeypatch.setattr(_dask, "KERNEL_CACHE_SHARE", 0.0)  # the decision is the client's
    seen = []
    original = _dask.DaskBlocks.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(self.stored)

    monkeypatch.setattr(_dask.DaskBlocks, "__init__", spy)
    kwargs = dict(loss="logistic", alpha=1e-4, **TIGHT)
    ref = KernelGDClassifier(**kwargs).fit(X, labels3)
    est = KernelGDClassifier(**kwargs).fit(dask(X), dask(labels3))
    assert seen == [False]
    assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-6)


def test_float32_blocks_fit_as_float64(client):
    ref = KernelGDRegressor(alpha=1e-4, **TIGHT).fit(X.astype(np.float32), y)
    est = KernelGDRegressor(alpha=1e-4, **TIGHT).fit(dask(X.astype(np.float32)), dask(y))
    assert est.X_fit_.dtype == np.float64
    assert_allclose(est.predict(X), ref.predict(X), atol=1e-6)


@pytest.mark.parametrize("loss, n_classes", [("squared", 2), ("logistic", 2), ("logistic", 3)])
def test_few_centers_of_one_feature_take_dense_steps_as_in_memory(client, loss, n_classes):
    # K_mm of 60 centers on one feature is singular to rounding: CG's steps on it lost conjugacy or stopped
    # without descent (warnings; objectives up to twice the in-memory fit's, probabilities 0.37 apart; the
    # softmax's 0.22 apart, 7 of 8 fits warned). Newton's steps are now formed densely on the workers' K Z, as in
    # memory, the softmax's coupling every class
    r = np.random.RandomState(1)
    X1 = r.normal(size=(1200, 1))
    f = np.sin(2 * X1[:, 0]) + 0.5 * r.normal(size=1200)
    labels = np.digitize(f, [0.0] if n_classes == 2 else [-0.5, 0.5])
    w = r.uniform(0.2, 3.0, 1200)
    w[r.rand(1200) < 0.1] = 0.0
    params = dict(n_centers=60, loss=loss, alpha=1e-6, random_state=0)
    ref = KernelGDClassifier(**params).fit(X1, labels, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = KernelGDClassifier(**params).fit(da.from_array(X1, chunks=(500, 1)), da.from_array(labels, chunks=500),
                                               sample_weight=da.from_array(w, chunks=500))
    assert est.loss_curve_[-1] <= ref.loss_curve_[-1] * (1 + 1e-4)
    assert_allclose(est.predict_proba(X1), ref.predict_proba(X1), atol=3e-3)
