#!/usr/bin/env bash
# Integer export end to end: a briefly trained model exported as float32, int16 and int8 with
# tern-export (which reads the checkpoint without MPI), each translated with tern-translate and
# scored. int16 must give the float model's translation for >= 97% of sentences with scores within
# 3e-4 of its own, and BLEU within 0.1; int8 BLEU within 0.5; the shortlist and the clusters (built by tern-export) BLEU within 0.2,
# and (int16) a shortlist per sentence the translations of one sentence per batch.
# Bad quantized files and bad tern-export input end in one clear line.
source "$(dirname "$0")/common.sh"
# 1200 updates at a higher rate: enough for translations that are not all one token, so the
# comparisons below can fail. The whole test books: 320 lines.
# Identity: the criterion (>= 99%) is measured on a real model, the bible teacher, whose int16
# export gives 316-317 of 320 depending on the build's rounding. This
# model's outputs are still mostly repetition loops ("eeee…") whose length is a near-tie that any
# rounding flips: training seeds 1, 2 and 3 gave 318, 320 and 316 of 320 with one build. So the
# test asks for 97% (quantization bugs land far lower: int8 gives about 50%) and checks the
# precision itself, which near-ties do not move: on the lines both translate alike, the mean
# |score difference| must stay under 3e-4 (int16 gives about 4e-5, int8 about 2e-3).
train --model-dir "$WORK/m" --after 1200u \
  --set "$TINY;training.save_freq=1200;training.valid_freq=2000;optim.learning_rate=0.003" \
  >/dev/null
cp "$CORPUS/test.es" "$WORK/test.es"
cp "$CORPUS/test.en" "$WORK/test.en"
lines=$(wc -l < "$WORK/test.es")
declare -A bleu
for w in float32 int16 int8; do
  "$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/$w.tern" --weights "$w" 2>/dev/null
  "$BIN/tern-translate" --model "$WORK/$w.tern" --beam 4 --threads 1 --scores \
    --max-length-factor 1.5 < "$WORK/test.es" > "$WORK/$w.scored"
  sed 's/ ||| [^|]*$//' "$WORK/$w.scored" > "$WORK/$w.out"
  bleu[$w]=$("$BIN/tern-score" --ref "$WORK/test.en" --json < "$WORK/$w.out" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["bleu"])')
done
ldd "$BIN/tern-export" | grep -qi mpi && fail "tern-export links MPI"
# The tables at export: tern-export's shortlist is the one tern-vocab-tables adds to its int16
# file (the same file, byte for byte).
head -n 3000 "$CORPUS/train.es" > "$WORK/train.es"
head -n 3000 "$CORPUS/train.en" > "$WORK/train.en"
lex=(--shortlist-src "$WORK/train.es" --shortlist-tgt "$WORK/train.en")
"$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/int16.lex.tern" --weights int16 "${lex[@]}" \
  2>/dev/null
"$BIN/tern-vocab-tables" --model "$WORK/int16.tern" --out "$WORK/int16.lex2.tern" "${lex[@]}" \
  2>/dev/null
cmp -s "$WORK/int16.lex.tern" "$WORK/int16.lex2.tern" ||
  fail "tern-export's shortlist differs from tern-vocab-tables'"
# Ensemble decoding: a model with itself averages equal log-probabilities (exactly), so it
# translates as the model alone; with its int16 export it decodes too.
"$BIN/tern-translate" --model "$WORK/float32.tern" --model "$WORK/float32.tern" --beam 4 \
  --threads 1 --max-length-factor 1.5 < "$WORK/test.es" |
  cmp -s - "$WORK/float32.out" || fail "an ensemble of a model with itself translates differently"
"$BIN/tern-translate" --model "$WORK/float32.tern" --model "$WORK/int16.tern" --beam 4 \
  --threads 1 --max-length-factor 1.5 < "$WORK/test.es" > "$WORK/ensemble.out"
[ "$(wc -l < "$WORK/ensemble.out")" -eq "$lines" ] || fail "the ensemble did not translate every line"
# With --fused-output the step's best come from the members' mean in one pass: the same output.
"$BIN/tern-translate" --model "$WORK/float32.tern" --model "$WORK/int16.tern" --beam 4 \
  --fused-output --threads 1 --max-length-factor 1.5 < "$WORK/test.es" |
  cmp -s - "$WORK/ensemble.out" || fail "the ensemble translates differently with --fused-output"
# Both tables on the float model: each keeps BLEU within 0.2 of the full vocabulary's.
"$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/tables.tern" "${lex[@]}" \
  --clusters 8 --cluster-src "$WORK/train.es" --cluster-sentences 200 2>/dev/null
for table in shortlist clusters; do
  "$BIN/tern-translate" --model "$WORK/tables.tern" --$table --beam 4 --threads 1 \
    --max-length-factor 1.5 < "$WORK/test.es" > "$WORK/$table.out"
  bleu[$table]=$("$BIN/tern-score" --ref "$WORK/test.en" --json < "$WORK/$table.out" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["bleu"])')
done
echo "BLEU float32 ${bleu[float32]}: shortlist ${bleu[shortlist]}, clusters ${bleu[clusters]}"
# In an ensemble the first model's clusters, chosen by its states, restrict every model: a model
# with itself translates as the model alone.
"$BIN/tern-translate" --model "$WORK/tables.tern" --model "$WORK/tables.tern" --clusters --beam 4 \
  --threads 1 --max-length-factor 1.5 < "$WORK/test.es" | cmp -s - "$WORK/clusters.out" ||
  fail "an ensemble of a model with itself translates differently with --clusters"
python3 - "${bleu[float32]}" "${bleu[shortlist]}" "${bleu[clusters]}" <<'PY' ||
import sys
f, s, c = map(float, sys.argv[1:])
sys.exit(0 if abs(s - f) <= 0.2 and abs(c - f) <= 0.2 else 1)
PY
  fail "a vocabulary table moved BLEU by more than 0.2"
# A shortlist per sentence translates each line as the union shortlist does one line per batch.
# With the int16 model: its products are exact integer sums, so a row's bits cannot depend on the
# rows beside it. A float model's can: OpenBLAS computes a row with another kernel (other rounding)
# depending on how many rows share its product (e.g. the last row of an odd count), per CPU.
"$BIN/tern-translate" --model "$WORK/int16.lex.tern" --shortlist-per-sentence --beam 4 --threads 1 \
  --max-length-factor 1.5 < "$WORK/test.es" > "$WORK/sentshort.out"
"$BIN/tern-translate" --model "$WORK/int16.lex.tern" --shortlist --max-batch-tokens 1 --beam 4 \
  --threads 1 --max-length-factor 1.5 < "$WORK/test.es" | cmp -s - "$WORK/sentshort.out" ||
  fail "--shortlist-per-sentence translates differently from one sentence per batch"
"$BIN/tern-translate" --model "$WORK/int16.lex.tern" --shortlist --max-batch-sentences 1 --beam 4 \
  --threads 1 --max-length-factor 1.5 < "$WORK/test.es" | cmp -s - "$WORK/sentshort.out" ||
  fail "--max-batch-sentences 1 translates differently from a budget of one token"
# The float32 export is the model tern-train wrote (same weights, same translations).
"$BIN/tern-translate" --model "$WORK/m/model.tern" --beam 4 --threads 1 --max-length-factor 1.5 \
  < "$WORK/test.es" |
  cmp -s - "$WORK/float32.out" || fail "tern-export float32 translates differently from model.tern"
same=$(paste -d '\t' "$WORK/float32.out" "$WORK/int16.out" | awk -F'\t' '$1 == $2' | wc -l)
echo "int16 identical: $same/$lines; BLEU float32 ${bleu[float32]} int16 ${bleu[int16]} int8 ${bleu[int8]}"
[ $((100 * same)) -ge $((97 * lines)) ] ||
  fail "int16 translations identical for only $same of $lines sentences (need 97%)"
score_gap=$(python3 - "$WORK/float32.scored" "$WORK/int16.scored" <<'PY'
import sys
def read(path):
    return [line.rstrip("\n").rsplit(" ||| ", 1) for line in open(path, encoding="utf-8")]
gaps = [abs(float(a[1]) - float(b[1])) for a, b in zip(*map(read, sys.argv[1:])) if a[0] == b[0]]
print(f"{sum(gaps) / len(gaps):.2e}")
PY
)
echo "int16 mean |score difference| on identical lines: $score_gap"
python3 -c "import sys; sys.exit(0 if $score_gap <= 3e-4 else 1)" ||
  fail "int16 scores differ from float32's by $score_gap on average (need <= 3e-4)"
cmp -s "$WORK/float32.out" "$WORK/int8.out" && fail "int8 translates exactly as float32: no integer path?"
python3 - "${bleu[float32]}" "${bleu[int16]}" "${bleu[int8]}" <<'PY' || fail "BLEU moved too far"
import sys
f, i16, i8 = map(float, sys.argv[1:])
sys.exit(0 if abs(i16 - f) <= 0.1 and abs(i8 - f) <= 0.5 else 1)
PY
# Bad input: one line naming the problem, non-zero exit.
one_line_error() {  # expect_text command...
  local want=$1 out
  shift
  if out=$("$@" 2>&1 < "$WORK/test.es"); then fail "no error from: $*"; fi
  [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ] || fail "not one line: $out"
  grep -q -- "$want" <<<"$out" || fail "expected '$want' in: $out"
}
head -c 20000 "$WORK/int8.tern" > "$WORK/truncated.tern"
one_line_error truncated "$BIN/tern-translate" --model "$WORK/truncated.tern"
one_line_error "no checkpoint" "$BIN/tern-export" --checkpoint "$WORK/nowhere" --out "$WORK/x.tern"
one_line_error "not a weight type" "$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/x.tern" \
  --weights int4
one_line_error "needs --cluster-src" "$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/x.tern" \
  --clusters 4
one_line_error "cannot open" "$BIN/tern-export" --checkpoint "$WORK/m" --out "$WORK/x.tern" \
  --shortlist-src "$WORK/nowhere.es" --shortlist-tgt "$WORK/train.en"
echo "quantized_test: passed"
