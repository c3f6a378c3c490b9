#!/usr/bin/env bash
# Bad input ends in one clear line naming the file or field, and a non-zero exit; never a crash.
source "$(dirname "$0")/common.sh"
expect_error() {  # expect_error PATTERN COMMAND...
  local pattern=$1; shift
  set +e
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "'$*' exited 0"
  [ $rc -lt 128 ] || fail "'$*' crashed (exit $rc): $out"
  echo "$out" | grep -q -- "$pattern" || fail "'$*' said '$out', wanted /$pattern/"
}
expect_error "cannot open config /nonexistent.pbtxt" \
  "$BIN/tern-train" --config /nonexistent.pbtxt --model-dir "$WORK/x"
printf 'model { no_such_field: 3 }\n' > "$WORK/bad.pbtxt"
expect_error "no_such_field" "$BIN/tern-train" --config "$WORK/bad.pbtxt" --model-dir "$WORK/x"
expect_error "unknown config field 'model.nope'" train --model-dir "$WORK/x" --set "model.nope=1"
expect_error "optim.learning_rate" train --model-dir "$WORK/x" --set "$TINY;optim.learning_rate=-1"
expect_error "distributed.overlap must be auto, always or never" \
  train --model-dir "$WORK/x" --set "$TINY;distributed.overlap=sometimes"
# (No GPU visible even where there is one: CUDA_VISIBLE_DEVICES empty.)
expect_error "training.device: cuda: no CUDA GPU is visible" \
  env CUDA_VISIBLE_DEVICES= "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" \
  --model-dir "$WORK/x" --set "$TINY;training.device=cuda" --after 2u
expect_error "budget" train --model-dir "$WORK/x" --set "$TINY" --after 10q
head -n 10 "$WORK/data/train.en" > "$WORK/data/short.en"
expect_error "short.en" train --model-dir "$WORK/y" \
  --set "$TINY;data.train_tgt=$WORK/data/short.en" --after 2u
expect_error "train.missing" train --model-dir "$WORK/z" \
  --set "$TINY;data.train_src=$WORK/data/train.missing" --after 2u
echo "bad_input_test: passed"
