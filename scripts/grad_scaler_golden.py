#!/usr/bin/python3
"""Writes tests/golden_amp/grad_scaler.txt: torch's GradScaler over 30 training steps with infs
and NaNs injected into the gradients at chosen steps, read by tests/test_grad_scaler.c.

torch 1.13 has GradScaler's kernels (_amp_foreach_non_finite_check_and_unscale_,
_amp_update_scale_) for CUDA only; on a CPU-only machine this script runs torch's own
torch.cuda.amp.GradScaler (its stage machine, its errors, its scale arithmetic in
update()) with the two kernels written out in Python as the CUDA ones compute
(aten/src/ATen/native/cuda/AmpKernels.cu), and scale() and _MultiDeviceReplicator without
their is_cuda assertions.

Run with the system Python that has torch (Debian's python3-torch):
    /usr/bin/python3 scripts/grad_scaler_golden.py [output_file]

One record per step: <scenario> <step> <scale after update> <growth tracker> <stepped 0/1>
<the 4 parameters after the step>, floats as %.9g. Scenarios:
    sgd    SGD(lr=0.1, momentum=0.9), GradScaler(1024, 2, 0.5, growth_interval=3); unscale_ and
           clip_grad_norm_(max_norm=1) before step on even steps
    adam   Adam(lr=0.01), GradScaler() (torch's defaults: 65536, 2, 0.5, 2000)
    adamw  AdamW(lr=0.01, weight_decay=0.1), GradScaler(8, 4, 0.25, growth_interval=2)
The loss at step t is sum(w * x_t) + 0.5 sum(w * w), x_t[j] = ((7 t + 3 j) % 11 - 5) / 4,
with x_t[1] = inf at steps INF and x_t[2] = nan at steps NAN.
"""
import math
import sys

import torch
import torch.cuda.amp.grad_scaler as gs

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/golden_amp/grad_scaler.txt"
INF = (4, 5, 11, 25)
NAN = (17,)
STEPS = 30


def foreach_unscale(grads, found_inf, inv_scale):
    for g in grads:
        if not torch.isfinite(g).all():
            found_inf.fill_(1.0)
        g.mul_(inv_scale)


def update_scale(scale, tracker, found_inf, growth, backoff, interval):
    if found_inf.item():
        scale.mul_(backoff)
        tracker.fill_(0)
    else:
        successful = tracker.item() + 1
        if successful == interval:
            new = torch.tensor(scale.item() * growth, dtype=torch.float32)
            if math.isfinite(new.item()):
                scale.fill_(new.item())
            tracker.fill_(0)
        else:
            tracker.fill_(successful)
    return scale


class CpuScaler(gs.GradScaler):
    def scale(self, outputs):
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(outputs.device)
        return outputs * self._scale.to(device=outputs.device)


def x_at(t):
    x = torch.tensor([((7 * t + 3 * j) % 11 - 5) / 4 for j in range(4)], dtype=torch.float32)
    if t in INF:
        x[1] = math.inf
    if t in NAN:
        x[2] = math.nan
    return x


def run(name, make_opt, scaler_args, clip_even):
    w = torch.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
    opt = make_opt([w])
    scaler = CpuScaler(*scaler_args)
    rows = []
    for t in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = (w * x_at(t)).sum() + 0.5 * (w * w).sum()
        scaler.scale(loss).backward()
        if clip_even and t % 2 == 0:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_([w], 1.0)
        scaler.step(opt)
        found = scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()
        stepped = int(sum(v.item() for v in found) == 0)
        scaler.update()
        vals = " ".join("%.9g" % v for v in w.detach().tolist())
        rows.append(f"{name} {t} {scaler.get_scale():.9g} {scaler._growth_tracker.item()} "
                    f"{stepped} {vals}")
    return rows


def replicator_init(self, master_tensor):
    self.master = master_tensor
    self._per_device_tensors = {}


def main():
    gs.amp_definitely_not_available = lambda: False
    gs._MultiDeviceReplicator.__init__ = replicator_init
    torch._amp_foreach_non_finite_check_and_unscale_ = foreach_unscale
    torch._amp_update_scale_ = update_scale
    rows = run("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), (1024.0, 2.0, 0.5, 3),
               True)
    rows += run("adam", lambda p: torch.optim.Adam(p, lr=0.01), (), False)
    rows += run("adamw", lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
                (8.0, 4.0, 0.25, 2), False)
    with open(OUT, "w") as f:
        f.write(f"# torch {torch.__version__}: GradScaler, infs at {INF}, NaNs at {NAN}\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
