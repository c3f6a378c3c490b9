#!/usr/bin/env bash
# Convergence of the distributed methods on the bundled corpus: sync, async, async + tau=2, and
# async + tau=2 + local optimizers + momentum tuning, each on 2 ranks x 1 thread for the same
# wall-time budget. Prints a table of dev cross-entropy against wall time and updates, and one
# JSON line per method with its last dev cross-entropy.
#   bench/convergence.sh [--after 5m] [--valid-freq 50] [--methods "sync async tau2 local_momentum"]
#                        [--set "a=b;..."]
# BIN (build/bin), CORPUS (build/corpus/bible) and WORK (build/bench-convergence) may be set.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin} CORPUS=${CORPUS:-$ROOT/build/corpus/bible}
WORK=${WORK:-$ROOT/build/bench-convergence}
after=5m valid_freq=50 extra="" only=""
while [ $# -gt 0 ]; do
  case $1 in
    --after) after=$2; shift 2 ;;
    --valid-freq) valid_freq=$2; shift 2 ;;
    --methods) only=$2; shift 2 ;;
    --set) extra=$2; shift 2 ;;
    *) echo "bench/convergence.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f "$CORPUS/train.es" ] || "$ROOT/scripts/prepare-corpus.sh" "$CORPUS" >/dev/null
mkdir -p "$WORK"
base="data.train_src=$CORPUS/train.es;data.train_tgt=$CORPUS/train.en"
base+=";data.valid_src=$CORPUS/dev.es;data.valid_tgt=$CORPUS/dev.en;data.vocab=$WORK/vocab.spm"
base+=";training.threads=1;training.disp_freq=$valid_freq;training.valid_freq=$valid_freq"
base+=";training.save_freq=100000;training.early_stopping=0"
methods=(sync async tau2 local_momentum)
[ -z "$only" ] || read -r -a methods <<< "$only"
declare -A settings=(
  [sync]="distributed.strategy=sync"
  [async]="distributed.strategy=async"
  [tau2]="distributed.strategy=async;distributed.tau=2"
  [local_momentum]="distributed.strategy=async;distributed.tau=2;distributed.local_optimizer_updates=200;optim.beta1=0.93;optim.beta2=0.997;optim.cooldown_after=400;optim.cooldown_beta1=0.92;optim.cooldown_beta2=0.998"
)
# Train the vocabulary first, so that no method's clock includes it.
[ -f "$WORK/vocab.spm" ] || "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" \
  --model-dir "$WORK/vocab" --after 1u --set "$base;training.valid_freq=100000" \
  > "$WORK/vocab.log" 2>&1
printf '%-15s %8s %9s %10s\n' method update "wall s" "dev ce"
for m in "${methods[@]}"; do
  [ -n "${settings[$m]:-}" ] || { echo "bench/convergence.sh: unknown method '$m'" >&2; exit 2; }
  rm -rf "${WORK:?}/$m"
  mpirun --oversubscribe -np 2 "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" \
    --model-dir "$WORK/$m" --after "$after" --set "$base;${settings[$m]};$extra" \
    > "$WORK/$m.log" 2>&1 || { echo "$m: failed, see $WORK/$m.log" >&2; continue; }
  # "valid ce-mean-words" and the following "valid bleu ... elapsed" line share the update.
  awk -v m="$m" '
    /valid ce-mean-words/ { split($0, f, " : "); sub(/Up\. /, "", f[2]); up = f[2]; ce = f[4] }
    /valid bleu/ && up != "" { e = $0; sub(/.*elapsed /, "", e); sub(/s$/, "", e);
      printf "%-15s %8d %9d %10.4f\n", m, up, e, ce; last = ce; lastup = up; laste = e }
    END { if (last != "") printf "{\"bench\":\"convergence\",\"method\":\"%s\",\"updates\":%d,\"wall_s\":%d,\"dev_ce\":%.4f}\n", m, lastup, laste, last > "/dev/stderr" }
  ' "$WORK/$m.log"
done
