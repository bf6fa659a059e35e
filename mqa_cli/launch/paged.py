"""Arguments of the paged decode kernel (mqa_kernels.decode.paged), shared with `compile`. Whether the kernel reads a
schedule is the plan's decision (SELF_SCHEDULE, mqa_cli.plan.build); the arguments follow it. Nothing here reads
tensor data or syncs, so a launch can be captured in a CUDA graph."""
from __future__ import annotations

import torch

from .common import LaunchArgs

_NO_META: dict = {}  # device -> a placeholder int32 tensor for the unused metadata pointer


def schedule_source(cfg, t, schedule_meta: torch.Tensor | None) -> tuple[torch.Tensor, int]:
    """(the metadata pointer, the ranges of the grid) as the config says: a SELF_SCHEDULE config splits the work
    itself over cfg.schedule["programs"] ranges (a placeholder pointer); one that reads the schedule runs its
    entries - 1 ranges, in blocks of t.block_size tokens."""
    if cfg.constexprs.get("SELF_SCHEDULE"):
        meta = _NO_META.get(t.q.device)
        if meta is None:
            meta = _NO_META[t.q.device] = torch.zeros(2, 2, dtype=torch.int32, device=t.q.device)
        return meta, cfg.schedule["programs"]
    if schedule_meta is None:
        raise ValueError(f"{cfg.name} reads schedule_meta (the plan decided so) but none was passed")
    return schedule_meta, schedule_meta.shape[0] - 1


def paged_args(t, cfg, out: torch.Tensor, schedule_meta: torch.Tensor | None) -> LaunchArgs:
    """Arguments of paged_mqa_logits for paged tensors `t` and an [B*next_n, max_context_len] view `out`.
    The grid is ranges x SUBS (schedule_source)."""
    c = cfg.constexprs
    self_schedule = bool(c.get("SELF_SCHEDULE"))
    schedule_meta, ranges = schedule_source(cfg, t, schedule_meta)
    grid = (ranges * c["SUBS"],)
    kv = t.kv_cache.view(t.q.dtype)  # same bytes as fp8 (same element size, any strides)
    ctx = t.context_lens
    two_d = ctx.dim() == 2
    q = t.q
    args = [q, kv, t.weights, ctx, t.block_table, schedule_meta, out, t.batch, int(t.max_context_len),
            q.stride(0), q.stride(1), q.stride(2), t.kv_cache.stride(0), t.weights.stride(0),
            ctx.stride(0), ctx.stride(1) if two_d else 0, 0 if two_d else 1, t.block_table.stride(0), out.stride(0),
            t.kv_cache.shape[0], t.block_table.shape[1]]
    tail = tuple(args[7:])  # sizes and strides: fixed by the signature
    if self_schedule:
        placeholder = schedule_meta

        def rebuild(ins, out):  # the raw uint8 cache goes in: the launcher reads its address, same as the fp8 view
            return (ins[0], ins[1], ins[2], ins[3], ins[4], placeholder, out, *tail)
    else:
        def rebuild(ins, out):
            return (ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], out, *tail)
    return LaunchArgs(grid, args, dict(c), dict(cfg.options), rebuild)
