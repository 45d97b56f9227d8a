"""The logistic loss's output layer (``_logistic_layer``): fitted to held-out log-probabilities where it lowers the
held-out log-loss, checked against brute-force refits and scikit-learn's LogisticRegression; and the share of labels
drawn at random, checked against a brute-force likelihood."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from kernelgd import KernelGDClassifier, KernelGDClassifierCV, _combiner, _logistic_layer, _loo_ridge


def _bands(n, seed):
    # five classes in bands of a product of two uniform features (of five), a tenth of the labels at random:
    # one ridge shrinks the middle classes' scores as the outer ones', which a layer on the log-probabilities undoes
    rng = np.random.RandomState(seed)
    X = rng.uniform(-1.7, 1.7, (n, 5))
    f = X[:, 0] * X[:, 1]
    y = np.searchsorted(np.quantile(f, [0.2, 0.4, 0.6, 0.8]), f)
    return X, np.where(rng.rand(n) < 0.1, rng.randint(0, 5, n), y)


def test_the_layer_is_a_logistic_regression_on_the_log_probabilities_of_rows_held_out_of_refits(monkeypatch):
    # 600 rows: five folds, every row held out once; each fold's refit on its other rows alone (to a tight tol)
    # gives the held-out rows' log-probabilities, and scikit-learn's LogisticRegression on them is the layer
    X, y = _bands(600, 0)
    X_test = _bands(2000, 1)[0]
    outs, view = [], _loo_ridge._FoldView

    class Recorded(view):
        def __init__(self, problem, out, *args):
            outs.append(out.copy())
            super().__init__(problem, out, *args)

    monkeypatch.setattr(_loo_ridge, "_FoldView", Recorded)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert model.combiner_ is not None
    folds = list({tuple(np.flatnonzero(out)): None for out in outs})
    assert len(folds) == 5 and sorted(np.concatenate(folds)) == list(range(len(y)))  # every row held out once
    refit = dict(loss="logistic", alpha=model.alpha_, sigma=model.sigma_, tol=1e-8, combine="argmax")
    S = np.concatenate([KernelGDClassifier(**refit).fit(np.delete(X, fold, 0), np.delete(y, fold))
                        .predict_log_proba(X[list(fold)]) for fold in folds])
    layer = LogisticRegression(max_iter=1000).fit(S, y[np.concatenate(folds)])
    whole = KernelGDClassifier(**refit).fit(X, y)
    eps = model.label_noise_  # the share of labels drawn at random (from the classes' shares), on the layer's
    shares = np.bincount(y) / len(y)
    assert_allclose(model.predict_proba(X_test), (1 - eps) * layer.predict_proba(whole.predict_log_proba(X_test))
                    + eps * shares, atol=0.01)


def test_the_layer_is_kept_only_where_it_lowers_the_held_out_log_loss(monkeypatch):
    X, y = _bands(600, 0)
    X_test, y_test = _bands(4000, 1)
    layered = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    plain = KernelGDClassifier(loss="logistic", random_state=0, combine="argmax").fit(X, y)
    assert layered.combiner_ is not None and plain.combiner_ is None
    assert log_loss(y_test, layered.predict_proba(X_test)) < log_loss(y_test, plain.predict_proba(X_test)) - 0.02
    monkeypatch.setattr(_logistic_layer, "SIGNIFICANCE", np.inf)  # no gain is enough: the model's own probabilities
    monkeypatch.setattr(_combiner, "SIGNIFICANCE", np.inf)
    refused = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert refused.combiner_ is None and refused.label_noise_ == 0.0
    assert_allclose(refused.predict_proba(X_test), plain.predict_proba(X_test), atol=1e-12)


def test_a_layered_models_predictions_agree_with_its_probabilities():
    X, y = _bands(600, 0)
    X_test = _bands(500, 1)[0]
    model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert model.combiner_ is not None
    proba = model.predict_proba(X_test)
    assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert_allclose(np.exp(model.predict_log_proba(X_test)), proba, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X_test), model.classes_[np.argmax(proba, axis=1)])
    assert_allclose(model.decision_function(X_test), model.combiner_.decision_function(
        _logistic_layer.layer_inputs(model._fitted_loss(), model._decision(X_test, "decision_function"))))


@pytest.mark.parametrize("params", [dict(alpha=1e-4), dict(combine="argmax"), dict(n_centers=100)])
def test_no_layer_where_the_ridge_is_given_or_the_layer_is_declined(params):
    X, y = _bands(600, 0)
    assert KernelGDClassifier(loss="logistic", random_state=0, **params).fit(X, y).combiner_ is None


def test_the_layers_cross_validation_reads_certain_wrong_rows_without_a_warning():
    # Regression: the layer's cross-validated losses read log(predict_proba), which warned of a division by zero
    # where the layer gave a held-out row's class a probability that rounds to 0; they now come from its log-odds
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 2, 200)
    S = np.where(labels == 1, 40.0, -40.0)[:, None] + rng.normal(size=(200, 1))
    labels[0] = 1 - labels[0]  # one row far on the other class's side
    Y = np.where(labels == 1, 1.0, -1.0)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        folds = _combiner.cross_validation_folds(labels, np.arange(200), np.random.RandomState(0))
        losses = _combiner.cross_validated_losses(_combiner.fit_combiner, S, Y, np.full(200, 1 / 200), S, labels,
                                                  folds)
    assert np.all(np.isfinite(losses)) and losses[0] > 10.0


def test_the_layer_reads_weights_as_the_rows_repeated():
    # integer weights and the rows repeated: the same folds (groups of identical rows held out together), the same
    # layer kept, the same probabilities
    X, y = _bands(600, 0)
    X_test = _bands(500, 1)[0]
    counts = np.random.RandomState(0).randint(1, 4, len(y))
    weighted = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=counts)
    repeated = KernelGDClassifier(loss="logistic", random_state=0).fit(np.repeat(X, counts, axis=0),
                                                                       np.repeat(y, counts))
    assert weighted.combiner_ is not None and repeated.combiner_ is not None
    assert repeated.alpha_ == pytest.approx(weighted.alpha_, rel=1e-9)
    assert_allclose(repeated.predict_proba(X_test), weighted.predict_proba(X_test), atol=1e-2)



def test_rows_of_zero_weight_change_neither_the_layers_folds_nor_its_work_limit(monkeypatch):
    # Regression: the limit on the folds fitted for the layer counted every row: 1,333 rows of zero weight beside
    # 4,000 dropped the layer that the same rows without them kept (probabilities 0.33 apart). Here the limit lies
    # between the work of a second fold of the rows of positive weight and that of every row.
    monkeypatch.setattr(_logistic_layer, "LAYER_WORK", 5e7)
    read, folds = [], _logistic_layer.cross_validation_folds
    monkeypatch.setattr(_logistic_layer, "cross_validation_folds", lambda labels, *args: read.append(len(labels))
                        or folds(labels, *args))
    X, y = _bands(2500, 0)
    X_test = _bands(500, 1)[0]
    rng = np.random.RandomState(0)
    X_zero, y_zero = 3 * rng.normal(size=(1000, 5)), rng.randint(0, 5, 1000)
    alone = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    beside = KernelGDClassifier(loss="logistic", random_state=0).fit(
        np.r_[X, X_zero], np.r_[y, y_zero], sample_weight=np.r_[np.ones(2500), np.zeros(1000)])
    assert read[0] == read[-1] > 1.5 * _loo_ridge.HELD_OUT * 2500  # two folds' held-out rows for both
    assert beside.alpha_ == pytest.approx(alone.alpha_, rel=1e-9)
    assert (beside.combiner_ is None) == (alone.combiner_ is None)
    assert beside.label_noise_ == pytest.approx(alone.label_noise_, abs=1e-3)
    assert_allclose(beside.predict_proba(X_test), alone.predict_proba(X_test), atol=1e-2)


def test_the_layers_folds_and_the_fit_do_not_depend_on_what_the_classes_are_called():
    # Regression: each class's groups were dealt to the folds in turn from one generator, class 0 first, so
    # relabelling the classes moved rows between folds; on 600 rows of three classes the layer was kept under one
    # labelling and declined under another (probabilities 0.25 apart)
    labels = np.random.RandomState(1).randint(0, 4, 300)
    perm = np.array([2, 0, 3, 1])
    folds = _combiner.cross_validation_folds(labels, np.arange(300), np.random.RandomState(0))
    assert_allclose(_combiner.cross_validation_folds(perm[labels], np.arange(300), np.random.RandomState(0)), folds)
    for c in range(4):  # each class dealt evenly
        assert np.ptp(np.bincount(folds[labels == c])) <= 1
    rng = np.random.RandomState(4)
    X = rng.normal(size=(600, 5))
    z = np.sin(2 * X[:, 0]) + 0.5 * X[:, -1] + 0.4 * rng.normal(size=600)
    y = np.digitize(z, np.quantile(z, [1 / 3, 2 / 3]))
    w = rng.exponential(size=600)
    perm, X_test = np.array([2, 0, 1]), rng.normal(size=(40, 5))
    fit = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y, sample_weight=w)
    relabelled = KernelGDClassifier(loss="logistic", random_state=0).fit(X, perm[y], sample_weight=w)
    assert (fit.combiner_ is None) == (relabelled.combiner_ is None)
    assert_allclose(relabelled.predict_proba(X_test)[:, perm], fit.predict_proba(X_test), atol=1e-8)

def _noisy_product(n, seed, classes=5, drawn=0.02):
    # classes in bands of x0 * x1 over Gaussian rows, a few labels drawn at random: far from the bands' edges a
    # small ridge's model is certain, and a drawn label there costs tens of nats
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    f = X[:, 0] * X[:, 1]
    y = np.searchsorted(np.quantile(rng.randn(100_000) * rng.randn(100_000), np.linspace(0, 1, classes + 1)[1:-1]), f)
    return X, np.where(rng.rand(n) < drawn, rng.randint(0, classes, n), y)


def test_label_noise_is_the_share_of_greatest_likelihood():
    rng = np.random.RandomState(0)
    n, k = 2000, 5
    losses = rng.exponential(0.1, n)
    losses[rng.rand(n) < 0.03] = 25.0  # certain and wrong: labels drawn at random
    w = rng.uniform(0.5, 1.5, n)
    w /= w.sum()
    labels = rng.choice(k, n, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    folds = _combiner.cross_validation_folds(labels, np.arange(n), np.random.RandomState(0))
    shares = _combiner.class_shares(np.where(labels[:, None] == np.arange(k), 1.0, -1.0), w)
    assert_allclose(shares, [w[labels == c].sum() for c in range(k)], rtol=1e-12)
    q = shares[labels]  # brute force: the weighted log-likelihood of (1 - e) p + e q, q each row's class's share
    eps = _combiner.label_noise(losses, w, folds, np.arange(n), 1 / (w @ w), q)

    def likelihood(e):
        return w @ np.log((1 - e) * np.exp(-losses) + e * q)

    grid = np.linspace(0.0, 0.2, 200_001)
    coarse = grid[::100][int(np.argmax([likelihood(e) for e in grid[::100]]))]
    fine = grid[np.abs(grid - coarse) <= 2e-4]
    best = fine[int(np.argmax([likelihood(e) for e in fine]))]
    assert 0.0 < eps and eps == pytest.approx(best, abs=2e-5)
    calibrated = rng.exponential(0.1, n)  # no row far off: no share is kept
    assert _combiner.label_noise(calibrated, w, folds, np.arange(n), 1 / (w @ w), q) == 0.0


def test_labels_wholly_at_random_take_the_intercept_only_models_probabilities():
    # a model that says 1/2 everywhere on classes of 80% and 20%: labels drawn at random from the classes' shares
    # explain them best, and at eps = 1 the probabilities are the intercept-only model's (a uniform draw's are not)
    rng = np.random.RandomState(0)
    n = 1000
    labels = (rng.rand(n) < 0.2).astype(int)
    w = np.full(n, 1.0 / n)
    losses = np.full(n, np.log(2.0))
    folds = _combiner.cross_validation_folds(labels, np.arange(n), np.random.RandomState(0))
    shares = _combiner.class_shares(np.where(labels == 1, 1.0, -1.0)[:, None], w)
    assert_allclose(shares, [np.mean(labels == 0), np.mean(labels == 1)])
    eps = _combiner.label_noise(losses, w, folds, np.arange(n), n, shares[labels])
    assert eps == pytest.approx(1.0, abs=1e-4)
    mixed = _combiner.mixed(losses, eps, shares[labels])
    assert_allclose(mixed, -np.log(shares[labels]), atol=1e-3)
    assert w @ mixed < w @ losses - 0.1


def test_probabilities_take_the_labels_drawn_at_random(monkeypatch):
    X, y = _noisy_product(1500, 0)
    X_test, y_test = _noisy_product(4000, 1)
    # no layer (its cross-validation fails): the model's own probabilities, mixed
    monkeypatch.setattr(_logistic_layer, "cross_validated_losses", lambda *args: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    plain = KernelGDClassifier(loss="logistic", random_state=0, combine="argmax").fit(X, y)
    assert model.combiner_ is None and 0.0 < model.label_noise_ < 0.1 and plain.label_noise_ == 0.0
    eps, P, shares = model.label_noise_, plain.predict_proba(X_test), np.bincount(y) / len(y)
    assert_allclose(model.predict_proba(X_test), (1 - eps) * P + eps * shares, rtol=1e-12, atol=1e-15)
    assert_allclose(model.predict_log_proba(X_test), np.log((1 - eps) * P + eps * shares), rtol=1e-10)
    np.testing.assert_array_equal(model.predict(X_test), plain.predict(X_test))
    assert log_loss(y_test, model.predict_proba(X_test)) < log_loss(y_test, P) - 0.01
    monkeypatch.setattr(_combiner, "SIGNIFICANCE", np.inf)  # no gain is enough: the model's own probabilities
    refused = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert refused.label_noise_ == 0.0
    assert_allclose(refused.predict_proba(X_test), P, atol=1e-12)


def test_clean_labels_take_no_share_drawn_at_random():
    X, y = _noisy_product(1500, 0, classes=2, drawn=0.0)
    model = KernelGDClassifier(loss="logistic", random_state=0).fit(X, y)
    assert model.label_noise_ == 0.0


def test_a_searchs_refit_is_calibrated_as_the_ridge_rules_fit():
    # KernelGDClassifierCV(loss="logistic") refits the width and ridge it chose: its probabilities take the share of
    # labels drawn at random (and a layer where one helps) from rows held out of fits at them
    X, y = _noisy_product(1500, 0)
    X_test = _noisy_product(500, 1)[0]
    search = KernelGDClassifierCV(loss="logistic", sigmas=[0.6, 1.2], alphas=[1e-5, 1e-6], cv=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search.fit(X, y)
    refit = search.best_estimator_
    assert refit.combiner_ is not None or refit.label_noise_ > 0
    plain = KernelGDClassifier(loss="logistic", sigma=search.sigma_, alpha=search.alpha_, combine="argmax",
                               random_state=0).fit(X, y)
    P = plain.predict_proba(X_test)
    if refit.combiner_ is not None:  # the layer on the model's log-probabilities
        P = refit.combiner_.predict_proba(_logistic_layer.layer_inputs(
            plain._fitted_loss(), plain._decision(X_test, "decision_function")))
    eps = refit.label_noise_
    assert_allclose(search.predict_proba(X_test), (1 - eps) * P + eps * np.bincount(y) / len(y), atol=1e-6)
    unmixed = KernelGDClassifierCV(loss="logistic", sigmas=[0.6, 1.2], alphas=[1e-5, 1e-6], cv=3, combine="argmax",
                                   random_state=0).fit(X, y)
    assert unmixed.best_estimator_.combiner_ is None and unmixed.best_estimator_.label_noise_ == 0.0
