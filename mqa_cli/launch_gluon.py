"""Launchers of the Gluon Hopper (sm90) prefill kernels: TMA descriptors are built here.

Both kernels take the same descriptors (q viewed [S*H, D] in blocks of BLOCK_Q*H rows, kv [N, D] in
blocks of BLOCK_KV rows) and the same pointer arguments; they differ in grid and one trailing count.
"""
from __future__ import annotations

import torch

from .errors import UserError
from .launch import LaunchArgs, _launch_with


def gluon_inputs(t, cfg, out) -> list:
    """[q_desc, kv_desc, kv_scales, weights, ks, ke, out, S, N, stride_w_s, stride_out_s] for a Gluon kernel."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    c = cfg.constexprs
    S, N, H, D = t.S, t.N, t.heads, t.dim
    if H != c["H"] or D != c["D"]:
        raise UserError(f"config built for H={c['H']}, D={c['D']} but tensors have H={H}, D={D}")
    if t.q.dtype != torch.float8_e4m3fn:
        raise UserError(f"the Gluon sm90 kernels need float8_e4m3fn inputs, got {t.q.dtype}")
    if out.stride(1) != 1:
        raise UserError("out must be contiguous along N")
    if out.stride(0) < -(-N // c["BLOCK_KV"]) * c["BLOCK_KV"]:
        raise UserError(f"logits row stride {out.stride(0)} must be padded to a multiple of {c['BLOCK_KV']}")
    # TMA needs 16-byte aligned bases and strides.
    q = t.q if (t.q.stride(2) == 1 and t.q.stride(1) == D and t.q.stride(0) == H * D) else t.q.contiguous()
    kv = t.kv if (t.kv.stride(1) == 1 and (t.kv.stride(0) * t.kv.element_size()) % 16 == 0) else t.kv.contiguous()
    q = q.clone() if q.data_ptr() % 16 else q
    kv = kv.clone() if kv.data_ptr() % 16 else kv
    weights = t.weights if t.weights.stride(1) == 1 else t.weights.contiguous()

    bqh = c["BLOCK_Q"] * H
    q2 = q.view(S * H, D)
    q_layout = gl.NVMMASharedLayout.get_default_for([bqh, D], gl.float8e4nv)
    kv_layout = gl.NVMMASharedLayout.get_default_for([c["BLOCK_KV"], D], gl.float8e4nv)
    q_desc = TensorDescriptor(q2, list(q2.shape), list(q2.stride()), [bqh, D], q_layout)
    kv_desc = TensorDescriptor(kv, list(kv.shape), list(kv.stride()), [c["BLOCK_KV"], D], kv_layout)
    return [q_desc, kv_desc, t.kv_scales.contiguous(), weights, t.ks.contiguous(), t.ke.contiguous(), out,
            S, N, weights.stride(0), out.stride(0)]


def gluon_sm90_args(t, cfg, out) -> LaunchArgs:
    """mqa_logits_gluon_sm90: one program per query block."""
    grid = (-(-t.S // cfg.constexprs["BLOCK_Q"]),)
    return LaunchArgs(grid, gluon_inputs(t, cfg, out), dict(cfg.constexprs), dict(cfg.options))


def gluon_launcher(args_fn):
    """A launcher for a Gluon family: CUDA tensors only (Gluon has no interpreter path)."""
    launch_family = _launch_with(args_fn)

    def launch_gluon(t, cfg, out: torch.Tensor | None = None) -> torch.Tensor:
        if t.q.device.type != "cuda":
            raise UserError(f"{cfg.kernel} needs CUDA tensors on a Hopper GPU (Gluon has no interpreter path)")
        return launch_family(t, cfg, out)

    return launch_gluon


launch_gluon_sm90 = gluon_launcher(gluon_sm90_args)
