#!/usr/bin/python3
"""The PyTorch side of tenet-cnn (examples/cnn.c): the same CNN on Fashion-MNIST.

    conv(1->32, 3x3, pad 1)-BN-ReLU-maxpool 2 -> conv(32->64, 3x3, pad 1)-BN-ReLU-maxpool 2
    -> linear(3136->128)-ReLU -> linear(128->10), cross entropy,
    SGD(momentum 0.9, weight_decay 5e-4), float32.

state_dict names (tenet-cnn's --init/--save use the same): c1.weight, c1.bias, b1.weight,
b1.bias, b1.running_mean, b1.running_var, b1.num_batches_tracked, c2.*, b2.*, f1.weight,
f1.bias, f2.weight, f2.bias.

Images are read as tenet's tn_idx_load(path, TN_F32, 1.0 / 255) reads them: each byte v as
float32(v * (1/255) in double); labels as int64.

Run with the system Python that has torch (Debian's python3-torch):

    /usr/bin/python3 scripts/cnn_reference.py [OUT_DIR]
        the step-for-step reference (the cnn_matches_torch ctest): OUT_DIR (default
        tests/data/cnn) receives init.safetensors (the initial state_dict), batches.bin (STEPS
        batches of BATCH training-set indices, little-endian int64), losses.txt (the loss of
        every step, repr precision) and stats.safetensors (b1/b2 running_mean and running_var
        after the steps), at lr 0.005.
    /usr/bin/python3 scripts/cnn_reference.py --train [--epochs E] [--lr X] [--threads N]
        full training with shuffled batches of 128: test accuracy and time per epoch.
    /usr/bin/python3 scripts/cnn_reference.py --bench [--threads N]
        the cnn_step case of bench/ (batch 128): median ms per training step.
"""
import gzip
import json
import os
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("cnn_reference.py: torch is not installed; nothing generated "
          "(apt-get install python3-torch)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_reference import save_safetensors  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
BATCH, STEPS, SEED, STEP_LR = 128, 20, 1234, 0.005
MOMENTUM, WEIGHT_DECAY = 0.9, 5e-4


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.b1 = nn.BatchNorm2d(32)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.b2 = nn.BatchNorm2d(64)
        self.f1 = nn.Linear(64 * 7 * 7, 128)
        self.f2 = nn.Linear(128, 10)

    def forward(self, x):  # x is (N, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)  # (N, 32, 14, 14)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)  # (N, 64, 7, 7)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def idx_load(path):
    """An IDX file (gzipped) as a numpy array of its dims."""
    with gzip.open(path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = struct.unpack(">" + "I" * ndim, b[4:4 + 4 * ndim])
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def dataset(split):
    """(images (N, 1, 28, 28) float32, labels (N,) int64) of 'train' or 't10k'."""
    x = idx_load(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"))
    y = idx_load(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float64) * (1.0 / 255)).float().unsqueeze(1)
    return x, torch.from_numpy(y.astype(np.int64))


def optimizer(model, lr):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM,
                           weight_decay=WEIGHT_DECAY)


def reference(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(SEED)
    model = CNN()
    save_safetensors(os.path.join(out_dir, "init.safetensors"), model.state_dict())
    x, y = dataset("train")
    idx = torch.randperm(len(y))[:STEPS * BATCH].view(STEPS, BATCH)
    with open(os.path.join(out_dir, "batches.bin"), "wb") as f:
        f.write(idx.numpy().astype("<i8").tobytes())
    opt = optimizer(model, STEP_LR)
    model.train()
    losses = []
    for s in range(STEPS):
        loss = F.cross_entropy(model(x[idx[s]]), y[idx[s]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    save_safetensors(os.path.join(out_dir, "stats.safetensors"),
                     {k: v for k, v in model.state_dict().items() if k[0] == "b"
                      and k.split(".")[1] in ("running_mean", "running_var")})
    with open(os.path.join(out_dir, "losses.txt"), "w") as f:
        f.write("".join("%r\n" % l for l in losses))
    print(f"cnn_reference.py: {STEPS} steps, losses {losses[0]:.6f} .. {losses[-1]:.6f}; "
          f"wrote {out_dir}")


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        right = sum((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
                    for i in range(0, len(y), 1000))
    model.train()
    return right / len(y)


def train(epochs, lr):
    torch.manual_seed(SEED)
    model = CNN()
    x, y = dataset("train")
    tx, ty = dataset("t10k")
    opt = optimizer(model, lr)
    for e in range(epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(len(y))
        total = 0.0
        for i in range(0, len(y), BATCH):
            b = perm[i:i + BATCH]
            loss = F.cross_entropy(model(x[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        t = time.perf_counter() - t0
        print(f"epoch {e + 1}: train loss {total / len(y):.4f}, test accuracy "
              f"{100 * accuracy(model, tx, ty):.2f}%, {t:.1f} s", flush=True)


def bench(reps=20):
    torch.manual_seed(SEED)
    model = CNN()
    x, y = torch.rand(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
    opt = optimizer(model, 0.05)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"cnn_step (batch {BATCH}, {torch.get_num_threads()} threads): median "
          f"{1e3 * times[len(times) // 2]:.2f} ms per step")


def main():
    args = sys.argv[1:]

    def opt(name, default, kind):
        if name not in args:
            return default
        i = args.index(name)
        v = kind(args[i + 1])
        del args[i:i + 2]
        return v
    threads = opt("--threads", 0, int)
    if threads:
        torch.set_num_threads(threads)
    if "--bench" in args:
        bench()
    elif "--train" in args:
        train(opt("--epochs", 3, int), opt("--lr", 0.05, float))
    else:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        reference(args[0] if args else os.path.join(root, "tests", "data", "cnn"))


if __name__ == "__main__":
    main()
