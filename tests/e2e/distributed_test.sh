#!/usr/bin/env bash
# tern-train on 2 MPI ranks: sync and async training lower the cost and write one checkpoint
# holding both ranks' shards; a resumed 2-rank job continues from it; a rank killed with -9
# brings the whole job down within a bounded time and leaves the last checkpoint whole.
source "$(dirname "$0")/common.sh"
mpi() { timeout 300 mpirun --oversubscribe -np 2 "$BIN/tern-train" \
          --config "$ROOT/configs/bible-small.pbtxt" "$@"; }
cost() { grep -E "^Ep\. .* Cost" "$1" | sed -E 's/.*Cost ([0-9.]+).*/\1/' | "$2" -n 1; }
for s in sync async; do
  dir="$WORK/$s"
  mpi --model-dir "$dir" --after 30u --set "$TINY;distributed.strategy=$s;training.save_freq=15" \
    > "$WORK/$s.log" 2>&1 || fail "$s: $(tail -3 "$WORK/$s.log")"
  grep -q "2 rank(s), strategy $s" "$WORK/$s.log" || fail "$s: not a 2-rank run"
  grep -q "per rank" "$WORK/$s.log" || fail "$s: no per-rank words/s"
  first=$(cost "$WORK/$s.log" head) last=$(cost "$WORK/$s.log" tail)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "$s: cost $first -> $last"
  for f in shard-0.bin shard-1.bin worker-0.bin worker-1.bin params.bin; do
    [ -s "$dir/checkpoint-30/$f" ] || [ "$f" = worker-0.bin ] || [ "$f" = worker-1.bin ] ||
      fail "$s: checkpoint-30/$f missing"
  done
  mpi --model-dir "$dir" --after 40u --set "$TINY;distributed.strategy=$s;training.save_freq=15" \
    > "$WORK/$s.resumed.log" 2>&1 || fail "$s resume: $(tail -3 "$WORK/$s.resumed.log")"
  grep -q "resumed from update 30" "$WORK/$s.resumed.log" || fail "$s: did not resume"
  [ "$(cat "$dir/checkpoint.latest")" = checkpoint-40 ] || fail "$s: did not reach 40"
  echo "$s: cost $first -> $last, resumed to 40"
done

# A multi-GPU sync run's arrangement on the CPU: SyncSgd reduces, updates and gathers the
# graph's parameters where they live (over NCCL on GPUs), the host copy only comes down for
# checkpoints. With tau 2 and clipping it must end with the plain run's bytes, through a resume.
set_sync="$TINY;distributed.strategy=sync;distributed.tau=2;optim.clip_norm=0.5;training.save_freq=6"
mpi --model-dir "$WORK/sync-plain" --after 12u --set "$set_sync" > "$WORK/sync-plain.log" 2>&1 ||
  fail "sync plain: $(tail -3 "$WORK/sync-plain.log")"
mpi --model-dir "$WORK/sync-dev" --host-copy --strategy-on-device --after 6u --set "$set_sync" \
  > "$WORK/sync-dev.log" 2>&1 || fail "sync on device: $(tail -3 "$WORK/sync-dev.log")"
grep -q "sync SGD reduces, updates and gathers on cpu" "$WORK/sync-dev.log" ||
  fail "sync on device: the strategy did not step the graph's parameters"
mpi --model-dir "$WORK/sync-dev" --host-copy --strategy-on-device --after 12u --set "$set_sync" \
  >> "$WORK/sync-dev.log" 2>&1 || fail "sync on device, resumed: $(tail -3 "$WORK/sync-dev.log")"
for f in params.bin shard-0.bin shard-1.bin; do
  cmp "$WORK/sync-plain/checkpoint-12/$f" "$WORK/sync-dev/checkpoint-12/$f" ||
    fail "sync on device: $f differs from the plain run's"
done
echo "sync on device: the plain run's bytes at update 12, through a resume"

# A rank dies: the job ends (non-zero) within a bounded time; the last checkpoint stays whole.
dir="$WORK/killed"
mpirun --oversubscribe -np 2 "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" \
  --model-dir "$dir" --after 100000u \
  --set "$TINY;distributed.strategy=async;training.save_freq=5;training.valid_freq=100000" \
  > "$WORK/killed.log" 2>&1 &
job=$!
# Should a check below fail before the kill, the 100000-update job must not outlive the test.
trap 'pkill -KILL -f -- "--model-dir $dir" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  [ -f "$dir/checkpoint.latest" ] && break
  sleep 0.1
done
[ -f "$dir/checkpoint.latest" ] || fail "no checkpoint before the kill"
victim=$(pgrep -f -- "--model-dir $dir" | while read -r p; do
  [ "$(cat /proc/"$p"/comm)" = tern-train ] && echo "$p"; done | tail -n 1)
[ -n "$victim" ] || fail "no rank process found"
kill -9 "$victim"
start=$(date +%s)
set +e
wait $job
rc=$?
set -e
trap - EXIT
took=$(( $(date +%s) - start ))
[ $rc -ne 0 ] || fail "the job exited 0 after a rank was killed"
[ $took -le 60 ] || fail "the job took ${took}s to come down"
latest=$(cat "$dir/checkpoint.latest")
[ -s "$dir/$latest/shard-1.bin" ] && [ -s "$dir/$latest/params.bin" ] || fail "$latest not whole"
echo "kill: job ended with $rc after ${took}s; $latest whole"
echo "distributed_test: passed"
