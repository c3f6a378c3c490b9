#!/usr/bin/env bash
# The commands README.md's "by hand" block and docs/serving.md's first example tell a newcomer to
# run, run as written (documented_commands.py rewrites only the budget, the tiny model and the
# port) from a checkout-shaped folder: build/ is this build, corpus/bible a slice of the corpus.
source "$(dirname "$0")/common.sh"
mkdir -p "$WORK/root/corpus/bible"
for f in train.es train.en dev.es dev.en; do cp "$WORK/data/$f" "$WORK/root/corpus/bible/$f"; done
head -n 8 "$CORPUS/test.es" > "$WORK/root/corpus/bible/test.es"
head -n 8 "$CORPUS/test.en" > "$WORK/root/corpus/bible/test.en"
ln -s "$(dirname "$BIN")" "$WORK/root/build"
ln -s "$ROOT/configs" "$WORK/root/configs"
python3 "$ROOT/tests/e2e/documented_commands.py" "$ROOT" > "$WORK/commands.sh" ||
  fail "the documented blocks could not be read"

PORT="" SERVE_PID=""
wait_ready() {
  for _ in $(seq 600); do
    PORT=$(sed -n 's#^tern-serve: listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$WORK/serve.out")
    [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/ready" > /dev/null && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$WORK/serve.log"; fail "tern-serve exited"; }
    sleep 0.1
  done
  fail "tern-serve not ready in 60 s"
}
stop_server() {
  [ -n "$SERVE_PID" ] || return 0
  kill -TERM "$SERVE_PID"
  wait "$SERVE_PID" || fail "tern-serve did not stop cleanly"
  SERVE_PID=""
}
trap '[ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null; true' EXIT
cd "$WORK/root"
# shellcheck source=/dev/null
source "$WORK/commands.sh" > "$WORK/commands.log" 2>&1 ||
  { tail -n 30 "$WORK/commands.log"; fail "a documented command failed (log: $WORK/commands.log)"; }
[ "$(grep -c '"translations"' "$WORK/curl.out")" = 2 ] || fail "not two translations from curl"
grep -q "BLEU" "$WORK/commands.log" || fail "tern-score printed no BLEU"
echo "documented commands: ok"
