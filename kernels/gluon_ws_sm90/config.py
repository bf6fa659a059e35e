"""Config of the warp-specialised Gluon Hopper prefill kernel (no triton import: dispatch stays import-light)."""
from __future__ import annotations

from ..config import KernelConfig, cdiv
from . import KEYS


# Registers per thread: 12 warps (two math warpgroups + a warpgroup holding the 1-warp producer and
# the 1-warp -inf filler) share the 64K register file: maxnreg 168 at entry = 504 per warpgroup-thread,
# split by setmaxnreg into 240 (math 1) + 24 (producer/filler) + the rest, 240, for math 0 (the default
# partition). 232/40 spilled in the math loop (acc 128 + weights 64 registers per thread at N = 256).
MATH_REGS = 240
SMALL_REGS = 24
MAXNREG = 168
DEFAULT_UNITS = 132  # H200 / H100 SXM SM count, when the caller does not say


def _load():
    from .kernel import mqa_logits_gluon_ws_sm90

    return mqa_logits_gluon_ws_sm90


def gluon_ws_sm90_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False,
                         bf16: bool = False, units: int | None = None) -> KernelConfig:
    """Two math warpgroups, each wgmma M = 64 kv rows x N = BLOCK_Q*heads (256 at H 64); TMA producer warp.

    H200 (2026-11-30, full op µs, this kernel / h64d128_sm90): 1x4096 causal 148 / 161, H 32 100 / 93,
    1x8192 causal 548 / 588, 4x8192 ratio 4 670 / 755, S 4096 N 65536 full 4251 / 4561, 1x32768 causal
    8774 / 9420 (scripts/gpu_gluon_ws_check.py; all checks exact). Measured on fp32 full logits.
    PINGPONG off: forcing the two math warpgroups to alternate their wgmma issue (turn mbarriers) measured
    2-4 % slower on every anchor shape on the H200 (2026-11-30); the tensor pipe interleaves them well enough.
    Shared memory: 2 warpgroups x 2 q slots x 32 KiB + STAGES x 8 KiB kv = 160 KiB at STAGES 4 and N 256: one
    program per SM, persistent over work items of 2*BLOCK_Q query rows.
    """
    if heads * dim == 0 or 128 % heads or dim != 128:
        raise ValueError(f"gluon ws sm90 kernel needs heads dividing 128 and dim 128, got heads={heads}, dim={dim}")
    # N = 256 for H = 64; N = 128 below (H = 32 at N = 256 spills: 8 query rows of per-row state).
    block_q = 256 // heads if heads >= 64 else 128 // heads
    block_kv = 64
    stages = 4
    items = cdiv(S, 2 * block_q)
    programs = max(1, min(items, units or DEFAULT_UNITS))
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "STAGES": stages,
                  "CLEAN": bool(clean), "COMPRESSED": bool(compressed), "BF16": bool(bf16), "PINGPONG": False,
                  "MATH_REGS": MATH_REGS, "SMALL_REGS": SMALL_REGS}
    options = {"num_warps": 4, "maxnreg": MAXNREG}
    # "args": the kernel's trailing runtime scalars, in order (the launcher appends them).
    schedule = {"args": {"n_items": items}, "items": items, "rows_per_item": 2 * block_q, "programs_per_sm": 1,
                "units": units}
    return KernelConfig("gluon_ws_sm90", "mqa_logits_gluon_ws_sm90", KEYS, constexprs, options, (programs,),
                        schedule, launcher="tma", load=_load)
