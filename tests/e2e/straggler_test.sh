#!/usr/bin/env bash
# Async SGD on 2 ranks where rank 1's core is shared with two busy loops (a straggler): rank 0
# must not wait for it. Rank 0 trains its budget of updates, orders checkpoints and the stop,
# and rank 1 ends well behind (under lockstep log points both would end on the same update).
# The checkpoints are whole and the job resumes from the last one. Then the documented
# straggler setting, distributed.debug_slowdown=3, slows rank 1 to a third without the busy
# loops. Needs 2 cores and taskset.
source "$(dirname "$0")/common.sh"
if [ "$(nproc)" -lt 2 ] || ! command -v taskset > /dev/null; then
  echo "straggler_test: skipped (needs 2 cores and taskset)"
  exit 0
fi
hogs=()
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
for _ in 1 2; do
  taskset -c 1 sh -c 'while :; do :; done' &
  hogs+=($!)
done
args=(--config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/m")
set_="$TINY;distributed.strategy=async;training.save_freq=20;training.valid_freq=30"
run() {
  timeout 300 mpirun --oversubscribe --bind-to none \
    -np 1 taskset -c 0 "$BIN/tern-train" "${args[@]}" --after "$1" --set "$set_" : \
    -np 1 taskset -c 1 "$BIN/tern-train" "${args[@]}" --after "$1" --set "$set_"
}
run 60u > "$WORK/train.log" 2>&1 || fail "training: $(tail -3 "$WORK/train.log")"
line=$(grep "finished after" "$WORK/train.log") || fail "no 'finished' line"
[[ $line =~ after\ 60\ updates\ of\ rank\ 0\ \(rank\ 1:\ ([0-9]+)\) ]] ||
  fail "unexpected final line: $line"
behind=${BASH_REMATCH[1]}
[ "$behind" -ge 1 ] && [ "$behind" -le 45 ] ||
  fail "rank 1 (sharing its core with 2 busy loops) ended at update $behind of rank 0's 60:" \
    "rank 0 waited for it"
grep -q "valid ce-mean-words" "$WORK/train.log" || fail "rank 0 did not validate"
for f in params.bin shard-0.bin shard-1.bin; do
  [ -s "$WORK/m/checkpoint-60/$f" ] || fail "checkpoint-60/$f missing"
done
grep -q "saved checkpoint-40" "$WORK/train.log" || fail "no checkpoint at update 40"
grep "Up. 60 : Sen." "$WORK/train.log" | grep -qE "per rank [0-9]+ [1-9]" ||
  fail "rank 0's last line lacks rank 1's words/s"
run 70u > "$WORK/resumed.log" 2>&1 || fail "resume: $(tail -3 "$WORK/resumed.log")"
grep -q "resumed from update 60" "$WORK/resumed.log" || fail "did not resume from update 60"
[ "$(cat "$WORK/m/checkpoint.latest")" = checkpoint-70 ] || fail "did not reach 70"
kill "${hogs[@]}" 2>/dev/null || true
hogs=()
args=(--config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/slowed")
set_="$TINY;distributed.strategy=async;distributed.debug_slowdown=3"
run 60u > "$WORK/slowed.log" 2>&1 || fail "debug_slowdown: $(tail -3 "$WORK/slowed.log")"
line=$(grep "finished after" "$WORK/slowed.log") || fail "no 'finished' line"
[[ $line =~ after\ 60\ updates\ of\ rank\ 0\ \(rank\ 1:\ ([0-9]+)\) ]] ||
  fail "unexpected final line: $line"
slowed=${BASH_REMATCH[1]}
[ "$slowed" -le 36 ] || fail "rank 1 under debug_slowdown=3 ended at update $slowed of rank 0's 60"
echo "straggler_test: rank 1 ended at update $behind while rank 0 did 60; resumed to 70;" \
  "slowed 3x it ended at $slowed"
