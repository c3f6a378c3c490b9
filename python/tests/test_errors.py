"""Bad models and bad arguments: one clear message each, naming what to fix."""

import pytest

import tern


def test_missing_model_is_a_tern_error(tmp_path):
    with pytest.raises(tern.Error, match="no-such.tern"):
        tern.Translator(str(tmp_path / "no-such.tern"))


def test_corrupted_model_is_a_tern_error(tmp_path, golden):
    data = bytearray((golden / "transformer_v2_float32.tern").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.tern"
    bad.write_bytes(bytes(data))
    with pytest.raises(tern.Error, match="bad.tern"):
        tern.Translator(str(bad))
    assert issubclass(tern.Error, RuntimeError)


@pytest.mark.parametrize("kwargs, message", [
    ({"device": "tpu"}, "device must be"),
    ({"threads": -1}, "threads must be"),
    ({"workers": 0}, "workers must be"),
    ({"workers": 2, "threads": 2}, "give one or the other"),
    ({"compute_type": "float16"}, "compute_type must be"),
    ({"max_batch_tokens": 0}, "max_batch_tokens must be"),
])
def test_bad_constructor_arguments(golden, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tern.Translator(str(golden / "transformer_v2_float32.tern"), **kwargs)


@pytest.fixture(scope="module")
def translator(golden):
    return tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"beam_size": 0}, "beam_size must be between 1 and 1024, not 0"),
    ({"beam_size": 2, "n_best": 3}, r"n_best must be between 1 and beam_size \(2\), not 3"),
    ({"max_input_length": -1}, "max_input_length must be"),
    ({"length_penalty": float("nan")}, "length_penalty must be"),
    ({"max_decoding_length_factor": 0.0}, "max_decoding_length_factor must be"),
])
def test_bad_search_arguments(translator, kwargs, message):
    with pytest.raises(ValueError, match=message):
        translator.translate_batch(["Hola."], **kwargs)


def test_bad_sources(translator):
    with pytest.raises(TypeError, match="source is one string"):
        translator.translate_batch("Hola.")
    with pytest.raises(TypeError, match=r"source\[1\]: give every line as a string"):
        translator.translate_batch(["Hola.", ["\u2581Hola"]])
    with pytest.raises(TypeError, match=r"source\[0\]\[1\] is not a string"):
        translator.translate_batch([["\u2581Hola", 3]])
    with pytest.raises(ValueError, match=r"source\[0\]\[0\] is not a piece"):
        translator.translate_batch([["two words"]])
    with pytest.raises(TypeError, match=r"source\[0\] is neither"):
        translator.translate_batch([3])


def test_empty_batch(translator):
    assert translator.translate_batch([]) == []
