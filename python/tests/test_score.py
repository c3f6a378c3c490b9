"""tern.score_bleu and score_chrf: sacrebleu's figures, tern-score's lines, and bad input."""

import subprocess

import pytest

import tern

HYPS = ["The cat sat on the mat.", "In the beginning God made heaven and earth.",
        "He said, “Let there be light”, and there was light!", "¿Qué?"]
REFS = ["The cat is on the mat.", "In the beginning God created the heavens and the earth.",
        "And God said, Let there be light: and there was light.", "What?"]


def test_bleu_and_chrf_equal_sacrebleu():
    sacrebleu = pytest.importorskip("sacrebleu")
    want = sacrebleu.corpus_bleu(HYPS, [REFS])
    got = tern.score_bleu(HYPS, REFS)
    assert got.score == pytest.approx(want.score, abs=1e-9)
    assert got.precisions == pytest.approx(want.precisions, abs=1e-9)
    assert (got.hyp_len, got.ref_len) == (want.sys_len, want.ref_len)
    assert tern.score_chrf(HYPS, REFS).score == pytest.approx(
        sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-9)


def test_str_is_tern_scores_line(tmp_path, bin_dir):
    program = bin_dir / "tern-score"
    if not program.exists():
        pytest.skip(f"{program} is not built")
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    lines = subprocess.run([str(program), "--ref", str(ref)], input="\n".join(HYPS) + "\n",
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines == [str(tern.score_bleu(HYPS, REFS)), str(tern.score_chrf(HYPS, REFS))]


def test_identical_text_scores_100():
    assert tern.score_bleu(REFS, REFS).score == pytest.approx(100)
    assert tern.score_chrf(REFS, REFS).score == pytest.approx(100)


@pytest.mark.parametrize("scorer", [tern.score_bleu, tern.score_chrf])
def test_mismatched_or_empty_input_is_refused(scorer):
    with pytest.raises(ValueError, match="hypotheses has 1 lines but references has 2"):
        scorer(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="nothing to score"):
        scorer([], [])
    with pytest.raises(TypeError):
        scorer("one string", ["a"])
