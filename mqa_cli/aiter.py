"""aiter's MQA-logits entry, for engines on ROCm: `from mqa_cli import aiter` where they call aiter's op.

aiter (AMD's kernel library) names its prefill op as DeepGEMM does but takes kv and its scales as separate tensors:
`fp8_mqa_logits(Q, KV, kv_scales, weights, cu_starts, cu_ends, clean_logits=True)` (vLLM 0.33 on ROCm passes
clean_logits=False). The same kernels as mqa_cli.fp8_mqa_logits run it; the output is the full [S, N] form.
"""
from __future__ import annotations

import torch

from .api import logits as api
from .errors import UserError


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


__all__ = ["fp8_mqa_logits"]
