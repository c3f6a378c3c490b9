#!/usr/bin/env python3
"""CTest (label "corpus"): builds the bundled Bible corpus with scripts/prepare-corpus.sh and checks
that the splits are line-aligned, of sane size, drawn from the right books, and that no dev, test
or reserved book (or sentence) leaks into train; then that a second run is a no-op.

  check_corpus.py REPO_ROOT OUTDIR
"""

import json
import os
import shutil
import subprocess
import sys

HELD_OUT = {
    "dev": {"Ruth", "Jonah", "Philippians", "Jude"},
    "test": {"Joel", "Nahum", "Colossians", "I Peter"},
    "reserved": {"Habakkuk", "Zephaniah", "Song of Solomon", "Galatians", "James", "II John",
                 "III John"},
}
# Lower bounds well under what the modules give (train 29967, dev 261, test 320, reserved 510),
# upper bounds over the verses those books have.
SIZES = {"train": (28000, 31000), "dev": (240, 262), "test": (300, 321), "reserved": (480, 512)}

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def main():
    root, outdir = sys.argv[1], sys.argv[2]
    if shutil.which("diatheke") is None:
        print("SKIP: diatheke is not installed (scripts/install-deps.sh installs it)")
        return 77
    script = os.path.join(root, "scripts", "prepare-corpus.sh")
    first = subprocess.run([script, "--force", outdir], capture_output=True, text=True)
    sys.stdout.write(first.stdout + first.stderr)
    if first.returncode != 0:
        print("FAIL: prepare-corpus.sh exited %d" % first.returncode)
        return 1

    books, sentences, counts = {}, {}, {}
    for split in SIZES:
        es = read_lines(os.path.join(outdir, split + ".es"))
        en = read_lines(os.path.join(outdir, split + ".en"))
        ids = read_lines(os.path.join(outdir, split + ".ids"))
        check(len(es) == len(en) == len(ids),
              "%s: es/en/ids have %d/%d/%d lines" % (split, len(es), len(en), len(ids)))
        lo, hi = SIZES[split]
        check(lo <= len(es) <= hi, "%s: %d pairs, expected %d..%d" % (split, len(es), lo, hi))
        check(all(s.strip() for s in es + en), "%s: has an empty line" % split)
        check(all("<" not in s and "  " not in s for s in es + en),
              "%s: has markup or a double space" % split)
        counts[split] = len(ids)
        books[split] = {i.rsplit(" ", 1)[0] for i in ids}
        sentences[split] = (set(es), set(en))
        check(len(set(ids)) == len(ids), "%s: a verse appears twice" % split)

    for split, expected in HELD_OUT.items():
        check(books[split] == expected,
              "%s: books %s, expected %s" % (split, sorted(books[split]), sorted(expected)))
        leaked = books["train"] & expected
        check(not leaked, "train holds %s books %s" % (split, sorted(leaked)))
        check(not (sentences["train"][0] & sentences[split][0]),
              "train shares Spanish sentences with %s" % split)
        check(not (sentences["train"][1] & sentences[split][1]),
              "train shares English sentences with %s" % split)
    check(len(books["train"]) == 66 - sum(len(b) for b in HELD_OUT.values()),
          "train has %d books, expected 51" % len(books["train"]))

    with open(os.path.join(outdir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    for split in SIZES:
        check(manifest["counts"][split] == counts[split],
              "manifest.json counts %s=%s, files have %d" %
              (split, manifest["counts"][split], counts[split]))
    second = subprocess.run([script, outdir], capture_output=True, text=True)
    check(second.returncode == 0 and "up to date" in second.stdout,
          "a second run rebuilt the corpus instead of skipping: " + second.stdout)

    for f in failures:
        print("FAIL: " + f)
    print("check_corpus: %s" % ("FAILED" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
