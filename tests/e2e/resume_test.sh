#!/usr/bin/env bash
# Resume continues exactly where training stopped: 12 updates in one run and 6 + 6 updates in two
# runs end with byte-identical parameters, optimizer state and exponential average.
source "$(dirname "$0")/common.sh"
train --model-dir "$WORK/straight" --after 12u --set "$TINY;training.save_freq=6" >/dev/null
train --model-dir "$WORK/resumed" --after 6u --set "$TINY;training.save_freq=6" >/dev/null
[ "$(cat "$WORK/resumed/checkpoint.latest")" = checkpoint-6 ] || fail "no checkpoint-6"
train --model-dir "$WORK/resumed" --after 12u --set "$TINY;training.save_freq=6" > "$WORK/resumed.log"
grep -q "Up. 12" "$WORK/resumed.log" || fail "the resumed run did not reach update 12"
grep -q "Up. 5 " "$WORK/resumed.log" && fail "the resumed run started again from the beginning"
for f in params.bin smoothed.bin shard-0.bin worker-0.bin; do
  cmp "$WORK/straight/checkpoint-12/$f" "$WORK/resumed/checkpoint-12/$f" ||
    fail "$f differs between the straight and the resumed run"
done
# A GPU run's arrangement on the CPU (a host copy of the parameters for the strategy, values
# uploaded after every change, gradients downloaded after every step), resumed half way, ends
# with the same bytes.
train --model-dir "$WORK/copied" --host-copy --after 6u --set "$TINY;training.save_freq=6" >/dev/null
train --model-dir "$WORK/copied" --host-copy --after 12u --set "$TINY;training.save_freq=6" >/dev/null
# And a single-GPU run's: the strategy steps the graph's parameters in place (the local
# strategy), the host copy only comes down for checkpoints.
train --model-dir "$WORK/local" --host-copy --strategy-on-device --after 6u \
  --set "$TINY;training.save_freq=6" >/dev/null
train --model-dir "$WORK/local" --host-copy --strategy-on-device --after 12u \
  --set "$TINY;training.save_freq=6" >/dev/null
for run in copied local; do
  for f in params.bin smoothed.bin shard-0.bin worker-0.bin; do
    cmp "$WORK/straight/checkpoint-12/$f" "$WORK/$run/checkpoint-12/$f" ||
      fail "$f differs between the plain run and the $run one"
  done
  # The manifest too: the validation at update 10 (best_valid) ran on the graph's parameters.
  diff <(grep -v -e elapsed -e manifest_crc "$WORK/straight/checkpoint-12/manifest.txt") \
       <(grep -v -e elapsed -e manifest_crc "$WORK/$run/checkpoint-12/manifest.txt") ||
    fail "the $run run's manifest differs from the plain run's"
done
diff <(grep -v -e elapsed -e manifest_crc "$WORK/straight/checkpoint-12/manifest.txt") \
     <(grep -v -e elapsed -e manifest_crc "$WORK/resumed/checkpoint-12/manifest.txt") ||
  fail "manifests differ"
# The preset smooths the parameters (optim.exponential_smoothing): the average resumed exactly
# too (smoothed.bin, above). Smoothing changes nothing in what training steps, only what
# validation and model.tern use; tern-export writes the average unless told --unsmoothed.
train --model-dir "$WORK/plain" --after 12u \
  --set "$TINY;training.save_freq=6;optim.exponential_smoothing=0" >/dev/null
[ -e "$WORK/plain/checkpoint-12/smoothed.bin" ] && fail "a run without smoothing saved an average"
cmp "$WORK/straight/checkpoint-12/params.bin" "$WORK/plain/checkpoint-12/params.bin" ||
  fail "smoothing changed the trained parameters"
cmp -s "$WORK/straight/checkpoint-12/params.bin" "$WORK/straight/checkpoint-12/smoothed.bin" &&
  fail "the average equals the parameters"
[ "$(grep best_valid "$WORK/straight/checkpoint-12/manifest.txt")" != \
  "$(grep best_valid "$WORK/plain/checkpoint-12/manifest.txt")" ] ||
  fail "validation did not use the average"
"$BIN/tern-export" --checkpoint "$WORK/straight" --out "$WORK/smoothed.tern" 2>/dev/null
"$BIN/tern-export" --checkpoint "$WORK/straight" --out "$WORK/raw.tern" --unsmoothed 2>/dev/null
cmp "$WORK/smoothed.tern" "$WORK/straight/model.tern" || fail "model.tern is not the exported average"
cmp -s "$WORK/smoothed.tern" "$WORK/raw.tern" && fail "--unsmoothed exported the average"
echo "resume_test: passed"
