"""Class labels as solver targets, and class weights: one encoding for in-memory and Dask fits."""

import numpy as np
from sklearn.utils.class_weight import compute_class_weight


def encode_labels(codes, n_classes, one_hot):
    """Targets for class indices ``codes``: LabelBinarizer's +-1 columns (one column for two
    classes), or one-hot 0/1 rows (``one_hot``: the softmax's)."""
    if n_classes == 2:
        return np.where(codes == 1, 1.0, -1.0)[:, None]
    Y = np.full((len(codes), n_classes), 0.0 if one_hot else -1.0)
    Y[np.arange(len(codes)), codes] = 1.0
    return Y


def class_weights(class_weight, classes, y, sample_weight):
    """Each sample's class weight; "balanced" counts the classes by sample weight."""
    try:  # scikit-learn >= 1.7 counts by sample weight, as a repeated row would count
        per_class = compute_class_weight(class_weight, classes=classes, y=y, sample_weight=sample_weight)
    except TypeError:  # pragma: no cover - older scikit-learn
        per_class = compute_class_weight(class_weight, classes=classes, y=y)
    # a class without sample weight gets an infinite "balanced" weight: its samples weigh 0 anyway
    per_class = np.where(np.isfinite(per_class), per_class, 0.0)
    return per_class[np.searchsorted(classes, y)]
