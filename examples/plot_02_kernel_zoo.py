"""
The kernel zoo: boundaries, Gram matrices and positive semi-definiteness
========================================================================

Every built-in kernel of kernelgd on one data set: the decision boundary it
learns (top), its Gram matrix ``K[i, j] = k(x_i, x_j)`` on the training points
sorted by class (middle), and the eigenvalues of that matrix (bottom).

A kernel is an inner product of feature maps, ``k(x, z) = phi(x)' phi(z)``, so
its matrix is ``K = Phi Phi'`` and ``a' K a = ||Phi' a||^2 >= 0`` for every
``a``: all eigenvalues are non-negative. :func:`kernelgd.check_psd` checks
exactly that. The sigmoid kernel ``tanh(a x'z + c)`` is not an inner product
of feature maps, and its matrix shows clearly negative eigenvalues.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDClassifier, check_psd, kernel_matrix

X, y = make_moons(n_samples=200, noise=0.2, random_state=0)
X = StandardScaler().fit_transform(X)
order = np.argsort(y, kind="stable")

kernels = {
    "linear": {},
    "polynomial": {"degree": 3},
    "rbf": {"sigma": 1.0},
    "exponential": {"sigma": 1.0},
    "laplacian": {"sigma": 1.0},
    "sigmoid": {"coef0": 0.5, "kernel_params": {"a": 1.0}},
    "all_subsets": {},
}
fig, axes = plt.subplots(len(kernels), 3, figsize=(9, 2.6 * len(kernels)))
for row, (name, params) in enumerate(kernels.items()):
    model = KernelGDClassifier(kernel=name, alpha=1e-3, **params)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # sigmoid: "not positive semi-definite"
        model.fit(X, y)
    kernel_args = {k: v for k, v in params.items() if k != "kernel_params"}
    kernel_args.update(params.get("kernel_params", {}))
    result = check_psd(X, kernel=name, **kernel_args)
    K = kernel_matrix(X[order], kernel=name, **kernel_args)
    eigenvalues = np.linalg.eigvalsh(K)[::-1]

    ax = axes[row, 0]
    DecisionBoundaryDisplay.from_estimator(
        model, X, cmap="coolwarm", alpha=0.3, ax=ax
    )
    ax.scatter(X[:, 0], X[:, 1], c=y, cmap="coolwarm", s=6)
    ax.set_ylabel(name, fontsize=12)
    ax.set_title(f"train accuracy {model.score(X, y):.2f}", fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    axes[row, 1].imshow(K, cmap="viridis")
    axes[row, 1].set_title("Gram matrix (sorted by class)", fontsize=9)
    axes[row, 1].set_xticks([]), axes[row, 1].set_yticks([])
    ax = axes[row, 2]
    color = "C0" if result.is_psd else "C3"
    ax.plot(eigenvalues / abs(eigenvalues).max(), ".", ms=3, color=color)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_title(
        f"eigenvalues / max: PSD {result.is_psd}, "
        f"{result.n_negative} negative",
        fontsize=9,
    )
    print(
        f"{name:12s} PSD {result.is_psd!s:5s} "
        f"min {result.min_eigenvalue:+.2e} max {result.max_eigenvalue:.2e} "
        f"negative {result.n_negative}"
    )
fig.tight_layout()
plt.show()

# %%
# Every kernel but the sigmoid has no eigenvalue below rounding level; the
# sigmoid kernel's matrix has many clearly negative ones, so its ridge
# objective is not convex. kernelgd warns when it fits with it, and fits with
# a user kernel declared PSD run a quick probe of this kind and warn when it
# fails.
