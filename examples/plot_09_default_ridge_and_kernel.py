"""
The default ridge and kernel: what ``alpha="auto"`` and ``kernel="auto"`` choose
================================================================================

A bare :class:`~kernelgd.KernelGDRegressor` chooses its ridge ``alpha`` and
its kernel from the training data alone: for the smooth rbf and the rough
laplacian kernel, each at its default width, the leave-one-out error of a
500-landmark Nystroem model is known in closed form for every ridge at
once, and the fit keeps the kernel and ridge where it is least. On a set
this small (309 training rows of scikit-learn's diabetes data, fewer than
the landmarks, so the factor is exact and the curve is the dense formula
below) the kept kernel is then tried at twice its width, and at four
times where twice was better. This example draws the leave-one-out curve
for both kernels at their default width, and for the default's kernel at
the width it kept, next to the test error of the model fitted at every
ridge, and marks the default's choice.

Too large a ridge underfits (both errors high on the left); too small a
ridge fits the noise (the test error climbs on the right, while the
training error keeps falling). Leave-one-out follows the test error's shape
without looking at the test rows, so the default lands near its minimum.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDRegressor, kernel_matrix


def loo(K, y, alpha):
    """Leave-one-out error of kernel ridge with an intercept, from its hat matrix H (Q centres): the fit
    without row i predicts ``y_i - (y_i - f_i) / (1 - H_ii)`` there."""
    n = len(y)
    Q = np.eye(n) - 1.0 / n
    H = 1.0 / n + Q @ K @ Q @ np.linalg.inv(Q @ K @ Q + n * alpha * np.eye(n))
    return np.mean(((y - H @ y) / (1.0 - np.diag(H))) ** 2)


X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

default = KernelGDRegressor().fit(X_train, y_train)
print(f"default: kernel_={default.kernel_!r}, alpha_={default.alpha_:.3g}, "
      f"test RMSE {mean_squared_error(y_test, default.predict(X_test)) ** 0.5:.1f}")

alphas = np.logspace(-6, 0, 25)
scale = {kernel: KernelGDRegressor(kernel=kernel).fit(X_train, y_train).sigma_ for kernel in ("rbf", "laplacian")}
width = default.sigma_ / scale[default.kernel_]  # the multiple of sigma="scale" the default kept
curves = [("C0", "rbf", 1.0), ("C1", "laplacian", 1.0)]
if width != 1.0:
    curves.append(("C2", default.kernel_, width))
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for color, kernel, multiple in curves:
    sigma = scale[kernel] * multiple
    K = kernel_matrix(X_train, kernel=kernel, sigma=sigma)
    kept = [(a, loo(K, y_train, a)) for a in alphas]
    test = [mean_squared_error(y_test, KernelGDRegressor(kernel=kernel, sigma=sigma, alpha=a, tol=1e-6).fit(
        X_train, y_train).predict(X_test)) ** 0.5 for a in alphas]
    name = kernel if multiple == 1.0 else f"{kernel} at {multiple:g}x width"
    ax.plot(*zip(*[(a, e**0.5) for a, e in kept]), "--", color=color, label=f"{name}: leave-one-out estimate")
    ax.plot(alphas, test, "-", color=color, label=f"{name}: test error")
    best = min(kept, key=lambda pair: pair[1])
    print(f"{name}: least leave-one-out error {best[1] ** 0.5:.1f} at alpha={best[0]:.2g}; "
          f"least test error {min(test):.1f} at alpha={alphas[int(np.argmin(test))]:.2g}")
ax.axvline(default.alpha_, color="black", lw=0.8)
ax.text(default.alpha_, 0.98, f" default: {default.kernel_} at {width:g}x width", transform=ax.get_xaxis_transform(),
        va="top")
ax.set_xscale("log")
ax.set_xlabel("ridge alpha")
ax.set_ylabel("RMSE")
ax.set_title("Diabetes: the leave-one-out estimate against the test error, per kernel")
ax.legend(fontsize=8, loc="lower right")
plt.show()
