"""Render benchmark results (JSON) as reStructuredText tables for the docs.

    python benchmarks/report.py --out-dir docs

Reads benchmarks/results/{cal16k,sweep,uci,operator,preconditioner,threads,
memory,large_classification,logistic,model_selection_classification}.json and cv*.json where present and writes
docs/_bench_<name>.rst for each (or prints them without --out-dir), so the
numbers in docs/benchmarks.rst are exactly those the scripts measured.
"""

import argparse
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def rst_table(header, rows):
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(header, widths)), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells[1:]]
    return "\n".join(lines + [rule])


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def machine_line(machine):
    return (
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
        f"Python {machine['python']}, numpy {machine['numpy']}, scipy {machine['scipy']}, "
        f"scikit-learn {machine['scikit-learn']}, kernelgd {machine['kernelgd']}; "
        f"BLAS {', '.join(machine['blas'])}."
    )


def cal16k(data):
    rows = [
        [r["description"], fmt(r.get("fit_time"), ".2f"), fmt(r.get("warm_fit_time"), ".2f"),
         fmt(r.get("peak_mem_gib"), ".2f"), fmt(r.get("test_mse"), ".4f"), r["status"]]
        for r in data["rows"]
    ]
    header = ["system", "fit time (s)", "second fit (s)", "peak memory (GiB)", "test MSE", "status"]
    out = [rst_table(header, rows), ""]
    for key, value in data.get("summary", {}).items():
        out.append(f"- ``{key}``: {value:.3g}" if isinstance(value, float) else f"- ``{key}``: {value}")
    return "\n".join(out)


def sweep(data):
    rows = [
        [f"{r['n']:,}", r["description"], fmt(r.get("fit_time"), ".2f"),
         fmt(r.get("peak_mem_gib"), ".2f"), fmt(r.get("test_rmse"), ".4f"),
         fmt(r.get("n_iter"), "d"), str(r.get("converged", "-")), r["status"]]
        for r in data["rows"]
    ]
    header = ["n", "system", "fit time (s)", "peak memory (GiB)", "test RMSE", "iterations", "converged", "status"]
    return rst_table(header, rows)


def uci(data):
    rows = []
    for r in data["rows"]:
        ok = r.get("status") == "ok"
        rows.append([
            r["set"], fmt(r.get("n_train"), ","), r["description"],
            f"{r['rmse_mean']:.4g} +- {r['rmse_std']:.2g}" if ok else "-",
            fmt(r.get("fit_time"), ".3f"), r["status"],
        ])
    return rst_table(["set", "n_train", "system", "test RMSE", "fit time / split (s)", "status"], rows)


def operator(data):
    rows = [[r["measure"], f"{r['seconds']:.4f}"] for r in data["rows"]]
    return f"n = {data['n']:,}, float32\n\n" + rst_table(["measure", "median time (s)"], rows)


def preconditioner(data):
    rows = [
        [r["landmarks"], r["selection"], f"{r['setup_s']:.3f}", f"{r['iterations']:.0f}",
         f"{r['cg_s']:.3f}", f"{r['total_s']:.3f}", f"{r['test_mse']:.5f}"]
        for r in data["rows"]
    ]
    header = ["landmarks", "selection", "setup (s)", "CG iterations", "CG (s)", "setup + CG (s)", "test MSE"]
    return (f"n = {data['n']:,}, tol = {data['tol']}, medians over {data['seeds']} seeds\n\n"
            + rst_table(header, rows))


def threads(data):
    rows = [
        [r["description"], fmt(r.get("quiet_time"), ".2f"), fmt(r.get("loaded_time"), ".2f"),
         fmt(r.get("ratio"), ".2f"), r.get("status", "ok")]
        for r in data["rows"]
    ]
    header = ["system", "quiet fit (s)", "beside a busy process (s)", "ratio", "status"]
    return rst_table(header, rows)


def memory(data):
    rows = [
        [r["description"], fmt(r.get("fit_time"), ".1f"), fmt(r.get("peak_mem_gib"), ".2f"),
         fmt(r.get("n_iter"), "d"), fmt(r.get("test_rmse"), ".4f"), r["status"]]
        for r in data["rows"]
    ]
    out = [f"sigma = {data['sigma']}, alpha = {data['alpha']}", "",
           rst_table(["system", "fit time (s)", "peak memory (GiB)", "CG iterations", "test RMSE", "status"], rows), ""]
    out += [f"- ``{k}``: {v:.3g}" for k, v in data.get("summary", {}).items()]
    return "\n".join(out)


def large_classification(data):
    rows = [
        [r["description"], fmt(r.get("fit_time"), ".1f"), fmt(r.get("peak_mem_gib"), ".2f"),
         fmt(r.get("n_iter"), "d"), str(r.get("converged", "-")), fmt(r.get("test_accuracy"), ".4f"), r["status"]]
        for r in data["rows"]
    ]
    header = ["system", "fit time (s)", "peak memory (GiB)", "iterations", "converged", "test accuracy", "status"]
    out = [f"n = {data['n']:,} training rows, 50,000 test rows", "", rst_table(header, rows), ""]
    out += [f"- ``{k}``: {v:.3g}" for k, v in data.get("summary", {}).items()]
    return "\n".join(out)


def logistic(data):
    rows = [
        [r["set"], r["description"], fmt(r.get("test_log_loss"), ".4f"), fmt(r.get("test_accuracy"), ".4f"),
         fmt(r.get("fit_time"), ".1f"), fmt(r.get("search_time"), ".1f"), fmt(r.get("width_factor"), "g"),
         fmt(r.get("alpha"), "g"), r["status"]]
        for r in data["rows"]
    ]
    header = ["set", "system", "test log-loss", "accuracy", "refit (s)", "search (s)", "sigma^2 factor", "alpha",
              "status"]
    grid = f"grid: sigma^2 factors {data['widths']} x alphas {data['alphas']}"
    return grid + "\n\n" + rst_table(header, rows)


def logistic_refits(data):
    rows = [
        [r["set"], r["description"], fmt(r.get("test_log_loss"), ".4f"), fmt(r.get("test_accuracy"), ".4f"),
         fmt(r.get("fit_time"), ".1f"), ", ".join(f"{t:.1f}" for t in r.get("fit_times", [])),
         fmt(r.get("width_factor"), "g"), fmt(r.get("alpha"), "g"), r["status"]]
        for r in data["rows"]
    ]
    header = ["set", "system", "test log-loss", "accuracy", "refit (s, median)", "refits (s)", "sigma^2 factor",
              "alpha", "status"]
    return (f"The configurations chosen in {data['refit_from']}, refitted {data['repeat']} times, the systems "
            "alternating in fresh processes\n\n" + rst_table(header, rows))


# The runs on the wider grids, every system of a set in one run: issue 8's targets are read from these.
LOGISTIC_TARGET_RUNS = ("logistic_mnist_wide", "logistic_letter_wide", "logistic_adult_wide")
# Where a run's choices were refitted in alternating processes, those refits (median times) stand.
LOGISTIC_REFITS = {name: name.replace("_wide", "_refits") for name in LOGISTIC_TARGET_RUNS}


def logistic_targets(_):
    """Each kernelgd system against the best peer on every count (issue 8's targets), per set."""
    out_rows = []
    for name in LOGISTIC_TARGET_RUNS:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        rows = [r for r in json.loads(path.read_text())["rows"] if r.get("status") == "ok"]
        refits = RESULTS / f"{LOGISTIC_REFITS.get(name, '-')}.json"
        if refits.exists():
            refit = {r["system"]: r for r in json.loads(refits.read_text())["rows"] if r.get("status") == "ok"}
            keys = ("fit_time", "test_log_loss", "test_accuracy")  # the refits are the newer measurement
            rows = [{**r, **{k: refit[r["system"]][k] for k in keys}, "median": True}
                    for r in rows if r["system"] in refit]
        peers = [r for r in rows if not r["system"].startswith("kernelgd")]
        if not peers:
            continue
        best_loss = min(peers, key=lambda r: r["test_log_loss"])
        best_acc = max(peers, key=lambda r: r["test_accuracy"])
        fastest = min(peers, key=lambda r: r["fit_time"])
        for r in rows:
            if not r["system"].startswith("kernelgd"):
                continue
            checks = [r["test_log_loss"] <= best_loss["test_log_loss"],
                      r["test_accuracy"] >= best_acc["test_accuracy"], r["fit_time"] <= fastest["fit_time"]]
            out_rows.append([
                r["set"], r["system"],
                f"{r['test_log_loss']:.4f} / {best_loss['test_log_loss']:.4f} ({best_loss['system']})",
                f"{r['test_accuracy']:.4f} / {best_acc['test_accuracy']:.4f} ({best_acc['system']})",
                f"{r['fit_time']:.1f} / {fastest['fit_time']:.1f} ({fastest['system']})"
                + (" medians" if r.get("median") else ""),
                " ".join("met" if c else "missed" for c in checks),
            ])
    header = ["set", "kernelgd system", "test log-loss / best peer", "accuracy / best peer",
              "refit (s) / fastest peer", "log-loss, accuracy, time"]
    return rst_table(header, out_rows)


def revisions(data):
    old, new = data["revisions"]["old"], data["revisions"]["new"]
    rows = [
        [r["set"], fmt(r.get("old_fit_time"), ".2f"), fmt(r.get("new_fit_time"), ".2f"), fmt(r.get("ratio"), ".2f"),
         fmt(r.get("old_accuracy"), ".4f"), fmt(r.get("new_accuracy"), ".4f")]
        for r in data["rows"]
    ]
    header = ["set", f"{old} fit (s, median)", f"{new} fit (s, median)", "new / old", f"{old} accuracy",
              f"{new} accuracy"]
    return rst_table(header, rows)


# published dropout-network RMSE on the same splits (bench_cv.SETS), for files written without it
DROPOUT = {"concrete": 4.82, "energy": 0.54, "kin8nm": 0.08, "naval": 0.005, "power": 4.01, "protein": 4.27,
           "wine": 0.62, "yacht": 0.67}


def cv(results):
    """All benchmarks/results/cv*.json (one file per bench_cv.py run), one row per set and system."""
    rows, machines = [], set()
    for path in sorted(RESULTS.glob("cv*.json")):
        data = json.loads(path.read_text())
        if "machine" in data:
            machines.add(machine_line(data["machine"]))
        for r in data["rows"]:
            splits = r.get("splits") or f"{r.get('splits_run')}"
            rows.append([r["set"], r["system"], splits, fmt(r.get("mean_rmse"), ".4g"),
                         fmt(r.get("total_fit_time"), ".1f"), fmt(r.get("dropout_rmse", DROPOUT.get(r["set"])), "g"), path.name])
    rows.sort(key=lambda row: (row[0], row[1]))
    header = ["set", "system", "splits", "mean test RMSE", "total fit (s)", "dropout net", "file"]
    return "\n\n".join(sorted(machines)) + "\n\n" + rst_table(header, rows)


def _cv_rows():
    """Every row of benchmarks/results/cv*.json with its runs, the newest file last for each (set, system)."""
    rows = {}
    for path in sorted(RESULTS.glob("cv*.json")):
        for r in json.loads(path.read_text())["rows"]:
            rows.setdefault((r["set"], r["system"]), []).append(r)
    return rows


def _ok_runs(row):
    return [r for r in row["runs"] if r.get("status") == "ok"]


def cv_head_to_head(results):
    """Each peer against KernelGDRegressorCV on exactly the splits the peer ran (the first k)."""
    rows = _cv_rows()
    out = []
    for (set_name, system), peer_rows in sorted(rows.items()):
        if system.startswith("kernelgd"):
            continue
        for peer in peer_rows:
            ok = _ok_runs(peer)
            k = len(ok)
            runs = [_ok_runs(r) for r in rows.get((set_name, "kernelgd-cv"), [])]
            runs = max(runs, key=len) if runs else []
            ours = runs[:k] if len(runs) >= k > 0 else None
            failed = peer["runs"][k] if len(peer["runs"]) > k else None
            status = "ok" if failed is None else f"{failed.get('status')} on split {k}"
            mean = (lambda runs, key: None if not runs else sum(r[key] for r in runs) / len(runs))
            cv_rmse, cv_time = mean(ours, "rmse"), mean(ours, "fit_time")
            peer_time = mean(ok, "fit_time")
            out.append([
                set_name, system, str(k), fmt(mean(ok, "rmse"), ".4g"), fmt(cv_rmse, ".4g"),
                fmt(peer_time, ".1f"), fmt(cv_time, ".1f"),
                fmt(None if peer_time is None or not cv_time else peer_time / cv_time, ".1f"), status,
            ])
    header = ["set", "peer", "splits", "peer RMSE", "kernelgd-cv RMSE", "peer fit (s/split)",
              "kernelgd-cv fit (s/split)", "time ratio", "peer status"]
    return rst_table(header, out)


def model_selection_classification(data):
    rows = [
        [r["set"], r["description"], fmt(r.get("accuracy"), ".4f"), fmt(r.get("fit_time"), ".1f"),
         ", ".join(f"{k} {v:.3g}" for k, v in (r.get("chosen") or {}).items()), r["status"]]
        for r in data["rows"]
    ]
    header = ["set", "system", "test accuracy", "fit incl. search (s)", "chosen", "status"]
    return rst_table(header, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", help="write _bench_<name>.rst files here")
    args = parser.parse_args(argv)
    for name, render in (("cal16k", cal16k), ("sweep", sweep), ("uci", uci), ("operator", operator),
                         ("preconditioner", preconditioner), ("threads", threads), ("memory", memory),
                         ("large_classification", large_classification), ("logistic", logistic),
                         ("model_selection_classification", model_selection_classification),
                         ("logistic_letter_wide", logistic), ("logistic_mnist_wide", logistic),
                         ("logistic_adult", logistic), ("logistic_adult_centers", logistic),
                         ("logistic_mnist_centers", logistic), ("logistic_letter_centers", logistic),
                         ("logistic_adult_wide", logistic), ("logistic_adult_refits", logistic_refits),
                         ("logistic_mnist_refits", logistic_refits), ("logistic_letter_refits", logistic_refits),
                         ("logistic_gpc", logistic), ("revisions", revisions), ("revisions_logistic", revisions),
                         ("revisions_logistic_adult", revisions), ("revisions_logistic_c8cf6e8", revisions),
                         ("revisions_logistic_5d4bd57", revisions), ("revisions_squared_5d4bd57", revisions)):
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        text = (
            f".. generated by benchmarks/report.py from benchmarks/results/{path.name}\n\n"
            f"{machine_line(data['machine'])}\n\n{render(data)}\n"
        )
        if args.out_dir:
            (Path(args.out_dir) / f"_bench_{name}.rst").write_text(text)
        else:
            print(text)
    if any((RESULTS / f"{name}.json").exists() for name in LOGISTIC_TARGET_RUNS):
        text = (".. generated by benchmarks/report.py from benchmarks/results/"
                f"{{{','.join(LOGISTIC_TARGET_RUNS)}}}.json, with the refits' times where there are refits\n\n"
                f"{logistic_targets(None)}\n")
        if args.out_dir:
            (Path(args.out_dir) / "_bench_logistic_targets.rst").write_text(text)
        else:
            print(text)
    if any(RESULTS.glob("cv*.json")):
        for name, render in (("cv", cv), ("cv_peers", cv_head_to_head)):
            text = f".. generated by benchmarks/report.py from benchmarks/results/cv*.json\n\n{render(None)}\n"
            if args.out_dir:
                (Path(args.out_dir) / f"_bench_{name}.rst").write_text(text)
            else:
                print(text)


if __name__ == "__main__":
    sys.exit(main())
