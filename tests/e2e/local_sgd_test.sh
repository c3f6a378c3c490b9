#!/usr/bin/env bash
# Local SGD (distributed.local_steps): two real ranks of sync local SGD stopped at a checkpoint in
# the middle of a round and resumed end with the unbroken run's bytes (parameters, outer state,
# inner optimizers); async local SGD on two ranks trains and resumes; the checkpoint resumes on
# one rank; virtual workers give the same bytes twice and push about 1/H of sync's bytes; a
# setting that does nothing is refused naming its field.
source "$(dirname "$0")/common.sh"
mpi() { timeout 300 mpirun --oversubscribe -np "$1" "$BIN/tern-train" \
          --config "$ROOT/configs/bible-small.pbtxt" "${@:2}"; }
cost() { grep -E "^Ep\. .* Cost" "$1" | sed -E 's/.*Cost ([0-9.]+).*/\1/' | "$2" -n 1; }
local_="$TINY;distributed.local_steps=4;distributed.outer_learning_rate=0.8;training.save_freq=6"

# Sync: 12 updates straight, and 6 (a round and a half: the checkpoint ends the round) + 6.
mpi 2 --model-dir "$WORK/straight" --after 12u --set "$local_" > "$WORK/straight.log" 2>&1 ||
  fail "sync local SGD: $(tail -3 "$WORK/straight.log")"
grep -q "2 rank(s), strategy sync, local SGD: 4 local steps, outer Nesterov lr 0.8" \
  "$WORK/straight.log" || fail "the log does not describe local SGD"
mpi 2 --model-dir "$WORK/resumed" --after 6u --set "$local_" > "$WORK/resumed.log" 2>&1 ||
  fail "sync local SGD, first half: $(tail -3 "$WORK/resumed.log")"
mpi 2 --model-dir "$WORK/resumed" --after 12u --set "$local_" >> "$WORK/resumed.log" 2>&1 ||
  fail "sync local SGD, resumed: $(tail -3 "$WORK/resumed.log")"
grep -q "resumed from update 6" "$WORK/resumed.log" || fail "sync local SGD did not resume"
for f in params.bin shard-0.bin shard-1.bin worker-0.bin worker-1.bin; do
  [ -s "$WORK/straight/checkpoint-12/$f" ] || fail "checkpoint-12/$f missing or empty"
  cmp "$WORK/straight/checkpoint-12/$f" "$WORK/resumed/checkpoint-12/$f" ||
    fail "sync local SGD: $f differs between the unbroken and the resumed run"
done
echo "sync local SGD: the resumed run's bytes equal the unbroken run's at update 12"
# A GPU run's arrangement on the CPU: the inner steps, the round's start and the outer step where
# the graph's parameters live, reduced over the device's collectives; the same bytes.
mpi 2 --model-dir "$WORK/dev" --host-copy --strategy-on-device --after 12u --set "$local_" \
  > "$WORK/dev.log" 2>&1 || fail "sync local SGD on device: $(tail -3 "$WORK/dev.log")"
grep -q "reduces, updates and gathers on cpu" "$WORK/dev.log" ||
  fail "sync local SGD on device: the strategy did not step the graph's parameters"
for f in params.bin shard-0.bin shard-1.bin worker-0.bin worker-1.bin; do
  cmp "$WORK/straight/checkpoint-12/$f" "$WORK/dev/checkpoint-12/$f" ||
    fail "sync local SGD on device: $f differs from the plain run's"
done

# Async, with the outer momentum delayed: trains (the cost falls), resumes, and its checkpoint
# continues on one rank.
async="$TINY;distributed.strategy=async;distributed.local_steps=5;distributed.outer_momentum_delay=2"
async+=";training.save_freq=20"
mpi 2 --model-dir "$WORK/async" --after 40u --set "$async" > "$WORK/async.log" 2>&1 ||
  fail "async local SGD: $(tail -3 "$WORK/async.log")"
first=$(cost "$WORK/async.log" head) last=$(cost "$WORK/async.log" tail)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "async local SGD: cost $first -> $last"
mpi 1 --model-dir "$WORK/async" --after 50u --set "$async" > "$WORK/async.one.log" 2>&1 ||
  fail "async local SGD on one rank: $(tail -3 "$WORK/async.one.log")"
grep -q "re-sharding a checkpoint of 2 rank(s) for 1" "$WORK/async.one.log" || fail "no re-sharding"
grep -q "inner optimizers taken from old worker" "$WORK/async.one.log" || fail "inner states lost"
grep -q "resumed from update 40" "$WORK/async.one.log" || fail "async local SGD did not resume"
echo "async local SGD: cost $first -> $last, resumed on one rank"

# Virtual workers: the same bytes twice, sync and async; a round pushes what a sync update does,
# once per H mini-batches. 20 updates are 6 rounds of 3 and one of 2, which the end of the run
# cuts short as a real run's Flush does.
virtual="$TINY;distributed.virtual_workers=4;distributed.virtual_seconds_per_token=1e-4"
virtual+=";distributed.virtual_link_mbps=100;distributed.virtual_link_delay_ms=5"
for s in sync async; do
  for i in 1 2; do
    train --model-dir "$WORK/v-$s-$i" --after 20u \
      --set "$virtual;distributed.strategy=$s;distributed.local_steps=3" > "$WORK/v-$s-$i.log" 2>&1 ||
      fail "virtual $s local SGD: $(tail -3 "$WORK/v-$s-$i.log")"
  done
  for f in params.bin shard-0.bin shard-3.bin worker-2.bin; do
    cmp -s "$WORK/v-$s-1/checkpoint-20/$f" "$WORK/v-$s-2/checkpoint-20/$f" ||
      fail "virtual $s local SGD: two runs differ in $f"
  done
done
train --model-dir "$WORK/v-plain" --after 20u --set "$virtual" > "$WORK/v-plain.log" 2>&1 ||
  fail "virtual sync: $(tail -3 "$WORK/v-plain.log")"
python3 - "$WORK/v-plain/metrics.jsonl" "$WORK/v-sync-1/metrics.jsonl" <<'PY' || fail "bytes"
import json, sys
def last(path):
    train = [json.loads(l) for l in open(path)]
    return [r for r in train if r["kind"] == "train" and r["rank"] == 0][-1]
plain, local = last(sys.argv[1]), last(sys.argv[2])
assert plain["update"] == local["update"] == 20, (plain["update"], local["update"])
ratio = plain["bytes_pushed"] / local["bytes_pushed"]
# The last record (update 20) comes before the run's end cuts the seventh round short: 6 rounds.
assert abs(ratio - 20 / 6) < 0.1, f"sync pushed {ratio:.2f}x local SGD's bytes, expected 20/6"
assert local["wall_s"] < plain["wall_s"], "local SGD's rounds took longer than sync's updates"
PY
echo "virtual local SGD: deterministic, 6 rounds' bytes for sync's 20 updates at H = 3"

# A setting that would do nothing is refused at start-up, naming its field.
train --model-dir "$WORK/bad" --after 5u --set "$TINY;distributed.outer_momentum=0.5" \
  > "$WORK/bad.log" 2>&1 && fail "outer_momentum without local_steps was accepted"
grep -q "distributed.outer_momentum" "$WORK/bad.log" || fail "no clear line: $(tail -1 "$WORK/bad.log")"
[ -e "$WORK/bad/checkpoint.latest" ] && fail "the refused run wrote a checkpoint"
echo "local_sgd_test: passed"
