"""
Exact model or centers: what ``n_centers`` trades
=================================================

The exact model puts a basis function on every training row and stores the
n x n kernel matrix; ``n_centers=m`` keeps m random rows as centers, so its
memory and each iteration's time grow as n m instead of n². The price is
flexibility: a model of m centers can be no richer than they allow. This
example fits both on 8,000 rows of a smooth 6-feature regression problem
with noise, every other argument at its default, and draws the test error
and fit time of the centers model for a growing m beside the exact model's.

The error falls as m grows, towards the exact model's. At this size the
kernel matrix fits in memory and the exact fit is fast too (past about 1,000
centers it is the faster here), so centers pay where the kernel matrix would
not fit, or for a quick, rougher fit with few of them. The default,
``n_centers="auto"``, keeps the exact model up to 20,000 rows (and beyond,
for the squared loss, while its kernel matrix fits the memory budget).
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import root_mean_squared_error

from kernelgd import KernelGDRegressor

rng = np.random.RandomState(0)


def make(n):
    """A smooth function of 6 Gaussian features, with noise of standard deviation 0.1."""
    X = rng.randn(n, 6)
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + np.cos(X[:, 3] + X[:, 4]) - 0.3 * X[:, 5] ** 2
    return X, f + 0.1 * rng.randn(n)


X, y = make(8_000)
X_test, y_test = make(4_000)


def fit(**params):
    """Test RMSE and fit seconds of KernelGDRegressor(**params)."""
    start = time.perf_counter()
    model = KernelGDRegressor(random_state=0, **params).fit(X, y)
    seconds = time.perf_counter() - start
    return root_mean_squared_error(y_test, model.predict(X_test)), seconds


exact_error, exact_time = fit(n_centers=None)
print(f"exact model      test RMSE {exact_error:.4f}  fit {exact_time:.2f} s")
counts = [100, 200, 500, 1000, 2000, 4000]
results = []
for m in counts:
    error, seconds = fit(n_centers=m)
    results.append((error, seconds))
    print(f"n_centers={m:<5d}  test RMSE {error:.4f}  fit {seconds:.2f} s")
errors, times = map(np.array, zip(*results))

fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for ax, values, exact, label, title in [(axes[0], errors, exact_error, "test RMSE", "Accuracy"),
                                        (axes[1], times, exact_time, "fit time (s)", "Time")]:
    ax.semilogx(counts, values, "o-", label="n_centers=m")
    ax.axhline(exact, color="black", ls="--", label="exact model")
    ax.set_xlabel("centers m")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.legend()
plt.show()

# %%
# Where the kernel matrix does not fit in memory (60,000 rows take 14 GB in
# float32), centers are the only choice, and a count of a few thousand keeps
# most of the exact model's accuracy.
