#!/usr/bin/env bash
# The AAN decoder (arch "aan") end to end: tern-train validates it by BLEU and writes model.tern,
# tern-export exports it as int16, and tern-translate decodes both; the int16 model translates as
# the float one for >= 99% of sentences, and the float32 export as model.tern.
source "$(dirname "$0")/common.sh"
train --model-dir "$WORK/m" --after 300u \
  --set "$TINY;model.arch=aan;training.save_freq=300;training.valid_freq=150" > "$WORK/train.log" 2>&1
grep -q "valid bleu" "$WORK/train.log" || fail "no BLEU validation for aan"
[ -f "$WORK/m/model.tern" ] || fail "tern-train wrote no model.tern for aan"
head -n 100 "$CORPUS/test.es" > "$WORK/test.es"
for w in float32 int16; do
  "$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/$w.tern" --weights "$w" 2>/dev/null
  "$BIN/tern-translate" --model "$WORK/$w.tern" --beam 4 --threads 1 \
    --max-length-factor 1.5 < "$WORK/test.es" > "$WORK/$w.out"
  [ "$(grep -c . "$WORK/$w.out")" -gt 0 ] || fail "$w: no translations"
done
"$BIN/tern-translate" --model "$WORK/m/model.tern" --beam 4 --threads 1 --max-length-factor 1.5 \
  < "$WORK/test.es" |
  cmp -s - "$WORK/float32.out" || fail "tern-export float32 translates differently from model.tern"
same=$(paste -d '\t' "$WORK/float32.out" "$WORK/int16.out" | awk -F'\t' '$1 == $2' | wc -l)
echo "aan int16 identical: $same/100"
[ "$same" -ge 99 ] || fail "int16 translations identical for only $same of 100 sentences"
echo "aan_test: passed"
