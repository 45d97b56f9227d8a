"""Bad input gives clear errors."""

import numpy as np
import pytest

from kernelgd import KernelGDClassifier, KernelGDRegressor

ESTIMATORS = [KernelGDRegressor, KernelGDClassifier]
rng = np.random.RandomState(0)
X = rng.normal(size=(20, 3))
y = (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input(Est, bad):
    Xb = X.copy()
    Xb[3, 1] = bad
    with pytest.raises(ValueError, match="(NaN|infinity)"):
        Est().fit(Xb, y)
    fitted = Est(max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match="(NaN|infinity)"):
        fitted.predict(Xb)


def test_non_finite_target():
    yb = y.astype(float)
    yb[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KernelGDRegressor().fit(X, yb)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_shapes(Est):
    with pytest.raises(ValueError, match="2D array"):
        Est().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        Est().fit(X, y[:-1])
    fitted = Est(max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        fitted.predict(X[:, :2])


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_empty_data(Est):
    with pytest.raises(ValueError, match="0 sample"):
        Est().fit(np.empty((0, 3)), np.empty(0))


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize(
    "params, match",
    [
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma=0.0), "sigma"),
        (dict(step_size=-0.1), "step_size"),
        (dict(alpha=-1.0), "alpha"),
        (dict(max_iter=0), "max_iter"),
        (dict(solver="lbfgs"), "solver"),
    ],
)
def test_bad_parameters(Est, params, match):
    with pytest.raises(ValueError, match=match):
        Est(**params).fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_unknown_kernel(Est):
    with pytest.raises(ValueError, match="Unknown kernel 'rbff'"):
        Est(kernel="rbff").fit(X, y)


def test_not_fitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        KernelGDRegressor().predict(X)


def test_sample_weight_errors():
    with pytest.raises(ValueError, match="(non-zero|positive sum)"):
        KernelGDRegressor().fit(X, y, sample_weight=np.zeros(20))
    with pytest.raises(ValueError, match="Negative values"):
        KernelGDRegressor().fit(X, y, sample_weight=-np.ones(20))
    with pytest.raises(ValueError, match="shape"):
        KernelGDRegressor().fit(X, y, sample_weight=np.ones(5))


def test_precomputed_must_be_square():
    with pytest.raises(ValueError, match="square"):
        KernelGDRegressor(kernel="precomputed").fit(X, y)


# ------------------------------------------ clear errors (issue 7, item 13)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(n_centers=True), "n_centers must be a positive int"),
        (dict(kernel="sigmoid", n_centers=5), "needs solver='cg' or 'newton'.*not, so solver='auto' chose 'gd'"),
        (dict(kernel_params={"out": 1}), "may not set 'out'"),
        (dict(kernel="sigmoid", kernel_params={"a": "x"}), "Check the types of kernel_params"),
        (dict(early_stopping=True, validation_fraction=0.99), "smaller validation_fraction"),
    ],
)
def test_clear_errors(params, match):
    with pytest.raises(ValueError, match=match):
        KernelGDRegressor(**params).fit(X, y)


def test_classifier_early_stopping_on_small_multiclass_data():
    # Regression: scikit-learn's raw "test_size = 2 should be >= number of classes".
    Xs, ys = X[:12], np.arange(12) % 3
    clf = KernelGDClassifier(early_stopping=True).fit(Xs, ys)
    assert set(clf.predict(Xs)) <= {0, 1, 2}


def test_all_subsets_features_errors():
    from kernelgd import AllSubsetsFeatures

    with pytest.raises(ValueError, match="one name per feature"):
        AllSubsetsFeatures().fit(X).get_feature_names_out(["a"])
    with pytest.raises(ValueError, match="overflow"):
        AllSubsetsFeatures().fit(X * 1e120).transform(X * 1e120)


@pytest.mark.parametrize("n", [1, 5, 256, 300, 700])
def test_asymmetry_by_tiles_equals_the_dense_reference(n):
    from kernelgd._base import _asymmetry

    r = np.random.RandomState(n)
    A = r.randn(n, n)
    for M in (A, A + A.T, (A + A.T).astype(np.float32)):
        assert _asymmetry(M) == np.max(np.abs(M - M.T))
    one = A + A.T
    one[n - 1, 0] += 3.0  # a single asymmetric pair, in the last tile
    assert _asymmetry(one) == np.max(np.abs(one - one.T))
