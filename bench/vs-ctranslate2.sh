#!/usr/bin/env bash
# Tern against CTranslate2 on the same weights (bench/vs_ctranslate2.py), in one command:
#
#   bash bench/vs-ctranslate2.sh --model work/bible-small/model.tern [--corpus corpus/bible]
#        [--work DIR] [-- vs_ctranslate2.py options: --beams 1,4 --threads 1,2 --rounds 3 ...]
#
# It installs CTranslate2 4.8.5, sentencepiece and numpy from PyPI into a virtual environment
# ($TERN_BENCH_VENV, default work/bench-venv: a benchmark dependency, never the build's), adds a
# lexical shortlist from the corpus's training text to a copy of the float32 model when it has
# none (tern-vocab-tables), converts it (bench/tern_to_ct2.py --vmap), and times both toolkits on
# the corpus's test books. Needs build/bin's bench-decode, tern-score and tern-vocab-tables (and
# build/python's tern package for --python configurations).
set -euo pipefail
cd "$(dirname "$0")/.."
model="" corpus=corpus/bible work=work/vs-ct2 bin=build/bin
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "vs-ctranslate2.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] || { echo "vs-ctranslate2.sh: --model M.tern (float32) is required" >&2; exit 2; }
for f in "$model" "$corpus/train.es" "$corpus/train.en" "$corpus/test.es" "$corpus/test.en"; do
  [ -f "$f" ] || { echo "vs-ctranslate2.sh: $f is missing" >&2; exit 2; }
done
venv=${TERN_BENCH_VENV:-work/bench-venv}
if ! "$venv/bin/python" -c "import ctranslate2, sentencepiece, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q ctranslate2==4.8.5 sentencepiece numpy
fi
mkdir -p "$work"
tern_model=$work/model.tern
if [ ! -f "$tern_model" ] || [ "$model" -nt "$tern_model" ]; then
  "$bin/tern-vocab-tables" --model "$model" --out "$tern_model" \
    --shortlist-src "$corpus/train.es" --shortlist-tgt "$corpus/train.en"
  rm -rf "$work/ct2"
fi
if [ ! -f "$work/ct2/model.bin" ]; then
  "$venv/bin/python" bench/tern_to_ct2.py --model "$tern_model" --out "$work/ct2" --vmap
fi
uptime >&2
PYTHONPATH="$bin/../python${PYTHONPATH:+:$PYTHONPATH}" \
  "$venv/bin/python" bench/vs_ctranslate2.py --model "$tern_model" --ct2 "$work/ct2" \
  --input "$corpus/test.es" --ref "$corpus/test.en" --bin "$bin" --hyps "$work/hyps" "$@"
uptime >&2
