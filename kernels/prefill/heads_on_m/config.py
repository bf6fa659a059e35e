"""Config of the AMD heads-on-M prefill kernel (no triton import).

One workgroup of BLOCK_Q waves serves BLOCK_Q query rows; wave r owns row r's H heads as the MMA's N (H = 64: two
32-column MFMA tiles), the kv tile is M, shared by the block's waves through LDS. 2 waves per SIMD (waves_per_eu 2:
at most 256 VGPR + AGPR per lane), 32 x 32 MFMA (matrix_instr_nonkdim 32), one stage: a two-stage pipeline peels the
loop's last trip, and the weights the peeled trip reads go to scratch (the other wave on the SIMD covers the loads).

gfx950 runs one-wave workgroups (BLOCK_Q 1): sharing a kv tile between 4 waves takes one workgroup barrier a tile
for its LDS ring; one wave needs none. gfx942 keeps 4 rows a workgroup (its one-wave loop is VALU-bound).
docs/CODEGEN.md has the figures.
"""
from __future__ import annotations

from ...common.config import KernelConfig, cdiv
from . import KEYS

# (BLOCK_KV, options) per AMD target; gfx942 has half gfx950's fp8 MFMA rate and the same register file.
TUNED = {
    "gfx950": (64, {"num_warps": 1, "num_stages": 1, "waves_per_eu": 2, "matrix_instr_nonkdim": 32, "llvm_fn_attrs": "amdgpu-agpr-alloc=0"}),
    "gfx942": (64, {"num_warps": 4, "num_stages": 1, "waves_per_eu": 2, "matrix_instr_nonkdim": 32, "llvm_fn_attrs": "amdgpu-agpr-alloc=0"}),
}


def _load():
    from .kernel import mqa_logits_heads_on_m

    return mqa_logits_heads_on_m


def heads_on_m_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False,
                      bf16: bool = False, row_target: str, target: str) -> KernelConfig:
    """The config of the row for `row_target` (gfx950 or gfx942) compiled for `target`: BLOCK_Q = num_warps query
    rows (one per wave, BLOCK_Q x H = the MMA's N of the workgroup), the same block shape wherever it runs (the
    interpreter checks what the AMD target compiles); block order as the h64d128 kernel's (last-first for
    causal-like rows, zigzag when queries outnumber kv rows twice or more)."""
    block_kv, options = TUNED[row_target]
    block_q = options["num_warps"]
    if target not in TUNED:  # another backend (the interpreter): the row's block shape, its default options
        options = {"num_warps": block_q, "num_stages": 1}
    short_rows = S >= 2 * N
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean),
                  "COMPRESSED": bool(compressed), "BF16": bool(bf16), "EVEN_S": S % block_q == 0,
                  "ORDER": 2 if short_rows else 1, "DEAD_MULT": 1 if short_rows else 4}
    q_blocks = cdiv(S, block_q)
    return KernelConfig("heads_on_m", "mqa_logits_heads_on_m", KEYS, constexprs, dict(options), (q_blocks,),
                        {"args": {}, "q_blocks": q_blocks}, launcher="pointer", load=_load)
