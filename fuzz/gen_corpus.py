#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/: small programs in the harness's input format
(fuzz/README.md), one per area, so that the fuzzer starts from inputs that reach every op.

Usage: fuzz/gen_corpus.py [DIR]   (default: fuzz/corpus next to this script)

The encoders below mirror fuzz/operands.c, and OPS the opcode table of fuzz/program.c; keep
them in step.
"""
import math
import os
import sys

OPS = ["create", "tensor_from", "arange", "convert", "fail_alloc", "inspect", "binary", "compare",
       "scalar", "unary", "out", "reduce", "reduce_dim", "matmul", "nn", "view", "transpose",
       "permute", "narrow", "select", "expand", "squeeze", "flatten", "contiguous", "join",
       "inplace", "inplace_scalar", "alias", "requires_grad", "backward", "autograd_grad", "grad",
       "grad_mode", "anomaly", "scope", "optim", "runtime", "slots", "backward_multi",
       "grad_unused", "graph_walk", "hook", "safetensors_load", "safetensors_save", "index",
       "mask", "norm", "attention", "profile", "write_inplace", "sampler", "clip", "table",
       "channel_norm", "idx_load"]
F32, F64, I16, I32, I64, BOOL, SAME, BAD = range(8)

HOSTILE_SIZES = [-1, -2, -2**63, 2**63 - 1, 2**62, 2**31, 2**32, 2**36, 2**40, 2**62 + 1, 2**20,
                 65536, 255, (2**63 - 1) // 2, 3 << 61, 2**33]
HOSTILE_NDIMS = [-1, -2, 8, 9, 10, -2**31, 2**31 - 1, 7]
HOSTILE_DIMS = [-2**31, 2**31 - 1, -9, 8, 9, 100, -100, 1 << 20]
SCALARS = [0, 1, -1, 2, 0.5, -0.5, 3, -3, 1e-3, 100, "nan", "inf", "-inf", "-0", 1e30, 3.5e38,
           -3.5e38, 1e300, -1e300, 2147483648.0, -2147483649.0, 2.0**63, -2.0**63, 2.0**64,
           32767, 32768, -32769, 1e-310, 0.1, 7, 10, 1e10]


def size(v):
    return v if 0 <= v <= 5 else 0xF0 + HOSTILE_SIZES.index(v)


def ndim(v):
    return v if 0 <= v <= 4 else 0xF0 + HOSTILE_NDIMS.index(v)


def dim(v):
    return v + 4 if -4 <= v <= 4 else 0xE0 + HOSTILE_DIMS.index(v)


def index(v):
    return v + 4 if -4 <= v <= 4 else 0xF0 + HOSTILE_SIZES.index(v)


def scalar(v):
    return SCALARS.index(v)


def dst(slot, drop=False):
    return slot | (0x30 if drop else 0)


def shape(dims):
    return [ndim(len(dims))] + [size(d) for d in dims]


class Program:
    def __init__(self):
        self.b = []

    def op(self, name, *operands):
        self.b.append(OPS.index(name))
        for o in operands:
            self.b.extend(o if isinstance(o, list) else [o])
        return self

    # helpers named after what they do; each ends with the destination slot
    def tensor(self, slot, dims, dt=F32, rg=False, values=None):
        n = math.prod(dims) if dims else 1
        vals = values if values is not None else [(i % 7) + 1 for i in range(n)]
        return self.op("tensor_from", dt, shape(dims), 1 if rg else 0, vals, dst(slot))

    def create(self, slot, kind, dims, dt=F32, value=0, nd=None):
        s = shape(dims) if nd is None else [ndim(nd)] + [size(d) for d in dims]
        return self.op("create", kind, dt, s, scalar(value), dst(slot))

    def bytes(self):
        return bytes(self.b)


def seeds():
    P = Program
    EMPTY, ZEROS, ONES, FULL, RAND, RANDN, SCALAR = range(7)
    s = {}
    s["basic-backward"] = (P().tensor(0, [2, 3], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                           .op("reduce", 0, 1, dst(2)).op("backward", 2, 0, 0).op("grad", 0, dst(3))
                           .op("inspect", 1, 3, 0))
    s["create-every-dtype"] = P()
    for dt in range(8):
        s["create-every-dtype"].create(dt, FULL, [2, 2], dt, 3).create(8 + dt, SCALAR, [], dt, 0.5)
    s["create-hostile-shapes"] = (P().create(0, ZEROS, [0, 2**62]).create(1, ZEROS, [-1])
                                  .create(2, EMPTY, [2, 2, 2, 2, 2, 2, 2, 2, 2], nd=9)
                                  .create(3, ONES, [2**63 - 1, 2**63 - 1])
                                  .create(4, EMPTY, [2**36]).create(5, RAND, [2**40, 2**40], F64)
                                  .create(6, ZEROS, [], nd=-1).create(7, ZEROS, [3], BAD)
                                  .create(8, ZEROS, [2], SAME).create(9, RANDN, [3], I32))
    s["huge-request-256g"] = P().create(0, EMPTY, [2**36]).create(1, ZEROS, [2**33], I64)
    s["nan-into-integers"] = (P().create(0, FULL, [2], I32, "nan").create(1, FULL, [2], I16, 32768)
                              .create(2, SCALAR, [], I64, "inf").create(3, FULL, [2], F32, 1e300)
                              .create(4, ZEROS, [3], I32).op("inplace_scalar", 2, 4, scalar("nan"), 0)
                              .op("inplace_scalar", 0, 4, scalar("-inf"), 0)
                              .op("scalar", 2, 4, scalar("nan"), dst(5))
                              .op("inplace_scalar", 1, 4, scalar(2.0**63), 0))
    s["tensor-from-null"] = (P().op("tensor_from", F32, shape([3]), 2, [0, 0, 0], dst(0))
                             .op("tensor_from", F64, shape([0]), 2, [], dst(1))
                             .op("tensor_from", I64, shape([2**62, 4]), 0, [1], dst(2)))
    s["arange"] = (P().op("arange", scalar(0), scalar(10), scalar(1), F32, dst(0))
                   .op("arange", scalar(0), scalar(1e300), scalar(1e-310), F64, dst(1))
                   .op("arange", scalar(0), scalar(10), scalar(0), I64, dst(2))
                   .op("arange", scalar("nan"), scalar(1), scalar(1), F32, dst(3))
                   .op("arange", scalar(10), scalar(0), scalar(1), I32, dst(4)))
    s["views-hostile"] = (P().tensor(0, [2, 3, 4])
                          .op("narrow", 0, dim(1), index(2**62), index(2), dst(1))
                          .op("narrow", 0, dim(-1), index(-1), index(2), dst(2))
                          .op("select", 0, dim(0), index(-3), dst(3))
                          .op("select", 0, dim(-2**31), index(0), dst(4))
                          .op("transpose", 0, dim(0), dim(2**31 - 1), dst(5))
                          .op("permute", 0, ndim(3), dim(2), dim(0), dim(1), dst(6))
                          .op("permute", 0, ndim(3), dim(0), dim(0), dim(1), dst(7))
                          .op("view", 0, 0, ndim(2), size(-1), size(4), dst(8))
                          .op("view", 6, 0, ndim(1), size(-1), dst(9))
                          .op("view", 6, 1, ndim(1), size(-1), dst(10))
                          .op("expand", 0, ndim(4), size(2**62), size(2), size(3), size(4), dst(11))
                          .op("squeeze", 2, 3, dim(8), dst(12)).op("squeeze", 0, 3, dim(0), dst(13))
                          .op("flatten", 0, dim(1), dim(0), dst(14))
                          .op("flatten", 0, dim(0), dim(-1), dst(15)))
    s["views-ndim-beyond-max"] = (P().tensor(0, [2])
                                  .op("expand", 0, ndim(2**31 - 1), dst(1))
                                  .op("view", 0, 0, ndim(9), *[size(1)] * 9, dst(2))
                                  .op("permute", 0, ndim(-1), dst(3))
                                  .op("expand", 0, ndim(-2), dst(4)))
    s["views-of-empty-huge"] = (P().create(0, ZEROS, [0, 2**62])
                                .op("narrow", 0, dim(1), index(2**62), index(0), dst(1))
                                .op("transpose", 0, dim(0), dim(1), dst(2))
                                .op("squeeze", 2, 0, dim(1), dst(3))
                                .op("flatten", 0, dim(0), dim(1), dst(4))
                                .op("join", 1, 2, 0, 0, dim(0), dst(5)))
    s["expand-then-compute"] = (P().tensor(0, [1]).op("expand", 0, ndim(2), size(2**31), size(2**31), dst(1))
                                .op("unary", 0, 1, 0, 0, dst(2)).op("reduce", 0, 1, dst(3))
                                .op("narrow", 1, dim(0), index(0), index(1), dst(4))
                                .op("narrow", 4, dim(1), index(0), index(2), dst(5))
                                .op("contiguous", 1, dst(6)).op("inplace_scalar", 4, 1, 0, 0))
    s["pointwise-dtype-mix"] = P().tensor(0, [2, 3], F32).tensor(1, [3], I64).tensor(2, [2, 1], BOOL, values=[1, 0]).tensor(3, [], I16)
    for v in range(8):
        s["pointwise-dtype-mix"].op("binary", v, v % 4, (v + 1) % 4, scalar(0.5), dst(4 + v))
    for v in range(6):
        s["pointwise-dtype-mix"].op("compare", v, 0, 1, dst(12))
    s["scalar-ops"] = P().tensor(0, [3], I32).tensor(1, [3], F32, rg=True)
    for v in range(6):
        s["scalar-ops"].op("scalar", v, v % 2, scalar([0.5, "nan", 2.0**64, -1, 0, 3][v]), dst(2 + v))
    s["unary-all"] = P().tensor(0, [4], F64, rg=True, values=[0, 1, 8, 2])
    for v in range(11):
        s["unary-all"].op("unary", v, 0, scalar(-1), scalar(1), dst(1 + v))
    s["unary-all"].op("join", 1, 5, 1, 2, 3, 4, 5, dim(0), dst(12)).op("reduce", 0, 12, dst(13)).op("backward", 13, 0, 0)
    s["out-forms"] = (P().tensor(0, [2, 2]).tensor(1, [2]).create(2, EMPTY, [2, 2])
                      .op("out", 0, 2, 0, 1).op("out", 1, 2, 0, 1).op("out", 0, 1, 0, 0)
                      .op("expand", 1, ndim(2), size(2), size(2), dst(3)).op("out", 0, 3, 0, 0)
                      .tensor(4, [2, 2], rg=True).op("out", 1, 2, 4, 0))
    s["reductions"] = P().tensor(0, [2, 3], F32, rg=True).create(1, ZEROS, [0, 3]).tensor(2, [3], I64)
    for v in range(5):
        s["reductions"].op("reduce", v, v % 3, dst(3 + v))
    for v in range(4):
        s["reductions"].op("reduce_dim", v, v % 3, dim([1, -1, 8, 0][v]), v & 1, dst(8 + v))
    s["matmul-shapes"] = (P().tensor(0, [2, 3]).tensor(1, [3, 4]).tensor(2, [4]).tensor(3, [2, 2, 3])
                          .op("matmul", 0, 0, 1, 2, dst(4)).op("matmul", 0, 1, 0, 2, dst(5))
                          .op("matmul", 0, 2, 2, 2, dst(6)).op("matmul", 0, 3, 1, 2, dst(7))
                          .op("matmul", 0, 0, 2, 2, dst(8)).op("matmul", 1, 3, 1, 2, dst(9))
                          .op("matmul", 1, 0, 0, 2, dst(10)).op("matmul", 2, 1, 0, 2, dst(11))
                          .create(12, ZEROS, [0, 3]).op("matmul", 0, 12, 1, 2, dst(13))
                          .tensor(14, [3, 4], I64).op("matmul", 0, 0, 14, 2, dst(15)))
    s["matmul-backward"] = (P().tensor(0, [2, 3], rg=True).tensor(1, [4, 3], rg=True).tensor(2, [4], rg=True)
                            .op("matmul", 1, 0, 1, 2, dst(3)).op("reduce", 1, 3, dst(4))
                            .op("backward", 4, 2, 0).op("backward", 4, 0, 0).op("grad", 1, dst(5)))
    s["nn-losses"] = (P().tensor(0, [2, 3], rg=True).tensor(1, [2], I64, values=[2, 0])
                      .tensor(2, [2], I64, values=[9, 2]).op("nn", 0, 0, 0, dim(1), dst(3))
                      .op("nn", 1, 0, 0, dim(-1), dst(4)).op("nn", 1, 0, 0, dim(2), dst(5))
                      .op("nn", 2, 0, 1, 0, dst(6)).op("nn", 2, 0, 2, 0, dst(7))
                      .op("nn", 3, 0, 3, 0, dst(8)).op("nn", 3, 0, 1, 0, dst(9))
                      .op("backward", 6, 0, 0).op("grad", 0, dst(10)))
    # attention: variant (bit 0 causal, 1 mask, 2 dropout with p = bits 3..6 / 16, 7 a bad p),
    # q, k, v, mask, dst
    s["attention"] = (P().tensor(0, [2, 3, 4], rg=True).tensor(1, [2, 5, 4], rg=True)
                      .tensor(2, [5, 3], rg=True).tensor(3, [3, 5], BOOL, values=[1, 0, 1] * 5)
                      .op("attention", 0, 0, 1, 2, 3, dst(4)).op("attention", 1, 0, 1, 2, 3, dst(5))
                      .op("attention", 2, 0, 1, 2, 3, dst(6)).op("attention", 3, 0, 1, 2, 3, dst(7))
                      .op("attention", 4 | (4 << 3), 0, 1, 2, 3, dst(8))
                      .op("attention", 0x80, 0, 1, 2, 3, dst(9)).op("attention", 2, 0, 1, 2, 0, dst(10))
                      .op("reduce", 1, 6, dst(11)).op("backward", 11, 2, 0).op("grad", 1, dst(12))
                      .op("reduce", 1, 8, dst(13)).op("backward", 13, 2, 0).op("grad", 0, dst(14)))
    s["cat-stack-mismatch"] = (P().tensor(0, [2, 3]).tensor(1, [2, 4]).tensor(2, [2, 3], I32)
                               .op("join", 0, 2, 0, 1, dim(1), dst(3)).op("join", 0, 2, 0, 1, dim(0), dst(4))
                               .op("join", 1, 2, 0, 1, dim(0), dst(5)).op("join", 1, 2, 0, 2, dim(2), dst(6))
                               .op("join", 1, 2, 0, 2, dim(3), dst(7)).op("join", 0, 0, dim(0), dst(8))
                               .op("join", 0, 0xF0, dim(0), dst(9)).op("join", 1, 3, 0, 9, 0, dim(0), dst(10)))
    s["inplace-leaf-rules"] = (P().tensor(0, [3], rg=True).tensor(1, [3])
                               .op("inplace", 0, 0, 1).op("narrow", 0, dim(0), index(0), index(2), dst(2))
                               .op("inplace_scalar", 4, 2, 0, 0).op("grad_mode", 0)
                               .op("inplace", 0, 0, 1).op("inplace_scalar", 1, 2, scalar(2), 0)
                               .op("grad_mode", 1).op("inspect", 5, 0, 0, 0, 0))
    s["inplace-view-copyslices"] = (P().tensor(0, [2, 3], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                                    .op("select", 1, dim(0), index(1), dst(2)).tensor(3, [3])
                                    .op("inplace", 2, 2, 3).op("inplace_scalar", 7, 2, 0, 0)
                                    .op("reduce", 0, 1, dst(4)).op("backward", 4, 0, 0)
                                    .op("grad", 0, dst(5)).op("inspect", 1, 5, 0))
    s["detach-and-data-aliases"] = (P().tensor(0, [3], rg=True).op("unary", 5, 0, 0, 0, dst(1))
                                    .op("alias", 0, 1, dst(2)).op("alias", 2, 1, dst(3))
                                    .op("inplace_scalar", 4, 2, 0, 0).op("reduce", 0, 1, dst(4))
                                    .op("backward", 4, 2, 0).op("inplace_scalar", 4, 3, 0, 0)
                                    .op("backward", 4, 0, 0).op("alias", 1, 1).op("alias", 1, 0)
                                    .op("alias", 3, 1, dst(5)))
    s["backward-twice"] = (P().tensor(0, [2], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                           .op("reduce", 0, 1, dst(2)).op("backward", 2, 0, 0).op("backward", 2, 0, 0)
                           .op("backward", 1, 0, 0).op("backward", 1, 1, 0)
                           .op("backward", 0, 0, 0).op("backward", 15, 0, 0))
    s["backward-retain-create-graph"] = (P().tensor(0, [2], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                                         .op("reduce", 0, 1, dst(2)).op("backward", 2, 2 | 4 | 8, 0)
                                         .op("grad", 0, dst(3)).op("reduce", 0, 3, dst(4))
                                         .op("backward", 4, 2, 0).op("backward", 2, 2, 0))
    s["functional-grad"] = (P().tensor(0, [3], rg=True).tensor(1, [3], rg=True)
                            .op("binary", 2, 0, 1, 0, dst(2)).op("reduce", 0, 2, dst(3))
                            .op("autograd_grad", 1, 3, 2 | 4, 0, 2, 0, 1, dst(4), dst(5))
                            .op("reduce", 0, 4, dst(6))
                            .op("autograd_grad", 1, 6, 0, 0, 1, 1, dst(7))
                            .op("autograd_grad", 1, 2, 1, 2, 1, 0, dst(8))
                            .op("autograd_grad", 0xF1, 0, 0xF1)
                            .op("autograd_grad", 1, 3, 0, 0, 1, 12, dst(9)))
    s["retain-grad-and-set-grad"] = (P().tensor(0, [2], rg=True).op("unary", 6, 0, 0, 0, dst(1))
                                     .op("requires_grad", 1, 1, 0, 0).op("reduce", 0, 1, dst(2))
                                     .op("backward", 2, 0, 0).op("grad", 1, dst(3))
                                     .op("requires_grad", 2, 0, 0, 3).op("requires_grad", 2, 0, 0, 0)
                                     .op("expand", 0, ndim(1), size(2), dst(4))
                                     .op("requires_grad", 2, 0, 0, 4).op("requires_grad", 3, 0, 0, 0)
                                     .op("requires_grad", 0, 1, 0, 0).op("requires_grad", 0, 3, 1, 0)
                                     .tensor(5, [2], I32).op("requires_grad", 0, 5, 1, 0))
    s["anomaly-nan"] = (P().op("anomaly", 0, 3).tensor(0, [2], rg=True, values=[2, 0])
                        .op("scalar", 2, 0, scalar(-1), dst(1)).op("unary", 3, 1, 0, 0, dst(2))
                        .op("reduce", 0, 2, dst(3)).op("backward", 3, 0, 0).op("anomaly", 3, 0)
                        .op("anomaly", 5, 3).op("anomaly", 4, 0).op("anomaly", 0, 0))
    s["anomaly-untracked"] = (P().op("anomaly", 0, 1).op("anomaly", 2, 1).tensor(0, [3], rg=True)
                              .op("unary", 5, 0, 0, 0, dst(1)).op("alias", 2, 1, dst(2))
                              .op("inplace_scalar", 4, 2, 0, 0).op("reduce", 0, 1, dst(3))
                              .op("backward", 3, 2, 0).op("anomaly", 3, 0)
                              .op("alias", 0, 1, dst(4)).op("inplace_scalar", 8, 4, 0, 0)
                              .op("backward", 3, 0, 0).op("anomaly", 3, 0).op("anomaly", 1, 6)
                              .op("anomaly", 1, 2))
    s["scopes"] = (P().op("scope", 0, 0).tensor(0, [2], rg=True).op("scope", 0, 0)
                   .op("binary", 0, 0, 0, 0, dst(1, drop=True)).op("binary", 2, 0, 0, 0, dst(2))
                   .op("scope", 2, 2).op("scope", 1, 0).op("scope", 2, 2).op("scope", 2, 0)
                   .op("reduce", 0, 2, dst(3)).op("scope", 1, 0).op("backward", 3, 0, 0)
                   .op("scope", 1, 0).op("scope", 2, 3))
    s["release-order"] = (P().tensor(0, [2, 2], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                          .op("transpose", 1, dim(0), dim(1), dst(2)).op("reduce", 0, 2, dst(3))
                          .op("slots", 0, 0, 0).op("slots", 0, 1, 0).op("slots", 1, 3, 4)
                          .op("slots", 2, 3, 5).op("backward", 4, 0, 0).op("slots", 0, 2, 0)
                          .op("backward", 5, 0, 0))
    s["optimisers"] = (P().tensor(0, [3], rg=True).tensor(1, [2], rg=True)
                       .op("binary", 2, 0, 0, 0, dst(2)).op("reduce", 0, 2, dst(3)).op("backward", 3, 0, 0)
                       .op("optim", 0, 2, 0, 1, scalar(0.1), scalar(0.5), scalar(1e-3), scalar(0))
                       .op("optim", 1, 2, 0, 0, scalar(1e-3), scalar(0.5), scalar(0.5), scalar(0.1))
                       .op("optim", 0, 1, 2, scalar(-1), scalar(0), scalar(0), scalar(0))
                       .op("optim", 1, 0xF0, scalar(1e-3), scalar(0.5), scalar(0.5), scalar(0)))
    s["runtime-switches"] = (P().op("runtime", 0, 2).op("runtime", 1, 0).op("runtime", 2, 1)
                             .op("runtime", 3, 7).op("runtime", 4, 1).op("runtime", 5, 9)
                             .op("runtime", 6, 0).tensor(0, [2, 2], rg=True)
                             .op("matmul", 0, 0, 0, 0, dst(1)).op("reduce", 0, 1, dst(2))
                             .op("backward", 2, 0, 0).op("runtime", 4, 0).op("runtime", 0, 3))
    s["inspect"] = (P().tensor(0, [2, 3], F64).create(1, ZEROS, [0, 2**62]).tensor(2, [], I16)
                    .op("inspect", 0, 2).op("inspect", 0, 0).op("inspect", 1, 0, 1)
                    .op("inspect", 2, 0, 2).op("inspect", 3, 0, 5).op("inspect", 3, 1, 0)
                    .op("inspect", 4, 0, 0).op("inspect", 4, 1, 0).op("inspect", 5, 0, 1, dim(-9), 7, 3)
                    .op("inspect", 5, 9, 0, 0, 0, 0))
    s["to-and-new-tensor"] = (P().tensor(0, [2], rg=True).op("convert", 1, 0, F64, 0, 0, dst(1))
                              .op("convert", 1, 0, SAME, 3, 0, dst(2))
                              .op("convert", 1, 0, BAD, 0, 0, dst(3))
                              .op("convert", 1, 0, I32, 7, 0, dst(4))
                              .op("convert", 0, 0, SAME, 1, 1, dst(5))
                              .op("convert", 0, 0, I64, 0, 1, dst(6))
                              .op("convert", 0, 0, F32, 4, 0, dst(7))
                              .op("reduce", 0, 1, dst(8)).op("backward", 8, 0, 0).op("grad", 0, dst(9)))
    s["copy-broadcast"] = (P().tensor(0, [2, 3]).tensor(1, [3], I64).tensor(2, [4])
                           .op("inplace", 4, 0, 1).op("inplace", 4, 0, 2).op("inplace", 4, 1, 0)
                           .tensor(3, [3], rg=True).op("inplace", 4, 0, 3).op("reduce", 0, 0, dst(4))
                           .op("backward", 4, 0, 0).op("grad", 3, dst(5)))
    s["inplace-saved-modified"] = (P().tensor(0, [3], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                                   .op("unary", 7, 1, 0, 0, dst(2)).op("inplace_scalar", 0, 1, scalar(1), 0)
                                   .op("reduce", 0, 2, dst(3)).op("backward", 3, 0, 0)
                                   .op("inplace_scalar", 5, 2, 0, 0).op("inplace_scalar", 6, 2, 0, 0)
                                   .op("reduce", 0, 2, dst(4)).op("backward", 4, 0, 0))
    s["inplace-overlap"] = (P().tensor(0, [1]).op("expand", 0, ndim(2), size(3), size(3), dst(1))
                            .op("inplace_scalar", 4, 1, 0, 0).op("inplace", 0, 1, 1)
                            .op("inplace", 4, 1, 0).op("inplace_scalar", 3, 1, scalar(-1), scalar(1)))
    s["detach-inplace"] = (P().tensor(0, [2], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                           .op("select", 1, dim(0), index(0), dst(2)).op("alias", 1, 2)
                           .op("alias", 1, 1).op("reduce", 0, 1, dst(3)).op("backward", 3, 0, 0))
    s["parallel-backward"] = (P().op("runtime", 2, 1).tensor(0, [4], rg=True)
                              .op("unary", 1, 0, 0, 0, dst(1)).op("unary", 8, 0, 0, 0, dst(2))
                              .op("binary", 2, 1, 2, 0, dst(3)).op("reduce", 0, 3, dst(4))
                              .op("backward", 4, 2, 0).op("backward", 4, 0, 0))
    s["hooks-and-roots"] = (P().tensor(0, [2, 3], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                            .op("reduce", 0, 1, dst(2)).op("hook", 0, 0, 0).op("hook", 5, 1, 1)
                            .op("hook", 6, 1, 2).op("hook", 4, 0, 3)
                            .op("unary", 1, 0, 0, 0, dst(3)).op("reduce", 0, 3, dst(4))
                            .op("backward_multi", 2, 2, 4, 2, 0, 0).op("graph_walk", 2, 0, 20)
                            .op("grad_unused", 4, 0, 1, dst(5), 1)
                            .op("grad_unused", 4, 0, 1, dst(5), 3)
                            .op("hook", 0x82, 0, 0).op("backward_multi", 2, 2, 4, 0, 0, 0)
                            .op("hook", 2, 0, 1).op("backward", 4, 2, 0).op("hook", 3, 3, 2)
                            .op("backward", 4, 0, 0))
    s["views-follow-base"] = (P().tensor(0, [2, 3], rg=True).op("binary", 2, 0, 0, 0, dst(1))
                              .op("narrow", 1, dim(0), index(0), index(1), dst(2))
                              .op("narrow", 1, dim(0), index(0), index(1), dst(3))
                              .op("inplace_scalar", 4, 2, scalar(2), 0)
                              .op("reduce", 0, 3, dst(4)).op("graph_walk", 3, 0, 20)
                              .op("backward", 4, 0, 0).op("grad", 0, dst(5)))
    for n in (1, 2, 5, 9, 17, 40):
        s[f"out-of-memory-at-{n}"] = (P().op("scope", 0, 0).tensor(0, [2, 3], rg=True)
                                      .tensor(1, [3, 2], rg=True).op("fail_alloc", n - 1)
                                      .op("matmul", 0, 0, 1, 2, dst(2)).op("unary", 5, 2, 0, 0, dst(3))
                                      .op("reduce", 1, 3, dst(4)).op("backward", 4, 2, 0)
                                      .op("inplace", 0, 0, 0).op("optim", 1, 2, 0, 1, scalar(1e-3),
                                                                 scalar(0.5), scalar(0.5), scalar(0))
                                      .op("scope", 1, 0))
    # safetensors_save: count - 1, (slot, name) per tensor, flags, dst (fuzz/op_io.c)
    # safetensors_load: flags, header length (2 bytes LE), [size field], header, data length,
    # data, dst
    def st_file(header, data=b"", flags=0, field=None):
        h = header.encode()
        ops = [flags, len(h) & 0xFF, len(h) >> 8]
        if flags & 1:
            ops += list((field if field is not None else len(h)).to_bytes(8, "little"))
        return ["safetensors_load", ops + list(h) + [len(data)] + list(data) + [dst(0)]]
    f32 = lambda name, b, e, shape="[1]": (
        f'"{name}":{{"dtype":"F32","shape":{shape},"data_offsets":[{b},{e}]}}')
    good = ('{"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},'
            + f32("a", 8, 16, "[2]") + ',"c":{"dtype":"BF16","shape":[],"data_offsets":[16,18]},'
            '"d":{"dtype":"BOOL","shape":[0,3],"data_offsets":[18,18]}}')
    s["safetensors-load"] = (P().op(*st_file(good, bytes(range(18))))
                             .op(*st_file("{" + f32("a", 0, 4) + "," + f32("b", 2, 6) + "}", b"\0" * 6))
                             .op(*st_file("{" + f32("a", 0, 4) + "," + f32("a", 4, 8) + "}", b"\0" * 8))
                             .op(*st_file('{"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}',
                                          b"\x00\x3c\x00\x7c\x01\x00\xff\x7f"))
                             .op(*st_file("{}", flags=1, field=2**62))
                             .op(*st_file('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\1")))
    s["safetensors-save"] = (P().tensor(0, [2, 3], rg=True).tensor(1, [3], I64)
                             .op("transpose", 0, dim(0), dim(1), dst(2))
                             .op("safetensors_save", 2, 0, 2, 1, 1, 2, 6, 3, dst(3))
                             .op("safetensors_save", 1, 0, 0, 1, 0, 7, dst(4))
                             .op("safetensors_save", 0, 2, 4, 0, dst(5)))
    # index: variant, a, idx, src, dim, dst; mask: variant, c, a, b, scalar, index, dst
    # (fuzz/op_index.c)
    s["index-ops"] = (P().tensor(0, [5, 3], rg=True).tensor(1, [2, 3], I64, values=[1, 4, 1, 0, 1, 3])
                      .tensor(2, [2, 3], rg=True).tensor(3, [1], I64, values=[9])
                      .op("index", 0, 0, 1, 2, dim(0), dst(4))
                      .op("index", 1, 0, 3, 2, dim(0), dst(5))
                      .op("index", 2, 0, 1, 2, dim(0), dst(6))
                      .op("index", 3, 0, 1, 2, dim(0), dst(7))
                      .op("index", 3, 0, 3, 2, dim(-1), dst(8))
                      .op("index", 1, 0, 1, 2, dim(1), dst(9))
                      .op("binary", 2, 4, 4, 0, dst(10)).op("reduce", 0, 10, dst(11))
                      .op("backward", 11, 0, 0).op("grad", 0, dst(12)))
    s["mask-ops"] = (P().tensor(0, [3, 4], rg=True).tensor(1, [4], BOOL, values=[1, 0, 0, 1])
                     .op("binary", 2, 0, 0, 0, dst(2))
                     .op("mask", 0, 1, 0, 2, scalar(0), index(0), dst(3))
                     .op("mask", 1, 1, 0, 0, scalar(0.5), index(0), dst(4))
                     .op("mask", 2, 1, 2, 0, scalar("nan"), index(0), 0)
                     .op("mask", 2, 1, 0, 0, scalar(1), index(0), 0)
                     .op("mask", 3, 1, 2, 0, scalar(0), index(1), dst(5))
                     .op("mask", 4, 1, 2, 0, scalar(0), index(-1), dst(6))
                     .op("binary", 0, 5, 6, 0, dst(7)).op("reduce", 0, 7, dst(8))
                     .op("backward", 8, 0, 0).op("grad", 0, dst(9)))
    # norm: variant, a, b, c, dim, flag, scalar, dst (fuzz/op_norm.c)
    s["norm-ops"] = (P().tensor(0, [4, 5], rg=True).tensor(1, [5], rg=True).tensor(2, [5], rg=True)
                     .op("norm", 0, 0, 1, 2, dim(1), 0, scalar(1e-3), dst(3))
                     .op("norm", 7, 0, 2, 1, dim(1), 0, scalar(0.1), dst(4))
                     .op("norm", 0, 0, 1, 2, dim(3), 0, scalar(0.1), dst(4))
                     .op("norm", 1, 3, 0, 0, 0, 1, 0, dst(5)).op("norm", 1, 5, 0, 0, 0, 0, 0, dst(5))
                     .op("norm", 2, 5, 0, 0, 0, 0, 0, dst(6))
                     .op("norm", 3, 6, 0, 0, 0, 1, scalar(0.5), dst(7))
                     .op("norm", 3, 6, 0, 0, 0, 1, scalar("nan"), dst(8))
                     .op("norm", 4, 7, 0, 0, dim(-1), 0, 0, dst(8))
                     .op("norm", 5, 7, 0, 0, dim(0), 1, scalar(1), dst(9))
                     .op("norm", 6, 7, 0, 0, dim(1), 0, scalar(100), dst(10))
                     .op("binary", 0, 8, 9, 0, dst(11)).op("reduce", 0, 11, dst(12))
                     .op("backward", 12, 0, 0).op("grad", 0, dst(13)).op("grad", 1, dst(14)))
    s["profile-across-backward"] = (P().op("profile", 0, 0).tensor(0, [2, 3], rg=True)
                                    .op("binary", 2, 0, 0, 0, dst(1)).op("reduce", 0, 1, dst(2))
                                    .op("backward", 2, 0, 0).op("profile", 4, 5)
                                    .op("profile", 2, 0).op("profile", 1, 0).op("profile", 3, 0))
    s["write-inplace"] = (P().tensor(0, [2, 3], rg=True).op("unary", 0, 0, 0, 0, dst(1))
                          .op("write_inplace", 1, 2).op("write_inplace", 0, 1)
                          .op("transpose", 0, dim(0), dim(1), dst(2)).op("write_inplace", 2, 4)
                          .op("reduce", 0, 1, dst(3)).op("backward", 3, 0, 0))
    s["sampler"] = (P().op("sampler", index(3), index(1), 2, 1, 1, 7)
                    .op("sampler", index(-1), index(0), 0, 0, 0, 0)
                    .op("sampler", index(4), index(2), 3, 5, 3, 1))
    # the table opcode: every row of the op table (tests/ops/), on float, int64 and bool slots
    t = (P().tensor(0, [2, 3], F64, rg=True).tensor(1, [2, 3], F64).tensor(2, [3], F64)
         .tensor(3, [2, 3], I64, values=[0, 1, 1, 0, 2, 1]).tensor(4, [3], BOOL, values=[1, 0, 1]))
    for row in range(128):
        ins = [0, 3, 1, 2] if row % 3 == 1 else [0, 4, 2, 1] if row % 3 == 2 else [0, 1, 2, 3]
        t.op("table", row, row // 3, ins, dst(5 + row % 8))
    s["table-rows"] = t.op("reduce", 0, 5, dst(13)).op("backward", 13, 0, 0)
    # idx_load: flags (bit 0 gzip, 1 cut, 2 flip a byte, 3-5 dtype, 6 scale 1/255), length
    # (2 bytes LE), the bytes, cut, at, dst (fuzz/op_io.c)
    def idx_file(flags, data, cut=0, at=0, slot=0):
        return ["idx_load", [flags, len(data) & 0xFF, len(data) >> 8] + list(data) + [cut, at, dst(slot)]]
    img = bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3]) + bytes(range(0, 180, 10))
    s["idx-load"] = (P().op(*idx_file(64, img)).op(*idx_file(1 | 64, img, slot=1))
                     .op(*idx_file(1 | 2, img, cut=5, slot=2)).op(*idx_file(1 | 4, img, at=20, slot=3))
                     .op(*idx_file(4 << 3, bytes([0, 0, 8, 1, 0, 0, 0, 3, 9, 0, 7]), slot=4))
                     .op(*idx_file(1, bytes([0, 0, 8, 4]) + b"\xff" * 16, slot=5))
                     .op(*idx_file(6 << 3, bytes([0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3f, 0x80, 0, 0]), slot=6)))
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    for name, prog in sorted(seeds().items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(prog.bytes())
    print(f"{len(seeds())} seeds written to {out}")


if __name__ == "__main__":
    main()
