"""Copies engine/cuda/ for the host emulator: every kernel launch
`k<<<grid, block[, shmem, stream]>>>(args)` becomes
`emu::launch(emu::cfg(grid, block, ...), k, args)`, and each backend entry
checks that its device pointers came from the emulated cudaMalloc.

usage: transform.py SRC_DIR DST_DIR"""
import glob
import os
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
launch = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(.+?)>>>\s*\(', re.S)
# (old, new): each backend entry first checks that its device pointers came
# from the emulated cudaMalloc
checks = {
  'pointwise.cuh': [('    if (it->numel <= 0) return TN_OK;\n', '    if (it->numel <= 0) return TN_OK;\n    for (int k = 0; k < F::NOPS; k++) emu_check_ptr(it->base[k], what);\n')],
  'reduce.cu': [('    return on_device(dev, [&](device_state *ds) {\n        return dispatch(a->dtype', '    if (reduced > 0) emu_check_ptr(a->in, "reduce in"); emu_check_ptr(a->vals, "reduce vals"); emu_check_ptr(a->idx, "reduce idx");\n    return on_device(dev, [&](device_state *ds) {\n        return dispatch(a->dtype')],
  'softmax.cu': [('    return on_device_float(dev, a->dtype,\n', '    emu_check_ptr(a->x, "sm x"); emu_check_ptr(a->y, "sm y"); emu_check_ptr(a->out, "sm out");\n    return on_device_float(dev, a->dtype,\n')],
  'gemm.cu': [('    dev_guard guard(dev);\n', '    dev_guard guard(dev);\n    if (g->k) { emu_check_ptr(g->a, "gemm a"); emu_check_ptr(g->b, "gemm b"); } emu_check_ptr(g->c, "gemm c");\n')],
  'nonfinite.cu': [('    if (b.count == 0) return TN_OK;\n', '    if (b.count == 0) return TN_OK;\n    for (int j = 0; j < b.count; j++) emu_check_ptr(b.p[j], "nonfinite");\n')],
  'readback.cu': [('    dev_guard guard(dev);\n    ticket *t', '    dev_guard guard(dev);\n    emu_check_ptr(src, "readback src");\n    ticket *t')],
  'backend.cu': [('    dev_guard g(dev);\n    TNC_TRY(cudaMemcpyAsync', '    dev_guard g(dev);\n    if (kind != TN_COPY_H2D) emu_check_ptr(src, "memcpy src"); if (kind != TN_COPY_D2H) emu_check_ptr(dst, "memcpy dst");\n    TNC_TRY(cudaMemcpyAsync')],
}

n = 0
for f in sorted(glob.glob(os.path.join(src, '*'))):
    if not f.endswith(('.cu', '.cuh', '.h')):
        continue
    s = open(f).read()
    s, k = launch.subn(lambda m: 'emu::launch(emu::cfg(%s), %s, ' % (m.group(2), m.group(1)), s)
    n += k
    b = os.path.basename(f)
    for old, new in checks.get(b, []):
        if old not in s:
            sys.exit('transform.py: %s changed, update its checks: %r not found' % (b, old))
        s = s.replace(old, new, 1)
    open(os.path.join(dst, b), 'w').write(s)
print('transform.py: %d kernel launches rewritten' % n)
