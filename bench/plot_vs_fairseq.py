#!/usr/bin/env python3
"""Plots dev cross-entropy against updates from bench/vs_fairseq.py's curves.tsv files.

  bench/plot_vs_fairseq.py OUT.png "LABEL=DIR/curves.tsv:TOOLKIT" [...]

Each series is one toolkit's rows (tern or fairseq) of one run's curves.tsv. Prints the series
side by side at their common updates, as a Markdown table.
"""
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402


def read(spec):
    label, rest = spec.split('=', 1)
    path, toolkit = rest.rsplit(':', 1)
    points = {}
    with open(path, encoding='utf-8') as f:
        next(f)
        for line in f:
            name, update, ce = line.rstrip('\n').split('\t')
            if name == toolkit:
                points[int(update)] = float(ce)
    if not points:
        sys.exit('plot_vs_fairseq: no %s rows in %s' % (toolkit, path))
    return label, points


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    series = [read(s) for s in sys.argv[2:]]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, points in series:
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker='.', label=label)
    ax.set_xlabel('updates')
    ax.set_ylabel('dev cross-entropy (nats per piece)')
    ax.set_ylim(top=min(6.0, ax.get_ylim()[1]))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)
    common = sorted(set.intersection(*(set(p) for _, p in series)))
    print('| updates | ' + ' | '.join(label for label, _ in series) + ' |')
    print('| --- |' + ' --- |' * len(series))
    for u in common:
        print('| %d | ' % u + ' | '.join('%.3f' % p[u] for _, p in series) + ' |')


if __name__ == '__main__':
    main()
