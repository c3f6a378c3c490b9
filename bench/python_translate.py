#!/usr/bin/env python3
"""The Python package's translate_batch against tern-translate on the same model, lines, beam
and threads: words per second of output, in alternating rounds (CLI, then Python, per round), so
a neighbour's burst costs them alike.

Three ways, each timed from start to end, the model's load included:
- cli: tern-translate on the whole file, batches of at most --batch lines;
- python: one translate_batch call on every line with max_batch_size=--batch: the same batches,
  so the ratio to cli is the binding's own cost;
- python-chunks: a translate_batch call per --batch lines, the way many callers feed it (each
  call sorts and pads only its own lines).
One JSON line per timed run, then per Python way the median over rounds of its words/s / cli's,
with the range. Needs the package importable (PYTHONPATH=build/python, or pip install .).

    python3 bench/python_translate.py --model work/bible-small/model.int16.tern
        [--src corpus/bible/test.es] [--lines 320] [--batch 32] [--beam 4] [--threads 1]
        [--rounds 3] [--bin build/bin]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def words(lines):
    return sum(len(line.split()) for line in lines)


def run_cli(args, lines):
    start = time.perf_counter()
    out = subprocess.run(
        [os.path.join(args.bin, "tern-translate"), "--model", args.model, "--beam",
         str(args.beam), "--threads", str(args.threads),
         "--max-batch-sentences", str(args.batch)],
        input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout
    seconds = time.perf_counter() - start
    return out.splitlines(), seconds


def run_python(args, lines):
    import tern
    start = time.perf_counter()
    translator = tern.Translator(args.model, threads=args.threads)
    results = translator.translate_batch(lines, beam_size=args.beam, max_batch_size=args.batch)
    out = [r.hypotheses[0] for r in results]
    return out, time.perf_counter() - start


def run_python_chunks(args, lines):
    import tern
    start = time.perf_counter()
    translator = tern.Translator(args.model, threads=args.threads)
    out = []
    for b in range(0, len(lines), args.batch):
        for result in translator.translate_batch(lines[b:b + args.batch], beam_size=args.beam):
            out.append(result.hypotheses[0])
    return out, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--src", default="corpus/bible/test.es")
    parser.add_argument("--lines", type=int, default=320)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin", default="build/bin")
    args = parser.parse_args()
    with open(args.src, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][:args.lines]
    ways = (("cli", run_cli), ("python", run_python), ("python-chunks", run_python_chunks))
    ratios = {"python": [], "python-chunks": []}
    for r in range(args.rounds):
        rates, outs = {}, {}
        for way, run in ways:
            outs[way], seconds = run(args, lines)
            rates[way] = words(outs[way]) / seconds
            print(json.dumps({"bench": "python_translate", "round": r + 1, "way": way,
                              "lines": len(lines), "batch": args.batch, "beam": args.beam,
                              "threads": args.threads, "seconds": round(seconds, 3),
                              "words_per_s": round(rates[way], 1)}), flush=True)
        if outs["cli"] != outs["python"]:
            sys.exit("python_translate: python and cli translated differently")
        for way in ratios:
            ratios[way].append(rates[way] / rates["cli"])
    for way, values in ratios.items():
        print(json.dumps({"bench": "python_translate", "ratio": f"{way}/cli words per second",
                          "median": round(statistics.median(values), 3),
                          "range": [round(min(values), 3), round(max(values), 3)]}))


if __name__ == "__main__":
    main()
