#!/usr/bin/python3
"""Runs tenet-bench and the same cases in PyTorch, side by side, and prints one table.

    /usr/bin/python3 bench/compare_torch.py --bench BUILD/bench/tenet-bench [--threads N]
        [--repeat R] [--case NAME,...] [--markdown] [--json-out FILE]

Cases run one at a time, tenet then PyTorch, so that load changes on a shared machine hit both
alike. Both sides use the same thread count (tn_set_num_threads / torch.set_num_threads), the
same sizes, warm-up and number of timed runs, and report the median with the min-max spread.

ratio = tenet's time / PyTorch's time for the same work (below 1: tenet is faster); for rates
(GB/s, GFLOP/s, steps/s) that is PyTorch's rate / tenet's rate. For the anomaly-mode cases each
side's figure is its own slowdown (on / off) and the ratio compares the times with anomaly mode on.
"% of limit" relates a rate to the limits measured in the same run by tenet-bench: the
STREAM-style triad (GB/s) and the FMA peak (GFLOP/s). Without torch, tenet's numbers print alone.

Debian's torch calls whatever libblas.so.3 the system alternative points to: the netlib
reference BLAS (~7 GFLOP/s) unless OpenBLAS is installed. --torch-blas DIR runs PyTorch with the
libblas.so.3 in DIR (e.g. libopenblas0-openmp unpacked with `apt-get download` + `dpkg -x`,
which changes nothing on the system); the footer names the BLAS library PyTorch actually loaded.
"""
import argparse
import gzip
import json
import math
import os
import subprocess
import sys
import threading
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # tenet's numbers alone
    torch = None

CASES = ["triad", "fma_peak", "add64", "sum64", "copy_t", "add16", "op16_modes", "tiny", "chain100",
         "add_1000", "sgemm1024", "sgemm2048", "mlp", "tiny_anomaly", "tiny_anomaly_nan",
         "chain100_anomaly", "mlp_anomaly", "mlp_anomaly_nan", "mlp_threads", "digits",
         "sgemm4096", "layer_norm", "gelu_tanh", "attention", "gpt_step", "gpt_step_bf16",
         "gpt_step_anomaly_nan", "clip_norm", "conv2d", "bf16gemm2048", "hgemm2048", "max_pool2d", "batch_norm2d",
         "cnn_step", "gpt_generate", "gpt2_step", "gpt2_step_bf16", "gpt_generate_bf16"]
CUDA_CASES = ["add64", "sum64", "sgemm4096", "mlp", "mlp_anomaly", "mlp_anomaly_nan", "layer_norm",
              "gelu_tanh", "gpt_step", "gpt_step_anomaly_nan", "clip_norm", "bf16gemm2048",
              "hgemm2048", "conv2d", "max_pool2d", "batch_norm2d", "cnn_step"]
DEV = "cpu"  # --device: where the PyTorch tensors of CUDA_CASES live


def sync():
    """Waits for the GPU, so that a timed body covers its kernels (as tenet-bench)."""
    if DEV != "cpu":
        torch.cuda.synchronize()
RATE_UNITS = {"GB/s", "GFLOP/s", "steps/s", "tokens/s"}


# ---- timing: the same protocol as bench/bench.c -------------------------------------------

class Opts:
    def __init__(self, a):
        self.repeat, self.warmup, self.quick = a.repeat, a.warmup, a.quick
        self.threads, self.max_user_threads, self.data = a.threads, a.max_user_threads, a.data


def time_body(o, body, min_run_s):
    """Per-iteration seconds of o.repeat runs, after calibration and warm-up."""
    if o.quick:
        min_run_s /= 20
    iters = 1
    while True:
        t0 = time.perf_counter()
        body(iters)
        sync()
        t = time.perf_counter() - t0
        if t >= min_run_s:
            break
        grow = 1.3 * min_run_s / t if t > 0 else 1000
        iters = int(iters * min(max(grow, 2), 1000))
    for _ in range(o.warmup):
        body(iters)
        sync()
    secs = []
    for _ in range(o.repeat):
        t0 = time.perf_counter()
        body(iters)
        sync()
        secs.append((time.perf_counter() - t0) / iters)
    return secs, iters


def time_pair(o, body, min_run_s, set_mode):
    """Alternating off/on runs (see bench_time_pair in bench/bench.c)."""
    one = Opts.__new__(Opts)
    one.__dict__.update(o.__dict__, repeat=1)
    set_mode(True)
    time_body(one, body, min_run_s)
    set_mode(False)
    _, iters = time_body(one, body, min_run_s)
    off, on = [], []
    for _ in range(o.repeat):
        for mode, out in ((False, off), (True, on)):
            set_mode(mode)
            t0 = time.perf_counter()
            body(iters)
            sync()
            out.append((time.perf_counter() - t0) / iters)
    set_mode(False)
    return off, on


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def result(name, unit, values, **extra):
    r = {"name": name, "unit": unit, "median": median(values), "min": min(values),
         "max": max(values), "runs": len(values)}
    r.update(extra)
    return r


# ---- the PyTorch side of each case ----------------------------------------------------------

def big_n(o):
    return 1 << 20 if o.quick else 64 << 20


def t_bandwidth(o, name, body, nbytes):
    secs, _ = time_body(o, body, 0.05)
    return [result(name, "GB/s", [nbytes / s * 1e-9 for s in secs])]


def t_add64(o):
    n = big_n(o)
    a, b = torch.ones(n, device=DEV), torch.full((n,), 2.0, device=DEV)
    out = torch.empty(n, device=DEV)

    def body(it):
        for _ in range(it):
            torch.add(a, b, out=out)
    return t_bandwidth(o, "add64", body, 12.0 * n)


def t_sum64(o):
    n = big_n(o)
    a = torch.ones(n, device=DEV)

    def body(it):
        for _ in range(it):
            a.sum()
    return t_bandwidth(o, "sum64", body, 4.0 * n)


def t_copy_t(o):
    side = 1024 if o.quick else 8192
    t = torch.ones(side, side).t()

    def body(it):
        for _ in range(it):
            t.contiguous()
    return t_bandwidth(o, "copy_t", body, 8.0 * side * side)


def t_us(o, name, body, per=1, min_run_s=0.05):
    secs, _ = time_body(o, body, min_run_s)
    return [result(name, "us/op", [1e6 * s / per for s in secs])]


def small(n, rg):
    torch.manual_seed(1)
    x = torch.randn(n, requires_grad=rg)
    return x, torch.rand(n), torch.randn(n)


def tiny_body(x):
    def body(it):
        for _ in range(it):
            torch.sigmoid(x * 2).sum().backward()
    return body


def chain_body(x, a, b):
    def body(it):
        for _ in range(it):
            y = x
            for _ in range(100):
                y = y * a + b
            y.sum().backward()
    return body


def t_add16(o):
    _, a, b = small(16, False)

    def body(it):
        for _ in range(it):
            torch.add(a, b)
    return t_us(o, "add16", body)


def t_op16_modes(o):
    """(x + a) * b in grad mode, under no_grad and under inference_mode, alternated run by run
    after one calibration in grad mode, timed in thread CPU time, as tenet's case."""
    x, a, b = small(16, True)

    def body(it):
        for _ in range(it):
            (x + a) * b
    modes = [torch.enable_grad, torch.no_grad, torch.inference_mode]
    names = ["op16_grad", "op16_no_grad", "op16_inference"]
    one = Opts.__new__(Opts)
    one.__dict__.update(o.__dict__, repeat=1)
    _, iters = time_body(one, body, 0.05)
    for m in modes[1:]:
        with m():
            body(iters)
    secs = [[], [], []]
    for _ in range(o.repeat):
        for i, m in enumerate(modes):
            with m():
                t0 = time.thread_time()
                body(iters)
                secs[i].append((time.thread_time() - t0) / iters)
    rs = [result(n, "us/op", [1e6 * t / 2 for t in ts]) for n, ts in zip(names, secs)]
    rs[2]["vs_no_grad"] = median([i / n for i, n in zip(secs[2], secs[1])])
    return rs


def t_add_1000(o):
    _, a, b = small(1000, False)

    def body(it):
        for _ in range(it):
            a.add_(b)
    return t_us(o, "add_1000", body)


def t_tiny(o):
    x, _, _ = small(16, True)
    return t_us(o, "tiny", tiny_body(x))


def t_chain100(o):
    x, a, b = small(16, True)
    return t_us(o, "chain100", chain_body(x, a, b), per=100)


def anomaly_ratio(o, name, body, min_run_s, per, unit):
    """check_nan as tenet's case of the same name: on for the "_nan" cases only."""
    nan = name.endswith("_nan")
    off, on = time_pair(o, body, min_run_s,
                        lambda m: torch.autograd.set_detect_anomaly(m, check_nan=nan))
    scale = 1e3 if unit == "ms" else 1e6
    return [result(name, "x slower", [b / a for a, b in zip(off, on)],
                   **{"off_" + unit: scale * median(off) / per,
                      "on_" + unit: scale * median(on) / per})]


def t_tiny_anomaly(o, name="tiny_anomaly"):
    x, _, _ = small(16, True)
    return anomaly_ratio(o, name, tiny_body(x), 0.05, 1, "us")


def t_tiny_anomaly_nan(o):
    return t_tiny_anomaly(o, "tiny_anomaly_nan")


def t_chain100_anomaly(o):
    x, a, b = small(16, True)
    return anomaly_ratio(o, "chain100_anomaly", chain_body(x, a, b), 0.05, 100, "us")


def t_sgemm(o, name, n, dtype=None):
    if o.quick:
        n //= 8
    torch.manual_seed(2)
    a, b = torch.randn(n, n, device=DEV), torch.randn(n, n, device=DEV)
    if dtype is not None:
        a, b = a.to(dtype), b.to(dtype)
        try:
            torch.matmul(a, b)
        except RuntimeError:  # 1.13 has no float16 matmul on the CPU
            return []

    def body(it):
        for _ in range(it):
            torch.matmul(a, b)
    secs, _ = time_body(o, body, 0.2)
    return [result(name, "GFLOP/s", [2.0 * n ** 3 / s * 1e-9 for s in secs])]


def t_conv2d(o):
    n, c, hw = (4 if o.quick else 32), 64, 56
    torch.manual_seed(3)
    x, w, b = (torch.randn(n, c, hw, hw, device=DEV), torch.randn(c, c, 3, 3, device=DEV),
               torch.randn(c, device=DEV))
    flops = 2.0 * n * c * hw * hw * c * 9

    def body(it):
        for _ in range(it):
            F.conv2d(x, w, b, padding=1)
    secs, _ = time_body(o, body, 0.2)
    return [result("conv2d", "GFLOP/s", [flops / s * 1e-9 for s in secs])]


def t_max_pool2d(o):
    n, c, hw = (16 if o.quick else 128), 32, 28
    torch.manual_seed(4)
    x = torch.randn(n, c, hw, hw, device=DEV, requires_grad=True)
    g = torch.randn(n, c, hw // 2, hw // 2, device=DEV)

    def body(it):
        for _ in range(it):
            F.max_pool2d(x, 2).backward(g)
    secs, _ = time_body(o, body, 0.2)
    return [result("max_pool2d", "us/step", [1e6 * s for s in secs])]


def t_batch_norm2d(o):
    """The CNN's batch norm in training at its two sizes: forward + backward, as bench/case_norm.c."""
    out = []
    for c, hw in [(32, 28), (64, 14)]:
        n = 16 if o.quick else 128
        torch.manual_seed(6)
        x = torch.randn(n, c, hw, hw, device=DEV, requires_grad=True)
        w = torch.randn(c, device=DEV, requires_grad=True)
        b = torch.randn(c, device=DEV, requires_grad=True)
        g = torch.randn(n, c, hw, hw, device=DEV)
        rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)

        def body(it):
            for _ in range(it):
                F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5).backward(g)
        secs, _ = time_body(o, body, 0.2)
        out.append(result(f"batch_norm2d_c{c}", "us/step", [1e6 * s for s in secs],
                          **{"GB/s": 20.0 * n * c * hw * hw / median(secs) * 1e-9}))
    return out


def mlp_model(n_in, hidden, n_out, lr, momentum, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(n_in, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, n_out))
    return model, torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)


def mlp_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()


def mlp_case(seed=3):
    batch, hidden = (256, 256) if DEV == "cpu" else (4096, 1024)
    model, opt = mlp_model(784, hidden, 10, 0.01, 0.0, seed)
    model.to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0)
    x = torch.randn(batch, 784, device=DEV)
    y = torch.tensor([(i * 7) % 10 for i in range(batch)], device=DEV)

    def body(it):
        for _ in range(it):
            mlp_step(model, opt, x, y)
    return body


def t_mlp(o):
    secs, _ = time_body(o, mlp_case(), 0.1)
    return [result("mlp", "ms/step", [1e3 * s for s in secs])]


def t_mlp_anomaly(o):
    return anomaly_ratio(o, "mlp_anomaly", mlp_case(), 0.1, 1, "ms")


def t_mlp_anomaly_nan(o):
    return anomaly_ratio(o, "mlp_anomaly_nan", mlp_case(), 0.1, 1, "ms")


def t_mlp_threads(o):
    steps = 1 if o.quick else 20
    prev = torch.get_num_threads()
    torch.set_num_threads(1)

    def run(nt):
        go = threading.Barrier(nt + 1)

        def worker(seed):
            body = mlp_case(seed)
            body(1)
            go.wait()
            body(steps)
        ts = [threading.Thread(target=worker, args=(100 + i,)) for i in range(nt)]
        for t in ts:
            t.start()
        go.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    out, base = [], None
    for nt in range(1, o.max_user_threads + 1):
        for _ in range(o.warmup):
            run(nt)
        v = [nt * steps / run(nt) for _ in range(o.repeat)]
        r = result("mlp_threads_t%d" % nt, "steps/s", v, user_threads=nt)
        base = base or r["median"]
        r["speedup"] = r["median"] / base
        out.append(r)
    torch.set_num_threads(prev)
    return out


def splitmix_shuffle(a, state):
    """Fisher-Yates with splitmix64, as examples/demo.c; returns the new state."""
    m = (1 << 64) - 1
    for i in range(len(a) - 1, 0, -1):
        state = (state + 0x9e3779b97f4a7c15) & m
        z = state
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
        z ^= z >> 31
        j = z % (i + 1)
        a[i], a[j] = a[j], a[i]
    return state


def t_digits(o):
    rows = []
    with gzip.open(o.data, "rt") as f:
        for line in f:
            if line.strip():
                rows.append([int(v) for v in line.split(",")])
    data = torch.tensor(rows)
    pixels, labels = data[:, :64].float() / 16, data[:, 64].clone()
    split = list(range(len(rows)))
    splitmix_shuffle(split, 3)
    train, test = split[:1500], torch.tensor(split[1500:])
    epochs = 1 if o.quick else 30
    acc = [0.0]

    def body(it):
        for _ in range(it):
            model, opt = mlp_model(64, 128, 10, 0.1, 0.9, 0)
            order, rng = list(train), 0x5eed
            for _ in range(epochs):
                rng = splitmix_shuffle(order, rng)
                for s in range(0, 1500, 64):
                    idx = torch.tensor(order[s:s + 64])
                    mlp_step(model, opt, pixels[idx], labels[idx])
            with torch.no_grad():
                pred = model(pixels[test]).argmax(1)
            acc[0] = (pred == labels[test]).float().mean().item()
    one = Opts.__new__(Opts)
    one.__dict__.update(o.__dict__, warmup=0)
    secs, _ = time_body(one, body, 0)
    return [result("digits", "s", secs, accuracy=acc[0], epochs=epochs)]


def t_norm(o, name, ln):
    torch.manual_seed(1)
    x = torch.randn(16 * 64, 128, device=DEV, requires_grad=True)
    w = torch.randn(128, device=DEV, requires_grad=True)
    b = torch.randn(128, device=DEV, requires_grad=True)
    g = torch.randn(16 * 64, 128, device=DEV)

    def body(it):
        for _ in range(it):
            y = F.layer_norm(x, (128,), w, b, 1e-5) if ln else F.gelu(x, approximate="tanh")
            y.backward(g)
        sync()
    secs, _ = time_body(o, body, 0.2)
    return [result(name, "us/step", [1e6 * s for s in secs])]
def attn_case(o, name, L):
    """PyTorch 1.13 has no fused attention: nanoGPT's composed ops, forward + backward."""
    torch.manual_seed(5)
    shape = (2 if o.quick else 16, 4, L, 32)
    q, k, v = (torch.randn(*shape, requires_grad=True) for _ in range(3))
    g = torch.randn(*shape)
    mask = torch.tril(torch.ones(L, L)).view(1, 1, L, L)
    scale = 1.0 / math.sqrt(32)

    def body(it):
        for _ in range(it):
            att = (q @ k.transpose(-2, -1)) * scale
            att = att.masked_fill(mask == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            y.backward(g)
            q.grad = k.grad = v.grad = None
    secs, _ = time_body(o, body, 0.1)
    fl = 6.0 * shape[0] * shape[1] * L * L * 32
    return result(name, "ms/step", [1e3 * s for s in secs],
                  **{"GFLOP/s": fl / median(secs) * 1e-9})


def t_attention(o):
    return [attn_case(o, "attention", 256), attn_case(o, "attention_L64", 64)]


def gpt_case(o, cfg=None, batch=None, autocast=None):
    """examples/gpt_model.h's model as scripts/gpt_reference.py builds it in PyTorch: the body
    of training steps, and the tokens of one step. Default: gpt_step's configuration; autocast:
    the forward under torch.autocast(DEV, dtype=autocast), as tenet-bench's gpt_step_bf16 and
    gpt2_step_bf16."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import gpt_reference as ref
    if cfg is None:
        cfg = dict(vocab=96, block=16 if o.quick else 64, layers=1 if o.quick else 4, heads=4,
                   embd=32 if o.quick else 128)
        batch = 2 if o.quick else 16
    torch.manual_seed(0)
    model = ref.GPT(cfg).to(DEV)
    opt = ref.optimizer(model)
    n = batch * cfg["block"]
    tok = torch.tensor([i * 7 % cfg["vocab"] for i in range(n + 1)], device=DEV)
    x = tok[:-1].view(batch, cfg["block"])
    y = tok[1:].view(batch, cfg["block"])

    def loss():
        if autocast is None:
            return model(x, y)
        with torch.autocast(DEV, dtype=autocast):
            return model(x, y)

    def body(it):
        for _ in range(it):
            opt.zero_grad(set_to_none=True)
            loss().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    return body, n


def gpt_flops(cfg, tokens):
    """As gpt_step_flops in bench/case_gpt.c: the products of forward and backward."""
    c, t = cfg["embd"], cfg["block"]
    fwd = cfg["layers"] * (24.0 * tokens * c * c + 4.0 * tokens * t * c) + \
        2.0 * tokens * c * cfg["vocab"]
    return 3.0 * fwd


def t_gpt_step(o):
    body, tokens = gpt_case(o)
    secs, _ = time_body(o, body, 0.2)
    ms = [1e3 * s for s in secs]
    return [result("gpt_step", "ms/step", ms, tokens_per_s=tokens / (1e-3 * median(ms)))]


def t_gpt_step_bf16(o):
    """gpt_step with the forward under torch.autocast bfloat16, as tenet-bench's gpt_step_bf16."""
    body, tokens = gpt_case(o, autocast=torch.bfloat16)
    secs, _ = time_body(o, body, 0.2)
    ms = [1e3 * s for s in secs]
    return [result("gpt_step_bf16", "ms/step", ms, tokens_per_s=tokens / (1e-3 * median(ms)))]


def t_gpt2_step(o, name, autocast):
    """GPT-2 small's dimensions (quick: 2 layers, block 32, batch 1), as tenet-bench's gpt2_step."""
    cfg = dict(vocab=96, block=32 if o.quick else 256, layers=2 if o.quick else 12, heads=12,
               embd=768)
    body, tokens = gpt_case(o, cfg, 1 if o.quick else 4, autocast)
    secs, _ = time_body(o, body, 0.0)
    ms = [1e3 * s for s in secs]
    return [result(name, "ms/step", ms, tokens_per_s=tokens / (1e-3 * median(ms)),
                   **{"GFLOP/s": gpt_flops(cfg, tokens) / (1e-3 * median(ms)) * 1e-9})]


def t_gpt_step_anomaly_nan(o):
    return anomaly_ratio(o, "gpt_step_anomaly_nan", gpt_case(o)[0], 0.2, 1, "ms")


def t_cnn_step(o):
    """scripts/cnn_reference.py's CNN: one SGD step on a batch of 128 (as bench/case_cnn.c)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import cnn_reference as ref
    n = 16 if o.quick else 128
    torch.manual_seed(3)
    model = ref.CNN().to(DEV)
    opt = ref.optimizer(model, 0.05)
    x, y = torch.rand(n, 1, 28, 28, device=DEV), torch.arange(n, device=DEV) % 10

    def body(it):
        for _ in range(it):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    secs, _ = time_body(o, body, 0.5)
    ms = [1e3 * s for s in secs]
    return [result("cnn_step", "ms/step", ms, images_per_s=n / (1e-3 * median(ms)))]


def t_clip_norm(o):
    """tenet's clip_norm: torch.nn.utils.clip_grad_norm_ over 4 GPT-2 small blocks' gradients."""
    shapes = [(768,), (768,), (768, 2304), (2304,), (768, 768), (768,),
              (768,), (768,), (768, 3072), (3072,), (3072, 768), (768,)] * 4 + [(1024, 768)]
    torch.manual_seed(5)
    ps = []
    for sh in shapes:
        p = torch.zeros(sh, device=DEV, requires_grad=True)
        p.grad = torch.randn(sh, device=DEV)
        ps.append(p)
    elems = sum(p.numel() for p in ps)

    def body(it):
        for _ in range(it):
            torch.nn.utils.clip_grad_norm_(ps, 1e9, 2.0)
    secs, _ = time_body(o, body, 0.2)
    ms = [1e3 * s for s in secs]
    return [result("clip_norm", "ms", ms, **{"GB/s": 12.0 * elems / (1e6 * median(ms))})]


def t_gpt_generate(o, name="gpt_generate", dtype=None):
    """scripts/gpt_generate_reference.py's generation with a preallocated KV cache, as
    bench/case_generate.c: batch 1 and 16, in inference mode; dtype: the model's (bfloat16:
    gpt_generate_bf16)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import gpt_generate_reference as gen
    out = []
    for B in (1, 2 if o.quick else 16):
        runs, prompt, wbytes = gen.bench_runs(B, o.quick, min(o.repeat, 3),
                                              dtype=dtype or torch.float32)
        rates, around = gen.bench_summary(B, runs, prompt)
        extra = {"tok_s_at_%d" % p: v for p, v in around.items()}
        out.append(result("%s_b%d" % (name, 1 if B == 1 else 16), "tokens/s", rates,
                          ms_per_step=1e3 * B / median(rates), weight_bytes=wbytes, batch=B,
                          **extra))
    return out


TORCH = {"add64": t_add64, "sum64": t_sum64, "copy_t": t_copy_t, "add16": t_add16,
         "op16_modes": t_op16_modes,
         "tiny": t_tiny, "chain100": t_chain100, "add_1000": t_add_1000,
         "sgemm1024": lambda o: t_sgemm(o, "sgemm1024", 1024),
         "sgemm2048": lambda o: t_sgemm(o, "sgemm2048", 2048), "mlp": t_mlp,
         "sgemm4096": lambda o: t_sgemm(o, "sgemm4096", 4096),
         "bf16gemm2048": lambda o: t_sgemm(o, "bf16gemm2048", 2048, torch.bfloat16),
         "hgemm2048": lambda o: t_sgemm(o, "hgemm2048", 2048, torch.float16),
         "tiny_anomaly": t_tiny_anomaly, "tiny_anomaly_nan": t_tiny_anomaly_nan,
         "chain100_anomaly": t_chain100_anomaly,
         "mlp_anomaly": t_mlp_anomaly, "mlp_anomaly_nan": t_mlp_anomaly_nan,
         "mlp_threads": t_mlp_threads, "digits": t_digits,
         "layer_norm": lambda o: t_norm(o, "layer_norm", True),
         "gelu_tanh": lambda o: t_norm(o, "gelu_tanh", False), "attention": t_attention,
         "gpt_step": t_gpt_step, "gpt_step_bf16": t_gpt_step_bf16,
         "gpt_step_anomaly_nan": t_gpt_step_anomaly_nan,
         "clip_norm": t_clip_norm, "conv2d": t_conv2d, "batch_norm2d": t_batch_norm2d,
         "max_pool2d": t_max_pool2d, "cnn_step": t_cnn_step, "gpt_generate": t_gpt_generate,
         "gpt2_step": lambda o: t_gpt2_step(o, "gpt2_step", None),
         "gpt2_step_bf16": lambda o: t_gpt2_step(o, "gpt2_step_bf16", torch.bfloat16),
         "gpt_generate_bf16": lambda o: t_gpt_generate(o, "gpt_generate_bf16", torch.bfloat16)}


# ---- tenet's side and the table ---------------------------------------------------------------

def run_tenet(a, case):
    cmd = [a.bench, "--json", "--case", case, "--threads", str(a.threads), "--repeat",
           str(a.repeat), "--warmup", str(a.warmup), "--max-user-threads",
           str(a.max_user_threads), "--data", a.data, "--device", a.device] + \
        (["--quick"] if a.quick else [])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        print("tenet-bench failed on %s (exit %d)" % (case, p.returncode), file=sys.stderr)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def fmt(r):
    if not r:
        return "—"
    v = r["median"]
    digits = 3 if abs(v) < 10 else 1 if abs(v) < 1000 else 0
    s = "%.*f %s [%.*f–%.*f]" % (digits, v, r["unit"], digits, r["min"], digits, r["max"])
    if "accuracy" in r:
        s += ", acc %.3f" % r["accuracy"]
    if "speedup" in r:
        s += ", x%.2f" % r["speedup"]
    if "vs_no_grad" in r:
        s += ", %.3f of no-grad" % r["vs_no_grad"]
    if "tokens_per_s" in r and "GFLOP/s" in r:  # the GPT steps
        s += ", %.0f tok/s, %.1f GFLOP/s" % (r["tokens_per_s"], r["GFLOP/s"])
    elif r["unit"] == "ms/step" and "GFLOP/s" in r:  # attention
        s += ", %.1f GFLOP/s" % r["GFLOP/s"]
    if "tok_s_at_64" in r:
        s += "; at 64/128/256: %.1f/%.1f/%.1f" % (r["tok_s_at_64"], r["tok_s_at_128"],
                                                  r["tok_s_at_256"])
    return s


def ratio(tn, pt):
    """tenet time / PyTorch time (see the module docstring)."""
    if not tn or not pt:
        return None
    if tn["unit"] == "x slower":
        key = "on_us" if "on_us" in tn else "on_ms"
        return tn[key] / pt[key] if pt.get(key) else None
    if tn["unit"] in RATE_UNITS:
        return pt["median"] / tn["median"]
    return tn["median"] / pt["median"]


def limit_pct(r, limits):
    if r and "weight_bytes" in r and "GB/s" in limits:
        # generation: every step streams the weights once, so at most
        # batch x triad / weight_bytes tokens/s
        return "%.0f%%" % (100.0 * r["median"] * r["weight_bytes"] / (r["batch"] * 1e9 * limits["GB/s"]))
    lim = limits.get(r["unit"]) if r else None
    if not lim or r["name"] in ("triad", "fma_peak"):
        return ""
    return "%.0f%%" % (100.0 * r["median"] / lim)


def print_table(rows, limits, markdown, threads):
    head = ["case", "tenet", "PyTorch", "ratio (time)", "tenet % of limit", "PyTorch % of limit",
            "load"]
    body = []
    for name, tn, pt, load in rows:
        q = ratio(tn, pt)
        body.append([name, fmt(tn), fmt(pt), "" if q is None else "%.2f" % q,
                     limit_pct(tn, limits), limit_pct(pt, limits), load])
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for b in body:
            print("| " + " | ".join(b) + " |")
    else:
        w = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
        for r in [head] + body:
            print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    print("\n%d thread(s); ratio = tenet time / PyTorch time (< 1: tenet faster); anomaly rows: "
          "each side's on/off slowdown, ratio of the on-times; limits: triad %s GB/s, "
          "FMA peak %s GFLOP/s (measured by tenet-bench in this run); load: the 1-minute load average "
          "when the row started (this run itself adds about 1 with 2 threads; much more than that: "
          "someone else is running, rerun)."
          % (threads, "%.1f" % limits["GB/s"] if "GB/s" in limits else "?",
             "%.0f" % limits["GFLOP/s"] if "GFLOP/s" in limits else "?"))


def blas_loaded():
    """The BLAS library mapped into this process (PyTorch's), or '?'."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.split()[-1]}
    except OSError:
        return "?"
    return ", ".join(sorted(paths)) or "none mapped"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True, help="path to the tenet-bench executable")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--case", action="append", help="cases (repeatable or comma list)")
    p.add_argument("--max-user-threads", type=int, default=2 * (os.cpu_count() or 1))
    p.add_argument("--data", default=os.path.join(here, "..", "data", "digits.csv.gz"))
    p.add_argument("--quick", action="store_true", help="tiny runs: a smoke test")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the GPU cases on cuda:0 on both sides")
    p.add_argument("--json-out", help="also write every result to this file (JSON)")
    p.add_argument("--torch-blas", metavar="DIR",
                   help="run PyTorch with the libblas.so.3 found in DIR (see the module docstring)")
    a = p.parse_args()
    if a.torch_blas and os.environ.get("TENET_COMPARE_BLAS") != a.torch_blas:
        # The dynamic loader reads LD_LIBRARY_PATH at start: run again with it set.
        env = dict(os.environ, TENET_COMPARE_BLAS=a.torch_blas,
                   LD_LIBRARY_PATH=a.torch_blas + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    global DEV
    DEV = a.device
    if DEV == "cuda" and torch is not None:  # as tenet's kernels: float32 FMAs, no TF32; halves accumulate in float32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    cases = CUDA_CASES if a.device == "cuda" else CASES
    if a.case:
        cases = [c for arg in a.case for c in arg.split(",")]
        bad = [c for c in cases if c not in CASES]
        if bad:
            p.error("unknown case(s): %s" % ", ".join(bad))
    if torch is None:
        print("torch is not installed: tenet's numbers alone", file=sys.stderr)
    else:
        torch.set_num_threads(a.threads)
    o = Opts(a)
    rows, limits, record = [], {}, []
    load_before = loadavg()
    for case in cases:
        print("running %s ..." % case, file=sys.stderr, flush=True)
        load = loadavg().split()[0]
        tn = run_tenet(a, case)
        pt = TORCH[case](o) if torch is not None and case in TORCH else []
        if torch is not None:
            torch.set_num_threads(a.threads)
        for r in tn:
            if r["name"] == "triad":
                limits["GB/s"] = r["median"]
            if r["name"] == "fma_peak":
                limits["GFLOP/s"] = r["median"]
        names = [r["name"] for r in tn] + [r["name"] for r in pt if r["name"] not in
                                           {t["name"] for t in tn}]
        for n in names:
            t = next((r for r in tn if r["name"] == n), None)
            q = next((r for r in pt if r["name"] == n), None)
            rows.append((n, t, q, load))
            record.append({"name": n, "tenet": t, "torch": q, "ratio": ratio(t, q), "load": load})
    print_table(rows, limits, a.markdown, a.threads)
    load_after = loadavg()
    print("load average (1, 5, 15 min) before: %s, after: %s" % (load_before, load_after))
    if torch is not None:
        print("PyTorch %s, BLAS: %s" % (torch.__version__, blas_loaded()))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"threads": a.threads, "limits": limits, "rows": record,
                       "loadavg": [load_before, load_after],
                       "torch_blas": blas_loaded() if torch is not None else None}, f, indent=1)


if __name__ == "__main__":
    main()
