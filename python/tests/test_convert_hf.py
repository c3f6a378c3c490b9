"""Converted Hugging Face Marian models equal transformers: small random MarianMTModels
(hf_models.py) in several configurations are saved, converted, and translated by both.

- Greedy: Tern's pieces equal generate()'s, and its log-probabilities the model's (teacher-forced
  over the full softmax), to float32 tolerance.
- Beam: each of Tern's 6-best hypotheses is scored as transformers scores it; with PyTorch, the
  best of a beam of 4 equals generate(num_beams=4, early_stopping=True)'s (Flax's beam search
  stops by other rules, so it is not the reference).
- Text: Tern's segmentation equals MarianTokenizer's, and its detokenized output the tokenizer's
  decoding of generate()'s ids.

Runs where transformers is installed with torch or flax (scripts/install-deps.sh --tests installs
flax's CPU wheels into work/hf-venv; ctest's python_hf_tests runs this file there).
"""

import importlib.util
import subprocess
import sys
import warnings

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import hf_models  # noqa: E402
import tern  # noqa: E402
from tern import convert, hf_reference  # noqa: E402

BACKENDS = [b for b in ("torch", "flax") if importlib.util.find_spec(b)]
if not BACKENDS:
    pytest.skip("transformers has neither torch nor flax here", allow_module_level=True)
warnings.filterwarnings("ignore", category=UserWarning)

TOLERANCE = 1e-4  # nats, on sums over up to ~60 tokens in float32

# name: (make_marian_dir keyword arguments, backends that can build it)
CONFIGS = {
    "swish-2x2": (dict(activation="swish", enc_layers=2, dec_layers=2), BACKENDS),
    "relu-1x3": (dict(activation="relu", enc_layers=1, dec_layers=3, seed=1), BACKENDS),
    "gelu_new-3x1": (dict(activation="gelu_new", enc_layers=3, dec_layers=1, heads=2, eos_bias=5.5,
                          seed=2), BACKENDS),
    # Flax's Marian always shares the embedding.
    "separate-embeddings": (dict(shared=False, seed=3), ["torch"] if "torch" in BACKENDS else []),
}
# Seeds whose random model ends enough sentences before the limit, where a backend's own
# initialization needs another.
OVERRIDES = {("swish-2x2", "torch"): dict(seed=10)}
CASES = [(name, backend) for name, (_, backends) in CONFIGS.items() for backend in backends]


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{b}" for n, b in CASES])
def model(request, tmp_path_factory):
    name, backend = request.param
    directory = tmp_path_factory.mktemp(f"{name}-{backend}")
    kwargs = dict(init_std=0.2, eos_bias=4.5)
    kwargs.update(CONFIGS[name][0])
    kwargs.update(OVERRIDES.get((name, backend), {}))
    hf_models.make_marian_dir(directory / "hf", backend=backend, **kwargs)
    convert.convert_hf_marian(str(directory / "hf"), str(directory / "model.tern"))
    hf = hf_reference.HfMarian(str(directory / "hf"), backend)
    pieces = [p for p in hf_models.spm_pieces(directory / "hf" / "source.spm") if p in hf.ids]
    return hf, str(directory / "model.tern"), hf_reference.random_sources(pieces, 16, seed=7)


def test_greedy_equals_generate(model):
    hf, path, sources = model
    report = hf_reference.compare(hf, path, sources, beam_sizes=(1,), factor=5.0,
                                  tolerance=TOLERANCE)
    assert report.differ == []
    assert report.score_error <= TOLERANCE
    assert report.unfinished <= 3 * len(sources) // 4, "the test model rarely ends its sentences"
    assert report.compared + report.unfinished == len(sources)


def test_n_best_scores_equal_the_models(model):
    hf, path, sources = model
    translator = tern.Translator(path, threads=1)
    results = translator.translate_batch(sources[:6], beam_size=6, n_best=6, return_scores=True,
                                         max_decoding_length_factor=5.0)
    checked = 0
    for source, result in zip(sources, results):
        ids = hf.to_ids(source)
        for pieces, log_prob in zip(result.hypotheses, result.log_probs):
            target = [hf.ids[p] for p in pieces]
            if len(target) < 5 * len(ids) + 10:  # ended with eos, not at the limit
                target.append(hf.shape.eos_id)
            assert abs(hf.log_prob(ids, target) - log_prob) <= TOLERANCE, pieces
            checked += 1
    assert checked >= 30


def test_beam_equals_pytorch_generate(model):
    hf, path, sources = model
    if hf.backend != "torch":
        pytest.skip("the reference beam search is PyTorch's generate()")
    report = hf_reference.compare(hf, path, sources, beam_sizes=(4,), factor=5.0,
                                  tolerance=TOLERANCE)
    assert report.differ == []
    assert report.score_error <= TOLERANCE
    assert report.unfinished <= 3 * len(sources) // 4


def test_text_in_and_out_equal_the_tokenizers(model):
    hf, path, _ = model
    tokenizer = transformers.MarianTokenizer.from_pretrained(hf.model_dir)
    lines = hf_models.GOLDEN_SOURCE.read_text(encoding="utf-8").splitlines()
    translator = tern.Translator(path, threads=1)
    assert translator.encode(lines) == [tokenizer.tokenize(line) for line in lines]
    ids = [hf.to_ids(tokenizer.tokenize(line)) for line in lines]
    outputs = hf.generate(ids, 1, int(5 * min(len(i) for i in ids)) + 10)
    results = translator.translate_batch(lines, beam_size=1, max_decoding_length_factor=5.0)
    for line, out, result in zip(lines, outputs, results):
        if out[-1:] != [hf.shape.eos_id]:
            continue
        assert result.hypotheses[0] == tokenizer.decode(out, skip_special_tokens=True), line


def test_verify_command(model, tmp_path):
    hf, path, _ = model
    out = tmp_path / "again.tern"
    run = subprocess.run([sys.executable, "-m", "tern.convert", "--hf", hf.model_dir, "--out",
                          str(out), "--weight-type", "float32", "--verify", "6",
                          "--verify-backend", hf.backend], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "0 differ" in run.stderr
    assert out.read_bytes() == open(path, "rb").read()
