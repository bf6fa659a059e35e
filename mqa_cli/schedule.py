"""Schedule metadata of the paged decode kernel, computed on the device (no host sync: capturable).

Entry p of the [num_sms + 1, 2] int32 result is where program p's range starts, as (sequence index,
block index within that sequence) in units of `block_kv` tokens; entry num_sms is the end (batch, 0).
The cache blocks of all sequences (a sequence counts its largest row end) are split evenly: program p
starts at the floor(p * total / num_sms)-th block, so ranges differ by at most one block.

One Triton launch computes it (mqa_kernels.paged_schedule): a decode step's kernel runs for 4-30 µs, and
the same split in torch ops cost ~32 µs of GPU time. `_metadata_torch` is the reference it must match bit
for bit. Tensors on the CPU without the interpreter (or on a GPU with it) take the torch path.
"""
from __future__ import annotations

import functools

import torch

from mqa_kernels.paged_schedule.config import paged_schedule_config

from . import interpreter
from .errors import UserError
from .launch import LaunchArgs, run_kernel


def _checked(context_lens, block_kv, num_sms, indices) -> tuple[int, int]:
    if indices is not None:
        raise UserError("indices (varlen paged decode) needs a GPU with sm100 kernels; pass indices=None")
    if not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.int32 or context_lens.dim() not in (1, 2):
        raise UserError("context_lens must be an int32 tensor shaped [batch] or [batch, next_n]")
    block_kv, num_sms = int(block_kv), int(num_sms)
    if block_kv < 1 or num_sms < 1:
        raise UserError(f"block_kv and num_sms must be >= 1, got {block_kv} and {num_sms}")
    return block_kv, num_sms


@functools.lru_cache(maxsize=256)
def _config(batch: int, programs: int, backend: str):
    return paged_schedule_config(batch=batch, programs=programs, backend=backend)


def get_paged_mqa_logits_metadata(context_lens: torch.Tensor, block_kv: int, num_sms: int,
                                  indices: torch.Tensor | None = None) -> torch.Tensor:
    """int32 [num_sms + 1, 2]: a length-balanced split of (sequence, kv block) work over num_sms programs.
    block_kv must be the cache's block size (the kernel reads block indices in those units)."""
    block_kv, num_sms = _checked(context_lens, block_kv, num_sms, indices)
    ctx = context_lens
    interpret = interpreter.active()
    if (ctx.device.type == "cpu") != interpret:
        return _metadata_torch(ctx, block_kv, num_sms)
    backend = "interpreter" if interpret else ("hip" if torch.version.hip else "cuda")
    cfg = _config(ctx.shape[0], num_sms, backend)
    out = torch.empty(num_sms + 1, 2, dtype=torch.int32, device=ctx.device)
    two_d = ctx.dim() == 2
    args = [ctx, out, ctx.shape[0], ctx.shape[1] if two_d else 1, ctx.stride(0), ctx.stride(1) if two_d else 0,
            block_kv, num_sms]
    run_kernel(cfg.jitted(), cfg, LaunchArgs(tuple(cfg.grid), args, dict(cfg.constexprs), dict(cfg.options)), interpret)
    return out


def _metadata_torch(context_lens: torch.Tensor, block_kv: int, num_sms: int,
                    indices: torch.Tensor | None = None) -> torch.Tensor:
    """The same split in torch ops (~15 small kernels): the reference the kernel matches bit for bit."""
    block_kv, num_sms = _checked(context_lens, block_kv, num_sms, indices)
    ctx = context_lens
    if ctx.dim() == 2:
        ctx = ctx.amax(dim=1) if ctx.shape[1] > 0 else ctx.new_zeros(ctx.shape[0])
    units = (ctx.to(torch.int64).clamp_min(0) + (block_kv - 1)) // block_kv  # [B]
    cum = torch.cumsum(units, 0)  # inclusive prefix sums
    total = units.sum()
    p = torch.arange(num_sms + 1, device=ctx.device, dtype=torch.int64)
    starts = p * total // num_sms  # [P + 1]; starts[P] = total
    seq = torch.searchsorted(cum, starts, right=True)  # first sequence whose blocks pass the start
    B = units.shape[0]
    seq_c = seq.clamp_max(max(B - 1, 0))
    if B > 0:
        before = cum[seq_c] - units[seq_c]
        blk = torch.where(seq < B, starts - before, torch.zeros_like(starts))
    else:
        blk = torch.zeros_like(starts)
    return torch.stack([seq, blk], dim=1).to(torch.int32)
