"""How commands call a problem's kernel: through the public API (as users call it) or the planned kernel alone.

Both return zero-argument callables over tensors made once, so timing, verification and capture see the
same call. `through_api` is what `bench` times by default; `kernel_only` launches the planned config
(any dispatch row, forced ones too) into a preallocated output, without the API's checks.
"""
from __future__ import annotations

import torch

from ..api import logits as api
from ..launch import families as launchers
from ..problem.paged_tensors import Paged


def logits_dtype(shape) -> torch.dtype:
    return torch.bfloat16 if shape.bf16 else torch.float32


def through_api(t, shape, max_seqlen_k: int = 0):
    """A call of the public entry point on tensors `t`, with the shape's output options."""
    dtype = logits_dtype(shape)
    clean = shape.clean_logits
    if isinstance(t, Paged):
        return lambda: api.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, None,
                                                int(t.max_context_len), clean, dtype)
    return lambda: api.mqa_logits(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, clean_logits=clean,
                                  max_seqlen_k=max_seqlen_k, logits_dtype=dtype)


def kernel_only(t, cfg, max_seqlen_k: int = 0, out: torch.Tensor | None = None):
    """A launch of the planned config into one preallocated output (returned by every call)."""
    out = launchers.output_for(t, cfg, max_seqlen_k) if out is None else out
    if isinstance(t, Paged):
        return lambda: launchers.run(t, cfg, out)
    return lambda: launchers.run(t, cfg, out, max_seqlen_k=max_seqlen_k)
