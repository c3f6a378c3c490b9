#!/usr/bin/env python3
"""Plots bench-serve's JSON lines: throughput (output words/s) and p99 latency against the offered
load (sentences/s), one line per batching mode and request size, with the offline tern-translate
throughput for reference. Several runs in one file are averaged per point (throughput) or their
median taken (p99).

  bench/plot_serve.py results.jsonl docs/serving-load.png [--title TEXT]
"""
import argparse
import collections
import json
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("png")
    p.add_argument("--title", default="")
    args = p.parse_args()
    records = [json.loads(line) for line in open(args.results, encoding="utf-8") if line.strip()]
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
