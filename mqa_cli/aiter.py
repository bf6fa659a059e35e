"""aiter's MQA-logits entries, for engines on ROCm: `from mqa_cli import aiter` where they call aiter's ops.

aiter (AMD's kernel library) names its prefill op as DeepGEMM does but takes kv and its scales as separate tensors:
`fp8_mqa_logits(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits=True)` (vLLM 0.33 on ROCm passes
clean_logits=False). The same kernels as mqa_cli.fp8_mqa_logits run it; the output is the full [S, N] form.

Decode: `deepgemm_fp8_paged_mqa_logits(q, kv_cache, weights, out_logits, context_lens, block_tables, max_model_len,
ChunkK=256, Preshuffle=..., KVBlockSize=block_size, WavePerEU=2)` (vLLM's DeepSeek V3.2 / V4.1 path on gfx942 and
gfx950) writes into the caller's buffer. The paged decode kernel of mqa_cli.fp8_paged_mqa_logits runs it, reading
aiter's pre-shuffled cache in place when Preshuffle is set.
"""
from __future__ import annotations

import torch

from .api import logits as api
from .errors import UserError
from .launch import families as launchers
from .problem.paged_tensors import Paged, check_paged, validate_paged_values
from .problem.tensors import FP8_NAMES


def fp8_mqa_logits(Q: torch.Tensor, KV: torch.Tensor, kv_scales: torch.Tensor, weights: torch.Tensor,
                   cu_starts: torch.Tensor, cu_ends: torch.Tensor, clean_logits: bool = True, *,
                   check_values: bool = False) -> torch.Tensor:
    """logits [S, N] of q fp8 [S, H, D] against kv fp8 [N, D] with fp32 kv_scales [N] (or [N, 1]), fp32 weights
    [S, H] and int32 windows [cu_starts, cu_ends) per row: -inf outside the window when clean_logits (aiter's
    default), else unwritten there. A view of a row-padded buffer, as mqa_cli.fp8_mqa_logits returns."""
    if not isinstance(clean_logits, bool):
        raise UserError(f"clean_logits must be a bool, got {type(clean_logits).__name__} {clean_logits!r}")
    return api.mqa_logits(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits=clean_logits,
                          check_values=check_values)


def _int(name: str, value, lo: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < lo:
        raise UserError(f"{name} must be an int >= {lo}, got {value!r}")
    return value


def _cache_bytes(kv_cache: torch.Tensor, dim: int) -> torch.Tensor:
    """aiter's cache [num_blocks, block_size, 1, D + 4 (+ pad)] (fp8 or uint8) as the uint8 [num_blocks, block_size,
    1, D + 4] view the paged kernel reads: per block, block_size*D fp8 bytes, then block_size fp32 scales, then
    aiter's optional padding (kv_cache_cast_to_fp8(padding=True)), which the block stride steps over. A view: no
    copy, no data read."""
    if not isinstance(kv_cache, torch.Tensor) or kv_cache.dim() != 4 or kv_cache.shape[2] != 1:
        raise UserError(f"kv_cache must be [num_blocks, block_size, 1, D + 4] (aiter's layout), got "
                        f"{list(getattr(kv_cache, 'shape', []))}")
    if kv_cache.dtype != torch.uint8 and kv_cache.dtype not in FP8_NAMES:
        raise UserError(f"kv_cache must be fp8 or uint8 bytes, got {kv_cache.dtype}")
    nb, bs, _, index_dim = kv_cache.shape
    if index_dim < dim + 4:
        raise UserError(f"kv_cache's last dimension must hold D + 4 = {dim + 4} bytes per token (D fp8 + a fp32 "
                        f"scale), got {index_dim}")
    raw = kv_cache.view(torch.uint8)
    if raw.stride(3) != 1 or raw.stride(1) != index_dim:
        raise UserError(f"kv_cache blocks must be contiguous inside (strides [*, {index_dim}, *, 1]), got "
                        f"{list(raw.stride())}")
    if index_dim == dim + 4:
        return raw
    return raw.as_strided((nb, bs, 1, dim + 4), (raw.stride(0), dim + 4, dim + 4, 1))


def _check_out(out_logits, rows: int, max_model_len: int, device) -> torch.Tensor:
    """The caller's [B * next_n, >= max_model_len] fp32 buffer (any row stride, columns contiguous) as the
    [B * next_n, max_model_len] view the kernel writes."""
    if not isinstance(out_logits, torch.Tensor) or out_logits.dtype != torch.float32 or out_logits.dim() != 2:
        raise UserError(f"out_logits must be a float32 [B * next_n, max_model_len] tensor, got "
                        f"{getattr(out_logits, 'dtype', type(out_logits).__name__)} "
                        f"{list(getattr(out_logits, 'shape', []))}")
    if out_logits.shape[0] != rows or out_logits.shape[1] < max_model_len:
        raise UserError(f"out_logits must be [{rows}, >= {max_model_len}] (B * next_n rows, max_model_len "
                        f"columns), got {list(out_logits.shape)}")
    if out_logits.stride(1) != 1 and max_model_len > 1:
        raise UserError(f"out_logits must be contiguous along columns, got strides {list(out_logits.stride())}")
    if out_logits.device != device:
        raise UserError(f"out_logits must be on q's device {device}, got {out_logits.device}")
    return out_logits[:, :max_model_len]


def deepgemm_fp8_paged_mqa_logits(q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                                  out_logits: torch.Tensor, context_lens: torch.Tensor, kv_indices: torch.Tensor,
                                  max_model_len: int, Preshuffle: bool = False, KVBlockSize: int = 1,
                                  ChunkK: int = 256, TotalCuCount: int | None = None, WavePerEU: int = 2,
                                  VarCtxSchedule=None, *, check_values: bool = False) -> torch.Tensor:
    """aiter's paged decode logits, written into the caller's out_logits [B * next_n, max_model_len] fp32 buffer
    (returned): row (b, t) sees cache tokens k < context_lens[b] - next_n + t + 1; every column from that row's
    end up to max_model_len is written -inf (aiter writes -inf only up to the last chunk it touches and leaves the
    rest to the caller's prefill; the values the caller reads are the same). Columns past max_model_len are untouched.

    q_fp8 fp8 [B, next_n, H, D]; kv_cache [num_blocks, KVBlockSize, 1, D + 4] fp8 (or uint8) bytes in aiter's
    (and DeepGEMM's) block layout: block_size*D fp8 bytes, then block_size fp32 scales, then optional padding
    (aiter's padded cast), which the block stride skips; weights fp32 [B * next_n, H]; context_lens int32 [B] (or
    [B, next_n]: row (b, t) sees k < context_lens[b, t]); kv_indices, aiter's block table, int32 [B, max_blocks].

    The keywords, what they mean to aiter and here:
    - Preshuffle: aiter's pre-shuffled cache: each block's [block_size, D] fp8 rows permuted by aiter's
      shuffle_weight (layout (16, 16)): 16-token groups, and inside a group the 16-byte pieces of D piece-major,
      so token s, dim d sits at byte (s // 16) * 16 * D + (d // 16) * 256 + (s % 16) * 16 + d % 16 (scales
      not shuffled). Here too: the paged decode kernel reads that layout in place (its KV_SHUFFLED variant), no
      copy; block_size must be a multiple of 16 (aiter's rule).
    - KVBlockSize: aiter's cache block size, which must equal kv_cache.shape[1] (aiter asserts it); here the same
      check. Block sizes 1, 16, 32, 64, 128 and 256 run.
    - ChunkK: tokens per step of aiter's kernel (ChunkK % KVBlockSize == 0 or the reverse, as aiter asserts);
      here checked the same way and not used: the tile is the plan's (`mqa-logits explain` names it).
    - WavePerEU: aiter's occupancy hint (waves per SIMD) and a factor of its kv split; here checked (>= 1) and not
      used: the split is the persistent, length-balanced one of fp8_paged_mqa_logits, over set_num_sms's units.
    - TotalCuCount: aiter's CU count for its split; here checked and not used (set_num_sms sets the units).
    - VarCtxSchedule: aiter's schedule tensor for varied context lengths; accepted and not read (the split
      here is balanced by length already).

    Hot path as mqa_cli.fp8_paged_mqa_logits: no tensor data read, no sync, one launch, no copy (a padded or
    pre-shuffled cache is read through its strides and layout); the plan (`mqa-logits explain --paged
    --cache-layout shuffled --cache-block-stride ...` names it) is made once per shape. Value checks
    (contexts against the table, no NaN or inf in q, the weights or the cache tokens read) run with
    check_values=True or MQA_LOGITS_CHECK=1.
    """
    if not isinstance(Preshuffle, bool):
        raise UserError(f"Preshuffle must be a bool, got {Preshuffle!r}")
    if not isinstance(max_model_len, int) or isinstance(max_model_len, bool):
        raise UserError(f"max_model_len must be an int (reading it from context_lens would sync), got "
                        f"{type(max_model_len).__name__}")
    block = _int("KVBlockSize", KVBlockSize)
    chunk = _int("ChunkK", ChunkK)
    _int("WavePerEU", WavePerEU)
    if TotalCuCount is not None:
        _int("TotalCuCount", TotalCuCount)
    if VarCtxSchedule is not None and not isinstance(VarCtxSchedule, torch.Tensor):
        raise UserError(f"VarCtxSchedule must be a tensor or None, got {type(VarCtxSchedule).__name__}")
    if not isinstance(q_fp8, torch.Tensor) or q_fp8.dim() != 4:
        raise UserError(f"q_fp8 must be [B, next_n, H, D], got {list(getattr(q_fp8, 'shape', []))}")
    B, T, _, D = q_fp8.shape
    cache = _cache_bytes(kv_cache, D)
    if cache.shape[1] != block:
        raise UserError(f"KVBlockSize {block} must equal kv_cache's block size {cache.shape[1]} (aiter's rule)")
    if chunk % block and block % chunk:
        raise UserError(f"ChunkK {chunk} and KVBlockSize {block}: one must divide the other (aiter's rule)")
    if Preshuffle and (block % 16 or D % 16):
        raise UserError(f"Preshuffle needs KVBlockSize and D multiples of 16 (aiter's shuffled layout), got "
                        f"KVBlockSize {block}, D {D}")
    t = Paged(q_fp8, cache, weights, context_lens, kv_indices, max_model_len)
    check_paged(t)
    out = _check_out(out_logits, B * T, max_model_len, q_fp8.device)
    if api._checking(check_values):
        validate_paged_values(t, shuffled=Preshuffle)
    cfg = api.paged_plan(q_fp8, cache, max_model_len, clean=True, bf16=False, schedule_meta=None,
                         cache_layout="shuffled" if Preshuffle else "plain")
    launchers.launch_config(t, cfg, out)
    return out_logits


__all__ = ["fp8_mqa_logits", "deepgemm_fp8_paged_mqa_logits"]
