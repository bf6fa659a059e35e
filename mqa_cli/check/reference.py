"""Reference logits in float32 (or float64), chunked over query rows so S = N = 32768 fits in memory.

Inputs are upcast exactly (fp8 -> float), so the only difference from a kernel is the
accumulation order and precision of the dot products.
"""
from __future__ import annotations

import torch

from ..problem.tensors import Prefill, chunk_rows, live_mask


def reference_logits(t: Prefill, dtype=torch.float32, clean_logits: bool = True,
                     budget_bytes: int = 512 << 20) -> torch.Tensor:
    """[S, N] logits; entries outside each row's window are -inf (clean) or 0."""
    S, N, H = t.S, t.N, t.heads
    out = torch.empty(S, N, dtype=dtype, device=t.q.device)
    kv = t.kv.to(dtype)
    scales = t.kv_scales.to(dtype)
    ks, ke = t.ks.long(), t.ke.long()
    rows = chunk_rows(S, N, H, budget_bytes)
    fill = float("-inf") if clean_logits else 0.0
    for r0 in range(0, S, rows):
        r1 = min(S, r0 + rows)
        out[r0:r1] = fill
        lo, hi = int(ks[r0:r1].min()), int(ke[r0:r1].max())
        if lo >= hi:
            continue
        q = t.q[r0:r1].to(dtype)  # [r, H, D]
        scores = torch.einsum("rhd,nd->rhn", q, kv[lo:hi]).clamp_min_(0)
        logits = torch.einsum("rhn,rh->rn", scores, t.weights[r0:r1].to(dtype)) * scales[lo:hi]
        live = live_mask(ks[r0:r1], ke[r0:r1], N, slice(lo, hi))
        out[r0:r1, lo:hi] = torch.where(live, logits, torch.tensor(fill, dtype=dtype, device=out.device))
    return out


def compress_logits(full: torch.Tensor, ks: torch.Tensor, ke: torch.Tensor, max_seqlen_k: int) -> torch.Tensor:
    """[S, max_seqlen_k] compressed form of full logits: column c of row i is full[i, ks[i] + c] for
    c < ke[i] - ks[i], -inf past that."""
    S, N = full.shape
    c = torch.arange(max_seqlen_k, device=full.device)
    col = ks.long()[:, None] + c[None, :]
    live = c[None, :] < (ke.long() - ks.long())[:, None]
    vals = full.gather(1, col.clamp(0, max(0, N - 1)))
    return torch.where(live, vals, torch.tensor(float("-inf"), dtype=full.dtype, device=full.device))
