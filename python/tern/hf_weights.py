"""Reading a Hugging Face model's weights for tern.convert: safetensors files (parsed here, every
offset checked), sharded ones through their index, PyTorch's pickles when torch is installed;
Flax's names and layouts turned into PyTorch's."""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Dict, Tuple

import numpy as np

from .convert_errors import ConversionError

_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """The float tensors of a .safetensors file as float32 arrays (bfloat16 widened), every
    offset checked against the file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ConversionError(f"{path}: {len(data)} bytes; not a safetensors file")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > len(data) - 8 or n > 100_000_000:
        raise ConversionError(f"{path}: header of {n} bytes in a file of {len(data)}; "
                              "not a safetensors file, or truncated")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"{path}: the header is not JSON ({e}); not a safetensors file")
    if not isinstance(header, dict):
        raise ConversionError(f"{path}: the header is not a JSON object")
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            count = math.prod(int(d) for d in shape)
        except (KeyError, TypeError, ValueError):
            raise ConversionError(f"{path}: tensor '{name}' has no dtype, shape and "
                                  "data_offsets")
        if dtype not in _SAFETENSORS_DTYPES and dtype != "BF16":
            raise ConversionError(f"{path}: tensor '{name}' is {dtype}; the converter reads "
                                  "F32, F16, BF16 and F64")
        item = 2 if dtype == "BF16" else np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
        if not (0 <= begin <= end <= len(data) - base) or end - begin != count * item:
            raise ConversionError(f"{path}: tensor '{name}' ({dtype} {shape}) has data offsets "
                                  f"[{begin}, {end}) that do not fit it or the file")
        raw = data[base + begin:base + end]
        if dtype == "BF16":
            wide = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = wide.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=np.dtype(_SAFETENSORS_DTYPES[dtype]).newbyteorder("<"))
        tensors[name] = array.astype(np.float32).reshape([int(d) for d in shape])
    return tensors


def read_weights(model_dir: str) -> Tuple[Dict[str, np.ndarray], str]:
    """The weights of a Hugging Face model directory and the file they came from."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    pytorch = os.path.join(model_dir, "pytorch_model.bin")
    if os.path.exists(single):
        return read_safetensors(single), single
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f).get("weight_map", {}).values()))
        if not shards:
            raise ConversionError(f"{index}: no weight_map")
        tensors = {}
        for shard in shards:
            tensors.update(read_safetensors(os.path.join(model_dir, shard)))
        return tensors, index
    if os.path.exists(pytorch):
        try:
            import torch
        except ImportError:
            raise ConversionError(f"{pytorch}: PyTorch weights need torch installed (pip install "
                                  "torch), or save the model with safe_serialization=True")
        state = torch.load(pytorch, map_location="cpu", weights_only=True)
        return {k: v.float().numpy() for k, v in state.items()}, pytorch
    raise ConversionError(f"{model_dir}: no model.safetensors, model.safetensors.index.json or "
                          "pytorch_model.bin (Flax's and TensorFlow's files are not read)")


def canonical_names(tensors: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """PyTorch's names and layouts: a Flax checkpoint's kernels (in, out) become weights
    (out, in), its embeddings and layer-norm scales weights; the "model." prefix is dropped."""
    out = {}
    for name, array in tensors.items():
        key = name[len("model."):] if name.startswith("model.") else name
        if key.endswith(".kernel"):
            key, array = key[:-len(".kernel")] + ".weight", array.T
        elif key.endswith(".embedding") or key.endswith(".scale"):
            key = key.rsplit(".", 1)[0] + ".weight"
        out[key] = np.ascontiguousarray(array, dtype=np.float32)
    return out
