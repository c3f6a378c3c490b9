#!/usr/bin/env bash
# Virtual workers (distributed.virtual_workers, ps/virtual_cluster.h): one virtual worker trains
# bit for bit as one real rank (async with inline rounds, sync, and async with bf16 products; the
# parameters' average too), and fp16 products are refused naming the field; four workers with tau,
# gradient dropping and a slow link give the same bytes twice (simulated time, not the clock's),
# write every worker's records, and leave a checkpoint that two real ranks resume; a directory
# with a checkpoint is refused, not resumed.
source "$(dirname "$0")/common.sh"
for s in async sync bf16; do
  set_="$TINY;distributed.strategy=${s/bf16/async};distributed.overlap=never"
  [ "$s" != bf16 ] || set_+=";training.precision=bf16"
  train --model-dir "$WORK/real-$s" --after 12u --set "$set_" > "$WORK/real-$s.log" 2>&1 ||
    fail "real $s: $(tail -3 "$WORK/real-$s.log")"
  train --model-dir "$WORK/virtual-$s" --after 12u --set "$set_;distributed.virtual_workers=1" \
    > "$WORK/virtual-$s.log" 2>&1 || fail "virtual $s: $(tail -3 "$WORK/virtual-$s.log")"
  for f in params.bin smoothed.bin shard-0.bin; do
    cmp -s "$WORK/real-$s/checkpoint-12/$f" "$WORK/virtual-$s/checkpoint-12/$f" ||
      fail "$s: one virtual worker's $f differs from one real rank's"
  done
done

train --model-dir "$WORK/fp16" --after 2u \
  --set "$TINY;distributed.virtual_workers=2;training.precision=fp16" > "$WORK/fp16.log" 2>&1 &&
  fail "virtual workers trained with fp16 products"
grep -q "training.precision: fp16" "$WORK/fp16.log" || fail "fp16: $(tail -1 "$WORK/fp16.log")"

set_="$TINY;distributed.strategy=async;distributed.virtual_workers=4;distributed.tau=2"
set_+=";distributed.drop_rate=0.9;distributed.drop_warmup=4;distributed.virtual_link_mbps=10"
set_+=";distributed.virtual_link_delay_ms=2;distributed.virtual_seconds_per_token=1e-4"
set_+=";distributed.debug_slowdown=2"
for i in 1 2; do
  train --model-dir "$WORK/four-$i" --after 30u --set "$set_" > "$WORK/four-$i.log" 2>&1 ||
    fail "four virtual workers: $(tail -3 "$WORK/four-$i.log")"
done
for f in params.bin smoothed.bin shard-0.bin shard-3.bin worker-2.bin; do
  cmp -s "$WORK/four-1/checkpoint-30/$f" "$WORK/four-2/checkpoint-30/$f" ||
    fail "two runs of the same virtual workers differ in $f"
done
python3 - "$WORK/four-1/metrics.jsonl" "$WORK/four-2/metrics.jsonl" <<'PY' || fail "metrics"
import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:]]
for recs in runs:
    for r in recs:
        r.pop("cpu_s", None); r.pop("translate_s", None)  # the machine's, not the simulation's
assert runs[0] == runs[1], "the records of two identical runs differ"
recs = runs[0]
train = [r for r in recs if r["kind"] == "train"]
assert {r["rank"] for r in train} == {0, 1, 2, 3}, "every worker's records"
last = {r["rank"]: r for r in train}
assert last[3]["update"] < 0.7 * last[0]["update"], f"the slowed worker kept up: {last}"
assert all(r["bytes_pushed"] < 0.5 * r["bytes_pulled"] for r in last.values()), "dropped pushes"
assert all(0 < r.get("sent_fraction", 1) < 0.2 for r in last.values())
walls = [r["wall_s"] for r in recs if r["kind"] != "start"]
assert walls == sorted(walls) and walls[-1] > 0, walls
PY
mpirun --oversubscribe -np 4 "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" \
  --model-dir "$WORK/four-1" --after 34u --set "${set_//distributed.virtual_workers=4/}" \
  > "$WORK/resumed.log" 2>&1 || fail "4 real ranks from the virtual checkpoint: $(tail -3 "$WORK/resumed.log")"
grep -q "resumed from update 30" "$WORK/resumed.log" || fail "the real ranks did not resume"
train --model-dir "$WORK/four-2" --after 40u --set "$set_" > "$WORK/again.log" 2>&1 &&
  fail "virtual workers resumed a checkpoint"
grep -q "does not resume" "$WORK/again.log" || fail "no clear line: $(tail -1 "$WORK/again.log")"
echo "virtual_test: passed"
