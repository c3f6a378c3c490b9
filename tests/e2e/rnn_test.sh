#!/usr/bin/env bash
# The GRU models end to end. devlin (Devlin's student, with its clipped weights and ReLUs):
# tern-train validates it by BLEU and writes model.tern; tern-export writes float32 (the same
# translations as model.tern) and int16 (>= 95% identical); tern-translate's exact speed-ups
# (precomputed embeddings, merged states, precomputed attention) change no output byte and the
# activation approximations at most 1 of 40 lines. s2s (Nematus, deep, layer-normalized): trains,
# writes model.tern, translates every line, and also as int16.
source "$(dirname "$0")/common.sh"
RNN="model.rnn_dim=32;model.fc_depth=3;model.tied_embeddings=true;training.valid_freq=150"
# A higher learning rate than the preset's, so that 300 updates leave the unigram plateau and the
# identity checks below compare real, varied translations (the floor on distinct lines).
train --model-dir "$WORK/devlin" --after 300u --set "$TINY;$RNN;model.arch=devlin;\
model.clip_weights=1;model.clip_relu=10;optim.learning_rate=0.005;training.save_freq=300" \
  > "$WORK/devlin.log" 2>&1
grep -q "valid bleu" "$WORK/devlin.log" || fail "devlin: no BLEU validation"
[ -f "$WORK/devlin/model.tern" ] || fail "devlin: tern-train wrote no model.tern"
head -n 40 "$CORPUS/test.es" > "$WORK/test.es"
translate() { "$BIN/tern-translate" --beam 4 --threads 1 --max-length-factor 1.2 "$@" < "$WORK/test.es"; }
for w in float32 int16; do
  "$BIN/tern-export" --checkpoint "$WORK/devlin" --out "$WORK/$w.tern" --weights "$w" 2>/dev/null
  translate --model "$WORK/$w.tern" > "$WORK/$w.out"
  [ "$(grep -c . "$WORK/$w.out")" -gt 0 ] || fail "devlin $w: no translations"
done
distinct=$(grep . "$WORK/float32.out" | sort -u | wc -l)
[ "$distinct" -ge 15 ] || fail "devlin: only $distinct distinct translations of 40 (degenerate model)"
translate --model "$WORK/devlin/model.tern" | cmp -s - "$WORK/float32.out" ||
  fail "devlin: tern-export float32 translates differently from model.tern"
same() { paste -d '\t' "$1" "$2" | awk -F'\t' '$1 == $2' | wc -l; }
n=$(same "$WORK/float32.out" "$WORK/int16.out")
echo "devlin int16 identical: $n/40"
[ "$n" -ge 38 ] || fail "devlin int16 translations identical for only $n of 40 sentences"
translate --model "$WORK/float32.tern" --precomputed-embeddings 600 --merge-states |
  cmp -s - "$WORK/float32.out" || fail "devlin: the exact speed-ups changed the output"
translate --model "$WORK/float32.tern" --no-precomputed-attention |
  cmp -s - "$WORK/float32.out" || fail "devlin: attention without precomputation differs"
translate --model "$WORK/float32.tern" --approx-activations > "$WORK/approx.out"
n=$(same "$WORK/float32.out" "$WORK/approx.out")
echo "devlin approximate activations identical: $n/40"
[ "$n" -ge 39 ] || fail "approximate activations changed $((40 - n)) of 40 sentences"

train --model-dir "$WORK/s2s" --after 20u --set "$TINY;$RNN;model.arch=s2s;model.dec_depth=2;\
model.dec_cell_base_depth=3;model.layer_normalization=true;training.save_freq=20" \
  > "$WORK/s2s.log" 2>&1
[ -f "$WORK/s2s/model.tern" ] || fail "s2s: tern-train wrote no model.tern"
"$BIN/tern-export" --checkpoint "$WORK/s2s" --out "$WORK/s2s16.tern" --weights int16 2>/dev/null
for m in "$WORK/s2s/model.tern" "$WORK/s2s16.tern"; do
  [ "$(translate --model "$m" --beam 2 | wc -l)" -eq 40 ] || fail "s2s: $m lost lines"
done
echo "rnn_test: passed"
