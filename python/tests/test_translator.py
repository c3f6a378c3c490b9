"""tern.Translator against the golden models' recorded translations and tern-translate."""

import subprocess
import threading

import pytest

import tern
from conftest import expected

MODELS = ["transformer_v2_float32", "transformer_v2_int16", "transformer_v1_float32",
          "s2s_v2_float32"]


@pytest.mark.parametrize("model", MODELS)
def test_text_matches_the_golden_translations(golden, source_lines, model):
    translator = tern.Translator(str(golden / f"{model}.tern"), threads=1)
    results = translator.translate_batch(source_lines, beam_size=4, return_scores=True)
    assert len(results) == len(source_lines)
    for result, (text, score, normalized) in zip(results, expected(golden, model)):
        assert result.hypotheses == [text]
        assert result.log_probs[0] == pytest.approx(score, rel=1e-4)
        assert result.scores[0] == pytest.approx(normalized, rel=1e-4)
        assert result.pieces_over_limit == 0


def test_equals_tern_translate(golden, source_lines, bin_dir):
    model = str(golden / "transformer_v2_int16.tern")
    program = bin_dir / "tern-translate"
    if not program.exists():
        pytest.skip(f"{program} is not built")
    cli = subprocess.run([str(program), "--model", model, "--beam", "2", "--threads", "1"],
                         input="\n".join(source_lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    results = tern.Translator(model, threads=1).translate_batch(source_lines, beam_size=2)
    assert [r.hypotheses[0] for r in results] == cli


def test_pieces_in_pieces_out(golden, source_lines):
    translator = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    text = translator.translate_batch(source_lines, return_scores=True)
    pieces = translator.encode(source_lines)
    assert all(p and all(" " not in x for x in p) for p in pieces)
    assert translator.decode(pieces[0]) == source_lines[0]
    by_pieces = translator.translate_batch(pieces, return_scores=True)
    for t, p in zip(text, by_pieces):
        assert isinstance(p.hypotheses[0], list)
        assert translator.decode(p.hypotheses[0]) == t.hypotheses[0]
        assert p.scores == t.scores


def test_unknown_piece_is_unk(golden):
    translator = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    assert translator.decode(["\u2581no-such-piece"]) == translator.decode(["<unk>"])


def test_n_best_is_sorted_and_bounded(golden, source_lines):
    translator = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    results = translator.translate_batch(source_lines[:3], beam_size=4, n_best=4,
                                         return_scores=True)
    for result in results:
        assert 1 <= len(result.hypotheses) <= 4
        assert len(result.scores) == len(result.hypotheses) == len(result.log_probs)
        assert result.scores == sorted(result.scores, reverse=True)


def test_over_limit_lines_keep_their_place(golden, source_lines):
    translator = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    long_line = " ".join(["palabra"] * 50)
    results = translator.translate_batch([source_lines[0], long_line, ""], max_input_length=20)
    assert results[0].hypotheses and results[0].pieces_over_limit == 0
    assert results[1].hypotheses == [] and results[1].pieces_over_limit > 20
    assert results[2].hypotheses == [""]
    cropped = translator.translate_batch([long_line], max_input_length=20, crop_input=True)
    assert cropped[0].pieces_over_limit == 0 and len(cropped[0].hypotheses) == 1


def test_threads_share_one_translator(golden, source_lines):
    translator = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    want = [r.hypotheses for r in translator.translate_batch(source_lines)]
    got, errors = {}, []

    def work(i):
        try:
            got[i] = [r.hypotheses for r in translator.translate_batch(source_lines)]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(got[i] == want for i in range(4))


def test_workers_give_the_same_translations(golden, source_lines):
    model = str(golden / "transformer_v2_float32.tern")
    one = tern.Translator(model, threads=1).translate_batch(source_lines)
    two = tern.Translator(model, workers=2, max_batch_tokens=40).translate_batch(source_lines)
    assert [r.hypotheses for r in one] == [r.hypotheses for r in two]


def test_metadata(golden):
    meta = tern.Translator(str(golden / "transformer_v2_int16.tern")).metadata
    assert meta["arch"] == "transformer"
    assert meta["weight_type"] == "int16"
    assert meta["vocab_size"] == 300
    assert meta["emb_dim"] == 16
    assert tern.Translator(str(golden / "transformer_v2_float32.tern")).metadata[
        "weight_type"] == "float32"


def test_quantize_at_load(golden, source_lines):
    model = str(golden / "transformer_v2_float32.tern")
    float32 = tern.Translator(model, threads=1).translate_batch(source_lines, return_scores=True)
    for compute_type in ("int16", "int8"):
        translator = tern.Translator(model, threads=1, compute_type=compute_type)
        results = translator.translate_batch(source_lines, return_scores=True)
        assert all(len(r.hypotheses) == 1 for r in results)
        # Integer products: the same model, so close scores, but not the float32 ones.
        assert [r.log_probs for r in results] != [r.log_probs for r in float32]
        for q, f in zip(results, float32):
            if q.hypotheses == f.hypotheses:
                assert q.log_probs[0] == pytest.approx(f.log_probs[0], rel=0.05)


def test_speed_switches(golden, source_lines):
    """tern-translate's switches: the fused output pass and skipping zero activations give the
    same translations and scores; a shortlist the model lacks is one clear error."""
    model = str(golden / "transformer_v2_int16.tern")
    plain = tern.Translator(model, threads=1).translate_batch(source_lines, return_scores=True)
    fast = tern.Translator(model, threads=1, fused_output=True, skip_zero_activations=True)
    results = fast.translate_batch(source_lines, return_scores=True)
    assert [r.hypotheses for r in results] == [r.hypotheses for r in plain]
    for a, b in zip(results, plain):
        assert a.log_probs[0] == pytest.approx(b.log_probs[0], abs=1e-4)
    assert tern.Translator(model, threads=1, fused_output=False, integer_output_layer=True)
    with pytest.raises(tern.Error, match="has no lexical shortlist"):
        tern.Translator(model, shortlist=True)
    with pytest.raises(TypeError):
        tern.Translator(model, "cpu", 0, 1, "default", 4096, True)  # keyword-only switches
