"""Config of the specialised long-row prefill kernel (no triton import)."""
from __future__ import annotations

from ...common.config import KernelConfig, cdiv
from . import KEYS


# Tuned per target: (BLOCK_Q at H 64, BLOCK_KV, options). sm90 from the H200 sweeps in docs/PERFORMANCE.md;
# gfx950 follows aiter's variant (4 query rows folded into the MMA, triple buffering).
TUNED = {
    "sm90": (4, 64, {"num_warps": 4, "num_stages": 3}),
    "sm100": (4, 64, {"num_warps": 4, "num_stages": 3}),
    "gfx950": (4, 64, {"num_warps": 4, "num_stages": 3, "waves_per_eu": 1, "matrix_instr_nonkdim": 16}),
    "gfx942": (4, 64, {"num_warps": 4, "num_stages": 2, "waves_per_eu": 1, "matrix_instr_nonkdim": 16}),
    "cpu": (4, 64, {"num_warps": 4, "num_stages": 1}),
}


def _load():
    from .kernel import mqa_logits_h64d128

    return mqa_logits_h64d128


def h64d128_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False,
                   bf16: bool = False, target: str) -> KernelConfig:
    """BLOCK_Q x heads = the MMA's N (256), interior tiles unmasked, ordered blocks.

    Block order (H200 sweep, docs/PERFORMANCE.md): last-first for causal-like rows; when queries
    outnumber kv rows twice or more (DeepSeek V4's compressed ratio-4 indexer: short rows, mostly -inf),
    zigzag with one-tile -inf stores measured 768 µs against 877 for last-first (4x8192 ratio 4).
    """
    block_q, block_kv, options = TUNED.get(target, TUNED["sm90"])
    block_q = max(1, block_q * 64 // heads)  # keep BLOCK_Q x heads at 256 (H = 32: 8 rows)
    short_rows = S >= 2 * N
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean),
                  "COMPRESSED": bool(compressed), "BF16": bool(bf16), "EVEN_S": S % block_q == 0,
                  "ORDER": 2 if short_rows else 1, "DEAD_MULT": 1 if short_rows else 4}
    q_blocks = cdiv(S, block_q)
    return KernelConfig("h64d128", "mqa_logits_h64d128", KEYS, constexprs, dict(options), (q_blocks,),
                        {"args": {}, "q_blocks": q_blocks}, launcher="pointer", load=_load)
