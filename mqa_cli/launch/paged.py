"""Launch of the paged decode kernel (mqa_kernels.decode.paged): the config that runs (with or without schedule
metadata), argument building (shared with `compile`) and the launch itself. Nothing here reads tensor data or
syncs, so a launch can be captured in a CUDA graph."""
from __future__ import annotations

import torch

from mqa_kernels.decode.paged.config import with_schedule_source

from . import interpreter
from .common import LaunchArgs, kernel_for, run_kernel

_TWINS: dict = {}  # (config name, self_schedule) -> the twin that takes its split from there
_NO_META: dict = {}  # device -> a placeholder int32 tensor for the unused metadata pointer


def no_meta(device) -> torch.Tensor:
    """The placeholder passed for the metadata pointer a SELF_SCHEDULE kernel never reads (one per device)."""
    meta = _NO_META.get(device)
    if meta is None:
        meta = _NO_META[device] = torch.zeros(2, 2, dtype=torch.int32, device=device)
    return meta


def paged_args(t, cfg, out: torch.Tensor, schedule_meta: torch.Tensor | None) -> LaunchArgs:
    """Arguments of paged_mqa_logits for paged tensors `t` and an [B*next_n, max_context_len] view `out`.
    The grid is (ranges in schedule_meta) x SUBS; schedule_meta's blocks are t.block_size tokens. Without
    schedule_meta (a SELF_SCHEDULE config) the ranges are cfg.schedule["programs"] and the kernel splits itself."""
    c = cfg.constexprs
    self_schedule = schedule_meta is None
    if self_schedule:
        if not c.get("SELF_SCHEDULE"):
            raise ValueError("a config that reads schedule metadata needs it; use with_schedule_source(cfg, True)")
        schedule_meta = no_meta(t.q.device)
        ranges = cfg.schedule["programs"]
    else:
        ranges = schedule_meta.shape[0] - 1
    grid = (ranges * c["SUBS"],)
    kv = t.kv_cache.view(t.q.dtype)  # same bytes as fp8 (same element size, any strides)
    ctx = t.context_lens
    two_d = ctx.dim() == 2
    q = t.q
    args = [q, kv, t.weights, ctx, t.block_table, schedule_meta, out,
            t.batch, int(t.max_context_len),
            q.stride(0), q.stride(1), q.stride(2),
            t.kv_cache.stride(0),
            t.weights.stride(0),
            ctx.stride(0), ctx.stride(1) if two_d else 0, 0 if two_d else 1,
            t.block_table.stride(0),
            out.stride(0),
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


def config_for(cfg, schedule_meta: torch.Tensor | None):
    """The config that runs: without schedule_meta its SELF_SCHEDULE twin, which computes its split in the kernel
    (any paged family whose kernel has the SELF_SCHEDULE constexpr: the portable and the Gluon one)."""
    self_schedule = schedule_meta is None
    if cfg.constexprs.get("SELF_SCHEDULE") == self_schedule:
        return cfg
    key = (cfg.name, self_schedule)
    twin = _TWINS.get(key)
    if twin is None:
        twin = _TWINS[key] = with_schedule_source(cfg, self_schedule)
    return twin


def launch_paged(t, cfg, out: torch.Tensor, schedule_meta: torch.Tensor | None = None) -> torch.Tensor:
    """Run the paged kernel into `out` (caller-allocated [B*next_n, max_context_len] fp32/bf16 view). Without
    schedule_meta each of the cfg.schedule["programs"] ranges computes its own split of the work in the kernel
    (the same split get_paged_mqa_logits_metadata returns): one launch instead of two."""
    cfg = config_for(cfg, schedule_meta)
    run_kernel(kernel_for(cfg, t.q.device), cfg, paged_args(t, cfg, out, schedule_meta), interpreter.active())
    return out
