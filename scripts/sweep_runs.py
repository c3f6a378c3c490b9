#!/usr/bin/python3
"""Per-run figures from metrics.jsonl files (tern-train's, or a sweep record's), for what a sweep's
summary averages away or does not give:

  scripts/sweep_runs.py STEPS TARGET METRICS.jsonl...

prints, a line per file: its run (the path below runs/, or the file), the final dev CE, the dev CE
after STEPS optimizer steps (pushes the first shard applied, interpolated between validations),
the steps at the last validation, and the seconds to dev CE TARGET (interpolated; None: not
crossed between two validations).
"""
import json
import sys


def at(records, key, x, want):
    """`want` where `key` first passes x, interpolated between the two validations around it."""
    for a, b in zip(records, records[1:]):
        if (a[key] - x) * (b[key] - x) <= 0 and a[key] != b[key]:
            f = (x - a[key]) / (b[key] - a[key])
            return round(a[want] + f * (b[want] - a[want]), 3)
    return None


def main():
    steps, target = float(sys.argv[1]), float(sys.argv[2])
    for path in sys.argv[3:]:
        with open(path) as f:
            valid = [json.loads(line) for line in f if '"kind":"valid"' in line]
        for r in valid:
            r["steps"] = r["staleness"]["pushes"]
        name = path.split("/runs/")[1].split("/model/")[0] if "/runs/" in path else path
        print(name, round(valid[-1]["dev_ce"], 3), at(valid, "steps", steps, "dev_ce"),
              valid[-1]["steps"], at(valid, "dev_ce", target, "wall_s"))


if __name__ == "__main__":
    main()
