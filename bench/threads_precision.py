#!/usr/bin/env python3
"""A training step's target tokens/s at 1 and 2 threads with float32 and bf16 products, for one
build or two (before and after a change), interleaved in one run: each round times every
(build, threads, precision) once, in turn, so a neighbour's burst costs them alike.

One JSON line per timed step, then per (build, precision) the median over rounds of 2 threads / 1
thread, per (build, threads) bf16 / float32, and with two builds per (threads, precision) after /
before, each with its range over rounds. Wall clock throughout (the second thread is the point).

    python3 bench/threads_precision.py [--models small] [--rounds 3]
        [--before OLD/build/bin] [--after build/bin]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def step_rate(binary, model, threads, precision, args):
    cmd = [os.path.join(binary, "bench-train-step"), "--models", model, "--threads", str(threads),
           "--steps", str(args.steps), "--windows", str(args.windows), "--gemm_rates=false",
           "--clock", "wall", "--precision", precision]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"threads_precision: no result line from {' '.join(cmd)}")


def summary(kind, key, ratios):
    return {"bench": "threads_precision", "ratio": kind, **key,
            "median": round(statistics.median(ratios), 3),
            "range": [round(min(ratios), 3), round(max(ratios), 3)]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--before", help="the bin directory of the build before a change")
    parser.add_argument("--after", default="build/bin")
    args = parser.parse_args()
    builds = ([("before", args.before)] if args.before else []) + [("after", args.after)]
    precisions = ("float32", "bf16")
    for model in args.models.split(","):
        rounds = []
        for _ in range(args.rounds):
            rates = {}
            for build, binary in builds:
                for threads in (1, 2):
                    for precision in precisions:
                        r = step_rate(binary, model, threads, precision, args)
                        r.update(build=build, threads=threads, precision=precision)
                        print(json.dumps(r), flush=True)
                        rates[(build, threads, precision)] = r["target_tokens_per_s"]
            rounds.append(rates)
        for build, _ in builds:
            for p in precisions:
                print(json.dumps(summary("2 threads / 1", {"model": model, "build": build,
                                                           "precision": p},
                                         [r[(build, 2, p)] / r[(build, 1, p)] for r in rounds])))
            for t in (1, 2):
                print(json.dumps(summary("bf16 / float32", {"model": model, "build": build,
                                                            "threads": t},
                                         [r[(build, t, "bf16")] / r[(build, t, "float32")]
                                          for r in rounds])))
        if args.before:
            for t in (1, 2):
                for p in precisions:
                    print(json.dumps(summary("after / before", {"model": model, "threads": t,
                                                                "precision": p},
                                             [r[("after", t, p)] / r[("before", t, p)]
                                              for r in rounds])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
