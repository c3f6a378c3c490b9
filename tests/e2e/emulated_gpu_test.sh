#!/usr/bin/env bash
# The GPU code paths where there is no GPU, on the emulated one (tensor/emulated_gpu.h,
# TERN_EMULATE_GPU=1: device memory the host cannot address, the CPU's kernels, every wait for the
# device counted):
# - trainer_gpu_test: every architecture trained on the GPU near the CPU run, and a one-GPU step
#   that never waits for the device;
# - tern-train on 2 MPI ranks with training.device=cuda, async and sync SGD (the host copies
#   through page-locked memory; the emulated GPU has no NCCL);
# - tern-translate --device cuda gives the CPU's translations.
source "$(dirname "$0")/common.sh"
export TERN_EMULATE_GPU=1

log="$WORK/trainer_gpu_test.log"
TERN_GPU_TEST_DATA="$WORK/data" timeout 600 "$BIN/trainer_gpu_test" \
  --gtest_filter='-*DemoPreset*' > "$log" 2>&1 || fail "trainer_gpu_test: $(grep -E 'Failure|FAILED' "$log" | head -5)"
grep -q '\[  SKIPPED \]' "$log" && fail "trainer_gpu_test skipped tests on the emulated GPU"
echo "trainer_gpu_test: $(grep -E '^\[  PASSED  \]' "$log")"

cost() { grep -E "^Ep\. .* Cost" "$1" | sed -E 's/.*Cost ([0-9.]+).*/\1/' | "$2" -n 1; }
for s in async sync; do
  timeout 300 mpirun --oversubscribe -np 2 "$BIN/tern-train" \
    --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/$s" --after 20u \
    --set "$TINY;training.device=cuda;distributed.strategy=$s;training.save_freq=20" \
    > "$WORK/$s.log" 2>&1 || fail "$s: $(tail -3 "$WORK/$s.log")"
  grep -q "2 rank(s), strategy $s" "$WORK/$s.log" || fail "$s: not a 2-rank run"
  grep -q "uses GPU 0 of 1 (.* emulated:" "$WORK/$s.log" || fail "$s: the ranks did not take a GPU"
  first=$(cost "$WORK/$s.log" head) last=$(cost "$WORK/$s.log" tail)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "$s: cost $first -> $last"
  [ -s "$WORK/$s/checkpoint-20/params.bin" ] || fail "$s: no checkpoint-20"
  echo "$s on 2 emulated GPUs: cost $first -> $last"
done

head -n 20 "$WORK/data/dev.es" > "$WORK/input.es"
for d in cpu cuda; do
  "$BIN/tern-translate" --model "$WORK/async/model.tern" --device "$d" --beam 4 --threads 1 \
    < "$WORK/input.es" > "$WORK/$d.out" 2> "$WORK/translate-$d.log" ||
    fail "translate on $d: $(tail -3 "$WORK/translate-$d.log")"
done
[ "$(wc -l < "$WORK/cuda.out")" = 20 ] || fail "translate on cuda: $(wc -l < "$WORK/cuda.out") lines"
cmp -s "$WORK/cpu.out" "$WORK/cuda.out" || fail "translations on cuda differ from the cpu's"
echo "tern-translate --device cuda: the cpu's 20 translations"
