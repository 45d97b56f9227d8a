"""scikit-learn's callback API (sklearn.callback, 1.9+): progress and monitors during a fit."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import log_loss

from kernelgd import KernelGDClassifier, KernelGDRegressor, kernel_matrix

callback = pytest.importorskip("sklearn.callback")


class Recorder:
    """Records the hooks; asks to stop after ``stop_after`` iterations."""

    def __init__(self, stop_after=None):
        self.events, self.models, self.stop_after = [], [], stop_after

    def setup(self, estimator, context):
        self.events.append("setup")

    def teardown(self, estimator, context):
        self.events.append("teardown")

    def on_fit_task_begin(self, estimator, context):
        self.events.append(("begin", context.task_name))

    def on_fit_task_end(self, estimator, context, *, fitted_estimator=None):
        self.events.append(("end", context.task_name))
        if context.task_name == "iteration":
            self.models.append(fitted_estimator)
            return self.stop_after is not None and len(self.models) >= self.stop_after
        return False


def data(n=120, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 3))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


def objective(model, X, y, alpha):
    K = kernel_matrix(X, kernel="rbf", sigma=model.sigma_)
    residual = K @ model.dual_coef_ + model.intercept_ - y
    return np.mean(residual**2) + alpha * model.dual_coef_ @ K @ model.dual_coef_


@pytest.mark.parametrize("solver", ["gd", "cg", "eigenpro"])
@pytest.mark.parametrize("tol", [1e-4, 0.0])
def test_one_task_per_iteration_and_a_model_for_each(solver, tol):
    X, y = data()
    alpha = 0.0 if solver == "eigenpro" else 1e-3
    recorder = Recorder()
    model = KernelGDRegressor(solver=solver, alpha=alpha, max_iter=30, tol=tol, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.set_callbacks(recorder).fit(X, y)
    n = len(recorder.models)
    assert n == model.n_iter_ > 0
    expected = ["setup", ("begin", "fit")] + [("begin", "iteration"), ("end", "iteration")] * n
    assert recorder.events == expected + [("end", "fit"), "teardown"]
    if solver != "eigenpro":  # eigenpro's loss_curve_ is per epoch on a subsample estimate
        # Each iteration's model predicts with that iterate: its objective is the curve's value. The
        # curve ends at the returned model, the best iterate seen: with tol=0 the iterations past it
        # (at the objective's rounding) are in no curve, and none is better than it.
        values = [objective(m, X, y, alpha) for m in recorder.models]
        curve = model.loss_curve_
        assert len(curve) <= n
        np.testing.assert_allclose(values[: len(curve)], curve, rtol=1e-6)
        assert min(values) >= curve[-1] * (1 - 1e-6)
    returned = recorder.models[-1] if solver == "eigenpro" else recorder.models[len(model.loss_curve_) - 1]
    np.testing.assert_allclose(returned.predict(X), model.predict(X), rtol=1e-6, atol=1e-9)
    assert not hasattr(model, "_callback_fit_ctx")


def test_a_callback_can_stop_the_fit():
    X, y = data()
    recorder = Recorder(stop_after=4)
    model = KernelGDRegressor(solver="gd", alpha=1e-3, max_iter=500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a requested stop is not a convergence failure
        model.set_callbacks(recorder).fit(X, y)
    assert model.n_iter_ == 4 and len(model.loss_curve_) == 4


@pytest.mark.parametrize("solver", ["newton", "gd"])
def test_scoring_monitor_logs_every_step_of_a_logistic_fit(solver):
    X, y = data(150)
    labels = y > 0
    monitor = callback.ScoringMonitor(scoring="neg_log_loss")
    model = KernelGDClassifier(loss="logistic", alpha=1e-2, solver=solver, max_iter=300).set_callbacks(monitor).fit(X, labels)
    log = monitor.get_logs().data
    steps = [row for row in log if row["task_name"] == "iteration"]
    assert len(steps) == model.n_iter_
    final = [row for row in log if row["task_name"] == "fit"][0]["neg_log_loss"]
    assert final == pytest.approx(-log_loss(labels, model.predict_proba(X)))
    assert steps[-1]["neg_log_loss"] == pytest.approx(final)


def test_progress_bar_runs(capsys):
    pytest.importorskip("rich")
    X, y = data()
    model = KernelGDRegressor(alpha=1e-3).set_callbacks(callback.ProgressBar()).fit(X, y)
    assert model.n_iter_ > 0


def test_without_callbacks_nothing_is_set():
    X, y = data()
    model = KernelGDRegressor(alpha=1e-3).fit(X, y)
    assert not hasattr(model, "_skl_callbacks") and not hasattr(model, "_callback_fit_ctx")


def test_fits_without_sklearn_callback(tmp_path):
    # Older scikit-learn has no sklearn.callback: the estimators fit as before, without set_callbacks.
    import subprocess
    import sys

    code = (
        "import importlib, sys, types\n"
        "import numpy as np\n"
        "import kernelgd._base, kernelgd._regressor\n"  # scikit-learn itself imports sklearn.callback
        "sys.modules['sklearn.callback'] = types.ModuleType('sklearn.callback')\n"
        "importlib.reload(kernelgd._base)\n"
        "KernelGDRegressor = importlib.reload(kernelgd._regressor).KernelGDRegressor\n"
        "X = np.random.RandomState(0).normal(size=(50, 2))\n"
        "m = KernelGDRegressor(alpha=1e-3).fit(X, X[:, 0])\n"
        "assert kernelgd._base.CallbackSupportMixin.__module__ == 'kernelgd._base'\n"  # the stand-in
        "assert not hasattr(m, 'set_callbacks') and m.score(X, X[:, 0]) > 0.9\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


class PropagatedRecorder(Recorder):
    """A Recorder that meta-estimators pass on to the estimators they fit."""

    max_propagation_depth = None


@pytest.mark.parametrize("cv", [None, 3])
def test_cv_estimators_report_each_width_and_the_refit(cv):
    # The searches ran silent: no task per width, nothing reached the refit's iterations.
    from kernelgd import KernelGDClassifierCV, KernelGDRegressorCV

    X, y = data()
    for model, target in [(KernelGDRegressorCV(cv=cv), y), (KernelGDClassifierCV(loss="logistic", cv=3), y > 0)]:
        own, passed = Recorder(), PropagatedRecorder()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.set_callbacks(own, passed).fit(X, target)
        widths = {(p.get("kernel"), p.get("sigma")) for p in model.cv_results_["params"]
                  if np.ndim(p.get("sigma")) == 0}  # ARD's scales are no width of the walk
        for recorder in (own, passed):
            events = recorder.events
            assert events[:3] == ["setup", ("begin", "fit"), ("begin", "search")]
            assert events[-2:] == [("end", "fit"), "teardown"]
            scored = [name for event, name in events[1:-1] if event == "end" and name.startswith("kernel=")]
            assert len(scored) == len(set(scored)) == len(widths)
            assert events.index(("end", "search")) > max(events.index(("end", n)) for n in scored)
        assert ("end", "refit") in own.events
        # the propagated one also sees the refit's own fit, an iteration each
        assert passed.events.count(("end", "iteration")) == model.best_estimator_.n_iter_ > 0
        assert own.events.count(("end", "iteration")) == 0
