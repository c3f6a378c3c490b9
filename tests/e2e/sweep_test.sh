#!/usr/bin/env bash
# scripts/tern-sweep end to end on the tiny model: a sweep of 2 cells x 2 seeds (2 real ranks
# and 2 virtual workers) writes its results, summary and five plots, and a report of some cells
# elsewhere; killed with -9 half way and run again, it redoes no finished run and ends a run's
# leftover process; a run stops once it reaches the target when asked; bad sweep files (an
# unknown field, an empty axis, a value the config refuses) fail at once, naming the field,
# before anything runs; a convergence sweep stops a run that no longer improves and scores its best
# model on the test set.
source "$(dirname "$0")/common.sh"
SWEEP="$ROOT/scripts/tern-sweep"
sweep() { "$SWEEP" "$@" --bin "$BIN"; }
cat > "$WORK/tiny.pbtxt" <<PB
name: "tiny"
base_config: "configs/bible-small.pbtxt"
set: "$TINY;training.valid_freq=5;training.save_freq=10"
axis {
  name: "method"
  variant { name: "sync" set: "distributed.strategy=sync" }
  variant {
    name: "async-virtual"
    set: "distributed.strategy=async;distributed.virtual_seconds_per_token=1e-4"
    placement { hosts: "virtual" }
  }
}
seeds: [1, 2]
placement { ranks: 2 }
budget: "20u"
target_dev_ce: 6.2
reference: "sync"
PB

# Bad files first: each fails at once with one line naming the field, and runs nothing.
bad() {  # bad NAME SED-EXPRESSION EXPECTED-TEXT
  sed "$2" "$WORK/tiny.pbtxt" > "$WORK/$1.pbtxt"
  if sweep "$WORK/$1.pbtxt" --out "$WORK/$1" > "$WORK/$1.log" 2>&1; then fail "$1: accepted"; fi
  grep -q -- "$3" "$WORK/$1.log" || fail "$1: the error does not name '$3': $(cat "$WORK/$1.log")"
  [ "$(wc -l < "$WORK/$1.log")" -eq 1 ] || fail "$1: more than one line: $(cat "$WORK/$1.log")"
  [ ! -d "$WORK/$1/runs" ] || fail "$1: ran something"
}
bad unknown 's/^budget:/budgett:/' 'no field named "budgett"'
bad empty_axis 's/^axis {/axis { field: "distributed.tau" }\naxis {/' 'distributed.tau has no values'
bad refused 's/distributed.strategy=sync/distributed.strategy=sync;distributed.drop_rate=2/' \
  'distributed.drop_rate must be in \[0, 1)'
bad unknown_config 's/distributed.strategy=sync/distributed.stratgy=sync/' \
  "unknown config field 'distributed.stratgy'"

# Bad flags: one line each naming the flag, and nothing runs.
for case in "--jobs 0|--jobs" "--report --target abc|--target" "--target 5.0|--target" \
  "--report --target -1|--target" "--report --reference nope|--reference"; do
  flags=${case%|*}
  # shellcheck disable=SC2086
  if sweep "$WORK/tiny.pbtxt" --out "$WORK/flags" $flags > "$WORK/flags.log" 2>&1; then
    fail "$flags: accepted"
  fi
  [ "$(wc -l < "$WORK/flags.log")" -eq 1 ] && grep -q -- "${case#*|}" "$WORK/flags.log" ||
    fail "$flags: $(cat "$WORK/flags.log")"
  [ ! -d "$WORK/flags/runs" ] || fail "$flags: ran something"
done

# Every shipped sweep plans: its fields, cells and every run's config pass tern-train's checks.
# They name the bundled corpus (corpus/bible, which a checkout builds with
# scripts/prepare-corpus.sh; a sweep's test books must exist when it plans): they plan against a
# root whose configs are the checkout's and whose corpus is the test's.
PLAN_ROOT="$WORK/root"
mkdir -p "$PLAN_ROOT/corpus"
ln -s "$ROOT/configs" "$PLAN_ROOT/configs"
ln -s "$CORPUS" "$PLAN_ROOT/corpus/bible"
for f in "$ROOT"/sweeps/*.pbtxt; do
  "$BIN/tern-sweep-plan" --sweep "$f" --root "$PLAN_ROOT" > /dev/null 2> "$WORK/shipped.log" ||
    fail "$(basename "$f"): $(cat "$WORK/shipped.log")"
done
# Every committed record (sweeps/records/NAME) holds finished runs of sweeps/NAME.pbtxt as it
# plans them now: a sweep file changed under its record would report runs it no longer plans.
for rec_dir in "$ROOT"/sweeps/records/*/; do
  [ -d "$rec_dir" ] || continue
  name=$(basename "$rec_dir")
  "$BIN/tern-sweep-plan" --sweep "$ROOT/sweeps/$name.pbtxt" --root "$PLAN_ROOT" > "$WORK/plan-$name.jsonl" ||
    fail "record $name: no sweep file sweeps/$name.pbtxt that plans"
  python3 - "$ROOT" "$rec_dir" "$WORK/plan-$name.jsonl" <<'PY' || fail "record $name"
import glob, importlib.machinery, importlib.util, json, os, sys
root, rec, plan = sys.argv[1:]
loader = importlib.machinery.SourceFileLoader("tern_sweep", os.path.join(root, "scripts", "tern-sweep"))
spec = importlib.util.spec_from_loader("tern_sweep", loader)
ts = importlib.util.module_from_spec(spec)
loader.exec_module(ts)
runs = [json.loads(l) for l in open(plan)][1:]
planned = {os.path.normpath(ts.run_dir(rec, r)): r for r in runs}
def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, dict)):
        for v in (value.values() if isinstance(value, dict) else value):
            yield from strings(v)
for path in glob.glob(os.path.join(rec, "runs", "*", "seed-*", "run.json")):
    record = json.load(open(path))
    run = planned.get(os.path.dirname(os.path.normpath(path)))
    if run is None or not ts.planned_alike(run, record) or record.get("status") != "done":
        sys.exit(f"{path}: not a finished run of the sweep as it is planned now")
    # A record names no machine's layout: its paths are relative to the repository root.
    absolute = [s for s in strings(record) if s.startswith("/")]
    if absolute or not os.path.isfile(os.path.join(root, record["config"])):
        sys.exit(f"{path}: not relative to the repository root: {absolute or record['config']}")
    if not os.path.getsize(os.path.join(os.path.dirname(path), "model", "metrics.jsonl")):
        sys.exit(f"{path}: its metrics.jsonl is empty")
PY
done

# --cells on a grid of two axes: a cell's name holds a ',' (its axes' labels), so the flag takes
# one label per axis, or cells separated by ';'.
sed -e 's/^seeds:/axis { field: "distributed.tau" values: ["1", "2"] }\nseeds:/' \
  -e 's/^reference: "sync"/reference: "sync,distributed.tau=1"/' "$WORK/tiny.pbtxt" \
  > "$WORK/grid.pbtxt"
plan_cells() {
  "$BIN/tern-sweep-plan" --sweep "$WORK/grid.pbtxt" --root "$ROOT" --cells "$1" |
    sed -n 's/.*"cell":"\([^"]*\)".*/\1/p' | uniq | paste -sd'|'
}
want='sync,distributed.tau=2|async-virtual,distributed.tau=1'
for flag in 'sync,distributed.tau=2,async-virtual,distributed.tau=1' \
  'sync,distributed.tau=2;async-virtual,distributed.tau=1'; do
  got=$(plan_cells "$flag") || fail "--cells '$flag' refused"
  [ "$got" = "$want" ] || fail "--cells '$flag' chose '$got', not '$want'"
done
if "$BIN/tern-sweep-plan" --sweep "$WORK/grid.pbtxt" --root "$ROOT" --cells 'sync,distributed.tau=2,sync' \
  > "$WORK/odd.log" 2>&1; then fail "--cells with a label short accepted"; fi
grep -q -- '--cells: 3 labels for 2 axes' "$WORK/odd.log" || fail "odd --cells: $(cat "$WORK/odd.log")"

# The sweep, killed with -9 once two runs are done, then run again to the end.
out=$WORK/out
"$SWEEP" "$WORK/tiny.pbtxt" --out "$out" --bin "$BIN" > "$WORK/first.log" 2>&1 &
pid=$!  # the script's own pid, not a subshell's
for _ in $(seq 600); do
  [ "$(ls "$out"/runs/*/seed-*/run.json 2>/dev/null | wc -l)" -ge 2 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
kill -9 "$pid" 2>/dev/null || fail "the sweep ended before it could be killed: $(tail -3 "$WORK/first.log")"
wait "$pid" 2>/dev/null || true
done_before=$(ls "$out"/runs/*/seed-*/run.json | sort)
[ "$(echo "$done_before" | wc -l)" -ge 2 ] || fail "no two runs done before the kill"
declare -A started
for f in $done_before; do started[$f]=$(grep '"started"' "$f"); done
sweep "$WORK/tiny.pbtxt" --out "$out" > "$WORK/second.log" 2>&1 ||
  fail "the resumed sweep: $(tail -5 "$WORK/second.log")"
grep -q "$(echo "$done_before" | wc -l) of 4 runs already done" "$WORK/second.log" ||
  fail "the resumed sweep did not skip the finished runs: $(head -3 "$WORK/second.log")"
for f in $done_before; do
  [ "$(grep '"started"' "$f")" = "${started[$f]}" ] || fail "$f was run again"
done
[ "$(ls "$out"/runs/*/seed-*/run.json | wc -l)" -eq 4 ] || fail "not every run done"
grep -q "failed" "$WORK/second.log" && fail "a run failed after the resume: $(cat "$WORK/second.log")"
pgrep -f "tern-train.*$out/" > /dev/null && fail "processes of the sweep outlived it"
grep -q "\[tern-sweep\] .* of 4 runs done" "$WORK/second.log" || fail "no progress line"

# A run's tern-train left by a sweep killed before it recorded the run's pid (or started by
# hand into its directory): the sweep run again ends it rather than failing on its lock.
left_dir=$WORK/left/runs/async-virtual/seed-1/model
"$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$left_dir" \
  --after 100000u --set "$TINY;training.valid_freq=100000" > "$WORK/leftover.log" 2>&1 &
leftover=$!
for _ in $(seq 600); do
  grep -q "Up. 5 " "$WORK/leftover.log" && break
  kill -0 "$leftover" 2>/dev/null || fail "the leftover ended: $(tail -3 "$WORK/leftover.log")"
  sleep 0.1
done
sweep "$WORK/tiny.pbtxt" --out "$WORK/left" --cells async-virtual > "$WORK/left.log" 2>&1 ||
  fail "a sweep beside a leftover run: $(tail -3 "$WORK/left.log")"
grep -q "ended 1 leftover process(es) of the run in $WORK/left/runs/async-virtual/seed-1" \
  "$WORK/left.log" || fail "the leftover was not ended: $(cat "$WORK/left.log")"
wait "$leftover" 2>/dev/null || true
[ "$(ls "$WORK"/left/runs/*/seed-*/run.json | wc -l)" -eq 2 ] || fail "beside a leftover: not every run done"

# --record: a finished sweep given it late records every run (run.json and metrics, no
# checkpoint); a sweep into a new --out with that record runs nothing and reports the same; a
# recorded run planned otherwise than now is not taken but run again; --report --out RECORD works.
rec=$WORK/rec
sweep "$WORK/tiny.pbtxt" --out "$out" --record "$rec" > "$WORK/rec1.log" 2>&1 ||
  fail "--record on a finished sweep: $(tail -3 "$WORK/rec1.log")"
[ "$(ls "$rec"/runs/*/seed-*/run.json "$rec"/runs/*/seed-*/model/metrics.jsonl | wc -l)" -eq 8 ] ||
  fail "the record lacks runs: $(find "$rec" -type f)"
[ -z "$(find "$rec" -type f ! -name run.json ! -name metrics.jsonl)" ] ||
  fail "the record holds more than run.json and metrics: $(find "$rec" -type f)"
sweep "$WORK/tiny.pbtxt" --out "$WORK/again" --record "$rec" > "$WORK/rec2.log" 2>&1 ||
  fail "a sweep from the record: $(tail -3 "$WORK/rec2.log")"
grep -q "took 4 finished run(s) from the record" "$WORK/rec2.log" &&
  grep -q "4 of 4 runs already done" "$WORK/rec2.log" || fail "from the record: $(cat "$WORK/rec2.log")"
[ ! -e "$WORK/again/runs/sync/seed-1/train.log" ] || fail "a recorded run was run again"
rows() { grep '^| ' "$1/summary.md"; }
[ "$(rows "$WORK/again")" = "$(rows "$out")" ] ||
  fail "the summary from the record differs: $(diff <(rows "$out") <(rows "$WORK/again"))"
sed -i 's/"after": "20u"/"after": "19u"/' "$rec/runs/sync/seed-2/run.json"
sweep "$WORK/tiny.pbtxt" --out "$WORK/stale" --record "$rec" > "$WORK/rec3.log" 2>&1 ||
  fail "a sweep from a stale record: $(tail -3 "$WORK/rec3.log")"
grep -q "took 3 finished run(s)" "$WORK/rec3.log" &&
  grep -q "1 run(s) planned otherwise than now (not taken; they run again): sync/seed-2" \
    "$WORK/rec3.log" || fail "a stale record: $(cat "$WORK/rec3.log")"
[ -s "$WORK/stale/runs/sync/seed-2/train.log" ] || fail "the stale run did not run again"
grep -q '"after": "20u"' "$rec/runs/sync/seed-2/run.json" || fail "the rerun was not recorded"
"$SWEEP" "$WORK/tiny.pbtxt" --bin "$BIN" --out "$rec" --report --report-dir "$WORK/recrep" \
  > "$WORK/rec4.log" 2>&1 || fail "--report from the record: $(tail -3 "$WORK/rec4.log")"
[ "$(rows "$WORK/recrep")" = "$(rows "$WORK/stale")" ] || fail "the report of the record differs"
# scripts/sweep_runs.py: a line per run with its final dev CE as the run's last validation has it.
"$ROOT/scripts/sweep_runs.py" 5 6.2 "$rec"/runs/*/seed-*/model/metrics.jsonl > "$WORK/runs.txt" ||
  fail "sweep_runs.py: $(cat "$WORK/runs.txt")"
[ "$(wc -l < "$WORK/runs.txt")" -eq 4 ] || fail "sweep_runs.py: not a line per run: $(cat "$WORK/runs.txt")"
last=$(grep '"kind":"valid"' "$rec/runs/sync/seed-1/model/metrics.jsonl" | tail -1 |
  python3 -c 'import json,sys; print(round(json.load(sys.stdin)["dev_ce"], 3))')
grep -q "^sync/seed-1 $last " "$WORK/runs.txt" || fail "sweep_runs.py: sync/seed-1 is not at $last: $(cat "$WORK/runs.txt")"
if sweep "$WORK/tiny.pbtxt" --out "$rec" --record "$rec" > "$WORK/rec5.log" 2>&1; then
  fail "--record = --out accepted"
fi

# What it wrote.
figures="devce_time.png devce_updates.png devce_words.png devce_steps.png bleu_time.png"
for f in results.jsonl summary.md $figures; do
  [ -s "$out/$f" ] || fail "$f missing"
done
for f in "$out"/*.png; do
  [ "$(head -c 8 "$f" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] || fail "$f is not a PNG"
done
python3 - "$out" <<'PY' || fail "results or summary"
import json, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(f"{out}/results.jsonl")]
runs = {(r["cell"], r["seed"]) for r in recs}
assert runs == {(c, s) for c in ("sync", "async-virtual") for s in (1, 2)}, runs
assert all("axes" in r and r["axes"]["method"] == r["cell"] for r in recs)
valid = [r for r in recs if r["kind"] == "valid"]
assert {r["hosts"] for r in valid} == {"local", "virtual"}
summary = open(f"{out}/summary.md").read()
for cell in ("`sync`", "`async-virtual`"):
    row = [l for l in summary.splitlines() if l.startswith(f"| {cell} |")]
    # The main table, the equal-updates table and the staleness table.
    assert len(row) == 3, (cell, summary)
    assert "| 2/2 |" in row[0], row[0]
stale = [l for l in summary.splitlines() if l.startswith("| `async-virtual` |")][2]
assert float(stale.split("|")[2].split()[0]) > 0, stale  # virtual async workers are stale
assert "1.00x" in [l for l in summary.splitlines() if l.startswith("| `sync` |")][0]
# Steps to the target: one optimizer step an update for sync, one a worker's update for async.
def to_target(cell):
    row = [l for l in summary.splitlines() if l.startswith(f"| `{cell}` |")][0].split("|")
    return float(row[6].split()[0]), float(row[7].split()[0])  # updates, steps
updates, steps = to_target("sync")
assert steps == updates, (updates, steps)
updates, steps = to_target("async-virtual")
assert abs(steps - 2 * updates) <= 1, (updates, steps)  # 2 workers
PY

# A crossing at a run's first validation is only an upper bound, and says so.
python3 - "$ROOT/scripts" <<'PY' || fail "sweep_report's crossing"
import sys
sys.path.insert(0, sys.argv[1])
from sweep_report import interpolate_crossing as crossing
v = lambda t, u, ce: {"wall_s": t, "update": u, "target_words": 10 * u, "dev_ce": ce}
assert crossing([v(10, 100, 5.9), v(20, 200, 5.5)], 6.0) == (10, 100, 1000, None, True)
assert crossing([v(10, 100, 6.5), v(20, 200, 5.5)], 6.0) == (15, 150, 1500, None, False)
assert crossing([v(10, 100, 6.2)], 6.0) is None
PY

# The report of some cells, elsewhere: the sweep's own files stay as they were.
before=$(md5sum "$out/summary.md" "$out/plan.jsonl")
sweep "$WORK/tiny.pbtxt" --out "$out" --cells sync --report --report-dir "$WORK/part" \
  > "$WORK/part.log" 2>&1 || fail "--report-dir: $(tail -3 "$WORK/part.log")"
for f in results.jsonl summary.md $figures; do
  [ -s "$WORK/part/$f" ] || fail "--report-dir: $f missing"
done
grep -q '^| `async-virtual` |' "$WORK/part/summary.md" && fail "--report-dir: a cell not chosen"
# ... timed to a target and against a reference of its own (a placement's report).
sweep "$WORK/tiny.pbtxt" --out "$out" --cells async-virtual --report --report-dir "$WORK/part2" \
  --target 6.4 --reference async-virtual > "$WORK/part2.log" 2>&1 || fail "--target: $(tail -3 "$WORK/part2.log")"
grep -q '^- target dev cross-entropy 6.4; speed-up against `async-virtual`' "$WORK/part2/summary.md" ||
  fail "--target, --reference: $(head -5 "$WORK/part2/summary.md")"
if sweep "$WORK/tiny.pbtxt" --out "$out" --cells async-virtual --report --report-dir "$WORK/part3" \
  --reference sync > "$WORK/part3.log" 2>&1; then fail "a --reference not reported accepted"; fi
grep -q "^tern-sweep: error: --reference 'sync' is not a cell of the report" "$WORK/part3.log" ||
  fail "--reference: $(cat "$WORK/part3.log")"
[ "$(md5sum "$out/summary.md" "$out/plan.jsonl")" = "$before" ] || fail "--report-dir wrote into --out"

# A run stops once a validation reaches the target (stop_at_target): well before its budget.
sed -e 's/^budget: "20u"/budget: "400u"/' -e 's/^seeds: \[1, 2\]/seeds: [3]\nstop_at_target: true/' \
  "$WORK/tiny.pbtxt" > "$WORK/target.pbtxt"
sweep "$WORK/target.pbtxt" --out "$WORK/target" --cells async-virtual > "$WORK/target.log" 2>&1 ||
  fail "stop_at_target: $(tail -3 "$WORK/target.log")"
python3 - "$WORK/target/runs/async-virtual/seed-3" "$ROOT" <<'PY' || fail "stop_at_target did not stop"
import json, os, sys
d, root = sys.argv[1:]
run = json.load(open(f"{d}/run.json"))
assert run["status"] == "done" and run["stopped_at_target"], run
# run.json's paths are relative to the repository root, where the command ran.
assert not any(a.startswith("/") for a in [run["config"]] + run["command"]), run["command"]
assert os.path.isfile(os.path.join(root, run["config"])), run["config"]
model_dir = run["command"][run["command"].index("--model-dir") + 1]
assert os.path.isdir(os.path.join(root, model_dir)), model_dir
valid = [json.loads(l) for l in open(f"{d}/model/metrics.jsonl") if '"valid"' in l]
assert valid[-1]["update"] < 400, valid[-1]
PY
# --jobs 2: runs of one real rank (one thread) run side by side; runs of several ranks alone.
sed -e 's/^placement { ranks: 2 }/placement { ranks: 1 }/' -e 's/^seeds: \[1, 2\]/seeds: [4, 5]/' \
  "$WORK/tiny.pbtxt" > "$WORK/one.pbtxt"
sweep "$WORK/one.pbtxt" --out "$WORK/one" --jobs 2 > "$WORK/one.log" 2>&1 ||
  fail "one rank, --jobs 2: $(tail -3 "$WORK/one.log")"
grep -q "0 of 4 runs done, 2 running" "$WORK/one.log" ||
  fail "runs of one rank did not run side by side: $(cat "$WORK/one.log")"
# Seed by seed: both cells' seed 4 before either's seed 5.
order=$(sed -n 's/.*started \([^ ]*\) .*/\1/p' "$WORK/one.log" | tr '\n' ' ')
[ "$order" = "sync/seed-4 async-virtual/seed-4 sync/seed-5 async-virtual/seed-5 " ] ||
  fail "runs not seed by seed: $order"
sed 's/^seeds: \[1, 2\]/seeds: [4, 5]/' "$WORK/tiny.pbtxt" > "$WORK/two.pbtxt"
sweep "$WORK/two.pbtxt" --out "$WORK/two" --cells sync --jobs 2 > "$WORK/two.log" 2>&1 ||
  fail "two ranks, --jobs 2: $(tail -3 "$WORK/two.log")"
grep -q "2 running" "$WORK/two.log" && fail "runs of two ranks ran side by side: $(cat "$WORK/two.log")"
# Convergence (convergence_patience): every run trains with training.early_stopping; a cell whose
# dev CE cannot improve (a rate of 1e-30) stops after that many validations, far before its
# budget; each run's best model (model.best.tern) translates the test set, and the summary's
# convergence table has every cell.
cat > "$WORK/conv.pbtxt" <<PB
name: "conv"
base_config: "configs/bible-small.pbtxt"
set: "$TINY;training.valid_freq=5;training.save_freq=1000;distributed.virtual_seconds_per_token=1e-4"
axis {
  name: "method"
  variant { name: "learns" }
  variant { name: "still" set: "optim.learning_rate=1e-30" }
}
seeds: [1]
placement { ranks: 2 hosts: "virtual" }
budget: "60u"
target_dev_ce: 6.2
convergence_patience: 2
test_src: "$WORK/data/dev.es"
test_tgt: "$WORK/data/dev.en"
target_bleu: 0.01
PB
sweep "$WORK/conv.pbtxt" --out "$WORK/conv" --jobs 2 --record "$WORK/conv-rec" > "$WORK/conv.log" 2>&1 ||
  fail "convergence sweep: $(tail -3 "$WORK/conv.log")"
python3 - "$WORK/conv" <<'PY' || fail "convergence"
import json, sys
out = sys.argv[1]
def run(cell):
    d = f"{out}/runs/{cell}/seed-1"
    valid = [json.loads(l) for l in open(f"{d}/model/metrics.jsonl") if '"valid"' in l]
    return json.load(open(f"{d}/run.json")), valid, open(f"{d}/test.hyp").read().splitlines()
still, still_valid, still_hyp = run("still")
learns, learns_valid, learns_hyp = run("learns")
for r in (still, learns):
    assert r["status"] == "done" and "training.early_stopping=2" in r["set"], r
    assert isinstance(r["test_bleu"], float), r["test_bleu"]
assert len(still_hyp) == len(learns_hyp) == 40, (len(still_hyp), len(learns_hyp))
# The first validation is the best; two stalls end the run there.
assert [v["update"] for v in still_valid] == [5, 10, 15], still_valid
assert [v["stalls"] for v in still_valid] == [0, 1, 2], still_valid
assert learns_valid[-1]["update"] > 15, learns_valid[-1]
summary = open(f"{out}/summary.md").read()
assert "To convergence" in summary, summary
convergence = summary.split("To convergence", 1)[1]
row = [l for l in convergence.splitlines() if l.startswith("| `still` |")][0].split("|")
assert row[2].strip() == "1/1" and row[5].strip() == "5", row  # converged; best at update 5
PY
[ -s "$WORK/conv-rec/runs/still/seed-1/test.hyp" ] || fail "the record lacks the test translation"
echo "sweep_test: passed"
