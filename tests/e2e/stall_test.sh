#!/usr/bin/env bash
# A rank that stalls without dying (kill -STOP) is named in the log within the stall time
# (distributed.stall_seconds, 4 s here; 45 s by default), for sync (the others wait in a
# collective) and async (they wait for its shard's replies); after kill -CONT the log says it is
# alive again and training goes on; the job is then stopped cleanly.
source "$(dirname "$0")/common.sh"
job=""
# A failing check must not leave the job running.
trap '[ -z "$job" ] || kill -TERM "$job" 2>/dev/null || true' EXIT
for s in sync async; do
  dir="$WORK/$s" log="$WORK/$s.log"
  mpirun --oversubscribe -np 2 "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" \
    --model-dir "$dir" --after 100000u \
    --set "$TINY;distributed.strategy=$s;distributed.stall_seconds=4;training.valid_freq=100000" \
    > "$log" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    grep -q "Up. 10 " "$log" && break
    sleep 0.1
  done
  grep -q "Up. 10 " "$log" || fail "$s: no training progress"
  victim=$(sed -nE 's/.*rank 1 of 2 is pid ([0-9]+).*/\1/p' "$log")
  [ -n "$victim" ] || fail "$s: rank 1's pid is not in the log"
  kill -STOP "$victim"
  stopped=$(date +%s)
  for _ in $(seq 1 300); do
    grep -q "rank 1 (pid $victim) has sent no heartbeat" "$log" && break
    sleep 0.1
  done
  took=$(( $(date +%s) - stopped ))
  kill -CONT "$victim"
  grep -q "rank 1 (pid $victim) has sent no heartbeat" "$log" || fail "$s: stalled rank not named"
  [ $took -le 15 ] || fail "$s: named after ${took}s"
  for _ in $(seq 1 150); do
    grep -q "rank 1 (pid $victim) is alive again" "$log" && break
    sleep 0.1
  done
  grep -q "rank 1 (pid $victim) is alive again" "$log" || fail "$s: no 'alive again' after CONT"
  updates=$(grep -c "Cost" "$log")
  sleep 2
  [ "$(grep -c "Cost" "$log")" -gt "$updates" ] || fail "$s: training did not go on after CONT"
  grep -q "rank 0 .*has sent no heartbeat\|rank 0 .*no progress" "$log" &&
    fail "$s: rank 0, which only waited, was named"
  kill -TERM $job
  set +e
  timeout 60 tail --pid=$job -f /dev/null
  rc=$?
  set -e
  [ $rc -eq 0 ] || { kill -KILL $job; fail "$s: the job did not end after TERM"; }
  job=""
  echo "$s: stalled rank named after ${took}s, alive again after CONT"
done
echo "stall_test: passed"
