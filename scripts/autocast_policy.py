#!/usr/bin/python3
"""Writes tests/golden_amp/autocast_policy.txt: the output dtype of each tenet op's PyTorch
counterpart under torch.autocast('cpu', dtype=torch.bfloat16), read by tests/test_autocast.c.
This is what PyTorch's CPU autocast actually does (its policy lists, and every op not in them
following its inputs), for the inputs tenet's test gives the same op.

Run with the system Python that has torch (Debian's python3-torch, 1.13):
    /usr/bin/python3 scripts/autocast_policy.py [output_file]

One record per line: <op> <inputs> <output dtype>. inputs: f32 (every float input float32),
bf16 (every float input bfloat16), mixed (the first float input float32, the others bfloat16),
lowfirst (the first bfloat16, the others float32).
An op the installed torch lacks (scaled_dot_product_attention before 2.0) is written "n/a",
inputs torch refuses (a RuntimeError) "error".
"""
import sys

import torch
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/golden_amp/autocast_policy.txt"
NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
         torch.float16: "float16", torch.int64: "int64", torch.bool: "bool"}
IDX = torch.tensor([0, 2, 1])
TGT = torch.tensor([0, 1, 2])
MASK = torch.tensor([[True, False, True, False]] * 3)


def t(dt, *shape):
    return torch.rand(*shape).to(dt)


# name -> (function of the dtypes of its float inputs, number of float inputs); the shapes
# match tests/test_autocast.c
OPS = {
    "matmul": (lambda d: torch.matmul(t(d[0], 3, 4), t(d[1], 4, 2)), 2),
    "linear": (lambda d: F.linear(t(d[0], 3, 4), t(d[1], 2, 4), t(d[2], 2)), 3),
    "conv1d": (lambda d: F.conv1d(t(d[0], 1, 2, 5), t(d[1], 3, 2, 2), t(d[2], 3)), 3),
    "conv2d": (lambda d: F.conv2d(t(d[0], 1, 2, 5, 5), t(d[1], 3, 2, 2, 2), t(d[2], 3)), 3),
    "conv_transpose2d": (lambda d: F.conv_transpose2d(t(d[0], 1, 2, 4, 4), t(d[1], 2, 3, 2, 2),
                                                      t(d[2], 3)), 3),
    "scaled_dot_product_attention": (
        lambda d: F.scaled_dot_product_attention(t(d[0], 1, 3, 4), t(d[1], 1, 3, 4),
                                                 t(d[2], 1, 3, 4)), 3),
    "cross_entropy": (lambda d: F.cross_entropy(t(d[0], 3, 4), TGT), 1),
    "mse_loss": (lambda d: F.mse_loss(t(d[0], 3, 4), t(d[1], 3, 4)), 2),
    "logsumexp": (lambda d: torch.logsumexp(t(d[0], 3, 4), 1), 1),
    "softmax": (lambda d: torch.softmax(t(d[0], 3, 4), 1), 1),
    "log_softmax": (lambda d: torch.log_softmax(t(d[0], 3, 4), 1), 1),
    "layer_norm": (lambda d: F.layer_norm(t(d[0], 3, 4), (4,), t(d[1], 4), t(d[2], 4)), 3),
    "exp": (lambda d: torch.exp(t(d[0], 3, 4)), 1),
    "log": (lambda d: torch.log(t(d[0], 3, 4)), 1),
    "pow": (lambda d: torch.pow(t(d[0], 3, 4), t(d[1], 3, 4)), 2),
    "pow_scalar": (lambda d: torch.pow(t(d[0], 3, 4), 2.5), 1),
    "sum": (lambda d: torch.sum(t(d[0], 3, 4)), 1),
    "sum_dim": (lambda d: torch.sum(t(d[0], 3, 4), 1), 1),
    "mean": (lambda d: torch.mean(t(d[0], 3, 4)), 1),
    "add": (lambda d: t(d[0], 3, 4) + t(d[1], 3, 4), 2),
    "mul": (lambda d: t(d[0], 3, 4) * t(d[1], 3, 4), 2),
    "relu": (lambda d: torch.relu(t(d[0], 3, 4)), 1),
    "gelu": (lambda d: F.gelu(t(d[0], 3, 4)), 1),
    "tanh": (lambda d: torch.tanh(t(d[0], 3, 4)), 1),
    "var_dim": (lambda d: torch.var(t(d[0], 3, 4), 1), 1),
    "embedding": (lambda d: F.embedding(IDX, t(d[0], 3, 4)), 1),
    "cat": (lambda d: torch.cat([t(d[0], 3, 4), t(d[1], 3, 4)]), 2),
    "stack": (lambda d: torch.stack([t(d[0], 3, 4), t(d[1], 3, 4)]), 2),
    "scatter_add": (lambda d: torch.scatter_add(t(d[0], 3, 4), 0, IDX.view(3, 1).expand(3, 4),
                                                t(d[1], 3, 4)), 2),
    "where": (lambda d: torch.where(MASK, t(d[0], 3, 4), t(d[1], 3, 4)), 2),
    "masked_fill": (lambda d: t(d[0], 3, 4).masked_fill(MASK, 0.5), 1),
    # the CNN's ops; batch_norm's running statistics take the weight's dtype
    "batch_norm": (lambda d: F.batch_norm(t(d[0], 2, 3, 4, 4), t(d[1], 3), t(d[1], 3) + 0.5,
                                          t(d[1], 3), t(d[2], 3), training=True), 3),
    "batch_norm_eval": (lambda d: F.batch_norm(t(d[0], 2, 3, 4, 4), t(d[1], 3), t(d[1], 3) + 0.5,
                                               t(d[1], 3), t(d[2], 3), training=False), 3),
    "group_norm": (lambda d: F.group_norm(t(d[0], 2, 4, 3, 3), 2, t(d[1], 4), t(d[2], 4)), 3),
    "max_pool2d": (lambda d: F.max_pool2d(t(d[0], 1, 2, 4, 4), 2), 1),
    "avg_pool2d": (lambda d: F.avg_pool2d(t(d[0], 1, 2, 4, 4), 2), 1),
    "adaptive_avg_pool2d": (lambda d: F.adaptive_avg_pool2d(t(d[0], 1, 2, 4, 4), 2), 1),
    "adaptive_max_pool2d": (lambda d: F.adaptive_max_pool2d(t(d[0], 1, 2, 4, 4), 2), 1),
}
# lowfirst: the first float input bfloat16 (an earlier op's output under autocast), the others
# float32 (parameters), as a CNN's batch_norm after an autocast conv
MODES = {"f32": lambda n: [torch.float32] * n, "bf16": lambda n: [torch.bfloat16] * n,
         "mixed": lambda n: [torch.float32] + [torch.bfloat16] * (n - 1),
         "lowfirst": lambda n: [torch.bfloat16] + [torch.float32] * (n - 1)}


def main():
    torch.manual_seed(0)
    lines = []
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for name, (fn, n) in OPS.items():
            for mode, dts in MODES.items():
                if mode in ("mixed", "lowfirst") and n < 2:
                    continue
                try:
                    out = NAMES[fn(dts(n)).dtype]
                except AttributeError:  # the op is missing from this torch
                    out = "n/a"
                except RuntimeError:  # torch refuses these inputs
                    out = "error"
                lines.append(f"{name} {mode} {out}")
    with open(OUT, "w") as f:
        f.write(f"# torch {torch.__version__}: torch.autocast('cpu', dtype=torch.bfloat16)\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
