"""Tern's inference runtime from Python.

    import tern
    translator = tern.Translator("model.tern", threads=2)
    results = translator.translate_batch(["Hola, mundo."], beam_size=4)
    print(results[0].hypotheses[0])

    tern.score_bleu(hypotheses, references)  # sacrebleu's corpus BLEU, as tern-score computes it

`Translator` reads a `.tern` file (tern-export's, or tern-npz's import of a Marian model) with its
embedded SentencePiece vocabulary; it takes raw text or lists of pieces. Errors from the runtime
are `tern.Error` (a RuntimeError) carrying its one-line message; bad arguments are ValueError or
TypeError naming the argument. docs/python.md is the guide.
"""

import os as _os


def _blas_core_for_this_cpu():
    """The OpenBLAS core with this CPU's vector units (AVX-512: SkylakeX, AVX2 and FMA: Haswell),
    or None. OpenBLAS picks its kernels once, when it loads, and picks a generic core on CPUs its
    version does not know (the programs restart themselves with OPENBLAS_CORETYPE; a Python
    process cannot, so the package sets it for the load of its own OpenBLAS)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
            else:
                return None
    except OSError:
        return None
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def _import_extension():
    core = None if "OPENBLAS_CORETYPE" in _os.environ else _blas_core_for_this_cpu()
    if core:
        _os.environ["OPENBLAS_CORETYPE"] = core
    try:
        from . import _tern
    finally:
        if core:
            del _os.environ["OPENBLAS_CORETYPE"]
    return _tern


_tern = _import_extension()

Error = _tern.Error
Translator = _tern.Translator
TranslationResult = _tern.TranslationResult
BleuScore = _tern.BleuScore
ChrfScore = _tern.ChrfScore
score_bleu = _tern.score_bleu
score_chrf = _tern.score_chrf
set_threads = _tern.set_threads
blas_core = _tern.blas_core

__version__ = "0.1.0"
__all__ = [
    "Error",
    "Translator",
    "TranslationResult",
    "BleuScore",
    "ChrfScore",
    "score_bleu",
    "score_chrf",
    "set_threads",
    "blas_core",
]
