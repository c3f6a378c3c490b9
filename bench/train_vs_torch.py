#!/usr/bin/env python3
"""Tern's CPU training step against PyTorch's, interleaved in one run: bench-train-step and
bench/train_step_torch.py on the same shapes, each at float32 and bf16 products, taking turns
(Tern float32, Tern bf16, PyTorch float32, PyTorch bf16, then again) for --rounds rounds.

One JSON line per run, then per (model, threads) the median over rounds of each ratio measured
within a round, with its range: Tern float32 / PyTorch float32, Tern bf16 / PyTorch float32 and
Tern bf16 / PyTorch bf16. With one thread the windows are timed in process CPU seconds (--clock
cpu: what the work took on a shared machine), with more in wall seconds.

    python3 bench/train_vs_torch.py [--models small,base] [--threads 1,2] [--rounds 3]
        [--python work/bench-venv/bin/python]   # a Python with torch (PyPI's torch 2.15)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="small,base")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--python", default=sys.executable, help="a Python that has torch")
    args = parser.parse_args()
    for threads in map(int, args.threads.split(",")):
        clock = "cpu" if threads == 1 else "wall"
        for model in args.models.split(","):
            rounds = []
            for _ in range(args.rounds):
                rates = {}
                for precision in ("float32", "bf16"):
                    for r in run([os.path.join(args.bin, "bench-train-step"), "--models", model,
                                  "--threads", str(threads), "--steps", str(args.steps),
                                  "--windows", str(args.windows), "--gemm_rates=false",
                                  "--clock", clock, "--precision", precision]):
                        rates[("tern", precision)] = r["target_tokens_per_s"]
                        print(json.dumps(r), flush=True)
                for dtype in ("float32", "bf16"):
                    for r in run([args.python, "bench/train_step_torch.py", "--device", "cpu",
                                  "--models", model, "--steps", str(args.steps),
                                  "--windows", str(args.windows), "--clock", clock,
                                  "--dtype", dtype], env={"OMP_NUM_THREADS": str(threads)}):
                        rates[("torch", dtype)] = r["target_tokens_per_s"]
                        print(json.dumps(r), flush=True)
                rounds.append(rates)
            for tern, torch in (("float32", "float32"), ("bf16", "float32"), ("bf16", "bf16")):
                ratios = [r[("tern", tern)] / r[("torch", torch)] for r in rounds]
                print(json.dumps({
                    "bench": "train_vs_torch", "model": model, "threads": threads,
                    "clock": clock, "tern": tern, "torch": torch,
                    "ratio_median": round(statistics.median(ratios), 3),
                    "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                    "tern_tokens_per_s": [r[("tern", tern)] for r in rounds],
                    "torch_tokens_per_s": [r[("torch", torch)] for r in rounds]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
