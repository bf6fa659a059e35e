"""Schedule metadata of the paged decode kernel, computed on the device (no host sync: capturable).

Entry p of the [num_sms + 1, 2] int32 result is where program p's range starts, as (sequence index,
block index within that sequence) in units of `block_kv` tokens; entry num_sms is the end (batch, 0).
The cache blocks of all sequences (a sequence counts its largest row end) are split evenly: program p
starts at the floor(p * total / num_sms)-th block, so ranges differ by at most one block.

One Triton launch computes it (mqa_kernels.decode.paged_schedule): a decode step's kernel runs for 4-30 µs, and
the same split in torch ops cost ~32 µs of GPU time. `_metadata_torch` is the reference it must match bit
for bit. Tensors on the CPU without the interpreter (or on a GPU with it) take the torch path.

Schedules the decode call accepts (fp8_paged_mqa_logits' schedule_meta, block size 64; other block sizes
ignore it and split themselves), each giving the logits of schedule_meta=None bit for bit, since both decode
kernels read entry p as the start of program p's range in (sequence, block) order, entry 0 as (0, 0) and entry
P as (batch, 0) whatever they hold, every other entry clamped into range, and compute each logit whole in one
program (any sequence of entries then covers every token; a range that ends before it starts does nothing):
- this function's, for any program count P (the launch runs schedule_meta.shape[0] - 1 ranges: a row slice of a
  bigger buffer, as vLLM passes, is fine): balanced to within one block per program; what the kernels are tuned
  for. With no schedule the kernels compute the same split themselves, in the same launch.
- DeepGEMM's sm90 format (entry p = (q atom, 256-token split), atoms of 2 draft rows at next_n >= 2, the last
  entry (batch x atoms, 0)), from DeepGEMM's metadata function or SGLang's own kernel: read as this library
  reads it, a (sequence, 64-token block) pair, so it is balanced as that reading makes it: right, but the split
  is uneven (at next_n 4 the entries past the batch are empty ranges and the last program takes the rest).
- one computed from other context lengths (ctx.clamp(min=1), a stale step, another SM count, another batch):
  right, balanced for the lengths it was computed from; a schedule of a smaller batch leaves the last program
  the sequences past it.
- garbage: right, at worst slow (one program may take the whole batch).
check_values=True (or MQA_LOGITS_CHECK=1) refuses in one line a schedule that does not fit the call: first
entry not (0, 0), last not (batch, 0) (or DeepGEMM's (batch x atoms, 0)), entries out of (sequence, block)
order or past a sequence's blocks (mqa_cli.problem.paged_tensors.validate_schedule).
"""
from __future__ import annotations

import functools

import torch

from mqa_kernels.decode.paged_schedule.config import paged_schedule_config

from ..errors import UserError
from . import interpreter
from .common import LaunchArgs, run_kernel


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
