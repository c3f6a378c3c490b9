#!/usr/bin/env bash
# A stop signal ends training early with a whole checkpoint, exit status 75, and rerunning the
# same command resumes from it: SIGTERM to one rank; SIGUSR1 to mpirun (which forwards it to
# every rank) in a sync run; SIGUSR1 to one follower of an async run, which asks rank 0 to stop.
# A second run into a directory in use is refused.
source "$(dirname "$0")/common.sh"
job=""
trap '[ -z "$job" ] || kill -KILL "$job" 2>/dev/null || true' EXIT
# run NAME LAUNCH... : trains in the background (the program or mpirun itself, so that a signal
# reaches it) until the log shows update 10.
run() {
  local name=$1
  shift
  "$@" "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/$name" \
    --after 100000u --set "$TINY;training.valid_freq=100000;$settings" > "$WORK/$name.log" 2>&1 &
  job=$!
  for _ in $(seq 1 600); do
    grep -q "Up. 10 " "$WORK/$name.log" && return
    kill -0 "$job" 2>/dev/null || fail "$name: training ended early: $(tail -3 "$WORK/$name.log")"
    sleep 0.1
  done
  fail "$name: no training progress"
}
# stopped NAME SIGNAL WHO: the job ends with 75, having said so and saved a whole checkpoint
# (its update in $step).
stopped() {
  local name=$1 log="$WORK/$1.log" rc=0
  timeout 60 tail --pid="$job" -f /dev/null || fail "$name: still running 60 s after $2"
  wait "$job" || rc=$?
  job=""
  [ $rc -eq 75 ] || fail "$name: exit status $rc after $2, expected 75: $(tail -3 "$log")"
  local line
  line=$(grep -E "\[training\] $2$3: saving checkpoint-[0-9]+ and stopping" "$log") ||
    fail "$name: no line saying $2$3 stopped it"
  step=$(echo "$line" | sed -E 's/.*checkpoint-([0-9]+) and stopping.*/\1/')
  [ "$(cat "$WORK/$name/checkpoint.latest")" = "checkpoint-$step" ] ||
    fail "$name: checkpoint.latest is not checkpoint-$step"
  for f in params.bin shard-0.bin manifest.txt; do
    [ -s "$WORK/$name/checkpoint-$step/$f" ] || fail "$name: checkpoint-$step/$f missing"
  done
  grep -q "stopped early after $step updates" "$log" || fail "$name: no 'stopped early' line"
  if grep -q "valid ce-mean-words" "$log"; then fail "$name: validated after the signal"; fi
}
# resumes NAME STEP LAUNCH...: the same command resumes from STEP and trains to STEP + 5.
resumes() {
  local name=$1 step=$2 target=$(($2 + 5))
  shift 2
  "$@" "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/$name" \
    --after "${target}u" --set "$TINY;training.valid_freq=100000;$settings" \
    > "$WORK/$name.resume.log" 2>&1 || fail "$name: resume failed: $(tail -3 "$WORK/$name.resume.log")"
  grep -q "resumed from update $step " "$WORK/$name.resume.log" || fail "$name: did not resume from $step"
  [ "$(cat "$WORK/$name/checkpoint.latest")" = "checkpoint-$target" ] || fail "$name: did not reach $target"
  echo "$name: stopped at update $step, resumed to $target"
}
mpi=(mpirun --oversubscribe -np 2)

settings=""
run one
# A second run into the directory while the first trains: refused at once naming the first, which
# goes on (rank 0 holds model_dir/.lock).
rc=0
"$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/one" --after 5u \
  --set "$TINY" > "$WORK/one.second.log" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "a second run into a directory in use was accepted"
grep -q "$WORK/one is in use by pid $job on .*: stop it, or train into another --model-dir" \
  "$WORK/one.second.log" || fail "the second run's error: $(cat "$WORK/one.second.log")"
kill -0 "$job" 2>/dev/null || fail "the first run ended when the second was refused"
kill -TERM "$job"
stopped one SIGTERM ""
resumes one "$step"

settings="distributed.strategy=sync"
run sync "${mpi[@]}"
kill -USR1 "$job"
stopped sync SIGUSR1 " on rank 0"
resumes sync "$step" "${mpi[@]}"

settings="distributed.strategy=async"
run async "${mpi[@]}"
follower=$(sed -nE 's/.*rank 1 of 2 is pid ([0-9]+).*/\1/p' "$WORK/async.log")
[ -n "$follower" ] || fail "async: rank 1's pid is not in the log"
kill -USR1 "$follower"
stopped async SIGUSR1 " on rank 1"
resumes async "$step" "${mpi[@]}"
echo "signal_test: passed"
