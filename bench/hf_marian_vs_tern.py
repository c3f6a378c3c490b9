#!/usr/bin/env python3
"""A Hugging Face MarianMTModel and its Tern conversions translating the same test set: BLEU,
lines identical to transformers' own, and words per second, each way timed whole in this process
(the model loaded beforehand). Needs torch, transformers, sentencepiece and the tern package
(PYTHONPATH=build/python).

    python3 bench/hf_marian_vs_tern.py --hf work/hf-marian --source corpus/bible/test.es \\
        --ref corpus/bible/test.en --threads 2 --beam 4

The Tern models are converted here (python -m tern.convert's convert_hf_marian) in float32, int16
and int8. transformers translates with generate(num_beams=beam, early_stopping=True), batches of
--batch sentences sorted by length, the pad token barred as the OPUS-MT models' generation
configs bar it; Tern with translate_batch on every line at once. One JSON line per system.
"""

import argparse
import json
import os
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hf", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    import torch
    import transformers

    import tern
    from tern import convert

    torch.set_num_threads(args.threads)
    lines = [line.rstrip("\n") for line in open(args.source, encoding="utf-8")]
    refs = [line.rstrip("\n") for line in open(args.ref, encoding="utf-8")]
    tokenizer = transformers.MarianTokenizer.from_pretrained(args.hf)
    model = transformers.MarianMTModel.from_pretrained(args.hf).eval()
    shape = convert.read_config(args.hf)

    def hf_translate():
        order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
        out = [""] * len(lines)
        for b in range(0, len(order), args.batch):
            batch = order[b:b + args.batch]
            enc = tokenizer([lines[i] for i in batch], return_tensors="pt", padding=True)
            # Tern's length limit: 2 x the source pieces (with eos) + 10.
            limit = 2 * int(enc["attention_mask"].sum(dim=1).max()) + 10
            with torch.no_grad():
                ids = model.generate(**enc, num_beams=args.beam, early_stopping=True,
                                     max_new_tokens=limit, bad_words_ids=[[shape.pad_id]],
                                     forced_eos_token_id=None)
            for i, text in zip(batch, tokenizer.batch_decode(ids, skip_special_tokens=True)):
                out[i] = text
        return out

    def timed(fn):
        start = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - start

    def report(system, out, seconds, reference):
        print(json.dumps({
            "bench": "hf_marian_vs_tern", "system": system, "beam": args.beam,
            "threads": args.threads, "bleu": round(tern.score_bleu(out, refs).score, 2),
            "words_per_s": round(sum(len(o.split()) for o in out) / seconds, 1),
            "seconds": round(seconds, 2),
            "identical_to_transformers": sum(a == b for a, b in zip(out, reference)),
            "lines": len(lines)}), flush=True)

    reference, seconds = timed(hf_translate)
    report("transformers", reference, seconds, reference)
    with tempfile.TemporaryDirectory() as tmp:
        for weight_type in ("float32", "int16", "int8"):
            path = os.path.join(tmp, f"{weight_type}.tern")
            convert.convert_hf_marian(args.hf, path, weight_type)
            translator = tern.Translator(path, threads=args.threads)
            out, seconds = timed(lambda: [r.hypotheses[0] for r in translator.translate_batch(
                lines, beam_size=args.beam)])
            report(f"tern {weight_type}", out, seconds, reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
