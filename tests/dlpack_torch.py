#!/usr/bin/python3
"""tenet <-> PyTorch through DLPack (ctest dlpack_torch): a tensor tenet made goes to PyTorch
(torch.utils.dlpack.from_dlpack on a capsule of tn_to_dlpack's result) and PyTorch's come to
tenet (tn_from_dlpack on the pointer in torch.utils.dlpack.to_dlpack's capsule), sharing
memory both ways: values, writes seen across, the data pointers, a non-contiguous view, the
half dtypes. Exits 77 (skipped) where torch is not installed.

    tests/dlpack_torch.py path/to/libtenet.so
"""
import ctypes
import sys

try:
    import torch
    from torch.utils import dlpack
except ImportError:
    print("dlpack_torch: torch is not installed: skipped")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
for name, res, args in [("tn_arange", P, [ctypes.c_double] * 3 + [ctypes.c_int]),
                        ("tn_to_dlpack", P, [P]), ("tn_from_dlpack", P, [P]),
                        ("tn_data_ptr", P, [P]), ("tn_release", None, [P]),
                        ("tn_dtype_of", ctypes.c_int, [P]), ("tn_numel", ctypes.c_int64, [P]),
                        ("tn_mul_scalar_", ctypes.c_int, [P, ctypes.c_double]),
                        ("tn_sum", P, [P]), ("tn_last_error", ctypes.c_char_p, []),
                        ("tn_item", ctypes.c_int, [P, ctypes.POINTER(ctypes.c_double)])]:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype, capsule_new.argtypes = ctypes.py_object, [P, ctypes.c_char_p, P]
capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
capsule_ptr.restype, capsule_ptr.argtypes = P, [ctypes.py_object, ctypes.c_char_p]
capsule_rename = ctypes.pythonapi.PyCapsule_SetName
capsule_rename.restype, capsule_rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
TN_F32, TN_F64, TN_BF16 = 0, 1, 6


def item(t):
    v = ctypes.c_double()
    assert lib.tn_item(t, ctypes.byref(v)) == 0, lib.tn_last_error()
    return v.value


# tenet -> PyTorch
t = lib.tn_arange(0.0, 6.0, 1.0, TN_F32)
m = lib.tn_to_dlpack(t)
assert m, lib.tn_last_error()
x = dlpack.from_dlpack(capsule_new(m, b"dltensor", None))
assert x.dtype == torch.float32 and x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], x
assert x.data_ptr() == lib.tn_data_ptr(t)
x[2] = 42.0  # PyTorch writes, tenet sees it
assert ctypes.cast(lib.tn_data_ptr(t), ctypes.POINTER(ctypes.c_float))[2] == 42.0
lib.tn_release(t)  # PyTorch's reference keeps the memory
assert x.sum().item() == 55.0
del x  # PyTorch runs the deleter: tenet's last reference goes

# PyTorch -> tenet: a transposed view, then bfloat16
y = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()
cap = dlpack.to_dlpack(y)
u = lib.tn_from_dlpack(capsule_ptr(cap, b"dltensor"))
assert u, lib.tn_last_error()
assert capsule_rename(cap, b"used_dltensor") == 0  # tenet owns it now
assert lib.tn_dtype_of(u) == TN_F64 and lib.tn_numel(u) == 12
assert lib.tn_data_ptr(u) == y.data_ptr()
s = lib.tn_sum(u)
assert item(s) == 66.0
lib.tn_release(s)
assert lib.tn_mul_scalar_(u, 2.0) == 0  # tenet writes, PyTorch sees it
assert y.sum().item() == 132.0 and y[1, 0].item() == 2.0
lib.tn_release(u)  # runs PyTorch's deleter
assert y.sum().item() == 132.0

h = torch.tensor([0.1, -2.5, 3.0], dtype=torch.bfloat16)
cap = dlpack.to_dlpack(h)
v = lib.tn_from_dlpack(capsule_ptr(cap, b"dltensor"))
assert v and capsule_rename(cap, b"used_dltensor") == 0
assert lib.tn_dtype_of(v) == TN_BF16
s = lib.tn_sum(v)
assert abs(item(s) - h.float().sum().item()) < 1e-2
lib.tn_release(s)
lib.tn_release(v)
print("dlpack_torch: tenet -> PyTorch -> tenet: values, shared memory, writes both ways: ok")
