"""Converts Hugging Face Marian models and original OPUS-MT releases to Tern's model file
(the weights' files: tern.hf_weights; the releases: tern.opus_release).

    python -m tern.convert --hf DIR --out model.tern [--weight-type float32|int16|int8]
                           [--verify N [--verify-source FILE]]
    python -m tern.convert --marian DIR [--npz FILE] --out model.tern [--weight-type ...]

DIR is a ``MarianMTModel`` directory as ``save_pretrained`` writes it and the Hugging Face hub
holds the OPUS-MT models: ``config.json``, the weights (``model.safetensors``, sharded safetensors
with their index, or ``pytorch_model.bin`` when PyTorch is installed), ``source.spm``,
``target.spm`` and ``vocab.json``. The conversion needs numpy only; ``--verify`` runs the model
in ``transformers`` too (PyTorch or Flax) and checks that Tern's greedy and beam translations
and scores equal ``generate()``'s (``tern.hf_reference``). docs/python.md says what is mapped and
what is refused. --marian DIR reads an OPUS-MT release (Marian's .npz through the runtime's
importer, its vocab.yml, source.spm).

Every refusal is one line naming the file and the field: ``ConversionError``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

try:
    import numpy as np
except ImportError as e:  # the package itself does not need numpy
    raise ImportError("tern.convert needs numpy: pip install numpy (or pip install "
                      "'tern[convert]')") from e

from . import _tern
from .convert_errors import ConversionError
from .hf_weights import canonical_names, read_safetensors, read_weights  # noqa: F401

# SentencePiece piece types (sentencepiece_model.proto).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# Tern's special ids (data/vocab.h).
PAD, UNK, BOS, EOS = 0, 1, 2, 3
NEVER = -1e9  # the output bias of a token Tern must never produce
ZERO = -1  # Vocabulary.rows: a zero row (Marian's decoder starts from a zero vector)
_LANGUAGE_CODE = re.compile(r"^>>.+<<$")


# ---------------------------------------------------------------------------------------------
# Config


@dataclass
class MarianShape:
    d_model: int
    ffn_dim: int
    heads: int
    enc_depth: int
    dec_depth: int
    activation: str  # Tern's name
    max_length: int
    vocab_size: int
    shared: bool  # one embedding for encoder and decoder
    pad_id: Optional[int]  # None: Marian's, which has no pad
    eos_id: int
    start_id: Optional[int]  # None: Marian's zero vector


# Hugging Face's activation names Tern computes the same way.
_ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu_new": "gelu",
                "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu"}


def read_config(model_dir: str) -> MarianShape:
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            c = json.load(f)
    except FileNotFoundError:
        raise ConversionError(f"{path}: missing; give a MarianMTModel directory "
                              "(save_pretrained's output)")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConversionError(f"{path}: not JSON ({e})")

    def refuse(key, why):
        raise ConversionError(f"{path}: {key}={json.dumps(c.get(key))}: {why}")

    def integer(key, default=None):
        v = c.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            refuse(key, "expected a non-negative integer")
        return v

    if c.get("model_type") != "marian":
        refuse("model_type", "the converter reads Marian models (MarianMTModel) only")
    if c.get("encoder_attention_heads") != c.get("decoder_attention_heads"):
        refuse("decoder_attention_heads", "Tern's encoder and decoder have the same heads "
               f"(encoder_attention_heads is {c.get('encoder_attention_heads')})")
    if c.get("encoder_ffn_dim") != c.get("decoder_ffn_dim"):
        refuse("decoder_ffn_dim", "Tern's encoder and decoder have the same FFN width "
               f"(encoder_ffn_dim is {c.get('encoder_ffn_dim')})")
    activation = c.get("activation_function", "gelu")
    if activation not in _ACTIVATIONS:
        refuse("activation_function", "Tern computes swish/silu, relu and the tanh GELU "
               "(gelu_new, gelu_pytorch_tanh, gelu_fast); not the exact erf GELU")
    if c.get("scale_embedding", False) is not True:
        refuse("scale_embedding", "Tern multiplies embeddings by sqrt(d_model), as every OPUS-MT "
               "model does")
    vocab_size = integer("vocab_size")
    if c.get("decoder_vocab_size", vocab_size) not in (None, vocab_size):
        refuse("decoder_vocab_size", f"separate target vocabulary (vocab_size is {vocab_size}); "
               "Tern uses one joint vocabulary")
    if c.get("tie_word_embeddings", True) is not True:
        refuse("tie_word_embeddings", "Tern's output layer is the transposed target embedding")
    shared = c.get("share_encoder_decoder_embeddings", True)
    if not isinstance(shared, bool):
        refuse("share_encoder_decoder_embeddings", "expected true or false")
    pad = integer("pad_token_id")
    start = integer("decoder_start_token_id", pad)
    eos = integer("eos_token_id")
    for key, v in (("pad_token_id", pad), ("decoder_start_token_id", start),
                   ("eos_token_id", eos)):
        if v >= vocab_size:
            refuse(key, f"outside the vocabulary of {vocab_size}")
    return MarianShape(d_model=integer("d_model"), ffn_dim=integer("encoder_ffn_dim"),
                       heads=integer("encoder_attention_heads"),
                       enc_depth=integer("encoder_layers"), dec_depth=integer("decoder_layers"),
                       activation=_ACTIVATIONS[activation],
                       max_length=integer("max_position_embeddings"), vocab_size=vocab_size,
                       shared=shared, pad_id=pad, eos_id=eos, start_id=start)


def tern_config_text(shape: MarianShape) -> str:
    """The Tern model config (protobuf text) that computes what Hugging Face's MarianMTModel
    computes: post-norm, sqrt(d)-scaled embeddings, sinusoids at 10000^(2i/d), layer norms with
    epsilon 1e-5."""
    return (f'model {{ arch: "transformer" emb_dim: {shape.d_model} ffn_dim: {shape.ffn_dim} '
            f'heads: {shape.heads} enc_depth: {shape.enc_depth} dec_depth: {shape.dec_depth} '
            f'tied_embeddings: {"true" if shape.shared else "false"} pre_norm: false '
            f'ffn_activation: "{shape.activation}" max_length: {shape.max_length} '
            f'positions: "vaswani" layer_norm_eps: 1e-5 }}')


# ---------------------------------------------------------------------------------------------
# Vocabulary


@dataclass
class Vocabulary:
    spm: bytes        # SentencePiece model with Tern's ids, segmenting as source.spm does
    rows: np.ndarray  # per Tern id, the Hugging Face id whose embedding row it takes, or ZERO
    never: np.ndarray  # per Tern id, whether Tern must never produce it (output bias NEVER)
    pieces: List[str]  # per Tern id

    def take_rows(self, matrix: np.ndarray) -> np.ndarray:
        """`matrix`'s rows (one per source id) in Tern's id order; ZERO rows zero."""
        out = matrix[np.maximum(self.rows, 0)]
        out[self.rows == ZERO] = 0.0
        return np.ascontiguousarray(out, dtype=np.float32)

    def output_bias(self, bias: np.ndarray) -> np.ndarray:
        out = bias[np.maximum(self.rows, 0)].astype(np.float32)
        out[self.never] = NEVER
        return out


def read_vocab_json(path: str, vocab_size: int) -> List[str]:
    """vocab.json's pieces in id order; its ids must be 0 .. vocab_size - 1, each once."""
    try:
        with open(path, encoding="utf-8") as f:
            mapping = json.load(f)
    except FileNotFoundError:
        raise ConversionError(f"{path}: missing; a MarianMTModel directory holds its vocabulary")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConversionError(f"{path}: not JSON ({e})")
    if not isinstance(mapping, dict):
        raise ConversionError(f"{path}: expected an object of piece: id")
    pieces: List[Optional[str]] = [None] * vocab_size
    for piece, i in mapping.items():
        if not isinstance(i, int) or not 0 <= i < vocab_size:
            raise ConversionError(f"{path}: piece {piece!r} has id {i!r}, outside the "
                                  f"config's vocab_size {vocab_size}")
        if pieces[i] is not None:
            raise ConversionError(f"{path}: id {i} is given to {pieces[i]!r} and {piece!r}")
        pieces[i] = piece
    missing = [i for i, p in enumerate(pieces) if p is None]
    if missing:
        raise ConversionError(f"{path}: {len(missing)} ids of the config's vocab_size "
                              f"{vocab_size} have no piece (the first: {missing[0]})")
    return pieces  # type: ignore[return-value]


def build_vocabulary(hf_pieces: Sequence[str], source_spm: bytes, shape: MarianShape,
                     where: str) -> Vocabulary:
    """Tern's vocabulary for a Hugging Face Marian model. Ids: pad (the HF pad row and bias, so
    the softmax is HF's, never produced as HF never produces it), unk, bos (the decoder's start
    row, never produced), eos, then HF's other pieces in their order. Pieces source.spm segments
    into keep its scores and types; the others (target-only pieces) are UNUSED, which
    SentencePiece never segments into but decodes, and language codes (>>xx<<) user-defined.
    A source.spm piece vocab.json lacks becomes an alias of unk (HF maps it to unk)."""
    hf_unk = {p: i for i, p in enumerate(hf_pieces)}.get("<unk>")
    if hf_unk is None:
        raise ConversionError(f"{where}: no '<unk>' piece")
    if hf_pieces[shape.eos_id] != "</s>":
        raise ConversionError(f"{where}: the eos id {shape.eos_id} is "
                              f"{hf_pieces[shape.eos_id]!r}, not '</s>'")
    spm = {p: (score, kind) for p, score, kind in _tern._spm_pieces(source_spm)}
    entries = [("<pad>", 0.0, CONTROL, ZERO if shape.pad_id is None else shape.pad_id,
                shape.pad_id is None),
               ("<unk>", 0.0, UNKNOWN, hf_unk, False),
               ("<s>", 0.0, CONTROL, ZERO if shape.start_id is None else shape.start_id, True),
               ("</s>", 0.0, CONTROL, shape.eos_id, False)]
    specials = {shape.pad_id, hf_unk, shape.eos_id}
    for i, piece in enumerate(hf_pieces):
        if i in specials:
            continue
        if piece in ("<pad>", "<unk>", "<s>", "</s>"):
            raise ConversionError(f"{where}: {piece!r} has the id {i}, which the model does "
                                  "not use as that token; Tern reserves the name")
        score, kind = spm.get(piece, (0.0, NORMAL))
        if piece not in spm:
            kind = USER_DEFINED if _LANGUAGE_CODE.match(piece) else UNUSED
        elif kind not in (NORMAL, USER_DEFINED, BYTE):
            kind = UNUSED  # source.spm's own control pieces (its <s>, </s>) are not HF's
        entries.append((piece, score, kind, i, False))
    known = set(hf_pieces)
    for piece, (score, kind) in spm.items():
        if kind in (NORMAL, USER_DEFINED, BYTE) and piece not in known:
            entries.append((piece, score, kind, hf_unk, True))
    tern_spm = _tern._spm_with_pieces(source_spm, [(p, s, k) for p, s, k, _, _ in entries])
    return Vocabulary(spm=tern_spm, rows=np.array([e[3] for e in entries], dtype=np.int64),
                      never=np.array([e[4] for e in entries], dtype=bool),
                      pieces=[e[0] for e in entries])


# ---------------------------------------------------------------------------------------------
# Parameters


def sinusoids(length: int, d: int) -> np.ndarray:
    """Hugging Face Marian's position table: sin of position / 10000^(2i/d) in the first half,
    cos in the second."""
    position = np.arange(length, dtype=np.float64)[:, None]
    rate = 1.0 / np.power(10000.0, 2 * np.arange(d // 2, dtype=np.float64) / d)
    return np.concatenate([np.sin(position * rate), np.cos(position * rate)], axis=1)


def tern_tensors(hf: Dict[str, np.ndarray], shape: MarianShape, vocab: Vocabulary,
                 where: str) -> Dict[str, np.ndarray]:
    """Tern's parameters (names of inference/transformer's TransformerParameterShapes) from a
    MarianMTModel's (canonical_names), embedding rows in Tern's id order."""
    used = set()

    def take(name, expect):
        if name not in hf:
            raise ConversionError(f"{where}: parameter '{name}' is missing")
        a = hf[name]
        if a.shape != tuple(expect):
            raise ConversionError(f"{where}: parameter '{name}' has shape {list(a.shape)}, "
                                  f"expected {list(expect)} for config.json")
        if not np.all(np.isfinite(a)):
            raise ConversionError(f"{where}: parameter '{name}' holds a value that is not a "
                                  "finite number")
        used.add(name)
        return a

    def first(names, expect):
        for n in names:
            if n in hf:
                return take(n, expect)
        raise ConversionError(f"{where}: none of the parameters {names} is present")

    d, f, v = shape.d_model, shape.ffn_dim, shape.vocab_size
    out: Dict[str, np.ndarray] = {}
    shared = first(["shared.weight", "encoder.embed_tokens.weight",
                    "decoder.embed_tokens.weight"], (v, d))
    embeddings = {"Wemb": shared} if shape.shared else {
        "encoder_Wemb": take("encoder.embed_tokens.weight", (v, d)),
        "decoder_Wemb": take("decoder.embed_tokens.weight", (v, d))}
    for stack in ("encoder", "decoder"):
        name = f"{stack}.embed_tokens.weight"
        if shape.shared and name in hf and not np.array_equal(hf[name], shared):
            raise ConversionError(f"{where}: parameter '{name}' differs from shared.weight, but "
                                  "config.json says share_encoder_decoder_embeddings")
        used.add(name)
    target = embeddings.get("Wemb", embeddings.get("decoder_Wemb"))
    if "lm_head.weight" in hf and not np.array_equal(hf["lm_head.weight"], target):
        raise ConversionError(f"{where}: parameter 'lm_head.weight' differs from the target "
                              "embedding; Tern's output layer is the transposed embedding")
    used.add("lm_head.weight")
    for name, matrix in embeddings.items():
        out[name] = vocab.take_rows(matrix)
    out["decoder_ff_logit_out_b"] = vocab.output_bias(take("final_logits_bias", (1, v))[0])
    for stack in ("encoder", "decoder"):
        name = f"{stack}.embed_positions.weight"
        if name in hf:
            table = take(name, (shape.max_length, d))
            if np.max(np.abs(table - sinusoids(shape.max_length, d))) > 1e-4:
                raise ConversionError(f"{where}: parameter '{name}' is not the sinusoid table "
                                      "Hugging Face's Marian computes; Tern cannot run trained "
                                      "positions")

    def linear(hf_name, tern_w, tern_b, n_in, n_out):
        out[tern_w] = np.ascontiguousarray(take(hf_name + ".weight", (n_out, n_in)).T)
        out[tern_b] = take(hf_name + ".bias", (n_out,))

    def norm(hf_name, tern_prefix):
        out[tern_prefix + "_scale"] = take(hf_name + ".weight", (d,))
        out[tern_prefix + "_bias"] = take(hf_name + ".bias", (d,))

    def attention(hf_prefix, norm_name, tern_prefix):
        for m in ("q", "k", "v"):
            linear(f"{hf_prefix}.{m}_proj", f"{tern_prefix}_W{m}", f"{tern_prefix}_b{m}", d, d)
        linear(f"{hf_prefix}.out_proj", f"{tern_prefix}_Wo", f"{tern_prefix}_bo", d, d)
        norm(norm_name, f"{tern_prefix}_Wo_ln")

    def feed_forward(hf_prefix, tern_prefix):
        linear(f"{hf_prefix}.fc1", f"{tern_prefix}_W1", f"{tern_prefix}_b1", d, f)
        linear(f"{hf_prefix}.fc2", f"{tern_prefix}_W2", f"{tern_prefix}_b2", f, d)
        norm(f"{hf_prefix}.final_layer_norm", f"{tern_prefix}_ffn_ln")

    for layer in range(shape.enc_depth):
        hp, tp = f"encoder.layers.{layer}", f"encoder_l{layer + 1}_"
        attention(f"{hp}.self_attn", f"{hp}.self_attn_layer_norm", tp + "self")
        feed_forward(hp, tp + "ffn")
    for layer in range(shape.dec_depth):
        hp, tp = f"decoder.layers.{layer}", f"decoder_l{layer + 1}_"
        attention(f"{hp}.self_attn", f"{hp}.self_attn_layer_norm", tp + "self")
        attention(f"{hp}.encoder_attn", f"{hp}.encoder_attn_layer_norm", tp + "context")
        feed_forward(hp, tp + "ffn")
    extra = sorted(set(hf) - used)
    if extra:
        raise ConversionError(f"{where}: parameter '{extra[0]}' has no place in a Tern "
                              f"Transformer for config.json ({len(extra)} such)")
    return out


# ---------------------------------------------------------------------------------------------
# The conversion


def convert_hf_marian(model_dir: str, out: str, weight_type: str = "float32") -> Vocabulary:
    """Writes the .tern of the MarianMTModel in `model_dir` (atomically); returns its
    vocabulary. ConversionError for anything Tern cannot compute the same way."""
    if weight_type not in ("float32", "int16", "int8"):
        raise ConversionError(f"--weight-type {weight_type}: give float32, int16 or int8")
    shape = read_config(model_dir)
    try:
        _tern._check_config(tern_config_text(shape), shape.vocab_size + 1)
    except ValueError as e:
        raise ConversionError(f"{os.path.join(model_dir, 'config.json')}: {e}")
    tokenizer_config = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(tokenizer_config):
        with open(tokenizer_config, encoding="utf-8") as f:
            if json.load(f).get("separate_vocabs"):
                raise ConversionError(f"{tokenizer_config}: separate_vocabs=true: Tern uses one "
                                      "joint vocabulary for source and target")
    source_spm_path = os.path.join(model_dir, "source.spm")
    if not os.path.exists(source_spm_path):
        raise ConversionError(f"{source_spm_path}: missing; the tokenizer's SentencePiece model "
                              "is needed to segment input as Hugging Face does")
    with open(source_spm_path, "rb") as f:
        source_spm = f.read()
    hf_pieces = read_vocab_json(os.path.join(model_dir, "vocab.json"), shape.vocab_size)
    vocab = build_vocabulary(hf_pieces, source_spm, shape, os.path.join(model_dir, "vocab.json"))
    raw, weights_path = read_weights(model_dir)
    tensors = tern_tensors(canonical_names(raw), shape, vocab, weights_path)
    try:
        _tern._write_model(out, tern_config_text(shape), vocab.spm, tensors, weight_type)
    except (ValueError, _tern.Error) as e:
        raise ConversionError(f"{model_dir}: {e}")
    return vocab


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tern.convert",
        description="Convert a Hugging Face MarianMTModel directory to a Tern model file.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--hf", metavar="DIR",
                        help="a Hugging Face MarianMTModel directory (config.json, weights, "
                             "source.spm, vocab.json)")
    source.add_argument("--marian", metavar="DIR",
                        help="an original OPUS-MT release (Marian's .npz, *vocab.yml, "
                             "source.spm)")
    parser.add_argument("--npz", help="with --marian: the .npz, when there are several")
    parser.add_argument("--out", required=True, help="the .tern file to write")
    parser.add_argument("--weight-type", default="float32", choices=["float32", "int16", "int8"])
    parser.add_argument("--verify", type=int, default=0, metavar="N",
                        help="translate N sentences with transformers and Tern and compare "
                             "(greedy and beam 4; needs transformers with torch or flax)")
    parser.add_argument("--verify-source", metavar="FILE",
                        help="the sentences --verify translates (default: random pieces of "
                             "source.spm)")
    parser.add_argument("--verify-backend", default="auto", choices=["auto", "torch", "flax"])
    args = parser.parse_args(argv)
    try:
        if args.marian:
            if args.verify:
                raise ConversionError("--verify compares with transformers: give --hf")
            from .opus_release import convert_marian

            vocab = convert_marian(args.marian, args.out, args.weight_type, args.npz)
        else:
            vocab = convert_hf_marian(args.hf, args.out, args.weight_type)
        print(f"tern.convert: wrote {args.out} ({len(vocab.pieces)} pieces, {args.weight_type})",
              file=sys.stderr)
        if args.verify > 0:
            from . import hf_reference
            report = hf_reference.verify(args.hf, args.out, args.verify, args.verify_source,
                                         args.verify_backend)
            print(report.summary(), file=sys.stderr)
            return 0 if report.ok else 1
    except ConversionError as e:
        print(f"tern.convert: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tern.convert: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
