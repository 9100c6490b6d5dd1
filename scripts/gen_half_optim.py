#!/usr/bin/python3
"""Writes tests/golden_half/optim.txt: PyTorch 1.13's SGD (momentum, weight decay), Adam and
AdamW stepping bfloat16 and float16 parameters on the CPU (state in the parameter's dtype, as
torch.optim keeps it), read by tests/test_half_optim.c.

    /usr/bin/python3 scripts/gen_half_optim.py [output_file]

Lines:  run <optimiser> <dtype> <steps> <n>     then, per step, "step <k> <n param bits, hex>".
Parameters start at p[i] = sin(0.7 i + 0.2) and the gradient of step k is
g[i] = cos(1.1 i + 0.3 k) * 10^(i % 3 - 1), both rounded to the dtype (the C test computes the
same formulas in double and rounds them with tenet's conversion). A configuration PyTorch's CPU
cannot run in a dtype is written as "skip <optimiser> <dtype> <reason>".
"""
import math
import sys

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/golden_half/optim.txt"
N, STEPS = 64, 6  # 64: PyTorch's vectorised bfloat16 path (float arithmetic) for every element
OPTS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                        weight_decay=0.01),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                          weight_decay=0.1),
}
lines = []
for name, make in OPTS.items():
    for dt, dn in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        p = torch.tensor([math.sin(0.7 * i + 0.2) for i in range(N)], dtype=torch.float64)
        p = p.to(torch.float32).to(dt).requires_grad_(True)
        opt = make([p])
        out = []
        try:
            for k in range(STEPS):
                g = torch.tensor([math.cos(1.1 * i + 0.3 * k) * 10.0 ** (i % 3 - 1)
                                  for i in range(N)], dtype=torch.float64)
                p.grad = g.to(torch.float32).to(dt)
                opt.step()
                bits = [int(b) & 0xFFFF for b in p.detach().view(torch.int16).tolist()]
                out.append("step %d %s" % (k, " ".join("%04x" % b for b in bits)))
        except RuntimeError as e:
            lines.append("skip %s %s %s" % (name, dn, str(e).split("\n")[0]))
            continue
        lines.append("run %s %s %d %d" % (name, dn, STEPS, N))
        lines.extend(out)
with open(OUT, "w") as f:
    f.write("\n".join(lines) + "\n")
print("wrote %s (%d lines)" % (OUT, len(lines)))
