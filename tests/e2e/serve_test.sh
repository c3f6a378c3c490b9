#!/usr/bin/env bash
# The whole serving path: distil a tiny student (scripts/distill.sh), export it as int16, add a
# lexical shortlist (tern-vocab-tables), serve it with tern-serve on 127.0.0.1, query it with curl:
# each sentence's translation is tern-translate's of it alone (an integer model with a shortlist
# per sentence does not depend on its batch companions); then SIGTERM ends it with exit 0.
source "$(dirname "$0")/common.sh"
sets=$(small_distill_sets)
cfg="$ROOT/configs/bible-small.pbtxt"
"$ROOT/scripts/distill.sh" --bin "$BIN" --work "$WORK/kd" --teacher-config "$cfg" \
  --student-config "$cfg" --teacher-after 8u --student-after 8u --beam 2 --weights int16 \
  --set "$sets" > "$WORK/distill.log" 2>&1 || { cat "$WORK/distill.log"; fail "distillation failed"; }
model="$WORK/student.int16.lex.tern"
"$BIN/tern-vocab-tables" --model "$WORK/kd/student.int16.tern" --out "$model" \
  --shortlist-src "$WORK/data/small.es" --shortlist-tgt "$WORK/data/small.en" \
  > "$WORK/tables.log" 2>&1 || { cat "$WORK/tables.log"; fail "tern-vocab-tables failed"; }

flags=(--beam 2 --shortlist-per-sentence --threads 1)
: > "$WORK/serve.out"  # there before the loop below reads it, however late the server starts
"$BIN/tern-serve" --model student="$model" --listen 127.0.0.1:0 "${flags[@]}" \
  > "$WORK/serve.out" 2> "$WORK/serve.err" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 600); do  # 60 s at most
  port=$(sed -n 's#^tern-serve: listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$WORK/serve.out")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" > /dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/ready" > /dev/null || { cat "$WORK/serve.err"; fail "tern-serve never became ready"; }

head -n 12 "$WORK/data/dev.es" > "$WORK/query.es"
"$BIN/tern-translate" --model "$model" "${flags[@]}" --max-batch-sentences 1 \
  < "$WORK/query.es" > "$WORK/alone.en"
python3 - "$WORK/query.es" > "$WORK/body.json" <<'PY'
import json, sys
print(json.dumps({"model": "student", "text": open(sys.argv[1], encoding="utf-8").read().splitlines()}))
PY
curl -sf --max-time 60 -H 'Content-Type: application/json' --data-binary @"$WORK/body.json" \
  "http://127.0.0.1:$port/v1/translate" > "$WORK/answer.json" || fail "the translation request failed"
python3 - "$WORK/answer.json" > "$WORK/served.en" <<'PY'
import json, sys
for t in json.load(open(sys.argv[1], encoding="utf-8"))["translations"]:
    print(t["text"])
PY
cmp -s "$WORK/served.en" "$WORK/alone.en" ||
  { diff "$WORK/served.en" "$WORK/alone.en" | head; fail "served translations differ from tern-translate's"; }
counted=0  # the count follows the answer's writing: ask again for a while
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/metrics" |
    grep -q '^tern_requests_total{endpoint="/v1/translate",status="200"} 1$' && { counted=1; break; }
  sleep 0.1
done
[ "$counted" = 1 ] || fail "/metrics does not count the request"
kill -TERM $pid
code=0
wait $pid || code=$?
[ "$code" = 0 ] || { cat "$WORK/serve.err"; fail "tern-serve exited $code on SIGTERM"; }
trap - EXIT

# bench-serve on the same model, briefly: every request answered, the bursts paired with offline
# runs, and the one-sentence requests' slowdowns against their lone latencies.
python3 "$ROOT/bench/bench_serve.py" --bin "$BIN" --model "$model" --src "$WORK/query.es" \
  --threads 1 --runtime "--beam 2 --shortlist-per-sentence" --modes continuous --sizes 1 \
  --loads 20 --seconds 1,1 --min-requests 10 --bursts 2 --drain 60 \
  > "$WORK/bench.jsonl" 2> "$WORK/bench.err" || { cat "$WORK/bench.err"; fail "bench_serve.py failed"; }
python3 - "$WORK/bench.jsonl" <<'PY' || { cat "$WORK/bench.err"; fail "bench_serve.py's records are wrong"; }
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
kinds = [r["kind"] for r in records]
assert kinds == ["offline", "lone", "burst", "burst", "load"], kinds
for r in records[2:]:
    assert r["answered"] == r["requests"] > 0 and r["failed"] == 0, r
    assert r["slowdown_p50"] > 0 and r["slowdown_p99"] >= r["slowdown_p50"], r
for r in records[2:4]:
    assert r["burst"] in (1, 2) and r["vs_offline"] > 0, r
PY
echo "serve_test: passed ($(wc -l < "$WORK/served.en") sentences as tern-translate gives them)"
