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
# Issue 38: each of these crashed, aborted, trained to NaN and exited 0, or never ended.
expect_error "model.emb_dim must be between" \
  train --model-dir "$WORK/h" --set "$TINY;model.emb_dim=1000000000;model.heads=1" --after 2u
expect_error "model.ffn_dim must be between" \
  train --model-dir "$WORK/h" --set "$TINY;model.ffn_dim=-5" --after 2u
expect_error "optim.learning_rate must be a finite number" \
  train --model-dir "$WORK/h" --set "$TINY;optim.learning_rate=inf" --after 2u
expect_error "optim.weight_decay must be a finite number" \
  train --model-dir "$WORK/h" --set "$TINY;optim.weight_decay=nan" --after 2u
expect_error "model.emb_dim must be even" \
  train --model-dir "$WORK/h" --set "$TINY;model.emb_dim=63;model.heads=3" --after 2u
expect_error "model.emb_dim must be between 4" \
  train --model-dir "$WORK/h" --set "$TINY;model.emb_dim=2;model.heads=1;model.ffn_dim=1" --after 2u
expect_error "training.threads must be between 0 and 1024" \
  train --model-dir "$WORK/h" --set "$TINY;training.threads=100000" --after 2u
for budget in nanu nans 0.5u -3u; do
  expect_error "budget '$budget'" train --model-dir "$WORK/h" --set "$TINY" --after "$budget"
done
# Within every field's range, but not within this machine's memory: refused before allocating.
expect_error "of memory here" train --model-dir "$WORK/h" \
  --set "$TINY;data.batch_tokens=1000000000;data.maxi_batch=1" --after 2u
expect_error "training diverged: the cost was not a finite number" train --model-dir "$WORK/nan" \
  --set "$TINY;optim.optimizer=sgd;optim.learning_rate=1e30" --after 40u
[ ! -e "$WORK/nan/checkpoint.latest" ] || fail "a diverged run saved a checkpoint"
printf ' \n\t\n  \n' > "$WORK/data/blank.txt"
expect_error "no usable lines" train --model-dir "$WORK/blank" --set "$TINY;data.vocab=$WORK/b.spm;\
data.train_src=$WORK/data/blank.txt;data.train_tgt=$WORK/data/blank.txt" --after 2u
# Issue 38, 13: a directory where a file is wanted is named as one.
mkdir -p "$WORK/adir"
expect_error "config $WORK/adir is a directory" "$BIN/tern-train" --config "$WORK/adir" --model-dir "$WORK/x"
expect_error "$WORK/adir is a directory" train --model-dir "$WORK/x" --set "$TINY;data.vocab=$WORK/adir"
expect_error "$WORK/adir is a directory" "$BIN/tern-score" --ref "$WORK/adir"
expect_error "standard input is a directory" sh -c "'$BIN/tern-score' --ref '$WORK/data/dev.en' < '$WORK/adir'"
# Issue 38, 6 and 14: numeric flags out of range are refused by name.
train --model-dir "$WORK/t" --set "$TINY" --after 2u > /dev/null 2>&1
expect_error "--threads must be between 0" \
  "$BIN/tern-export" --checkpoint "$WORK/t" --out "$WORK/t.tern" --threads 100000
expect_error "--shortlist-best must be between 1" "$BIN/tern-export" --checkpoint "$WORK/t" \
  --out "$WORK/t.tern" --shortlist-src "$WORK/data/train.es" --shortlist-tgt "$WORK/data/train.en" \
  --shortlist-best 0 --shortlist-frequent 0
expect_error "--shortlist-min-prob must be a number" "$BIN/tern-export" --checkpoint "$WORK/t" \
  --out "$WORK/t.tern" --shortlist-src "$WORK/data/train.es" --shortlist-tgt "$WORK/data/train.en" \
  --shortlist-min-prob nan
echo "bad_input_test: passed"
