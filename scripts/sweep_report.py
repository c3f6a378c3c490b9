"""The report of a sweep (scripts/tern-sweep): results.jsonl, summary.md and the plots.

Everything here reads the runs' metrics.jsonl (trainer/metrics_log.h) and run.json files; no
log text. Times are each run's wall_s: seconds since its start, across resumes, or simulated
seconds for virtual workers.
"""
import json
import math
import os
import platform
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} x {model}"


def commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("+uncommitted" if dirty else "")
    except OSError:
        return "?"


def run_dir(out, run):
    cell = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in run["cell"])
    return os.path.join(out, "runs", cell, f"seed-{run['seed']}")


def read_run(out, run):
    """The run's status record and its metrics records (empty when it has not run)."""
    d = run_dir(out, run)
    status = {}
    try:
        with open(os.path.join(d, "run.json")) as f:
            status = json.load(f)
    except (OSError, ValueError):
        pass
    records = []
    try:
        with open(os.path.join(d, "model", "metrics.jsonl")) as f:
            for line in f:
                if line.endswith("\n"):
                    records.append(json.loads(line))
    except (OSError, ValueError):
        pass
    return status, records


def interpolate_crossing(valid, target):
    """Wall seconds, update, target words and optimizer steps (None where the records have no
    steps) where dev CE first reaches target, interpolated linearly between the validation before
    and the one that reaches it, and whether those are only upper bounds (the first validation
    had reached it already); None if it never does."""
    previous = None
    keys = ("wall_s", "update", "target_words", "steps")
    for r in valid:
        if r["dev_ce"] <= target:
            if previous is None:
                return tuple(r.get(k) for k in keys) + (True,)
            if previous["dev_ce"] == r["dev_ce"]:
                return tuple(r.get(k) for k in keys) + (False,)
            f = (previous["dev_ce"] - target) / (previous["dev_ce"] - r["dev_ce"])
            return tuple(previous[k] + f * (r[k] - previous[k])
                         if previous.get(k) is not None and r.get(k) is not None else None
                         for k in keys) + (False,)
        previous = r
    return None


def value_at(valid, key, x, field):
    """valid[field] linearly interpolated at valid[key] == x (None outside the run)."""
    points = [(r[key], r[field]) for r in valid if r.get(field) is not None]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (x - x0) / (x1 - x0) * (y1 - y0)
    if points and points[-1][0] == x:
        return points[-1][1]
    return None


def totals(records):
    """Bytes pushed and pulled by all ranks, over every process segment (counters restart at
    each "start" record)."""
    pushed = pulled = 0
    last = {}
    for r in records + [{"kind": "start"}]:
        if r["kind"] == "start":
            for p in last.values():
                pushed += p["bytes_pushed"]
                pulled += p["bytes_pulled"]
            last = {}
        elif r["kind"] == "train":
            last[r["rank"]] = r
    return pushed, pulled


def totals_until(records, wall):
    """totals() of the records up to wall seconds: the bytes moved until then."""
    return totals([r for r in records if r["kind"] == "start" or r.get("wall_s", 0) <= wall])


def interpolate_bleu(valid, target):
    """Wall seconds and update where the validation BLEU first reaches target, interpolated
    between validations as interpolate_crossing does for dev CE; None if it never does."""
    previous = None
    for r in valid:
        if r.get("bleu") is None:
            continue
        if r["bleu"] >= target:
            if previous is None or previous["bleu"] == r["bleu"]:
                return r["wall_s"], r["update"]
            f = (target - previous["bleu"]) / (r["bleu"] - previous["bleu"])
            return tuple(previous[k] + f * (r[k] - previous[k]) for k in ("wall_s", "update"))
        previous = r
    return None


def summarize_run(run, status, records, target, header=None):
    valid = sorted((r for r in records if r["kind"] == "valid"), key=lambda r: r["wall_s"])
    for r in valid:  # optimizer steps: the pushes the first shard has applied
        if r.get("staleness") and r["staleness"].get("pushes") is not None:
            r["steps"] = r["staleness"]["pushes"]
    train = [r for r in records if r["kind"] == "train"]
    s = {"status": status.get("status", "not run"), "valid": valid}
    if not valid:
        return s
    last = valid[-1]
    s.update(final_ce=last["dev_ce"], final_bleu=last.get("bleu"), final_wall=last["wall_s"],
             final_update=last["update"], final_words=last["target_words"])
    s["crossing"] = interpolate_crossing(valid, target) if target > 0 else None
    pushed, pulled = totals(records)
    s.update(bytes_pushed=pushed, bytes_pulled=pulled)
    stale = [r["staleness"]["mean"] for r in train if r.get("staleness") and r["rank"] == 0]
    s["staleness"] = stale[-1] if stale else None
    # Each shard's histogram at its owner's last record, averaged over the shards.
    last_by_rank = {}
    for r in train:
        if r.get("staleness"):
            last_by_rank[r["rank"]] = r["staleness"]
    if last_by_rank:
        s["staleness_pct"] = {k: statistics.mean(h[k] for h in last_by_rank.values())
                              for k in ("mean", "p50", "p90", "p99", "max")}
    # Convergence: the best validation (the first of equal ones), the bytes until then, whether
    # the run stopped there by patience (not at the budget), and its best model's test BLEU.
    best = min(valid, key=lambda r: r["dev_ce"])
    s["best"] = {"dev_ce": best["dev_ce"], "wall_s": best["wall_s"], "update": best["update"],
                 "epoch": best.get("epoch"), "bytes": sum(totals_until(records, best["wall_s"]))}
    patience = (header or {}).get("convergence_patience", 0)
    s["converged"] = patience > 0 and last.get("stalls", 0) >= patience
    s["test_bleu"] = status.get("test_bleu")
    target_bleu = (header or {}).get("target_bleu", 0)
    s["bleu_crossing"] = interpolate_bleu(valid, target_bleu) if target_bleu > 0 else None
    s["load_mean"], s["load_max"] = status.get("load_mean"), status.get("load_max")
    wall, cpu = status.get("wall_s"), status.get("cpu_s")
    ranks = 1 if run["hosts"] == "virtual" else run["ranks"]
    s["cpu_share"] = cpu / (wall * min(ranks, os.cpu_count())) if wall and cpu else None
    return s


def mean_sd(values, digits=2):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    m = statistics.mean(values)
    if len(values) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def human_bytes(n):
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def write(out, header, runs, invocation, plots, report_dir=None):
    """Reads the runs under out; writes results.jsonl, summary.md and the plots into
    report_dir (default: out)."""
    target = header["target_dev_ce"]
    cells = []
    for run in runs:
        if run["cell"] not in cells:
            cells.append(run["cell"])
    by_cell = {c: [] for c in cells}
    results = []
    for run in runs:
        status, records = read_run(out, run)
        by_cell[run["cell"]].append((run, summarize_run(run, status, records, target, header)))
        settings = {k: run[k] for k in ("run", "cell", "seed", "axes", "ranks", "hosts",
                                        "link_mbps", "link_delay_ms", "slowdown")}
        settings["sweep"] = header["sweep"]
        for r in records:
            results.append(dict(settings, **r))
    report_dir = report_dir or out
    os.makedirs(report_dir, exist_ok=True)
    tmp = os.path.join(report_dir, f"results.jsonl.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        for r in results:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.replace(tmp, os.path.join(report_dir, "results.jsonl"))
    _summary(report_dir, header, cells, by_cell, invocation)
    if plots:
        _plots(report_dir, header, cells, by_cell)


def _summary(out, header, cells, by_cell, invocation):
    target = header["target_dev_ce"]
    reference = header["reference"]
    virtual = all(run["hosts"] == "virtual" for c in cells for run, _ in by_cell[c])
    unit = "simulated s" if virtual else "s"
    lines = [f"# Sweep {header['sweep']}", "",
             f"- command: `{invocation}`",
             f"- machine: {machine()}; commit {commit()}; written "
             f"{time.strftime('%Y-%m-%d %H:%M:%S')}",
             f"- target dev cross-entropy {target:g}; speed-up against `{reference}` "
             f"(its time to target over the cell's); mean ± sd over seeds",
             "- times are seconds since each run's start" +
             (" in simulated time (virtual workers)" if virtual else
              " (simulated for virtual-worker cells)"),
             "- updates are worker 0's mini-batches (each worker's, near enough); steps are the "
             "optimizer steps the shards took: one an update under sync, one a push of any worker "
             "under async (about N an update at N workers, N / tau with tau)", ""]
    ref_crossings = [s["crossing"] for _, s in by_cell.get(reference, []) if s.get("crossing")]
    ref_time = statistics.mean(x[0] for x in ref_crossings) if ref_crossings else None
    ref_bound = any(x[4] for x in ref_crossings)
    bounds = False
    lines += [f"| cell | runs | final dev CE | final BLEU | {unit} to target | updates to target "
              f"| steps to target | reached | speed-up | bytes pushed | bytes pulled | staleness "
              f"| load | CPU share |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in cells:
        ss = [s for _, s in by_cell[c]]
        done = [s for s in ss if s["status"] == "done"]
        crossings = [s["crossing"] for s in ss if s.get("crossing")]
        times = [x[0] for x in crossings]
        updates = [x[1] for x in crossings]
        steps = [x[3] for x in crossings]
        # "≤": a run's first validation had reached the target already; its crossing is earlier.
        bound = "≤ " if any(x[4] for x in crossings) else ""
        bounds = bounds or bool(bound) or (ref_bound and bool(times))
        speedup = "—"
        if ref_time and times:
            speedup = f"{ref_time / statistics.mean(times):.2f}x"
            if bound or ref_bound:
                speedup += " (bound)"
        pushed = [s.get("bytes_pushed") for s in ss if s.get("bytes_pushed") is not None]
        pulled = [s.get("bytes_pulled") for s in ss if s.get("bytes_pulled") is not None]
        lines.append(
            f"| `{c}` | {len(done)}/{len(ss)} | {mean_sd([s.get('final_ce') for s in ss], 3)} | "
            f"{mean_sd([s.get('final_bleu') for s in ss])} | {bound}{mean_sd(times, 0)} | "
            f"{bound}{mean_sd(updates, 0)} | {bound}{mean_sd(steps, 0)} | {len(times)}/{len(ss)} | "
            f"{speedup} | "
            f"{human_bytes(statistics.mean(pushed)) if pushed else '—'} | "
            f"{human_bytes(statistics.mean(pulled)) if pulled else '—'} | "
            f"{mean_sd([s.get('staleness') for s in ss])} | "
            f"{mean_sd([s.get('load_mean') for s in ss], 1)} | "
            f"{mean_sd([s.get('cpu_share') for s in ss])} |")
    if bounds:
        lines += ["", "≤: a run's first validation had already reached the target, so its crossing "
                  "is at most that (validate more often, training.valid_freq, to place it); a "
                  "speed-up from such a time is marked (bound)."]
    # Equal updates and equal time: where every run of every cell has been.
    all_runs = [s for c in cells for _, s in by_cell[c] if s.get("valid")]
    if all_runs:
        common_update = min(s["final_update"] for s in all_runs)
        common_wall = min(s["final_wall"] for s in all_runs)
        lines += ["", f"At equal updates (update {common_update:g}, the last every run reached) "
                  f"and equal time ({common_wall:.0f} {unit}):", "",
                  "| cell | dev CE at equal updates | dev CE at equal time | BLEU at equal time |",
                  "| --- | --- | --- | --- |"]
        for c in cells:
            ss = [s for _, s in by_cell[c] if s.get("valid")]
            lines.append(
                f"| `{c}` | {mean_sd([value_at(s['valid'], 'update', common_update, 'dev_ce') for s in ss], 3)} | "
                f"{mean_sd([value_at(s['valid'], 'wall_s', common_wall, 'dev_ce') for s in ss], 3)} | "
                f"{mean_sd([value_at(s['valid'], 'wall_s', common_wall, 'bleu') for s in ss])} |")
    if header.get("convergence_patience", 0) > 0:
        lines += _convergence(header, cells, by_cell, unit)
    stale_cells = [c for c in cells if any(s.get("staleness_pct") for _, s in by_cell[c])]
    if stale_cells:
        lines += ["", "Staleness of the pushes (versions a gradient's shard had moved on by when it "
                  "was applied): each shard's histogram at the run's end, averaged over the shards "
                  "and then over seeds (the histogram's last bucket, 15, stands for 15 or more):",
                  "", "| cell | mean | p50 | p90 | p99 | max |", "| --- | --- | --- | --- | --- | --- |"]
        for c in stale_cells:
            hs = [s["staleness_pct"] for _, s in by_cell[c] if s.get("staleness_pct")]
            lines.append(f"| `{c}` | " + " | ".join(
                mean_sd([h[k] for h in hs]) for k in ("mean", "p50", "p90", "p99", "max")) + " |")
    lines += ["", "Load is the machine's 1-minute load average while the run ran (cores: "
              f"{os.cpu_count()}); CPU share is the run's CPU time over its wall time times the "
              "cores its ranks could use: well below 1 means it shared the machine.", ""]
    tmp = os.path.join(out, f"summary.md.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, os.path.join(out, "summary.md"))


def _convergence(header, cells, by_cell, unit):
    """The summary's convergence table: each cell's best validation and its best model's test
    BLEU, mean ± sd over seeds."""
    target_bleu = header.get("target_bleu", 0)
    lines = ["", f"To convergence: a run ends once dev cross-entropy has not improved for "
             f"{header['convergence_patience']} validations, or at the budget (converged: the runs "
             f"that stopped so); each run's convergence point is its best validation, whose model "
             f"the test set scores" +
             (f" ({header['test_src']}, beam 4, every line)" if header.get("test_src") else "") +
             ".", ""]
    head = (f"| cell | converged | best dev CE | {unit} to best | updates to best | epochs to best "
            f"| bytes to best | test BLEU |")
    if target_bleu > 0:
        head += f" {unit} to BLEU {target_bleu:g} | updates to BLEU {target_bleu:g} | reached |"
    lines += [head, "|" + " --- |" * (head.count("|") - 1)]
    for c in cells:
        ss = [s for _, s in by_cell[c] if s.get("best")]
        if not ss:
            continue
        best = [s["best"] for s in ss]
        byte_counts = [b["bytes"] for b in best]
        row = (f"| `{c}` | {sum(s['converged'] for s in ss)}/{len(ss)} | "
               f"{mean_sd([b['dev_ce'] for b in best], 3)} | "
               f"{mean_sd([b['wall_s'] for b in best], 0)} | "
               f"{mean_sd([b['update'] for b in best], 0)} | "
               f"{mean_sd([b['epoch'] for b in best], 1)} | "
               f"{human_bytes(statistics.mean(byte_counts)) if byte_counts else '—'} | "
               f"{mean_sd([s.get('test_bleu') for s in ss])} |")
        if target_bleu > 0:
            crossings = [s["bleu_crossing"] for s in ss if s.get("bleu_crossing")]
            row += (f" {mean_sd([x[0] for x in crossings], 0)} | "
                    f"{mean_sd([x[1] for x in crossings], 0)} | {len(crossings)}/{len(ss)} |")
        lines.append(row)
    return lines


def _curves(pairs):
    """Per-seed (x, y) lists -> a common grid, the mean and the min/max band."""
    import numpy as np
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in pairs if len(x) > 1]
    if not pairs:
        return None
    lo = max(x[0] for x, _ in pairs)
    hi = min(x[-1] for x, _ in pairs)
    if hi <= lo:
        return None
    grid = np.linspace(lo, hi, 200)
    ys = np.array([np.interp(grid, x, y) for x, y in pairs])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def _plots(out, header, cells, by_cell):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("tern-sweep: no matplotlib (Debian's python3-matplotlib; scripts/install-deps.sh "
              "installs it): plots not drawn")
        return
    virtual = all(run["hosts"] == "virtual" for c in cells for run, _ in by_cell[c])
    seconds = "simulated seconds" if virtual else "wall seconds"
    figures = [("devce_time.png", "wall_s", "dev_ce", seconds, "dev cross-entropy"),
               ("devce_updates.png", "update", "dev_ce", "updates (rank 0)", "dev cross-entropy"),
               ("devce_words.png", "target_words", "dev_ce", "target words (all ranks)",
                "dev cross-entropy"),
               ("devce_steps.png", "steps", "dev_ce",
                "optimizer steps (pushes the first shard applied)", "dev cross-entropy"),
               ("bleu_time.png", "wall_s", "bleu", seconds, "dev BLEU")]
    colors = plt.get_cmap("tab20" if len(cells) > 10 else "tab10")
    for name, xkey, ykey, xlabel, ylabel in figures:
        fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
        for i, c in enumerate(cells):
            pairs = []
            for _, s in by_cell[c]:
                v = [r for r in s.get("valid", [])
                     if r.get(ykey) is not None and r.get(xkey) is not None]
                v.sort(key=lambda r: r[xkey])
                if v:
                    pairs.append(([r[xkey] for r in v], [r[ykey] for r in v]))
            color = colors(i % colors.N)
            for x, y in pairs:  # every seed, faintly
                ax.plot(x, y, color=color, alpha=0.35, linewidth=0.8,
                        marker="." if len(x) < 3 else None)
            curve = _curves(pairs) if len(pairs) > 1 else None
            if curve is None:
                if pairs:
                    ax.plot(*pairs[0], color=color, label=f"{c} ({len(pairs)})")
                continue
            grid, mean, low, high = curve
            ax.plot(grid, mean, color=color, linewidth=1.8, label=f"{c} ({len(pairs)})")
            ax.fill_between(grid, low, high, color=color, alpha=0.15, linewidth=0)
        if ykey == "dev_ce" and header["target_dev_ce"] > 0:
            ax.axhline(header["target_dev_ce"], color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{header['sweep']}: {ylabel} (thin: each seed; thick: their mean where all "
                     f"have run, band: min to max)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2 if len(cells) > 6 else 1)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name))
        plt.close(fig)


if __name__ == "__main__":
    raise SystemExit("sweep_report.py is used by scripts/tern-sweep")
