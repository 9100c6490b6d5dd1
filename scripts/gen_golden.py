#!/usr/bin/python3
"""Writes tests/golden/<case>.txt: PyTorch's forward and gradients for every
differentiable op of include/tenet/ops.h, on fixed float64 inputs.

Run with the system Python that has torch (Debian's python3-torch):
    /usr/bin/python3 scripts/gen_golden.py [output_dir]
    python3 scripts/gen_golden.py --check-table [tests/ops/op_names.txt]

The op list is checked against the op table (tests/ops/, docs/design.md "The op table"):
tests/ops/op_names.txt names each row's ops here; every one must be in OPS and, when torch is
there to build CASES, have cases. A row without golden ops says why in the table. Generating
refuses to run while the check fails; --check-table only checks (without torch: OPS only; the
ctest golden_table runs it).

Each case computes out = op(inputs) and the gradient of sum(out * w) for a
fixed w with respect to every input that requires grad. Inputs come from a
deterministic formula (no RNG), so the files only change when a case does.

File format (whitespace-separated tokens, read by tests/test_golden.c with
fscanf):
    op <name>
    params <count> <p0> <p1> ...
    tensor <kind> <name> <dtype> <layout> <ndim> <d0> ... <d(ndim-1)>
    <numel values, row-major>
    ...
    end
kind: input (requires grad) | const (does not) | weight | output | grad
(grad's name is the input's). dtype: f64 | f32 | bf16 | i64 | bool (f32, bf16:
values exact in that dtype; tenet must agree to its rounding). Every case with
float64 inputs is also written in bfloat16 (<case>_bf16) where PyTorch's CPU
runs the op in bfloat16. layout: c
(contiguous) or t (the C test builds the leaf as a transposed view of a
contiguous tensor, to exercise strided kernels; the values are logical).
"""
import math
import os
import sys

CHECK_ONLY = len(sys.argv) > 1 and sys.argv[1] == "--check-table"
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
    if not CHECK_ONLY:
        print("gen_golden.py: torch is not installed; nothing generated "
              "(apt-get install python3-torch)")
        sys.exit(0)

if torch is not None:
    torch.set_default_dtype(torch.float64)

# ---- fixed inputs -----------------------------------------------------------


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def vals(shape, k, kind="any"):
    """Deterministic values for input number k: smooth, distinct, no RNG."""
    n = numel(shape)
    out = []
    for i in range(n):
        s = math.sin(1.3 * i + 0.7 * k + 0.1)
        if kind == "pos":      # log, sqrt, pow bases: in [0.25, 2.25]
            v = 1.25 + s
        elif kind == "away":   # divisors: |v| in [0.5, 1.5]
            v = (0.5 + abs(s)) * (1 if (i + k) % 3 else -1)
        elif kind == "small":  # exp, softmax: moderate
            v = 1.5 * s
        else:
            v = 2.0 * s
        out.append(v)
    return torch.tensor(out).reshape(shape)


def weight(shape):
    n = numel(shape)
    return torch.tensor([math.cos(0.9 * i + 0.3) + 0.25 for i in range(n)]).reshape(shape)


def T(shape, k=0, kind="any", layout="c"):
    return {"t": vals(shape, k, kind), "layout": layout, "rg": True}


def C(tensor):
    """A constant input (no grad): targets, fixed tensors."""
    return {"t": tensor, "layout": "c", "rg": False}


def Tv(values, layout="c"):
    return {"t": torch.tensor(values), "layout": layout, "rg": True}


def T32(shape, k=0, kind="any"):
    """A float32 input (the values of T rounded to float32)."""
    return {"t": vals(shape, k, kind).float(), "layout": "c", "rg": True}


# ---- ops: name -> (fn(inputs, params)) ----------------------------------------

def _inplace(name):
    """y = a * 1 (a non-leaf), y.<op>(rest); the result is y."""
    def f(x, p):
        y = x[0] * 1
        rest = x[1:]
        if name == "add_":
            y.add_(rest[0])
        elif name == "sub_":
            y.sub_(rest[0])
        elif name == "mul_":
            y.mul_(rest[0])
        elif name == "div_":
            y.div_(rest[0])
        elif name == "add_scalar_":
            y.add_(p[0])
        elif name == "mul_scalar_":
            y.mul_(p[0])
        elif name == "zero_":
            y.zero_()
        elif name == "fill_":
            y.fill_(p[0])
        elif name == "copy_":
            y.copy_(rest[0])
        elif name == "clamp_":
            y.clamp_(p[0], p[1])
        elif name == "relu_":
            y.relu_()
        elif name == "sigmoid_":
            y.sigmoid_()
        elif name == "exp_":
            y.exp_()
        elif name == "neg_":
            y.neg_()
        elif name == "masked_fill_":
            y.masked_fill_(rest[0], p[0])
        else:
            raise ValueError(name)
        return y
    return f


def _inplace_view_direct(name):
    """As _inplace_view but the op writes into the view itself (CopySlices)."""
    def f(x, p):
        y = x[0] * 1
        v = y.narrow(0, 1, 2)
        if name == "mul_":
            v.mul_(x[1])
        elif name == "add_scalar_":
            v.add_(p[0])
        elif name == "exp_":
            v.exp_()
        elif name == "zero_":
            v.zero_()
        elif name == "copy_":
            v.copy_(x[1])
        elif name == "select_mul_scalar_":
            y.select(1, 2).mul_(p[0])
        elif name == "masked_fill_":
            v.masked_fill_(x[1], p[0])
        else:
            raise ValueError(name)
        return y
    return f


_RED = ["mean", "sum", "none"]

OPS = {
    "add": lambda x, p: x[0] + x[1],
    "sub": lambda x, p: x[0] - x[1],
    "mul": lambda x, p: x[0] * x[1],
    "div": lambda x, p: x[0] / x[1],
    "pow": lambda x, p: torch.pow(x[0], x[1]),
    "maximum": lambda x, p: torch.maximum(x[0], x[1]),
    "minimum": lambda x, p: torch.minimum(x[0], x[1]),
    "add_alpha": lambda x, p: torch.add(x[0], x[1], alpha=p[0]),
    "add_scalar": lambda x, p: x[0] + p[0],
    "sub_scalar": lambda x, p: x[0] - p[0],
    "mul_scalar": lambda x, p: x[0] * p[0],
    "div_scalar": lambda x, p: x[0] / p[0],
    "pow_scalar": lambda x, p: x[0] ** p[0],
    "rsub_scalar": lambda x, p: p[0] - x[0],
    "eq": lambda x, p: x[0] == x[1],
    "ne": lambda x, p: x[0] != x[1],
    "lt": lambda x, p: x[0] < x[1],
    "le": lambda x, p: x[0] <= x[1],
    "gt": lambda x, p: x[0] > x[1],
    "ge": lambda x, p: x[0] >= x[1],
    "neg": lambda x, p: -x[0],
    "exp": lambda x, p: torch.exp(x[0]),
    "log": lambda x, p: torch.log(x[0]),
    "sqrt": lambda x, p: torch.sqrt(x[0]),
    "abs": lambda x, p: torch.abs(x[0]),
    "sigmoid": lambda x, p: torch.sigmoid(x[0]),
    "tanh": lambda x, p: torch.tanh(x[0]),
    "relu": lambda x, p: torch.relu(x[0]),
    "sin": lambda x, p: torch.sin(x[0]),
    "cos": lambda x, p: torch.cos(x[0]),
    "clamp": lambda x, p: torch.clamp(x[0], p[0], p[1]),
    "clamp_min": lambda x, p: torch.clamp(x[0], min=p[0]),
    "clamp_max": lambda x, p: torch.clamp(x[0], max=p[0]),
    "sum": lambda x, p: x[0].sum(),
    "mean": lambda x, p: x[0].mean(),
    "max": lambda x, p: x[0].max(),
    "min": lambda x, p: x[0].min(),
    "sum_dim": lambda x, p: x[0].sum(int(p[0]), keepdim=bool(p[1])),
    "mean_dim": lambda x, p: x[0].mean(int(p[0]), keepdim=bool(p[1])),
    "max_dim": lambda x, p: x[0].max(int(p[0]), keepdim=bool(p[1]))[0],
    "argmax": lambda x, p: torch.argmax(x[0]),
    "argmax_dim": lambda x, p: torch.argmax(x[0], int(p[0]), keepdim=bool(p[1])),
    "min_dim": lambda x, p: x[0].min(int(p[0]), keepdim=bool(p[1]))[0],
    "max_dim_indices": lambda x, p: x[0].max(int(p[0]), keepdim=bool(p[1]))[1],
    "min_dim_indices": lambda x, p: x[0].min(int(p[0]), keepdim=bool(p[1]))[1],
    "argmin": lambda x, p: torch.argmin(x[0]),
    # params: ord, keepdim, ndims (0: all), dims...
    "vector_norm": lambda x, p: torch.linalg.vector_norm(
        x[0], p[0], dim=[int(d) for d in p[3:3 + int(p[2])]] if p[2] else None,
        keepdim=bool(p[1])),
    "argmin_dim": lambda x, p: torch.argmin(x[0], int(p[0]), keepdim=bool(p[1])),
    "matmul": lambda x, p: torch.matmul(x[0], x[1]),
    "linear": lambda x, p: F.linear(x[0], x[1], x[2] if len(x) > 2 else None),
    "softmax": lambda x, p: torch.softmax(x[0], int(p[0])),
    "log_softmax": lambda x, p: torch.log_softmax(x[0], int(p[0])),
    "cross_entropy": lambda x, p: F.cross_entropy(x[0], x[1]),
    "mse_loss": lambda x, p: F.mse_loss(x[0], x[1]),
    # params: reduction (0 mean, 1 sum, 2 none), ignore_index, label_smoothing, has weight;
    # inputs: input, target[, weight]
    "nll_loss": lambda x, p: F.nll_loss(x[0], x[1], weight=x[2] if p[3] else None,
                                        ignore_index=int(p[1]), reduction=_RED[int(p[0])]),
    "cross_entropy_ex": lambda x, p: F.cross_entropy(
        x[0], x[1], weight=x[2] if p[3] else None, ignore_index=int(p[1]),
        reduction=_RED[int(p[0])], label_smoothing=p[2]),
    "view": lambda x, p: x[0].view([int(s) for s in p]),
    "reshape": lambda x, p: x[0].reshape([int(s) for s in p]),
    "transpose": lambda x, p: x[0].transpose(int(p[0]), int(p[1])),
    "permute": lambda x, p: x[0].permute([int(s) for s in p]),
    "narrow": lambda x, p: x[0].narrow(int(p[0]), int(p[1]), int(p[2])),
    "select": lambda x, p: x[0].select(int(p[0]), int(p[1])),
    "expand": lambda x, p: x[0].expand([int(s) for s in p]),
    "squeeze": lambda x, p: x[0].squeeze(),
    "squeeze_dim": lambda x, p: x[0].squeeze(int(p[0])),
    "unsqueeze": lambda x, p: x[0].unsqueeze(int(p[0])),
    "flatten": lambda x, p: x[0].flatten(int(p[0]), int(p[1])),
    "contiguous": lambda x, p: x[0].contiguous(),
    "clone": lambda x, p: x[0].clone(),
    "cat": lambda x, p: torch.cat(list(x), int(p[0])),
    "stack": lambda x, p: torch.stack(list(x), int(p[0])),
    # several views: one piece (the last parameter but for split_with_sizes: dim, piece, n,
    # sizes...)
    "split": lambda x, p: x[0].split(int(p[0]), int(p[1]))[int(p[2])],
    "split_with_sizes": lambda x, p: x[0].split([int(s) for s in p[3:3 + int(p[2])]],
                                                int(p[0]))[int(p[1])],
    "chunk": lambda x, p: x[0].chunk(int(p[0]), int(p[1]))[int(p[2])],
    "unbind": lambda x, p: x[0].unbind(int(p[0]))[int(p[1])],
    # a small composite: chains several backward formulas
    "mlp": lambda x, p: F.cross_entropy(
        F.linear(torch.tanh(F.linear(x[0], x[1], x[2])), x[3], x[4]), x[5]),
    "embedding": lambda x, p: F.embedding(x[1], x[0]),
    "index_select": lambda x, p: torch.index_select(x[0], int(p[0]), x[1]),
    "gather": lambda x, p: torch.gather(x[0], int(p[0]), x[1]),
    "scatter_add": lambda x, p: torch.scatter_add(x[0], int(p[0]), x[1], x[2]),
    "where": lambda x, p: torch.where(x[0], x[1], x[2]),
    "masked_fill": lambda x, p: x[0].masked_fill(x[1], p[0]),
    "tril": lambda x, p: torch.tril(x[0], int(p[0])),
    "triu": lambda x, p: torch.triu(x[0], int(p[0])),
    # params: n_norm_dims, has weight, has bias, eps; inputs x[, weight][, bias]
    "layer_norm": lambda x, p: F.layer_norm(
        x[0], x[0].shape[x[0].dim() - int(p[0]):], x[1] if p[1] else None,
        x[1 + int(p[1])] if p[2] else None, p[3]),
    "gelu": lambda x, p: F.gelu(x[0], approximate="tanh" if p[0] else "none"),
    "silu": lambda x, p: F.silu(x[0]),
    "logsumexp": lambda x, p: torch.logsumexp(x[0], int(p[0]), keepdim=bool(p[1])),
    "var_dim": lambda x, p: torch.var(x[0], int(p[0]), correction=int(p[1]),
                                      keepdim=bool(p[2])),
    "std_dim": lambda x, p: torch.std(x[0], int(p[0]), correction=int(p[1]),
                                      keepdim=bool(p[2])),
}
for _n in ["add_", "sub_", "mul_", "div_", "add_scalar_", "mul_scalar_", "zero_", "fill_",
           "copy_", "clamp_", "relu_", "sigmoid_", "exp_", "neg_"]:
    OPS["ip_" + _n] = _inplace(_n)
for _n in ["mul_", "add_scalar_", "exp_", "zero_", "copy_", "select_mul_scalar_"]:
    OPS["ipv_" + _n] = _inplace_view_direct(_n)
OPS["ip_masked_fill_"] = _inplace("masked_fill_")
OPS["ipv_masked_fill_"] = _inplace_view_direct("masked_fill_")



def _conv(x, p, sd, mode):
    """conv1d / conv2d; params: stride (conv2d: 10 sh + sw when at least 10), padding h and w
    (conv1d: padding; the _mode ops: 1 'valid', 2 'same'), dilation, groups, has bias; inputs
    x, weight[, bias] (tests/ops/rows_conv.c)."""
    s = int(p[0])
    stride = (s // 10, s % 10) if sd == 2 and s >= 10 else s
    if mode:
        padding = "valid" if int(p[1]) == 1 else "same"
    else:
        padding = (int(p[1]), int(p[2])) if sd == 2 else int(p[1])
    f = F.conv2d if sd == 2 else F.conv1d
    return f(x[0], x[1], x[2] if p[5] else None, stride=stride, padding=padding,
             dilation=int(p[3]), groups=int(p[4]))


OPS["conv2d"] = lambda x, p: _conv(x, p, 2, False)
OPS["conv2d_mode"] = lambda x, p: _conv(x, p, 2, True)
OPS["conv1d"] = lambda x, p: _conv(x, p, 1, False)
OPS["conv1d_mode"] = lambda x, p: _conv(x, p, 1, True)


def _conv_t(x, p, sd):
    """conv_transpose1d / conv_transpose2d; params: stride, padding, output_padding, dilation
    (conv_transpose2d: each a pair written 10 h + w), groups, has bias; inputs x, weight[, bias]
    (tests/ops/rows_conv.c)."""
    v = [(int(q) // 10, int(q) % 10) if sd == 2 else int(q) for q in p[:4]]
    f = F.conv_transpose2d if sd == 2 else F.conv_transpose1d
    return f(x[0], x[1], x[2] if p[5] else None, stride=v[0], padding=v[1], output_padding=v[2],
             groups=int(p[4]), dilation=v[3])


OPS["conv_transpose2d"] = lambda x, p: _conv_t(x, p, 2)
OPS["conv_transpose1d"] = lambda x, p: _conv_t(x, p, 1)


def _pair(v):
    v = int(v)
    return (v // 10, v % 10) if v >= 10 else (v, v)


def _max_pool(x, p, indices):
    """max_pool2d; params kernel, stride (0: the kernel), padding, dilation, ceil_mode, a pair
    written 10 h + w when at least 10 (tests/ops/rows_pool.c); the values or the indices."""
    y, i = F.max_pool2d(x[0], _pair(p[0]), _pair(p[1]) if p[1] else None, _pair(p[2]),
                        _pair(p[3]), bool(p[4]), return_indices=True)
    return i if indices else y


def _avg_pool(x, p):
    """avg_pool2d; params kernel, stride (0: the kernel), padding, ceil_mode, count_include_pad,
    divisor_override (0: None)."""
    return F.avg_pool2d(x[0], _pair(p[0]), _pair(p[1]) if p[1] else None, _pair(p[2]),
                        bool(p[3]), bool(p[4]), int(p[5]) if p[5] else None)


def _adaptive_max(x, p, indices):
    y, i = F.adaptive_max_pool2d(x[0], (int(p[0]), int(p[1])), return_indices=True)
    return i if indices else y


OPS["max_pool2d"] = lambda x, p: _max_pool(x, p, False)
OPS["max_pool2d_indices"] = lambda x, p: _max_pool(x, p, True)
OPS["avg_pool2d"] = _avg_pool
OPS["adaptive_avg_pool2d"] = lambda x, p: F.adaptive_avg_pool2d(x[0], (int(p[0]), int(p[1])))
OPS["adaptive_max_pool2d"] = lambda x, p: _adaptive_max(x, p, False)
OPS["adaptive_max_pool2d_indices"] = lambda x, p: _adaptive_max(x, p, True)


def _batch_norm(x, p):
    """batch_norm; params training, has weight, has bias, has running statistics, momentum, eps;
    inputs x[, weight][, bias][, running_mean, running_var] (the last two const)."""
    rest = iter(x[1:])
    w = next(rest) if p[1] else None
    b = next(rest) if p[2] else None
    rm, rv = (next(rest), next(rest)) if p[3] else (None, None)
    return F.batch_norm(x[0], rm, rv, w, b, training=bool(p[0]), momentum=p[4], eps=p[5])


def _group_norm(x, p):
    """group_norm; params num_groups, has weight, has bias, eps; inputs x[, weight][, bias]."""
    rest = iter(x[1:])
    w = next(rest) if p[1] else None
    b = next(rest) if p[2] else None
    return F.group_norm(x[0], int(p[0]), w, b, p[3])


OPS["batch_norm"] = _batch_norm
OPS["group_norm"] = _group_norm


def _sdpa(x, p):
    """scaled_dot_product_attention: PyTorch 1.13 has no public SDPA, so the reference is
    the composed math of PyTorch 2.x's definition: softmax(q k^T / sqrt(E) + mask) v, with
    is_causal the top-left lower triangle and a bool mask keeping where true."""
    q, k, v = x[0], x[1], x[2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if p[0]:
        s = s.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(),
                          float("-inf"))
    if len(x) > 3:
        s = s.masked_fill(~x[3], float("-inf")) if x[3].dtype == torch.bool else s + x[3]
    return torch.softmax(s, -1) @ v


OPS["sdpa"] = _sdpa

# ---- the op table's rows against OPS and CASES -----------------------------------------


def table_path():
    if CHECK_ONLY and len(sys.argv) > 2:
        return sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "tests", "ops", "op_names.txt")


def check_table(path, cases):
    """Problems (strings) of the rows in path (tests/ops/op_names.txt: `row op...` or
    `row - no golden: why`): an op not in OPS, or (cases given) without a case."""
    used = None if cases is None else {op for _, op, _, _ in cases}
    problems = []
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            row, ops = words[0], words[1:]
            if not ops or (ops[0] == "-" and "golden:" not in line):
                problems.append(f"{row}: no golden ops and no reason")
            if ops and ops[0] == "-":
                continue
            for op in ops:
                if op not in OPS:
                    problems.append(f"{row}: golden op {op} is not in OPS")
                elif used is not None and op not in used:
                    problems.append(f"{row}: golden op {op} has no case in CASES")
    return problems


def report_table(cases):
    problems = check_table(table_path(), cases)
    for p in problems:
        print(f"gen_golden.py: op table: {p}")
    return 1 if problems else 0


if CHECK_ONLY and torch is None:
    rc = report_table(None)
    print(f"gen_golden.py: op table {'refused' if rc else 'checked'} against OPS "
          "(torch missing: CASES not built)")
    sys.exit(rc)

# ---- cases ---------------------------------------------------------------------

CASES = []


def case(name, op, inputs, params=()):
    CASES.append((name, op, inputs, list(params)))


S = (2, 3)
BIN_SHAPES = [
    ("same", (2, 3), (2, 3)),
    ("bcast_row", (2, 3), (3,)),
    ("bcast_both", (4, 1, 3), (2, 1)),
    ("bcast_scalar", (2, 3), ()),
    ("bcast_left", (1, 3), (2, 2, 3)),
]
for op, kb in [("add", "any"), ("sub", "any"), ("mul", "any"), ("div", "away"),
               ("maximum", "any"), ("minimum", "any")]:
    for sname, sa, sb in BIN_SHAPES:
        case(f"{op}_{sname}", op, [T(sa, 0), T(sb, 1, kb)])
for sname, sa, sb in BIN_SHAPES:
    case(f"pow_{sname}", "pow", [T(sa, 0, "pos"), T(sb, 1, "small")])
case("add_alpha", "add_alpha", [T((2, 3), 0), T((3,), 1)], [-2.5])
case("add_transposed", "add", [T((3, 4), 0, layout="t"), T((3, 4), 1)])
case("mul_transposed_both", "mul", [T((4, 3), 0, layout="t"), T((4, 3), 1, layout="t")])
case("div_transposed_bcast", "div", [T((3, 4), 0, layout="t"), T((4,), 1, "away")])
# ties: PyTorch splits the gradient in half
case("maximum_ties", "maximum", [Tv([-1.0, 0.0, 1.0, 2.0, 3.0]), Tv([1.0, 0.0, 1.0, 5.0, -3.0])])
case("minimum_ties", "minimum", [Tv([-1.0, 0.0, 1.0, 2.0, 3.0]), Tv([1.0, 0.0, 1.0, 5.0, -3.0])])
for op, k in [("eq", 0), ("ne", 0), ("lt", 1), ("le", 1), ("gt", 2), ("ge", 2)]:
    case(f"cmp_{op}", op, [C(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])),
                           C(torch.tensor([1.0, 5.0, 0.0]))])

for op, s in [("add_scalar", 1.75), ("sub_scalar", -0.5), ("mul_scalar", -3.25),
              ("div_scalar", 0.4), ("rsub_scalar", 2.5)]:
    case(op, op, [T(S, 0)], [s])
for e in [2.0, 3.0, 0.5, -1.5, 0.0, 1.0]:
    tag = str(e).replace("-", "m").replace(".", "p")
    case(f"pow_scalar_{tag}", "pow_scalar", [T(S, 0, "pos")], [e])
case("pow_scalar_2_negbase", "pow_scalar", [T(S, 0)], [2.0])
case("pow_scalar_3_negbase", "pow_scalar", [T(S, 0)], [3.0])

UNARY = [("neg", "any"), ("exp", "small"), ("log", "pos"), ("sqrt", "pos"), ("abs", "any"),
         ("sigmoid", "any"), ("tanh", "any"), ("relu", "any"), ("sin", "any"), ("cos", "any")]
for op, kind in UNARY:
    case(op, op, [T((3, 4), 0, kind)])
    case(f"{op}_transposed", op, [T((3, 4), 2, kind, layout="t")])
case("abs_at_zero", "abs", [Tv([-1.5, 0.0, 2.0])])
case("relu_at_zero", "relu", [Tv([-1.5, 0.0, 2.0])])
case("clamp", "clamp", [T((3, 4), 0)], [-0.5, 1.0])
case("clamp_boundary", "clamp", [Tv([-1.0, 0.0, 1.0, 2.0, 3.0])], [0.0, 2.0])
# min above max: max everywhere; a NaN bound: NaN everywhere (both with zero gradients)
case("clamp_crossed", "clamp", [T((3, 4), 0)], [0.5, -0.5])
case("clamp_nan_bound", "clamp", [T((3, 4), 0)], [float("nan"), 1.0])
case("clamp_min", "clamp_min", [T((3, 4), 1)], [0.25])
case("clamp_max", "clamp_max", [T((3, 4), 1)], [0.25])

X3 = (2, 3, 4)
for op in ["sum", "mean", "max", "min"]:
    case(op, op, [T(X3, 0)])
case("sum_transposed", "sum", [T((3, 4), 0, layout="t")])
case("max_ties", "max", [Tv([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])])
case("min_ties", "min", [Tv([[1.0, 3.0, 3.0], [2.0, 0.0, 0.0]])])
for op in ["sum_dim", "mean_dim", "max_dim"]:
    for d in [0, 1, -1]:
        for kd in [0, 1]:
            case(f"{op}_{d if d >= 0 else 'm1'}_{'keep' if kd else 'nokeep'}", op, [T(X3, 0)],
                 [d, kd])
    case(f"{op}_transposed", op, [T((3, 4), 1, layout="t")], [1, 0])
case("max_dim_ties_1", "max_dim", [Tv([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])], [1, 0])
case("max_dim_ties_0", "max_dim", [Tv([[1.0, 3.0, 3.0], [2.0, 3.0, 0.0]])], [0, 1])
case("argmax", "argmax", [C(vals(X3, 0))])
case("argmax_ties", "argmax", [C(torch.tensor([[1.0, 3.0, 3.0], [3.0, 2.0, 0.0]]))])
case("argmax_dim_1", "argmax_dim", [C(vals(X3, 0))], [1, 0])
case("argmax_dim_m1_keep", "argmax_dim", [C(vals(X3, 0))], [-1, 1])
for d in [0, -1]:
    for kd in [0, 1]:
        tag = f"{d if d >= 0 else 'm1'}_{'keep' if kd else 'nokeep'}"
        case(f"min_dim_{tag}", "min_dim", [T(X3, 0)], [d, kd])
        case(f"max_dim_indices_{tag}", "max_dim_indices", [C(vals(X3, 0))], [d, kd])
        case(f"min_dim_indices_{tag}", "min_dim_indices", [C(vals(X3, 0))], [d, kd])
case("min_dim_ties_1", "min_dim", [Tv([[1.0, 0.0, 0.0], [2.0, 2.0, 3.0]])], [1, 0])
case("min_dim_indices_ties", "min_dim_indices", [C(torch.tensor([[1.0, 0.0, 0.0], [2.0, 2.0, 3.0]]))],
     [1, 0])
case("argmin", "argmin", [C(vals(X3, 0))])
_INF = float("inf")
for o, kd, dims in [(2, 0, []), (1, 0, [1]), (_INF, 1, [0]), (-_INF, 0, [-1]), (3, 0, [0, 2]),
                    (1.5, 1, [2, 1]), (0.5, 0, [1])]:
    tag = str(o).replace("-", "m").replace(".", "p")
    case(f"vector_norm_{tag}_{len(dims)}{'_keep' if kd else ''}", "vector_norm", [T(X3, 1)],
         [o, kd, len(dims)] + dims)
case("vector_norm_transposed", "vector_norm", [T((3, 4), 0, layout="t")], [2, 0, 1, 1])
_ZROW = [[0.0, 0.0, 0.0], [1.0, -2.0, 2.0], [3.0, 3.0, -1.0]]
for o in [2, 1, _INF, -_INF, 3, 0.5, 1.5]:
    tag = str(o).replace("-", "m").replace(".", "p")
    case(f"vector_norm_zero_row_{tag}", "vector_norm", [Tv(_ZROW)], [o, 0, 1, 1])
case("argmin_ties", "argmin", [C(torch.tensor([[1.0, 0.0, 3.0], [0.0, 2.0, 0.0]]))])
case("argmin_dim_1", "argmin_dim", [C(vals(X3, 0))], [1, 0])
case("argmin_dim_m1_keep", "argmin_dim", [C(vals(X3, 0))], [-1, 1])

MM = [
    ("1d_1d", (4,), (4,)),
    ("2d_1d", (3, 4), (4,)),
    ("1d_2d", (4,), (4, 2)),
    ("2d_2d", (3, 4), (4, 2)),
    ("3d_3d", (2, 3, 4), (2, 4, 5)),
    ("3d_2d", (2, 3, 4), (4, 5)),
    ("2d_3d", (3, 4), (2, 4, 5)),
    ("3d_1d", (2, 3, 4), (4,)),
    ("1d_3d", (4,), (2, 4, 5)),
    ("bcast_4d_3d", (2, 1, 3, 4), (5, 4, 2)),
    ("bcast_1_batch", (1, 3, 4), (3, 4, 2)),
]
for name, sa, sb in MM:
    case(f"matmul_{name}", "matmul", [T(sa, 0), T(sb, 1)])
case("matmul_transposed_a", "matmul", [T((3, 4), 0, layout="t"), T((4, 2), 1)])
case("matmul_transposed_b", "matmul", [T((3, 4), 0), T((4, 2), 1, layout="t")])
case("matmul_transposed_batched", "matmul", [T((2, 3, 4), 0, layout="t"),
                                             T((2, 4, 5), 1, layout="t")])
case("linear", "linear", [T((4, 3), 0), T((2, 3), 1), T((2,), 2)])
case("linear_nobias", "linear", [T((4, 3), 0), T((2, 3), 1)])
case("linear_3d", "linear", [T((2, 4, 3), 0), T((5, 3), 1), T((5,), 2)])
case("linear_1d", "linear", [T((3,), 0), T((2, 3), 1), T((2,), 2)])
case("linear_transposed_w", "linear", [T((4, 3), 0), T((2, 3), 1, layout="t"), T((2,), 2)])

for op in ["softmax", "log_softmax"]:
    case(f"{op}_dim0", op, [T((3, 4), 0, "small")], [0])
    case(f"{op}_dim1", op, [T((3, 4), 0, "small")], [1])
    case(f"{op}_dimm1_3d", op, [T(X3, 1, "small")], [-1])
    case(f"{op}_dim1_3d", op, [T(X3, 1, "small")], [1])
    case(f"{op}_transposed", op, [T((3, 4), 2, "small", layout="t")], [1])
    case(f"{op}_large", op, [Tv([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]])], [1])
case("cross_entropy", "cross_entropy",
     [T((4, 5), 0), C(torch.tensor([1, 0, 4, 2], dtype=torch.int64))])
case("cross_entropy_transposed", "cross_entropy",
     [T((4, 5), 1, layout="t"), C(torch.tensor([3, 3, 0, 1], dtype=torch.int64))])
case("cross_entropy_large", "cross_entropy",
     [Tv([[500.0, 0.0, -500.0], [1.0, 2.0, 3.0]]), C(torch.tensor([2, 0], dtype=torch.int64))])
_W5, _W3 = C(vals((5,), 3, "pos")), C(vals((3,), 4, "pos"))
_T4 = C(torch.tensor([1, 0, 4, 2]))
_T6 = C(torch.tensor([1, 0, 2, 1, 1, 0]))
_T24 = C(torch.tensor([[0, 2, 1, 2], [1, 1, 0, 2]]))
_T222 = C(torch.tensor([[[0, 2], [1, 2]], [[1, 1], [0, 2]]]))
case("nll_loss_2d_mean", "nll_loss", [T((4, 5), 0), _T4], [0, -100, 0, 0])
case("nll_loss_2d_sum_weight", "nll_loss", [T((4, 5), 0), _T4, _W5], [1, -100, 0, 1])
case("nll_loss_2d_none_ignore", "nll_loss", [T((6, 3), 1), _T6], [2, 1, 0, 0])
case("nll_loss_2d_mean_weight_ignore", "nll_loss", [T((6, 3), 1), _T6, _W3], [0, 1, 0, 1])
case("nll_loss_1d", "nll_loss", [T((5,), 2), C(torch.tensor(3))], [0, -100, 0, 0])
case("nll_loss_3d_none", "nll_loss", [T((2, 3, 4), 0), _T24], [2, -100, 0, 0])
case("nll_loss_3d_mean_ignore", "nll_loss", [T((2, 3, 4), 0), _T24], [0, 2, 0, 0])
case("nll_loss_4d_mean_weight", "nll_loss", [T((2, 3, 2, 2), 1), _T222, _W3], [0, -100, 0, 1])
case("nll_loss_4d_none", "nll_loss", [T((2, 3, 2, 2), 1, layout="t"), _T222], [2, -100, 0, 0])
case("cross_entropy_ex_smooth", "cross_entropy_ex", [T((4, 5), 0), _T4], [0, -100, 0.1, 0])
case("cross_entropy_ex_smooth_weight_ignore", "cross_entropy_ex", [T((6, 3), 1), _T6, _W3],
     [0, 1, 0.2, 1])
case("cross_entropy_ex_smooth_3d_none", "cross_entropy_ex", [T((2, 3, 4), 0), _T24],
     [2, -100, 0.3, 0])
case("cross_entropy_ex_smooth_sum_weight", "cross_entropy_ex", [T((4, 5), 0), _T4, _W5],
     [1, -100, 0.25, 1])
case("cross_entropy_ex_4d_weight", "cross_entropy_ex", [T((2, 3, 2, 2), 1), _T222, _W3],
     [0, -100, 0, 1])
case("cross_entropy_ex_none", "cross_entropy_ex", [T((4, 5), 2), _T4], [2, -100, 0, 0])
_P45 = C(torch.softmax(vals((4, 5), 6), 1))
case("cross_entropy_ex_prob", "cross_entropy_ex", [T((4, 5), 0), _P45], [0, -100, 0, 0])
case("cross_entropy_ex_prob_smooth_weight_none", "cross_entropy_ex", [T((4, 5), 0), _P45, _W5],
     [2, -100, 0.2, 1])
case("cross_entropy_ex_prob_sum", "cross_entropy_ex", [T((4, 5), 1), _P45], [1, -100, 0, 0])
case("mse_loss", "mse_loss", [T((3, 4), 0), T((3, 4), 1)])
case("mse_loss_const_target", "mse_loss", [T((3, 4), 0), C(vals((3, 4), 5))])

case("view", "view", [T(X3, 0)], [6, 4])
case("view_infer", "view", [T(X3, 0)], [4, -1])
case("view_flat", "view", [T(X3, 0)], [-1])
case("reshape", "reshape", [T(X3, 0)], [3, 8])
case("reshape_transposed", "reshape", [T((3, 4), 0, layout="t")], [2, 6])
case("transpose", "transpose", [T(X3, 0)], [0, 2])
case("transpose_neg", "transpose", [T(X3, 0)], [-1, -2])
case("permute", "permute", [T(X3, 0)], [2, 0, 1])
case("narrow", "narrow", [T(X3, 0)], [1, 1, 2])
case("narrow_last", "narrow", [T(X3, 0)], [-1, 2, 2])
case("select", "select", [T(X3, 0)], [1, 2])
case("select_neg", "select", [T(X3, 0)], [0, -1])
case("expand", "expand", [T((3, 1), 0)], [2, 3, 4])
case("expand_keep", "expand", [T((3, 1), 0)], [-1, 5])
case("squeeze", "squeeze", [T((2, 1, 3, 1), 0)])
case("squeeze_dim", "squeeze_dim", [T((2, 1, 3, 1), 0)], [1])
case("squeeze_dim_noop", "squeeze_dim", [T((2, 1, 3, 1), 0)], [0])
case("unsqueeze", "unsqueeze", [T(S, 0)], [1])
case("unsqueeze_end", "unsqueeze", [T(S, 0)], [-1])
case("flatten", "flatten", [T(X3, 0)], [1, 2])
case("flatten_all", "flatten", [T(X3, 0)], [0, -1])
case("flatten_transposed", "flatten", [T((3, 4), 0, layout="t")], [0, 1])
case("contiguous_transposed", "contiguous", [T((3, 4), 0, layout="t")])
case("clone", "clone", [T(S, 0)])
case("cat_dim0", "cat", [T((2, 3), 0), T((1, 3), 1), T((3, 3), 2)], [0])
case("cat_dim1", "cat", [T((2, 3), 0), T((2, 1), 1), T((2, 2), 2)], [1])
case("cat_dimm1_transposed", "cat", [T((3, 2), 0, layout="t"), T((3, 4), 1)], [-1])
case("stack_dim0", "stack", [T(S, 0), T(S, 1), T(S, 2)], [0])
case("stack_dim1", "stack", [T(S, 0), T(S, 1)], [1])
case("stack_dim2", "stack", [T(S, 0), T(S, 1, layout="t")], [2])
case("split_dim0", "split", [T((5, 3), 0)], [2, 0, 2])
case("split_dim1_transposed", "split", [T((3, 5), 1, layout="t")], [2, 1, 1])
case("split_dim_m1", "split", [T(X3, 0)], [3, -1, 0])
case("split_with_sizes", "split_with_sizes", [T((2, 6), 0)], [1, 1, 3, 1, 3, 2])
case("split_with_sizes_dim0", "split_with_sizes", [T((4, 3), 1)], [0, 0, 2, 3, 1])
case("chunk_ragged", "chunk", [T((2, 5), 0)], [4, 1, 2])
case("chunk_dim0", "chunk", [T((6, 2), 1)], [3, 0, 1])
case("unbind_dim0", "unbind", [T((3, 4), 0)], [0, 1])
case("unbind_dim_m1", "unbind", [T(X3, 1)], [-1, 3])
case("unbind_transposed", "unbind", [T((3, 4), 2, layout="t")], [1, 0])

case("mlp", "mlp", [T((4, 3), 0), T((5, 3), 1), T((5,), 2), T((3, 5), 3), T((3,), 4),
                    C(torch.tensor([2, 0, 1, 1], dtype=torch.int64))])

# in-place ops on a non-leaf, and through a view (CopySlices)
for n, extra, params in [("add_", [T(S, 1)], []), ("sub_", [T((3,), 1)], []),
                         ("mul_", [T(S, 1)], []), ("div_", [T((3,), 1, "away")], []),
                         ("add_scalar_", [], [1.5]), ("mul_scalar_", [], [-2.0]),
                         ("zero_", [], []), ("fill_", [], [0.75]), ("copy_", [T((3,), 1)], []),
                         ("clamp_", [], [-0.5, 1.0]), ("relu_", [], []), ("sigmoid_", [], []),
                         ("exp_", [], []), ("neg_", [], [])]:
    case("ip_" + n.rstrip("_"), "ip_" + n, [T(S, 0)] + extra, params)
for n, extra, params in [("mul_", [T((4,), 1)], []), ("add_scalar_", [], [2.0]),
                         ("exp_", [], []), ("zero_", [], []), ("copy_", [T((2, 4), 1)], []),
                         ("select_mul_scalar_", [], [3.0])]:
    case("ipv_" + n.rstrip("_"), "ipv_" + n, [T((3, 4), 0)] + extra, params)

# indexing and masks
def I(values):
    return C(torch.tensor(values, dtype=torch.int64))


def B(values):
    return C(torch.tensor(values, dtype=torch.bool))


case("embedding", "embedding", [T((5, 3), 0), I([[1, 4, 1], [0, 1, 3]])])
case("embedding_1d", "embedding", [T((4, 2), 1), I([3, 3, 3, 0])])
case("embedding_0d", "embedding", [T((4, 2), 1), I(2)])
case("embedding_transposed", "embedding", [T((5, 3), 2, layout="t"), I([4, 0, 4])])
case("index_select_dim0", "index_select", [T((4, 3), 0), I([3, 0, 3, 1])], [0])
case("index_select_dim1", "index_select", [T((3, 4), 0), I([2, 2, 0])], [1])
case("index_select_dimm1_3d", "index_select", [T(X3, 1), I([1, 3, 1, 1, 0])], [-1])
case("index_select_mid_3d", "index_select", [T(X3, 1), I([2, 0])], [1])
case("index_select_transposed", "index_select", [T((3, 4), 2, layout="t"), I([0, 2, 0])], [0])
case("index_select_0d_index", "index_select", [T((3, 4), 0), I(2)], [1])
case("gather_dim0", "gather", [T((3, 4), 0), I([[0, 2, 2, 1], [1, 1, 0, 2]])], [0])
case("gather_dim1", "gather", [T((3, 4), 0), I([[3, 3], [0, 1], [2, 0]])], [1])
case("gather_small_index", "gather", [T((3, 4), 1), I([[1], [3]])], [1])
case("gather_3d", "gather", [T(X3, 1), I([[[0, 3], [1, 1]], [[2, 2], [3, 0]]])], [2])
case("gather_transposed", "gather", [T((3, 4), 2, layout="t"), I([[2, 0, 1, 1]])], [0])
case("scatter_add_dim0", "scatter_add",
     [T((3, 4), 0), I([[0, 2, 2, 1], [0, 0, 0, 2]]), T((2, 4), 1)], [0])
case("scatter_add_dim1", "scatter_add", [T((3, 4), 0), I([[3, 3, 3], [0, 1, 0]]), T((2, 3), 1)],
     [1])
case("scatter_add_3d", "scatter_add",
     [T(X3, 0), I([[[0, 3], [1, 1]], [[2, 2], [3, 0]]]), T((2, 2, 2), 2)], [-1])
case("scatter_add_transposed", "scatter_add",
     [T((3, 4), 0, layout="t"), I([[1, 1, 0, 2]]), T((1, 4), 1)], [0])
case("where", "where", [B([[True, False, True], [False, False, True]]), T(S, 0), T(S, 1)])
case("where_bcast", "where", [B([True, False, True]), T((2, 1), 0), T((4, 1, 3), 1)])
case("where_scalar_other", "where", [B([[True, False], [False, True]]), T((2, 2), 0), T((), 1)])
case("where_transposed", "where", [B([[True, False, True, True]] * 3), T((3, 4), 0, layout="t"),
                                   T((3, 4), 1)])
case("masked_fill", "masked_fill", [T((3, 4), 0), B([True, False, False, True])], [2.5])
case("masked_fill_bcast_out", "masked_fill", [T((4,), 0), B([[True, False, True, False]] * 2)],
     [-1.0])
case("masked_fill_transposed", "masked_fill",
     [T((3, 4), 1, layout="t"), B([[True], [False], [True]])], [0.0])
case("ip_masked_fill", "ip_masked_fill_", [T(S, 0), B([False, True, True])], [7.0])
case("ipv_masked_fill", "ipv_masked_fill_", [T((3, 4), 0), B([True, False, False, True])], [-3.0])
for op in ["tril", "triu"]:
    for k in [0, 1, -1]:
        case(f"{op}_{k if k >= 0 else 'm1'}", op, [T((3, 4), 0)], [k])
    case(f"{op}_3d", op, [T(X3, 1)], [0])
    case(f"{op}_tall", op, [T((5, 2), 1)], [-2])
    case(f"{op}_transposed", op, [T((4, 3), 2, layout="t")], [1])
    case(f"{op}_far", op, [T((3, 4), 0)], [7])
# normalisation, activations, statistics
LN = (4, 7, 16)
for nd, ns in [(1, (16,)), (2, (7, 16))]:
    for wb in [(0, 0), (1, 1), (1, 0), (0, 1)]:
        extra = [T(ns, 1)] * wb[0] + [T(ns, 2)] * wb[1]
        tag = "" if wb == (1, 1) else "_w" if wb[0] else "_b" if wb[1] else "_plain"
        case(f"layer_norm_{nd}d{tag}", "layer_norm", [T(LN, 0)] + extra, [nd, *wb, 1e-5])
        extra32 = [T32(ns, 1)] * wb[0] + [T32(ns, 2)] * wb[1]
        case(f"layer_norm_f32_{nd}d{tag}", "layer_norm", [T32(LN, 0)] + extra32,
             [nd, *wb, 1e-5])
case("layer_norm_transposed", "layer_norm", [T((3, 4), 0, layout="t"), T((4,), 1), T((4,), 2)],
     [1, 1, 1, 1e-5])
case("layer_norm_3d_eps", "layer_norm", [T(X3, 0), T((3, 4), 1), T((3, 4), 2)], [2, 1, 1, 0.1])
case("layer_norm_whole", "layer_norm", [T(X3, 0)], [3, 0, 0, 1e-5])
case("layer_norm_const", "layer_norm", [Tv([[1.0, 1.0, 1.0], [2.0, -1.0, 0.5]])],
     [1, 0, 0, 1e-5])
# batch_norm: training updates the (const) running statistics, eval reads them
_RM, _RV = (lambda c: C(vals((c,), 3))), (lambda c: C(vals((c,), 4, "pos")))
for tag, shape, train, wb, run, mo, eps, layout in [
        ("2d_train", (4, 3), 1, (1, 1), 1, 0.1, 1e-5, "c"),
        ("3d_train_plain", (3, 2, 5), 1, (0, 0), 0, 0.1, 1e-5, "c"),
        ("4d_train", (2, 3, 4, 5), 1, (1, 1), 1, 0.1, 1e-5, "c"),
        ("4d_train_w", (2, 3, 4, 5), 1, (1, 0), 0, 0.3, 1e-3, "c"),
        ("4d_eval", (2, 3, 4, 5), 0, (1, 1), 1, 0.1, 1e-5, "c"),
        ("3d_eval_b", (3, 2, 5), 0, (0, 1), 1, 0.1, 0.1, "c"),
        ("batch1", (1, 3, 4), 1, (1, 1), 1, 0.1, 1e-5, "c"),
        ("transposed", (5, 4), 1, (1, 1), 1, 0.1, 1e-5, "t")]:
    c = shape[1]
    ins = ([T(shape, 0, layout=layout)] + [T((c,), 1)] * wb[0] + [T((c,), 2)] * wb[1] +
           ([_RM(c), _RV(c)] if run else []))
    case(f"batch_norm_{tag}", "batch_norm", ins, [train, *wb, run, mo, eps])
case("batch_norm_f32_4d_train", "batch_norm", [T32((2, 3, 4, 5), 0), T32((3,), 1), T32((3,), 2)],
     [1, 1, 1, 0, 0.1, 1e-5])
for tag, shape, g, wb, layout in [("3d", (2, 6, 5), 3, (1, 1), "c"),
                                  ("4d_w", (2, 4, 3, 3), 2, (1, 0), "c"),
                                  ("2d_plain", (3, 4), 2, (0, 0), "c"),
                                  ("g1_w", (2, 4, 5), 1, (1, 0), "c"),
                                  ("per_channel", (2, 3, 4), 3, (1, 1), "c"),
                                  ("transposed", (4, 6), 2, (1, 1), "t")]:
    c = shape[1]
    ins = [T(shape, 0, layout=layout)] + [T((c,), 1)] * wb[0] + [T((c,), 2)] * wb[1]
    case(f"group_norm_{tag}", "group_norm", ins, [g, *wb, 1e-5])
case("group_norm_f32_4d", "group_norm", [T32((2, 4, 3, 3), 0), T32((4,), 1), T32((4,), 2)],
     [2, 1, 1, 1e-5])
for approx in [0, 1]:
    tag = "_tanh" if approx else ""
    case(f"gelu{tag}", "gelu", [T(X3, 0)], [approx])
    case(f"gelu{tag}_transposed", "gelu", [T((3, 4), 1, layout="t")], [approx])
    case(f"gelu{tag}_f32", "gelu", [T32(X3, 0)], [approx])
    case(f"gelu{tag}_extremes", "gelu", [Tv([-40.0, -6.0, -1e-3, 0.0, 1e-3, 6.0, 40.0])],
         [approx])
case("silu", "silu", [T(X3, 0)])
case("silu_transposed", "silu", [T((3, 4), 1, layout="t")])
case("silu_f32", "silu", [T32(X3, 0)])
case("silu_extremes", "silu", [Tv([-800.0, -40.0, -1e-3, 0.0, 1e-3, 40.0, 800.0])])
for d, k in [(0, 0), (1, 0), (-1, 1), (2, 1)]:
    case(f"logsumexp_dim{d}{'_keep' if k else ''}", "logsumexp", [T(X3, 0)], [d, k])
case("logsumexp_transposed", "logsumexp", [T((3, 4), 0, layout="t")], [1, 0])
case("logsumexp_large", "logsumexp",
     [Tv([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]])], [1, 0])
case("logsumexp_1d", "logsumexp", [T((5,), 0)], [0, 0])
for op in ["var_dim", "std_dim"]:
    for d, c, k in [(0, 1, 0), (1, 0, 0), (-1, 1, 1), (2, 0, 1), (1, 2, 0)]:
        case(f"{op}{d}_c{c}{'_keep' if k else ''}", op, [T(X3, 0)], [d, c, k])
    case(f"{op}_transposed", op, [T((3, 4), 0, layout="t")], [1, 1, 0])
    case(f"{op}_f32", op, [T32(X3, 0)], [2, 1, 0])
# scaled_dot_product_attention (params: is_causal, dropout_p = 0)
_SQ, _SK, _SV = (2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)
_SMASK = torch.tensor([[(3 * i + 5 * j) % 7 != 2 or j == i for j in range(7)] for i in range(5)])
case("sdpa", "sdpa", [T(_SQ, 0, "small"), T(_SK, 1, "small"), T(_SV, 2)], [0, 0])
case("sdpa_causal", "sdpa", [T((2, 2, 6, 4), 0, "small"), T((2, 2, 6, 4), 1, "small"),
                             T((2, 2, 6, 4), 2)], [1, 0])
case("sdpa_causal_l_lt_s", "sdpa", [T(_SQ, 0, "small"), T(_SK, 1, "small"), T(_SV, 2)], [1, 0])
case("sdpa_causal_l_gt_s", "sdpa", [T((1, 2, 7, 4), 0, "small"), T((1, 2, 5, 4), 1, "small"),
                                    T((1, 2, 5, 3), 2)], [1, 0])
case("sdpa_bool_mask", "sdpa", [T(_SQ, 0, "small"), T(_SK, 1, "small"), T(_SV, 2),
                                C(_SMASK)], [0, 0])
case("sdpa_float_mask_b1ls", "sdpa", [T(_SQ, 0, "small"), T(_SK, 1, "small"), T(_SV, 2),
                                      C(vals((2, 1, 5, 7), 3, "small"))], [0, 0])
case("sdpa_bcast", "sdpa", [T(_SQ, 0, "small"), T((7, 4), 1, "small"), T((1, 7, 3), 2)],
     [0, 0])
case("sdpa_l1", "sdpa", [T((2, 3, 1, 4), 0, "small"), T(_SK, 1, "small"), T(_SV, 2)], [0, 0])
case("sdpa_s1", "sdpa", [T(_SQ, 0, "small"), T((2, 3, 1, 4), 1, "small"),
                         T((2, 3, 1, 3), 2)], [1, 0])
case("sdpa_2d_transposed", "sdpa", [T((5, 4), 0, "small", layout="t"), T((7, 4), 1, "small"),
                                    T((7, 3), 2)], [0, 0])

# conv: params stride, pad h, pad w (or mode), dilation, groups, has bias
case("conv2d_basic", "conv2d", [T((2, 3, 5, 6), 0), T((4, 3, 3, 3), 1), T((4,), 2)],
     [1, 0, 0, 1, 1, 1])
case("conv2d_stride_pad_dil_groups", "conv2d", [T((2, 4, 7, 8), 0), T((6, 2, 3, 2), 1)],
     [21, 1, 2, 2, 2, 0])
case("conv2d_depthwise", "conv2d", [T((1, 3, 6, 6), 0), T((3, 1, 3, 3), 1), T((3,), 2)],
     [2, 1, 1, 1, 3, 1])
case("conv2d_unbatched", "conv2d", [T((3, 5, 5), 0), T((2, 3, 2, 2), 1), T((2,), 2)],
     [1, 0, 1, 1, 1, 1])
case("conv2d_mode_same_even", "conv2d_mode", [T((1, 2, 5, 6), 0), T((3, 2, 2, 4), 1),
                                              T((3,), 2)], [1, 2, 0, 1, 1, 1])
case("conv2d_mode_valid", "conv2d_mode", [T((2, 2, 6, 7), 0), T((3, 2, 3, 3), 1)],
     [2, 1, 0, 1, 1, 0])
case("conv1d_basic", "conv1d", [T((2, 3, 8), 0), T((4, 3, 3), 1), T((4,), 2)], [1, 0, 0, 1, 1, 1])
case("conv1d_stride_dil_groups", "conv1d", [T((2, 4, 11), 0), T((6, 2, 3), 1), T((6,), 2)],
     [2, 2, 0, 2, 2, 1])
case("conv1d_unbatched", "conv1d", [T((3, 7), 0), T((2, 3, 2), 1)], [1, 1, 0, 1, 1, 0])
case("conv1d_mode_same_even", "conv1d_mode", [T((2, 3, 7), 0), T((2, 3, 4), 1), T((2,), 2)],
     [1, 2, 0, 1, 1, 1])
# conv_transpose: params stride, padding, output_padding, dilation (2d: 10 h + w), groups, bias
case("conv_transpose2d_basic", "conv_transpose2d", [T((2, 4, 5, 5), 0), T((4, 3, 3, 3), 1),
                                                    T((3,), 2)], [11, 0, 0, 11, 1, 1])
case("conv_transpose2d_stride_pad_outpad", "conv_transpose2d",
     [T((2, 3, 4, 5), 0), T((3, 2, 3, 3), 1), T((2,), 2)], [21, 12, 10, 11, 1, 1])
case("conv_transpose2d_dil_groups", "conv_transpose2d", [T((1, 4, 3, 4), 0), T((4, 2, 3, 2), 1)],
     [22, 11, 11, 22, 2, 0])
case("conv_transpose2d_depthwise", "conv_transpose2d",
     [T((2, 3, 4, 4), 0), T((3, 1, 3, 3), 1), T((3,), 2)], [22, 0, 11, 11, 3, 1])
case("conv_transpose2d_unbatched", "conv_transpose2d",
     [T((4, 3, 3), 0), T((4, 2, 2, 2), 1), T((2,), 2)], [11, 1, 0, 11, 1, 1])
case("conv_transpose1d_basic", "conv_transpose1d", [T((2, 4, 5), 0), T((4, 3, 3), 1), T((3,), 2)],
     [1, 0, 0, 1, 1, 1])
case("conv_transpose1d_stride_dil_groups", "conv_transpose1d",
     [T((2, 4, 6), 0), T((4, 1, 3), 1), T((2,), 2)], [3, 1, 2, 2, 2, 1])
case("conv_transpose1d_unbatched", "conv_transpose1d", [T((3, 5), 0), T((3, 2, 2), 1)],
     [2, 0, 1, 1, 1, 0])

# pooling: params as tests/ops/rows_pool.c (pairs 10 h + w)
_TIES = [[1.0, 1.0, 0.5, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0, -1.0], [0.0, 3.0, 3.0, 3.0, 3.0],
         [-2.0, -2.0, -2.0, -2.0, 0.25]]
_NANS = [[0.5, float("nan"), 1.0, 2.0], [float("nan"), 3.0, -1.0, 0.0], [1.0, 1.0, float("nan"), float("nan")]]
for op in ("max_pool2d", "max_pool2d_indices"):
    case(f"{op}_2x2", op, [T((2, 3, 6, 6), 0)], [2, 0, 0, 1, 0])
    case(f"{op}_transposed", op, [T((2, 3, 5, 6), 0, layout="t")], [2, 0, 0, 1, 0])
    case(f"{op}_batch1", op, [T((1, 2, 5, 5), 1)], [3, 1, 1, 1, 0])
    case(f"{op}_unbatched", op, [T((3, 5, 6), 0)], [2, 1, 0, 1, 0])
    case(f"{op}_dilation2", op, [T((1, 2, 8, 7), 2)], [3, 1, 1, 2, 0])
    case(f"{op}_stride2_odd", op, [T((2, 2, 7, 9), 0)], [3, 2, 1, 1, 0])
    case(f"{op}_ceil", op, [T((2, 1, 5, 7), 1)], [2, 2, 1, 1, 1])
    case(f"{op}_ceil_dil2_rect", op, [T((1, 2, 7, 8), 0)], [32, 21, 10, 2, 1])
    case(f"{op}_ties", op, [Tv([[_TIES]])], [2, 1, 0, 1, 0])
    case(f"{op}_nan", op, [Tv([_NANS])], [2, 1, 1, 1, 1])
    # 2x2 at stride 2 without padding: the CPU's one-pass kernel, then a ceil_mode last row
    case(f"{op}_ties_s2", op, [Tv([[_TIES]])], [2, 0, 0, 1, 0])
    case(f"{op}_nan_s2_ceil", op, [Tv([_NANS])], [2, 0, 0, 1, 1])
    case(f"{op}_s2_ceil_odd_rows", op, [T((1, 2, 7, 8), 1)], [2, 0, 0, 1, 1])
case("avg_pool2d_2x2", "avg_pool2d", [T((2, 3, 6, 6), 0)], [2, 0, 0, 0, 1, 0])
case("avg_pool2d_transposed", "avg_pool2d", [T((2, 3, 5, 6), 0, layout="t")], [2, 0, 0, 0, 1, 0])
case("avg_pool2d_unbatched", "avg_pool2d", [T((3, 5, 6), 1)], [2, 1, 0, 0, 1, 0])
case("avg_pool2d_stride2_odd_pad", "avg_pool2d", [T((1, 2, 7, 9), 0)], [3, 2, 1, 0, 1, 0])
case("avg_pool2d_exclude_pad", "avg_pool2d", [T((1, 2, 7, 9), 1)], [3, 2, 1, 0, 0, 0])
case("avg_pool2d_ceil", "avg_pool2d", [T((2, 1, 5, 7), 0)], [2, 2, 1, 1, 1, 0])
case("avg_pool2d_ceil_exclude", "avg_pool2d", [T((1, 2, 5, 5), 2)], [3, 2, 1, 1, 0, 0])
case("avg_pool2d_divisor", "avg_pool2d", [T((1, 2, 5, 6), 0)], [32, 21, 10, 1, 1, 5])
case("avg_pool2d_nan", "avg_pool2d", [Tv([_NANS])], [2, 1, 1, 0, 1, 0])
for op in ("adaptive_avg_pool2d", "adaptive_max_pool2d", "adaptive_max_pool2d_indices"):
    case(f"{op}_shrink", op, [T((2, 3, 5, 7), 0)], [3, 4])
    case(f"{op}_grow", op, [T((1, 2, 3, 4), 1)], [5, 6])
    case(f"{op}_transposed", op, [T((2, 2, 6, 5), 0, layout="t")], [4, 3])
    case(f"{op}_unbatched", op, [T((2, 7, 5), 2)], [3, 2])
    case(f"{op}_1x1", op, [T((2, 3, 4, 5), 0)], [1, 1])
case("adaptive_max_pool2d_ties", "adaptive_max_pool2d", [Tv([[_TIES]])], [2, 3])
case("adaptive_max_pool2d_indices_ties", "adaptive_max_pool2d_indices", [Tv([[_TIES]])], [2, 3])
case("adaptive_max_pool2d_nan", "adaptive_max_pool2d", [Tv([_NANS])], [2, 2])
case("adaptive_max_pool2d_indices_nan", "adaptive_max_pool2d_indices", [Tv([_NANS])], [2, 2])

# ---- writing -----------------------------------------------------------------------


def fmt(v):
    return repr(float(v)) if not isinstance(v, bool) else str(int(v))


def dtype_tag(t):
    if t.dtype == torch.bfloat16:
        return "bf16"
    if t.dtype == torch.float64:
        return "f64"
    if t.dtype == torch.float32:
        return "f32"
    if t.dtype == torch.int64:
        return "i64"
    if t.dtype == torch.bool:
        return "bool"
    raise ValueError(t.dtype)


def write_tensor(f, kind, name, t, layout="c"):
    shape = list(t.shape)
    f.write(f"tensor {kind} {name} {dtype_tag(t)} {layout} {len(shape)}")
    for s in shape:
        f.write(f" {s}")
    f.write("\n")
    flat = t.detach().reshape(-1).tolist()
    if t.dtype in (torch.float64, torch.float32, torch.bfloat16):
        items = [repr(float(v)) for v in flat]
    else:
        items = [str(int(v)) for v in flat]
    for i in range(0, len(items), 6):
        f.write(" ".join(items[i:i + 6]) + "\n")


def run_case(name, op, inputs, params, outdir, bf16_ok=None):
    xs = []
    for inp in inputs:
        t = inp["t"].clone()
        if inp["rg"]:
            t.requires_grad_(True)
        xs.append(t)
    out = OPS[op](xs, params)
    rg = [x for x, inp in zip(xs, inputs) if inp["rg"]]
    diff = out.dtype in (torch.float64, torch.float32, torch.bfloat16) and rg and out.requires_grad
    grads = []
    if diff:
        w = weight(out.shape)
        grads = torch.autograd.grad((out * w).sum(), rg, allow_unused=True)
    if bf16_ok and not all(bf16_ok):  # bf16_cases: float64 results where 1.13 is off
        y64, g64 = _outputs(op, inputs, params, torch.float64)
        out = out if bf16_ok[0] else y64.to(out.dtype)
        grads = [g if ok or g64[j] is None else g64[j].to(torch.bfloat16)
                 for j, (g, ok) in enumerate(zip(grads, bf16_ok[1:]))]
    with open(os.path.join(outdir, name + ".txt"), "w") as f:
        f.write(f"op {op}\n")
        f.write(f"params {len(params)}" + "".join(" " + fmt(p) for p in params) + "\n")
        for i, (x, inp) in enumerate(zip(xs, inputs)):
            kind = "input" if inp["rg"] else "const"
            write_tensor(f, kind, f"x{i}", x, inp["layout"])
        if diff:
            write_tensor(f, "weight", "w", w)
        write_tensor(f, "output", "out", out)
        if diff:
            j = 0
            for i, inp in enumerate(inputs):
                if not inp["rg"]:
                    continue
                g = grads[j]
                j += 1
                if g is None:  # unreachable input: tenet must still give zeros
                    print(f"gen_golden.py: note: {name}: no gradient for x{i}, writing zeros")
                    g = torch.zeros_like(xs[i])
                write_tensor(f, "grad", f"x{i}", g)
        f.write("end\n")


def _outputs(op, inputs, params, dt=None):
    """out and the gradients of sum(out * w) (w float64), each input cast to dt if given."""
    xs = []
    for inp in inputs:
        t = inp["t"].clone()
        if dt is not None and t.is_floating_point():
            t = t.to(dt)
        xs.append(t.requires_grad_(inp["rg"]))
    out = OPS[op](xs, params)
    rg = [x for x, inp in zip(xs, inputs) if inp["rg"]]
    grads = []
    if rg and out.requires_grad:
        grads = torch.autograd.grad((out * weight(out.shape)).sum(), rg, allow_unused=True)
    return out.detach(), [g.detach() if g is not None else None for g in grads]


def _close(a, b, tol=1.6e-2):
    a, b = a.double(), b.double()
    ok = ((a - b).abs() <= tol * b.abs().clamp(min=1.0)) | (a.isnan() & b.isnan()) | (a == b)
    return bool(ok.all())


# Cases whose bfloat16 version means nothing: logsumexp of +-1000 is 1001.1, which bfloat16
# holds as 1000, so the backward's exp(x - out) is 1, not 1/3, in any bfloat16 implementation.
BF16_SKIP = {"logsumexp_large"}


def bf16_cases(cases):
    """Every case with float64 inputs again in bfloat16 (<name>_bf16), where PyTorch 1.13's CPU
    runs the op and its backward in bfloat16: the inputs rounded to bfloat16, the same params.
    The weight w stays float64, as in the float64 case. Where 1.13's bfloat16 result (the output
    or a gradient) is not within two bfloat16 units of the float64 result rounded to bfloat16
    (its CPU bmm, conv and layer_norm keep partial sums in bfloat16), that tensor's golden is
    PyTorch's float64 result on the same bfloat16 inputs, rounded once: what tenet computes
    (float32 inside, one rounding); the cases are listed when generating."""
    out, from_f64 = [], []
    for name, op, inputs, params in cases:
        if not any(inp["t"].dtype == torch.float64 for inp in inputs):
            continue
        half = [dict(inp, t=inp["t"].to(torch.bfloat16)) if inp["t"].dtype == torch.float64
                else inp for inp in inputs]
        try:
            y, gs = _outputs(op, half, params)
            if y.dtype != torch.bfloat16:
                continue
        except (RuntimeError, TypeError, NotImplementedError):
            continue  # not in 1.13's CPU bfloat16 kernels: the op table checks these
        y64, gs64 = _outputs(op, half, params, torch.float64)
        if name in BF16_SKIP:
            continue
        exact = [_close(y, y64)] + [g is None or _close(g, g64) for g, g64 in zip(gs, gs64)]
        if not all(exact):
            from_f64.append(name)
        out.append((name + "_bf16", op, half, params, exact))
    if from_f64:
        print("gen_golden.py: bfloat16 goldens from float64 (1.13's bfloat16 kernel is off by "
              "more than two units): " + " ".join(from_f64))
    return out


def main():
    if report_table(CASES):
        sys.exit(1)
    if CHECK_ONLY:
        print("gen_golden.py: op table checked against OPS and CASES")
        return
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "golden")
    os.makedirs(outdir, exist_ok=True)
    names = set()
    half = bf16_cases(CASES)
    for name, op, inputs, params in CASES:
        assert name not in names, name
        names.add(name)
        run_case(name, op, inputs, params, outdir)
    for name, op, inputs, params, exact in half:
        assert name not in names, name
        names.add(name)
        run_case(name, op, inputs, params, outdir, bf16_ok=exact)
    print(f"gen_golden.py: wrote {len(CASES)} cases and {len(half)} bfloat16 ones to "
          f"{os.path.normpath(outdir)} "
          f"(torch {torch.__version__})")


if __name__ == "__main__":
    main()
