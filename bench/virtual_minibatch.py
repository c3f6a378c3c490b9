#!/usr/bin/env python3
"""CPU seconds per mini-batch of a sweep's virtual-worker run, float32 and bf16 products, for one
build or several (before and after a change), taking turns.

  bench/virtual_minibatch.py [--sweep sweeps/thesis-ch5.pbtxt] [--cell async,8w] [--budget 12s]
                             [--precisions float32,bf16] [--bin after=build/bin]
                             [--bin before=OLD/bin@float32]
                             [--rounds 1] [--work build/bench-virtual]

Each run is the sweep's cell (its first seed) as scripts/tern-sweep plans it, with --budget as its
simulated-time budget and training.precision set: each of --precisions, or those a --bin names
after "@" (a build from before virtual workers took bf16 runs float32 only). A virtual-worker run computes every worker's
mini-batches on one core, so its process CPU seconds over the mini-batches it took is the cost a
mini-batch. The measure is steady state: from the first metrics.jsonl record at which every worker
has reported (vocabulary, data loading and the first steps' allocations behind it) to the last.

One JSON line per run (build, precision, mini-batches counted, CPU s a mini-batch, the last dev
cross-entropy, so that runs which computed the same thing show the same figure), then one per
(build, precision) with the median over rounds and its ratio to the first build's first
precision.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg):
    sys.stderr.write(f"bench/virtual_minibatch.py: {msg}\n")
    sys.exit(2)


def plan(bin_dir, sweep, cell):
    p = subprocess.run([os.path.join(bin_dir, "tern-sweep-plan"), "--sweep", sweep, "--root", ROOT,
                        "--cells", cell], capture_output=True, text=True)
    if p.returncode != 0:
        die(p.stderr.strip().split("\n")[-1])
    runs = [json.loads(line) for line in p.stdout.splitlines()[1:] if line.strip()]
    if not runs or runs[0]["hosts"] != "virtual":
        die(f"cell '{cell}' of {sweep} is not a virtual-worker placement")
    return runs[0]


def per_minibatch(metrics_path):
    """(mini-batches, CPU s a mini-batch, last dev CE) in steady state, from a run's metrics."""
    latest, start, end, dev_ce = {}, None, None, None
    workers = None
    with open(metrics_path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "start":
                workers = r.get("ranks")
            elif r.get("kind") == "train":
                latest[r["rank"]] = r["update"]
                if workers and len(latest) < workers:
                    continue
                point = (sum(latest.values()), r["cpu_s"])
                start = start or point
                end = point
            elif r.get("kind") == "valid":
                dev_ce = r["dev_ce"]
    if not start or end[0] <= start[0]:
        die(f"{metrics_path}: too few records for a steady-state figure (raise --budget)")
    return end[0] - start[0], (end[1] - start[1]) / (end[0] - start[0]), dev_ce


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", default="sweeps/thesis-ch5.pbtxt")
    ap.add_argument("--cell", default="async,8w")
    ap.add_argument("--budget", default="12s")
    ap.add_argument("--precisions", default="float32,bf16")
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-virtual"))
    args = ap.parse_args()
    bins = []
    for b in args.bin or ["after=" + os.path.join(ROOT, "build", "bin")]:
        name, sep, path = b.partition("=")
        path, at, only = path.partition("@")
        if not sep or not os.access(os.path.join(path, "tern-train"), os.X_OK):
            die(f"--bin '{b}': want NAME=DIR[@PRECISIONS] with DIR/tern-train built")
        bins.append((name, os.path.abspath(path), (only if at else args.precisions).split(",")))
    if args.rounds < 1:
        die("--rounds must be >= 1")
    run = plan(bins[0][1], args.sweep, args.cell)
    if not os.path.exists(os.path.join(ROOT, "corpus", "bible", "train.es")):
        subprocess.run([os.path.join(ROOT, "scripts", "prepare-corpus.sh")], check=True,
                       stdout=subprocess.DEVNULL)
    os.makedirs(args.work, exist_ok=True)
    results = {}
    for rnd in range(args.rounds):
        for name, bin_dir, precisions in bins:
            for precision in precisions:
                model_dir = os.path.join(args.work, f"{name}-{precision}")
                shutil.rmtree(model_dir, ignore_errors=True)
                cmd = [os.path.join(bin_dir, "tern-train"), "--config", run["config"],
                       "--model-dir", model_dir, "--after", args.budget,
                       "--set", run["set"] + f";training.precision={precision}"]
                with open(model_dir + ".log", "w") as log:
                    rc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
                if rc != 0:
                    die(f"{name} {precision}: tern-train failed (exit {rc}), see {model_dir}.log")
                n, cpu, ce = per_minibatch(os.path.join(model_dir, "metrics.jsonl"))
                results.setdefault((name, precision), []).append(cpu)
                print(json.dumps({"bench": "virtual_minibatch", "round": rnd + 1, "build": name,
                                  "precision": precision, "cell": args.cell,
                                  "minibatches": n, "cpu_s_per_minibatch": round(cpu, 5),
                                  "dev_ce": ce}), flush=True)
    ref = statistics.median(results[(bins[0][0], bins[0][2][0])])
    for (name, precision), cpus in results.items():
        med = statistics.median(cpus)
        print(json.dumps({"bench": "virtual_minibatch", "build": name, "precision": precision,
                          "median_cpu_s_per_minibatch": round(med, 5),
                          "range": [round(min(cpus), 5), round(max(cpus), 5)],
                          "ratio_to": f"{bins[0][0]} {bins[0][2][0]}",
                          "ratio": round(med / ref, 3)}), flush=True)


if __name__ == "__main__":
    main()
