"""tern.convert without transformers: hand-written MarianMTModel directories (numpy weights in
safetensors, the golden model's SentencePiece model as source.spm) convert, load and translate;
PyTorch's and Flax's layouts give the same file; every refusal names its file and field.
test_convert_hf.py proves the converted models equal transformers' where it is installed."""

import json
import pathlib
import struct
import sys

import pytest

np = pytest.importorskip("numpy")

import tern  # noqa: E402
from tern import convert, opus_release  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from tern_model import TernModel  # noqa: E402  (bench/tern_model.py: the .tern reader)


def golden_spm(golden):
    """The SentencePiece model embedded in a golden .tern."""
    return TernModel(str(golden / "transformer_v2_float32.tern")).vocab_bytes


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


D, FFN, HEADS = 16, 32, 2


def hf_weights(v, enc_layers=1, dec_layers=1, seed=0, flax=False):
    """Random MarianMTModel weights under PyTorch's names and layouts, or Flax's."""
    rng = np.random.default_rng(seed)
    w = {"model.shared.weight": rng.normal(0, 0.3, (v, D)),
         "final_logits_bias": rng.normal(0, 1, (1, v))}

    def linear(name, n_in, n_out):
        w[name + ".weight"] = rng.normal(0, 0.3, (n_out, n_in))
        w[name + ".bias"] = rng.normal(0, 0.1, (n_out,))

    def norm(name):
        w[name + ".weight"] = 1 + rng.normal(0, 0.1, (D,))
        w[name + ".bias"] = rng.normal(0, 0.1, (D,))

    for stack, layers in (("encoder", enc_layers), ("decoder", dec_layers)):
        for i in range(layers):
            p = f"model.{stack}.layers.{i}"
            attentions = ["self_attn"] + (["encoder_attn"] if stack == "decoder" else [])
            for a in attentions:
                for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    linear(f"{p}.{a}.{m}", D, D)
                norm(f"{p}.{a}_layer_norm")
            linear(f"{p}.fc1", D, FFN)
            linear(f"{p}.fc2", FFN, D)
            norm(f"{p}.final_layer_norm")
    if not flax:
        return w
    out = {}
    for name, a in w.items():
        if name == "model.shared.weight":
            out["model.shared.embedding"] = a
        elif name.endswith("_norm.weight"):
            out[name[:-len("weight")] + "scale"] = a
        elif name.endswith(".weight"):
            out[name[:-len("weight")] + "kernel"] = a.T
        else:
            out[name] = a
    return out


def make_dir(path, golden, config=None, flax=False, weights=None):
    path.mkdir(parents=True, exist_ok=True)
    spm = golden_spm(golden)
    (path / "source.spm").write_bytes(spm)
    (path / "target.spm").write_bytes(spm)
    pieces = [p for p, _, kind in tern._tern._spm_pieces(spm) if kind == convert.NORMAL]
    vocab = ["</s>", "<unk>"] + pieces + ["<pad>"]
    (path / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}), "utf-8")
    v = len(vocab)
    c = {"model_type": "marian", "vocab_size": v, "decoder_vocab_size": v, "d_model": D,
         "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": HEADS,
         "decoder_attention_heads": HEADS, "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN,
         "max_position_embeddings": 64, "activation_function": "swish",
         "scale_embedding": True, "pad_token_id": v - 1, "eos_token_id": 0,
         "decoder_start_token_id": v - 1, "share_encoder_decoder_embeddings": True}
    c.update(config or {})
    (path / "config.json").write_text(json.dumps(c), "utf-8")
    write_safetensors(path / "model.safetensors",
                      weights if weights is not None else hf_weights(v, flax=flax))
    return vocab


def test_a_converted_model_loads_and_translates(tmp_path, golden, source_lines):
    vocab = make_dir(tmp_path / "hf", golden)
    out = tmp_path / "model.tern"
    assert convert.main(["--hf", str(tmp_path / "hf"), "--out", str(out)]) == 0
    t = tern.Translator(str(out), threads=1)
    meta = t.metadata
    assert meta["arch"] == "transformer" and meta["weight_type"] == "float32"
    # pad, unk, bos and eos first, then vocab.json's other pieces in their order.
    assert meta["vocab_size"] == len(vocab) + 1
    results = t.translate_batch(source_lines[:4], beam_size=2, return_scores=True)
    assert all(r.scores[0] < 0 for r in results)
    # The text is segmented as source.spm does (it is the golden model's vocabulary here).
    golden_model = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    assert t.encode(source_lines[:8]) == golden_model.encode(source_lines[:8])


def test_pytorch_and_flax_layouts_give_the_same_file(tmp_path, golden):
    make_dir(tmp_path / "pt", golden)
    make_dir(tmp_path / "flax", golden, flax=True)
    convert.convert_hf_marian(str(tmp_path / "pt"), str(tmp_path / "pt.tern"))
    convert.convert_hf_marian(str(tmp_path / "flax"), str(tmp_path / "flax.tern"))
    assert (tmp_path / "pt.tern").read_bytes() == (tmp_path / "flax.tern").read_bytes()


@pytest.mark.parametrize("weight_type", ["int16", "int8"])
def test_quantized_exports(tmp_path, golden, weight_type, source_lines):
    make_dir(tmp_path / "hf", golden)
    convert.convert_hf_marian(str(tmp_path / "hf"), str(tmp_path / "f.tern"))
    convert.convert_hf_marian(str(tmp_path / "hf"), str(tmp_path / "q.tern"), weight_type)
    q = tern.Translator(str(tmp_path / "q.tern"), threads=1)
    assert q.metadata["weight_type"] == weight_type
    f = tern.Translator(str(tmp_path / "f.tern"), threads=1)
    a = f.translate_batch(source_lines[:4], beam_size=1, return_scores=True)
    b = q.translate_batch(source_lines[:4], beam_size=1, return_scores=True)
    assert [r.log_probs[0] for r in a] != [r.log_probs[0] for r in b]


def test_pad_and_decoder_start_rows(tmp_path, golden):
    """Tern's pad row and bias are Hugging Face's pad's (its softmax share counts, as in
    generate()); bos takes the decoder start row and is never produced."""
    from tern import hf_reference  # noqa: F401  (importable without transformers)

    vocab = make_dir(tmp_path / "hf", golden)
    v = len(vocab)
    hf = convert.canonical_names(convert.read_safetensors(str(tmp_path / "hf" /
                                                              "model.safetensors")))
    shape = convert.read_config(str(tmp_path / "hf"))
    built = convert.build_vocabulary(vocab, (tmp_path / "hf" / "source.spm").read_bytes(), shape,
                                     "vocab.json")
    tensors = convert.tern_tensors(hf, shape, built, "model.safetensors")
    emb, bias = tensors["Wemb"], tensors["decoder_ff_logit_out_b"]
    np.testing.assert_array_equal(emb[convert.PAD], hf["shared.weight"][v - 1])
    np.testing.assert_array_equal(emb[convert.BOS], hf["shared.weight"][v - 1])
    assert bias[convert.PAD] == hf["final_logits_bias"][0, v - 1]
    assert bias[convert.BOS] == convert.NEVER
    np.testing.assert_array_equal(emb[convert.EOS], hf["shared.weight"][0])
    np.testing.assert_array_equal(emb[4], hf["shared.weight"][2])
    assert built.pieces[:4] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_target_only_and_language_code_pieces(tmp_path, golden):
    """Pieces source.spm lacks are never segmented into (UNUSED) but decode; >>xx<< codes are
    single pieces (USER_DEFINED); a source piece vocab.json lacks reads as unk."""
    vocab = make_dir(tmp_path / "hf", golden)
    spm = (tmp_path / "hf" / "source.spm").read_bytes()
    pieces = ["</s>", "<unk>", ">>fra<<", "▁zzzq"] + [p for p in vocab[2:-1] if p != "▁the"]
    pieces.append("<pad>")
    shape = convert.read_config(str(tmp_path / "hf"))
    shape.vocab_size, shape.pad_id, shape.start_id = len(pieces), len(pieces) - 1, len(pieces) - 1
    built = convert.build_vocabulary(pieces, spm, shape, "vocab.json")
    kinds = {p: k for p, _, k in tern._tern._spm_pieces(built.spm)}
    assert kinds[">>fra<<"] == convert.USER_DEFINED and kinds["▁zzzq"] == convert.UNUSED
    the = built.pieces.index("▁the")
    assert built.rows[the] == 1 and built.never[the]  # vocab.json's <unk>


def config_error(tmp_path, golden, config, match, **kwargs):
    make_dir(tmp_path / "hf", golden, config=config, **kwargs)
    with pytest.raises(convert.ConversionError, match=match):
        convert.convert_hf_marian(str(tmp_path / "hf"), str(tmp_path / "out.tern"))
    assert not (tmp_path / "out.tern").exists()


@pytest.mark.parametrize("config, match", [
    ({"model_type": "bart"}, r"config.json: model_type=\"bart\""),
    ({"activation_function": "gelu"}, r"activation_function=\"gelu\": .*erf"),
    ({"scale_embedding": False}, r"scale_embedding=false"),
    ({"decoder_vocab_size": 7}, r"decoder_vocab_size=7: separate target vocabulary"),
    ({"tie_word_embeddings": False}, r"tie_word_embeddings=false"),
    ({"decoder_ffn_dim": 64}, r"decoder_ffn_dim=64"),
    ({"decoder_attention_heads": 4}, r"decoder_attention_heads=4"),
    ({"eos_token_id": 99999}, r"eos_token_id=99999: outside the vocabulary"),
    ({"d_model": 15}, r"emb_dim"),
    ({"decoder_layers": 2}, r"parameter 'decoder.layers.1.self_attn.q_proj.weight' is missing"),
])
def test_refused_configs_name_the_field(tmp_path, golden, config, match):
    config_error(tmp_path, golden, config, match)


def test_refused_files_name_the_file(tmp_path, golden):
    make_dir(tmp_path / "hf", golden)
    d = tmp_path / "hf"
    (d / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": True}))
    with pytest.raises(convert.ConversionError, match="tokenizer_config.json: separate_vocabs"):
        convert.convert_hf_marian(str(d), str(tmp_path / "o.tern"))
    (d / "tokenizer_config.json").unlink()
    (d / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(convert.ConversionError, match="model.safetensors: "):
        convert.convert_hf_marian(str(d), str(tmp_path / "o.tern"))
    (d / "model.safetensors").unlink()
    with pytest.raises(convert.ConversionError, match="no model.safetensors"):
        convert.convert_hf_marian(str(d), str(tmp_path / "o.tern"))
    (d / "vocab.json").write_text(json.dumps({"</s>": 0, "<unk>": 0}))
    with pytest.raises(convert.ConversionError, match="vocab.json: id 0 is given to"):
        convert.convert_hf_marian(str(d), str(tmp_path / "o.tern"))
    assert not (tmp_path / "o.tern").exists()


def test_refused_weights_name_the_parameter(tmp_path, golden):
    vocab = make_dir(tmp_path / "hf", golden)
    w = hf_weights(len(vocab))
    w["model.encoder.layers.0.fc1.weight"] = w["model.encoder.layers.0.fc1.weight"][:, :3]
    config_error(tmp_path / "a", golden, None, r"'encoder.layers.0.fc1.weight' has shape \[32, 3\]",
                 weights=w)
    w = hf_weights(len(vocab))
    w["model.decoder.layers.0.fc2.bias"][1] = np.nan
    config_error(tmp_path / "b", golden, None, r"'decoder.layers.0.fc2.bias' holds a value",
                 weights=w)
    w = hf_weights(len(vocab))
    w["model.encoder.layernorm_embedding.weight"] = np.ones(D)
    config_error(tmp_path / "c", golden, None, r"'encoder.layernorm_embedding.weight' has no "
                 "place", weights=w)
    w = hf_weights(len(vocab))
    w["lm_head.weight"] = w["model.shared.weight"] + 1
    config_error(tmp_path / "d", golden, None, r"'lm_head.weight' differs", weights=w)
    w = hf_weights(len(vocab))
    w["model.encoder.embed_positions.weight"] = np.zeros((64, D))
    config_error(tmp_path / "e", golden, None, r"not the sinusoid table", weights=w)


def test_the_command_line_reports_refusals_in_one_line(tmp_path, golden, capsys):
    make_dir(tmp_path / "hf", golden, config={"scale_embedding": False})
    assert convert.main(["--hf", str(tmp_path / "hf"), "--out", str(tmp_path / "o.tern")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tern.convert: ") and "scale_embedding" in err[0]
    assert convert.main(["--hf", str(tmp_path / "none"), "--out", str(tmp_path / "o.tern")]) == 2
    assert "config.json: missing" in capsys.readouterr().err


def marian_release(tmp_path, golden, bin_dir):
    """An OPUS-MT-style release made from the golden Transformer: tern-npz export's .npz with
    its rows moved to Marian's ids (eos 0, unk 1, the other pieces; no pad or bos), vocab.yml,
    source.spm. Returns the directory and the golden model's tensors."""
    import subprocess

    model = golden / "transformer_v2_float32.tern"
    d = tmp_path / "opus"
    d.mkdir()
    subprocess.run([str(bin_dir / "tern-npz"), "export", "--model", str(model), "--out",
                    str(tmp_path / "tern-order.npz")], check=True, capture_output=True)
    arrays = dict(np.load(tmp_path / "tern-order.npz"))
    spm = golden_spm(golden)
    pieces = [p for p, _, _ in tern._tern._spm_pieces(spm)]
    rows = [3, 1] + list(range(4, len(pieces)))
    marian_pieces = [pieces[r] for r in rows]
    for name in ("Wemb", "encoder_Wemb", "decoder_Wemb"):
        if name in arrays:
            arrays[name] = arrays[name][rows]
    arrays["decoder_ff_logit_out_b"] = arrays["decoder_ff_logit_out_b"][..., rows]
    yml = bytes(arrays["special:model.yml"]).decode()
    yml = yml.replace(str(len(pieces)), str(len(rows)))
    arrays["special:model.yml"] = np.frombuffer(yml.encode(), dtype=np.int8)
    np.savez(d / "opus.spm32k-spm32k.transformer-align.model1.npz.best-perplexity.npz", **arrays)
    (d / "opus.spm32k-spm32k.vocab.yml").write_text(
        "".join(f"{json.dumps(p, ensure_ascii=False)}: {i}\n"
                for i, p in enumerate(marian_pieces)), encoding="utf-8")
    (d / "source.spm").write_bytes(spm)
    return d, TernModel(str(model))


def test_an_opus_mt_release_converts(tmp_path, golden, bin_dir, source_lines):
    d, reference = marian_release(tmp_path, golden, bin_dir)
    out = tmp_path / "opus.tern"
    assert convert.main(["--marian", str(d), "--out", str(out)]) == 0
    got = TernModel(str(out))
    for name, want in reference.tensors.items():
        have = got.tensors[name]
        if name.endswith("Wemb"):
            # Marian has no pad, and its decoder starts from a zero vector.
            assert not have[convert.PAD].any() and not have[convert.BOS].any()
            have, want = np.delete(have, [0, 2], axis=0), np.delete(want, [0, 2], axis=0)
        elif name == "decoder_ff_logit_out_b":
            assert have[convert.PAD] == have[convert.BOS] == convert.NEVER
            have, want = np.delete(have, [0, 2]), np.delete(want, [0, 2])
        np.testing.assert_array_equal(have, want, err_msg=name)
    translator = tern.Translator(str(out), threads=1)
    golden_model = tern.Translator(str(golden / "transformer_v2_float32.tern"), threads=1)
    assert translator.encode(source_lines) == golden_model.encode(source_lines)
    assert len(translator.translate_batch(source_lines[:2])) == 2


def test_opus_mt_refusals(tmp_path, golden, bin_dir):
    d, _ = marian_release(tmp_path, golden, bin_dir)
    vocab = d / "opus.spm32k-spm32k.vocab.yml"
    lines = vocab.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(convert.ConversionError, match=r"vocab.yml: \d+ pieces, but .*npz has"):
        opus_release.convert_marian(str(d), str(tmp_path / "o.tern"))
    (d / "second.npz").write_bytes(b"")
    with pytest.raises(convert.ConversionError, match="2 .npz files; give the model with --npz"):
        opus_release.convert_marian(str(d), str(tmp_path / "o.tern"))
    with pytest.raises(convert.ConversionError, match="second.npz"):
        opus_release.convert_marian(str(d), str(tmp_path / "o.tern"), npz=str(d / "second.npz"))
    (d / "source.spm").unlink()
    with pytest.raises(convert.ConversionError, match="source.spm: missing"):
        opus_release.convert_marian(str(d), str(tmp_path / "o.tern"), npz=str(d / "second.npz"))
    assert not (tmp_path / "o.tern").exists()


def test_marian_vocab_yml_without_pyyaml(tmp_path):
    path = tmp_path / "vocab.yml"
    path.write_text('"</s>": 0\n"<unk>": 1\n"\\x41b": 2\n\'it\'\'s\': 3\nplain: 4\n"a: b": 5\n',
                    encoding="utf-8")
    assert opus_release._read_simple_yaml(str(path)) == {"</s>": 0, "<unk>": 1, "Ab": 2, "it's": 3,
                                                    "plain": 4, "a: b": 5}
    path.write_text('"</s>": 0\n"<unk>" 1\n', encoding="utf-8")
    with pytest.raises(convert.ConversionError, match="vocab.yml:2: not a"):
        opus_release._read_simple_yaml(str(path))
