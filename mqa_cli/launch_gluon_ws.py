"""Launcher of the warp-specialised Gluon Hopper (sm90) prefill kernel: TMA descriptors are built here."""
from __future__ import annotations

import importlib

import torch

from .errors import UserError
from .launch import LaunchArgs, alloc_logits


def gluon_ws_args(t, cfg, out) -> LaunchArgs:
    """Arguments of mqa_logits_gluon_ws_sm90 for CUDA tensors `t` (Prefill) and an [S, N] view `out`."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    c = cfg.constexprs
    S, N, H, D = t.S, t.N, t.heads, t.dim
    if H != c["H"] or D != c["D"]:
        raise UserError(f"config built for H={c['H']}, D={c['D']} but tensors have H={H}, D={D}")
    if t.q.dtype != torch.float8_e4m3fn:
        raise UserError(f"the Gluon ws sm90 kernel needs float8_e4m3fn inputs, got {t.q.dtype}")
    if out.stride(1) != 1:
        raise UserError("out must be contiguous along N")
    if out.stride(0) < -(-N // c["BLOCK_KV"]) * c["BLOCK_KV"]:
        raise UserError(f"logits row stride {out.stride(0)} must be padded to a multiple of {c['BLOCK_KV']}")
    q = t.q if (t.q.stride(2) == 1 and t.q.stride(1) == D and t.q.stride(0) == H * D) else t.q.contiguous()
    kv = t.kv if (t.kv.stride(1) == 1 and (t.kv.stride(0) * t.kv.element_size()) % 16 == 0) else t.kv.contiguous()
    if q.data_ptr() % 16:
        q = q.clone()
    if kv.data_ptr() % 16:
        kv = kv.clone()
    weights = t.weights if t.weights.stride(1) == 1 else t.weights.contiguous()
    kv_scales = t.kv_scales.contiguous()
    ks, ke = t.ks.contiguous(), t.ke.contiguous()

    bqh = c["BLOCK_Q"] * H
    q2 = q.view(S * H, D)
    q_layout = gl.NVMMASharedLayout.get_default_for([bqh, D], gl.float8e4nv)
    kv_layout = gl.NVMMASharedLayout.get_default_for([c["BLOCK_KV"], D], gl.float8e4nv)
    q_desc = TensorDescriptor(q2, list(q2.shape), list(q2.stride()), [bqh, D], q_layout)
    kv_desc = TensorDescriptor(kv, list(kv.shape), list(kv.stride()), [c["BLOCK_KV"], D], kv_layout)

    items = -(-S // (2 * c["BLOCK_Q"]))
    units = cfg.schedule.get("units") or torch.cuda.get_device_properties(t.q.device).multi_processor_count
    grid = (max(1, min(items, units)),)
    args = [q_desc, kv_desc, kv_scales, weights, ks, ke, out, S, N, weights.stride(0), out.stride(0), items]
    return LaunchArgs(grid, args, dict(c), dict(cfg.options))


def launch_gluon_ws_sm90(t, cfg, out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch mqa_logits_gluon_ws_sm90 on CUDA tensors; returns the [S, N] logits view."""
    if t.q.device.type != "cuda":
        raise UserError("the Gluon ws sm90 kernel needs CUDA tensors on a Hopper GPU (no interpreter path)")
    out = alloc_logits(t.S, t.N, t.q.device) if out is None else out
    a = gluon_ws_args(t, cfg, out)
    kernel = getattr(importlib.import_module(f"mqa_kernels.{cfg.module}"), cfg.kernel)
    kernel[a.grid](*a.args, **a.constexprs, **a.options)
    return out
