"""Reference paged logits in float32 (or float64), gathering kv through the block table."""
from __future__ import annotations

import torch

from ..problem.paged_tensors import Paged, unpack_blocks



def reference_paged(t: Paged, dtype=None, clean_logits: bool = True, chunk_tokens: int = 8192):
    """[B*next_n, max_context_len] logits in float32 (or float64), gathering kv through the block table;
    chunked over kv tokens so one sequence of any length fits. Dead entries: -inf (clean) or 0."""
    dtype = dtype or torch.float32
    B, T, H, D = t.q.shape
    bs = t.block_size
    N = int(t.max_context_len)
    fill = float("-inf") if clean_logits else 0.0
    out = torch.full((B * T, N), fill, dtype=dtype, device=t.q.device)
    ends = t.row_ends()
    for b in range(B):
        e = ends[b]
        hi = int(e.max())
        if hi == 0:
            continue
        q = t.q[b].to(dtype)  # [T, H, D]
        w = t.weights[b * T:(b + 1) * T].to(dtype)  # [T, H]
        step = max(bs, chunk_tokens // bs * bs)
        for k0 in range(0, hi, step):
            k1 = min(hi, k0 + step)
            blocks = t.block_table[b, k0 // bs: -(-k1 // bs)].long()
            kv, sf = unpack_blocks(t.kv_cache, blocks, t.q.dtype)
            kv = kv[: k1 - k0].to(dtype)
            sf = sf[: k1 - k0].to(dtype)
            scores = torch.einsum("thd,nd->thn", q, kv).clamp_min_(0)
            logits = torch.einsum("thn,th->tn", scores, w) * sf[None, :]
            k = torch.arange(k0, k1, device=out.device)
            live = k[None, :] < e[:, None]
            out[b * T:(b + 1) * T, k0:k1] = torch.where(live, logits, torch.tensor(fill, dtype=dtype, device=out.device))
    return out


