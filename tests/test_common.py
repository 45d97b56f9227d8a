"""scikit-learn conformance: every estimator check, on several kernels."""

import pytest
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    check_param_validation,
    parametrize_with_checks,
)

from kernelgd import AllSubsetsFeatures, KernelGDClassifier, KernelGDRegressor

KERNELS = ["rbf", "polynomial", "laplacian", "all_subsets", "precomputed"]


def _estimators():
    for kernel in KERNELS:
        params = dict(kernel=kernel, max_iter=300)
        yield KernelGDRegressor(**params)
        yield KernelGDClassifier(**params)
    yield AllSubsetsFeatures()


ESTIMATORS = list(_estimators())


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_dataframe_column_names_consistency(estimator):
    check_dataframe_column_names_consistency(type(estimator).__name__, estimator)
