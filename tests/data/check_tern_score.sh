#!/usr/bin/env bash
# CTest for tern-score: sacrebleu's lines on a fixed case, --json, and the one-line errors
# (missing --ref, missing file, line-count mismatch).
#   check_tern_score.sh PATH/TO/tern-score
set -uo pipefail
score="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fails=0
expect() {  # expect NAME ACTUAL EXPECTED
  if [ "$2" != "$3" ]; then
    echo "FAIL $1:"; echo "  got:      $2"; echo "  expected: $3"; fails=$((fails + 1))
  fi
}

printf '%s\n' "El niño se comió la manzana roja del jardín." "¿Dónde queda la biblioteca?" > "$dir/ref"
printf '%s\n' "El niño comió una manzana roja en el jardín." "¿Dónde está la biblioteca?" > "$dir/hyp"
# Expected: printed by sacrebleu 2.4.3 (python3 -c 'import sacrebleu; print(sacrebleu.corpus_bleu(
# hyp, [ref])); print(sacrebleu.corpus_chrf(hyp, [ref]))').
expect text "$("$score" --ref "$dir/ref" < "$dir/hyp")" \
"BLEU = 19.43 73.3/38.5/9.1/5.6 (BP = 1.000 ratio = 1.000 hyp_len = 15 ref_len = 15)
chrF2 = 65.33"
# No final newline and CRLF line ends read the same.
expect crlf "$(printf 'El niño comió una manzana roja en el jardín.\r\n¿Dónde está la biblioteca?' |
  "$score" --ref "$dir/ref")" "$("$score" --ref "$dir/ref" < "$dir/hyp")"

json="$("$score" --ref "$dir/ref" --json < "$dir/hyp")"
expect json_fields "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["bleu"], d["chrf"], d["hyp_len"], d["sentences"])' "$json")" "19.43 65.33 15 2"

out="$("$score" < "$dir/hyp" 2>&1)"; rc=$?
expect missing_ref "$rc: $out" "1: tern-score: error: --ref is required: the reference file, one sentence per line"
out="$("$score" --ref "$dir/nope" < "$dir/hyp" 2>&1)"; rc=$?
expect missing_file "$rc: $out" "1: tern-score: error: reference file $dir/nope does not exist"
out="$(head -1 "$dir/hyp" | "$score" --ref "$dir/ref" 2>&1)"; rc=$?
expect mismatch "$rc: $out" "1: tern-score: error: stdin has 1 hypothesis lines but the reference file $dir/ref has 2; give one hypothesis per reference line"

[ "$fails" = 0 ] && echo "check_tern_score: ok"
exit "$fails"
