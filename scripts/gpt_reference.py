#!/usr/bin/python3
"""The PyTorch side of tenet-gpt's step-by-step check (the gpt_matches_torch
ctest): builds the GPT-2-architecture model of examples/gpt_model.h in
PyTorch (nanoGPT's layout and names, GELU with the tanh approximation,
causal attention written out as nanoGPT's slow path: PyTorch 1.13 has no
scaled_dot_product_attention), writes its initial weights as safetensors
(every parameter but the tied lm_head.weight) and a file of batches, trains
STEPS steps with AdamW (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay
0.1 on 2-D weights only) and clip_grad_norm_(1.0), float32, and records the
loss of every step.

Run with the system Python that has torch (Debian's python3-torch):
    /usr/bin/python3 scripts/gpt_reference.py [OUT_DIR] [--bench]

OUT_DIR (default tests/data/gpt) receives init.safetensors, tokens.bin (per
step: B x T little-endian int64 inputs, then B x T targets) and losses.txt
(one loss per line, repr precision). The batches are windows of
docs/design.md's bytes, each printable ASCII byte c as token c - 32 and
anything else (newline included) as token 95, so that the check trains on
real text without a corpus.

--autocast bf16 instead trains AUTOCAST_STEPS steps of the same model from the
same init.safetensors with its forward under torch.autocast('cpu',
dtype=torch.bfloat16) (float32 master weights, the usual mixed precision) and
writes OUT_DIR/autocast_bf16/{tokens.bin,losses.txt} (the first STEPS batches
are those of tokens.bin: the generator is the same).

--bench instead times the gpt_step configuration of bench/ (vocab 96, block
64, 4 layers, 4 heads, embd 128, batch 16) in PyTorch: median ms per step.
"""
import json
import math
import os
import struct
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("gpt_reference.py: torch is not installed; nothing generated "
          "(apt-get install python3-torch)")
    sys.exit(0)

# the check's model: small enough for a quick ctest, every part of the architecture
CFG = dict(vocab=96, block=32, layers=2, heads=4, embd=32)
BATCH, STEPS, SEED = 4, 25, 1234
AUTOCAST_STEPS = 60


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        C = c["embd"]
        self.heads = c["heads"]
        self.ln_1 = nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(c["block"], c["block"]))
                             .view(1, 1, c["block"], c["block"]), persistent=False)

    fused = False  # reference_autocast: attention as one fused op (see there)

    def qkv(self, x):
        """The query, key and value heads of x (B, T, C): each (B, H, T, C / H)."""
        B, T, C = x.shape
        H = self.heads
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        return [t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x)
        dt = q.dtype
        if self.fused:
            q, k, v = q.float(), k.float(), v.float()
        with torch.autocast("cpu", enabled=not self.fused and torch.is_autocast_cpu_enabled()):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).to(dt)
        return self.attn.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab"], c["embd"]),
            wpe=nn.Embedding(c["block"], c["embd"]),
            h=nn.ModuleList([Block(c) for _ in range(c["layers"])]),
            ln_f=nn.LayerNorm(c["embd"])))
        self.lm_head = nn.Linear(c["embd"], c["vocab"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c["layers"]))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        T = idx.size(1)
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def optimizer(model):
    params = [p for p in model.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    other = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": other, "weight_decay": 0.0}],
                             lr=1e-3, betas=(0.9, 0.95), eps=1e-8)


def save_safetensors(path, tensors):
    """The format, written out: 8-byte header size, JSON header, raw bytes
    (int64 tensors as I64, every other as F32)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        st, npt = ("I64", "<i8") if t.dtype == torch.int64 else ("F32", "<f4")
        b = t.numpy().astype(npt).tobytes()
        header[name] = {"dtype": st, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def text_tokens(root):
    with open(os.path.join(root, "docs", "design.md"), "rb") as f:
        data = f.read()
    return torch.tensor([c - 32 if 32 <= c < 127 else 95 for c in data], dtype=torch.long)


def batches(tokens, steps, B, T, gen):
    out = []
    for _ in range(steps):
        starts = torch.randint(0, len(tokens) - T - 1, (B,), generator=gen)
        x = torch.stack([tokens[s:s + T] for s in starts])
        y = torch.stack([tokens[s + 1:s + T + 1] for s in starts])
        out.append((x, y))
    return out


def reference(out_dir, root):
    torch.manual_seed(SEED)
    model = GPT(CFG)
    os.makedirs(out_dir, exist_ok=True)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_safetensors(os.path.join(out_dir, "init.safetensors"), state)
    gen = torch.Generator().manual_seed(SEED)
    data = batches(text_tokens(root), STEPS, BATCH, CFG["block"], gen)
    with open(os.path.join(out_dir, "tokens.bin"), "wb") as f:
        for x, y in data:
            f.write(x.numpy().astype("<i8").tobytes() + y.numpy().astype("<i8").tobytes())
    opt = optimizer(model)
    losses = []
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    with open(os.path.join(out_dir, "losses.txt"), "w") as f:
        f.write("".join("%r\n" % l for l in losses))
    print("wrote %s: %d steps, loss %.4f -> %.4f" % (out_dir, STEPS, losses[0], losses[-1]))


def reference_autocast(out_dir, root, dtype=torch.bfloat16):
    """Attention here is what tenet's is, one fused op (scaled_dot_product_attention, which
    1.13 lacks): its bfloat16 q, k, v (autocast's, from c_attn) computed in float32 and the
    output rounded once, where the written-out form would round the scores and the
    probabilities to bfloat16 too (1.13's CPU autocast runs them as bfloat16 matmuls)."""
    torch.manual_seed(SEED)
    Block.fused = True
    model = GPT(CFG)  # the same initial weights as init.safetensors
    gen = torch.Generator().manual_seed(SEED)
    data = batches(text_tokens(root), AUTOCAST_STEPS, BATCH, CFG["block"], gen)
    sub = os.path.join(out_dir, "autocast_bf16")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "tokens.bin"), "wb") as f:
        for x, y in data:
            f.write(x.numpy().astype("<i8").tobytes() + y.numpy().astype("<i8").tobytes())
    opt = optimizer(model)
    losses = []
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    with open(os.path.join(sub, "losses.txt"), "w") as f:
        f.write("".join("%r\n" % l for l in losses))
    print("wrote %s: %d steps under autocast, loss %.4f -> %.4f" % (sub, AUTOCAST_STEPS,
                                                                     losses[0], losses[-1]))


def bench(reps=15):
    cfg = dict(vocab=96, block=64, layers=4, heads=4, embd=128)
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = optimizer(model)
    x = torch.randint(0, 96, (16, 64))
    y = torch.randint(0, 96, (16, 64))
    times = []
    for i in range(reps + 3):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    times.sort()
    print("torch gpt_step: %.2f ms median (%d threads)" % (1e3 * times[len(times) // 2],
                                                          torch.get_num_threads()))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--bench" in sys.argv:
        bench()
        return
    if "--autocast" in sys.argv:
        i = sys.argv.index("--autocast")
        if sys.argv[i + 1:i + 2] != ["bf16"]:
            sys.exit("gpt_reference.py: --autocast takes bf16")
        args = [a for a in args if a != "bf16"]
        reference_autocast(args[0] if args else os.path.join(root, "tests", "data", "gpt"), root)
        return
    reference(args[0] if args else os.path.join(root, "tests", "data", "gpt"), root)


if __name__ == "__main__":
    main()
