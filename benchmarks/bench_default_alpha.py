"""The logistic loss's default ridge: KernelGDClassifier(loss="logistic") against SVC's defaults.

    python benchmarks/bench_default_alpha.py --data-dir ../shared/data
    python benchmarks/bench_default_alpha.py --sets breast_cancer wine digits   # no data folder

The default, alpha="auto", against fixed ridges ``alpha = c / (2 n)`` (n the
training rows' total weight; c = 1 is LogisticRegression's and SVC's default
C=1, and c = 1 / C in general), on sets the rule was not tuned to, with
sigma="scale" (SVC's gamma="scale") and every other argument at its default,
against SVC() after the same preprocessing. ``--held-out`` adds a candidate data-dependent
rule: C = 1, 4, 16, 64 along a warm-started path on 80% of the training
rows, stopped once the other 20%'s log-loss rises, the best refitted on
all rows (the fit time includes the path). ``--widths 0.84 0.71 0.5``
adds narrower kernels (multiples of sigma="scale"'s width) at every c.
``--one-vs-one`` adds, at every c, SVC's multiclass scheme with the logistic
loss: one binary kernel logistic regression per pair of classes (scikit-learn's
OneVsOneClassifier), each with ``alpha = c / (2 n_pair)`` on its pair's rows and
sigma="scale"'s width on all rows (as SVC's gamma). Sets: breast_cancer, wine, digits (scikit-learn's
bundled copies; stratified 5-fold CV, StandardScaler in the pipeline),
letter (first 16,000 / last 4,000 rows, standardized), adult (adult.data /
adult.test, numeric standardized, categorical one-hot), mnist (the first
8,000 / last 2,000 of MNIST's test images, pixels / 255) and ``uci_<name>``
(a UCI regression set of the data folder made binary, its target above the
training median; the mean over its first five standard splits). Prints accuracy,
log-loss and fit time per set and system, writes
benchmarks/results/default_alpha.json.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import format_table, machine, write_json  # noqa: E402

SMALL = ["breast_cancer", "wine", "digits"]
LARGE = ["letter", "adult", "mnist"]
FACTORS = [1.0, 1 / 16, 1 / 64, 1 / 256]


HELD_OUT_C = (1.0, 4.0, 16.0, 64.0)
HELD_OUT_SHARE = 0.2


def delegating_classifier(fit_model):
    """A classifier whose ``fit(X, y)`` keeps ``fit_model(self, X, y)`` as ``model_`` and predicts with it."""
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Delegating(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.model_ = fit_model(self, X, y)
            self.classes_ = self.model_.classes_
            return self

        def predict(self, X):
            return self.model_.predict(X)

        @property
        def predict_proba(self):  # only where the model has it (OneVsOneClassifier has none)
            return self.model_.predict_proba

    return Delegating()


def held_out_c_classifier():
    """A candidate data-dependent default: C = 1, 4, 16, 64 (alpha = 1 / (2 C n)) along a warm-started
    path on 80% of the rows, stopped once the other 20%'s log-loss rises; the best C refitted on all."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    from kernelgd import KernelGDClassifier

    def fit_model(self, X, y):
        X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=HELD_OUT_SHARE, stratify=y, random_state=0)
        path = KernelGDClassifier(loss="logistic", warm_start=True, random_state=0)
        best, best_loss = None, float("inf")
        for c in HELD_OUT_C:
            path.set_params(alpha=1.0 / (2 * c * X_fit.shape[0])).fit(X_fit, y_fit)
            loss = log_loss(y_val, path.predict_proba(X_val), labels=path.classes_)
            if loss >= best_loss:
                break
            best, best_loss = c, loss
        self.C_ = best
        return KernelGDClassifier(loss="logistic", alpha=1.0 / (2 * best * X.shape[0]), random_state=0).fit(X, y)

    return delegating_classifier(fit_model)


def scaled_width_classifier(factor, **params):
    """KernelGDClassifier(loss="logistic") at ``factor`` times sigma="scale"'s width on the rows it fits."""
    from kernelgd import KernelGDClassifier

    def fit_model(self, X, y):
        scale = KernelGDClassifier()._resolve_sigma(X, np.full(X.shape[0], 1.0 / X.shape[0]))
        return KernelGDClassifier(loss="logistic", sigma=factor * scale, **params).fit(X, y)

    return delegating_classifier(fit_model)


def one_vs_one_classifier(c):
    """OneVsOneClassifier of binary KernelGDClassifier(loss="logistic") fits, alpha = c / (2 n_pair) in each pair."""
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.multiclass import OneVsOneClassifier

    from kernelgd import KernelGDClassifier

    class PairLogistic(ClassifierMixin, BaseEstimator):
        def __init__(self, c=1.0, sigma=1.0):
            self.c, self.sigma = c, sigma

        def fit(self, X, y):
            self.model_ = KernelGDClassifier(
                loss="logistic", sigma=self.sigma, alpha=self.c / (2 * X.shape[0]), random_state=0).fit(X, y)
            self.classes_ = self.model_.classes_
            return self

        def decision_function(self, X):
            return self.model_.decision_function(X)

        def predict(self, X):
            return self.model_.predict(X)

    def fit_model(self, X, y):
        scale = KernelGDClassifier()._resolve_sigma(X, np.full(X.shape[0], 1.0 / X.shape[0]))
        return OneVsOneClassifier(PairLogistic(c, scale)).fit(X, y)

    return delegating_classifier(fit_model)


def systems(factors, held_out=False, widths=(), one_vs_one=False):
    from sklearn.svm import SVC

    from kernelgd import KernelGDClassifier

    out = {"SVC() defaults": lambda n: SVC()}
    for c in factors:
        name = "kernelgd alpha=auto (default)" if c is None else f"kernelgd alpha={c:g}/(2n)"
        out[name] = (lambda c: lambda n: KernelGDClassifier(
            loss="logistic", **({} if c is None else {"alpha": c / (2 * n)}), random_state=0))(c)
        for f in widths:
            out[f"{name}, sigma={f:.3g} x scale"] = (lambda c, f: lambda n: scaled_width_classifier(
                f, **({} if c is None else {"alpha": c / (2 * n)}), random_state=0))(c, f)
        if one_vs_one:
            label = "kernelgd one-vs-one, alpha=" + ("1/(2 n_pair) (C=1)" if c is None else f"{c:g}/(2 n_pair)")
            out[label] = (lambda c: lambda n: one_vs_one_classifier(c))(1.0 if c is None else c)
    if held_out:
        out["kernelgd C on a held-out 20%"] = lambda n: held_out_c_classifier()
    return out


def scores(model, X_test, y_test):
    from sklearn.metrics import accuracy_score, log_loss

    accuracy = float(accuracy_score(y_test, model.predict(X_test)))
    if not hasattr(model, "predict_proba"):
        return accuracy, None
    return accuracy, float(log_loss(y_test, model.predict_proba(X_test), labels=model.classes_))


def run_small(name, make):
    from sklearn import datasets
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    results = []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        model = make_pipeline(StandardScaler(), make(len(train)))
        start = time.perf_counter()
        model.fit(X[train], y[train])
        results.append((time.perf_counter() - start,) + scores(model, X[test], y[test]))
    fit_time, accuracy, loss = zip(*results)
    return float(np.mean(accuracy)), None if loss[0] is None else float(np.mean(loss)), float(np.mean(fit_time))


UCI_SPLITS = 5


def run_uci(name, make, data_dir):
    """A UCI regression set made binary (target above its training median), mean over its first splits."""
    import datasets

    results = []
    for k, (X, y, X_test, y_test, _) in enumerate(datasets.load_uci(data_dir, name)):
        if k == UCI_SPLITS:
            break
        threshold = np.median(y)
        y, y_test = (y > threshold).astype(int), (y_test > threshold).astype(int)
        model = make(X.shape[0])
        start = time.perf_counter()
        model.fit(X, y)
        results.append((time.perf_counter() - start,) + scores(model, X_test, y_test))
    fit_time, accuracy, loss = zip(*results)
    return float(np.mean(accuracy)), None if loss[0] is None else float(np.mean(loss)), float(np.mean(fit_time))


def run_large(name, make, data_dir):
    import datasets

    if name == "letter":
        X, y, X_test, y_test = datasets.load_letter(data_dir)
    elif name == "mnist":
        X, y, X_test, y_test = datasets.load_mnist8k(data_dir)
    else:
        X, y, X_test, y_test = datasets.load_adult(data_dir)
        pre = datasets.adult_preprocessor().fit(X)
        X, X_test = pre.transform(X), pre.transform(X_test)
    model = make(X.shape[0])
    start = time.perf_counter()
    model.fit(X, y)
    fit_time = time.perf_counter() - start
    accuracy, loss = scores(model, X_test, y_test)
    return accuracy, loss, fit_time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--factors", nargs="*", type=float, default=FACTORS,
                        help="values of c in alpha = c / (2 n); the default, alpha='auto', is always run too")
    parser.add_argument("--held-out", action="store_true",
                        help="also the candidate data-dependent rule: C chosen on a held-out 20%% of the rows")
    parser.add_argument("--widths", nargs="*", type=float, default=[],
                        help="also these multiples of sigma='scale''s width, at every c")
    parser.add_argument("--one-vs-one", action="store_true",
                        help="also one binary logistic model per pair of classes (SVC's scheme), at every c")
    parser.add_argument("--out", default=str(HERE / "results" / "default_alpha.json"))
    args = parser.parse_args(argv)
    sets = args.sets or (SMALL + LARGE if args.data_dir else SMALL)
    rows = []
    for name in sets:
        for system, make in systems([None] + list(args.factors), args.held_out, args.widths, args.one_vs_one).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if name in SMALL:
                    accuracy, loss, fit_time = run_small(name, make)
                elif name.startswith("uci_"):
                    accuracy, loss, fit_time = run_uci(name[4:], make, args.data_dir)
                else:
                    accuracy, loss, fit_time = run_large(name, make, args.data_dir)
            rows.append({"set": name, "system": system, "accuracy": accuracy, "log_loss": loss,
                         "fit_time": fit_time})
            print(f"{name:14s} {system:32s} acc {accuracy:.4f}  log-loss "
                  f"{'-' if loss is None else f'{loss:.4f}'}  fit {fit_time:.2f}s", flush=True)
            # written after every row: a long run stopped early keeps what it measured
            write_json(args.out, {"machine": machine(), "factors": args.factors, "rows": rows})
    print()
    print(format_table(rows, [("set", "set", None), ("system", "system", None), ("accuracy", "accuracy", "{:.4f}"),
                              ("log_loss", "log-loss", "{:.4f}"), ("fit_time", "fit (s)", "{:.2f}")]))
    write_json(args.out, {"machine": machine(), "factors": args.factors, "rows": rows})


if __name__ == "__main__":
    main()
