"""Loaders of the benchmark problems; the data folder is always an argument."""

from pathlib import Path

import numpy as np

CAL_FEATURES = [
    "longitude", "latitude", "housing_median_age", "rooms_per_household",
    "bedrooms_per_household", "population_per_household", "median_income",
]


def load_cal16k(data_dir):
    """Cal-16k: standardized California housing.

    Returns X_train (16000, 7), y_train (centred), X_test (4640, 7), y_test
    (centred with the training mean); targets in units of 1e5 dollars.
    """
    import csv

    path = Path(data_dir) / "california_housing" / "housing.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))

    def col(name):
        return np.array([float(r[name]) if r[name] != "" else np.nan for r in rows])

    bedrooms = col("total_bedrooms")
    bedrooms[np.isnan(bedrooms)] = np.nanmedian(bedrooms)
    households = col("households")
    X = np.column_stack([
        col("longitude"), col("latitude"), col("housing_median_age"),
        col("total_rooms") / households, bedrooms / households,
        col("population") / households, col("median_income"),
    ])
    y = col("median_house_value") / 1e5
    perm = np.random.RandomState(0).permutation(len(y))
    X, y = X[perm], y[perm]
    X_train, X_test, y_train, y_test = X[:16000], X[16000:], y[:16000], y[16000:]
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    X_train, X_test = (X_train - mean) / std, (X_test - mean) / std
    y_mean = y_train.mean()
    return X_train, y_train - y_mean, X_test, y_test - y_mean


def load_uci(data_dir, name):
    """A UCI regression set with its standard splits: yields (X_tr, y_tr, X_te, y_te).

    Features and target are standardized with the training split's statistics,
    and the target's std is returned too so RMSE can be reported in the
    original units: each item is (X_tr, y_tr, X_te, y_te, y_std).
    """
    folder = Path(data_dir) / "uci" / name
    data = np.loadtxt(folder / "data.txt")
    features = np.loadtxt(folder / "index_features.txt", dtype=int).ravel()
    target = int(np.loadtxt(folder / "index_target.txt"))
    X, y = data[:, features], data[:, target]
    k = 0
    while (folder / "splits" / f"index_train_{k}.txt").exists():
        tr = np.loadtxt(folder / "splits" / f"index_train_{k}.txt", dtype=int)
        te = np.loadtxt(folder / "splits" / f"index_test_{k}.txt", dtype=int)
        mean, std = X[tr].mean(axis=0), X[tr].std(axis=0)
        std[std == 0] = 1.0
        y_mean, y_std = y[tr].mean(), y[tr].std()
        yield (
            (X[tr] - mean) / std, (y[tr] - y_mean) / y_std,
            (X[te] - mean) / std, (y[te] - y_mean) / y_std, y_std,
        )
        k += 1


def make_synthetic(n, n_test=5000, d=8, seed=0):
    """A smooth non-linear regression problem of any size (for the n-sweep)."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n + n_test, d))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.5 * np.tanh(X[:, 2] * X[:, 3]) + 0.1 * X[:, 4] ** 2
    y += 0.1 * rng.normal(size=len(y))
    return X[:n], y[:n], X[n:], y[n:]


def load_mnist8k(data_dir):
    """MNIST's 10,000 test images: the first 8,000 train, the last 2,000 test; pixels / 255."""
    import gzip

    folder = Path(data_dir) / "mnist_test10k"
    with gzip.open(folder / "t10k-images-idx3-ubyte.gz") as fh:
        raw = fh.read()
    n, rows, cols = (int.from_bytes(raw[k : k + 4], "big") for k in (4, 8, 12))
    X = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols) / 255.0
    with gzip.open(folder / "t10k-labels-idx1-ubyte.gz") as fh:
        y = np.frombuffer(fh.read(), dtype=np.uint8, offset=8).astype(int)
    return X[:8000], y[:8000], X[8000:], y[8000:]


def load_letter(data_dir):
    """UCI letter: the first 16,000 rows train, the last 4,000 test; features standardized on training."""
    path = Path(data_dir) / "letter" / "letter-recognition.data"
    rows = [line.strip().split(",") for line in path.read_text().splitlines()[1:] if line.strip()]
    y = np.array([r[0] for r in rows])
    X = np.array([[float(v) for v in r[1:]] for r in rows])
    mean, std = X[:16000].mean(axis=0), X[:16000].std(axis=0)
    X = (X - mean) / np.where(std > 0, std, 1.0)
    return X[:16000], y[:16000], X[16000:], y[16000:]


def load_adult(data_dir):
    """UCI adult as DataFrames (adult.data train, adult.test test) and labels income > 50K.

    The features stay raw: numeric columns are to be standardized and
    categorical ones one-hot encoded in a Pipeline (see adult_preprocessor).
    """
    import pandas as pd

    folder = Path(data_dir) / "adult"
    frames = [
        pd.read_csv(folder / name, sep=r",\s*", engine="python", na_values="?")
        for name in ("adult.data", "adult.test")
    ]
    out = []
    for frame in frames:
        label = frame.pop("income").astype(str).str.rstrip(".")  # the test file writes ">50K."
        out += [frame, (label == ">50K").astype(int).to_numpy()]
    return tuple(out)


def adult_preprocessor():
    """Standardize adult's numeric columns and one-hot encode its categorical ones."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    categorical = ["workclass", "education", "marital-status", "occupation", "relationship",
                   "race", "sex", "native-country"]
    return ColumnTransformer([
        ("numeric", StandardScaler(), numeric),
        ("categorical", make_pipeline(SimpleImputer(strategy="constant", fill_value="missing"),
                                      OneHotEncoder(handle_unknown="ignore")), categorical),
    ])


def make_logistic_synthetic(n, n_classes=2, n_test=20_000, d=10, seed=0):
    """A classification problem of any size with overlapping classes (log-loss well above 0).

    Labels are drawn from a softmax of smooth non-linear functions of Gaussian features, so
    the Bayes log-loss is positive and a model's probabilities matter, not only its labels.
    """
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n + n_test, d))
    W = rng.normal(size=(4, n_classes))
    features = np.column_stack([np.sin(2 * X[:, 0]), np.cos(X[:, 1] * X[:, 2]), np.tanh(X[:, 3]), X[:, 4] ** 2 / 2])
    logits = 3.0 * features @ W
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.rand(len(X), 1) > np.cumsum(p, axis=1)).sum(axis=1)
    return X[:n], y[:n], X[n:], y[n:]
