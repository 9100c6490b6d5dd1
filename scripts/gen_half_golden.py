#!/usr/bin/python3
"""Writes tests/golden_half/conversions.txt: PyTorch's float32 -> bfloat16 and float32 -> float16
conversions (the bits), its type promotion with the half types, and its repr of half tensors,
read by tests/test_half.c.

Run with the system Python that has torch (Debian's python3-torch):
    /usr/bin/python3 scripts/gen_half_golden.py [output_file]

File format (one record per line, whitespace-separated):
    cvt <float32 bits, hex> <bfloat16 bits, hex> <float16 bits, hex>
    promote <dtype a> <dtype b> <result dtype>          (two dimensioned tensors)
    promote0 <dtype a> <dtype of a 0-dim tensor b> <result dtype>
    promotes <dtype a> <python float scalar> <result dtype>
    repr <dtype> <n> <float32 bits of each element, hex> | <PyTorch's repr with torch. dropped>
NaN: tenet requires a NaN of either sign with the quiet bit set, not PyTorch's exact payload
(its vectorised and scalar paths differ), so NaN inputs are written with the NaN-ness only:
the converted bits are written as "nan".
"""
import math
import struct
import sys

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/golden_half/conversions.txt"
NAMES = {torch.float32: "float32", torch.float64: "float64", torch.int16: "int16",
         torch.int32: "int32", torch.int64: "int64", torch.bool: "bool",
         torch.bfloat16: "bfloat16", torch.float16: "float16"}


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def bits_f32(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def half_bits(x, dt):
    # one element at a time: the scalar conversion path
    return [int(t.view(torch.int16).item()) & 0xFFFF for t in x.to(dt).split(1)]


values = [0.0, -0.0, 1.0, -1.0, 0.1, -2.5, 3.14159, 65504.0, 65519.99, 65520.0, 65536.0, 1e6,
          -1e6, 3.0e38, 3.3895e38, 3.4e38, 1e-8, 6e-8, 3e-8, 2.9e-8, 2.0 ** -24, 2.0 ** -25,
          1.5 * 2.0 ** -25, 2.0 ** -14, 2.0 ** -14 * 0.999, 6.1e-5, 1.0e-40, 1.0e-45,
          1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -9, 1.0 + 2.0 ** -11,
          1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -12, 2049.0, 2051.0, 257.0, 259.0,
          math.inf, -math.inf]
bits = [f32_bits(v) for v in values]
# round-to-nearest-even ties and their neighbours at every 16-bit boundary of a few exponents
for e in (0x3F800000, 0x40000000, 0x3E000000, 0x7F000000, 0x00800000, 0x38800000, 0x33800000):
    for low in (0x7FFF, 0x8000, 0x8001, 0x18000, 0x0FFF, 0x1000, 0x1001, 0x3000, 0x2000):
        bits.append(e | low)
        bits.append(0x80000000 | e | low)
lines = []
x = torch.tensor([bits_f32(b) for b in bits], dtype=torch.float32)
bf = half_bits(x, torch.bfloat16)
hf = half_bits(x, torch.float16)
for b, v, p, q in zip(bits, x.tolist(), bf, hf):
    lines.append("cvt %08x %04x %04x" % (b, p, q))
for nan_bits in (0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF):
    lines.append("cvt %08x nan nan" % nan_bits)

dts = [torch.float32, torch.float64, torch.int16, torch.int32, torch.int64, torch.bool,
       torch.bfloat16, torch.float16]
for a in dts:
    for b in dts:
        ta, tb = torch.ones(2, dtype=a), torch.ones(2, dtype=b)
        lines.append("promote %s %s %s" % (NAMES[a], NAMES[b], NAMES[(ta + tb).dtype]))
        lines.append("promote0 %s %s %s" % (NAMES[a], NAMES[b],
                                            NAMES[(ta + torch.ones((), dtype=b)).dtype]))
    for s in (2.5, -0.75):  # non-integral: C callers pass integers as integral doubles
        lines.append("promotes %s %r %s" % (NAMES[a], s, NAMES[(torch.ones(2, dtype=a) + s).dtype]))

for dt in (torch.bfloat16, torch.float16):
    for vals in ([0.1], [0.1, 2.5], [1.0, -2.0, 3.0], [1e-3, 123.456, -7.0], [65504.0, 1.0],
                 [math.inf, -math.inf, 1.5], [0.0, -0.0], [1234567.0, 0.5]):
        t = torch.tensor(vals, dtype=torch.float32).to(dt)
        r = repr(t).replace("dtype=torch.", "dtype=").replace("\n", "\\n")
        lines.append("repr %s %d %s | %s" % (NAMES[dt], len(vals),
                                             " ".join("%08x" % f32_bits(v) for v in vals), r))

with open(OUT, "w") as f:
    f.write("\n".join(lines) + "\n")
print("wrote %s (%d records)" % (OUT, len(lines)))
