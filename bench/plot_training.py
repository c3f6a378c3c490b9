#!/usr/bin/env python3
"""Plots validation curves of tern-train runs from their metrics.jsonl: dev BLEU and dev
cross-entropy against minutes of training (wall_s) and against updates, one line per run.

  bench/plot_training.py OUT.png "LABEL=MODEL_DIR" [...]

Prints every run's validations side by side as a Markdown table (minutes, update, dev CE, dev
BLEU). Needs matplotlib (pip install matplotlib).
"""
import json
import os
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402


def read(spec):
    label, model_dir = spec.split('=', 1)
    path = os.path.join(model_dir, 'metrics.jsonl')
    rows = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            r = json.loads(line)
            if r.get('kind') == 'valid':
                rows.append((r['wall_s'] / 60.0, r['update'], r['dev_ce'], r.get('bleu', 0.0)))
    if not rows:
        sys.exit('plot_training: no validations in %s' % path)
    return label, rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip())
    runs = [read(spec) for spec in sys.argv[2:]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for label, rows in runs:
        minutes = [r[0] for r in rows]
        axes[0].plot(minutes, [r[3] for r in rows], marker='o', label=label)
        axes[1].plot(minutes, [r[2] for r in rows], marker='o', label=label)
        axes[2].plot([r[1] for r in rows], [r[2] for r in rows], marker='o', label=label)
    for ax, (x, y) in zip(axes, (('minutes', 'dev BLEU (greedy)'), ('minutes', 'dev CE'),
                                 ('updates', 'dev CE'))):
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)
    for label, rows in runs:
        print('\n%s\n\n| minutes | update | dev CE | dev BLEU |\n| --- | --- | --- | --- |' % label)
        for m, u, ce, bleu in rows:
            print('| %.1f | %d | %.3f | %.2f |' % (m, u, ce, bleu))
    return 0


if __name__ == '__main__':
    sys.exit(main())
