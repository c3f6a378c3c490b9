#!/usr/bin/env bash
# MODEL_DIR/metrics.jsonl (trainer/metrics_log.h): every line one JSON record; a resumed run
# continues the straight run's records (elapsed time going on, target words and the final dev
# cross-entropy equal) and drops the records of the training the checkpoint does not hold; two
# ranks, async and sync, each give rank 0 and rank 1 records, and a sync validation counts both
# ranks' words.
source "$(dirname "$0")/common.sh"
args=(--config "$ROOT/configs/bible-small.pbtxt")
# Reads the records of a metrics file; "$2" is Python that checks them (`recs`, `train(rank)`,
# `valid`), failing by assertion.
check() {
  python3 - "$1" "$2" <<'PY' || fail "metrics check failed for $1"
import json, sys
path, code = sys.argv[1], sys.argv[2]
with open(path) as f:
    text = f.read()
assert text.endswith("\n"), "the file ends in a half line"
recs = [json.loads(line) for line in text.splitlines()]
assert recs and recs[0]["kind"] == "start", "the first record is not a start"
assert all(r["kind"] in ("start", "train", "valid") for r in recs)
def train(rank):
    return [r for r in recs if r["kind"] == "train" and r["rank"] == rank]
valid = [r for r in recs if r["kind"] == "valid"]
for r in train(0) + train(1) + valid:
    for key in ("update", "epoch", "wall_s", "sentences", "target_words"):
        assert key in r, f"{key} missing from {r}"
for r in train(0) + train(1):
    for key in ("cost", "lr", "words_per_s", "bytes_pushed", "bytes_pulled", "cpu_s"):
        assert key in r, f"{key} missing from {r}"
exec(code)
PY
}

# One rank: 12 updates straight, and 6 + 6 with a record appended after the checkpoint (as a
# run killed after it would have left) and a half line.
train "${args[@]}" --model-dir "$WORK/straight" --after 12u --set "$TINY" > "$WORK/s.log" 2>&1 ||
  fail "straight run: $(tail -3 "$WORK/s.log")"
train "${args[@]}" --model-dir "$WORK/resumed" --after 6u --set "$TINY" > "$WORK/r1.log" 2>&1 ||
  fail "first half: $(tail -3 "$WORK/r1.log")"
m=$WORK/resumed/metrics.jsonl
printf '%s\n' '{"kind":"train","rank":0,"update":9,"epoch":1,"wall_s":1e9,"lost":true}' >> "$m"
printf '%s' '{"kind":"train","rank":0,"upd' >> "$m"
train "${args[@]}" --model-dir "$WORK/resumed" --after 12u --set "$TINY" > "$WORK/r2.log" 2>&1 ||
  fail "second half: $(tail -3 "$WORK/r2.log")"
check "$WORK/straight/metrics.jsonl" '
assert [r["update"] for r in train(0)] == [5, 10, 12], train(0)
assert [r["update"] for r in valid] == [10, 12]
assert all("staleness" not in r for r in train(0)), "one sync rank has no staleness"
'
check "$m" "
straight = [json.loads(l) for l in open('$WORK/straight/metrics.jsonl')]
s_train = {r['update']: r for r in straight if r['kind'] == 'train'}
s_valid = {r['update']: r for r in straight if r['kind'] == 'valid'}
starts = [r for r in recs if r['kind'] == 'start']
assert [s['update'] for s in starts] == [0, 6], starts
assert not any(r.get('lost') for r in recs), 'a record after the checkpoint survived the resume'
assert [r['update'] for r in train(0)] == [5, 6, 10, 12], train(0)
walls = [r['wall_s'] for r in recs]
assert walls == sorted(walls), 'elapsed time went back across the resume: %s' % walls
assert starts[1]['wall_s'] >= train(0)[1]['wall_s'], 'the resume starts before the checkpoint'
for u in (10, 12):
    r = [x for x in train(0) if x['update'] == u][0]
    assert r['target_words'] == s_train[u]['target_words'], (u, r, s_train[u])
    assert r['sentences'] == s_train[u]['sentences'], (u, r, s_train[u])
assert valid[-1]['update'] == 12 and valid[-1]['dev_ce'] == s_valid[12]['dev_ce'], (valid, s_valid)
"

# Two ranks, async then sync.
mpirun --oversubscribe -np 2 "$BIN/tern-train" "${args[@]}" --model-dir "$WORK/async" \
  --after 12u --set "$TINY;distributed.strategy=async" > "$WORK/async.log" 2>&1 ||
  fail "async: $(tail -3 "$WORK/async.log")"
check "$WORK/async/metrics.jsonl" '
assert train(0) and train(1), "records of both ranks"
for r in train(0) + train(1):
    assert r["bytes_pushed"] > 0 and r["bytes_pulled"] > 0 and "staleness" in r, r
last1 = train(1)[-1]
assert valid[-1]["target_words"] >= train(0)[-1]["target_words"] + last1["target_words"] - 1, valid
'
mpirun --oversubscribe -np 2 "$BIN/tern-train" "${args[@]}" --model-dir "$WORK/sync" \
  --after 12u --set "$TINY;distributed.strategy=sync" > "$WORK/sync.log" 2>&1 ||
  fail "sync: $(tail -3 "$WORK/sync.log")"
check "$WORK/sync/metrics.jsonl" '
assert [r["update"] for r in train(0)] == [r["update"] for r in train(1)] == [5, 10, 12]
at10 = [r["target_words"] for r in train(0) + train(1) if r["update"] == 10]
assert [v["target_words"] for v in valid if v["update"] == 10] == [sum(at10)], (valid, at10)
assert train(1)[0]["cost"] != train(0)[0]["cost"], "each rank reports its own cost"
'
echo "metrics_test: passed"
