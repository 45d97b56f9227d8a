"""The logistic default's ridge: approximate leave-one-out over multiples of GCV's, on the rows or subsamples."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import load_iris, load_wine, make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from kernelgd import KernelGDClassifier, _logistic_loo, _loo_ridge


def _captured_scores(monkeypatch, multiple):
    """Start the rule's path at one multiple, at sigma="scale"'s width, keeping each call's arguments
    and per-group losses: the first is that multiple's."""
    captured = []
    scores = _loo_ridge._scores
    monkeypatch.setattr(_loo_ridge, "_scores", lambda *args: captured.append((args, scores(*args))) or captured[-1][1])
    monkeypatch.setattr(_loo_ridge, "MULTIPLES", np.array([multiple]))
    monkeypatch.setattr(_loo_ridge, "WIDTHS", (1.0,))
    return captured


def _refits_without_each_group(X, y, sw, alpha, sigma):
    """Brute force: each group of identical rows' weighted log-loss, refitted without it (its weight left
    out, the ridge per unit of the rest's weight unchanged), over the total weight."""
    groups = {}
    for i, row in enumerate(map(tuple, X)):
        groups.setdefault(row, []).append(i)
    exact = []
    for rows in groups.values():
        rest = np.ones(len(y), dtype=bool)
        rest[rows] = False
        refit = KernelGDClassifier(loss="logistic", alpha=alpha * sw.sum() / sw[rest].sum(), sigma=sigma,
                                   tol=1e-10).fit(X[rest], y[rest], sample_weight=sw[rest])
        P = refit.predict_proba(X[rows])[np.arange(len(rows)), np.searchsorted(refit.classes_, y[rows])]
        exact.append(np.sum(sw[rows] * -np.log(P)))
    return np.array(exact) / sw.sum()


def _classes(n_classes, weighted, repeated):
    X, y = make_classification(n_samples=50, n_features=4, n_informative=3, n_redundant=0, n_classes=n_classes,
                               n_clusters_per_class=1, flip_y=0.05, random_state=0)
    sw = np.random.RandomState(1).uniform(0.5, 2.0, len(y)) if weighted else np.ones(len(y))
    if repeated:
        X, y, sw = np.vstack([X, X[:5]]), np.r_[y, y[:5]], np.r_[sw, sw[:5]]
    return X, y, sw


CASES = [(2, False, False), (3, False, False), (2, True, True), (3, True, True)]


@pytest.mark.parametrize("n_classes, weighted, repeated", CASES)
def test_approximate_leave_one_out_matches_refits_without_each_row(monkeypatch, n_classes, weighted, repeated):
    # At a ridge 16 times the rule's start the one-step approximation is within 1% of the brute force
    # (at a far smaller ridge, a nearly interpolating fit, it is optimistic: see the next test).
    X, y, sw = _classes(n_classes, weighted, repeated)
    captured = _captured_scores(monkeypatch, 16.0)
    est = KernelGDClassifier(loss="logistic", tol=1e-8, random_state=0).fit(X, y, sample_weight=sw)
    args, losses = captured[0]
    exact = _refits_without_each_group(X, y, sw, args[5], est.sigma_)
    assert len(losses) == len(exact)
    assert args[3] @ losses == pytest.approx(exact.sum(), rel=1e-2)


@pytest.mark.parametrize("n_classes, weighted, repeated", CASES)
@pytest.mark.parametrize("multiple", [16.0, 1 / 16])
def test_exact_leave_one_out_matches_refits_where_the_approximation_is_optimistic(monkeypatch, n_classes, weighted,
                                                                                   repeated, multiple):
    # _logistic_loo.exact's Newton iterations reach each refit's loss (every row refined here); at a sixteenth of the
    # rule's start the one step's mean is off the brute force's by 7-19% (below it on two classes, above on three).
    X, y, sw = _classes(n_classes, weighted, repeated)
    captured = _captured_scores(monkeypatch, multiple)
    est = KernelGDClassifier(loss="logistic", tol=1e-8, random_state=0).fit(X, y, sample_weight=sw)
    args, approximate = captured[0]
    monkeypatch.setattr(_logistic_loo, "FAR", -np.inf)
    exact = _logistic_loo.exact(*args, approximate)
    reference = _refits_without_each_group(X, y, sw, args[5], est.sigma_)
    assert_allclose(args[3] * exact, reference, atol=1e-5)
    if multiple < 1:
        assert abs(args[3] @ approximate - reference.sum()) > 0.05 * reference.sum()


def test_the_rule_takes_the_largest_ridge_within_one_standard_error_of_the_paired_excess():
    rng = np.random.RandomState(0)
    n = 200
    base = rng.exponential(0.3, n)
    losses = np.stack([base + 0.2 + rng.normal(0, 0.01, n),  # clearly worse than the best
                       base + rng.normal(0.002, 0.05, n),  # not distinguishably worse
                       base])  # the least
    W = np.full(n, 1.0 / n)
    excess = losses - losses[2]
    se = excess.std(axis=1) / np.sqrt(n)  # uniform weights: the textbook standard error of a mean
    expected = int(np.flatnonzero(excess.mean(axis=1) <= se)[0])
    assert expected == 1
    assert _loo_ridge._one_standard_error(losses, W) == expected
    # weights count as repeated rows: doubling a row's weight is that row twice
    counts = rng.randint(1, 3, n)
    doubled = np.repeat(losses, counts, axis=1)
    assert _loo_ridge._one_standard_error(losses, counts / counts.sum()) == _loo_ridge._one_standard_error(
        doubled, np.full(doubled.shape[1], 1.0 / doubled.shape[1]))


def test_small_logistic_default_fits_quietly_at_a_multiple_of_gcvs_ridge_and_beats_platt_scaling():
    # UCI wine: GCV's curvature-scaled ridge at sigma="scale" leaves a held-out log-loss of 0.058 on this
    # split, above SVC(probability=True)'s 0.046 (an independent reference); the rule's choice, twice the
    # width at GCV's ridge for it, leaves 0.024. Each width's path starts at GCV's ridge for it.
    X, y = load_wine(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    starts = {}  # each width's path's start: GCV's ridge for it
    path = _loo_ridge._path
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_loo_ridge, "_path", lambda problem, settings, **kw: starts.setdefault(
            problem.kernel.params["sigma"], problem.alpha) and path(problem, settings, **kw))
        KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    scale = min(starts)
    assert sorted(starts) == pytest.approx([scale * f for f in _loo_ridge.WIDTHS], rel=1e-12)
    start = starts[min(starts, key=lambda s: abs(s - est.sigma_))]
    powers = np.log(est.alpha_ / start) / np.log(4.0)
    assert powers == pytest.approx(np.round(powers), abs=1e-9) and abs(powers) <= np.log(_loo_ridge.EXTEND_TO) / np.log(4)
    gcv = KernelGDClassifier(loss="logistic", alpha=starts[scale], sigma=scale).fit(X_tr, y_tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # probability=True, deprecated in scikit-learn 1.9
        platt = SVC(probability=True, random_state=0).fit(X_tr, y_tr)
    ours = log_loss(y_te, est.predict_proba(X_te))
    assert ours < log_loss(y_te, platt.predict_proba(X_te))
    assert ours < log_loss(y_te, gcv.predict_proba(X_te))
    assert est.n_iter_ > 0


def test_a_path_fit_that_warns_ends_the_path_and_the_default_stays_quiet(monkeypatch):
    # Nearly separable moons: the smaller ridges' fits may stop for rounding; such a ridge is not
    # scored, and no warning of the path reaches the user.
    from sklearn.datasets import make_moons

    X, y = make_moons(120, noise=0.02, random_state=0)
    calls = []
    run = _loo_ridge.run_solver

    def flaky(name, operator, Y, w, settings):
        result = run(name, operator, Y, w, settings)
        calls.append(settings.alpha)
        if len(calls) == 3:
            warnings.warn("a stand-in for a solver's stop", UserWarning)
        return result

    monkeypatch.setattr(_loo_ridge, "run_solver", flaky)
    monkeypatch.setattr(_loo_ridge, "WIDTHS", (1.0,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert min(calls) == calls[2]  # the path ended at the ridge that warned (it may go on past its top)
    assert est.alpha_ in [pytest.approx(a, rel=1e-12) for a in calls[:2] + calls[3:]]


def test_weights_repeats_sparse_and_precomputed_inputs_choose_the_same_ridge():
    # Integer weights and the rows repeated are one problem: the rule scores the distinct rows, with
    # their summed weights, and sees the same system however X is given.
    import scipy.sparse as sp

    from kernelgd import kernel_matrix

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    counts = np.random.RandomState(0).randint(1, 4, len(y))
    X_rep, y_rep = np.repeat(X, counts, axis=0), np.repeat(y, counts)
    chosen = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=counts)
    assert KernelGDClassifier(loss="logistic", random_state=0).fit(X, y).alpha_ != pytest.approx(chosen.alpha_)
    K_rep = kernel_matrix(X_rep, X_rep, kernel="rbf", sigma=chosen.sigma_)
    others = [
        KernelGDClassifier(loss="logistic", random_state=0).fit(X_rep, y_rep),
        KernelGDClassifier(loss="logistic", random_state=0).fit(sp.csr_matrix(X), y, sample_weight=counts),
        KernelGDClassifier(loss="logistic", kernel="precomputed", random_state=0).fit(K_rep, y_rep),
    ]
    for other in others:
        assert other.alpha_ == pytest.approx(chosen.alpha_, rel=1e-9)
    np.testing.assert_allclose(others[0].predict_proba(X), chosen.predict_proba(X), atol=1e-3)


def test_larger_problems_take_the_median_multiple_of_paths_on_subsamples_of_the_rows(monkeypatch):
    # 600 rows of two classes: the dense system costs more than TINY_FLOPS per ridge, so each path runs
    # on a subsample of the largest size whose system is small, and its multiple scales the rule's ridge
    # (which the whole set's held-out rows then check, moving it by powers of 4)
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    X, y = make_classification(n_samples=600, n_features=5, random_state=0)
    starts, sizes, multiples, checked = [], [], [], []
    choose, multiple_of, check = _loo_ridge.choose, _loo_ridge._subsample_multiple, _loo_ridge._checked_on_held_out_rows
    monkeypatch.setattr(_loo_ridge, "choose", lambda problem, settings, widen: starts.append(problem.alpha)
                        or choose(problem, settings, widen))
    monkeypatch.setattr(_loo_ridge, "_checked_on_held_out_rows", lambda problem, *args, **kwargs:
                        checked.append(problem.alpha) or check(problem, *args, **kwargs))
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda problem, settings, idx, *args: sizes.append(len(idx))
                        or multiples.append(multiple_of(problem, settings, idx, *args)[0]) or (multiples[-1], None))
    est = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    n = sizes[0]
    assert _loo_ridge.DRAWS // 2 < len(sizes) <= _loo_ridge.DRAWS and sizes == [n] * len(sizes)
    assert _loo_ridge.tiny(n, 1, False) and not _loo_ridge.tiny(n + 1, 1, False)
    powers = np.log(multiples) / np.log(4.0)  # the path's multiples, gone on past its ends by factors of 4
    assert_allclose(powers, np.round(powers), atol=1e-12)
    assert np.all(-np.log(_loo_ridge.EXTEND_TO) - 1e-12 <= powers * np.log(4.0))
    assert np.all(powers * np.log(4.0) <= np.log(_loo_ridge.SUBSAMPLE_EXTEND_UP) + 1e-12)
    assert checked == [pytest.approx(starts[0] * np.median(multiples), rel=1e-12)]
    moved = np.log(est.alpha_ / checked[0]) / np.log(4.0)
    assert moved == pytest.approx(np.round(moved), abs=1e-9)


@pytest.mark.parametrize("script, drawn", [((4.0, 4.0, 1.0), 2), ((1.0, 4.0, 4.0), 3), ((1.0, 4.0, 16.0), 3),
                                            ((16.0, 1.0, 4.0), 3)])
def test_the_subsamples_are_drawn_until_a_majority_agrees_on_the_median(monkeypatch, script, drawn):
    # The median of DRAWS multiples is a majority's multiple wherever one agrees: the draws after it would
    # change nothing, and the draws made are those of a full run.
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    X, y = make_classification(n_samples=600, n_features=5, random_state=0)
    rows, checked = [], []
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda problem, settings, idx, *args: rows.append(idx)
                        or (script[len(rows) - 1], None))
    check = _loo_ridge._checked_on_held_out_rows
    monkeypatch.setattr(_loo_ridge, "_checked_on_held_out_rows", lambda problem, *args, **kwargs:
                        checked.append(problem.alpha) or check(problem, *args, **kwargs))
    starts = []
    choose = _loo_ridge.choose
    monkeypatch.setattr(_loo_ridge, "choose", lambda problem, settings, widen: starts.append(problem.alpha)
                        or choose(problem, settings, widen))
    KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert len(rows) == drawn
    assert checked == [pytest.approx(starts[0] * np.median(script), rel=1e-12)]
    first = [idx.copy() for idx in rows]
    rows.clear()
    script = (1.0, 4.0, 16.0)  # no majority: every draw, the first ones on the same rows
    KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert len(rows) == _loo_ridge.DRAWS and all(np.array_equal(a, b) for a, b in zip(first, rows))


def test_under_whole_set_rows_the_folds_check_the_rules_ridge_and_a_flat_kernel_narrows(monkeypatch):
    # Below WHOLE_SET_ROWS distinct rows no subsample is drawn: the whole set's folds check the rule's ridge
    # itself. A cosine of the features' sum varies too fast for sigma="scale": at the rule's ridge the kernel
    # is flat (no better than the classes' shares), and narrower kernels run their own paths from their least
    # ridges, as where the subsamples see no signal (checking widths at the rule's ridge alone kept the flat
    # kernel: test log-loss log(2)).
    r = np.random.RandomState(0)
    X = r.standard_t(3, (3000, 8))
    X = (X - X[:1000].mean(axis=0)) / X[:1000].std(axis=0)
    f = np.cos(1.6 * X.sum(axis=1))
    y = (f > np.median(f[:1000])).astype(int)
    subsamples, checked, flat = [], [], []
    check, on_held_out_rows = _loo_ridge._checked_on_held_out_rows, _loo_ridge._on_held_out_rows
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda *args: subsamples.append(1) or (1.0, None))
    monkeypatch.setattr(_loo_ridge, "_checked_on_held_out_rows", lambda problem, *args, **kwargs:
                        checked.append(problem.alpha) or check(problem, *args, **kwargs))
    monkeypatch.setattr(_loo_ridge, "_on_held_out_rows", lambda *args: flat.append(1) or on_held_out_rows(*args))
    starts, choose = [], _loo_ridge.choose
    monkeypatch.setattr(_loo_ridge, "choose", lambda problem, settings, widen: starts.append(problem.alpha)
                        or choose(problem, settings, widen))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelGDClassifier(loss="logistic", random_state=0).fit(X[:1000], y[:1000])
    assert subsamples == [] and checked == [starts[0]] and flat == [1]
    assert est.sigma_ <= 0.5 * np.sqrt(8.0) * (1 + 1e-12)
    assert log_loss(y[1000:], est.predict_proba(X[1000:])) < np.log(2.0) - 0.02


def test_where_the_rules_ridge_is_near_the_least_held_out_rows_try_narrower_kernels(monkeypatch):
    # Where the rule's ridge sits near the least (three bands of |x_0| over uniform features: the rule reads them
    # as noiseless), held-out rows choose the ridge from the least up; narrower kernels run that path too, also
    # where the kernel is not flat there, and one is kept where it lowers the held-out log-loss by one standard
    # error. Kept at sigma="scale" (the path alone, as before), the test log-loss is 0.188 against 0.170.
    r = np.random.RandomState(0)
    X = r.rand(2800, 2) * 2 - 1
    f = np.abs(X[:, 0])
    y = np.searchsorted(np.quantile(f[:800], [1 / 3, 2 / 3]), f)
    y = np.where(r.rand(len(y)) < 0.02, r.randint(0, 3, len(y)), y)
    X = (X - X[:800].mean(axis=0)) / X[:800].std(axis=0)
    near, on_held_out_rows = [], _loo_ridge._on_held_out_rows
    monkeypatch.setattr(_loo_ridge, "_on_held_out_rows", lambda *args: near.append(1) or on_held_out_rows(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0).fit(X[:800], y[:800])
    scale = np.sqrt(2.0)  # sigma="scale" on standardized features
    at_scale = KernelGDClassifier(loss="logistic", sigma=scale, random_state=0).fit(X[:800], y[:800])
    assert near == [1, 1]  # the default's fit, then the given width's (which tries no other)
    assert model.sigma_ < scale / 1.5
    assert log_loss(y[800:], model.predict_proba(X[800:])) < log_loss(y[800:], at_scale.predict_proba(X[800:])) - 0.01


@pytest.mark.parametrize("name", ["circles", "sphere"])
def test_the_subsamples_multiple_beats_the_rules_ridge_on_held_out_rows(monkeypatch, name):
    # The rule misjudges the curvature at the fitted model: too small a ridge for overlapping circles
    # (2,000 rows: 16 times it is best), too large for a sphere in 10 dimensions a noiseless boundary
    # splits (1/16 and below). The subsamples' paths must move it the right way on held-out rows.
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    from sklearn.datasets import make_circles, make_hastie_10_2

    X, y = make_circles(3000, noise=0.1, factor=0.5, random_state=1) if name == "circles" else \
        make_hastie_10_2(3000, random_state=0)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=1 / 3, random_state=0, stratify=y)
    chosen = KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    monkeypatch.setattr(_loo_ridge, "MIN_SUBSAMPLE", 10**9)  # the rule's ridge alone
    monkeypatch.setattr(_loo_ridge, "NEAR_LEAST", 0.0)
    rule = KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    assert (chosen.alpha_ > rule.alpha_) if name == "circles" else (chosen.alpha_ < rule.alpha_)
    assert log_loss(y_te, chosen.predict_proba(X_te)) < 0.9 * log_loss(y_te, rule.predict_proba(X_te))


def test_the_subsamples_paths_go_up_past_the_small_sets_reach_while_the_loss_falls(monkeypatch):
    # Regression: a subsample's path went on past its ends to at most 4**4 either way; on separated
    # circles (3,000 rows) the subsamples' paths stopped at that cap, where the held-out log-loss was 1.5
    # times the one at 4**6. Labels independent of X make every larger ridge better (the intercept-only
    # model is the best): each subsample's path must go on up to its reach, on any CPU's BLAS. Paths that
    # all reach it saw no signal: the whole set's held-out rows then choose the ridge.
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(1500, 3)), rng.randint(0, 2, 1500)
    multiples, held_out = [], []
    multiple_of, on_held_out_rows = _loo_ridge._subsample_multiple, _loo_ridge._on_held_out_rows
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda *args: multiples.append(multiple_of(*args)[0])
                        or (multiples[-1], None))
    monkeypatch.setattr(_loo_ridge, "_on_held_out_rows", lambda *args: held_out.append(1) or on_held_out_rows(*args))
    chosen = KernelGDClassifier(loss="logistic", random_state=0).fit(X[:1000], y[:1000])
    assert multiples == [_loo_ridge.SUBSAMPLE_EXTEND_UP] * (_loo_ridge.DRAWS // 2 + 1)  # a majority at once
    assert held_out == [1]
    assert log_loss(y[1000:], chosen.predict_proba(X[1000:])) < np.log(2.0) + 1e-3  # no worse than a coin


def test_verbose_reports_each_ridges_leave_one_out_loss_and_the_choice(capsys):
    X, y = load_iris(return_X_y=True)  # 453 unknowns: the widths are compared
    X = StandardScaler().fit_transform(X)
    est = KernelGDClassifier(loss="logistic", verbose=1, random_state=0).fit(X, y)
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if line.startswith("[alpha]")]
    (widths,) = [line for line in out if line.startswith("[sigma]")]
    assert len(lines) == len(_loo_ridge.WIDTHS) and widths.count(":") == 1 + len(_loo_ridge.WIDTHS)
    (line,) = [line for line in lines if f"sigma={est.sigma_:.4g} " in line]
    multiple = float(line.rsplit("chosen ", 1)[1])
    start = float(line.split("multiple of ", 1)[1].split(":", 1)[0])
    assert est.alpha_ == pytest.approx(start * multiple, rel=1e-3)
    assert line.count(":") >= 1 + len(_loo_ridge.MULTIPLES)  # and the multiples it went on to past an end


def test_the_path_goes_on_past_a_fit_stopped_at_rounding(monkeypatch):
    # Regression: at tol=1e-9, path fits stopped at the objective's rounding on one CPU (Intel, OpenBLAS's
    # SkylakeX kernels) and not on another, and such a stop ended the path: fitted with weights the rule
    # chose 16 times GCV's ridge, on the same rows repeated it fell back to GCV's (predict_proba 0.38 apart).
    # Every path fit is made to stop at rounding here; the rule must still score every multiple.
    X, y = make_classification(n_samples=60, n_features=4, n_informative=3, n_redundant=0, n_classes=3,
                               n_clusters_per_class=1, flip_y=0.1, random_state=0)
    reference = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    scored = []
    real_run, real_scores = _loo_ridge.run_solver, _loo_ridge._scores

    def stopped_at_rounding(solver, operator, Y, w, settings):
        result = real_run(solver, operator, Y, w, settings)
        settings.rounding_stops.append("stopped at rounding")  # as warn_rounding records it
        result.converged = False
        return result

    monkeypatch.setattr(_loo_ridge, "run_solver", stopped_at_rounding)
    monkeypatch.setattr(_loo_ridge, "_scores", lambda *args: scored.append(1) or real_scores(*args))
    est = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert len(scored) >= len(_loo_ridge.MULTIPLES) * len(_loo_ridge.WIDTHS)
    assert est.alpha_ == pytest.approx(reference.alpha_, rel=1e-12)


def test_three_rows_a_boundary_splits_choose_quietly():
    # Regression: at 1.41 and 2 times the width a left-out row's exact loss reached about 1e160 nats, and
    # the one-standard-error rule's spread of the excess overflowed (a RuntimeWarning reached the user).
    X = np.random.RandomState(1).randn(3, 20) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelGDClassifier(loss="logistic", random_state=0, options={"dtype": "float32"}).fit(X, [1, 0, 0])
    assert np.all(np.isfinite(est.predict_proba(X))) and est.alpha_ > 0


def test_rows_alike_in_the_kernel_keep_the_approximate_scores_where_the_exact_ones_are_singular():
    # Regression: every row the same point, the left-out groups' I - H Q was singular and _exact raised
    # LinAlgError out of fit. The model is the intercept-only one: the labels' shares.
    bits = ("0000001011010100110100110000000100001011111111100111001101001000010101000110100001010011100010101"
            "00100101100110001110100001011011010001011110011010011")
    y = np.array([int(b) for b in bits])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelGDClassifier(loss="logistic", random_state=975).fit(np.ones((len(y), 1)), y)
    assert_allclose(est.predict_proba([[1.0]])[0], [1 - y.mean(), y.mean()], atol=1e-6)



@pytest.mark.parametrize("n, n_classes, widths", [(150, 3, 3), (200, 3, 1), (460, 2, 3)])
def test_widths_are_compared_where_the_system_is_smallest(monkeypatch, n, n_classes, widths):
    # Each width's path costs a few times the cube of the unknowns (n + 1 per class, one column for two
    # classes): past WIDTH_UNKNOWNS the path runs at sigma="scale"'s width alone.
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_classes=n_classes, random_state=0)
    sigmas = []
    path = _loo_ridge._path
    monkeypatch.setattr(_loo_ridge, "_path", lambda problem, settings, **kw: sigmas.append(
        problem.kernel.params["sigma"]) or path(problem, settings, **kw))
    est = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert len(sigmas) == widths
    assert est.sigma_ in [pytest.approx(s, rel=1e-12) for s in sigmas]
    assert sigmas[0] == pytest.approx(KernelGDClassifier(loss="logistic", alpha=1.0).fit(X, y).sigma_, rel=1e-12)


def _noisy_bands(n, seed):
    # five classes in bands of a smooth function of two uniform features, a tenth of the labels at random
    rng = np.random.RandomState(seed)
    X = rng.uniform(-1.7, 1.7, (n, 2))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4
    y = np.searchsorted(np.quantile(f, [0.2, 0.4, 0.6, 0.8]), f)
    return X, np.where(rng.rand(n) < 0.1, rng.randint(0, 5, n), y)


def test_where_the_rule_found_no_optimum_and_no_subsample_can_the_ridge_comes_from_held_out_rows(monkeypatch):
    # Regression: five classes on 1,500 rows of two features. No subsample's coupled system is small,
    # and the squared loss's GCV error fell down to its least ridge; that ridge times the curvature
    # (8e-11) overfitted the noisy labels: 82 s, a Newton warning and a test log-loss of 0.83 where a
    # fixed 1e-6 gives 0.50 in 0.3 s. The ridge now comes from held-out rows, near the best fixed one.
    X, y = _noisy_bands(1500, 0)
    X_test, y_test = _noisy_bands(4000, 100)
    held_out = []
    on_held_out_rows = _loo_ridge._on_held_out_rows
    monkeypatch.setattr(_loo_ridge, "_on_held_out_rows", lambda *args: held_out.append(1) or on_held_out_rows(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert held_out
    fixed = [log_loss(y_test, KernelGDClassifier(loss="logistic", alpha=alpha, random_state=0).fit(X, y)
                      .predict_proba(X_test)) for alpha in (1e-7, 1e-6, 1e-5, 1e-4)]
    assert log_loss(y_test, model.predict_proba(X_test)) < min(fixed) + 0.02


def test_the_held_out_path_scores_each_ridge_as_a_refit_on_the_other_rows_does(monkeypatch, capsys):
    # each ridge's reported held-out log-loss against brute-force refits on each fold's fitted rows alone,
    # the folds' held-out rows disjoint, a fifth of the rows each, as many as hold HELD_OUT_ROWS together;
    # the ridge taken is the one of least loss
    X, y = _noisy_bands(1200, 1)
    held_out, sizes = [], []
    run, view = _loo_ridge.run_solver, _loo_ridge._FoldView

    class Recorded(view):
        def __init__(self, problem, out, *args):
            held_out.append(out.copy())
            super().__init__(problem, out, *args)

    monkeypatch.setattr(_loo_ridge, "_FoldView", Recorded)
    monkeypatch.setattr(_loo_ridge, "run_solver", lambda name, op, Y, w, s: sizes.append(op.n)
                        or run(name, op, Y, w, s))
    # (combine="argmax": the rule's folds alone, without the output layer's; sigma="scale"'s width given: the
    # path at that width, no narrower kernel tried)
    width = np.sqrt(np.sum(X.var(axis=0)))
    model = KernelGDClassifier(loss="logistic", sigma=width, random_state=0, verbose=1, combine="argmax").fit(X, y)
    line = next(line for line in capsys.readouterr().out.splitlines() if "held-out log-loss" in line)
    reported = [tuple(map(float, pair.split(": "))) for pair in line.split("by ridge: ")[1].split(";")[0].split(", ")]
    folds = list({tuple(np.flatnonzero(out)): None for out in held_out})
    assert len(folds) == 3  # 240 held-out rows each: three hold 500
    assert {len(y) - len(fold) for fold in folds} <= set(sizes)  # each fold's fits on its fitted rows alone
    outs = [np.isin(np.arange(len(y)), fold) for fold in folds]
    assert all(0.1 < out.mean() < 0.3 for out in outs) and np.sum(outs, axis=0).max() == 1
    held = np.concatenate(folds)
    for alpha, loss in reported:
        proba = np.concatenate([
            KernelGDClassifier(loss="logistic", alpha=alpha, sigma=model.sigma_, tol=1e-8).fit(X[~out], y[~out])
            .predict_proba(X[out]) for out in outs])
        assert log_loss(y[held], proba) == pytest.approx(loss, rel=2e-3)
    assert model.alpha_ == pytest.approx(min(reported, key=lambda pair: pair[1])[0], rel=2e-3)  # 3 digits


def test_the_held_out_fits_choose_alike_on_the_whole_sets_kernel_matrix_where_the_folds_do_not_fit_beside_it(
        monkeypatch):
    # Where the fitted rows' kernel matrices do not fit the memory budget beside the whole set's, each fold
    # fits on the whole set's with its held-out rows at weight zero: the same optimum, so the same choice
    X, y = _noisy_bands(1200, 1)
    sizes = []
    run = _loo_ridge.run_solver
    monkeypatch.setattr(_loo_ridge, "run_solver", lambda name, op, Y, w, s: sizes.append(op.n)
                        or run(name, op, Y, w, s))
    folds = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    restricted = list(sizes)
    sizes.clear()
    whole = KernelGDClassifier(loss="logistic", random_state=0,
                               options={"memory_budget": 1200 * 1200 * 8 + 10**5}).fit(X, y)  # K and little more
    assert 900 <= min(restricted) < len(y)  # the folds' fits on their fitted rows
    assert all(size == len(y) or size < 700 for size in sizes)  # the whole set's (or a subsample's)
    assert whole.alpha_ == pytest.approx(folds.alpha_, rel=1e-12) and whole.sigma_ == folds.sigma_
    # (the folds' fits stop at HELD_OUT_TOL: each start of the final fit is within it, not identical)
    assert_allclose(whole.predict_proba(X), folds.predict_proba(X), atol=2e-3)


def _rare_flips(n, seed):
    """Two classes of sin(2 x_0) + x_1^2 / 4 cut at its median, on uniform features; 2% of the labels drawn
    at random (about one row in a hundred then wrong)."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(-1.7, 1.7, (n, 2))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4
    y = (f > np.median(f)).astype(int)
    return X, np.where(rng.rand(n) < 0.02, rng.randint(0, 2, n), y)


@pytest.mark.parametrize("seed", [0, 5])
def test_on_a_small_set_the_held_out_rows_hold_the_rare_wrong_labels(seed):
    # Regression: on 600 rows the whole set's check held out 120, which held one wrong label or none, and
    # their log-loss took a ridge that overfits the others (test log-loss 0.256 and 0.166 against 0.142 and
    # 0.114 at the best fixed ridge). Five folds now hold every row out once.
    X, y = _rare_flips(600, seed)
    X_test, y_test = _rare_flips(4000, 1000 + seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    fixed = [log_loss(y_test, KernelGDClassifier(loss="logistic", alpha=alpha, random_state=0).fit(X, y)
                      .predict_proba(X_test)) for alpha in (1e-7, 1e-6, 1e-5, 1e-4)]
    assert log_loss(y_test, model.predict_proba(X_test)) < min(fixed) + 0.03


def test_the_held_out_path_chooses_alike_for_weights_the_rows_repeated_and_scaled_weights():
    # Regression: on 1,000 distinct rows the rule's ridge was the second least it tries (1.8 times the
    # least): the fit warned, and the rows repeated took another ridge than their integer weights. The
    # held-out groups of identical rows and the ridges (powers of 4 from the least) are the same for both.
    X, y = _noisy_bands(1000, 3)
    counts = np.random.RandomState(0).randint(1, 4, len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weighted = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=counts)
        repeated = KernelGDClassifier(loss="logistic", random_state=0).fit(np.repeat(X, counts, axis=0),
                                                                           np.repeat(y, counts))
        scaled = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=7.5 * counts)
    assert repeated.alpha_ == pytest.approx(weighted.alpha_, rel=1e-9)
    assert scaled.alpha_ == pytest.approx(weighted.alpha_, rel=1e-9)
    least = 1e-6 / len(y) * 0.08  # 1e-6 k(x, x) per distinct row, times five balanced classes' curvature share
    assert weighted.alpha_ > 100 * least
    assert_allclose(repeated.predict_proba(X), weighted.predict_proba(X), atol=2e-2)


def test_a_rule_fifteen_times_its_least_ridge_is_near_it_too():
    # Regression: three noiseless classes of cos(x_0 + x_1 + x_2) on 1,500 rows of uniform features (a
    # generated problem: the rule's ridge 15 times the least it tries, outside a trigger of 10; the
    # subsamples' multiple of 1 kept it: log-loss 0.106 in 17 s, where a fixed 1e-7 gives 0.051). Here
    # too the rule's ridge is 15 times the least.
    rng = np.random.RandomState(2)
    X = rng.uniform(-1, 1, (3500, 3))
    f = np.cos(X.sum(axis=1))
    y = np.searchsorted(np.quantile(f[:1500], [1 / 3, 2 / 3]), f)
    X = (X - X[:1500].mean(axis=0)) / X[:1500].std(axis=0)
    model = KernelGDClassifier(loss="logistic", random_state=0).fit(X[:1500], y[:1500])
    fixed = [log_loss(y[1500:], KernelGDClassifier(loss="logistic", alpha=alpha, random_state=0)
                      .fit(X[:1500], y[:1500]).predict_proba(X[1500:])) for alpha in (1e-7, 1e-6)]
    assert log_loss(y[1500:], model.predict_proba(X[1500:])) < min(fixed) + 0.01


def test_with_many_classes_held_out_rows_of_a_subsample_move_the_rules_ridge_one_step(monkeypatch, capsys):
    # Six classes in nested shells: no subsample's coupled system is small, and the rule's ridge
    # smooths too much. The held-out rows of a subsample (here every row, to keep the test small)
    # move it by at most one factor of 4, toward the test log-loss's best of the three.
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=3000, n_features=3, n_classes=6, random_state=0)
    X_tr, X_te, y_tr, y_te = X[:1500], X[1500:], y[:1500], y[1500:]
    with monkeypatch.context() as patched:  # no held-out rows: the rule's ridge
        patched.setattr(_loo_ridge, "_checked_on_held_out_rows",
                        lambda problem, *args, **kwargs: (problem, None, 0, None))
        rule = KernelGDClassifier(loss="logistic", random_state=0).fit(X_tr, y_tr)
    monkeypatch.setattr(_loo_ridge, "HELD_OUT_SUBSAMPLE", 1.0)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chosen = KernelGDClassifier(loss="logistic", random_state=0, verbose=1).fit(X_tr, y_tr)
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "subsample of 1500 rows" in line]
    multiple = float(line.split(": ", 1)[1].split(" ", 1)[0])
    assert multiple in (0.25, 1.0, 4.0) and chosen.alpha_ == pytest.approx(rule.alpha_ * multiple, rel=1e-9)
    fixed = {m: log_loss(y_te, KernelGDClassifier(loss="logistic", alpha=rule.alpha_ * m, random_state=0)
                         .fit(X_tr, y_tr).predict_proba(X_te)) for m in (0.25, 1.0, 4.0)}
    assert multiple != 1.0 and fixed[multiple] == min(fixed.values())


def test_with_many_classes_on_a_few_hundred_rows_the_whole_sets_folds_check_the_rules_ridge(monkeypatch, capsys):
    # Regression: five classes of a product of two features (600 rows, 2% of labels drawn at random): no
    # subsample's coupled system is small and a subsample's held-out rows would be too few, so the rule's ridge
    # stood unchecked, 16 times too small (test log-loss 0.626, against 0.485 at the ridge the whole set's
    # five folds choose). Those folds now check it.
    r = np.random.RandomState(0)
    X = r.uniform(-1, 1, (2600, 3))
    t = X[:, 0] * X[:, 1]
    y = np.searchsorted(np.quantile(t, [0.2, 0.4, 0.6, 0.8]), t)
    flip = r.rand(len(y)) < 0.02
    y[flip] = r.randint(0, 5, flip.sum())
    X_tr, X_te, y_tr, y_te = X[:600], X[600:], y[:600], y[600:]
    with warnings.catch_warnings():  # (combine="argmax": the ridges' own models, without the output layer)
        warnings.simplefilter("error")
        chosen = KernelGDClassifier(loss="logistic", random_state=0, verbose=1, combine="argmax").fit(X_tr, y_tr)
    assert "held-out log-loss on 600 rows in 5 folds" in capsys.readouterr().out
    with monkeypatch.context() as patched:  # the rule's ridge, unchecked
        patched.setattr(_loo_ridge, "_checked_on_held_out_rows",
                        lambda problem, *args, **kwargs: (problem, None, 0, None))
        rule = KernelGDClassifier(loss="logistic", random_state=0, combine="argmax").fit(X_tr, y_tr)
    assert chosen.alpha_ > 4 * rule.alpha_
    assert log_loss(y_te, chosen.predict_proba(X_te)) < log_loss(y_te, rule.predict_proba(X_te)) - 0.05


def _held_out_line(out):
    """The ridges and held-out log-losses a verbose fit's check reported, by decreasing ridge, and its choice."""
    (line,) = [line for line in out.splitlines() if "held-out log-loss on" in line]
    pairs, chosen = line.split("by ridge: ")[1].split("; chosen ")
    return [tuple(map(float, pair.split(": "))) for pair in pairs.split(", ")], float(chosen)


def test_the_whole_sets_held_out_rows_correct_a_subsample_multiple_that_smooths_too_much(monkeypatch, capsys):
    # Regression: on MNIST's odd against even digits (8,000 rows) the subsamples' paths (463 rows) took 4
    # times the rule's ridge, where a 64th of it halves the test log-loss (0.134 against 0.068). Here the
    # subsamples' multiple is forced far too large; the whole set's held-out rows bring the ridge down.
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    X, y = make_classification(n_samples=4000, n_features=8, n_informative=6, flip_y=0.02, random_state=3)
    X_tr, X_te, y_tr, y_te = X[:2000], X[2000:], y[:2000], y[2000:]
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda *args: (256.0, None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0, verbose=1).fit(X_tr, y_tr)
    path, chosen = _held_out_line(capsys.readouterr().out)
    # the subsamples' ridge, above the rule's: the path's largest (no warm-up: a cold start there is cheap)
    start = path[0][0]
    assert model.alpha_ == pytest.approx(chosen, rel=5e-3) and chosen <= start / 16  # printed to 3 digits
    forced = KernelGDClassifier(loss="logistic", alpha=start, random_state=0).fit(X_tr, y_tr)
    assert log_loss(y_te, model.predict_proba(X_te)) < log_loss(y_te, forced.predict_proba(X_te)) - 0.02


@pytest.mark.parametrize("significance", [0.0, np.inf])
def test_the_whole_sets_check_moves_only_on_a_significant_gain(monkeypatch, capsys, significance):
    # by=0 takes every cut in the held-out log-loss along the path (its least where the losses fall then
    # rise); an infinite significance never moves from the subsamples' ridge, whatever the losses say
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    X, y = make_classification(n_samples=1500, n_features=8, n_informative=6, flip_y=0.05, random_state=4)
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda *args: (16.0, None))
    monkeypatch.setattr(_loo_ridge, "CHECK_SIGNIFICANCE", significance)
    model = KernelGDClassifier(loss="logistic", random_state=0, verbose=1).fit(X, y)
    path, chosen = _held_out_line(capsys.readouterr().out)
    assert model.alpha_ == pytest.approx(chosen, rel=5e-3)
    if significance == 0:
        losses = [loss for _, loss in path]
        assert chosen == min(path, key=lambda pair: pair[1])[0] and np.argmin(losses) in (len(path) - 2, 0)
    else:
        # the start (above the rule's ridge: no warm-up), one step down, then one up: none taken
        assert len(path) == 3 and chosen == path[1][0]


@pytest.mark.parametrize("multiple", [1.0 / 16, None])
def test_the_held_out_path_warms_up_only_from_the_rules_ridge_down_to_a_smaller_start(monkeypatch, multiple):
    # Cold at a small ridge, Newton's first steps take hundreds of CG iterations (gaussian quantiles at
    # 2.2e-7: 699 products against 321 from three larger ridges): where a subsample's multiple puts the path's
    # first ridge below the rule's, the path fits WARM_UP larger ridges first, largest first, each starting the
    # next, and chooses the ridge a cold start chooses. From the rule's own ridge (under WHOLE_SET_ROWS, None
    # here) it starts cold there: a few steps more than the warm-up's fits would take.
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=1500, n_features=4, n_classes=3, random_state=0)
    if multiple is not None:
        monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
        monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda *args: (multiple, None))
    calls, rules, width = [], [], np.sqrt(np.sum(X.var(axis=0)))  # sigma="scale": the path's, before other widths
    run, choose = _loo_ridge.run_solver, _loo_ridge.choose

    def recorded(name, op, Y, w, settings):
        result = run(name, op, Y, w, settings)
        if len(y) / 2 < op.n < len(y) and np.isclose(op.kernel.params["sigma"], width, rtol=1e-12):  # at the width
            calls.append((id(op), settings.alpha, settings.coef_init, result.dual_coef))
        return result

    monkeypatch.setattr(_loo_ridge, "run_solver", recorded)
    monkeypatch.setattr(_loo_ridge, "choose", lambda problem, *args: rules.append(problem.alpha) or choose(problem, *args))
    warm = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    start = rules[0] * (multiple or 1.0)  # the path's first ridge
    top = _loo_ridge.WARM_UP if multiple is not None else 0
    # the path's two folds (300 held-out rows each: two hold 500) come first; where the width stays, the output
    # layer's folds fit at it later
    folds = list(dict.fromkeys(fold for fold, *_ in calls))[:2]
    assert len(folds) == 2
    for fold in folds:  # each fold's path on its own, warm-started from its own fits
        path = [call[1:] for call in calls if call[0] == fold]
        alphas = [alpha for alpha, _, _ in path]
        assert alphas[top] == pytest.approx(start, rel=1e-12) and max(alphas[top:]) == alphas[top]
        assert_allclose(np.log(np.divide(alphas[:top + 1], start)) / np.log(4.0), np.arange(top, -1, -1), atol=1e-12)
        assert path[0][1] is None and all(begin is previous for (_, begin, _), (_, _, previous)
                                          in zip(path[1:top + 1], path[:top]))
    if multiple is None:
        return
    monkeypatch.setattr(_loo_ridge, "WARM_UP", 0)
    cold = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert warm.alpha_ == pytest.approx(cold.alpha_, rel=1e-9)
    # the same objective; at a small ridge its flat directions leave probabilities a few 1e-3 apart
    assert warm.loss_curve_[-1] == pytest.approx(cold.loss_curve_[-1], rel=1e-9)
    assert_allclose(warm.predict_proba(X), cold.predict_proba(X), atol=5e-3)


def test_heavy_tailed_features_take_a_narrower_kernel_where_held_out_rows_prefer_it():
    # Student-t features stretch sigma="scale"'s width past the bulk of the rows: a subsample's leave-one-out
    # losses screen half the width, the whole set's held-out rows confirm it, and the test log-loss beats
    # every fixed ridge at the scale width (about half the best of them); near the rule's width the
    # narrower one loses on both (hastie, gaussian quantiles) and is not taken
    rng = np.random.RandomState(0)
    X = rng.standard_t(3, (3500, 3))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4
    y = np.searchsorted(np.quantile(f[:1500], [1 / 3, 2 / 3]), f)
    X = (X - X[:1500].mean(axis=0)) / X[:1500].std(axis=0)
    X, y, X_test, y_test = X[:1500], y[:1500], X[1500:], y[1500:]
    model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    scale = np.sqrt(3.0)  # sigma="scale" on standardized features
    assert model.sigma_ == pytest.approx(scale / 2)
    at_scale = []
    for alpha in (1e-6, 1e-5, 1e-4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fixed = KernelGDClassifier(loss="logistic", alpha=alpha).fit(X, y)
        assert fixed.sigma_ == pytest.approx(scale)
        at_scale.append(log_loss(y_test, fixed.predict_proba(X_test)))
    assert log_loss(y_test, model.predict_proba(X_test)) < 0.75 * min(at_scale)


def _against_scale_and_peer(X, y, X_test, y_test, alphas):
    """``(sigma, log-losses, peer's)``: sigma="scale"'s width and the test log-loss of the logistic loss at each
    given ridge there (a given ridge keeps that width), and SVC(probability=True)'s."""
    from sklearn.svm import SVC

    at_scale = []
    for alpha in alphas:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fixed = KernelGDClassifier(loss="logistic", alpha=alpha).fit(X, y)
        at_scale.append(log_loss(y_test, fixed.predict_proba(X_test)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # probability=True's deprecation in scikit-learn 1.9
        peer = SVC(probability=True, random_state=0).fit(X, y)
    return fixed.sigma_, at_scale, log_loss(y_test, peer.predict_proba(X_test))


@pytest.mark.parametrize("n, n_classes, wider", [(1200, 3, 2.0), (800, 5, 4.0)])
def test_classes_split_by_thresholds_of_one_feature_take_a_wider_kernel(n, n_classes, wider):
    # Classes by quantiles of one feature among 6: sigma="scale" reads the spread of all six, and every
    # ridge there leaves the log-loss above SVC(probability=True)'s (800 rows, five classes: 0.36 against
    # 0.31). The width walks wider while the held-out rows prefer it: screened by a subsample (three
    # classes) or straight on the whole set's folds (five classes on 800 rows, no small subsample).
    rng = np.random.RandomState(0)
    X = rng.randn(n + 2000, 6)
    y = np.digitize(X[:, 0], np.quantile(X[:n, 0], np.linspace(0, 1, n_classes + 1)[1:-1]))
    X, y, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    sigma, at_scale, peer = _against_scale_and_peer(X, y, X_test, y_test, (1e-6, 1e-5, 1e-4))
    assert model.sigma_ == pytest.approx(wider * sigma)
    chosen = log_loss(y_test, model.predict_proba(X_test))
    assert chosen < 0.6 * min(at_scale)
    assert chosen < 0.6 * peer


@pytest.mark.parametrize("n, cells", [(3000, 2), (4000, 3)])
def test_a_checkerboard_takes_a_narrower_kernel(n, cells):
    # A checkerboard of (4 cells)^2 cells: at sigma="scale"'s width no ridge fits it, and the logistic default
    # predicted about the class shares (test log-loss 0.59 and 0.69, accuracy 0.64 and 0.52). Its held-out
    # loss still fell at the least ridge (8 x 8 cells: the rule's ridge near the least), or the subsamples saw
    # no signal (12 x 12): the whole set's held-out path then tries narrower kernels too.
    rng = np.random.RandomState(0)
    X = rng.rand(n + 2000, 2) * 4
    y = ((np.floor(X[:, 0] * cells) + np.floor(X[:, 1] * cells)) % 2).astype(int)
    X = (X - X[:n].mean(axis=0)) / X[:n].std(axis=0)
    X, y, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    sigma, at_scale, peer = _against_scale_and_peer(X, y, X_test, y_test, (1e-8, 1e-6, 1e-4))
    assert model.sigma_ <= 0.5 * sigma
    chosen = log_loss(y_test, model.predict_proba(X_test))
    assert chosen < 0.4 * min(at_scale)
    assert chosen < 0.4 * peer
    assert model.score(X_test, y_test) > 0.9


def test_a_group_holding_a_whole_class_carries_no_weight_in_the_leave_one_out_choice():
    # without such a group its class has no row: the class's intercept runs off, its loss grows without bound
    binary = np.array([[1.0], [0.0], [-1.0], [1.0]])  # +-1 codes; the second group holds both classes' rows
    assert_allclose(_loo_ridge._judged(np.full(4, 0.25), binary), np.full(4, 0.25))
    assert_allclose(_loo_ridge._judged(np.full(3, 1 / 3), binary[[0, 2, 3]]), [0.5, 0.0, 0.5])
    onehot = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0, 0, 1.0]])
    assert_allclose(_loo_ridge._judged(np.full(5, 0.2), onehot), [0.25, 0.25, 0.0, 0.25, 0.25])
    assert _loo_ridge._judged(np.full(2, 0.5), np.array([[1.0], [-1.0]])) is None


def test_a_class_of_one_row_leaves_the_choice_alike_for_weights_and_the_rows_repeated():
    # Regression: a class of one row (weight 3) left out left its class empty; its leave-one-out loss, tens of nats
    # or 1e5 as Newton's stop fell, outweighed every other row's, and the rows repeated chose a 1.4 times wider
    # kernel and a 6 times smaller ridge than their integer weights (probabilities 0.016 apart)
    rng = np.random.RandomState(30)
    rng.choice(3), rng.choice(3), rng.choice(2)
    sizes = rng.multinomial(138, rng.dirichlet(np.full(6, 0.3))) + 1
    sizes[rng.rand(6) < 0.3] = 1
    y = np.repeat(np.arange(6), sizes)
    X = (rng.normal(size=(6, 5)) * 2)[y] + rng.normal(size=(77, 5))
    rng.choice(3), rng.rand()
    w = rng.randint(1, 4, 77)
    assert list(sizes) == [1, 1, 57, 13, 3, 2]
    weighted = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=w)
    repeated = KernelGDClassifier(loss="logistic", random_state=0).fit(np.repeat(X, w, 0), np.repeat(y, w))
    assert weighted.sigma_ == pytest.approx(repeated.sigma_, rel=1e-12)
    assert weighted.alpha_ == pytest.approx(repeated.alpha_, rel=1e-9)
    # each fit stops within its tol of the optimum (a Newton decrement of tol^2 times the intercept-only objective),
    # where BLAS's rounding leaves it: under OpenBLAS's Haswell kernels the weighted fit's objective is 1.4e-7 above
    # the optimum, its probabilities 6e-4 from it; fitted to the optimum, the two agree to rounding
    assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=2e-3)
    optimum = dict(loss="logistic", sigma=weighted.sigma_, alpha=weighted.alpha_, tol=1e-6, random_state=0)
    assert_allclose(KernelGDClassifier(**optimum).fit(X, y, sample_weight=w).predict_proba(X),
                    KernelGDClassifier(**optimum).fit(np.repeat(X, w, 0), np.repeat(y, w)).predict_proba(X), atol=1e-6)


def test_widths_are_screened_on_a_subsample_of_the_multiple_chosen(monkeypatch):
    # The screen of other widths compares a subsample's leave-one-out losses at the width with those at another
    # width. It read the first subsample whatever its multiple: one whose path chose 16 times the median multiple
    # missed the wider kernel on gaussian quantiles (test log-loss 0.047 against 0.034 where it passes)
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=1200, n_features=4, n_classes=2, random_state=2)
    draws, screened = [], []
    subsample_multiple, better_on = _loo_ridge._subsample_multiple, _loo_ridge._better_on

    def multiple_of(problem, settings, idx, rng, lowest):
        found = subsample_multiple(problem, settings, idx, rng, lowest)
        draws.append((idx, found[0]))
        return found

    def screen(problem, settings, idx, losses, rng, factor):
        screened.append(idx)
        return better_on(problem, settings, idx, losses, rng, factor)

    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", multiple_of)
    monkeypatch.setattr(_loo_ridge, "_better_on", screen)
    KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    multiples = [multiple for _, multiple in draws]
    median = np.median(multiples)
    assert multiples[0] != median and screened  # the first draw is not of the multiple chosen
    first = next(idx for idx, multiple in draws if multiple == median)
    assert all(np.array_equal(idx, first) for idx in screened)


def test_subsamples_draw_groups_of_identical_rows_so_weights_and_the_rows_repeated_draw_alike(monkeypatch):
    # Regression: subsamples drew rows, so the rows repeated drew copies (a row with its twin in the subsample,
    # which leave-one-out then predicts by the twin) where the weighted rows drew distinct ones: the paths took
    # 1/256 and 4 times the rule's ridge, and predict_proba differed by 0.17.
    monkeypatch.setattr(_loo_ridge, "WHOLE_SET_ROWS", 0)  # the subsamples, as from that many rows
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1, 2], [30, 80, 690])
    X = 2 * rng.normal(size=(3, 2))[y] + rng.normal(size=(len(y), 2))
    counts = rng.randint(1, 4, len(y))
    drawn, multiple_of = [], _loo_ridge._subsample_multiple
    monkeypatch.setattr(_loo_ridge, "_subsample_multiple", lambda problem, settings, idx, *args: drawn.append(
        np.unique(np.asarray(problem.rows.X)[idx], axis=0)) or multiple_of(problem, settings, idx, *args))
    weighted = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=counts)
    n_weighted = len(drawn)
    repeated = KernelGDClassifier(loss="logistic", random_state=0).fit(np.repeat(X, counts, axis=0),
                                                                       np.repeat(y, counts))
    assert 0 < n_weighted and len(drawn) == 2 * n_weighted
    for rows, twins in zip(drawn[:n_weighted], drawn[n_weighted:]):
        assert_allclose(twins, rows, rtol=0, atol=0)
    assert repeated.alpha_ == pytest.approx(weighted.alpha_, rel=1e-9)
    assert_allclose(repeated.predict_proba(X), weighted.predict_proba(X), atol=1e-3)


def test_a_width_trial_above_the_best_on_its_first_fold_fits_no_other_fold(monkeypatch):
    # the trials race on their folds: a width whose first fold's held-out log-loss is not below the best's on
    # those rows stops there (the other folds' fits are each as slow as the path's); one below goes on to every
    # fold and the significance test over all of them
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X - X.mean(axis=0)) / np.maximum(X.std(axis=0), 1e-12)
    fits, trials = [], []
    fit, trial = _loo_ridge._HeldOut.fit, _loo_ridge._HeldOut.trial

    def fit_spy(self, on, alpha, starts, reuse, folds=None, max_iter=None):
        fits.append((on.kernel.params["sigma"], None if folds is None else list(folds), max_iter))
        return fit(self, on, alpha, starts, reuse, folds, max_iter)

    def trial_spy(self, other, best):
        found = trial(self, other, best)
        first = self.rows_of([0])
        losses = None if not isinstance(found, list) else found[2][first]
        trials.append((other.kernel.params["sigma"], found, best[2][first], self.W[first], losses, len(self.outs)))
        return found

    monkeypatch.setattr(_loo_ridge._HeldOut, "fit", fit_spy)
    monkeypatch.setattr(_loo_ridge._HeldOut, "trial", trial_spy)
    KernelGDClassifier(loss="logistic", random_state=0).fit(X[:900], y[:900])
    assert trials and all(n_folds > 1 for *_, n_folds in trials)
    for sigma, found, best, W, losses, n_folds in trials:
        folds = [f for s, f, _ in fits if s == sigma]
        # a trial's fits are capped: a kernel its fits cannot reach cheaply fails (hastie at 8 times the width:
        # one fit of 16 Newton steps took 28 s before failing)
        assert all(cap == _loo_ridge.TRIAL_MAX_ITER for s, _, cap in fits if s == sigma)
        if isinstance(found, str):  # stopped: only the first fold was fitted, and it was not below the best
            assert found == "lost" and all(f == [0] for f in folds)
        else:
            assert any(f is not None and f[0] > 0 for f in folds)
            assert (losses - best) @ W < 0  # it went on: below the best on the first fold
    assert any(isinstance(found, str) for _, found, *_ in trials)
