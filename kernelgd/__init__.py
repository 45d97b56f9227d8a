"""kernelgd: kernel machines trained by gradient descent, scikit-learn style."""

from ._classifier import KernelGDClassifier
from ._features import AllSubsetsFeatures
from ._learning_curve import LearningCurveDiagnosis, diagnose_learning_curve
from ._model_selection import KernelGDClassifierCV, KernelGDRegressorCV
from ._operator import MemoryBudgetError
from ._psd import PSDResult, check_psd
from ._regressor import KernelGDRegressor
from ._solvers._common import NonPSDKernelWarning
from .kernels import kernel_matrix, register_kernel

__version__ = "0.1.0"

__all__ = [
    "KernelGDRegressor",
    "KernelGDClassifier",
    "KernelGDRegressorCV",
    "KernelGDClassifierCV",
    "AllSubsetsFeatures",
    "kernel_matrix",
    "check_psd",
    "PSDResult",
    "diagnose_learning_curve",
    "LearningCurveDiagnosis",
    "register_kernel",
    "NonPSDKernelWarning",
    "MemoryBudgetError",
    "__version__",
]
