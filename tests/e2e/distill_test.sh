#!/usr/bin/env bash
# The distillation pipeline on a tiny corpus: teacher -> n-best -> best-BLEU selection -> student ->
# int16 export, then a rerun that skips every finished step, and a translation with the student.
source "$(dirname "$0")/common.sh"
sets=$(small_distill_sets)
cfg="$ROOT/configs/bible-small.pbtxt"
run() {
  "$ROOT/scripts/distill.sh" --bin "$BIN" --work "$WORK/kd" --teacher-config "$cfg" \
    --student-config "$cfg" --teacher-after 8u --student-after 8u --beam 2 --set "$sets" "$@"
}
run > "$WORK/first.log" 2>&1 || { cat "$WORK/first.log"; fail "the pipeline failed"; }
kd="$WORK/kd"
[ "$(wc -l < "$kd/data/train.distilled")" = 120 ] || fail "the distilled corpus does not have 120 lines"
# Every distilled line is one of the teacher's hypotheses for that line.
python3 - "$kd/data/teacher-0.nbest" "$kd/data/train.distilled" <<'PY' || fail "a chosen line is no hypothesis"
import sys
hyps = {}
for line in open(sys.argv[1], encoding="utf-8"):
    i, text = line.rstrip("\n").split(" ||| ")[:2]
    hyps.setdefault(int(i), set()).add(text)
for i, line in enumerate(open(sys.argv[2], encoding="utf-8")):
    assert line.rstrip("\n") in hyps[i], (i, line)
PY
grep -q "data.train_tgt" "$kd/student/config.pbtxt" 2>/dev/null ||
  grep -rq "train.distilled" "$kd/student/" || fail "the student did not train on the distilled corpus"
[ -s "$kd/student.int16.tern" ] || fail "no exported student"
echo "en el principio" | "$BIN/tern-translate" --model "$kd/student.int16.tern" --beam 2 > /dev/null ||
  fail "the exported student does not translate"
# A rerun finds every step done: no new n-best list, no training past the budget.
before=$(stat -c %Y "$kd/data/teacher-0.nbest")
run > "$WORK/second.log" 2>&1 || { cat "$WORK/second.log"; fail "the rerun failed"; }
[ "$(stat -c %Y "$kd/data/teacher-0.nbest")" = "$before" ] || fail "the rerun translated again"
grep -q "teacher-0.nbest exists" "$WORK/second.log" || fail "the rerun did not skip the n-best step"
# Two teachers decode as one ensemble: the teacher with itself averages equal log-probabilities,
# so the ensemble's n-best list is the single teacher's, byte for byte.
"$ROOT/scripts/distill.sh" --bin "$BIN" --work "$WORK/ens" --student-config "$cfg" \
  --teacher "$kd/teacher/model.tern" --teacher "$kd/teacher/model.tern" --student-after 8u \
  --beam 2 --set "$sets" > "$WORK/ensemble.log" 2>&1 ||
  { cat "$WORK/ensemble.log"; fail "the ensemble pipeline failed"; }
cmp -s "$WORK/ens/data/teacher-ensemble.nbest" "$kd/data/teacher-0.nbest" ||
  fail "the ensemble of a teacher with itself gives another n-best list"
# Bad input: a missing teacher model is one clear line and a non-zero exit.
if "$ROOT/scripts/distill.sh" --work "$WORK/x" --student-config "$cfg" --teacher /nonexistent.tern \
    2> "$WORK/bad.log"; then fail "a missing teacher was accepted"; fi
grep -q "/nonexistent.tern: no such teacher model" "$WORK/bad.log" || fail "unclear error: $(cat "$WORK/bad.log")"
echo "distill_test: passed"
