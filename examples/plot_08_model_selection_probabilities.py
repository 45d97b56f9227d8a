"""
Choosing the kernel, sigma and alpha, and calibrated probabilities
==================================================================

A kernel model is only as good as its kernel, width ``sigma`` and ridge
``alpha``. :class:`~kernelgd.KernelGDRegressorCV` searches them in one fit:
for each kernel and width the kernel matrix is computed once, and every
alpha is scored by exact leave-one-out from one eigendecomposition (as
``RidgeCV`` does for linear ridge). By default it compares the rbf and
laplacian kernels, and when the rbf wins it then learns one scale per
feature (``ard``) and keeps them if they score better.

With ``loss="logistic"`` the classifier is kernel logistic regression, whose
``predict_proba`` estimates probabilities directly; the calibration curve
shows how well they match observed frequencies.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.calibration import CalibrationDisplay
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelgd import KernelGDClassifierCV, KernelGDRegressorCV

# %%
# Model selection on the diabetes data
# ------------------------------------
X, y = load_diabetes(return_X_y=True)
X = StandardScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

search = KernelGDRegressorCV(kernel="rbf", ard=False).fit(X_train, y_train)
print(
    f"rbf, one width: sigma {search.sigma_:.3g}, alpha {search.alpha_:.3g};"
    f" test R^2 {search.score(X_test, y_test):.3f}"
)
ard = KernelGDRegressorCV().fit(X_train, y_train)
print(f"defaults: {ard.kernel_} kernel, test R^2 {ard.score(X_test, y_test):.3f}, sigma")
scales = np.atleast_1d(ard.sigma_)
print(np.array2string(scales, precision=3, max_line_width=72))

# %%
# A very large scale switches its feature off. Whether learned scales pay
# depends on the data: compare the two test scores above. The map below shows
# the rbf search: the widths its walk visited (from ``sigma_scale`` by factors
# of 2, then half steps around the best) against every alpha.

results = search.cv_results_
sigmas = np.unique(results["param_sigma"].astype(float))
alphas = np.unique(results["param_alpha"].astype(float))
scores = np.full((len(sigmas), len(alphas)), np.nan)
for s, a, score in zip(
    results["param_sigma"], results["param_alpha"], results["mean_test_score"]
):
    scores[
        np.searchsorted(sigmas, float(s)), np.searchsorted(alphas, float(a))
    ] = score

fig, left = plt.subplots(figsize=(7, 4.5))
image = left.imshow(
    np.maximum(scores, np.nanpercentile(scores, 20)),
    aspect="auto",
    origin="lower",
    cmap="viridis",
)
left.set_xticks(
    range(0, len(alphas), 4), [f"{a:.0e}" for a in alphas[::4]], rotation=45
)
left.set_yticks(range(len(sigmas)), [f"{s:.2g}" for s in sigmas])
left.set_xlabel("alpha")
left.set_ylabel("sigma")
left.set_title("leave-one-out score (neg. MSE) of every rbf candidate")
fig.colorbar(image, ax=left)
fig.tight_layout()

# %%
# Kernel logistic regression and its probabilities
# ------------------------------------------------
X, y = load_breast_cancer(return_X_y=True)
X = StandardScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.5, random_state=0
)
classifier = KernelGDClassifierCV(loss="logistic", cv=5).fit(X_train, y_train)
print(
    f"logistic: sigma {classifier.sigma_:.3g}, alpha {classifier.alpha_:.3g}; "
    f"test accuracy {classifier.score(X_test, y_test):.3f}"
)
fig, ax = plt.subplots(figsize=(6, 5))
CalibrationDisplay.from_estimator(
    classifier, X_test, y_test, n_bins=8, ax=ax, name="KernelGDClassifierCV"
)
ax.set_title("calibration on held-out data")
fig.tight_layout()
plt.show()
