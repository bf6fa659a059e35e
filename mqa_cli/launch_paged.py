"""Launch of the paged decode kernel: argument building (shared with `compile`) and the launch itself.

Nothing here reads tensor data or syncs with the device, so a launch can be captured in a CUDA graph.
"""
from __future__ import annotations

import torch

from .launch import LaunchArgs, alloc_logits, kernel_object, note_interpreter, run_kernel


def paged_args(t, cfg, out) -> LaunchArgs:
    """Arguments of paged_mqa_logits for Paged tensors `t` and an [B*next_n, max_context_len] view `out`."""
    c = cfg.constexprs
    N = int(t.max_context_len)
    n_tiles = -(-N // c["BLOCK_KV"])
    per_split = cfg.schedule["tiles_per_split"]
    grid = (t.batch, -(-n_tiles // per_split))
    kv = t.kv_cache.view(t.q.dtype)  # same bytes, as fp8 (D contiguous within a token)
    sf = t.kv_cache.view(torch.float32)  # same bytes, as fp32 (scales at BS*D/4 in each block)
    ctx = t.context_lens
    two_d = ctx.dim() == 2
    args = [t.q, kv, sf, t.weights, ctx, t.block_table, out,
            N, t.kv_cache.stride(0), t.kv_cache.stride(0) // 4, t.block_table.stride(0),
            ctx.stride(0), ctx.stride(1) if two_d else 0, 0 if two_d else 1, out.stride(0), per_split]
    return LaunchArgs(grid, args, dict(c), dict(cfg.options))


def launch_paged(t, cfg, out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch paged_mqa_logits; returns the [B*next_n, max_context_len] logits view."""
    interpret = t.q.device.type == "cpu"
    if interpret:
        note_interpreter()
    out = alloc_logits(t.S, int(t.max_context_len), t.q.device) if out is None else out
    run_kernel(kernel_object(cfg, interpret), cfg, paged_args(t, cfg, out), interpret)
    return out
