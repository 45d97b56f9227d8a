"""
The kernel trick, measured: 2^d features for the price of d
===========================================================

The all-subsets feature map sends ``x`` in R^d to the products of all subsets of
its entries, ``phi(x) = (1, x_1, ..., x_d, x_1 x_2, ..., x_1 x_2 ... x_d)``:
2^d features. Its inner product collapses to a product of d terms,

.. math:: \\phi(x)^\\top \\phi(z) = \\prod_{k=1}^d (1 + x_k z_k),

which is kernelgd's ``all_subsets`` kernel. Below, the Gram matrix and the
fitted model are computed both ways, through the explicit map
(:class:`~kernelgd.AllSubsetsFeatures` and a linear kernel) and through the
kernel, for growing d. The results agree to rounding; the explicit map's cost
doubles with every feature while the kernel's barely moves.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from kernelgd import AllSubsetsFeatures, KernelGDRegressor, kernel_matrix

rng = np.random.RandomState(0)
n_train, n_test = 300, 100


def best_time(function, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return result, min(times)


dims = [2, 4, 6, 8, 10, 12, 14, 16]
rows = []
for d in dims:
    X = rng.uniform(-0.7, 0.7, size=(n_train + n_test, d))
    y = np.sin(X.sum(axis=1)) + 0.05 * rng.normal(size=len(X))
    X_train, X_test, y_train = X[:n_train], X[n_train:], y[:n_train]

    def explicit_gram():
        Phi = AllSubsetsFeatures().fit_transform(X_train)
        return Phi @ Phi.T

    K_explicit, t_explicit = best_time(explicit_gram)
    K_kernel, t_kernel = best_time(
        lambda: kernel_matrix(X_train, kernel="all_subsets")
    )
    gram_error = np.abs(K_explicit - K_kernel).max() / np.abs(K_kernel).max()

    phi = AllSubsetsFeatures().fit(X_train)
    by_features = KernelGDRegressor(kernel="linear", alpha=1e-3, tol=1e-10)
    by_features.fit(phi.transform(X_train), y_train)
    by_kernel = KernelGDRegressor(
        kernel="all_subsets", alpha=1e-3, tol=1e-10
    ).fit(X_train, y_train)
    prediction_gap = np.abs(
        by_features.predict(phi.transform(X_test)) - by_kernel.predict(X_test)
    ).max()
    rows.append((d, 2**d, t_explicit, t_kernel, gram_error, prediction_gap))
    print(
        f"d={d:2d} 2^d={2**d:5d}  Gram: explicit {t_explicit * 1e3:6.1f} ms,"
        f" kernel {t_kernel * 1e3:5.1f} ms; diff {gram_error:.0e},"
        f" predictions {prediction_gap:.0e}"
    )

rows = np.array(rows)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.semilogy(rows[:, 0], rows[:, 2] * 1e3, "o-", label="explicit map, O(2^d)")
left.semilogy(
    rows[:, 0], rows[:, 3] * 1e3, "s-", label="all_subsets kernel, O(d)"
)
left.set_xlabel("d (input features)")
left.set_ylabel(f"time for the {n_train} x {n_train} Gram matrix (ms)")
left.legend()
right.semilogy(
    rows[:, 0],
    np.maximum(rows[:, 4], 1e-17),
    "o-",
    label="Gram matrix (relative)",
)
right.semilogy(
    rows[:, 0],
    np.maximum(rows[:, 5], 1e-17),
    "s-",
    label="test predictions (absolute)",
)
right.set_xlabel("d (input features)")
right.set_ylabel("largest difference, explicit vs kernel")
right.legend()
fig.tight_layout()
plt.show()

# %%
# Same matrix, same model: the differences stay at the level of float64
# rounding for every d, while the explicit map's time grows by about a factor
# of four per two features. At d = 16 the map already has 65,536 columns; at
# d = 40 it would have 10^12, and the kernel would still cost 40
# multiplications per pair.
