"""Original OPUS-MT releases for tern.convert (python -m tern.convert --marian DIR): Marian's
.npz read through the runtime's importer (tern-npz import's checks), its vocab.yml, source.spm.
Marian's ids become Tern's as a Hugging Face model's do (tern.convert.build_vocabulary), with
zero pad and start rows: Marian's decoder starts from a zero vector."""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional

from . import _tern
from .convert import ConversionError, MarianShape, Vocabulary, build_vocabulary

def read_marian_vocab(path: str) -> List[str]:
    """The pieces of a Marian vocab.yml ("piece": id lines) in id order; ids 0 .. n - 1, each
    once."""
    try:
        import yaml
        with open(path, encoding="utf-8") as f:
            mapping = yaml.safe_load(f)
    except ImportError:
        mapping = _read_simple_yaml(path)
    except Exception as e:  # yaml's errors carry the line
        raise ConversionError(f"{path}: not a Marian vocabulary ({str(e).splitlines()[0]})")
    if not isinstance(mapping, dict) or not mapping:
        raise ConversionError(f"{path}: expected lines of \"piece\": id")
    pieces: List[Optional[str]] = [None] * len(mapping)
    for piece, i in mapping.items():
        if not isinstance(i, int) or not 0 <= i < len(mapping) or pieces[i] is not None:
            raise ConversionError(f"{path}: piece {piece!r} has id {i!r}; the ids must be 0 to "
                                  f"{len(mapping) - 1}, each once")
        pieces[i] = str(piece)
    return pieces  # type: ignore[return-value]


def _read_simple_yaml(path: str) -> Dict[str, int]:
    """Marian's vocab.yml without PyYAML: KEY: ID lines, KEY plain, 'single' or "double"
    quoted."""
    mapping = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, value = line.rpartition(":")
            try:
                if not sep:
                    raise ValueError(line)
                key = key.strip()
                if key.startswith('"'):
                    key = json.loads(re.sub(r"\\x([0-9a-fA-F]{2})", r"\\u00\1", key))
                elif key.startswith("'"):
                    key = key[1:-1].replace("''", "'")
                mapping[key] = int(value)
            except ValueError:
                raise ConversionError(f"{path}:{number}: not a \"piece\": id line")
    return mapping


def convert_marian(model_dir: str, out: str, weight_type: str = "float32",
                   npz: Optional[str] = None) -> Vocabulary:
    """Writes the .tern of an original OPUS-MT release (Marian's .npz, its vocab.yml and
    source.spm in `model_dir`; `npz` picks the model when there are several). The .npz is read
    by the runtime's importer (tern-npz import's checks); Marian's ids become Tern's as for a
    Hugging Face model, with zero pad and start rows (Marian's decoder starts from a zero
    vector)."""
    if weight_type not in ("float32", "int16", "int8"):
        raise ConversionError(f"--weight-type {weight_type}: give float32, int16 or int8")
    files = sorted(os.listdir(model_dir)) if os.path.isdir(model_dir) else []
    if not os.path.isdir(model_dir):
        raise ConversionError(f"{model_dir}: not a directory")
    if npz is None:
        models = [f for f in files if f.endswith(".npz")]
        if len(models) != 1:
            raise ConversionError(f"{model_dir}: {len(models)} .npz files; give the model with "
                                  "--npz")
        npz = os.path.join(model_dir, models[0])
    vocabs = [f for f in files if f.endswith("vocab.yml")]
    if len(vocabs) != 1:
        raise ConversionError(f"{model_dir}: {len(vocabs)} *vocab.yml files; Tern converts "
                              "models with one joint vocabulary")
    vocab_path = os.path.join(model_dir, vocabs[0])
    source_spm_path = os.path.join(model_dir, "source.spm")
    if not os.path.exists(source_spm_path):
        raise ConversionError(f"{source_spm_path}: missing; OPUS-MT's releases segment input "
                              "with it")
    pieces = read_marian_vocab(vocab_path)
    try:
        config_text, vocab_size, tensors = _tern._read_marian_npz(npz)
    except _tern.Error as e:
        raise ConversionError(str(e))
    if vocab_size != len(pieces):
        raise ConversionError(f"{vocab_path}: {len(pieces)} pieces, but {npz} has {vocab_size} "
                              "embedding rows; give the vocabulary the model was trained with")
    ids = {p: i for i, p in enumerate(pieces)}
    if "</s>" not in ids:
        raise ConversionError(f"{vocab_path}: no '</s>' piece")
    shape = MarianShape(d_model=0, ffn_dim=0, heads=0, enc_depth=0, dec_depth=0, activation="",
                        max_length=0, vocab_size=len(pieces), shared=True, pad_id=None,
                        eos_id=ids["</s>"], start_id=None)
    with open(source_spm_path, "rb") as f:
        vocab = build_vocabulary(pieces, f.read(), shape, vocab_path)
    for name in ("Wemb", "encoder_Wemb", "decoder_Wemb"):
        if name in tensors:
            tensors[name] = vocab.take_rows(tensors[name])
    tensors["decoder_ff_logit_out_b"] = vocab.output_bias(tensors["decoder_ff_logit_out_b"])
    try:
        _tern._write_model(out, config_text, vocab.spm, tensors, weight_type)
    except (ValueError, _tern.Error) as e:
        raise ConversionError(f"{npz}: {e}")
    return vocab
