#!/usr/bin/python3
"""Records a PyTorch program's numerics in tenet's format (docs/numerics.md), so that
tenet-diverge can name the first op where a tenet port and its PyTorch original disagree.

As a library (PyTorch 1.13, the system python3):

    from torch_numerics import Recorder
    rec = Recorder("torch.jsonl")
    with rec:                       # forward ops recorded (a TorchFunctionMode)
        loss = model(x, y)
    loss.backward()                 # backward nodes of the recorded ops (grad_fn hooks)
    with rec.paused():              # what tenet does not record as ops (clipping, the step)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    rec.update("Adam.step", params) # each parameter after the step, with its gradient
    rec.close()

Ops are recorded at the level of torch's functions (F.linear, F.layer_norm, x + y), the
level tenet's ops are at, with PyTorch's names mapped to tenet's where they differ
(NAME_MAP); views and metadata (SKIP) are left out, as tenet records no op for them. A
region that tenet computes as one op (scaled_dot_product_attention, which 1.13 lacks) is
recorded as one with `rec.fused(name, inputs)`.

As a program, --gpt DATA_DIR records scripts/gpt_reference.py's model on the weights and
batches of DATA_DIR (init.safetensors, tokens.bin), as tenet-gpt --init/--tokens runs them:

    /usr/bin/python3 scripts/torch_numerics.py --gpt tests/data/gpt --steps 2 -o torch.jsonl
    tenet-gpt --init tests/data/gpt/init.safetensors --tokens tests/data/gpt/tokens.bin \\
        --steps 2 --vocab 96 --batch 4 --block 32 --layers 2 --heads 4 --embd 32 \\
        --numerics tenet.jsonl
    tenet-diverge tenet.jsonl torch.jsonl
"""
import contextlib
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

FORMAT_VERSION = 1
# torch function name -> tenet op name (the rest keep theirs)
NAME_MAP = {"gelu": "GeluKernelImpl", "__add__": "add", "__radd__": "add", "__mul__": "mul",
            "__rmul__": "mul", "__sub__": "sub", "__truediv__": "div", "__matmul__": "matmul"}
# views, conversions and metadata: no op in tenet's record
SKIP = {"view", "reshape", "transpose", "split", "__getitem__", "contiguous", "t", "permute",
        "expand", "unsqueeze", "squeeze", "narrow", "detach", "to", "float", "size", "dim",
        "__get__", "item", "numel", "requires_grad_", "arange", "chunk", "flatten", "__eq__",
        "tril", "ones", "zeros", "clone", "__setitem__", "backward", "register_hook"}

PIECE, LANES = 8192, 16
M64 = (1 << 64) - 1


def _hash(f32):
    """tenet's hash of the values (debug/numerics_scan.c): per piece of 8192 floats, 16
    32-bit lanes over the bits (x = h ^ w; h = rotl(x, 13) + w), folded into a 64-bit FNV;
    pieces folded in order."""
    w = f32.view(np.uint32)
    total = 0xcbf29ce484222325
    for start in range(0, len(w), PIECE):
        piece = w[start:start + PIECE]
        n = len(piece)
        rows = (n + LANES - 1) // LANES
        pad = np.zeros(rows * LANES, dtype=np.uint32)
        pad[:n] = piece
        grid = pad.reshape(rows, LANES)
        h = np.uint32(0x811c9dc5) + np.arange(LANES, dtype=np.uint32)
        last = n - (rows - 1) * LANES
        for r in range(rows):
            x = h ^ grid[r]
            upd = ((x << np.uint32(13)) | (x >> np.uint32(19))) + grid[r]
            if r == rows - 1 and last < LANES:
                upd[last:] = h[last:]
            h = upd
        p = 0xcbf29ce484222325
        for lane in h:
            p = ((p ^ int(lane)) * 0x100000001b3) & M64
        total = ((total ^ p) * 0x100000001b3) & M64
    return total


def _num(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def summary(t):
    """The record's summary of a tensor (None for a missing one)."""
    if t is None:
        return None
    a = t.detach().to("cpu", torch.float32).contiguous().reshape(-1).numpy()
    nan = np.isnan(a)
    ok = a[~nan]
    s = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
         "device": t.device.type}
    if ok.size:
        s.update(min=_num(float(ok.min())), max=_num(float(ok.max())),
                 mean=_num(float(ok.astype(np.float64).mean())),
                 l2=_num(float(np.sqrt((ok.astype(np.float64) ** 2).sum()))),
                 amax=_num(float(np.abs(ok).max())))
    else:
        s.update(min="nan", max="nan", mean=0, l2=0, amax=0)
    s.update(nan=int(nan.sum()), inf=int(np.isinf(a).sum()), hash="%016x" % _hash(a))
    return s


def _tensors(args):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, torch.Tensor))
    return out


class _Mode(TorchFunctionMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", None)
        if (self.rec.paused_depth == 0 and isinstance(out, torch.Tensor) and name
                and name not in SKIP):
            self.rec.op(NAME_MAP.get(name, name), _tensors(args) + _tensors((kwargs or {}).values()),
                        out)
        return out


class Recorder:
    def __init__(self, path):
        self.f = open(path, "w")
        self.seq = 0
        self.paused_depth = 0
        self.nodes = {}  # grad_fn -> node id
        self.f.write(json.dumps({"format": "tenet-numerics", "version": FORMAT_VERSION,
                                 "producer": "torch " + torch.__version__,
                                 "threads": torch.get_num_threads()}) + "\n")
        self.mode = _Mode(self)

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)

    @contextlib.contextmanager
    def paused(self):
        self.paused_depth += 1
        try:
            yield
        finally:
            self.paused_depth -= 1

    @contextlib.contextmanager
    def fused(self, name, inputs):
        """Records the region as one op `name` of `inputs`; set .out to its result."""
        box = type("Fused", (), {"out": None})()
        with self.paused():
            yield box
        if self.paused_depth == 0 and box.out is not None:
            self.op(name, list(inputs), box.out)

    def _write(self, rec):
        self.seq += 1
        rec = dict(k=rec.pop("k"), t=0, seq=self.seq, **rec)
        self.f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def _node_of(self, out):
        fn = out.grad_fn
        if fn is None:
            return None
        if fn not in self.nodes:
            self.nodes[fn] = len(self.nodes) + 1
            nid = self.nodes[fn]

            # Only the gradient the op's output received: the grad_fn's own outputs are
            # the gradients of its node's inputs, which for a function made of several
            # nodes (cross_entropy: NllLoss after LogSoftmax) are not the op's inputs'.
            def hook(grad_inputs, grad_outputs, fn=fn, nid=nid):
                self._write(dict(k="node", name=type(fn).__name__, node=nid,
                                 **{"in": [summary(g) for g in grad_outputs], "out": []}))
            fn.register_hook(hook)
        return self.nodes[fn]

    @staticmethod
    def _site():
        """file:line of the first frame outside torch and the recorder (the program's call)."""
        f = sys._getframe(1)
        torch_dir = os.path.dirname(torch.__file__)
        while f and (f.f_code.co_filename.startswith(torch_dir) or f.f_code in _OWN_CODE or
                     "contextlib" in f.f_code.co_filename):
            f = f.f_back
        if not f:
            return None
        return "%s:%d" % (os.path.relpath(f.f_code.co_filename), f.f_lineno)

    def op(self, name, inputs, out):
        rec = dict(k="op", name=name)
        site = self._site()
        if site:
            rec["site"] = site
        rec.update(**{"in": [summary(t) for t in inputs], "out": [summary(out)]})
        node = self._node_of(out)
        if node is not None:
            rec["node"] = node
        self._write(rec)

    def update(self, name, params):
        """Each parameter after an optimiser step, with its gradient, in tenet's order."""
        for i, p in enumerate(params):
            self._write(dict(k="update", name=name, param=i,
                             **{"in": [summary(p.grad)], "out": [summary(p)]}))

    def close(self):
        self.f.close()


_OWN_CODE = {fn.__code__ for fn in (Recorder._site, Recorder.op, Recorder.fused.__wrapped__,
                                    _Mode.__torch_function__)}


# ---- --gpt: scripts/gpt_reference.py's model as tenet-gpt runs it --------------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").copy()).reshape(e["shape"])
    return out


def gpt_session(data_dir, steps, path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpt_reference as ref
    cfg, B = ref.CFG, ref.BATCH
    T = cfg["block"]
    rec = Recorder(path)

    def attention(self, x):  # nanoGPT's written-out attention, recorded as tenet's one op
        Bx, Tx, C = x.shape
        H = self.heads
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q = q.view(Bx, Tx, H, C // H).transpose(1, 2)
        k = k.view(Bx, Tx, H, C // H).transpose(1, 2)
        v = v.view(Bx, Tx, H, C // H).transpose(1, 2)
        with rec.fused("scaled_dot_product_attention", (q, k, v)) as fz:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :Tx, :Tx] == 0, float("-inf"))
            fz.out = F.softmax(att, dim=-1) @ v
        return self.attn.c_proj(fz.out.transpose(1, 2).contiguous().view(Bx, Tx, C))

    def forward(self, idx, targets):  # wpe's first T rows as a view, as tenet-gpt's
        x = self.transformer.wte(idx) + self.transformer.wpe.weight[:idx.size(1)]
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    ref.Block.attention = attention
    ref.GPT.forward = forward
    model = ref.GPT(cfg)
    weights = read_safetensors(os.path.join(data_dir, "init.safetensors"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(weights[name])
    opt = ref.optimizer(model)
    # tenet-gpt's optimiser list: the 2-D weights in order, then the rest from the end
    params = list(model.parameters())
    order = [p for p in params if p.dim() >= 2] + [p for p in params if p.dim() < 2][::-1]
    with open(os.path.join(data_dir, "tokens.bin"), "rb") as f:
        raw = np.frombuffer(f.read(), dtype="<i8")
    for s in range(steps):
        xy = torch.from_numpy(raw[s * 2 * B * T:(s + 1) * 2 * B * T].copy())
        x, y = xy[:B * T].view(B, T), xy[B * T:].view(B, T)
        opt.zero_grad(set_to_none=True)
        with rec:
            loss = model(x, y)
        loss.backward()
        with rec.paused():
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        rec.update("Adam.step", order)
        print("step %d loss %.6f" % (s, loss.item()))
    rec.close()


def main():
    args = sys.argv[1:]
    if "--gpt" not in args or "-o" not in args:
        sys.exit("usage: torch_numerics.py --gpt DATA_DIR [--steps N] -o OUT.jsonl")
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 2
    gpt_session(args[args.index("--gpt") + 1], steps, args[args.index("-o") + 1])


if __name__ == "__main__":
    main()
