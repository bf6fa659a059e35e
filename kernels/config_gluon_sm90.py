"""Config of the Gluon Hopper prefill kernel (no triton import: dispatch stays import-light)."""
from __future__ import annotations

from .configs import KernelConfig

GLUON_SM90_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "STAGES", "CLEAN")


def gluon_sm90_config(*, heads: int, dim: int, S: int, N: int, clean: bool, units: int | None) -> KernelConfig:
    """One warpgroup per program: kv tile of 64 rows = the wgmma's M, BLOCK_Q query rows x heads = N = 128.

    N = 128 (not 256) so that two fp32 accumulators (64 registers each) fit beside the epilogue:
    the MMA of one tile runs under the epilogue of the previous one. 3 kv stages of 8 KiB plus
    the 16 KiB q block = 40 KiB of shared memory, about 200 registers: two programs per SM.
    STAGES 3 measured 1-6 % faster than 4 and 6 on the H200 (2026-11-30); 2 was slower.
    """
    if heads * dim == 0 or 128 % heads or dim % 32:
        raise ValueError(f"gluon sm90 kernel needs heads dividing 128 and dim a multiple of 32, "
                         f"got heads={heads}, dim={dim}")
    block_q = 128 // heads
    block_kv = 64
    stages = 3
    q_blocks = -(-S // block_q)
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "STAGES": stages,
                  "CLEAN": bool(clean)}
    options = {"num_warps": 4}
    # Grid: one program per query block, heaviest (last) blocks first; no kv split.
    schedule = {"grid": q_blocks, "q_blocks": q_blocks, "programs_per_sm": 2, "units": units}
    return KernelConfig("mqa_logits_gluon_sm90", "prefill_gluon_sm90", GLUON_SM90_KEYS, constexprs, options,
                        schedule)
