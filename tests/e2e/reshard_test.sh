#!/usr/bin/env bash
# A checkpoint written by N ranks resumes on M != N ranks: async with gradient dropping trained
# on 2 ranks continues on 1, and sync trained on 1 rank continues on 2. The resumed job says it
# re-sharded, continues from the saved update, and its cost stays where training left it.
source "$(dirname "$0")/common.sh"
run() {
  local np=$1 s=$2 dir=$3 after=$4 log=$5
  timeout 300 mpirun --oversubscribe -np "$np" "$BIN/tern-train" \
    --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$dir" --after "$after" \
    --set "$TINY;distributed.strategy=$s;training.save_freq=20;${6:-}" > "$log" 2>&1 ||
    fail "$s on $np rank(s): $(tail -3 "$log")"
}
cost() { grep -E "^Ep\. .* Cost" "$1" | sed -E 's/.*Cost ([0-9.]+).*/\1/' | "$2" -n 1; }
check() {  # log, old ranks, new ranks
  grep -q "re-sharding a checkpoint of $2 rank(s) for $3" "$1" || fail "$1: no re-sharding line"
  grep -q "resumed from update 20" "$1" || fail "$1: did not resume from update 20"
  grep -q "$3 rank(s), strategy" "$1" || fail "$1: not a $3-rank run"
}
drop="distributed.drop_rate=0.9;distributed.drop_warmup=5"
run 2 async "$WORK/a" 20u "$WORK/a.log" "$drop"
run 1 async "$WORK/a" 30u "$WORK/a.resumed.log" "$drop"
check "$WORK/a.resumed.log" 2 1
grep -q "residuals summed" "$WORK/a.resumed.log" || fail "residuals not re-sharded"
[ "$(cat "$WORK/a/checkpoint.latest")" = checkpoint-30 ] || fail "async 2 -> 1: did not reach 30"
[ -s "$WORK/a/checkpoint-30/shard-0.bin" ] && [ ! -e "$WORK/a/checkpoint-30/shard-1.bin" ] ||
  fail "async 2 -> 1: checkpoint-30 should hold one shard"
# Resumed again on the same rank count (no re-sharding: the shards keep their versions). One
# rank: every push is on the shard's latest version, the first after the resume included (the
# workers pull the restored shards' versions before they push).
run 1 async "$WORK/a" 40u "$WORK/a.again.log" "$drop"
grep -q "staleness of shard 0" "$WORK/a.again.log" || fail "no staleness line after resuming"
grep "staleness of shard 0" "$WORK/a.again.log" | grep -qv " max=0 " &&
  fail "async resumed on 1 rank: stale pushes: $(grep staleness "$WORK/a.again.log" | tail -1)"

run 1 sync "$WORK/s" 20u "$WORK/s.log"
run 2 sync "$WORK/s" 30u "$WORK/s.resumed.log"
check "$WORK/s.resumed.log" 1 2
[ -s "$WORK/s/checkpoint-30/shard-1.bin" ] || fail "sync 1 -> 2: checkpoint-30 lacks shard 1"

# Training continued rather than restarted: the resumed runs' first costs are below the first
# runs' first costs (a fresh model starts far higher).
for x in a s; do
  before=$(cost "$WORK/$x.log" head) after=$(cost "$WORK/$x.resumed.log" head)
  awk -v a="$before" -v b="$after" 'BEGIN { exit !(b < a) }' ||
    fail "$x: resumed cost $after is not below the starting cost $before"
  echo "$x: first cost $before, first cost after re-sharding $after"
done
echo "reshard_test: passed"
