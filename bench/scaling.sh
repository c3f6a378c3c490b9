#!/usr/bin/env bash
# Words/s of 1 worker against 2 workers on the bundled corpus, measured in the same run: one rank
# with one compute thread, 2 ranks (mpirun) with one thread each, two independent one-rank
# trainings side by side (each pinned to its own core, as mpirun binds its ranks), then one rank
# again (a change in the machine's load during the run shows as a gap between the two 1-rank
# rates and is averaged out); same config and vocabulary. Prints one JSON line with the rates,
# `ratio` (the 2-rank rate over the mean 1-rank rate; the aim is >= 1.8), `ceiling` (the same for
# the two independent runs: what this machine's cores give two workers that never talk) and
# `of_ceiling` (the 2-rank rate over the independent pair's: what the distributed training
# itself keeps).
#   bench/scaling.sh [--updates N] [--strategy async|sync] [--config FILE] [--set "a=b;..."]
# BIN (build/bin), CORPUS (build/corpus/bible) and WORK (build/bench-scaling) may be set.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin} CORPUS=${CORPUS:-$ROOT/build/corpus/bible}
WORK=${WORK:-$ROOT/build/bench-scaling}
updates=60 strategy=async config=$ROOT/configs/bible-small.pbtxt extra=""
while [ $# -gt 0 ]; do
  case $1 in
    --updates) updates=$2; shift 2 ;;
    --strategy) strategy=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --set) extra=$2; shift 2 ;;
    *) echo "bench/scaling.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f "$CORPUS/train.es" ] || "$ROOT/scripts/prepare-corpus.sh" "$CORPUS" >/dev/null
rm -rf "$WORK/one" "$WORK/two" "$WORK/pair0" "$WORK/pair1" "$WORK/again" && mkdir -p "$WORK"
set_="data.train_src=$CORPUS/train.es;data.train_tgt=$CORPUS/train.en;data.valid_src=;data.valid_tgt="
set_+=";data.vocab=$WORK/vocab.spm;training.threads=1;training.disp_freq=10"
set_+=";training.save_freq=100000;distributed.strategy=$strategy;$extra"
train() { "$@" --config "$config" --after "${updates}u" --set "$set_"; }
# Mean words/s over the log lines after the second. The first includes start-up; in the 2-rank
# run the second still has rank 1's first interval (rank 0's line shows each other rank's
# latest report, one interval behind its own), so every run leaves out two.
rate() {
  grep -E "^Ep\. .* words/s" "$1" | sed -E 's/.* ([0-9.]+) words\/s.*/\1/' | tail -n +3 |
    awk '{ s += $1; n++ } END { if (n == 0) exit 1; printf "%.1f", s / n }'
}
# The first run trains the vocabulary; its time falls in the first log interval, left out.
train "$BIN/tern-train" --model-dir "$WORK/one" > "$WORK/one.log" 2>&1
train mpirun --oversubscribe -np 2 "$BIN/tern-train" --model-dir "$WORK/two" > "$WORK/two.log" 2>&1
# Where the machine has the cores, pinned like mpirun's ranks (one core each).
pin() { if [ "$(nproc)" -ge 2 ] && command -v taskset > /dev/null; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
train pin 0 "$BIN/tern-train" --model-dir "$WORK/pair0" > "$WORK/pair0.log" 2>&1 &
pair0=$!
train pin 1 "$BIN/tern-train" --model-dir "$WORK/pair1" > "$WORK/pair1.log" 2>&1
wait "$pair0"
train "$BIN/tern-train" --model-dir "$WORK/again" > "$WORK/again.log" 2>&1
one=$(rate "$WORK/one.log") two=$(rate "$WORK/two.log") again=$(rate "$WORK/again.log")
pair=$(awk -v a="$(rate "$WORK/pair0.log")" -v b="$(rate "$WORK/pair1.log")" 'BEGIN { printf "%.1f", a + b }')
# A 2-worker rate over the mean of the two 1-rank rates.
over_one() { awk -v a="$one" -v b="$1" -v c="$again" 'BEGIN { printf "%.3f", 2 * b / (a + c) }'; }
ratio=$(over_one "$two") ceiling=$(over_one "$pair")
of_ceiling=$(awk -v a="$two" -v b="$pair" 'BEGIN { printf "%.3f", a / b }')
printf '{"bench":"scaling","strategy":"%s","updates":%d,"words_per_s_1x1":%s,"words_per_s_2x1":%s,"words_per_s_1x1_pair":%s,"words_per_s_1x1_again":%s,"ratio":%s,"ceiling":%s,"of_ceiling":%s}\n' \
  "$strategy" "$updates" "$one" "$two" "$pair" "$again" "$ratio" "$ceiling" "$of_ceiling"
