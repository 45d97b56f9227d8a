"""
Dual gradient descent is primal gradient descent, iterate by iterate
====================================================================

By induction: start gradient descent on the squared loss from
``w = 0``; every gradient is a combination of the inputs, so every iterate is
``w_t = sum_i alpha_i^t x_i`` and the update can be run on the coefficients
``alpha`` alone. With the linear kernel, kernelgd's solver ``"gd"`` runs
exactly that dual update. Here we run the primal update on ``w`` by hand,
with the same objective, step and intercept, and compare ``X' alpha_t`` with
``w_t`` after every step.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDRegressor

X, y = load_diabetes(return_X_y=True)
X = StandardScaler().fit_transform(X)
y = (
    y - y.mean()
) / y.std()  # standardized: the intercept-only model is b = 0, the start
n, alpha, steps = len(X), 1e-2, 40

# The dual iterates: solver "gd" stopped after t updates, for t = 1..steps.
duals, curve = [], None
for t in range(1, steps + 1):
    model = KernelGDRegressor(
        kernel="linear", solver="gd", alpha=alpha, max_iter=t, tol=0
    ).fit(X, y)
    duals.append((X.T @ model.dual_coef_, model.intercept_))
    curve = model.loss_curve_
eta = model.step_size_

# The primal iterates: gradient descent on
# L(w, b) = 1/n sum_i (w'x_i + b - y_i)^2 + alpha ||w||^2, from w = 0, b = 0.
w, b, primal, primal_loss = np.zeros(X.shape[1]), 0.0, [], []
for t in range(steps):
    residual = X @ w + b - y
    w, b = (
        w - eta * (2 / n * X.T @ residual + 2 * alpha * w),
        b - eta * 2 / n * residual.sum(),
    )
    primal.append((w.copy(), b))
    primal_loss.append(np.mean((X @ w + b - y) ** 2) + alpha * w @ w)

gaps = [
    np.abs(wd - wp).max() / np.abs(wp).max()
    for (wd, _), (wp, _) in zip(duals, primal)
]
print(
    f"step size {eta:.4g}; largest relative difference over {steps} steps:"
    f" {max(gaps):.1e}"
)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.plot(
    range(1, steps + 1), primal_loss, "o", label="primal GD on w", mfc="none"
)
left.plot(
    range(1, steps + 1), curve, "-", label="kernelgd dual GD (loss_curve_)"
)
left.set_xlabel("iteration")
left.set_ylabel("objective")
left.set_yscale("log")
left.legend()
right.semilogy(range(1, steps + 1), np.maximum(gaps, 1e-17), "o-")
right.set_xlabel("iteration")
right.set_ylabel("max |X' alpha_t - w_t| / max |w_t|")
right.set_title("dual and primal iterates agree to rounding")
fig.tight_layout()
plt.show()
