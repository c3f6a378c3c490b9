#!/usr/bin/env bash
# Remakes the golden model files and their expected translations (README.md says when that is
# allowed). Trains a tiny Transformer and a tiny s2s GRU model on a slice of the bundled corpus,
# exports them (format 2: float32, int16), writes the Transformer in format 1 with make-golden,
# and keeps source lines whose translations win by a margin in every file. About three minutes
# on 2 cores.
#
#   tests/golden/regenerate.sh [BUILD_DIR]     (default build/; needs tern-train, tern-export and
#                                               make-golden built there)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin=$build/bin
for program in tern-train tern-export make-golden; do
  [ -x "$bin/$program" ] || { echo "regenerate: build $program first ($bin/$program)" >&2; exit 1; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TERN_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

corpus=$build/corpus/bible
[ -f "$corpus/train.es" ] || "$root/scripts/prepare-corpus.sh" "$corpus" >/dev/null
head -n 3000 "$corpus/train.es" > "$work/train.es"
head -n 3000 "$corpus/train.en" > "$work/train.en"
head -n 40 "$corpus/dev.es" > "$work/dev.es"
head -n 40 "$corpus/dev.en" > "$work/dev.en"
"$bin/make-golden" vocab --src "$work/train.es" --tgt "$work/train.en" --size 300 \
  --out "$work/vocab.spm"

# A few KB a model: 16-wide, one layer each side, 300 pieces; trained until its translations are
# words rather than loops of one piece.
common="data.train_src=$work/train.es;data.train_tgt=$work/train.en"
common+=";data.valid_src=$work/dev.es;data.valid_tgt=$work/dev.en;data.vocab=$work/vocab.spm"
common+=";data.vocab_size=300;data.batch_tokens=1000;training.threads=1;training.disp_freq=500"
common+=";training.valid_freq=1000;training.valid_max_sentences=10;training.save_freq=2000"
common+=";optim.warmup_updates=100;optim.learning_rate=0.005"
"$bin/tern-train" --config "$root/configs/bible-small.pbtxt" --model-dir "$work/transformer" \
  --after 2000u --set "$common;model.emb_dim=16;model.ffn_dim=32;model.heads=2;\
model.enc_depth=1;model.dec_depth=1" > "$work/transformer.log" 2>&1
"$bin/tern-train" --config "$root/configs/bible-s2s.pbtxt" --model-dir "$work/s2s" \
  --after 2000u --set "$common;model.emb_dim=16;model.rnn_dim=16;model.dropout=0;\
model.rnn_dropout=0;model.layer_normalization=false;optim.learning_rate=0.01" \
  > "$work/s2s.log" 2>&1

"$bin/tern-export" --checkpoint "$work/transformer" --weights float32 \
  --out "$here/transformer_v2_float32.tern" 2>/dev/null
"$bin/tern-export" --checkpoint "$work/transformer" --weights int16 \
  --out "$here/transformer_v2_int16.tern" 2>/dev/null
"$bin/tern-export" --checkpoint "$work/s2s" --weights float32 \
  --out "$here/s2s_v2_float32.tern" 2>/dev/null
for weights in float32 int16; do
  "$bin/make-golden" v1 --from "$here/transformer_v2_float32.tern" --weights $weights \
    --out "$here/transformer_v1_$weights.tern"
done

# Candidates: the slice's lines of at most 12 words (the models saw them in training, so their
# translations read more like English).
awk 'NF >= 3 && NF <= 12' "$work/train.es" | head -n 200 > "$work/candidates.txt"
"$bin/make-golden" expect --candidates "$work/candidates.txt" --lines 8 \
  --out-source "$here/source.txt" "$here"/transformer_v1_float32.tern \
  "$here"/transformer_v1_int16.tern "$here"/transformer_v2_float32.tern \
  "$here"/transformer_v2_int16.tern "$here"/s2s_v2_float32.tern
ls -l "$here"/*.tern
