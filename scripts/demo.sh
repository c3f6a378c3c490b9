#!/usr/bin/env bash
# Tern's demo, end to end on the CPU: installs what is missing, builds, prepares the bundled
# Spanish->English Bible corpus, trains the small preset, exports it as float32 and int16, translates
# the test books with both through the bundled runtime, prints BLEU and chrF, and ends the way
# users serve a model: tern-serve on the int16 model, one request with curl, the answer, the stop.
#
#   scripts/demo.sh [--after 15m] [--model-dir work/bible-small] [--set "a.b=v;..."]
#
# --set passes tern-train overrides of the preset, e.g. "training.precision=float32" for float32
# products where auto would choose bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
after=""
model_dir=work/bible-small
sets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --after) after="$2"; shift 2 ;;
    --model-dir) model_dir="$2"; shift 2 ;;
    --set) sets="$2"; shift 2 ;;
    *) echo "demo.sh: unknown option $1 (known: --after DURATION, --model-dir DIR, --set OVERRIDES)" >&2
       exit 2 ;;
  esac
done
start=$(date +%s)
stage() { printf '\n== %s (%ds)\n' "$1" $(( $(date +%s) - start )); }

stage "installing what is missing"
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

stage "building"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tern-train tern-export tern-translate tern-score tern-serve

stage "preparing the corpus"
scripts/prepare-corpus.sh corpus/bible

stage "training configs/bible-small.pbtxt"
mkdir -p "$model_dir"
args=(--config configs/bible-small.pbtxt --model-dir "$model_dir")
[ -n "$after" ] && args+=(--after "$after")
[ -n "$sets" ] && args+=(--set "$sets")
# --bind-to none: by default Open MPI binds a rank to one core, which halves its two threads.
mpirun --bind-to none -np 1 build/bin/tern-train "${args[@]}" 2>&1 | tee -a "$model_dir/train.log"

stage "exporting an int16 model with a lexical shortlist (tern-export)"
# The shortlist tables (IBM Model 1 over the training corpus, a few seconds) are used only when
# asked for (--shortlist, --shortlist-per-sentence), as docs/serving.md's first example does.
build/bin/tern-export --checkpoint "$model_dir" --out "$model_dir/model.int16.tern" --weights int16 \
  --shortlist-src corpus/bible/train.es --shortlist-tgt corpus/bible/train.en

for w in float32 int16; do
  model="$model_dir/model.tern"
  [ "$w" = int16 ] && model="$model_dir/model.int16.tern"
  stage "translating the test books with the $w model (beam 4, fused output layer)"
  build/bin/tern-translate --model "$model" --beam 4 --fused-output \
    < corpus/bible/test.es > "$model_dir/test.$w.hyp.en"
  stage "scoring the $w translations"
  build/bin/tern-score --ref corpus/bible/test.en < "$model_dir/test.$w.hyp.en" |
    tee "$model_dir/test.$w.score"
done
same=$(paste -d '\t' "$model_dir/test.float32.hyp.en" "$model_dir/test.int16.hyp.en" |
         awk -F'\t' '$1 == $2' | wc -l)
echo "int16 translations identical to float32: $same of $(wc -l < corpus/bible/test.es)"
echo
echo "learning curve (dev, from $model_dir/train.log):"
grep -E "valid (bleu|ce-mean-words)" "$model_dir/train.log" | tail -n 20 || true

stage "serving the int16 model (tern-serve on 127.0.0.1, one request with curl)"
: > "$model_dir/serve.out"  # there before the loop below reads it, however late the server starts
build/bin/tern-serve --model bible="$model_dir/model.int16.tern" --listen 127.0.0.1:0 \
  --beam 4 --fused-output > "$model_dir/serve.out" 2> "$model_dir/serve.log" &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 300); do
  port=$(sed -n 's#^tern-serve: listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$model_dir/serve.out")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/ready" > /dev/null && break
  sleep 0.1
done
echo "curl -s http://127.0.0.1:$port/v1/translate -H 'Content-Type: application/json' -d '{\"text\": [\"En el principio creó Dios los cielos y la tierra.\"]}'"
curl -s "http://127.0.0.1:$port/v1/translate" -H 'Content-Type: application/json' \
  -d '{"text": ["En el principio creó Dios los cielos y la tierra."]}'
kill -TERM "$serve_pid"
wait "$serve_pid"
trap - EXIT
echo "tern-serve stopped (its log: $model_dir/serve.log)"
stage "done"
