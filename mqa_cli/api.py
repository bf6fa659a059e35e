"""The library API: DeepGEMM-compatible entry points that dispatch through the same table as the CLI."""
from __future__ import annotations

from functools import lru_cache

import torch

from . import dispatch, launch, targets
from .tensors import Prefill, validate


def shape_of(t: Prefill, clean_logits: bool) -> dispatch.Shape:
    return dispatch.Shape("prefill", t.S, t.N, t.heads, t.dim, clean_logits, t.fp8)


def target_for(device: torch.device) -> targets.Target:
    return targets.TARGETS["cpu"] if device.type == "cpu" else targets.detect()


@lru_cache(maxsize=256)
def _cached_plan(shape: dispatch.Shape, target_name: str, kernel: str | None):
    # The plan (and so the config) is chosen once per shape and target, never tuned per call.
    target = targets.TARGETS["cpu"] if target_name == "cpu" else targets.detect()
    return dispatch.plan(shape, target, kernel=kernel)


def fp8_mqa_logits(q, kv, kv_scales=None, weights=None, ks=None, ke=None, clean_logits: bool = True,
                   kernel: str | None = None) -> torch.Tensor:
    """logits[i, j] = sum_h weights[i, h] * relu(q[i, h] . kv[j]) * kv_scales[j] for ks[i] <= j < ke[i].

    `kv` may be a (kv, kv_scales) pair, DeepGEMM's form: fp8_mqa_logits(q, (kv, sf), weights, ks, ke).
    Returns an [S, N] fp32 view of a row-padded buffer; dead entries are -inf when clean_logits.
    """
    if isinstance(kv, (tuple, list)):
        if ke is not None:
            raise TypeError("with kv=(kv, kv_scales) pass weights, ks, ke as the next three arguments")
        kv, kv_scales, weights, ks, ke = kv[0], kv[1], kv_scales, weights, ks
    t = Prefill(q, kv, kv_scales, weights, ks, ke)
    validate(t)
    p = _cached_plan(shape_of(t, clean_logits), target_for(q.device).name, kernel)
    return launch.launch(t, p.config)


# ------------------------------------------------------------------------------------------ paged decode

def get_paged_mqa_logits_metadata(context_lens, block_size: int = 64, num_sms: int | None = None):
    """DeepGEMM-compatible helper. This library's paged kernel needs no schedule (its grid depends only on
    batch and max_context_len), so this returns an empty int32 tensor: no work, no sync, capturable."""
    return torch.empty(0, 2, dtype=torch.int32, device=context_lens.device)


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta=None,
                         max_context_len: int | None = None, clean_logits: bool = True,
                         kernel: str | None = None) -> torch.Tensor:
    """DeepGEMM's fp8_paged_mqa_logits: [B*next_n, max_context_len] fp32 logits (a view of a row-padded buffer).

    q [B, next_n, H, D] fp8; kv_cache [num_blocks, block_size, 1, D + 4] uint8 (block_size*D fp8 bytes, then
    block_size fp32 scales per block); weights [B*next_n, H] fp32; context_lens [B] int32 (row (b, t) sees
    k < context_lens[b] - next_n + t + 1) or [B, next_n] (k < context_lens[b, t]); block_table [B, max_blocks]
    int32. schedule_meta is accepted and ignored. Pass max_context_len: without it the host reads context_lens
    (a sync). Values are validated except during CUDA-graph capture, where only dtypes and shapes are checked.
    """
    from .paged import Paged, shape_of, validate, validate_meta

    if max_context_len is None:
        max_context_len = int(context_lens.max())
    t = Paged(q, kv_cache, weights, context_lens, block_table, int(max_context_len))
    capturing = q.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    (validate_meta if capturing else validate)(t)
    p = _cached_plan(shape_of(t, clean_logits), target_for(q.device).name, kernel)
    return launch.launch(t, p.config)
