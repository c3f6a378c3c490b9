#!/usr/bin/env bash
# kill -9 during training leaves the last checkpoint whole, and rerunning resumes from it.
source "$(dirname "$0")/common.sh"
dir="$WORK/killed"
# The program itself in the background (not a shell function), so that kill hits it.
"$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$dir" --after 1000u \
  --set "$TINY;training.save_freq=3;training.valid_freq=1000" > "$WORK/killed.log" 2>&1 &
pid=$!
saved() { [ -f "$dir/checkpoint.latest" ] && cat "$dir/checkpoint.latest" | sed 's/checkpoint-//'; }
for _ in $(seq 1 600); do  # until the third checkpoint, at most 60 s
  [ "$(saved || echo 0)" -ge 9 ] 2>/dev/null && break
  kill -0 $pid 2>/dev/null || fail "training ended early: $(tail -3 "$WORK/killed.log")"
  sleep 0.1
done
kill -9 $pid
wait $pid 2>/dev/null || true
latest=$(cat "$dir/checkpoint.latest")
step=${latest#checkpoint-}
for f in params.bin shard-0.bin manifest.txt config.pbtxt vocab.spm; do
  [ -s "$dir/$latest/$f" ] || fail "$latest/$f missing after kill -9"
done
target=$((step + 4))
train --model-dir "$dir" --after "${target}u" --set "$TINY;training.save_freq=3" > "$WORK/after.log" 2>&1 ||
  fail "resume after kill failed: $(tail -3 "$WORK/after.log")"
grep -q "resumed from update $step" "$WORK/after.log" || fail "did not resume from $latest"
[ "$(cat "$dir/checkpoint.latest")" = "checkpoint-$target" ] || fail "did not reach $target"
echo "kill_test: passed (killed after $latest, resumed to $target)"
