"""Type stubs of tern._tern, the extension module (python/src/tern_module.cc)."""

from typing import Literal, Optional, Sequence, Union

class Error(RuntimeError):
    """An error of the runtime (a missing, corrupted or unsupported model file, a GPU that is not
    there, ...), with its one-line message."""

class TranslationResult:
    """One source line's translations, best first."""

    hypotheses: list[Union[str, list[str]]]
    """Text for a call given text; lists of pieces for a call given pieces. Empty when the line
    was not translated (pieces_over_limit > 0)."""
    scores: list[float]
    """With return_scores: each hypothesis's log-probability / length ** length_penalty, the
    score the search ranks by (eos counted in the length)."""
    log_probs: list[float]
    """With return_scores: each hypothesis's summed log-probability (its eos included)."""
    pieces_over_limit: int
    """> 0: the line has this many pieces, more than max_input_length, and was not translated
    (crop_input=True cuts it instead)."""

class Translator:
    """A .tern model loaded for translation. Calls from several Python threads are safe: each
    releases the GIL while it decodes, and they are served one at a time."""

    def __init__(
        self,
        model_path: str,
        device: Literal["cpu", "cuda"] = "cpu",
        threads: int = 0,
        workers: int = 1,
        compute_type: Literal["default", "int16", "int8"] = "default",
        max_batch_tokens: int = 4096,
        *,
        fused_output: Optional[bool] = None,
        integer_output_layer: bool = False,
        skip_zero_activations: bool = False,
        shortlist: bool = False,
        shortlist_per_sentence: bool = False,
        clusters: bool = False,
    ) -> None:
        """threads: compute threads of the process (0: TERN_THREADS, else min(cores, 8)); a
        process-wide setting, as tern.set_threads. workers: CPU batches decoded at once, a
        thread each (not with threads > 1). compute_type: "default" runs the file's weights as
        stored; "int16"/"int8" quantize float32 weights at load. max_batch_tokens: a batch's
        budget in padded source tokens. The keyword-only switches are tern-translate's of the
        same names (docs/runtime.md): fused_output (None: the device's default),
        integer_output_layer and skip_zero_activations (integer models), shortlist,
        shortlist_per_sentence and clusters (the model's tables, from tern-vocab-tables)."""
    def translate_batch(
        self,
        source: Sequence[Union[str, Sequence[str]]],
        *,
        beam_size: int = 4,
        n_best: int = 1,
        return_scores: bool = False,
        max_input_length: int = 0,
        crop_input: bool = False,
        length_penalty: float = 1.0,
        max_decoding_length_factor: float = 2.0,
        max_batch_size: int = 0,
    ) -> list[TranslationResult]:
        """Translates every line of `source` (all strings, or all lists of the model's pieces),
        returning one result per line in input order. max_input_length: the longest line in
        pieces (0: the model's trained length); a longer one is not translated unless
        crop_input. length_penalty: the exponent of the length normalization. max_batch_size: at
        most this many lines a batch (0: batches bounded by max_batch_tokens only); the lines
        are sorted by length and batched within the call."""
    def encode(self, lines: Sequence[str]) -> list[list[str]]:
        """Each line as the model's SentencePiece pieces (what translate_batch takes)."""
    def decode(self, pieces: Sequence[str]) -> str:
        """The text of a list of the model's pieces (an unknown piece decodes as <unk>)."""
    @property
    def metadata(self) -> dict[str, Optional[Union[str, int, bool]]]:
        """The model: path, arch, arch_revision, weight_type ("float32", "int16" or "int8"),
        vocab_size, emb_dim, enc_depth, dec_depth, heads, ffn_dim, max_length, tied_embeddings,
        pre_norm, source_language and target_language (from the training files' suffixes when
        they are language codes, else None)."""
    @property
    def max_input_length(self) -> int:
        """The longest source line translated by default, in pieces."""

class BleuScore:
    score: float
    precisions: list[float]
    bp: float
    ratio: float
    hyp_len: int
    ref_len: int

class ChrfScore:
    score: float

def score_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """sacrebleu's corpus BLEU with its defaults (13a, exp smoothing), as tern-score prints it;
    str() is sacrebleu's line."""

def score_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> ChrfScore:
    """sacrebleu's corpus chrF2 with its defaults, as tern-score prints it."""

def set_threads(threads: int) -> None:
    """The process's compute threads (Tern's pool and the BLAS together)."""

def blas_core() -> str:
    """OpenBLAS's kernel family in use ("SkylakeX", "Haswell", ...), or "" with another BLAS."""
