"""Config of the specialised long-row prefill kernel (no triton import)."""
from __future__ import annotations

from ...common.config import KernelConfig, cdiv
from . import KEYS


# BLOCK_Q at H 64 (x heads = the MMA's N, 256), BLOCK_KV and the launch options: from the H200 sweeps in
# docs/PERFORMANCE.md. Only the sm90 row (h64d128_sm90) dispatches this kernel.
BLOCK_Q_H64, BLOCK_KV = 4, 64
OPTIONS = {"num_warps": 4, "num_stages": 3}


def _load():
    from .kernel import mqa_logits_h64d128

    return mqa_logits_h64d128


def h64d128_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False,
                   bf16: bool = False) -> KernelConfig:
    """BLOCK_Q x heads = the MMA's N (256), interior tiles unmasked, ordered blocks.

    Block order: last-first for causal-like rows; when queries outnumber kv rows twice or more (DeepSeek V4's
    compressed ratio-4 indexer: short rows, mostly -inf), zigzag with one-tile -inf stores (the sweep that chose
    it: docs/EXPERIMENTS.md).
    """
    block_q, block_kv = max(1, BLOCK_Q_H64 * 64 // heads), BLOCK_KV  # keep BLOCK_Q x heads at 256 (H = 32: 8 rows)
    short_rows = S >= 2 * N
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean),
                  "COMPRESSED": bool(compressed), "BF16": bool(bf16), "EVEN_S": S % block_q == 0,
                  "ORDER": 2 if short_rows else 1, "DEAD_MULT": 1 if short_rows else 4}
    q_blocks = cdiv(S, block_q)
    return KernelConfig("h64d128", "mqa_logits_h64d128", KEYS, constexprs, dict(OPTIONS), (q_blocks,),
                        {"args": {}, "q_blocks": q_blocks}, launcher="pointer", load=_load)
