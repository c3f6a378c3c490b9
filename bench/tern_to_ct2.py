#!/usr/bin/env python3
"""Converts a float32 Tern Transformer (.tern) into a CTranslate2 model directory, so that
bench/vs_ctranslate2.py can time both toolkits on the same weights. CTranslate2 is a benchmark
dependency only (bench/vs-ctranslate2.sh installs it into a virtual environment).

What makes CTranslate2 compute what Tern's runtime computes (inference/transformer/):
- the vocabulary in Tern's id order (pad 0, unk 1, bos 2, eos 3: the pieces of the embedded
  SentencePiece model), `<s>` as the decoder's start token and `</s>` appended to the source;
- embeddings scaled by sqrt(d) plus Tern's sinusoid (all sines, then all cosines), given
  explicitly as a table from position 0 (CTranslate2's own sinusoid starts at position 1), computed
  in float32 with the C library's expf/sinf/cosf as inference/layers/layers.cc does;
- layer norm epsilon 1e-6; pre-norm sublayers with the stacks' final norms (or post-norm);
- linear weights transposed to CTranslate2's (out, in); the output layer tied to the target
  embedding, with Tern's output bias.

With --vmap, the model's lexical shortlist (tern-export --shortlist-src/--shortlist-tgt) becomes
CTranslate2's vocabulary map (vmap.txt, `translate_batch(use_vmap=True)`): the frequent tokens
under the empty key, each source piece's translations under that piece. CTranslate2 takes the union
over a batch's source pieces, as Tern's --shortlist does.

    python3 bench/tern_to_ct2.py --model work/bible-small/model.tern --out work/ct2-model [--vmap]
"""
import argparse
import ctypes
import ctypes.util
import os

import numpy as np
import sentencepiece as spm
from ctranslate2.specs import common_spec, transformer_spec

from tern_model import TernModel

_ACTIVATIONS = {"": common_spec.Activation.RELU, "relu": common_spec.Activation.RELU,
                "gelu": common_spec.Activation.GELUTanh}


def tern_positions(count, dim):
    """inference/layers/layers.cc's PositionEncoding for positions 0..count-1, in float32 through
    the same libm calls, so that both toolkits add the same bits."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    for fn in ("expf", "sinf", "cosf"):
        getattr(libm, fn).restype = ctypes.c_float
        getattr(libm, fn).argtypes = [ctypes.c_float]
    half = dim // 2
    log_step = np.float32(np.float32(np.log(10000.0)) / np.float32(half - 1))
    table = np.zeros((count, dim), dtype=np.float32)
    for i in range(half):
        step = libm.expf(float(np.float32(-log_step * np.float32(i))))
        for p in range(count):
            arg = float(np.float32(np.float32(p) * np.float32(step)))
            table[p, i] = libm.sinf(arg)
            table[p, half + i] = libm.cosf(arg)
    return table


def vocabulary(model):
    sp = spm.SentencePieceProcessor(model_proto=model.vocab_bytes)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    if pieces[2:4] != ["<s>", "</s>"]:
        raise ValueError(f"the vocabulary's ids 2 and 3 are {pieces[2:4]}, not <s> and </s>")
    return pieces


def set_linear(spec, model, name, suffix):
    spec.weight = np.ascontiguousarray(model.float32(f"{name}_W{suffix}").T)
    spec.bias = model.float32(f"{name}_b{suffix}")


def set_norm(spec, model, prefix):
    spec.gamma = model.float32(prefix + "_ln_scale")
    spec.beta = model.float32(prefix + "_ln_bias")


def set_attention(spec, model, prefix, self_attention):
    q, k, v = (common_spec.LinearSpec() for _ in range(3))
    for s, m in ((q, "q"), (k, "k"), (v, "v")):
        set_linear(s, model, prefix, m)
    if self_attention:
        spec.linear[0].weight = np.concatenate([q.weight, k.weight, v.weight])
        spec.linear[0].bias = np.concatenate([q.bias, k.bias, v.bias])
    else:
        spec.linear[0].weight, spec.linear[0].bias = q.weight, q.bias
        spec.linear[1].weight = np.concatenate([k.weight, v.weight])
        spec.linear[1].bias = np.concatenate([k.bias, v.bias])
    set_linear(spec.linear[-1], model, prefix, "o")
    set_norm(spec.layer_norm, model, prefix + "_Wo")


def set_ffn(spec, model, prefix):
    set_linear(spec.linear_0, model, prefix, "1")
    set_linear(spec.linear_1, model, prefix, "2")
    set_norm(spec.layer_norm, model, prefix + "_ffn")


def build_spec(model, positions):
    cfg = model.model
    if model.arch != "transformer":
        raise ValueError(f"architecture {model.arch}: only 'transformer' converts")
    pre_norm = cfg.get("pre_norm") == "true"
    enc_depth, dec_depth = int(cfg["enc_depth"]), int(cfg["dec_depth"])
    spec = transformer_spec.TransformerSpec.from_config(
        (enc_depth, dec_depth), int(cfg["heads"]), pre_norm=pre_norm,
        activation=_ACTIVATIONS[cfg.get("ffn_activation", "")])
    tied = cfg.get("tied_embeddings") == "true"
    src_emb = model.float32("Wemb" if tied else "encoder_Wemb")
    tgt_emb = model.float32("Wemb" if tied else "decoder_Wemb")
    spec.encoder.embeddings[0].weight = src_emb  # the encoder's is a list (source factors)
    spec.decoder.embeddings.weight = tgt_emb
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = True
        stack.position_encodings.encodings = positions
    for stack, name, depth in ((spec.encoder, "encoder", enc_depth),
                               (spec.decoder, "decoder", dec_depth)):
        if pre_norm:
            set_norm(stack.layer_norm, model, f"{name}_final")
        for layer in range(depth):
            prefix = f"{name}_l{layer + 1}"
            set_attention(stack.layer[layer].self_attention, model, prefix + "_self", True)
            if name == "decoder":
                set_attention(stack.layer[layer].attention, model, prefix + "_context", False)
            set_ffn(stack.layer[layer].ffn, model, prefix + "_ffn")
    spec.decoder.projection.weight = tgt_emb
    spec.decoder.projection.bias = model.float32("decoder_ff_logit_out_b")
    return spec


def write_vmap(model, pieces, path):
    frequent = model.tensors["shortlist_frequent"]
    offsets = model.tensors["shortlist_offsets"]
    ids = model.tensors["shortlist_ids"]
    with open(path, "w", encoding="utf-8") as out:
        out.write("\t" + " ".join(pieces[t] for t in frequent) + "\n")
        for s in range(len(offsets) - 1):
            if offsets[s + 1] > offsets[s] and " " not in pieces[s] and pieces[s]:
                out.write(pieces[s] + "\t" +
                          " ".join(pieces[t] for t in ids[offsets[s]:offsets[s + 1]]) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a float32 .tern Transformer")
    parser.add_argument("--out", required=True, help="the CTranslate2 model directory to write")
    parser.add_argument("--vmap", action="store_true",
                        help="write vmap.txt from the model's lexical shortlist")
    args = parser.parse_args()
    model = TernModel(args.model)
    pieces = vocabulary(model)
    dim = int(model.model["emb_dim"])
    positions = tern_positions(int(model.model.get("max_length", 256)) + 1024, dim)
    spec = build_spec(model, positions)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.add_source_eos = True
    spec.config.decoder_start_token = "<s>"
    spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = "<s>", "</s>", pieces[1]
    spec.config.layer_norm_epsilon = 1e-6
    spec.validate()
    spec.optimize(quantization=None)
    os.makedirs(args.out, exist_ok=True)
    spec.save(args.out)
    if args.vmap:
        if not model.has("shortlist_ids"):
            raise SystemExit(f"{args.model} has no shortlist (tern-export --shortlist-src ...)")
        write_vmap(model, pieces, os.path.join(args.out, "vmap.txt"))
    with open(os.path.join(args.out, "tern.spm"), "wb") as f:
        f.write(model.vocab_bytes)


if __name__ == "__main__":
    main()
