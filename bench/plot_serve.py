#!/usr/bin/env python3
"""Plots bench-serve's JSON lines: throughput (output words/s) and p99 latency against the offered
load (sentences/s), one line per batching mode and request size, with the offline tern-translate
throughput for reference. Several runs in one file are averaged per point (throughput) or their
median taken (p99); the runs with a hostile crowd held open (bench-serve --crowd) are left out.
Prints the serving measures of docs/serving-measurements.md, per run (against the mean of the
offline references it measured before each mode):
  saturation: the best words/s of a mode and size (any load, or the burst of every sentence);
  serve / offline at saturation; continuous / serial with one-sentence requests;
  p99 at half the saturation load (interpolated between the loads measured) / a lone request's
  latency (median of one-sentence requests sent one at a time), and / the lone requests' own p99;
  the p99 of each request's latency over its own sentence's lone latency there; with --bursts,
  the median of the bursts' words/s over the offline run before each.

  /usr/bin/python3 bench/plot_serve.py results.jsonl docs/serving-load.png [--title TEXT]
(Debian's python3, which python3-matplotlib serves)
"""
import argparse
import collections
import json
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def saturation(records, mode, size):
    rates = [r["words_per_second"] for r in records
             if r["kind"] in ("load", "burst") and r["mode"] == mode and r["size"] == size]
    return max(rates) if rates else float("nan")


def p99_at(records, mode, size, load, field="p99"):
    """`field` (the p99) at `load` sentences/s, interpolated linearly between the nearest
    measured loads."""
    points = sorted((r["load"], r[field]) for r in records
                    if r["kind"] == "load" and r["mode"] == mode and r["size"] == size and
                    r.get(field) is not None)
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= load <= x1:
            return y0 + (y1 - y0) * (load - x0) / (x1 - x0)
    return float("nan")


def summarize(records):
    """The aims for one run's records."""
    offline = statistics.mean(r["words_per_second"] for r in records if r["kind"] == "offline")
    out = {"offline_words_per_second": offline}
    for mode in ("continuous", "static", "serial"):
        for size in (1, 16):
            out["%s_%d_saturation" % (mode, size)] = saturation(records, mode, size)
    out["serve_over_offline_1"] = out["continuous_1_saturation"] / offline
    out["serve_over_offline_16"] = out["continuous_16_saturation"] / offline
    out["continuous_over_serial_1"] = (out["continuous_1_saturation"] /
                                       out["serial_1_saturation"])
    lone = [r["p50"] for r in records if r["kind"] == "lone" and r["mode"] == "continuous"]
    lone_p99 = [r["p99"] for r in records
                if r["kind"] == "lone" and r["mode"] == "continuous" and "p99" in r]
    # Words per sentence from the burst of one-sentence requests: sentences/s at saturation.
    burst = [r for r in records if r["kind"] == "burst" and r["mode"] == "continuous" and
             r["size"] == 1 and r["answered"] > 0]
    if lone and burst:
        words_per_sentence = burst[0]["words"] / burst[0]["answered"]
        half = out["continuous_1_saturation"] / words_per_sentence / 2
        out["half_saturation_load"] = half
        out["lone_latency"] = lone[0]
        out["p99_at_half_saturation"] = p99_at(records, "continuous", 1, half)
        out["p99_over_lone"] = out["p99_at_half_saturation"] / lone[0]
        if lone_p99:  # against the same sentences' own p99 alone
            out["lone_p99"] = lone_p99[0]
            out["p99_over_lone_p99"] = out["p99_at_half_saturation"] / lone_p99[0]
        # Each request against its own sentence alone (bench-serve's slowdown).
        out["slowdown_p99_at_half_saturation"] = p99_at(records, "continuous", 1, half,
                                                        "slowdown_p99")
    for size in (1, 16):  # bursts paired with an offline run each (--bursts N)
        paired = [r["vs_offline"] for r in records if r["kind"] == "burst" and
                  r["mode"] == "continuous" and r["size"] == size and "vs_offline" in r]
        if paired:
            out["paired_bursts_over_offline_%d" % size] = statistics.median(paired)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("png")
    p.add_argument("--title", default="")
    args = p.parse_args()
    records = [json.loads(line) for line in open(args.results, encoding="utf-8") if line.strip()]
    records = [r for r in records if not r.get("crowd")]
    runs = collections.defaultdict(list)  # by bench-serve's start time
    for r in records:
        runs[r["run"]].append(r)
    for run, rs in sorted(runs.items()):
        print(json.dumps(dict(summarize(rs), run=run), sort_keys=True))
    offline = [r["words_per_second"] for r in records if r["kind"] == "offline"]
    series = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in records:
        if r["kind"] == "load" and r["answered"] > 0:
            series[(r["mode"], r["size"])][r["load"]].append(r)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 8), sharex=True)
    styles = {"continuous": "-o", "static": "--s", "serial": ":^"}
    colours = {1: "tab:blue", 16: "tab:orange"}
    for (mode, size), points in sorted(series.items()):
        loads = sorted(points)
        label = "%s, %d sentence%s a request" % (mode, size, "" if size == 1 else "s")
        style = dict(color=colours.get(size, "tab:gray"), label=label)
        top.plot(loads, [statistics.mean(r["words_per_second"] for r in points[x]) for x in loads],
                 styles.get(mode, "-"), **style)
        bottom.plot(loads, [statistics.median(r["p99"] for r in points[x]) for x in loads],
                    styles.get(mode, "-"), **style)
    if offline:
        top.axhline(statistics.mean(offline), color="black", linewidth=1,
                    label="offline tern-translate, same sentences and threads")
    top.set_ylabel("throughput (output words/s)")
    top.legend(fontsize=7)
    top.grid(alpha=0.3)
    bottom.set_ylabel("p99 latency (s)")
    bottom.set_yscale("log")
    bottom.set_xlabel("offered load (sentences/s, Poisson arrivals)")
    bottom.grid(alpha=0.3, which="both")
    if args.title:
        fig.suptitle(args.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
