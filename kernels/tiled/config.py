"""Config of the portable prefill kernel (no triton import: dispatch and `explain` stay cheap)."""
from __future__ import annotations

from ..config import KernelConfig, backend_options, cdiv, pow2_ceil
from . import KEYS



def _load():
    from .kernel import mqa_logits_tiled

    return mqa_logits_tiled


def tiled_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False, bf16: bool = False,
                 backend: str, units: int | None) -> KernelConfig:
    """BLOCK_Q query rows x heads = the MMA's N (256 when it fits), kv tile = M; the kv axis is split over
    grid axis 1 only when query blocks alone cannot fill the device."""
    block_q = max(1, min(256 // heads, pow2_ceil(S)))
    block_q = max(block_q, pow2_ceil(max(1, 16 // heads)))  # tl.dot needs N >= 16
    block_kv = 64
    options = backend_options(backend, cuda={"num_warps": 4, "num_stages": 3})
    q_blocks = cdiv(S, block_q)
    kv_tiles = cdiv(N, block_kv)
    want = 2 * (units or 1)
    splits = 1 if q_blocks >= want else min(kv_tiles, cdiv(want, q_blocks))
    per_split = cdiv(kv_tiles, max(1, splits))
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean),
                  "COMPRESSED": bool(compressed), "BF16": bool(bf16)}
    grid = (q_blocks, cdiv(kv_tiles, per_split))
    return KernelConfig("tiled", "mqa_logits_tiled", KEYS, constexprs, options, grid,
                        {"args": {"tiles_per_split": per_split}, "q_blocks": q_blocks, "kv_splits": grid[1]},
                        launcher="pointer", load=_load)
