"""Reads a Tern model file (.tern) into numpy arrays, for the benchmarks that run other toolkits
on the same weights (bench/tern_to_ct2.py). The layout is docs/design.md's "The model file";
this reader checks the magic, the version, the size and the CRC, and refuses quantized matrices
(the comparison converts float32 weights).
"""
import re
import struct
import zlib

import numpy as np

_DTYPES = {0: np.float32, 1: np.int16, 2: np.int8, 3: np.int32}


class TernModel:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if data[:8] != b"TERNMODL":
            raise ValueError(f"{path}: not a Tern model file")
        version, _, size = struct.unpack_from("<IIQ", data, 8)
        if version not in (1, 2):
            raise ValueError(f"{path}: format version {version} is not read here")
        if size != len(data):
            raise ValueError(f"{path}: {len(data)} bytes, the header says {size}")
        crc = struct.unpack_from("<I", data, size - 4)[0]
        if zlib.crc32(data[: size - 4]) != crc:
            raise ValueError(f"{path}: CRC mismatch")
        pos = 24
        (n,) = struct.unpack_from("<I", data, pos)
        self.arch = data[pos + 4 : pos + 4 + n].decode()
        pos += 4 + n + 4  # the name, the architecture revision
        (n,) = struct.unpack_from("<Q", data, pos)
        self.config_text = data[pos + 8 : pos + 8 + n].decode()
        pos += 8 + n
        (n,) = struct.unpack_from("<Q", data, pos)
        self.vocab_bytes = data[pos + 8 : pos + 8 + n]
        pos += 8 + n
        (count,) = struct.unpack_from("<I", data, pos)
        pos += 4
        self.tensors = {}
        self.scales = {}
        for _ in range(count):
            (n,) = struct.unpack_from("<I", data, pos)
            name = data[pos + 4 : pos + 4 + n].decode()
            pos += 4 + n
            dtype, rank = struct.unpack_from("<BB", data, pos)
            pos += 4
            dims = struct.unpack_from(f"<{rank}q", data, pos)
            pos += 8 * rank
            scale, offset, nbytes = struct.unpack_from("<fQQ", data, pos)
            pos += 20
            array = np.frombuffer(data, dtype=_DTYPES[dtype], count=int(np.prod(dims, dtype=np.int64)),
                                  offset=offset)
            self.tensors[name] = array.reshape(dims)
            self.scales[name] = scale
        self.model = _section(self.config_text, "model")

    def float32(self, name):
        t = self.tensors[name]
        if t.dtype != np.float32:
            raise ValueError(f"tensor {name} is {t.dtype}; export the model as float32")
        return t

    def has(self, name):
        return name in self.tensors


def _section(text, name):
    """The scalar fields of a top-level block of protobuf text (`model { ... }`) as a dict of
    strings; a field the text leaves out is at its zero value (read with .get)."""
    m = re.search(r"^" + name + r" \{\n(.*?)^\}", text, re.S | re.M)
    fields = {}
    if m:
        for line in m.group(1).splitlines():
            kv = re.match(r"\s*(\w+): (.*)$", line)
            if kv:
                fields[kv.group(1)] = kv.group(2).strip('"')
    return fields
