#!/usr/bin/env bash
# Mixed precision on the CPU (the GPU's rounding, emulated): bf16 and fp16 training lower the
# cost; fp16's dynamic loss scaling skips the steps whose gradients overflow and lowers the scale
# until they fit; an fp16 run resumed half way (loss scale and its count in the checkpoint) ends
# with the straight run's bytes; a precision that does not exist is one clear line.
source "$(dirname "$0")/common.sh"
cost() { grep -E "^Ep\. .* Cost" "$1" | sed -E 's/.*Cost ([0-9.]+).*/\1/' | "$2" -n 1; }
lowers_cost() {
  local first last
  first=$(cost "$1" head) last=$(cost "$1" tail)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "$2: cost $first -> $last"
  echo "$2: cost $first -> $last"
}

train --model-dir "$WORK/bf16" --after 30u --set "$TINY;training.precision=bf16" > "$WORK/bf16.log" 2>&1 ||
  fail "bf16: $(tail -3 "$WORK/bf16.log")"
grep -q "matrix products take bf16 operands" "$WORK/bf16.log" || fail "bf16: not in mixed precision"
lowers_cost "$WORK/bf16.log" bf16
cmp -s "$WORK/bf16/checkpoint-30/params.bin" /dev/null && fail "bf16: empty parameters"

# A loss scale of 2^40 overflows fp16: those steps are skipped and halve the scale.
train --model-dir "$WORK/fp16" --after 30u \
  --set "$TINY;training.precision=fp16;training.loss_scale=1099511627776" > "$WORK/fp16.log" 2>&1 ||
  fail "fp16: $(tail -3 "$WORK/fp16.log")"
lowers_cost "$WORK/fp16.log" fp16
last=$(grep -E "^Ep\. .* loss scale" "$WORK/fp16.log" | tail -n 1)
skipped=$(sed -E 's/.*skipped ([0-9]+).*/\1/' <<< "$last")
scale=$(sed -E 's/.*loss scale ([0-9.e+]+).*/\1/' <<< "$last")
[ "$skipped" -ge 1 ] || fail "fp16: no step was skipped at a loss scale of 2^40 ($last)"
awk -v s="$scale" 'BEGIN { exit !(s < 1099511627776) }' || fail "fp16: the scale did not fall ($last)"
grep -q "^loss_scale: $scale$" "$WORK/fp16/checkpoint-30/manifest.txt" ||
  fail "fp16: the checkpoint does not hold the loss scale $scale"
echo "fp16: $skipped steps skipped, loss scale 2^40 -> $scale"

# Resumed half way, with the scale growing every 3 good steps: the straight run's bytes.
set16="$TINY;training.precision=fp16;training.loss_scale_window=3;training.save_freq=6"
train --model-dir "$WORK/straight" --after 12u --set "$set16" >/dev/null 2>&1
train --model-dir "$WORK/resumed" --after 6u --set "$set16" >/dev/null 2>&1
train --model-dir "$WORK/resumed" --after 12u --set "$set16" > "$WORK/resumed.log" 2>&1
grep -q "resumed from update 6" "$WORK/resumed.log" || fail "fp16: did not resume"
for f in params.bin shard-0.bin manifest.txt; do
  cmp <(grep -v -e elapsed -e manifest_crc "$WORK/straight/checkpoint-12/$f") \
      <(grep -v -e elapsed -e manifest_crc "$WORK/resumed/checkpoint-12/$f") ||
    fail "fp16: $f differs between the straight and the resumed run"
done
grep -q "^loss_scale: 1048576$" "$WORK/straight/checkpoint-12/manifest.txt" ||
  fail "fp16: the scale did not double every 3 steps: $(grep loss_scale "$WORK/straight/checkpoint-12/manifest.txt")"
echo "fp16: resumed at 6, equal at 12 (loss scale 65536 -> 1048576)"

# auto, the default, chooses at start-up and says so. This model's products are too small to
# time, so it trains float32 on any CPU, and config.pbtxt records the precision that ran.
train --model-dir "$WORK/auto" --after 2u --set "$TINY" > "$WORK/auto.log" 2>&1 ||
  fail "auto: $(tail -3 "$WORK/auto.log")"
grep -q "training.precision auto: float32 (the model's 600x32x64 products are too small" \
  "$WORK/auto.log" || fail "auto: $(grep -m1 'training.precision' "$WORK/auto.log")"
grep -q '^  precision: "float32"$' "$WORK/auto/config.pbtxt" || fail "auto: config.pbtxt says otherwise"
# Resumed with auto, a bf16 run stays bf16 where the CPU has the kernel, and turns float32 where
# bf16 would be emulated.
train --model-dir "$WORK/keep" --after 2u --set "$TINY;training.precision=bf16;training.save_freq=2" \
  > /dev/null 2>&1 || fail "keep: the bf16 run failed"
train --model-dir "$WORK/keep" --after 4u --set "$TINY;training.save_freq=2" > "$WORK/keep.log" 2>&1 ||
  fail "keep: $(tail -3 "$WORK/keep.log")"
if grep -qw avx512_bf16 /proc/cpuinfo && [ -z "${TERN_ISA:-}" ]; then
  expected="training.precision auto: bf16 (the checkpoint's, which this run resumes)"
else
  expected="training.precision auto: float32 (this CPU has no AVX512-BF16"
fi
grep -qF "$expected" "$WORK/keep.log" || fail "keep: $(grep -m1 'training.precision' "$WORK/keep.log")"
grep -q "resumed from update 2" "$WORK/keep.log" || fail "keep: did not resume"
echo "auto: float32 for a tiny model; resumed: ${expected#*auto: }"

set +e
out=$(train --model-dir "$WORK/bad" --after 1u --set "$TINY;training.precision=fp8" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "training.precision=fp8 was accepted"
grep -q "training.precision: unknown value 'fp8' (known: auto, float32, bf16, fp16)" <<< "$out" || fail "unclear error: $out"
echo "precision_test: passed"
