#!/usr/bin/python3
"""The PyTorch side of tenet-gpt --generate (the gpt_generate_matches_torch
ctest, and the generation bench): the nanoGPT-style model of
scripts/gpt_reference.py, fed as tenet-gpt feeds it (examples/gpt_generate.c):
per layer keys and values preallocated to (B, H, max_len, D) and written slot
by slot, the prompt in one forward and then one token per step; prompts of
different lengths left-padded, as Hugging Face's generate(): padding keys
masked out, position ids counting from each row's first real token. Padding
queries see only masked keys: they get finfo.min scores (a uniform, finite
row, as Hugging Face) where tenet gives 0; neither reaches a real row.

    /usr/bin/python3 scripts/gpt_generate_reference.py [OUT_DIR]
        greedy generation of NEW tokens from tests/data/gpt/init.safetensors
        (the gpt_matches_torch weights) after the BATCH lines of
        tests/data/gpt_generate/prompts.txt (cycled); writes OUT_DIR/expected.txt
        (default tests/data/gpt_generate): per step and row, "step row token"
        and the V logits the token was picked from. --bf16: the model
        converted to bfloat16 (tenet-gpt --infer-dtype bf16), into
        expected_bf16.txt.
    /usr/bin/python3 scripts/gpt_generate_reference.py --bench B [--threads N]
        GPT-2 dimensions (12 layers, 12 heads, embd 768, block 256, vocab 96),
        random weights, float32, under torch.inference_mode(): a 64-token
        prompt, then greedy steps to position 256; tokens/s overall and
        around positions 64, 128 and 256 (bench/compare_torch.py's
        gpt_generate case runs the same code).

The built-in vocabulary of tenet-gpt: token 0 is a newline, token i (1..95)
the byte 31 + i.
"""
import math
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("gpt_generate_reference.py: torch is not installed; nothing generated")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_reference import CFG, GPT  # noqa: E402

NEW, BATCH = 8, 3


def load_safetensors(path):
    import json
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).view(h["shape"])
    return out


class Cache:
    """Keys and values (B, H, max_len, D) per layer, written by slots."""

    def __init__(self, cfg, B, max_len, pad, dtype=torch.float32):
        H, D = cfg["heads"], cfg["embd"] // cfg["heads"]
        self.k = [torch.zeros(B, H, max_len, D, dtype=dtype) for _ in range(cfg["layers"])]
        self.v = [torch.zeros(B, H, max_len, D, dtype=dtype) for _ in range(cfg["layers"])]
        self.len = 0
        self.pad = torch.tensor(pad)
        # keep[b, j]: key j of row b is a real token (not left padding)
        self.keep = torch.arange(max_len)[None, :] >= self.pad[:, None]

    def positions(self, n):
        slots = torch.arange(self.len, self.len + n)[None, :]
        return (slots - self.pad[:, None]).clamp(min=0)


def attention(block, cache, l, x):
    B, n, C = x.shape
    q, k, v = block.qkv(x)
    L = cache.len
    cache.k[l][:, :, L:L + n] = k
    cache.v[l][:, :, L:L + n] = v
    K, V = cache.k[l][:, :, :L + n], cache.v[l][:, :, :L + n]
    att = (q @ K.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    i = torch.arange(n)[:, None] + L
    j = torch.arange(L + n)[None, :]
    allowed = (j <= i)[None, None] & cache.keep[:, None, None, :L + n]
    att = att.masked_fill(~allowed, torch.finfo(att.dtype).min)
    y = F.softmax(att, dim=-1) @ V
    return block.attn.c_proj(y.transpose(1, 2).contiguous().view(B, n, C))


def forward_cached(model, cache, idx):
    """Logits (B, V) of the last of idx's n tokens; appends their keys and values."""
    n = idx.size(1)
    tr = model.transformer
    x = tr.wte(idx) + tr.wpe(cache.positions(n))
    for l, block in enumerate(tr.h):
        x = x + attention(block, cache, l, block.ln_1(x))
        x = x + block.mlp.c_proj(F.gelu(block.mlp.c_fc(block.ln_2(x)), approximate="tanh"))
    cache.len += n
    return model.lm_head(tr.ln_f(x[:, -1]))


def prompts(path, B):
    with open(path, "rb") as f:
        lines = [ln.rstrip(b"\r\n") for ln in f if ln.rstrip(b"\r\n")]
    rows = [[0 if c == 10 else c - 31 for c in lines[b % len(lines)]] for b in range(B)]
    T = max(len(r) for r in rows)
    pad = [T - len(r) for r in rows]
    idx = torch.tensor([[0] * p + r for p, r in zip(pad, rows)])
    return idx, pad


def reference(out_dir, root, dtype=torch.float32):
    """dtype bfloat16: the model converted (model.to(torch.bfloat16)), as tenet-gpt
    --infer-dtype bf16; the logits written as float32 (expected_bf16.txt)."""
    model = GPT(CFG)
    sd = load_safetensors(os.path.join(root, "tests", "data", "gpt", "init.safetensors"))
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    model.load_state_dict(sd)
    model.eval()
    model.to(dtype)
    idx, pad = prompts(os.path.join(root, "tests", "data", "gpt_generate", "prompts.txt"), BATCH)
    cache = Cache(CFG, BATCH, idx.size(1) + NEW, pad, dtype)
    lines = []
    with torch.no_grad():
        feed = idx
        for s in range(NEW):
            logits = forward_cached(model, cache, feed).float()
            tok = logits.argmax(dim=-1)
            for b in range(BATCH):
                vals = " ".join("%.9g" % float(x) for x in logits[b])
                lines.append("%d %d %d %s" % (s, b, int(tok[b]), vals))
            feed = tok[:, None]
    os.makedirs(out_dir, exist_ok=True)
    name = "expected.txt" if dtype == torch.float32 else "expected_bf16.txt"
    with open(os.path.join(out_dir, name), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.join(out_dir, name))


def bench_runs(B, quick=False, runs=3, prompt=64, dtype=torch.float32):
    """Per run, the seconds of each step after the prompt (step i feeds position prompt + i),
    as bench/case_generate.c: GPT-2 dimensions, random weights, greedy, inference mode; dtype
    bfloat16: the model and the cache converted (gpt_generate_bf16)."""
    cfg = dict(vocab=96, block=32 if quick else 256, layers=2 if quick else 12,
               heads=2 if quick else 12, embd=64 if quick else 768)
    prompt = 16 if quick else prompt
    torch.manual_seed(0)
    model = GPT(cfg)
    model.eval()
    model.to(dtype)
    idx = torch.tensor([i * 7 % cfg["vocab"] for i in range(B * prompt)]).view(B, prompt)
    out = []
    with torch.inference_mode():
        for r in range(runs + 1):  # run 0: the warm-up, the prompt and 8 steps
            cache = Cache(cfg, B, cfg["block"], [0] * B, dtype)
            feed = forward_cached(model, cache, idx).argmax(dim=-1)[:, None]
            steps = []
            while cache.len < (cfg["block"] if r else prompt + 8):
                t0 = time.perf_counter()
                feed = forward_cached(model, cache, feed).argmax(dim=-1)[:, None]
                steps.append(time.perf_counter() - t0)
            if r:
                out.append(steps)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return out, prompt, weight_bytes


def bench_summary(B, runs, prompt, at=(64, 128, 256), window=4):
    """tokens/s per run over all steps, and around positions `at` (median of +-window steps)."""
    med = lambda xs: sorted(xs)[len(xs) // 2]
    rates = [B * len(r) / sum(r) for r in runs]
    around = {}
    for p in at:
        i = min(max(p - prompt, 0), len(runs[0]) - 1)
        around[p] = B / med([r[j] for r in runs
                             for j in range(max(i - window, 0), min(i + window + 1, len(r)))])
    return rates, around


def bench(B):
    runs, prompt, _ = bench_runs(B)
    rates, around = bench_summary(B, runs, prompt)
    print("torch generate batch %d, %d threads: %.1f tokens/s (median of runs); around "
          "positions 64, 128, 256: %s" % (B, torch.get_num_threads(), sorted(rates)[len(rates) // 2],
                                          ", ".join("%.1f" % v for v in around.values())))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--threads" in sys.argv:
        torch.set_num_threads(int(sys.argv[sys.argv.index("--threads") + 1]))
    if "--bench" in sys.argv:
        bench(int(sys.argv[sys.argv.index("--bench") + 1]))
        return
    dtype = torch.bfloat16 if "--bf16" in sys.argv else torch.float32
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    reference(args[0] if args else os.path.join(root, "tests", "data", "gpt_generate"), root,
              dtype)


if __name__ == "__main__":
    main()
