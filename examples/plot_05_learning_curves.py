"""
Reading learning curves: high variance or high bias
===================================================

Learning curves put the training and test error against the number of training
samples, next to the error ``epsilon`` one wants to reach:

- **high variance**: the training error is below epsilon but the test error
  is well above it; remedies: more data, a simpler model, bagging;
- **high bias**: even the training error is above epsilon, and the test
  error is close to it; remedies: a more complex model (kernelize!), more
  features, boosting.

:func:`kernelgd.diagnose_learning_curve` runs scikit-learn's
``learning_curve`` and gives that reading, with its symptoms and remedies.
Below, the same noisy data are fitted by a model in each regime and by one
that is fine.
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelgd import KernelGDRegressor, diagnose_learning_curve

rng = np.random.RandomState(0)
X = rng.uniform(-3, 3, size=(400, 1))
y = np.sin(3 * X[:, 0]) + 0.2 * rng.normal(size=len(X))
epsilon = 0.08  # the noise variance is 0.04: a good model reaches it

models = {
    "narrow RBF, no ridge": KernelGDRegressor(
        kernel="rbf", sigma=0.02, alpha=0.0, max_iter=3000
    ),
    "linear kernel": KernelGDRegressor(kernel="linear", alpha=1e-3),
    "RBF, sigma=0.5, alpha=1e-4": KernelGDRegressor(
        kernel="rbf", sigma=0.5, alpha=1e-4
    ),
}
fig, axes = plt.subplots(3, 1, figsize=(7, 12), sharex=True)
for ax, (name, model) in zip(axes, models.items()):
    diagnosis = diagnose_learning_curve(
        model,
        X,
        y,
        epsilon=epsilon,
        cv=5,
        shuffle=True,
        random_state=0,
        train_sizes=np.linspace(0.1, 1.0, 6),
    )
    diagnosis.plot(ax=ax)
    ax.set_title(f"{name}: {diagnosis.regime}")
    ax.set_ylim(0, 0.7)
    print(f"== {name}\n{diagnosis}\n")
fig.tight_layout()
plt.show()
