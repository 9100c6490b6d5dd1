#!/usr/bin/python3
"""Writes the reference safetensors files of tests/test_safetensors.c into tests/data/.

The Python safetensors package is not in Debian (and no other registry is reachable here), so
this script writes the format by hand, following the reference serializer (safetensors'
tensor.rs, `prepare`) byte for byte:

  - tensors ordered by dtype, the reference's Dtype enum order descending (I64, F64, F32, I32,
    BF16, F16, I16, BOOL for the dtypes used here), then by name (bytes of the UTF-8 name);
    data offsets contiguous in that order;
  - the header: compact JSON (serde_json's output: no spaces, non-ASCII as UTF-8, controls as
    \\n \\t ... or \\u00xx), "__metadata__" first when given, then the tensors in data order,
    each {"dtype", "shape", "data_offsets"}; padded with spaces to a multiple of 8 bytes;
  - an 8-byte little-endian header size in front, the tensors' raw little-endian bytes after.

The tensors come from PyTorch (python3-torch, scripts/install-deps --torch). Run from the
repository root: /usr/bin/python3 scripts/gen_safetensors_ref.py
"""
import json
import math
import os
import struct

import torch

OUT = os.path.join("tests", "data")

# name and rank in the reference's Dtype enum (its order sorts a file's tensors)
DTYPES = {
    torch.bool: ("BOOL", 0),
    torch.int16: ("I16", 5),
    torch.float16: ("F16", 7),
    torch.bfloat16: ("BF16", 8),
    torch.int32: ("I32", 9),
    torch.float32: ("F32", 11),
    torch.float64: ("F64", 12),
    torch.int64: ("I64", 13),
}


def raw(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def save_file(tensors, path, metadata=None):
    items = sorted(tensors.items(), key=lambda kv: (-DTYPES[kv[1].dtype][1], kv[0].encode()))
    header = {}
    if metadata is not None:
        header["__metadata__"] = dict(sorted(metadata.items(), key=lambda kv: kv[0].encode()))
    blobs, offset = [], 0
    for name, t in items:
        b = raw(t)
        header[name] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def dtypes_file():
    inf, nan = math.inf, math.nan
    half = torch.tensor([0.0, -0.0, 1.0, -2.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08,
                         3.0517578125e-05, inf, -inf, nan], dtype=torch.float16)
    bf16 = torch.tensor([0.0, -0.0, 1.0, -2.5, 3.3895313892515355e38, 1.1754943508222875e-38,
                         9.183549615799121e-41, 0.1, inf, -inf, nan], dtype=torch.bfloat16)
    t = {
        "f32": torch.tensor([[1.5, -2.25, 3.0], [0.0, -0.0, 1e-45], [inf, -inf, nan]],
                            dtype=torch.float32),
        "f64": torch.tensor([0.1, -1e300, 2.5e-310], dtype=torch.float64),
        "f16": half,
        "f16_as_f32": half.float(),
        "bf16": bf16.reshape(11, 1),
        "bf16_as_f32": bf16.float().reshape(11, 1),
        "i64": torch.tensor([-2**63, -1, 0, 2**63 - 1], dtype=torch.int64),
        "i32": torch.tensor([[-2**31, 7], [0, 2**31 - 1]], dtype=torch.int32),
        "i16": torch.tensor([-2**15, -1, 2**15 - 1], dtype=torch.int16),
        "bool": torch.tensor([True, False, True, True], dtype=torch.bool),
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
        "\u00e9mbed.\u0175eight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "quote\"back\\slash\ttab\nnl\x01ctl/\u20ac\U0001F600": torch.tensor([42],
                                                                            dtype=torch.int32),
    }
    meta = {"format": "pt", "note": "\u00fcn\u00efcode \"quoted\"\n"}
    save_file(t, os.path.join(OUT, "st_dtypes.safetensors"), meta)


def mlp_files():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    save_file(dict(model.state_dict()), os.path.join(OUT, "st_mlp.safetensors"), {"format": "pt"})
    x = torch.randn(5, 4)
    with torch.no_grad():
        y = model(x)
    save_file({"x": x, "y": y}, os.path.join(OUT, "st_mlp_io.safetensors"))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    dtypes_file()
    mlp_files()
