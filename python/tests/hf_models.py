"""Small random Hugging Face MarianMTModel directories, as save_pretrained writes them, for the
converter's tests: SentencePiece models trained on text made from the golden models' source (source.spm, target.spm),
vocab.json as Marian's conversion builds it (eos 0, unk 1, the pieces of both, pad last),
config.json, the weights in safetensors (PyTorch's names, or Flax's when only Flax is there).

The weights are drawn wider than transformers' init (init_std) so that the next token is rarely a
near tie, and the output bias favours eos enough that translations end well before the length
limit; the pad row is zero with bias 0, as in the OPUS-MT models, so its share of the softmax is
real (PyTorch's generate() counts it; Tern must too).
"""

from __future__ import annotations

import json
import pathlib
import random

import numpy as np

GOLDEN_SOURCE = pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden" / "source.txt"


def train_spm(prefix: pathlib.Path, lines, vocab_size: int) -> None:
    import sentencepiece as spm

    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix),
                                   vocab_size=vocab_size, character_coverage=1.0,
                                   model_type="unigram", minloglevel=2, num_threads=1,
                                   hard_vocab_limit=False)
    text.unlink()
    prefix.with_suffix(".vocab").unlink()
    prefix.with_suffix(".model").rename(prefix.with_suffix(".spm"))


def sentences(language: str, count: int = 400, seed: int = 0):
    """`count` lines of words from the golden models' source text (tests/golden/source.txt),
    shuffled into new sentences; the "en" side spells each word backwards, so that the two
    SentencePiece models differ."""
    words = GOLDEN_SOURCE.read_text(encoding="utf-8").split()
    rng = random.Random(seed if language == "es" else seed + 1)
    lines = []
    for _ in range(count):
        line = [rng.choice(words) for _ in range(rng.randint(4, 14))]
        lines.append(" ".join(w if language == "es" else w[::-1] for w in line))
    return lines


def spm_pieces(path: pathlib.Path):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i))]


def make_marian_dir(directory: pathlib.Path, *, d_model=32, heads=4, ffn=64, enc_layers=2,
                    dec_layers=2, activation="swish", shared=True, backend="torch", seed=0,
                    vocab_size=160, eos_bias=3.0, init_std=0.25, extra_config=None,
                    language_codes=()):
    """Writes a random MarianMTModel directory to `directory`; returns its config dict."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    train_spm(directory / "source", sentences("es"), vocab_size)
    train_spm(directory / "target", sentences("en"), vocab_size)
    pieces = ["</s>", "<unk>"] + list(language_codes)
    for piece in spm_pieces(directory / "source.spm") + spm_pieces(directory / "target.spm"):
        if piece not in pieces:
            pieces.append(piece)
    pieces.append("<pad>")
    vocab = {p: i for i, p in enumerate(pieces)}
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), "utf-8")
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"model_max_length": 512, "separate_vocabs": False}), "utf-8")
    v, pad = len(pieces), len(pieces) - 1
    config = dict(vocab_size=v, decoder_vocab_size=v, d_model=d_model,
                  encoder_layers=enc_layers, decoder_layers=dec_layers,
                  encoder_attention_heads=heads, decoder_attention_heads=heads,
                  encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_position_embeddings=128,
                  activation_function=activation, scale_embedding=True, pad_token_id=pad,
                  eos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0,
                  share_encoder_decoder_embeddings=shared, init_std=init_std, dropout=0.0,
                  attention_dropout=0.0, activation_dropout=0.0)
    config.update(extra_config or {})
    marian_config = transformers.MarianConfig(**config)
    rng = np.random.default_rng(seed)
    bias = rng.normal(0.0, 1.0, (1, v)).astype(np.float32)
    bias[0, 0] += eos_bias
    bias[0, pad] = 0.0
    if backend == "torch":
        import torch

        torch.manual_seed(seed)
        model = transformers.MarianMTModel(marian_config).eval()
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 1 and p.requires_grad:  # biases and layer norms: not the defaults
                    p.add_(torch.randn_like(p) * 0.1)
            embeddings = (model.model.shared, model.model.encoder.embed_tokens,
                          model.model.decoder.embed_tokens)
            for emb in {id(e): e for e in embeddings if e is not None}.values():
                emb.weight[pad].zero_()
            model.final_logits_bias.copy_(torch.from_numpy(bias))
        model.generation_config.bad_words_ids = [[pad]]
        model.save_pretrained(directory, safe_serialization=True)
    else:
        import jax

        model = transformers.FlaxMarianMTModel(marian_config, seed=seed)
        params = jax.tree_util.tree_map(np.array, model.params)

        def perturb(tree):
            for key, value in tree.items():
                if isinstance(value, dict):
                    perturb(value)
                elif key in ("bias", "scale"):
                    tree[key] = value + rng.normal(0.0, 0.1, value.shape).astype(np.float32)

        perturb(params)
        params["model"]["shared"]["embedding"][pad] = 0.0
        params["final_logits_bias"] = bias
        model.params = params
        model.save_pretrained(directory, safe_serialization=True)
    return config
