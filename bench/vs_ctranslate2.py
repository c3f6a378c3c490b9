#!/usr/bin/env python3
"""Tern's decoder against CTranslate2's on the same weights, side by side in one run.

bench/tern_to_ct2.py converts the float32 Tern model; this script then times, for each thread
count and beam, Tern's configurations (bench-decode, one process per round, every configuration
warm from its second run) and CTranslate2's (one warm translator per configuration, in this
process), the rounds taking turns: Tern, CTranslate2, Tern, CTranslate2, ... Each round keeps
the faster of two runs per configuration; a configuration's figure is the best round's, and a
ratio between two configurations is the median of the ratios within each round (the two measured
minutes apart at most), with its range.

Words/s are output words (whitespace-separated) per second of the translation of the whole input:
text in, text out (SentencePiece on both sides), the model loaded beforehand. With one thread
the seconds are process CPU seconds (what the work took, however loaded the machine is); with
more, wall seconds for both toolkits.

Tern configurations are bench-decode's (--configs: plain, fused, int8, intout, zeroskip,
shortlist, sentshort, workers, ...); CTranslate2's are a compute type (float32, int8,
int8_float32, int16) with an optional '+vmap' (the vocabulary map tern_to_ct2.py --vmap builds
from the same lexical shortlist) and an optional '+inter' (inter_threads = the threads, each
batch on one thread: CTranslate2's counterpart of Tern's 'workers'). Either may end in '@N': batches of N source tokens instead of --max-batch-tokens (a
batch's shortlist or vocabulary map is the union over its sentences, so its size is a setting
of the restricted configurations that both toolkits' users would tune). --python adds Tern
configurations run through the tern package's translate_batch in this process, as CTranslate2's
are (python, python+int8, python+int8+fused+intout+zeroskip, python+workers, ...;
PYTHONPATH=build/python). Every line of output is JSON; each configuration's line has its BLEU (tern-score on
the test references) and the number of its translations identical to Tern's first configuration
(plain float32) at the same beam; the last lines compare each side's fastest configuration,
with and without a vocabulary restriction:

    bash bench/vs-ctranslate2.sh work/bible-small    # installs CTranslate2, converts, runs this
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_VOCAB_PARTS = ("shortlist", "sentshort", "clusters")


def words(lines):
    return sum(len(line.split()) for line in lines)


def restricted(toolkit, config):
    """Whether a configuration restricts the output vocabulary (shortlist, clusters, vmap)."""
    parts = config.partition("@")[0].split("+")
    return "vmap" in parts if toolkit == "ctranslate2" else any(p in parts for p in _VOCAB_PARTS)


def batch_of(config, default):
    """A configuration's name without its '@N', and its batch in source tokens."""
    name, _, batch = config.partition("@")
    return name, int(batch) if batch else default


class Ct2Runner:
    def __init__(self, model_dir, threads, batch_tokens):
        import ctranslate2
        import sentencepiece as spm

        self.ct2 = ctranslate2
        self.model_dir = model_dir
        self.threads = threads
        self.batch_tokens = batch_tokens
        self.sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tern.spm"))
        self.translators = {}

    def translate(self, config, lines, beam):
        name, batch_tokens = batch_of(config, self.batch_tokens)
        compute_type, *rest = name.split("+")
        # '+inter': the threads decode separate batches (inter_threads), each on one thread, as
        # Tern's 'workers'; else one batch at a time, its operations on every thread.
        inter = "inter" in rest
        key = (compute_type, inter)
        if key not in self.translators:
            self.translators[key] = self.ct2.Translator(
                self.model_dir, device="cpu", compute_type=compute_type,
                inter_threads=self.threads if inter else 1,
                intra_threads=1 if inter else self.threads)
        translator = self.translators[key]
        src = [self.sp.encode(line, out_type=str) for line in lines]
        # Tern stops a sentence at 2 x its source length (with </s>) + 10 tokens; CTranslate2 takes
        # one limit a call: the longest sentence's, and each output is cut to its own limit, so
        # that a runaway output (an undertrained model's) is the one Tern gives.
        limits = [2 * (len(s) + 1) + 10 for s in src]
        results = translator.translate_batch(
            src, beam_size=beam, max_batch_size=batch_tokens, batch_type="tokens",
            max_decoding_length=max(limits), use_vmap="vmap" in rest, length_penalty=1.0)
        return [self.sp.decode(r.hypotheses[0][:limit]) for r, limit in zip(results, limits)]


class TernPythonRunner:
    """Tern's configurations named "python[+int8|+int16][+workers][+SWITCH...][@N]": the tern
    package's Translator.translate_batch in this process (PYTHONPATH=build/python), text in and
    text out, as a Python user calls CTranslate2's. SWITCH: bench-decode's names of the
    Translator's switches (fused, intout, zeroskip, shortlist, sentshort, clusters)."""

    SWITCHES = {"fused": "fused_output", "intout": "integer_output_layer",
                "zeroskip": "skip_zero_activations", "shortlist": "shortlist",
                "sentshort": "shortlist_per_sentence", "clusters": "clusters"}

    def __init__(self, model, threads, batch_tokens):
        import tern

        self.tern = tern
        self.model = model
        self.threads = threads
        self.batch_tokens = batch_tokens
        self.translators = {}

    def translate(self, config, lines, beam):
        name, batch_tokens = batch_of(config, self.batch_tokens)
        parts = name.split("+")[1:]
        compute = next((p for p in parts if p in ("int8", "int16")), "default")
        workers = "workers" in parts
        switches = {self.SWITCHES[p]: True for p in parts if p in self.SWITCHES}
        key = (compute, workers, batch_tokens, tuple(sorted(switches)))
        if key not in self.translators:
            self.translators[key] = self.tern.Translator(
                self.model, threads=0 if workers else self.threads,
                workers=self.threads if workers else 1, compute_type=compute,
                max_batch_tokens=batch_tokens, **switches)
        results = self.translators[key].translate_batch(lines, beam_size=beam)
        return [r.hypotheses[0] for r in results]


def timed(fn, wall):
    clock = time.perf_counter if wall else time.process_time
    start = clock()
    out = fn()
    return out, clock() - start


def bleu(tern_score, hyps, ref):
    out = subprocess.run([tern_score, "--ref", ref, "--json"], input="\n".join(hyps) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["bleu"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the float32 .tern model")
    parser.add_argument("--ct2", required=True, help="its CTranslate2 conversion (tern_to_ct2.py)")
    parser.add_argument("--input", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--bin", default="build/bin", help="where bench-decode and tern-score are")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-batch-tokens", type=int, default=2048)
    fast = "int8+fused+intout+zeroskip"
    parser.add_argument("--tern", default=",".join(
        ["plain", "fused", fast, f"{fast}@512", f"{fast}+shortlist", f"{fast}+shortlist@512",
         f"{fast}+shortlist@256", f"{fast}+shortlist@128", f"{fast}+sentshort"]),
                        help="bench-decode configurations; the first is the float32 reference")
    parser.add_argument("--ctranslate2", default=",".join(
        ["float32", "int8", "int8@512", "float32+vmap", "int8+vmap", "int8+vmap@512",
         "int8+vmap@256", "int8+vmap@128"]))
    parser.add_argument("--python", default="",
                        help="Tern configurations run through the tern package in this process: "
                             "python[+int8|+int16][+workers][@N] (needs PYTHONPATH=build/python)")
    parser.add_argument("--hyps", default="", help="a directory to keep every translation in")
    args = parser.parse_args()
    lines = [line.rstrip("\n") for line in open(args.input, encoding="utf-8")]
    hyps_dir = args.hyps or os.path.join(os.path.dirname(args.ct2) or ".", "vs-ct2-hyps")
    os.makedirs(hyps_dir, exist_ok=True)
    tern_configs = args.tern.split(",")
    ct2_configs = args.ctranslate2.split(",")
    python_configs = [c for c in args.python.split(",") if c]

    for threads in map(int, args.threads.split(",")):
        wall = threads > 1
        ct2 = Ct2Runner(args.ct2, threads, args.max_batch_tokens)
        py = TernPythonRunner(args.model, threads, args.max_batch_tokens) if python_configs else None
        for beam in map(int, args.beams.split(",")):
            rounds = []  # per round: {(toolkit, config): words/s}
            hyps = {}
            by_batch = {}  # bench-decode runs one batch size: one run per size
            for c in tern_configs:
                name, batch = batch_of(c, args.max_batch_tokens)
                by_batch.setdefault(batch, []).append((c, name))
            for _ in range(args.rounds):
                figures = {}
                for batch, configs in by_batch.items():
                    prefix = os.path.join(hyps_dir, f"t{threads}.mbt{batch}")
                    cmd = [os.path.join(args.bin, "bench-decode"), "--model", args.model,
                           "--input", args.input, "--beams", str(beam),
                           "--configs", ",".join(name for _, name in configs),
                           "--threads", str(threads), "--repeats", "2",
                           "--max_batch_tokens", str(batch),
                           "--clock", "wall" if wall else "cpu", "--hyps_out", prefix]
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                    rates = {}
                    for line in out.splitlines():
                        r = json.loads(line)
                        rates[r["config"]] = r["words_per_s"]
                        blas = r["blas"]
                    for c, name in configs:
                        figures[("tern", c)] = rates[name]
                        path = f"{prefix}.b{beam}.{name}.txt"
                        hyps[("tern", c)] = open(path, encoding="utf-8").read().split("\n")[:-1]
                for toolkit, runner, configs in (("tern", py, python_configs),
                                                 ("ctranslate2", ct2, ct2_configs)):
                    for c in configs:
                        best = float("inf")
                        for _ in range(2):
                            out, seconds = timed(lambda: runner.translate(c, lines, beam), wall)
                            best = min(best, seconds)
                        hyps[(toolkit, c)] = out
                        figures[(toolkit, c)] = words(out) / best
                rounds.append(figures)
            reference = hyps[("tern", tern_configs[0])]
            for key in [("tern", c) for c in tern_configs + python_configs] + \
                    [("ctranslate2", c) for c in ct2_configs]:
                out = hyps[key]
                if key[0] == "ctranslate2" or key[1] in python_configs:
                    tag = "ct2" if key[0] == "ctranslate2" else "tern"
                    with open(os.path.join(hyps_dir, f"t{threads}.b{beam}.{tag}.{key[1]}.txt"),
                              "w", encoding="utf-8") as f:
                        f.write("\n".join(out) + "\n")
                print(json.dumps({
                    "bench": "vs_ctranslate2", "toolkit": key[0], "config": key[1], "beam": beam,
                    "threads": threads, "clock": "wall" if wall else "cpu",
                    "words_per_s": round(max(r[key] for r in rounds), 1),
                    "rounds": [round(r[key], 1) for r in rounds],
                    "bleu": bleu(os.path.join(args.bin, "tern-score"), out, args.ref),
                    "identical_to_tern_float32": sum(a == b for a, b in zip(out, reference)),
                    "sentences": len(lines), "tern_blas": blas}), flush=True)
            for vocab in (False, True):
                def fastest(toolkit):
                    keys = [k for k in rounds[0] if k[0] == toolkit and restricted(*k) == vocab]
                    return max(keys, key=lambda k: statistics.median(r[k] for r in rounds),
                               default=None)
                tern_key, ct2_key = fastest("tern"), fastest("ctranslate2")
                if tern_key is None or ct2_key is None:
                    continue
                ratios = [r[tern_key] / r[ct2_key] for r in rounds]
                print(json.dumps({
                    "bench": "vs_ctranslate2", "compare": "fastest", "beam": beam,
                    "threads": threads, "vocabulary_restricted": vocab,
                    "tern": tern_key[1], "ctranslate2": ct2_key[1],
                    "ratio_median": round(statistics.median(ratios), 3),
                    "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)]}), flush=True)
            ct2_float = ("ctranslate2", ct2_configs[0])
            for tern_float in [("tern", tern_configs[0])] + \
                    [("tern", c) for c in python_configs[:1]]:
                ratios = [r[tern_float] / r[ct2_float] for r in rounds]
                print(json.dumps({
                    "bench": "vs_ctranslate2", "compare": "first", "beam": beam,
                    "threads": threads, "tern": tern_float[1], "ctranslate2": ct2_float[1],
                    "ratio_median": round(statistics.median(ratios), 3),
                    "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)]}),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
