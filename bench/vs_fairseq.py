#!/usr/bin/env python3
"""Tern's training against fairseq's, side by side on the bundled Bible corpus.

Both train the shape of configs/bible-small.pbtxt (3+3 layers, d 256, FFN 1024, 4 heads,
pre-norm, tied embeddings, dropout 0.1, label smoothing 0.1, Adam 0.9/0.98, clip 1.0, 2,000-token
batches) with one inverse-sqrt schedule (--lr, --warmup; by default 1.5e-3 with 150 warm-up
updates, the schedule the comparison was first run with) at the same time, one core each
(taskset), for the same minutes. Both segment the text with the same SentencePiece model (Tern's,
trained first and outside the clocks), so their dev cross-entropies are per the same pieces and
can be read against each other update for update. Then each translates the test books at beam 4
and `tern-score` scores both.

The two count a batch's 2,000 tokens differently: fairseq as sentences x max(source, target)
length, padding included, Tern as target tokens. fairseq's batches then hold about 1,660 target
tokens, Tern's about 1,950, so at equal "2,000" Tern would see 17% more text per update and make
fewer updates. The bench gives Tern data.batch_tokens=1700 (--tern-batch-tokens), which holds
about as many target tokens per update as fairseq's batches; both toolkits' mean target tokens
per update are in their JSON lines (target_tokens_per_update), so the match can be checked.

  bench/vs_fairseq.py [--install] [--minutes 45] [--out work/vs-fairseq]
                      [--venv work/fairseq-venv] [--tern-set "a.b=v;..."] [--tern-precision P]
                      [--tern-batch-tokens 1700] [--valid-every 150] [--lr 1.5e-3]
                      [--warmup 150] [--skip-fairseq] [--skip-tern]

--install creates the virtual environment with fairseq 0.12 (fairseq-fixed 0.12.3.1, torch 2.5.1,
numpy < 2) when it is missing. Prints one JSON line per toolkit (updates, epochs, target
tokens/s, test BLEU, chrF, length ratio) and OUT/curves.tsv (dev CE of each against updates).
Not part of CI: it takes MINUTES plus about five.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAIRSEQ_PINS = ['torch==2.5.1', 'torchaudio==2.5.1', 'numpy<2']


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def install(venv):
    py = os.path.join(venv, 'bin', 'python')
    if os.path.exists(os.path.join(venv, 'bin', 'fairseq-train')):
        return py
    run([sys.executable, '-m', 'venv', venv])
    pip = [py, '-m', 'pip', 'install', '-q']
    run(pip + FAIRSEQ_PINS + ['cython', 'sentencepiece', 'wheel', 'setuptools<70'])
    env = {k: v for k, v in os.environ.items() if k != 'CUDA_HOME'}
    run(pip + ['--no-build-isolation', 'fairseq-fixed==0.12.3.1'] + FAIRSEQ_PINS, env=env)
    return py


def single_thread_env():
    env = dict(os.environ)
    for k in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS'):
        env[k] = '1'
    env.update(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
               PYTHONUNBUFFERED='1')
    return env


def encode(spm, src, dst):
    with open(src, encoding='utf-8') as f, open(dst, 'w', encoding='utf-8') as g:
        run(['spm_encode', '--model', spm, '--output_format', 'piece'], stdin=f, stdout=g)


def tern_settings(a, vocab):
    c = a.corpus
    s = ['data.train_src=%s/train.es' % c, 'data.train_tgt=%s/train.en' % c,
         'data.valid_src=%s/dev.es' % c, 'data.valid_tgt=%s/dev.en' % c, 'data.vocab=' + vocab,
         'training.threads=1', 'training.valid_freq=%d' % a.valid_every,
         'training.save_freq=%d' % a.valid_every, 'training.early_stopping=0',
         'training.precision=' + a.tern_precision, 'data.batch_tokens=%d' % a.tern_batch_tokens,
         'optim.learning_rate=%g' % a.lr, 'optim.warmup_updates=%d' % a.warmup]
    return ';'.join(s + ([a.tern_set] if a.tern_set else []))


def start_tern(a, vocab, env):
    model_dir = os.path.join(a.out, 'tern')
    shutil.rmtree(model_dir, ignore_errors=True)
    cmd = ['taskset', '-c', str(a.tern_core), os.path.join(a.bin, 'tern-train'), '--config',
           os.path.join(ROOT, 'configs', 'bible-small.pbtxt'), '--model-dir', model_dir,
           '--after', '%gm' % a.minutes, '--set', tern_settings(a, vocab)]
    log = open(os.path.join(a.out, 'tern-train.log'), 'w')
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def prepare_fairseq(a, py, vocab, env):
    w = os.path.join(a.out, 'fairseq')
    spm_dir = os.path.join(w, 'spm')
    os.makedirs(spm_dir, exist_ok=True)
    for split in ('train', 'dev', 'test'):
        for lang in ('es', 'en'):
            encode(vocab, os.path.join(a.corpus, '%s.%s' % (split, lang)),
                   os.path.join(spm_dir, '%s.%s' % (split, lang)))
    shutil.rmtree(os.path.join(w, 'data-bin'), ignore_errors=True)
    bin_dir = os.path.dirname(py)
    with open(os.path.join(w, 'preprocess.log'), 'w') as log:
        run([os.path.join(bin_dir, 'fairseq-preprocess'), '--source-lang', 'es', '--target-lang',
             'en', '--trainpref', spm_dir + '/train', '--validpref', spm_dir + '/dev',
             '--destdir', w + '/data-bin', '--joined-dictionary', '--workers', '1'],
            stdout=log, stderr=subprocess.STDOUT, env=env)
    return w


def start_fairseq(a, py, w, env):
    shutil.rmtree(os.path.join(w, 'checkpoints'), ignore_errors=True)
    cmd = ['taskset', '-c', '1', os.path.join(os.path.dirname(py), 'fairseq-train'),
           w + '/data-bin', '--cpu', '--seed', '1234', '--task', 'translation',
           '--source-lang', 'es', '--target-lang', 'en', '--arch', 'transformer',
           '--encoder-layers', '3', '--decoder-layers', '3', '--encoder-embed-dim', '256',
           '--decoder-embed-dim', '256', '--encoder-ffn-embed-dim', '1024',
           '--decoder-ffn-embed-dim', '1024', '--encoder-attention-heads', '4',
           '--decoder-attention-heads', '4', '--encoder-normalize-before',
           '--decoder-normalize-before', '--share-all-embeddings', '--dropout', '0.1',
           '--attention-dropout', '0.0', '--activation-dropout', '0.0',
           '--criterion', 'label_smoothed_cross_entropy', '--label-smoothing', '0.1',
           '--optimizer', 'adam', '--adam-betas', '(0.9, 0.98)', '--adam-eps', '1e-9',
           '--lr', '%g' % a.lr, '--lr-scheduler', 'inverse_sqrt', '--warmup-updates', str(a.warmup),
           '--warmup-init-lr', '1e-7', '--clip-norm', '1.0', '--max-tokens', '2000',
           '--stop-time-hours', '%.6f' % (a.minutes / 60.0), '--save-dir', w + '/checkpoints',
           '--no-epoch-checkpoints', '--validate-interval-updates', str(a.valid_every),
           '--save-interval-updates', '1000000', '--num-workers', '0', '--log-format', 'simple',
           '--log-interval', '50']
    log = open(os.path.join(w, 'train.log'), 'w')
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def words(path):
    return sum(len(line.split()) for line in open(path, encoding='utf-8'))


def score(a, hyp):
    with open(hyp, encoding='utf-8') as f:
        out = subprocess.run([os.path.join(a.bin, 'tern-score'), '--ref',
                              os.path.join(a.corpus, 'test.en'), '--json'],
                             stdin=f, capture_output=True, text=True, check=True).stdout
    s = json.loads(out.strip().splitlines()[-1])
    s['length_ratio'] = words(hyp) / words(os.path.join(a.corpus, 'test.en'))
    return s


def tern_translate(a, model, hyp, env):
    with open(os.path.join(a.corpus, 'test.es'), encoding='utf-8') as f, open(hyp, 'w') as g:
        run(['taskset', '-c', str(a.tern_core), os.path.join(a.bin, 'tern-translate'), '--model',
             model, '--beam', '4', '--threads', '1'], stdin=f, stdout=g, env=env)


def tern_report(a, env):
    model_dir = os.path.join(a.out, 'tern')
    hyp = os.path.join(a.out, 'tern.test.en')
    tern_translate(a, os.path.join(model_dir, 'model.tern'), hyp, env)
    unsmoothed = None
    latest = open(os.path.join(model_dir, 'checkpoint.latest')).read().strip()
    if os.path.exists(os.path.join(model_dir, latest, 'smoothed.bin')):
        # model.tern holds the exponential average: the trained parameters too, for the record.
        raw = os.path.join(a.out, 'tern-unsmoothed.tern')
        run([os.path.join(a.bin, 'tern-export'), '--checkpoint', model_dir, '--out', raw,
             '--unsmoothed'], stderr=subprocess.DEVNULL, env=env)
        tern_translate(a, raw, os.path.join(a.out, 'tern-unsmoothed.test.en'), env)
        s = score(a, os.path.join(a.out, 'tern-unsmoothed.test.en'))
        unsmoothed = {k: s[k] for k in ('bleu', 'chrf', 'length_ratio')}
    curve, last, wps = [], {}, []
    for line in open(os.path.join(model_dir, 'metrics.jsonl'), encoding='utf-8'):
        r = json.loads(line)
        if r.get('kind') == 'valid':
            curve.append((int(r['update']), float(r['dev_ce'])))
        elif r.get('kind') == 'train':
            last = r
            if r.get('words_per_s'):
                wps.append(float(r['words_per_s'][0] if isinstance(r['words_per_s'], list)
                                 else r['words_per_s']))
    wps.sort()
    result = {'toolkit': 'tern', 'updates': int(last.get('update', 0)),
              'epochs': last.get('epoch'), 'target_words_per_s': wps[len(wps) // 2] if wps else None,
              'target_tokens_per_update': (round(last['target_words'] / last['update'], 1)
                                           if last.get('update') else None)}
    result.update(score(a, hyp))
    if unsmoothed:
        result['unsmoothed'] = unsmoothed
    return result, curve


def fairseq_report(a, py, w, env):
    log = open(os.path.join(w, 'train.log'), encoding='utf-8').read()
    curve = []
    for m in re.finditer(r'\| valid on .*?\| nll_loss ([\d.]+) \|.*?\| num_updates (\d+)', log):
        curve.append((int(m.group(2)), float(m.group(1)) * math.log(2)))
    out = os.path.join(w, 'interactive.out')
    with open(out, 'w') as g:
        run(['taskset', '-c', '1', os.path.join(os.path.dirname(py), 'fairseq-interactive'),
             w + '/data-bin', '--cpu', '--path', w + '/checkpoints/checkpoint_last.pt',
             '--source-lang', 'es', '--target-lang', 'en', '--beam', '4', '--nbest', '1',
             '--lenpen', '1.0', '--max-len-a', '1.3', '--max-len-b', '10', '--batch-size', '64',
             '--buffer-size', '1024', '--remove-bpe', 'sentencepiece', '--input',
             w + '/spm/test.es'], stdout=g, stderr=subprocess.DEVNULL, env=env)
    hyps = {}
    for line in open(out, encoding='utf-8'):
        if line.startswith('D-'):
            f = line.rstrip('\n').split('\t')
            hyps[int(f[0][2:])] = f[2] if len(f) > 2 else ''
    lines = sum(1 for _ in open(os.path.join(a.corpus, 'test.es'), encoding='utf-8'))
    if sorted(hyps) != list(range(lines)):
        sys.exit('vs_fairseq: fairseq-interactive gave %d translations for %d lines; see %s'
                 % (len(hyps), lines, out))
    hyp = os.path.join(a.out, 'fairseq.test.en')
    with open(hyp, 'w', encoding='utf-8') as g:
        for i in range(lines):
            g.write(hyps[i] + '\n')
    ups = re.findall(r'num_updates (\d+)', log)
    epochs = re.findall(r'train_inner \| epoch (\d+)', log)
    wps = sorted(float(x) for x in re.findall(r'train_inner .*? wps=([\d.]+),', log))
    wpb = [float(x) for x in re.findall(r'train_inner .*? wpb=([\d.]+),', log)]
    result = {'toolkit': 'fairseq', 'updates': int(ups[-1]) if ups else 0,
              'last_epoch': int(epochs[-1]) if epochs else None,
              'target_words_per_s': wps[len(wps) // 2] if wps else None,
              'target_tokens_per_update': round(sum(wpb) / len(wpb), 1) if wpb else None}
    result.update(score(a, hyp))
    return result, curve


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--install', action='store_true')
    p.add_argument('--minutes', type=float, default=45)
    p.add_argument('--out', default=os.path.join(ROOT, 'work', 'vs-fairseq'))
    p.add_argument('--venv', default=os.path.join(ROOT, 'work', 'fairseq-venv'))
    p.add_argument('--bin', default=os.path.join(ROOT, 'build', 'bin'))
    p.add_argument('--corpus', default=os.path.join(ROOT, 'corpus', 'bible'))
    p.add_argument('--tern-set', default='')
    p.add_argument('--tern-precision', default='float32')
    p.add_argument('--tern-core', type=int, default=0, help='fairseq takes core 1')
    p.add_argument('--tern-batch-tokens', type=int, default=1700,
                   help="Tern's data.batch_tokens (target tokens): 1700 holds about as many as "
                        "fairseq's 2,000 (max of source and target) do")
    p.add_argument('--valid-every', type=int, default=150)
    p.add_argument('--lr', type=float, default=1.5e-3,
                   help='both toolkits\' peak learning rate (inverse square root schedule)')
    p.add_argument('--warmup', type=int, default=150, help='both toolkits\' warm-up updates')
    p.add_argument('--skip-fairseq', action='store_true')
    p.add_argument('--skip-tern', action='store_true')
    a = p.parse_args()
    a.out, a.corpus, a.bin = (os.path.abspath(x) for x in (a.out, a.corpus, a.bin))
    if not os.path.exists(os.path.join(a.corpus, 'train.es')):
        sys.exit('vs_fairseq: no corpus in %s; run scripts/prepare-corpus.sh first' % a.corpus)
    py = os.path.join(a.venv, 'bin', 'python')
    if not a.skip_fairseq:
        if a.install:
            py = install(a.venv)
        elif not os.path.exists(os.path.join(a.venv, 'bin', 'fairseq-train')):
            sys.exit('vs_fairseq: no fairseq in %s; add --install or give --venv' % a.venv)
    os.makedirs(a.out, exist_ok=True)
    env = single_thread_env()
    # Tern's vocabulary, outside both clocks; fairseq segments with it too.
    vocab = os.path.join(a.out, 'vocab.spm')
    if not os.path.exists(vocab):
        with open(os.path.join(a.out, 'vocab.log'), 'w') as log:
            run([os.path.join(a.bin, 'tern-train'), '--config',
                 os.path.join(ROOT, 'configs', 'bible-small.pbtxt'), '--model-dir',
                 os.path.join(a.out, 'vocab'), '--after', '1u', '--set',
                 tern_settings(a, vocab) + ';training.valid_freq=100000'],
                stdout=log, stderr=subprocess.STDOUT, env=env)
    w = None if a.skip_fairseq else prepare_fairseq(a, py, vocab, env)
    t0 = time.time()
    procs = []
    if not a.skip_tern:
        procs.append(('tern', start_tern(a, vocab, env)))
    if w:
        procs.append(('fairseq', start_fairseq(a, py, w, env)))
    for name, proc in procs:
        if proc.wait() != 0:
            sys.exit('vs_fairseq: %s training failed (exit %d); see its log in %s'
                     % (name, proc.returncode, a.out))
    print('# both trained in %.0f s' % (time.time() - t0), file=sys.stderr)
    curves = {}
    if not a.skip_tern:
        r, curves['tern'] = tern_report(a, env)
        print(json.dumps(dict(r, bench='vs_fairseq', minutes=a.minutes,
                              precision=a.tern_precision, set=a.tern_set)))
    if w:
        r, curves['fairseq'] = fairseq_report(a, py, w, env)
        print(json.dumps(dict(r, bench='vs_fairseq', minutes=a.minutes, precision='float32')))
    with open(os.path.join(a.out, 'curves.tsv'), 'w') as g:
        g.write('toolkit\tupdate\tdev_ce\n')
        for name, points in curves.items():
            for u, ce in points:
                g.write('%s\t%d\t%.4f\n' % (name, u, ce))


if __name__ == '__main__':
    main()
