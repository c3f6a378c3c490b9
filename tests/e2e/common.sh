# Shared set-up for the end-to-end tests: a tiny model on a slice of the Bible corpus, so each
# test trains in seconds. Sourced by the tests; BIN, CORPUS and WORK come from the caller.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TERN_THREADS=1
: "${BIN:?}" "${CORPUS:?}" "${WORK:?}"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$WORK" && mkdir -p "$WORK/data"
[ -f "$CORPUS/train.es" ] || "$ROOT/scripts/prepare-corpus.sh" "$CORPUS" >/dev/null
head -n 1500 "$CORPUS/train.es" > "$WORK/data/train.es"
head -n 1500 "$CORPUS/train.en" > "$WORK/data/train.en"
head -n 40 "$CORPUS/dev.es" > "$WORK/data/dev.es"
head -n 40 "$CORPUS/dev.en" > "$WORK/data/dev.en"
TINY="model.emb_dim=32;model.ffn_dim=64;model.heads=2;model.enc_depth=1;model.dec_depth=1"
TINY+=";data.train_src=$WORK/data/train.es;data.train_tgt=$WORK/data/train.en"
TINY+=";data.valid_src=$WORK/data/dev.es;data.valid_tgt=$WORK/data/dev.en;data.vocab=$WORK/vocab.spm"
TINY+=";data.vocab_size=600;data.batch_tokens=600;training.threads=1;training.disp_freq=5"
TINY+=";training.valid_freq=10;training.valid_max_sentences=10;optim.warmup_updates=10"
train() { "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" "$@"; }
# The overrides of a distillation on the first 120 training lines (written to data/small.*), for
# scripts/distill.sh --set: teacher and student train in seconds.
small_distill_sets() {
  head -n 120 "$WORK/data/train.es" > "$WORK/data/small.es"
  head -n 120 "$WORK/data/train.en" > "$WORK/data/small.en"
  printf '%s' "$TINY;data.train_src=$WORK/data/small.es;data.train_tgt=$WORK/data/small.en"
  printf '%s' ";data.max_length=40;training.valid_freq=500;training.save_freq=8"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
