"""The CV estimators against brute-force leave-one-out and GridSearchCV."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold

from kernelgd import (
    KernelGDClassifier,
    KernelGDClassifierCV,
    KernelGDRegressor,
    KernelGDRegressorCV,
    kernel_matrix,
)
from kernelgd._fit import TOL_SHARE

rng = np.random.RandomState(0)
X = rng.uniform(-2, 2, size=(60, 2))
y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.randn(60)
SIGMAS, ALPHAS = [0.5, 1.0, 2.0], [1e-5, 1e-3, 1e-1]


def _brute_force_loo(sigma, alpha, w, fit_intercept, kernel="rbf", renormalise=True):
    """Minus the weighted mean squared LOO error, each point's model a dense solve without it."""
    return -float(w @ _brute_force_loo_errors(sigma, alpha, w, fit_intercept, kernel, renormalise) ** 2)


def _brute_force_loo_errors(sigma, alpha, w, fit_intercept, kernel="rbf", renormalise=True):
    """Each point's LOO residual, its model a dense solve without it.

    Without point i the fit minimises sum_{j != i} w_j (f_j - y_j)^2 + alpha a'K a with the
    weights renormalised over the other rows, as KernelGDRegressor(alpha=alpha) fitted on them
    does, from its stationarity conditions (W K + alpha I) a + W 1 b = W y and 1'W (K a + b - y) = 0.
    """
    K = kernel_matrix(X / np.asarray(sigma), kernel=kernel, sigma=1.0)  # a scale per feature: rescaled features
    n = len(y)
    errors = np.empty(n)
    for i in range(n):
        r = np.delete(np.arange(n), i)
        wr = w[r] / w[r].sum() if renormalise else w[r]
        W = np.diag(wr)
        if fit_intercept:
            top = np.hstack([W @ K[np.ix_(r, r)] + alpha * np.eye(n - 1), W @ np.ones((n - 1, 1))])
            bottom = np.append(wr @ K[np.ix_(r, r)], wr.sum())[None, :]
            sol = np.linalg.solve(np.vstack([top, bottom]), np.append(W @ y[r], wr @ y[r]))
            a, b = sol[:-1], sol[-1]
        else:
            a, b = np.linalg.solve(W @ K[np.ix_(r, r)] + alpha * np.eye(n - 1), W @ y[r]), 0.0
        errors[i] = y[i] - (K[i, r] @ a + b)
    return errors


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_leave_one_out_scores_equal_brute_force(fit_intercept, weighted):
    sw = rng.uniform(0.5, 2.0, len(y)) if weighted else None
    model = KernelGDRegressorCV(ard=False, sigmas=SIGMAS, alphas=ALPHAS, fit_intercept=fit_intercept).fit(X, y, sample_weight=sw)
    w = np.ones(len(y)) if sw is None else sw
    w = w / w.sum()
    assert set(model.cv_results_["param_kernel"]) == {"rbf", "laplacian"}  # the default candidates
    for params, score in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"]):
        assert_allclose(score, _brute_force_loo(params["sigma"], params["alpha"], w, fit_intercept,
                                                params["kernel"]), rtol=1e-6)


def test_leave_one_out_with_a_scorer_equals_brute_force_r2():
    from sklearn.metrics import r2_score

    model = KernelGDRegressorCV(ard=False, sigmas=[1.0], alphas=[1e-3], scoring="r2").fit(X, y)
    loo = []  # each left-out fit is the base estimator's, with its per-sample alpha, on n - 1 rows
    for i in range(len(y)):
        r = np.delete(np.arange(len(y)), i)
        ref = KernelGDRegressor(sigma=1.0, alpha=1e-3, solver="cg", tol=1e-12,
                                max_iter=2000).fit(X[r], y[r])
        loo.append(ref.predict(X[i : i + 1])[0])
    assert_allclose(model.best_score_, r2_score(y, loo), rtol=1e-6)


def test_kfold_scores_equal_grid_search():
    cv = KFold(3, shuffle=True, random_state=0)
    model = KernelGDRegressorCV(ard=False, sigmas=SIGMAS, alphas=ALPHAS, cv=cv, tol=1e-12, max_iter=2000).fit(X, y)
    grid = {"kernel": ["rbf", "laplacian"], "sigma": SIGMAS, "alpha": ALPHAS}
    search = GridSearchCV(KernelGDRegressor(tol=1e-12, max_iter=2000), grid, cv=cv,
                          scoring="neg_mean_squared_error").fit(X, y)

    def keyed(results):
        return {(p["kernel"], p["sigma"], p["alpha"]): s for p, s in zip(results["params"], results["mean_test_score"])}

    ours, theirs = keyed(model.cv_results_), keyed(search.cv_results_)
    assert ours.keys() == theirs.keys()
    scored = [key for key, score in ours.items() if not np.isnan(score)]  # a later width starts its path lower
    assert len(scored) >= len(ours) // 2
    for key in scored:
        assert_allclose(ours[key], theirs[key], rtol=1e-6)
    best = search.best_params_
    assert (model.kernel_, model.sigma_, model.alpha_) == (best["kernel"], best["sigma"], best["alpha"])
    assert "split2_test_score" in model.cv_results_


def test_refit_is_the_base_model_at_the_chosen_parameters():
    model = KernelGDRegressorCV(ard=False, sigmas=SIGMAS, alphas=ALPHAS).fit(X, y)
    assert model.cv_results_["rank_test_score"][model.best_index_] == 1
    reference = KernelGDRegressor(sigma=model.sigma_, alpha=model.alpha_).fit(X, y)
    assert_allclose(model.predict(X), reference.predict(X))
    assert_allclose(model.dual_coef_, reference.dual_coef_)
    assert model.best_score_ == pytest.approx(np.max(model.cv_results_["mean_test_score"]))


def test_default_search_beats_default_base_model():
    X_test = rng.uniform(-2, 2, size=(200, 2))
    y_test = np.sin(2 * X_test[:, 0]) + X_test[:, 1] ** 2
    tuned = KernelGDRegressorCV().fit(X, y)
    assert tuned.score(X_test, y_test) > KernelGDRegressor().fit(X, y).score(X_test, y_test)
    results = tuned.cv_results_
    assert set(results["param_kernel"]) == {"rbf", "laplacian"}
    grid = results["params"][:-1] if tuned.ard_ else results["params"]  # ARD's scales: the last row
    assert len(grid) == len({(p["kernel"], p["sigma"]) for p in grid}) * 21
    best = results["params"][tuned.best_index_]
    assert tuned.kernel_ == best["kernel"] == tuned.best_estimator_.kernel


@pytest.mark.parametrize("optimum", np.arange(-10, 11))
def test_width_walk_finds_the_best_half_step_of_a_unimodal_score(optimum):
    from kernelgd._search import WIDTH_STEPS, _walk_widths

    calls = []

    def score(sigma):
        k = 2 * np.log2(sigma / 3.0)
        calls.append(k)
        return np.array([[-((k - optimum) ** 2)], [-((k - optimum) ** 2) - 1.0]])  # (n_alphas, n_splits)

    found = _walk_widths(3.0, score)
    ks = [2 * np.log2(sigma / 3.0) for sigma, _ in found]
    assert_allclose(ks, np.sort(calls))  # each width scored once, returned in increasing order
    best = ks[int(np.argmax([scores.mean(axis=1).max() for _, scores in found]))]
    assert best == pytest.approx(np.clip(optimum, -WIDTH_STEPS, WIDTH_STEPS))  # the half-step grid's best
    assert len(calls) <= 3 + (abs(optimum) + 1) // 2 + 2 and np.all(np.abs(ks) <= WIDTH_STEPS + 1e-9)


@pytest.mark.parametrize("incumbent, walked", [(-np.inf, [-2, -1, 0, 1, 2]), (-9.5, [-2, -1, 0, 1, 2]),
                                               (-8.5, [-2, 0, 2])])
def test_width_walk_skips_half_steps_that_cannot_beat_an_earlier_kernel(incumbent, walked):
    # best -10 at k = 0, -11 a whole step either side: a concave score's half step reaches at most -9
    from kernelgd._search import _walk_widths

    calls = []

    def score(sigma):
        k = 2 * np.log2(sigma / 3.0)
        calls.append(k)
        return np.array([[-10.0 - k**2 / 4]])

    _walk_widths(3.0, score, incumbent=incumbent)
    assert_allclose(np.sort(calls), walked, atol=1e-12)


@pytest.mark.parametrize("incumbent, walked", [(-np.inf, [-2, 0, 2, 4, 6, 7, 8]), (-17.0, [-2, 0, 2, 4, 6, 7, 8]),
                                               (-15.0, [-2, 0, 2]), (-13.5, [-2, 0, 2])])
def test_width_walk_stops_stepping_where_no_step_can_beat_an_earlier_kernel(incumbent, walked):
    # a score rising by 2 a whole step: where it is concave, no step gains more than the one before it
    from kernelgd._search import _walk_widths

    calls = []

    def score(sigma):
        k = 2 * np.log2(sigma / 3.0)
        calls.append(k)
        return np.array([[-20.0 + k]])

    _walk_widths(3.0, score, incumbent=incumbent)
    assert_allclose(np.sort(calls), walked, atol=1e-12)


def test_the_kernel_of_the_best_first_round_walks_first(monkeypatch):
    # the laplacian's first round beats the rbf's best step by more than a step can gain: the rbf, listed first,
    # stops after its first round, as it would after the laplacian's whole walk
    from kernelgd import _search

    calls = []

    def loo(self, X, Y, sw, scorer, rescore=None):
        def scores(kernel, sigma, alphas):
            k = 2 * np.log2(sigma / _search._scale_sigma(X, sw, kernel))
            calls.append((kernel, round(k), sigma))
            value = (-20.0 + k) if kernel == "rbf" else (-5.0 - abs(k))
            return np.full(len(alphas), value) - np.arange(len(alphas))  # the largest alpha best

        return scores

    monkeypatch.setattr(KernelGDRegressorCV, "_loo", loo)
    X, y = np.random.RandomState(0).randn(60, 2), np.random.RandomState(1).randn(60)
    model = KernelGDRegressorCV(kernel=["rbf", "laplacian"], ard=False).fit(X, y)
    assert sorted(k for kernel, k, _ in calls if kernel == "rbf") == [-2, 0, 2]
    assert sorted(k for kernel, k, _ in calls if kernel == "laplacian") == [-2, -1, 0, 1, 2]
    assert model.kernel_ == "laplacian"
    assert model.sigma_ == [sigma for kernel, k, sigma in calls if kernel == "laplacian" and k == 0][0]


def test_parallel_walk_equals_the_serial_one():
    serial = KernelGDRegressorCV(ard=False).fit(X, y)
    parallel = KernelGDRegressorCV(ard=False, n_jobs=2).fit(X, y)
    assert serial.cv_results_["params"] == parallel.cv_results_["params"]
    assert_allclose(serial.cv_results_["mean_test_score"], parallel.cv_results_["mean_test_score"])
    assert (serial.kernel_, serial.sigma_, serial.alpha_) == (parallel.kernel_, parallel.sigma_, parallel.alpha_)


@pytest.mark.parametrize(
    "kernel, match", [([], "empty"), (["rbf", "precomputed"], "precomputed"), (("rbf", "nonsense"), "nonsense")]
)
def test_bad_kernel_candidates_are_clear_errors(kernel, match):
    with pytest.raises(ValueError, match=match):
        KernelGDRegressorCV(kernel=kernel, sigmas=SIGMAS, alphas=ALPHAS).fit(X, y)


def test_kernel_candidates_without_sigma_are_searched_with_the_others():
    model = KernelGDRegressorCV(kernel=["linear", "rbf"], sigmas=SIGMAS, alphas=ALPHAS, ard=False).fit(X, y)
    results = model.cv_results_
    assert list(results["param_kernel"]).count("linear") == len(ALPHAS)
    assert results["param_sigma"].mask.sum() == len(ALPHAS)  # masked where the kernel has no width
    best = results["params"][model.best_index_]
    assert model.kernel_ == best["kernel"] and model.sigma_ == best.get("sigma")


def test_verbose_prints_one_line_per_width(capsys):
    KernelGDRegressorCV(ard=False, sigmas=SIGMAS, alphas=ALPHAS, verbose=1).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[KernelGDRegressorCV]")]
    assert len(lines) == 2 * 3 and "best alpha=" in lines[0]
    assert sum("kernel=laplacian" in line for line in lines) == 3
    KernelGDRegressorCV(kernel="rbf", ard=False, sigmas=SIGMAS, alphas=ALPHAS, verbose=1).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[KernelGDRegressorCV]")]
    assert len(lines) == 3 and "kernel=" not in lines[0]


def test_kernels_without_sigma_search_alpha_only():
    model = KernelGDRegressorCV(kernel="linear", alphas=ALPHAS).fit(X, y)
    assert model.sigma_ is None and "param_sigma" not in model.cv_results_


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "precomputed"}, "precomputed"),
        ({"alphas": [-1.0]}, "alphas"),
        ({"sigmas": [0.0, 1.0]}, "sigmas"),
        ({"alphas": []}, "alphas"),
    ],
)
def test_bad_grids_are_clear_errors(params, match):
    with pytest.raises(ValueError, match=match):
        KernelGDRegressorCV(**params).fit(X, y)


labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8)).astype(int)  # three classes


@pytest.mark.parametrize("loss, scoring", [("squared", "accuracy"), ("logistic", "neg_log_loss")])
def test_classifier_kfold_scores_equal_grid_search(loss, scoring):
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    # tol**2 = 1e-16 of the objective: each fit converges; a tol whose square is below the objective's rounding
    # ends fits where rounding stops them, which depends on their path (warm-started here, cold in the search)
    params = dict(loss=loss, tol=1e-8, max_iter=3000, random_state=0)  # the same preconditioner landmarks
    model = KernelGDClassifierCV(sigmas=SIGMAS, alphas=ALPHAS, cv=cv, **params).fit(X, labels)
    search = GridSearchCV(KernelGDClassifier(**params), {"sigma": SIGMAS, "alpha": ALPHAS}, cv=cv,
                          scoring=scoring).fit(X, labels)
    ours = {(p["sigma"], p["alpha"]): s for p, s in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"])}
    for p, score in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
        assert_allclose(ours[(p["sigma"], p["alpha"])], score, rtol=1e-5, atol=1e-7)
    assert_allclose(model.best_score_, search.best_score_, rtol=1e-5)
    assert_allclose(model.decision_function(X), search.best_estimator_.decision_function(X), rtol=1e-5, atol=1e-7)


def test_classifier_searches_kernel_candidates_as_grid_search_does():
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    params = dict(loss="logistic", tol=1e-8, max_iter=3000, random_state=0)  # see the test above
    kernels = ["rbf", "laplacian"]
    model = KernelGDClassifierCV(kernel=kernels, sigmas=SIGMAS, alphas=ALPHAS, cv=cv, **params).fit(X, labels)
    search = GridSearchCV(KernelGDClassifier(**params), {"kernel": kernels, "sigma": SIGMAS, "alpha": ALPHAS},
                          cv=cv, scoring="neg_log_loss").fit(X, labels)
    ours = {(p["kernel"], p["sigma"], p["alpha"]): s
            for p, s in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"])}
    for p, score in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
        assert_allclose(ours[(p["kernel"], p["sigma"], p["alpha"])], score, rtol=1e-5, atol=1e-7)
    assert model.kernel_ == search.best_params_["kernel"] == model.best_estimator_.kernel
    assert_allclose(model.predict_proba(X), search.best_estimator_.predict_proba(X), rtol=1e-5, atol=1e-7)
    assert KernelGDClassifierCV().kernel == "rbf"  # the classifier's default searches one kernel


def _brute_force_classifier_loo(sigma, alpha, labels, fit_weight):
    """Each point's one-vs-rest outputs from the base estimator refitted without it (same alpha)."""
    scores = []
    for i in range(len(labels)):
        r = np.delete(np.arange(len(labels)), i)
        ref = KernelGDClassifier(sigma=sigma, alpha=alpha, solver="cg", tol=1e-12, max_iter=3000,
                                 combine="argmax").fit(X[r], labels[r], sample_weight=fit_weight[r])
        scores.append(ref.decision_function(X[i : i + 1])[0])
    return np.array(scores)


def test_classifier_leave_one_out_decision_values_equal_brute_force():
    from sklearn.preprocessing import label_binarize

    Y = label_binarize(labels, classes=[0, 1, 2], neg_label=-1)

    def decision_error(estimator, X_, y_true, sample_weight=None):
        return -float(np.average(((Y - estimator.decision_function(X_)) ** 2).sum(axis=1), weights=sample_weight))

    model = KernelGDClassifierCV(sigmas=[1.0], alphas=[1e-3], scoring=decision_error).fit(X, labels)
    reference = _brute_force_classifier_loo(1.0, 1e-3, labels, np.ones(len(labels)))
    assert "split0_test_score" not in model.cv_results_  # leave-one-out, not K-fold
    assert_allclose(model.best_score_, -np.mean(((Y - reference) ** 2).sum(axis=1)), rtol=1e-6)


def test_classifier_leave_one_out_accuracy_with_class_weights_equals_brute_force():
    binary = (labels == 2).astype(int)
    model = KernelGDClassifierCV(sigmas=[0.5, 2.0], alphas=[1e-4, 1e-1], class_weight="balanced",
                                 combine="argmax").fit(X, binary)
    fit_weight = np.where(binary == 1, len(binary) / (2 * binary.sum()), len(binary) / (2 * (1 - binary).sum()))
    for p, score in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"]):
        decisions = _brute_force_classifier_loo(p["sigma"], p["alpha"], binary, fit_weight)
        assert score == pytest.approx(np.mean((decisions > 0) == binary))


def test_classifier_leave_one_out_accuracy_reads_the_output_layer_as_the_refit_decides():
    # with combine="logistic" a left-out row's class is the layer's, fitted to the left-out outputs
    # with the fit's weights; brute-force left-out outputs give the same accuracy (to one borderline row)
    from sklearn.utils.class_weight import compute_sample_weight

    from kernelgd._combiner import layer_classes

    model = KernelGDClassifierCV(sigmas=[0.5, 2.0], alphas=[1e-4, 1e-1], class_weight="balanced").fit(X, labels)
    fit_weight = compute_sample_weight("balanced", labels)
    for p, score in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"]):
        decisions = _brute_force_classifier_loo(p["sigma"], p["alpha"], labels, fit_weight)
        read = layer_classes(decisions, labels, fit_weight)
        assert score == pytest.approx(np.mean(read == labels), abs=1.01 / len(labels))


@pytest.mark.parametrize("combine", ["logistic", "argmax"])
def test_classifier_default_scoring_is_the_accuracy_scorers(combine):
    # the default scoring reads left-out accuracy without the scorer's validation of every alpha's labels
    weights = np.random.RandomState(0).uniform(0.5, 2.0, len(labels))
    scores = [KernelGDClassifierCV(sigmas=[0.5, 2.0], alphas=[1e-4, 1e-2, 1e-1], scoring=scoring, combine=combine)
              .fit(X, labels, sample_weight=weights).cv_results_["mean_test_score"] for scoring in (None, "accuracy")]
    assert_allclose(scores[0], scores[1], rtol=1e-12)


def test_classifier_leave_one_out_scoring_runs_on_one_blas_thread(monkeypatch):
    # Regression: the many small layer fits of the left-out scoring ran after a multithreaded eigh,
    # whose idle BLAS threads spun: on 2 cores the search of a 124-row set took 1.0 s against 0.4 s
    from threadpoolctl import threadpool_info

    from kernelgd import _combiner

    seen, fit_layer = [], _combiner._logistic_layer

    def recording(*args):
        seen.append(max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"))
        return fit_layer(*args)

    monkeypatch.setattr(_combiner, "_logistic_layer", recording)
    KernelGDClassifierCV(sigmas=[0.5, 2.0], alphas=[1e-4, 1e-1]).fit(X, labels)
    assert seen and set(seen) == {1}


def test_classifier_probabilities_are_the_refits_as_the_base_classifier_has_them():
    # the logistic loss's, or the squared loss's output layer's (KernelGDClassifier's default): not with argmax
    assert hasattr(KernelGDClassifierCV(), "predict_proba")
    assert not hasattr(KernelGDClassifierCV(combine="argmax"), "predict_proba")
    squared = KernelGDClassifierCV(sigmas=[1.0], alphas=[1e-3]).fit(X, labels)
    assert squared.best_estimator_.combiner_ is not None
    assert_allclose(squared.predict_proba(X), squared.best_estimator_.predict_proba(X))
    assert_allclose(squared.predict_log_proba(X), squared.best_estimator_.predict_log_proba(X))
    assert_array_equal(squared.predict(X), squared.classes_[squared.predict_proba(X).argmax(axis=1)])
    argmax = KernelGDClassifierCV(combine="argmax", sigmas=[1.0], alphas=[1e-3]).fit(X, labels)
    assert not hasattr(argmax, "predict_proba") and not hasattr(argmax, "predict_log_proba")
    logistic = KernelGDClassifierCV(loss="logistic", sigmas=[1.0], alphas=[1e-3]).fit(X, labels)
    proba = logistic.predict_proba(X)
    assert_allclose(proba.sum(axis=1), 1.0)
    assert_array_equal(logistic.classes_, [0, 1, 2])
    assert_array_equal(logistic.predict(X), logistic.classes_[proba.argmax(axis=1)])


def test_ard_objective_is_the_leave_one_out_error_and_its_gradient_is_exact():
    from scipy.optimize import approx_fprime

    from kernelgd._ard import loo_error_and_gradient

    w = rng.uniform(0.5, 2.0, len(y))
    w /= w.sum()
    sigma = np.array([0.8, 1.5])
    theta = np.append(np.log(sigma), np.log(1e-3))
    for fit_intercept in (True, False):
        value, grad = loo_error_and_gradient(theta, X, y, w, fit_intercept)
        # ARD's search criterion holds the ridge fixed over the other rows' weights (a smooth
        # objective in log alpha); the candidates it finds are scored exactly afterwards
        reference = -_brute_force_loo_per_feature(sigma, 1e-3, w, fit_intercept, renormalise=False)
        assert_allclose(value, reference, rtol=1e-6)
        numeric = approx_fprime(theta, lambda t: loo_error_and_gradient(t, X, y, w, fit_intercept)[0], 1e-7)
        assert_allclose(grad, numeric, rtol=1e-4, atol=1e-9)


def _brute_force_loo_per_feature(sigma, alpha, w, fit_intercept, renormalise=True):
    Xs = X / sigma
    saved = globals()["X"]
    try:
        globals()["X"] = Xs
        return _brute_force_loo(1.0, alpha, w, fit_intercept, renormalise=renormalise)
    finally:
        globals()["X"] = saved


def test_ard_finds_the_relevant_feature():
    # y depends on feature 0 only; feature 1 is noise: ARD widens its scale and predicts better
    r = np.random.RandomState(0)
    Xa = r.uniform(-2, 2, size=(150, 2))
    ya = np.sin(2 * Xa[:, 0]) + 0.05 * r.randn(150)
    X_test = r.uniform(-2, 2, size=(300, 2))
    y_test = np.sin(2 * X_test[:, 0])
    plain = KernelGDRegressorCV(ard=False).fit(Xa, ya)
    ard = KernelGDRegressorCV(ard=True).fit(Xa, ya)
    assert not plain.ard_ and ard.ard_
    assert ard.sigma_.shape == (2,) and ard.sigma_[1] > 3 * ard.sigma_[0]
    assert ard.best_score_ >= plain.best_score_
    assert ard.score(X_test, y_test) > plain.score(X_test, y_test)


@pytest.mark.parametrize("seed", [0, 3])
def test_ard_with_zero_weight_rows_is_the_fit_without_them(seed):
    # Zero-weight rows were "unseen" by the scales and judged them with a 0 / 0 score: a NaN that
    # rejected every learned scale, with a RuntimeWarning
    r = np.random.RandomState(seed)
    Xa = r.normal(size=(80, 4))
    ya = np.sin(2 * Xa[:, 0]) + 0.05 * r.randn(80)
    w = np.ones(80)
    w[:25] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weighted = KernelGDRegressorCV(kernel="rbf").fit(Xa, ya, sample_weight=w)
    dropped = KernelGDRegressorCV(kernel="rbf").fit(Xa[25:], ya[25:])
    assert weighted.ard_ and np.ndim(weighted.sigma_) == 1  # the scales were kept, as without the rows
    assert_allclose(weighted.sigma_, dropped.sigma_)
    assert weighted.alpha_ == dropped.alpha_
    assert_allclose(weighted.predict(Xa), dropped.predict(Xa), atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1])
def test_kfold_with_zero_weight_rows_is_the_search_without_them(seed):
    # Regression: zero-weight rows were split into folds like the others; a test fold of them alone
    # made the log-loss scorer raise "Sample weights must contain at least one non-zero number"
    r = np.random.RandomState(seed)
    Xa = r.normal(size=(90, 3))
    labels = np.digitize(np.sin(2 * Xa[:, 0]) + Xa[:, 1] + 0.2 * r.randn(90), [-0.5, 0.5])
    w = np.ones(90)
    w[:30] = 0.0
    weighted = KernelGDClassifierCV(loss="logistic", random_state=0).fit(Xa, labels, sample_weight=w)
    dropped = KernelGDClassifierCV(loss="logistic", random_state=0).fit(Xa[30:], labels[30:])
    assert_allclose(weighted.best_score_, dropped.best_score_, rtol=1e-8)
    assert weighted.alpha_ == dropped.alpha_
    assert_allclose(weighted.predict_proba(Xa), dropped.predict_proba(Xa), atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ard_scales_are_judged_on_the_rows_they_were_not_fitted_on(monkeypatch, seed):
    import kernelgd._ard as ard
    import kernelgd._model_selection as ms

    # scales fitted on 30 of the 60 rows: the other 30 choose their alpha and decide whether they stay
    monkeypatch.setattr(ard, "ARD_MAX_SAMPLES", 30)
    calls = []
    monkeypatch.setattr(ms, "fit_scales", lambda *args, **kw: calls.append((ard.fit_scales(*args, **kw), kw, args))
                        or calls[-1][0])
    alphas = np.logspace(-6, 0, 13)
    model = KernelGDRegressorCV(ard=True, sigmas=SIGMAS, alphas=alphas, random_state=seed).fit(X, y)
    (sigma, lam, _, fitted), kw, args = calls[0]
    assert kw["criterion"] == "loo"  # a subsample: leave-one-out scales, judged by the other rows
    unseen = np.setdiff1d(np.arange(len(y)), fitted)
    w = np.full(len(y), 1.0 / len(y))

    def held_out(s, a, kernel="rbf"):
        return -np.mean(_brute_force_loo_errors(s, a, w, True, kernel)[unseen] ** 2)

    results = model.cv_results_
    grid_rows = range(len(results["params"]) - 1)  # the last row is ARD's
    rbf = [i for i in grid_rows if results["params"][i]["kernel"] == "rbf"]
    start = results["params"][min(rbf, key=lambda i: results["rank_test_score"][i])]
    assert (args[3], args[4]) == (start["sigma"], start["alpha"])  # from the best rbf candidate
    grid = results["params"][min(grid_rows, key=lambda i: results["rank_test_score"][i])]  # the judge
    grid_sigma = grid["sigma"]
    plain = max(held_out(grid_sigma, a, grid["kernel"]) for a in alphas)
    candidates = np.unique(np.append(alphas, lam))
    learned = [held_out(sigma, a) for a in candidates]
    assert model.ard_
    if max(learned) > plain:
        assert_allclose(model.sigma_, sigma)
        assert_allclose(model.alpha_, candidates[int(np.argmax(learned))])
        reference = _brute_force_loo_per_feature(sigma, model.alpha_, w, True)
        assert_allclose(model.best_score_, reference, rtol=1e-5)  # a tiny alpha: the dense solves round
        assert model.kernel_ == "rbf"
    else:
        assert (model.kernel_, model.sigma_) == (grid["kernel"], grid_sigma)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ard_likelihood_gradient_is_exact(fit_intercept):
    from scipy.optimize import approx_fprime

    from kernelgd._ard import neg_log_likelihood_and_gradient

    w = rng.uniform(0.5, 2.0, len(y))
    w /= w.sum()
    theta = np.append(np.log([0.8, 1.5]), np.log(1e-3))
    value, grad = neg_log_likelihood_and_gradient(theta, X, y, w, fit_intercept)
    numeric = approx_fprime(theta, lambda t: neg_log_likelihood_and_gradient(t, X, y, w, fit_intercept)[0], 1e-7)
    assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_ard_likelihood_is_the_gaussian_process_marginal_likelihood():
    # no intercept, equal weights: S K S + lam I = (K + n lam I) / n, so the model is
    # GaussianProcessRegressor with kernel c * RBF + WhiteKernel(c n lam) at the best amplitude c
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    from kernelgd._ard import neg_log_likelihood_and_gradient

    n = len(y)
    w = np.full(n, 1.0 / n)

    def reference(sigma, lam):
        K = kernel_matrix(X / sigma, sigma=1.0) + n * lam * np.eye(n)
        c = y @ np.linalg.solve(K, y) / n
        # kernelgd's rbf is exp(-d^2 / sigma^2), scikit-learn's exp(-d^2 / (2 l^2))
        kernel = ConstantKernel(c, "fixed") * RBF(sigma / np.sqrt(2), "fixed") + WhiteKernel(c * n * lam, "fixed")
        gp = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
        return -gp.log_marginal_likelihood_value_

    points = [(np.array([0.8, 1.5]), 1e-3), (np.array([1.2, 0.6]), 1e-2)]
    ours = [neg_log_likelihood_and_gradient(np.append(np.log(sg), np.log(lam)), X, y, w, False)[0]
            for sg, lam in points]
    theirs = [reference(sg, lam) for sg, lam in points]
    assert_allclose(ours[1] - ours[0], theirs[1] - theirs[0], rtol=1e-8)


@pytest.mark.parametrize("criterion", ["likelihood", "loo"])
def test_ard_reads_repeated_rows_as_one_and_weights_as_relative(criterion):
    # Regression: the likelihood read weights as counts of agreeing observations, so that weights of
    # 10 drove its noise to zero: KernelGDRegressorCV's learned scales then lost to the grid's (test
    # RMSE 0.19 against 0.073 without weights, on the 250-row problem of the test below)
    from kernelgd._ard import fit_scales

    w = np.random.RandomState(0).uniform(0.5, 2.0, len(y))
    twice = np.r_[np.arange(len(y)), np.arange(len(y))]
    runs = [fit_scales(X_, y_, w_, 1.0, 1e-3, True, np.random.RandomState(0), criterion=criterion)
            for X_, y_, w_ in ((X, y, w), (X, y, 10 * w), (X[twice], y[twice], np.r_[w, w] / 2))]
    for sigma, lam, value, rows in runs[1:]:  # (the leave-one-out error is flat in a small ridge: 2e-5 apart)
        assert_allclose(sigma, runs[0][0], rtol=1e-5)
        assert lam == pytest.approx(runs[0][1], rel=1e-4) and value == pytest.approx(runs[0][2], rel=1e-6)
    assert len(runs[2][3]) == 2 * len(y)  # every copy of a fitted row is a fitted row


@pytest.mark.parametrize("criterion", ["likelihood", "loo"])
def test_ard_scales_do_not_depend_on_the_targets_units(criterion):
    # Regression: L-BFGS-B's stopping tests are absolute below a criterion of 1, so targets of a small spread
    # stopped the leave-one-out search where it started (UCI naval's, spread 0.007: every learned scale was
    # the grid's width) and a large spread ran it to max_iter; a mean far from the spread cancelled in rounding
    from kernelgd._ard import fit_scales

    w = np.random.RandomState(0).uniform(0.5, 2.0, len(y))
    runs = [fit_scales(X, scale * y + shift, w, 1.0, 1e-3, True, np.random.RandomState(0), criterion=criterion)
            for scale, shift in ((1.0, 0.0), (1e-3, 0.0), (1e-3, 5.0), (1e4, 0.0))]
    for sigma, lam, _, _ in runs[1:]:
        assert_allclose(sigma, runs[0][0], rtol=1e-5)
        assert lam == pytest.approx(runs[0][1], rel=1e-4)
    assert np.ptp(np.log(runs[0][0])) > 0.1  # the scales moved from the start, each its own way


def test_cv_regressor_reads_repeated_rows_as_one_and_weights_as_relative():
    # Regression: leave-one-out left out one copy of a repeated row, which the other copy then
    # predicted: every row given twice chose alpha 1e-10 (test RMSE 0.44 against 0.073 once)
    rng = np.random.RandomState(0)
    X_ = rng.normal(size=(250, 3))
    y_ = np.sin(2 * X_[:, 0]) + 0.5 * X_[:, 1] ** 2 + 0.1 * rng.randn(250)
    X_test = rng.normal(size=(500, 3))
    once = KernelGDRegressorCV(random_state=0).fit(X_, y_)
    twice = np.r_[np.arange(250), np.arange(250)]
    for model in (KernelGDRegressorCV(random_state=0).fit(X_[twice], y_[twice]),
                  KernelGDRegressorCV(random_state=0).fit(X_, y_, sample_weight=np.full(250, 10.0))):
        assert model.alpha_ == once.alpha_ and model.kernel_ == once.kernel_
        assert_allclose(model.sigma_, once.sigma_, rtol=1e-5)
        assert_allclose(model.predict(X_test), once.predict(X_test), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", [6, 11])
def test_cv_regressor_counts_distinct_rows_so_integer_weights_choose_as_the_rows_repeated(seed):
    # Regression: the search's thresholds counted rows, copies included. On rows of few distinct values weighted 1
    # to 3 (2,500 rows of 44 and 900 of 15), the rows repeated crossed the leave-one-out's 3,000 (a held-out check
    # the weights skipped: alpha 5.6e-5 against 1e-10, predictions 0.3 of y's spread apart) or ARD's 1,000 (another
    # criterion: 0.1 apart).
    rng = np.random.RandomState(seed)
    n, d = int(rng.choice([300, 900, 2500])), int(rng.choice([1, 2, 4]))
    X_ = np.round(rng.normal(size=(n, d)) * rng.choice([1, 2, 4]))
    y_ = np.sin(X_[:, 0]) + 0.5 * X_[:, -1] + rng.uniform(0.1, 1) * rng.normal(size=n)
    rng.choice(5), rng.choice(2)  # (the draws of the search that found it)
    counts = rng.randint(1, 4, n)
    weighted = KernelGDRegressorCV(random_state=0).fit(X_, y_, sample_weight=counts)
    repeated = KernelGDRegressorCV(random_state=0).fit(np.repeat(X_, counts, 0), np.repeat(y_, counts))
    assert weighted.kernel_ == repeated.kernel_ and np.ndim(weighted.sigma_) == np.ndim(repeated.sigma_)
    assert_allclose(repeated.sigma_, weighted.sigma_, rtol=1e-2)
    assert repeated.alpha_ == pytest.approx(weighted.alpha_, rel=1e-2) or max(repeated.alpha_, weighted.alpha_) < 1e-9
    assert_allclose(repeated.predict(X_), weighted.predict(X_), atol=5e-3 * y_.std())  # (float32 K above 4096 rows)


def test_ard_on_every_row_fits_the_likelihood(monkeypatch):
    import kernelgd._ard as ard
    import kernelgd._model_selection as ms

    calls = []
    monkeypatch.setattr(ms, "fit_scales", lambda *args, **kw: calls.append(kw) or ard.fit_scales(*args, **kw))
    KernelGDRegressorCV(ard=True, sigmas=SIGMAS, alphas=ALPHAS).fit(X, y)
    assert calls == [{"criterion": "likelihood"}]


def test_ard_auto_searches_scales_for_single_target_rbf_fits_only():
    grid = dict(sigmas=[1.0, 2.0], alphas=[1e-3, 1e-1])
    assert KernelGDRegressorCV(**grid).fit(X, y).ard_
    assert not KernelGDRegressorCV(kernel="laplacian", **grid).fit(X, y).ard_
    assert not KernelGDRegressorCV(**grid).fit(X, np.column_stack([y, -y])).ard_


def test_ard_needs_the_rbf_kernel():
    with pytest.raises(ValueError, match="rbf"):
        KernelGDRegressorCV(kernel="laplacian", ard=True, sigmas=[1.0], alphas=[1e-3]).fit(X, y)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_low_rank_leave_one_out_equals_the_dense_formula_on_the_same_kernel(fit_intercept):
    from kernelgd._loo import _eigen_system, _loo_scores, _low_rank_system

    F = rng.normal(size=(60, 7))  # K = F F' of rank 7
    w = rng.uniform(0.5, 2.0, 60)
    w /= w.sum()
    Y = y[:, None]
    dense = _loo_scores(_eigen_system(F @ F.T, Y, w, fit_intercept), Y, w, ALPHAS, fit_intercept, None)[0]
    low = _loo_scores(_low_rank_system(F, Y, w, fit_intercept), Y, w, ALPHAS, fit_intercept, None)[0]
    assert_allclose(low, dense, rtol=1e-8)


def test_large_n_leave_one_out_uses_the_pivoted_cholesky_factor(monkeypatch):
    # Past LOO_MAX_SAMPLES the scores come from a rank-r factor; at full rank they are exact.
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 10)
    monkeypatch.setattr(ms, "LOW_RANK_LOO_RANK", len(y))
    model = KernelGDRegressorCV(sigmas=SIGMAS, alphas=ALPHAS, random_state=0).fit(X, y)
    w = np.full(len(y), 1.0 / len(y))
    for params, score in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"]):
        assert_allclose(score, _brute_force_loo(params["sigma"], params["alpha"], w, True, params["kernel"]),
                        rtol=1e-5)
    monkeypatch.setattr(ms, "LOW_RANK_LOO_RANK", 20)  # a real low-rank factor: still sound
    low = KernelGDRegressorCV(sigmas=SIGMAS, alphas=ALPHAS, random_state=0).fit(X, y)
    assert np.all(np.isfinite(low.cv_results_["mean_test_score"])) and low.score(X, y) > 0.9


def test_refit_is_solved_to_a_fraction_of_the_models_own_error():
    # a noise-free target: the default tol=1e-3 would leave a solve error half the model's own
    from sklearn.kernel_ridge import KernelRidge

    r = np.random.RandomState(0)
    Xs = r.randn(1000, 4)
    ys = np.sin(Xs / 2).sum(axis=1)
    grid = dict(ard=False, sigmas=[3.0], alphas=[1e-10], fit_intercept=False, random_state=0)
    model = KernelGDRegressorCV(**grid).fit(Xs, ys)
    loo_rmse = np.sqrt(-model.best_score_)
    assert model.best_estimator_.tol == pytest.approx(TOL_SHARE * loo_rmse / ys.std(), rel=1e-9)
    assert model.best_estimator_.tol < 1e-3
    K = kernel_matrix(Xs, sigma=3.0)
    exact = KernelRidge(alpha=len(ys) * 1e-10, kernel="precomputed").fit(K, ys).predict(K)
    assert np.sqrt(np.mean((model.predict(Xs) - exact) ** 2)) < 0.2 * loo_rmse
    # other scorers keep the given tol, "auto" the base estimator's at a given alpha
    assert KernelGDRegressorCV(**grid, scoring="r2").fit(Xs, ys).best_estimator_.tol_ == 1e-3
    given = KernelGDRegressorCV(**grid, tol=1e-3).fit(Xs, ys).best_estimator_.tol
    assert given == pytest.approx(0.1 * loo_rmse / ys.std(), rel=1e-9)  # a given tol: lowered to a tenth


def test_ard_inverse_is_exact_for_spd_and_finite_at_rounding_level():
    from kernelgd._ard import _spd_inverse

    r = np.random.RandomState(0)
    A = r.randn(40, 40)
    A = A @ A.T + np.eye(40)
    assert_allclose(_spd_inverse(A), np.linalg.inv(A), rtol=1e-10, atol=1e-14)
    singular = np.ones((5, 5))  # PSD with a zero ridge: Cholesky fails, the result stays finite
    M = _spd_inverse(singular)
    assert np.all(np.isfinite(M)) and np.array_equal(M, M.T)


def test_kfold_alpha_path_stops_early_without_missing_the_best():
    """Each fold's path stops 4 alphas past its best: the search still finds GridSearchCV's best."""
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    alphas = np.logspace(-9, 0, 19)
    params = dict(loss="logistic", tol=1e-8, max_iter=3000, random_state=0)
    model = KernelGDClassifierCV(sigmas=[1.0], alphas=alphas, cv=cv, **params).fit(X, labels)
    search = GridSearchCV(KernelGDClassifier(sigma=1.0, **params), {"alpha": alphas}, cv=cv,
                          scoring="neg_log_loss").fit(X, labels)
    means = model.cv_results_["mean_test_score"]
    unscored = np.isnan(means)
    assert unscored.any() and not unscored[0]  # the path stopped, after the largest alpha
    assert np.all(model.cv_results_["rank_test_score"][unscored] > (~unscored).sum())  # unscored rank last
    theirs = dict(zip(search.cv_results_["param_alpha"], search.cv_results_["mean_test_score"]))
    for alpha, score in zip(model.cv_results_["param_alpha"][~unscored], means[~unscored]):
        assert_allclose(score, theirs[alpha], rtol=1e-4)
    assert model.alpha_ == search.best_params_["alpha"]


def test_a_later_width_starts_its_path_near_the_best_alpha_and_climbs_where_needed():
    """A width searched after another starts PATH_HEADROOM decades above the best alpha so far, and
    climbs back up where its first alpha scores best: its best alpha is GridSearchCV's."""
    from kernelgd._search import PATH_HEADROOM

    r = np.random.RandomState(0)
    X1 = r.uniform(-3, 3, (120, 1))
    y1 = np.sin(2 * X1[:, 0]) + 0.3 * r.randn(120)
    cv, alphas = KFold(3, shuffle=True, random_state=0), np.logspace(-8, 0, 9)
    params = dict(tol=1e-10, max_iter=3000)
    # the wide kernel's best alpha is 1e-6, the narrow one's 1e-2: four decades apart
    model = KernelGDRegressorCV(kernel="rbf", ard=False, sigmas=[3.0, 0.3], alphas=alphas, cv=cv, **params).fit(X1, y1)
    for sigma in (3.0, 0.3):
        search = GridSearchCV(KernelGDRegressor(kernel="rbf", sigma=sigma, **params), {"alpha": alphas}, cv=cv,
                              scoring="neg_mean_squared_error").fit(X1, y1)
        theirs = dict(zip(search.cv_results_["param_alpha"], search.cv_results_["mean_test_score"]))
        ours = {p["alpha"]: s for p, s in zip(model.cv_results_["params"], model.cv_results_["mean_test_score"])
                if p["sigma"] == sigma and not np.isnan(s)}
        for alpha, score in ours.items():
            assert_allclose(score, theirs[alpha], rtol=1e-6)
        assert max(ours, key=ours.get) == search.best_params_["alpha"]
        if sigma == 0.3:  # started at 1e-6 * 10**PATH_HEADROOM, climbed to 1e-2 and one past it
            assert min(ours) < 1e-6 * 10**PATH_HEADROOM < 1e-2 < max(ours) < 1.0


@pytest.mark.parametrize("ahead", [True, False])
def test_the_race_compares_sums_over_the_folds_so_far(ahead):
    """A width that wins its first fold but trails the best candidate's sum over its first two stops there."""
    from kernelgd._search import RACE_FOLDS, _scorer

    model = KernelGDClassifierCV(loss="logistic", tol=1e-6, max_iter=3000, random_state=0)
    model.classes_ = np.unique(labels)
    scorer = _scorer(model, "neg_log_loss", None, model.classes_)
    Xf, sw, alphas = X.astype(float), np.ones(len(labels)), np.array([1e-2, 1e-3])
    alone = model._kfold_scores(Xf, labels, sw, "rbf", 1.0, alphas, scorer)
    best = np.nanmax(alone, axis=0)
    # the incumbent loses fold 0 by 0.01 and wins fold 1 by 0.05 (or, ahead, loses it by 0.05 too)
    incumbent = best - 0.01
    incumbent[1] = best[1] + (-0.05 if ahead else 0.05)
    raced = model._kfold_scores(Xf, labels, sw, "rbf", 1.0, alphas, scorer, incumbent)
    scored = np.isfinite(raced).any(axis=0)
    assert_array_equal(scored, [True] * alone.shape[1] if ahead else np.arange(alone.shape[1]) < RACE_FOLDS)
    assert_allclose(raced[:, scored], alone[:, scored])


def test_a_width_that_loses_every_fold_stops_early():
    """K-fold races widths on paired folds: one that loses its first RACE_FOLDS folds to the best stops there."""
    from kernelgd._search import RACE_FOLDS

    from sklearn.datasets import make_moons

    Xm, ym = make_moons(200, noise=0.2, random_state=0)
    params = dict(loss="logistic", tol=1e-6, max_iter=3000, random_state=0)
    sigmas, alphas = [0.5, 20.0], [1e-2, 1e-3, 1e-4]  # the wide kernel is nearly linear: it loses
    model = KernelGDClassifierCV(sigmas=sigmas, alphas=alphas, cv=5, **params).fit(Xm, ym)
    search = GridSearchCV(KernelGDClassifier(**params), {"sigma": sigmas, "alpha": alphas}, cv=5,
                          scoring="neg_log_loss").fit(Xm, ym)
    wide = np.array([p["sigma"] == 20.0 for p in model.cv_results_["params"]])
    assert np.all(np.isnan(model.cv_results_["mean_test_score"][wide]))
    for k in range(5):  # scored on the first RACE_FOLDS folds, then stopped
        assert np.isnan(model.cv_results_[f"split{k}_test_score"][wide]).all() == (k >= RACE_FOLDS)
    assert (model.sigma_, model.alpha_) == (search.best_params_["sigma"], search.best_params_["alpha"])
    assert_allclose(model.best_score_, search.best_score_, rtol=1e-4)


@pytest.mark.parametrize("cv", [None, 3])
@pytest.mark.parametrize("scoring", ["neg_log_loss", "neg_brier_score"])
def test_probability_scoring_without_probabilities_is_a_clear_error(scoring, cv):
    """The squared loss's search scores no probabilities: a probability scorer is refused up front."""
    with pytest.raises(ValueError, match="needs predict_proba.*loss='logistic'"):
        KernelGDClassifierCV(scoring=scoring, cv=cv, sigmas=[1.0], alphas=[1e-3]).fit(X, labels)
    binary = (labels > 0).astype(int)
    assert KernelGDClassifierCV(scoring="roc_auc", cv=cv, sigmas=[1.0], alphas=[1e-3]).fit(X, binary).best_score_ > 0.5


def test_folds_in_worker_processes_score_as_one_process_does(monkeypatch):
    """Where the search is large enough, its folds run in worker processes, a round of RACE_FOLDS
    first and the rest once the race allows: every score, the race's stop and the choice match
    the folds run one at a time in this process."""
    import kernelgd._search as search_module
    from sklearn.datasets import make_moons

    Xm, ym = make_moons(200, noise=0.2, random_state=0)
    params = dict(loss="logistic", sigmas=[0.5, 20.0], alphas=[1e-2, 1e-3, 1e-4], cv=5, tol=1e-8,
                  max_iter=3000, random_state=0)
    one = KernelGDClassifierCV(**params, options={"n_threads": 1}).fit(Xm, ym)

    monkeypatch.setattr(search_module, "FOLD_PROCESSES_MIN_WORK", 0)
    used = []
    original = search_module.Parallel

    class Spy(original):
        def __init__(self, *args, **kwargs):
            used.append(kwargs.get("prefer"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(search_module, "Parallel", Spy)
    two = KernelGDClassifierCV(**params, options={"n_threads": 2}).fit(Xm, ym)
    assert "processes" in used
    for key in ["mean_test_score"] + [f"split{k}_test_score" for k in range(5)]:
        assert_allclose(two.cv_results_[key], one.cv_results_[key], rtol=1e-10, equal_nan=True)
    assert np.isnan(two.cv_results_["mean_test_score"][-3:]).all()  # the wide kernel lost the race
    assert (two.sigma_, two.alpha_) == (one.sigma_, one.alpha_)


@pytest.mark.parametrize("processes", [False, True])
def test_the_folds_fits_warnings_are_held_back_and_the_refits_shown(monkeypatch, processes):
    # Regression: every fold's fit at every probe ridge warned (2 folds and the refit: 3 warnings at max_iter=1;
    # a rough kernel's probe at a tiny ridge warned of rounding), each telling the user to change a fit they never
    # get. Each fold's fit scores what it reached; the refit, the model returned, warns as any fit does.
    import kernelgd._search as search_module
    from sklearn.exceptions import ConvergenceWarning

    monkeypatch.setattr(search_module, "FOLD_PROCESSES_MIN_WORK", 0 if processes else 10**12)
    model = KernelGDClassifierCV(loss="logistic", sigmas=[1.0], alphas=[1e-6], cv=2, max_iter=1,
                                 options={"n_threads": 2})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, labels)
    shown = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(shown) == 1 and "max_iter=1" in str(shown[0].message)
    assert np.isfinite(model.cv_results_["mean_test_score"]).all()



def test_held_back_warnings_still_fail_a_fit_whose_warnings_decide():
    # the K-fold path holds kernelgd's warnings back; a held-out fit inside it that fails on a warning (recorded)
    # still sees them, and its own held ones stay out of the enclosing list
    from kernelgd._warnings import held_back, recorded, warn

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with held_back() as outer:
            warn("a probe's warning")
            with recorded() as caught:
                warn("a held-out fit's warning")
                warnings.warn("another library's warning")
        warn("the refit's warning")
    assert [str(m) for _, m in outer] == ["a probe's warning"]
    assert sorted(str(c.message if hasattr(c, "message") else c[1]) for c in caught) == [
        "a held-out fit's warning", "another library's warning"]
    assert [str(w.message) for w in shown] == ["the refit's warning"]

def test_a_fold_path_returns_other_warnings_for_a_worker_process_to_pass_on():
    # in a worker process (record=True) the path returns what else warned (here the scorer), which the caller
    # raises again; the fits' own warnings are held back there too
    from sklearn.metrics.pairwise import rbf_kernel

    from kernelgd._search import _fold_path

    def scorer(model, K_test, y_test, sample_weight=None):
        warnings.warn("a scorer's warning", UserWarning)
        return float(np.mean(model.predict(K_test) == y_test))

    K = rbf_kernel(X, gamma=0.5)
    train, test = np.arange(0, 60, 2), np.arange(1, 60, 2)
    params = dict(kernel="precomputed", loss="logistic", max_iter=1, warm_start=True)
    scores, caught = _fold_path(KernelGDClassifier, params, K, train, test, labels, np.ones(60), labels,
                                np.ones(60), np.array([1e-2, 1e-4]), 0, scorer, record=True)
    assert np.isfinite(scores).all()
    assert [str(m) for m in caught] == ["a scorer's warning"] * 2


@pytest.mark.parametrize("cv", [None, 3])
@pytest.mark.parametrize("classifier", [False, True])
def test_a_scorer_without_sample_weight_scores_unweighted_with_weighted_fits(cv, classifier):
    # As GridSearchCV: a metric that takes no sample_weight raised TypeError from inside
    # scikit-learn; it now scores unweighted, the same as a metric that ignores the weights.
    from sklearn.metrics import make_scorer

    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(60)
    if classifier:
        y = (y > 0).astype(int)
    w = rng.uniform(0.5, 2.0, 60)

    def metric(y_true, y_pred):
        return -np.mean(np.abs(y_true - y_pred))

    def metric_ignoring_weights(y_true, y_pred, sample_weight=None):
        return metric(y_true, y_pred)

    Estimator = KernelGDClassifierCV if classifier else KernelGDRegressorCV
    params = dict(cv=cv, kernel="rbf", sigmas=[0.5, 1.0], alphas=[1e-4, 1e-2])
    plain = Estimator(scoring=make_scorer(metric), **params).fit(X, y, sample_weight=w)
    ignoring = Estimator(scoring=make_scorer(metric_ignoring_weights), **params).fit(X, y, sample_weight=w)
    assert plain.best_score_ == pytest.approx(ignoring.best_score_, rel=1e-9)
    assert_array_equal(plain.sigma_, ignoring.sigma_)
    assert plain.alpha_ == ignoring.alpha_


def _held_out_split(n, seed):
    """The held-out search's split of n distinct rows: one fifth held out, by random_state's first permutation."""
    rows = np.random.RandomState(seed).permutation(n)
    return np.sort(rows[: n // 5]), np.sort(rows[n // 5 :])


def _sine_rows(seed, n=300):
    r = np.random.RandomState(seed)
    Xs = r.uniform(-3, 3, size=(n, 2))
    return Xs, np.sin(2 * Xs[:, 0]) + 0.1 * r.randn(n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_past_the_exact_search_candidates_are_fitted_on_four_fifths_and_scored_on_the_rest(monkeypatch, seed):
    # Past LOO_MAX_SAMPLES (default grids and folds) every candidate is a fit on a random four fifths of the rows
    # scored on the other fifth, as an independent fit on that split scores: first the base estimator's rules,
    # then from their ridge down by sqrt(10) per step while the score rises, then ARD's scales; the best is refitted.
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    Xs, ys = _sine_rows(seed)
    model = KernelGDRegressorCV(random_state=seed).fit(Xs, ys)
    held, fitted = _held_out_split(300, seed)

    def held_out_score(**params):
        fit = KernelGDRegressor(random_state=seed, **params).fit(Xs[fitted], ys[fitted])
        return -np.mean((fit.predict(Xs[held]) - ys[held]) ** 2), fit

    results = model.cv_results_
    params, scores = results["params"], results["split0_test_score"]
    assert_array_equal(scores, results["mean_test_score"])
    rule_score, rule = held_out_score()
    assert params[0] == {"kernel": rule.kernel_, "sigma": rule.sigma_, "alpha": rule.alpha_}
    assert scores[0] == pytest.approx(rule_score, rel=1e-6)
    assert model.holdout_scores_ == {"rule": scores[0], "search": model.best_score_}
    path = [i for i, p in enumerate(params) if np.ndim(p["sigma"]) == 0]
    for i in path[1:]:  # the ridge path: each step warm-started from the last, as good as a cold fit
        assert params[i]["sigma"] == rule.sigma_ and params[i]["kernel"] == rule.kernel_
        assert params[i]["alpha"] == pytest.approx(params[i - 1]["alpha"] / np.sqrt(10), rel=1e-12)
        assert scores[i] == pytest.approx(held_out_score(**params[i])[0], rel=1e-3)
    # it stops at the first step that does not improve (or after a decade)
    assert all(scores[i] > scores[i - 1] for i in path[1:-1])
    assert len(path) == 1 + ms.RIDGE_STEPS or scores[path[-1]] <= max(scores[: path[-1]])
    if model.ard_:  # the last row: ARD's scales, with the ridge rule at them
        assert len(params) == len(path) + 1 and np.ndim(params[-1]["sigma"]) == 1
        assert scores[-1] == pytest.approx(held_out_score(kernel="rbf", sigma=params[-1]["sigma"])[0], rel=1e-3)
        assert model.ard_score_ == scores[-1]
    # the chosen: the best held-out score, refitted on every row at its width and ridge; where the rules won,
    # they choose again on every row, as KernelGDRegressor() does
    assert model.best_index_ == int(np.argmax(scores)) and results["rank_test_score"][model.best_index_] == 1
    assert model.best_score_ == scores.max()
    best = params[model.best_index_]
    if model.best_index_ == 0:
        full = KernelGDRegressor(random_state=seed).fit(Xs, ys)
        assert model.best_estimator_.alpha == "auto"
        assert (model.kernel_, model.sigma_, model.alpha_) == (full.kernel_, full.sigma_, full.alpha_)
        assert_allclose(model.predict(Xs), full.predict(Xs))
    else:
        assert_array_equal(model.sigma_, best["sigma"])
        assert model.alpha_ == best["alpha"] == model.best_estimator_.alpha


def test_past_the_exact_search_scales_that_stay_at_the_rules_width_are_not_fitted_again(monkeypatch):
    # ARD's scales where L-BFGS did not move them from the rules' rbf width give the rules' own model: it is not
    # fitted again, and ard_score_ is the rules' held-out score
    import kernelgd._model_selection as msel
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    Xs, ys = _sine_rows(0)
    moved = KernelGDRegressorCV(random_state=0).fit(Xs, ys)
    assert moved.ard_ and moved.kernel_ == "rbf" and np.ndim(moved.cv_results_["params"][-1]["sigma"]) == 1
    monkeypatch.setattr(msel, "fit_scales", lambda X, y, w, sigma0, *args, **kwargs: (np.full(X.shape[1], sigma0),))
    fits, fit = [], KernelGDRegressor.fit

    def recording(self, *args, **kwargs):
        fits.append(self.get_params())
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(KernelGDRegressor, "fit", recording)
    model = KernelGDRegressorCV(random_state=0).fit(Xs, ys)
    params = model.cv_results_["params"]
    assert model.ard_ and all(np.ndim(p["sigma"]) == 0 for p in params)
    assert len(params) == len(moved.cv_results_["params"]) - 1 and len(fits) == len(params) + 1  # and the refit
    assert model.ard_score_ == model.holdout_scores_["rule"] == model.cv_results_["split0_test_score"][0]


@pytest.mark.parametrize("seed", [0, 4])
def test_past_the_exact_search_the_refit_starts_from_the_winners_held_out_fit(monkeypatch, seed):
    # a winner other than the rules is refitted on every row from its fit on four fifths of them (zero on the held-out
    # fifth): the same model as a cold refit, to the refit's tolerance, and the user's warm_start stays False
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    Xs, ys = _sine_rows(seed)
    starts, fit = [], KernelGDRegressor.fit

    def recording(self, X, y, sample_weight=None):
        if len(X) == len(Xs):  # the refit, the only fit on every row
            starts.append((self.warm_start, np.array(getattr(self, "dual_coef_", np.zeros(0)))))
        return fit(self, X, y, sample_weight=sample_weight)

    monkeypatch.setattr(KernelGDRegressor, "fit", recording)
    model = KernelGDRegressorCV(random_state=seed).fit(Xs, ys)
    assert model.best_index_ > 0 and len(starts) == 1
    held, fitted = _held_out_split(300, seed)
    warm, start = starts[0]
    assert warm and start.shape == (300,) and np.all(start[held] == 0) and np.all(start[fitted] != 0)
    assert model.best_estimator_.get_params()["warm_start"] is False
    params = model.best_estimator_.get_params()
    cold = fit(KernelGDRegressor(**params), Xs, ys)
    tol = params["tol"]
    assert np.sqrt(np.mean((model.predict(Xs) - cold.predict(Xs)) ** 2)) <= 10 * tol * np.std(ys)


@pytest.mark.parametrize("seed, n", [(2, 300), (7, 300), (1, 600), (5, 600)])
def test_past_the_exact_search_a_classifier_keeps_a_smaller_ridge_only_beyond_chance(monkeypatch, seed, n):
    # as the regressor's, scored by accuracy: a step of the ridge path replaces the incumbent only where its
    # held-out misclassifications are fewer by one standard error of the paired difference
    from sklearn.datasets import make_gaussian_quantiles

    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    Xs, ys = make_gaussian_quantiles(n_samples=n, n_features=2, n_classes=3, random_state=seed)
    model = KernelGDClassifierCV(random_state=seed).fit(Xs, ys)
    held, fitted = _held_out_split(n, seed)

    def held_out_wrong(**params):
        fit = KernelGDClassifier(random_state=seed, **params).fit(Xs[fitted], ys[fitted])
        return (fit.predict(Xs[held]) != ys[held]).astype(float), fit

    params, scores = model.cv_results_["params"], model.cv_results_["split0_test_score"]
    rule_wrong, rule = held_out_wrong()
    assert params[0] == {"sigma": rule.sigma_, "alpha": rule.alpha_}
    assert scores[0] == pytest.approx(1 - rule_wrong.mean())
    incumbent, wrong = 0, rule_wrong
    for i in range(1, len(params)):
        step = held_out_wrong(sigma=params[i]["sigma"], alpha=params[i]["alpha"])[0]
        assert scores[i] == pytest.approx(1 - step.mean(), abs=1.5 / len(held))  # warm start: a row at most
        gain = wrong - step
        significant = gain.mean() > np.sqrt(np.mean((gain - gain.mean()) ** 2) / len(gain))
        if not (scores[i] > scores[incumbent] and significant):
            assert i == len(params) - 1  # the path ends at the first step that is not a gain beyond chance
            break
        incumbent, wrong = i, step
    assert model.best_index_ == incumbent
    assert (model.best_estimator_.alpha == "auto") == (incumbent == 0)
    if incumbent:
        assert model.alpha_ == params[incumbent]["alpha"]


def test_past_the_exact_search_the_logistic_loss_compares_held_out_log_losses(monkeypatch):
    # the logistic loss's default scoring, the log-loss, needs no test of chance: the lowest is chosen
    from sklearn.datasets import make_moons
    from sklearn.metrics import log_loss

    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    Xs, ys = make_moons(250, noise=0.3, random_state=0)
    model = KernelGDClassifierCV(loss="logistic", random_state=0).fit(Xs, ys)
    held, fitted = _held_out_split(250, 0)
    rule = KernelGDClassifier(loss="logistic", random_state=0).fit(Xs[fitted], ys[fitted])
    scores = model.cv_results_["split0_test_score"]
    assert scores[0] == pytest.approx(-log_loss(ys[held], rule.predict_proba(Xs[held])), rel=1e-6)
    assert model.best_index_ == int(np.argmax(scores)) and model.best_score_ == scores.max()
    assert all(scores[i] > scores[i - 1] for i in range(1, len(scores) - 1))


def test_past_the_exact_search_another_list_of_kernels_fits_one_rule_per_kernel(monkeypatch):
    # a list other than the default pair: each kernel's rules are fitted and scored, a kernel without a width too
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    Xs, ys = _sine_rows(0)
    model = KernelGDRegressorCV(kernel=["linear", "rbf"], random_state=0, verbose=1).fit(Xs, ys)
    held, fitted = _held_out_split(300, 0)
    params, scores = model.cv_results_["params"], model.cv_results_["split0_test_score"]
    assert [p["kernel"] for p in params[:2]] == ["linear", "rbf"]
    for p, score in zip(params[:2], scores[:2]):
        fit = KernelGDRegressor(kernel=p["kernel"], random_state=0).fit(Xs[fitted], ys[fitted])
        assert score == pytest.approx(-np.mean((fit.predict(Xs[held]) - ys[held]) ** 2), rel=1e-6)
    assert scores[1] > scores[0] and model.kernel_ == "rbf"  # a sine: the rbf wins


def test_the_held_out_search_runs_only_past_the_exact_search_with_the_default_grids(monkeypatch):
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    r = np.random.RandomState(0)
    Xs = r.uniform(-3, 3, size=(120, 1))
    ys = np.sin(2 * Xs[:, 0]) + 0.1 * r.randn(120)
    assert KernelGDRegressorCV(ard=False, sigmas=[1.0, 2.0]).fit(Xs, ys).holdout_scores_ is None
    assert KernelGDRegressorCV(ard=False, alphas=[1e-4, 1e-2]).fit(Xs, ys).holdout_scores_ is None
    assert KernelGDRegressorCV(ard=False, cv=3).fit(Xs, ys).holdout_scores_ is None
    assert KernelGDRegressorCV(ard=False).fit(Xs, ys).holdout_scores_ is not None
    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 3000)
    assert KernelGDRegressorCV(ard=False).fit(Xs, ys).holdout_scores_ is None


def test_a_held_out_fit_that_warns_ends_the_ridge_path_and_is_not_chosen(monkeypatch):
    # a fit that warns scores what it reached, not its model: the rules' model (whose fit did not warn) stands
    import kernelgd._search as ms

    monkeypatch.setattr(ms, "LOO_MAX_SAMPLES", 50)
    fit = KernelGDRegressor.fit

    def warning_fit(self, X, y, sample_weight=None):
        if len(y) == 240 and self.alpha != "auto":  # the ridge path's fits
            warnings.warn("stopped at max_iter", ConvergenceWarning)
        return fit(self, X, y, sample_weight=sample_weight)

    monkeypatch.setattr(KernelGDRegressor, "fit", warning_fit)
    Xs, ys = _sine_rows(2)
    model = KernelGDRegressorCV(ard=False, random_state=2).fit(Xs, ys)
    assert len(model.cv_results_["params"]) == 2 and model.best_index_ == 0
    assert model.best_estimator_.alpha == "auto"


@pytest.mark.parametrize("estimator", [KernelGDRegressorCV(cv=4), KernelGDClassifierCV(cv=4)])
def test_kfold_keeps_every_copy_of_a_row_in_one_fold(estimator):
    rng = np.random.RandomState(0)
    X_ = rng.normal(size=(40, 2))
    rows = np.r_[np.arange(40), rng.choice(40, 20)]
    y_ = (X_[rows, 0] > 0).astype(int)
    copies = {}
    for i, r in enumerate(rows):
        copies.setdefault(r, []).append(i)
    for train, test in estimator._splits(X_[rows], y_, isinstance(estimator, KernelGDClassifierCV)):
        for group in copies.values():
            assert np.isin(group, test).all() or not np.isin(group, test).any()
    assert len(estimator._splits(X_, y_[:40], isinstance(estimator, KernelGDClassifierCV))) == 4


def test_kfold_search_on_repeated_rows_does_not_interpolate():
    # Regression: a copy of a row in the test fold was predicted by its twin in the training rows:
    # KernelGDClassifierCV(cv=5) on every row twice chose sigma 0.15 (test accuracy 0.58 against 0.90)
    rng = np.random.RandomState(0)
    X_ = rng.normal(size=(250, 3))
    f = np.sin(2 * X_[:, 0]) + 0.5 * X_[:, 1] ** 2
    y_ = (f + 0.3 * rng.randn(250) > np.median(f)).astype(int)
    X_test = rng.normal(size=(2000, 3))
    y_test = (np.sin(2 * X_test[:, 0]) + 0.5 * X_test[:, 1] ** 2 > np.median(f)).astype(int)
    twice = np.r_[np.arange(250), np.arange(250)]
    once = KernelGDClassifierCV(cv=5, random_state=0).fit(X_, y_).score(X_test, y_test)
    assert KernelGDClassifierCV(cv=5, random_state=0).fit(X_[twice], y_[twice]).score(X_test, y_test) > once - 0.05


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_kfold_search_splits_integer_weights_as_the_rows_repeated(loss):
    # Regression: the rows repeated were split by StratifiedGroupKFold, which balances the folds' sizes in rows,
    # and their integer weights by StratifiedKFold: other folds, and on 60 rows a 300 times larger ridge for the
    # weights (probabilities 0.5 apart); the default folds are now those of the distinct rows
    rng = np.random.RandomState(3)
    X = rng.normal(size=(60, 3))
    y = (np.sin(2 * X[:, 0]) + X[:, 2] + 0.5 * rng.normal(size=60) > 0).astype(int)
    counts = rng.randint(1, 4, 60)
    params = dict(loss=loss, random_state=0, cv=5 if loss == "squared" else None)
    weighted = KernelGDClassifierCV(**params).fit(X, y, sample_weight=counts)
    repeated = KernelGDClassifierCV(**params).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
    assert (weighted.sigma_, weighted.alpha_) == pytest.approx((repeated.sigma_, repeated.alpha_), rel=1e-9)
    assert weighted.best_score_ == pytest.approx(repeated.best_score_, rel=1e-3)  # (folds fitted to a tol)
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-4)


def test_the_logistic_refits_held_out_layer_holds_copies_of_a_row_together():
    # Regression: the refit at the ridge the search chose reads held-out folds for its output layer, but a fit at a
    # given ridge did not find the copies of a row: they were split between folds, each predicting its twin, and
    # on 60 rows weighted 1 to 3 the rows repeated kept a layer their integer weights declined (scores 2.3 apart)
    rng = np.random.RandomState(615)
    rng.choice(3), rng.choice(4), rng.choice(3)
    X = rng.normal(size=(60, 1)) * rng.uniform(0.5, 2, size=1)
    f = np.sin(2 * X[:, 0] / X[:, 0].std()) + X[:, 0] + rng.uniform(0.05, 1) * rng.normal(size=60)
    rng.choice(2)
    y = np.digitize(f, np.quantile(f, [1 / 3, 2 / 3]))
    counts = rng.randint(1, 4, 60)
    params = dict(loss="logistic", random_state=0, sigmas=[0.6], alphas=[0.01])
    weighted = KernelGDClassifierCV(**params).fit(X, y, sample_weight=counts)
    repeated = KernelGDClassifierCV(**params).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
    assert (weighted.best_estimator_.combiner_ is None) == (repeated.best_estimator_.combiner_ is None)
    assert_allclose(weighted.decision_function(X), repeated.decision_function(X), atol=1e-6)
