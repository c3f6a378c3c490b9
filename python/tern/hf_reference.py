"""Hugging Face's MarianMTModel as the reference a converted model must equal.

`HfMarian` runs a MarianMTModel directory in transformers (PyTorch, or Flax where PyTorch is
missing): ``generate`` with the settings that make its search Tern's (no forced eos, the pad
token never produced, a beam finished once it holds beam_size hypotheses), and ``log_prob``, the
teacher-forced sum of log-probabilities over the full softmax. `verify` translates sentences
with both and counts the differences; ``python -m tern.convert --verify N`` and the tests use it.
transformers is needed here only; the converter and the runtime never import it.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from . import _tern
from .convert import ConversionError, read_config, read_vocab_json


def _backend(name: str) -> str:
    if name in ("torch", "auto"):
        try:
            import torch  # noqa: F401
            return "torch"
        except ImportError:
            if name == "torch":
                raise ConversionError("--verify-backend torch: torch is not installed")
    try:
        import flax  # noqa: F401
        import jax  # noqa: F401
    except ImportError:
        raise ConversionError("--verify needs transformers with torch or flax installed "
                              "(pip install transformers torch)")
    return "flax"


class HfMarian:
    """A MarianMTModel directory run by transformers; ids are Hugging Face's (vocab.json)."""

    def __init__(self, model_dir: str, backend: str = "auto"):
        try:
            import transformers
        except ImportError:
            raise ConversionError("--verify needs transformers (pip install transformers)")
        self.backend = _backend(backend)
        self.shape = read_config(model_dir)
        self.pieces = read_vocab_json(os.path.join(model_dir, "vocab.json"),
                                      self.shape.vocab_size)
        self.ids = {p: i for i, p in enumerate(self.pieces)}
        if self.backend == "torch":
            self.model = transformers.MarianMTModel.from_pretrained(model_dir).eval()
        else:
            self.model = transformers.FlaxMarianMTModel.from_pretrained(model_dir)
        self.model_dir = model_dir

    def to_ids(self, pieces: Sequence[str]) -> List[int]:
        """The source ids of `pieces` as the tokenizer gives them: unknown pieces as unk, eos
        appended."""
        unk = self.ids["<unk>"]
        return [self.ids.get(p, unk) for p in pieces] + [self.shape.eos_id]

    def to_pieces(self, ids: Sequence[int]) -> List[str]:
        """The output pieces of `ids`, up to (without) eos."""
        out = []
        for i in ids:
            if i == self.shape.eos_id:
                break
            out.append(self.pieces[i])
        return out

    def generate(self, sources: Sequence[Sequence[int]], beam_size: int, max_new_tokens: int,
                 length_penalty: float = 1.0) -> List[List[int]]:
        """Per source, the best output ids after the decoder's start token (eos included when
        produced). One padded batch: one compilation for Flax."""
        pad, eos = self.shape.pad_id, self.shape.eos_id
        # The decoder's positions end at max_position_embeddings.
        max_new_tokens = min(max_new_tokens, self.shape.max_length - 1)
        width = max(len(s) for s in sources)
        ids = np.full((len(sources), width), pad, dtype=np.int32)
        mask = np.zeros((len(sources), width), dtype=np.int32)
        for k, s in enumerate(sources):
            ids[k, :len(s)] = s
            mask[k, :len(s)] = 1
        kwargs = dict(num_beams=beam_size, max_new_tokens=max_new_tokens, do_sample=False,
                      length_penalty=length_penalty, forced_eos_token_id=None,
                      forced_bos_token_id=None, min_length=0, num_return_sequences=1,
                      eos_token_id=eos, pad_token_id=pad,
                      decoder_start_token_id=self.shape.start_id)
        if beam_size > 1:
            kwargs["early_stopping"] = True
        if self.backend == "torch":
            import torch
            with torch.no_grad():
                out = self.model.generate(torch.from_numpy(ids).long(),
                                          attention_mask=torch.from_numpy(mask).long(),
                                          bad_words_ids=[[pad]], no_repeat_ngram_size=0,
                                          repetition_penalty=1.0, **kwargs)
            rows = out.tolist()
        else:
            out = self.model.generate(ids, attention_mask=mask, suppress_tokens=[pad], **kwargs)
            rows = np.asarray(out.sequences).tolist()
        result = []
        for seq in rows:
            seq = seq[1:]  # the decoder's start token
            if eos in seq:
                seq = seq[:seq.index(eos) + 1]
            else:
                seq = [i for i in seq if i != pad]  # padding after a sequence at the limit
            result.append(seq)
        return result

    def log_prob(self, source: Sequence[int], target: Sequence[int]) -> float:
        """log p(target | source), teacher-forced, over the full softmax (pad's mass included,
        as PyTorch's generate() scores)."""
        decoder_input = [self.shape.start_id] + list(target[:-1])
        if self.backend == "torch":
            import torch
            with torch.no_grad():
                logits = self.model(input_ids=torch.tensor([list(source)]),
                                    decoder_input_ids=torch.tensor([decoder_input])).logits
            logits = logits[0].double().numpy()
        else:
            logits = np.asarray(self.model(input_ids=np.array([list(source)], dtype=np.int32),
                                           decoder_input_ids=np.array([decoder_input],
                                                                      dtype=np.int32)).logits,
                                dtype=np.float64)[0]
        logits -= logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        return float(sum(logp[t, i] for t, i in enumerate(target)))


@dataclass
class Report:
    """What `verify` found: per search, the sentences compared and those that differ."""
    backend: str = ""
    compared: int = 0
    differ: List[str] = field(default_factory=list)
    score_error: float = 0.0  # the largest |Tern's score - transformers'|, in nats
    tolerance: float = 0.0
    segmentation_differs: int = 0
    unfinished: int = 0  # transformers' translations that reached the length limit

    @property
    def ok(self) -> bool:
        return self.compared > 0 and not self.differ and self.score_error <= self.tolerance \
            and self.segmentation_differs == 0

    def summary(self) -> str:
        lines = [f"tern.convert --verify: {self.compared} translations compared with "
                 f"transformers ({self.backend}); {len(self.differ)} differ; largest score "
                 f"difference {self.score_error:.2e} (tolerance {self.tolerance:.0e})"]
        if self.unfinished:
            lines.append(f"  {self.unfinished} more reached transformers' length limit without eos "
                         "and were not compared")
        if self.segmentation_differs:
            lines.append(f"  {self.segmentation_differs} sentences segmented differently from "
                         "MarianTokenizer")
        lines += ["  " + d for d in self.differ[:10]]
        return "\n".join(lines)


def random_sources(pieces: Sequence[str], count: int, seed: int = 0) -> List[List[str]]:
    """`count` sentences of 3 to 20 pieces drawn from `pieces`."""
    rng = random.Random(seed)
    return [[rng.choice(pieces) for _ in range(rng.randint(3, 20))] for _ in range(count)]


def compare(hf: HfMarian, tern_model: str, sources: Sequence[Sequence[str]],
            beam_sizes: Sequence[int] = (1, 4), length_penalty: float = 1.0,
            factor: float = 3.0, tolerance: float = 1e-3) -> Report:
    """Translates `sources` (pieces) with transformers and with Tern's `tern_model`; a
    translation differs when its pieces do or its score is off by more than `tolerance`."""
    translator = _tern.Translator(tern_model, threads=1)
    report = Report(backend=hf.backend, tolerance=tolerance)
    ids = [hf.to_ids(s) for s in sources]
    # transformers' limit is the batch's; at most every sentence's own in Tern.
    limit = int(factor * min(len(i) for i in ids)) + 10
    for beam in beam_sizes:
        result = translator.translate_batch(
            [list(s) for s in sources], beam_size=beam, return_scores=True,
            length_penalty=length_penalty, max_decoding_length_factor=factor)
        expected = hf.generate(ids, beam, limit, length_penalty)
        for k in range(len(sources)):
            got, want = list(result[k].hypotheses[0]), hf.to_pieces(expected[k])
            if expected[k][-1:] != [hf.shape.eos_id]:
                report.unfinished += 1  # the limits differ: not compared
                continue
            report.compared += 1
            if got != want:
                report.differ.append(f"beam {beam}, sentence {k}: Tern {' '.join(got)!r}, "
                                     f"transformers {' '.join(want)!r}")
                continue
            reference = hf.log_prob(ids[k], expected[k])
            length = max(len(expected[k]), 1)
            normalized = reference / length ** length_penalty if length_penalty else reference
            error = max(abs(result[k].log_probs[0] - reference),
                        abs(result[k].scores[0] - normalized))
            report.score_error = max(report.score_error, error)
    return report


def verify(model_dir: str, tern_model: str, count: int, source_file: Optional[str] = None,
           backend: str = "auto") -> Report:
    """`compare` (greedy, and beam 4 with PyTorch) on `count` sentences: the first lines of `source_file`, segmented by
    MarianTokenizer (and Tern's segmentation of the same text checked against it), or random
    pieces of source.spm."""
    hf = HfMarian(model_dir, backend)
    segmentation_differs = 0
    if source_file:
        import transformers
        tokenizer = transformers.MarianTokenizer.from_pretrained(model_dir)
        with open(source_file, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(count), f)]
        sources = [tokenizer.tokenize(line) for line in lines]
        tern_pieces = _tern.Translator(tern_model, threads=1).encode(lines)
        segmentation_differs = sum(a != b for a, b in zip(sources, tern_pieces))
    else:
        with open(os.path.join(model_dir, "source.spm"), "rb") as f:
            spm = [p for p, _, kind in _tern._spm_pieces(f.read()) if kind == 1]
        sources = random_sources([p for p in spm if p in hf.ids], count)
    # Flax's beam search stops by other rules than PyTorch's (and Tern's): greedy only there.
    report = compare(hf, tern_model, sources, beam_sizes=(1, 4) if hf.backend == "torch" else (1,))
    report.segmentation_differs = segmentation_differs
    return report


