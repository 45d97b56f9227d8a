"""
Predictive uncertainty: a 95% band that widens away from the data
=================================================================

Kernel ridge regression is the posterior mean of a Gaussian process, and
``predict(X, return_std=True)`` gives the other half of that view: the
standard deviation of a new observation at X, noise included. The ridge
``alpha_`` fixes the noise-to-signal ratio; the fit chooses the scale (see
``signal_variance_`` and ``noise_variance_``) so that held-out errors are as
likely as possible.

Here 60 noisy samples of a smooth function come from two intervals with a
gap between them. With every argument at its default the exact model's 95%
band (mean +- 1.96 std) is about as wide as the noise where the data are,
and widens in the gap and beyond the data, towards the prior's. The centers
model (``n_centers=15``) uses the DTC posterior, whose band also widens where
the centers do not reach.
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelgd import KernelGDRegressor

rng = np.random.RandomState(0)
X = np.concatenate([rng.uniform(-5, -1.5, 30), rng.uniform(1.5, 5, 30)])[:, None]
y = np.sin(1.5 * X[:, 0]) + 0.2 * rng.randn(len(X))
grid = np.linspace(-7, 7, 400)[:, None]

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, n_centers in zip(axes, [None, 15]):
    model = KernelGDRegressor(n_centers=n_centers, random_state=0).fit(X, y)
    mean, std = model.predict(grid, return_std=True)
    ax.fill_between(grid[:, 0], mean - 1.96 * std, mean + 1.96 * std, alpha=0.25, label="95% band")
    ax.plot(grid[:, 0], mean, label="mean")
    ax.plot(grid[:, 0], np.sin(1.5 * grid[:, 0]), "k--", lw=1, label="true function")
    ax.plot(X[:, 0], y, "k.", ms=4, label="training data")
    if n_centers:
        ax.plot(model.X_fit_[:, 0], np.full(n_centers, -2.6), "r|", ms=10, label="centers")
    title = f"exact model, {model.kernel_}" if n_centers is None else f"n_centers={n_centers}"
    ax.set_title(f"{title}: noise std {np.sqrt(model.noise_variance_):.2f} (true 0.20)")
    ax.set_xlabel("x")
axes[0].set_ylabel("y")
axes[1].legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()

# %%
# Draws from the predictive distribution (``sample_y``) follow the same band:
# where the data pin the function down they agree, in the gap they spread.

model = KernelGDRegressor().fit(X, y)
draws = model.sample_y(grid[::4], n_samples=5, random_state=1)
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(grid[::4, 0], draws, lw=1)
ax.plot(X[:, 0], y, "k.", ms=4)
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.set_title("five draws of sample_y")
fig.tight_layout()
plt.show()
